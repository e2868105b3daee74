//! Handoffs and delegations: context, payload types, contracts, grants
//! (T03x).

use super::*;

impl<'a> Checker<'a> {
    pub(super) fn note_transfer(&mut self, handoff: bool, from: &str, to: &str) -> bool {
        match self.entries.get_mut(to).and_then(|list| list.last_mut()) {
            Some(entry) => {
                entry.transfers.push((handoff, from.to_string()));
                true
            }
            None => false,
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn handoff(
        &mut self,
        seq: u64,
        from: &str,
        to: &str,
        context: ContextMode,
        fields: &[String],
        payload: &ArtifactRef,
        accepted: bool,
    ) {
        let on_edge = self.note_transfer(true, from, to);
        let Some(plan) = &self.plan else { return };
        let mut found = Vec::new();
        if !on_edge {
            found.push(
                Deviation::new(codes::TRANSFER, Some(seq), format!("handoff {from} -> {to} without an edge into `{to}` being taken"))
                    .expected(format!("edge_taken into {to} before the handoff"))
                    .node(to),
            );
        }
        let Some(t) = plan.index.handoff_on(plan.wf, from, to) else {
            found.push(
                Deviation::new(codes::TRANSFER, Some(seq), format!("the plan declares no handoff {from} -> {to}"))
                    .actual(format!("handoff {from} -> {to}"))
                    .node(to),
            );
            self.deviations.append(&mut found);
            return;
        };
        let want_context = t.context();
        let want_fields = t.context_fields();
        if Some(context) != want_context || fields != want_fields {
            found.push(
                Deviation::new(codes::TRANSFER, Some(seq), format!("handoff {from} -> {to} passed another context slice than declared"))
                    .expected(format!(
                        "context {}, context_fields [{}]",
                        want_context.map_or("?", ContextMode::as_str),
                        want_fields.join(", ")
                    ))
                    .actual(format!("context {context}, context_fields [{}]", fields.join(", ")))
                    .node(to),
            );
        }
        // The payload is what `from` produced.
        if let Some(made) = self.nodes.get(from).and_then(|n| n.output.as_deref()) {
            if made != payload.digest {
                found.push(
                    Deviation::new(
                        codes::PAYLOAD,
                        Some(seq),
                        format!("handoff {from} -> {to} carried something other than `{from}`'s output"),
                    )
                    .expected(made.to_string())
                    .actual(payload.digest.clone())
                    .node(to),
                );
            }
        }
        self.deviations.append(&mut found);
        // A refused handoff may carry a payload of another type: the
        // runtime refuses exactly those, and dead-letters their message.
        self.refused_handoff = (!accepted).then(|| (from.to_string(), to.to_string()));
        let wf = self.plan.as_ref().map(|p| p.wf);
        if accepted {
            if let Some(ty) = t.payload_type() {
                self.typed(seq, &format!("handoff {from} -> {to}"), ty, payload, to);
            }
            let message = t.message_type();
            if let Some(ty) = wf.and_then(|wf| wf.message_schema(message)) {
                self.typed(seq, &format!("{message} {from} -> {to}"), ty, payload, to);
            }
        }
    }

    /// A `dead_letter` follows the refused handoff it puts aside, with the
    /// message type the plan's handoff sends.
    pub(super) fn dead_letter(&mut self, seq: u64, message_type: flow_trace::MessageType, from: &str, to: &str) {
        let refused = self.refused_handoff.take();
        let Some(plan) = &self.plan else { return };
        let problem = if refused.as_ref().is_none_or(|(f, t)| f != from || t != to) {
            Some(format!("dead letter {from} -> {to} without the refused handoff just before it"))
        } else {
            let planned = plan.index.handoff_on(plan.wf, from, to).map(|t| t.message_type());
            (planned != Some(message_type))
                .then(|| format!("dead letter {from} -> {to} is a {message_type}, the handoff sends another type"))
        };
        if let Some(problem) = problem {
            self.push(
                Deviation::new(codes::TRANSFER, Some(seq), problem)
                    .expected("handoff (not accepted), then its dead_letter")
                    .actual(format!("dead_letter {message_type} {from} -> {to}"))
                    .node(from),
            );
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn delegation(
        &mut self,
        seq: u64,
        from: &str,
        to: &str,
        contract: &str,
        inputs: &ArtifactRef,
        granted: &Usage,
        reason: Option<&str>,
    ) {
        let on_edge = self.note_transfer(false, from, to);
        self.delegated.insert(to.to_string());
        let Some(plan) = &self.plan else { return };
        let program = self.program;
        let mut found = Vec::new();
        if !on_edge {
            found.push(
                Deviation::new(codes::TRANSFER, Some(seq), format!("delegation {from} -> {to} without an edge into `{to}` being taken"))
                    .expected(format!("edge_taken into {to} before the delegation"))
                    .node(to),
            );
        }
        let Some(t) = plan.index.delegation_on(plan.wf, from, to) else {
            found.push(
                Deviation::new(codes::TRANSFER, Some(seq), format!("the plan declares no delegation {from} -> {to}"))
                    .actual(format!("delegation {from} -> {to} under {contract}"))
                    .node(to),
            );
            self.deviations.append(&mut found);
            return;
        };
        let want = t.contract().unwrap_or_default();
        found.extend(declared_deviations(seq, t, (from, to), contract, reason));
        let decl = program.decls.get(want);
        let limits = decl.and_then(|c| c.budget(program)).map(|b| Limits::of(&b));
        let expected = limits.as_ref().map(granted_by).unwrap_or_default();
        if !same_usage(&expected, granted) {
            found.push(
                Deviation::new(
                    codes::TRANSFER,
                    Some(seq),
                    format!("delegation {from} -> {to} granted another budget than contract `{want}`'s"),
                )
                .expected(usage_text(&expected))
                .actual(usage_text(granted))
                .node(to),
            );
        }
        self.deviations.append(&mut found);
        // The delegation subtree's budget starts afresh.
        let scope = format!("delegation.{to}");
        self.flush_overruns(&scope, "the delegation ended without a budget_exhausted");
        match limits {
            Some(limits) => {
                self.budgets.insert(scope, ScopeAcc::new(limits));
            }
            None => {
                self.budgets.remove(&scope);
            }
        }
        // The runtime refuses a delegation whose inputs are not of the
        // contract's `inputs` type: one that happened has such inputs.
        if let Some(ty) = decl.and_then(|d| d.inputs_type()) {
            let key = format!("contract {want} inputs");
            self.typed(seq, &key, ty, inputs, to);
        }
    }

    /// Checks an artifact against a type, when the artifacts are at hand.
    pub(super) fn typed(&mut self, seq: u64, key: &str, ty: &flow_check::types::Ty, artifact: &ArtifactRef, node: &str) {
        if let Some(errors) = self.type_problem(seq, key, ty, artifact, node) {
            self.push(
                Deviation::new(codes::PAYLOAD, Some(seq), format!("the payload of {key} is not a `{ty}`"))
                    .expected(format!("a value of type {ty}"))
                    .actual(errors)
                    .node(node),
            );
        }
    }

    /// Why an artifact is not of a type (`None` when it is, or when it
    /// cannot be told: no store, or a type that does not compile). A
    /// missing artifact is reported here.
    pub(super) fn type_problem(
        &mut self,
        seq: u64,
        key: &str,
        ty: &flow_check::types::Ty,
        artifact: &ArtifactRef,
        node: &str,
    ) -> Option<String> {
        let Some(store) = self.options.artifacts else {
            self.payloads_unchecked += 1;
            return None;
        };
        let value = match store.get(artifact) {
            Ok(v) => v,
            Err(e) => {
                self.push(
                    Deviation::new(codes::PAYLOAD, Some(seq), format!("the payload of {key} cannot be read: {e}"))
                        .expected(format!("artifact {} in the run's artifacts/", artifact.digest))
                        .node(node),
                );
                return None;
            }
        };
        let types = &self.program.types;
        let validator = self.validators.entry(key.to_string()).or_insert_with(|| Validator::new(ty, types).ok());
        validator.as_ref()?.validate(&value).err().map(|errors| errors.join("; "))
    }
}

/// How a recorded delegation departs from its declaration: another reason
/// or another contract than declared.
fn declared_deviations(
    seq: u64,
    t: &flow_check::ir::Transfer,
    (from, to): (&str, &str),
    contract: &str,
    reason: Option<&str>,
) -> Vec<Deviation> {
    let mut found = Vec::new();
    if t.reason() != reason {
        found.push(
            Deviation::new(codes::TRANSFER, Some(seq), format!("delegation {from} -> {to} records another reason than declared"))
                .expected(format!("reason {:?}", t.reason()))
                .actual(format!("reason {reason:?}"))
                .node(to),
        );
    }
    let want = t.contract().unwrap_or_default();
    if want != contract {
        found.push(
            Deviation::new(codes::TRANSFER, Some(seq), format!("delegation {from} -> {to} under another contract than declared"))
                .expected(format!("contract {want}"))
                .actual(format!("contract {contract}"))
                .node(to),
        );
    }
    found
}

/// What a contract's limits grant, as amounts (0 for what it does not limit).
fn granted_by(l: &Limits) -> Usage {
    Usage {
        steps: l.steps.unwrap_or(0),
        tokens: l.tokens.unwrap_or(0),
        tool_calls: l.tool_calls.unwrap_or(0),
        cost: l.cost.unwrap_or(0.0),
        duration_ms: l.duration_ms.unwrap_or(0),
    }
}

fn same_usage(a: &Usage, b: &Usage) -> bool {
    a.steps == b.steps
        && a.tokens == b.tokens
        && a.tool_calls == b.tool_calls
        && a.duration_ms == b.duration_ms
        && (a.cost - b.cost).abs() <= 1e-9
}
