//! Crossing a boundary: its gate, then its handoffs (payload type,
//! acceptance, context slice) and delegations (contract inputs, budget).

use super::*;
use flow_check::ir::Transfer;

impl Engine {
    /// Why `output` does not satisfy `contract`, if it does not.
    pub(super) fn contract_violation(&mut self, contract: &str, output: &Value) -> Option<String> {
        let decl = self.decl(contract)?.clone();
        if let Some(ty) = decl.output_type() {
            match self.validator("contract.output", contract, ty) {
                Ok(v) => {
                    if let Err(errors) = v.validate(output) {
                        return Some(format!("output does not match: {}", errors.join("; ")));
                    }
                }
                Err(e) => return Some(e),
            }
        }
        self.acceptance_failure(&decl.accept(), "output", output)
    }

    /// Why `value`, bound as `name` beside the run's outputs, fails one of
    /// the acceptance `checks` (false or erroring), if it does.
    fn acceptance_failure(&self, checks: &[&TExpr], name: &str, value: &Value) -> Option<String> {
        if checks.is_empty() {
            return None;
        }
        let mut env = self.env.clone();
        env.insert(name.into(), value.clone());
        for e in checks {
            match eval::eval_bool(e, &env) {
                Ok(true) => {}
                Ok(false) => return Some(format!("acceptance check failed: {}", eval::render(e))),
                Err(err) => return Some(format!("acceptance check errored: {}", err.message)),
            }
        }
        None
    }

    /// Crosses the boundary `from -> to`: its gate, its handoff, then `to`.
    pub(super) fn cross(&mut self, from: &str, to: &str, via: Via, cause: &Str) {
        let gate = self.index.gate_on(self.wf(), from, to).cloned();
        if let Some(gate) = gate {
            self.then(Effect::EvaluateGate { gate: Box::new(gate), cause: cause.clone() });
            return;
        }
        self.enter(from, to, via, cause);
    }

    /// Takes the edge and starts `to`, applying handoffs and delegations.
    pub(super) fn enter(&mut self, from: &str, to: &str, via: Via, cause: &Str) {
        if !self.running() || !self.hop_allowed(from, to, cause) {
            return;
        }
        let edge = self.emit("control", events::edge_taken(from, to, via), Some(cause));
        let input = self.env.get(from).cloned().unwrap_or(Value::Null);
        if let Crossing::Enter(input, parent) = self.transfer(from, to, input, edge) {
            // A listed branch's edge into its join is an arrival, not a start.
            if self.index.join_of(from) == Some(to) {
                self.then(Effect::JoinArrival { join: to.to_string(), from: from.to_string(), cause: parent });
                return;
            }
            self.then(Effect::StartNode { name: to.to_string(), input, trigger: TriggerReason::First, cause: parent });
        }
    }

    /// Counts a crossing between `from` and `to` against the pair's hop
    /// limit (`PlanIndex::hop_limit`). Past it, the crossing is not taken:
    /// the pair's count starts again and the workflow's `max_hops` handler
    /// acts in the context of `from` (approving an escalation lets the run
    /// go on from `from`), else the run ends with `max_hops`.
    fn hop_allowed(&mut self, from: &str, to: &str, cause: &Str) -> bool {
        let Some(limit) = self.index.hop_limit(from, to) else { return true };
        let pair = if from <= to { (from.to_string(), to.to_string()) } else { (to.to_string(), from.to_string()) };
        let hops = self.hops.entry(pair).or_default();
        if *hops < limit {
            *hops += 1;
            return true;
        }
        *hops = 0;
        let text = format!("{from} -> {to} not taken: control crossed between `{from}` and `{to}` {limit} times (max_hops {limit})");
        let warned = self.emit("control", events::warning(text), Some(cause));
        self.then(Effect::WorkflowEvent {
            event: HandlerEvent::MaxHops,
            node: Some(from.to_string()),
            cause: warned,
            default_reason: "max_hops".into(),
            message: format!("more than {limit} hops between `{from}` and `{to}`"),
        });
        false
    }

    /// A handoff a policy held, approved: the crossing taken again from the
    /// start, then its target.
    pub(super) fn resume_transfer(&mut self, from: &str, to: &str, input: Value, cause: &Str) {
        if let Crossing::Enter(input, parent) = self.transfer(from, to, input, cause.clone()) {
            self.then(Effect::StartNode { name: to.to_string(), input, trigger: TriggerReason::First, cause: parent });
        }
    }

