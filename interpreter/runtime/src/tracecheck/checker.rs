//! The checker made for a trace: the workflow it ran, the budgets and the
//! policy monitors it is held to.

use super::*;

impl<'a> Checker<'a> {
    /// A checker for a run whose first `run_started` names `started`
    /// (workflow, plan digest).
    pub(super) fn new(program: &'a Program, started: Option<(&str, &str)>, options: &'a Options<'a>) -> Checker<'a> {
        let mut notes = Vec::new();
        let wf = match started {
            Some((name, _)) => program.workflows.get(name),
            None if program.workflows.len() == 1 => program.workflows.values().next(),
            None => None,
        };
        if let (Some((_, recorded)), Some(given)) = (started, options.plan_digest) {
            if recorded != given {
                notes.push(format!(
                    "the run recorded plan {recorded}; the plan given is {given} (other sources, or the same under other paths)"
                ));
            }
        }
        let mut checker = Checker {
            program,
            chain: Default::default(),
            plan: wf.map(|wf| PlanView::new(program, wf)),
            options,
            deviations: Vec::new(),
            notes,
            run_id: None,
            run: RunPhase::NotStarted,
            after_end_reported: false,
            any_node_started: false,
            next_seq: 1,
            malformed: HashSet::default(),
            nodes: HashMap::default(),
            attempts: HashMap::default(),
            entries: HashMap::default(),
            gates: HashMap::default(),
            escalations: HashMap::default(),
            pending_decisions: HashMap::default(),
            budgets: HashMap::default(),
            delegated: HashSet::default(),
            validators: HashMap::default(),
            policies: Vec::new(),
            payloads_unchecked: 0,
            computed_unchecked: 0,
            records_unchecked: 0,
            owed_records: None,
            runtime: Default::default(),
            terminated: None,
            started_digest: started.map(|(_, d)| d.to_string()),
            count: 0,
            last: None,
            previous: None,
            workflow_started: None,
            causes: HashMap::default(),
            last_policy_stop: None,
            hops: HashMap::default(),
            boards: HashMap::default(),
            appendable: HashMap::default(),
            pending_rerun: None,
            gate_outcomes: HashMap::default(),
            task_states: HashMap::default(),
            run_input: None,
            refused_handoff: None,
        };
        checker.init_budgets();
        checker.init_policies(wf);
        checker
    }

    pub(super) fn push(&mut self, d: Deviation) {
        self.deviations.push(d);
    }

    pub(super) fn init_budgets(&mut self) {
        let Some(plan) = &self.plan else { return };
        let program = self.program;
        let wf = plan.wf;
        if let Some(budget) = wf.budget(program) {
            self.budgets.insert("run".into(), ScopeAcc::new(Limits::of(&budget)));
        }
        for (name, decl) in &program.decls {
            if decl.kind == Kind::Agent {
                if let Some(budget) = decl.budget(program) {
                    self.budgets.insert(format!("agent.{name}"), ScopeAcc::new(Limits::of(&budget)));
                }
            }
        }
        for node in wf.nodes.values() {
            if let Some(budget) = node.budget(program) {
                self.budgets.insert(format!("node.{}", node.name), ScopeAcc::new(Limits::of(&budget)));
            }
        }
    }

    pub(super) fn init_policies(&mut self, wf: Option<&'a Workflow>) {
        let top = self.program.policies.iter().map(|p| (p, "program".to_string()));
        let own = wf.into_iter().flat_map(|w| w.policies.iter().map(move |p| (p, w.name.clone())));
        for (policy, scope) in top.chain(own) {
            let response = policy.response().as_str().to_string();
            let monitor = match Automaton::new(&policy.formula) {
                Ok(a) => Some(Monitor::new(a)),
                Err(e) => {
                    self.notes.push(format!("policy `{}` was not checked: {e}", policy.name));
                    None
                }
            };
            self.policies.push(PolicyRt { name: policy.name.clone(), scope, response, monitor });
        }
    }
}