    /// Applies the handoffs and delegations of `from -> to` to what crosses.
    pub(super) fn transfer(&mut self, from: &str, to: &str, input: Value, edge: Str) -> Crossing {
        let transfers: Vec<Transfer> = self.index.transfers_on(self.wf(), from, to).cloned().collect();
        // What crossed, kept for a handoff a policy holds (only when policies apply).
        let original = (!self.policies.is_empty()).then(|| input.clone());
        let mut crossed = (input, edge);
        for transfer in transfers {
            let step = match transfer.kind() {
                TransferKind::Handoff => self.handoff(&transfer, from, to, crossed, &original),
                TransferKind::Delegate => self.delegate(&transfer, from, to, crossed),
            };
            crossed = match step {
                Ok(next) => next,
                Err(stopped) => return stopped,
            };
        }
        Crossing::Enter(crossed.0, crossed.1)
    }

    /// A handoff: admitted by the policies,
    /// its payload checked (type, acceptance), recorded, and its context
    /// slice kept for the receiver. Gives what crosses on and the event it
    /// hangs on, or how the crossing stopped.
    fn handoff(
        &mut self,
        transfer: &Transfer,
        from: &str,
        to: &str,
        crossed: (Value, Str),
        original: &Option<Value>,
    ) -> Result<(Value, Str), Crossing> {
        let (payload, parent) = crossed;
        // Policies may hold the handoff before it happens; if a human
        // lets it happen, the crossing is taken again from the start.
        let held = || Effect::Transfer {
            from: from.to_string(),
            to: to.to_string(),
            input: Box::new(original.clone().unwrap_or_default()),
            cause: held(),
        };
        if !self.admit(Obs::HandedOff { from, to }, "handoff", &parent, held) {
            return Err(Crossing::Held);
        }
        // `payload` is what `from` produced (the declared payload type); the
        // context slice is what the receiver sees. The plan carries the
        // resolved mode (the default filled in at lowering).
        let fields = transfer.context_fields();
        let slice = match (&payload, transfer.handoff_context()) {
            (Value::Object(map), ContextMode::Filtered) if !fields.is_empty() => {
                Some(Value::Object(map.iter().filter(|(k, _)| fields.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect()))
            }
            _ => None,
        };
        let (handed, refusal) = match self.payload_refusal(transfer, from, to, &payload) {
            Some(why) => ((Value::Null, Vec::new()), Some(why)),
            None => match self.hand_over(transfer, &parent) {
                Ok(handed) => (handed, None),
                Err(why) => ((Value::Null, Vec::new()), Some(why)),
            },
        };
        let payload_ref = self.store(&payload, &format!("handoff {from} -> {to}"), Some(&parent));
        let body = events::handoff(transfer, payload_ref.clone(), refusal.is_none(), handed.1);
        let handoff = self.emit(&format!("node.{from}"), body, Some(&parent));
        if let Some(why) = refusal {
            self.dead_letter(transfer, payload_ref, why, &handoff);
            return Err(Crossing::Refused);
        }
        let message = Body::Message {
            schema_version: V,
            message_type: transfer.message_type(),
            from: from.to_string(),
            to: to.to_string(),
            artifact: Some(payload_ref),
        };
        self.emit("control", message, Some(&handoff));
        // The envelope the control plane stamped, for the receiver: the
        // `message` event (its `seq`; the event holds the run, the time and
        // the payload), the type, sender and receiver. Only what replays
        // the same: a run's id and clock are not in a model's request.
        let envelope = json!({ "seq": self.seq, "msg_type": transfer.message_type().as_str(), "source": from, "target": to });
        self.pending_envelope.insert(to.to_string(), envelope);
        if let Some(slice) = slice {
            self.pending_slice.insert(to.to_string(), slice);
        }
        self.keep_artifacts(to, handed.0);
        Ok((payload, handoff))
    }

    /// A refused handoff's message is dead-lettered: recorded with why, then
    /// the workflow's `dead_letter` handler acts for the sender, else the
    /// sender fails (`handoff_refused`).
    fn dead_letter(&mut self, transfer: &Transfer, payload: ArtifactRef, why: String, handoff: &Str) {
        let dead = self.emit("control", events::dead_letter(transfer, payload, &why), Some(handoff));
        match semantics::handler_on(&self.wf().handlers, HandlerEvent::DeadLetter).cloned() {
            Some(action) => {
                let ctx = Ctx { node: Some(transfer.from.clone()), gate: None, event: HandlerEvent::DeadLetter.into() };
                self.then_act(action, ctx, HandlerScope::Workflow, &dead);
            }
            None => self.node_failed(&transfer.from, ErrorCode::HandoffRefused, why, &dead),
        }
    }

    /// The artifacts a transfer hands over: each expression evaluated (one
    /// that cannot be refuses the transfer) and stored, keyed by how it
    /// is written; and their references, for the transfer's event.
    fn hand_over(&mut self, transfer: &Transfer, parent: &Str) -> Result<(Value, Vec<ArtifactRef>), String> {
        let mut view = serde_json::Map::new();
        let mut refs = Vec::new();
        for e in transfer.artifacts() {
            let written = eval::render(e);
            let value =
                eval::eval(e, &self.env).map_err(|err| format!("artifact `{written}` could not be handed over: {}", err.message))?;
            refs.push(self.store(&value, &format!("artifact {written}"), Some(parent)));
            view.insert(written, value);
        }
        Ok((Value::Object(view), refs))
    }

    /// Keeps what was handed over for the receiver's context.
    fn keep_artifacts(&mut self, to: &str, handed: Value) {
        let Value::Object(handed) = handed else { return };
        if handed.is_empty() {
            return;
        }
        let kept = self.pending_artifacts.entry(to.to_string()).or_insert_with(|| Value::Object(Default::default()));
        if let Value::Object(kept) = kept {
            kept.extend(handed);
        }
    }

    /// Why a handoff refuses `payload`, if it does: not of the declared
    /// payload type, or an acceptance check false or erroring.
    fn payload_refusal(&mut self, transfer: &Transfer, from: &str, to: &str, payload: &Value) -> Option<String> {
        if let Some(ty) = transfer.payload_type() {
            let problem = match self.validator("handoff.payload", &format!("{from} -> {to}"), ty) {
                Ok(v) => v.validate(payload).err().map(|errors| format!("the payload is not a `{ty}`: {}", errors.join("; "))),
                Err(e) => Some(e),
            };
            if problem.is_some() {
                return problem;
            }
        }
        let message = transfer.message_type();
        if let Some(ty) = self.wf().message_schema(message).cloned() {
            let problem = match self.validator("messages", message.as_str(), &ty) {
                Ok(v) => {
                    v.validate(payload).err().map(|errors| format!("the payload is not a `{ty}` (a {message}'s): {}", errors.join("; ")))
                }
                Err(e) => Some(e),
            };
            if problem.is_some() {
                return problem;
            }
        }
        let checks: Vec<&TExpr> = transfer.accept().iter().collect();
        self.acceptance_failure(&checks, "payload", payload)
    }

    /// A delegation: its inputs evaluated and checked against the
    /// contract's `inputs` type (else the delegator fails), the contract's
    /// budget opened, recorded; the delegate then works under the contract.
    fn delegate(&mut self, transfer: &Transfer, from: &str, to: &str, crossed: (Value, Str)) -> Result<(Value, Str), Crossing> {
        let (_, parent) = crossed;
        let mut inputs = serde_json::Map::new();
        if let Some(r) = transfer.inputs() {
            for (k, v) in r {
                let value = match v {
                    IrValue::Expr(e) => eval::eval(e, &self.env).unwrap_or(Value::Null),
                    other => eval::value_to_json(other),
                };
                inputs.insert(k.clone(), value);
            }
        }
        let inputs = Value::Object(inputs);
        let contract = transfer.contract().unwrap_or_default().to_string();
        let contract_name = contract.clone();
        // The inputs are of the contract's `inputs` type, or the
        // delegation is refused: the delegator fails.
        if let Some(ty) = self.decl(&contract).and_then(|c| c.inputs_type()).cloned() {
            let problem = match self.validator("contract.inputs", &contract, &ty) {
                Ok(v) => v.validate(&inputs).err().map(|errors| format!("the inputs are not a `{ty}`: {}", errors.join("; "))),
                Err(e) => Some(e),
            };
            if let Some(problem) = problem {
                let why = format!("delegation {from} -> {to} refused (contract `{contract}`): {problem}");
                self.node_failed(from, ErrorCode::DelegationRefused, why, &parent);
                return Err(Crossing::Refused);
            }
        }
        let program = self.program.clone();
        let budget = program.decls.get(&contract).and_then(|c| c.budget(&program));
        if let Some(budget) = budget {
            self.budgets.add(Scope::from_budget(&format!("delegation.{to}"), &budget));
        }
        let handed = match self.hand_over(transfer, &parent) {
            Ok(handed) => handed,
            Err(why) => {
                let why = format!("delegation {from} -> {to} refused (contract `{contract}`): {why}");
                self.node_failed(from, ErrorCode::DelegationRefused, why, &parent);
                return Err(Crossing::Refused);
            }
        };
        let inputs_ref = self.store(&inputs, &format!("delegation {from} -> {to}"), Some(&parent));
        let body = events::delegation(&program, transfer, inputs_ref, handed.1);
        let delegation = self.emit(&format!("node.{from}"), body, Some(&parent));
        self.keep_artifacts(to, handed.0);
        // The delegation's `context_fields`: the delegate sees only those
        // fields of its inputs (the whole snapshot is still the contract's).
        let fields = transfer.context_fields();
        if let (Value::Object(map), false) = (&inputs, fields.is_empty()) {
            let slice = map.iter().filter(|(k, _)| fields.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
            self.pending_slice.insert(to.to_string(), Value::Object(slice));
        }
        self.pending_contract.insert(to.to_string(), contract_name);
        Ok((inputs, delegation))
    }
}
