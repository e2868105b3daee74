//! Lifecycles: the run, nodes and attempts (T01x), and what an attempt may
//! do (tools it is permitted).

use super::*;

impl<'a> Checker<'a> {
    pub(super) fn run_lifecycle(&mut self, e: &Event) {
        let seq = e.seq;
        let kind = e.kind();
        match self.run {
            RunPhase::NotStarted => {
                if let Body::RunStarted { workflow, .. } = &e.body {
                    self.run = RunPhase::Running;
                    if !self.program.workflows.contains_key(workflow) {
                        let known: Vec<&str> = self.program.workflows.keys().map(String::as_str).collect();
                        self.push(
                            Deviation::new(codes::RUN_LIFECYCLE, Some(seq), format!("the run's workflow `{workflow}` is not in the plan"))
                                .expected(format!("one of: {}", known.join(", ")))
                                .actual(workflow.clone()),
                        );
                    }
                } else {
                    self.run = RunPhase::Running;
                    self.push(
                        Deviation::new(codes::RUN_LIFECYCLE, Some(seq), "the trace does not begin with run_started")
                            .expected("run_started")
                            .actual(kind),
                    );
                }
            }
            RunPhase::Terminated => {
                if !self.after_end_reported {
                    self.after_end_reported = true;
                    self.push(
                        Deviation::new(codes::RUN_LIFECYCLE, Some(seq), "an event after run_terminated")
                            .expected("nothing after run_terminated")
                            .actual(kind),
                    );
                }
            }
            RunPhase::Paused => {
                if matches!(e.body, Body::RunResumed { .. }) {
                    self.run = RunPhase::Running;
                } else {
                    self.push(
                        Deviation::new(codes::RUN_LIFECYCLE, Some(seq), "an event after run_paused before run_resumed")
                            .expected("run_resumed")
                            .actual(kind),
                    );
                    self.run = RunPhase::Running;
                }
                return;
            }
            RunPhase::Running => {
                if matches!(e.body, Body::RunStarted { .. }) {
                    self.push(
                        Deviation::new(codes::RUN_LIFECYCLE, Some(seq), "a second run_started")
                            .expected("run_resumed for a new execution")
                            .actual("run_started"),
                    );
                }
            }
        }
        match e.body {
            Body::RunPaused { .. } if self.run == RunPhase::Running => self.run = RunPhase::Paused,
            Body::RunTerminated { .. } => self.run = RunPhase::Terminated,
            _ => {}
        }
    }

    pub(super) fn node_started(&mut self, seq: u64, node: &str, kind: NodeKind, visit: u32) {
        let first = !self.any_node_started;
        self.any_node_started = true;
        let Some(plan) = &self.plan else { return };
        let Some(planned) = plan.node(node) else {
            let wf = plan.wf.name.clone();
            self.push(Deviation::new(codes::NODE_LIFECYCLE, Some(seq), format!("node `{node}` is not in workflow `{wf}`")).node(node));
            return;
        };
        let is_start = plan.start == Some(node);
        let mut found = Vec::new();
        if planned.kind() != kind {
            found.push(
                Deviation::new(codes::NODE_LIFECYCLE, Some(seq), format!("node `{node}` started as a `{kind}` node"))
                    .expected(format!("node_kind {}", planned.kind()))
                    .actual(format!("node_kind {kind}"))
                    .node(node),
            );
        }
        let rt = slot(&mut self.nodes, node);
        if rt.phase == Phase::Running {
            found.push(
                Deviation::new(codes::NODE_LIFECYCLE, Some(seq), format!("node `{node}` started again while visit {} runs", rt.visits))
                    .expected(format!("node_completed or node_failed of {node} first"))
                    .actual("node_started")
                    .node(node),
            );
        }
        if visit != rt.visits + 1 {
            found.push(
                Deviation::new(
                    codes::NODE_LIFECYCLE,
                    Some(seq),
                    format!("node `{node}` started visit {visit} after {} visit(s)", rt.visits),
                )
                .expected(format!("visit {}", rt.visits + 1))
                .actual(format!("visit {visit}"))
                .node(node),
            );
        }
        rt.visits = visit.max(rt.visits + 1);
        rt.phase = Phase::Running;
        rt.attempt_no = 0;
        rt.computed = None;
        // A node budget covers one visit.
        let scope = format!("node.{node}");
        if self.budgets.contains_key(&scope) {
            self.flush_overruns(&scope, "the node's visit ended without a budget_exhausted");
            if let Some(acc) = self.budgets.get_mut(&scope) {
                *acc = ScopeAcc::new(acc.limits.clone());
            }
        }
        self.deviations.append(&mut found);
        // Order: an edge into it, unless it is the start node at the start.
        let entry = self.entries.get_mut(node).and_then(|list| (!list.is_empty()).then(|| list.remove(0)));
        match entry {
            Some(entry) => self.transfers_present(seq, node, &entry),
            None if first && is_start => {}
            None => {
                let d = Deviation::new(codes::NODE_ORDER, Some(seq), format!("node `{node}` started without an edge into it"))
                    .expected(format!("edge_taken into {node} before node_started"))
                    .actual(format!("node_started {node}"))
                    .node(node);
                self.push(d);
            }
        }
    }

    pub(super) fn node_completed(&mut self, seq: u64, node: &str, status: NodeStatus, output: Option<&ArtifactRef>) {
        if status == NodeStatus::Completed {
            self.compute_completed(seq, node, output);
        }
        let rt = slot(&mut self.nodes, node);
        let ok = match rt.phase {
            Phase::Running => true,
            // A handler's continue/skip/degrade after a failure.
            Phase::Failed => status != NodeStatus::Completed,
            Phase::Idle | Phase::Completed => false,
        };
        let phase = rt.phase;
        if ok {
            rt.phase = Phase::Completed;
            rt.completed_once = true;
            rt.output = output.map(|a| a.digest.clone());
        }
        if !ok {
            let why = match phase {
                Phase::Idle => format!("node `{node}` completed without a start"),
                Phase::Completed => format!("node `{node}` completed twice in one visit"),
                _ => format!("node `{node}` completed as `{status}` after it failed"),
            };
            self.push(
                Deviation::new(codes::NODE_LIFECYCLE, Some(seq), why)
                    .expected(format!("node_started {node} before node_completed"))
                    .actual(format!("node_completed {node} ({status})"))
                    .node(node),
            );
        }
    }

    pub(super) fn node_failed(&mut self, seq: u64, node: &str, error_code: flow_trace::ErrorCode) {
        let rt = slot(&mut self.nodes, node);
        match rt.phase {
            // A guard or a state transition can fail a node that completed.
            Phase::Running | Phase::Completed => rt.phase = Phase::Failed,
            Phase::Idle | Phase::Failed => {
                let why = if rt.phase == Phase::Idle {
                    format!("node `{node}` failed without a start")
                } else {
                    format!("node `{node}` failed twice")
                };
                self.push(
                    Deviation::new(codes::NODE_LIFECYCLE, Some(seq), why)
                        .expected(format!("node_started {node} before node_failed"))
                        .actual(format!("node_failed {node} ({error_code})"))
                        .node(node)
                        .reason(error_code.as_str()),
                );
            }
        }
    }

    pub(super) fn attempt_started(&mut self, seq: u64, node: &str, attempt: &str, attempt_no: u32) {
        let rt = slot(&mut self.nodes, node);
        let mut found = Vec::new();
        if rt.phase != Phase::Running {
            found.push(
                Deviation::new(codes::ATTEMPT_LIFECYCLE, Some(seq), format!("attempt `{attempt}` of node `{node}`, which is not running"))
                    .expected(format!("node_started {node} before its attempts"))
                    .node(node)
                    .attempt(attempt),
            );
        }
        if attempt_no != rt.attempt_no + 1 {
            found.push(
                Deviation::new(
                    codes::ATTEMPT_LIFECYCLE,
                    Some(seq),
                    format!("attempt {attempt_no} of node `{node}` after {} attempt(s)", rt.attempt_no),
                )
                .expected(format!("attempt_no {}", rt.attempt_no + 1))
                .actual(format!("attempt_no {attempt_no}"))
                .node(node)
                .attempt(attempt),
            );
        }
        rt.attempt_no = attempt_no.max(rt.attempt_no + 1);
        if self.attempts.get(attempt).is_some_and(|a| a.open) {
            found.push(
                Deviation::new(codes::ATTEMPT_LIFECYCLE, Some(seq), format!("attempt `{attempt}` started twice"))
                    .node(node)
                    .attempt(attempt),
            );
        }
        self.attempts.insert(attempt.to_string(), AttemptRt { node: node.to_string(), open: true, calls: 0, reservations: Vec::new() });
        self.deviations.append(&mut found);
        // One step per attempt, against every scope that covers it.
        let agent = self.plan.as_ref().and_then(|p| p.agent_of(node));
        let mut scopes: Vec<String> = vec!["run".into()];
        if let Some(a) = agent {
            scopes.push(format!("agent.{a}"));
        }
        scopes.push(format!("node.{node}"));
        if self.delegated.contains(node) {
            scopes.push(format!("delegation.{node}"));
        }
        let mut found = Vec::new();
        for s in scopes {
            let Some(acc) = self.budgets.get_mut(s.as_str()) else { continue };
            acc.used.steps += 1;
            // A step that does not fit is refused before the attempt starts.
            if let Some(max) = acc.limits.steps.filter(|&m| acc.used.steps > m) {
                if !acc.reported[0] {
                    acc.reported[0] = true;
                    found.push(
                        Deviation::new(
                            codes::BUDGET_EXCEEDED,
                            Some(seq),
                            format!("budget scope `{s}` took step {} over its limit of {max}", acc.used.steps),
                        )
                        .expected(format!("steps <= {max}, else budget_exhausted instead of the attempt"))
                        .actual(format!("steps = {}", acc.used.steps))
                        .node(node)
                        .attempt(attempt),
                    );
                }
            }
        }
        self.deviations.append(&mut found);
    }

    pub(super) fn attempt_ended(&mut self, seq: u64, node: &str, attempt: &str, failure: Option<flow_trace::ErrorCode>) {
        let what = if failure.is_some() { "failed" } else { "completed" };
        match self.attempts.get_mut(attempt) {
            Some(a) if a.open => {
                a.open = false;
                let owner = std::mem::take(&mut a.node);
                let held = std::mem::take(&mut a.reservations);
                let unsettled = held.len();
                self.release(&held);
                if owner != node {
                    self.push(
                        Deviation::new(
                            codes::ATTEMPT_LIFECYCLE,
                            Some(seq),
                            format!("attempt `{attempt}` of node `{owner}` {what} as node `{node}`'s"),
                        )
                        .node(node)
                        .attempt(attempt),
                    );
                }
                let excused = failure.is_some_and(|code| code.stops_the_run());
                if unsettled > 0 && !excused {
                    self.push(
                        Deviation::new(
                            codes::BUDGET_ACCOUNTING,
                            Some(seq),
                            format!("attempt `{attempt}` {what} with {unsettled} reservation(s) never settled"),
                        )
                        .expected("budget_settled for every budget_reserved of the attempt")
                        .actual(format!("attempt_{what}"))
                        .node(node)
                        .attempt(attempt),
                    );
                }
            }
            Some(_) => self.push(
                Deviation::new(codes::ATTEMPT_LIFECYCLE, Some(seq), format!("attempt `{attempt}` {what} after it had ended"))
                    .node(node)
                    .attempt(attempt),
            ),
            None => self.push(
                Deviation::new(codes::ATTEMPT_LIFECYCLE, Some(seq), format!("attempt `{attempt}` {what} without a start"))
                    .expected(format!("attempt_started {attempt}"))
                    .node(node)
                    .attempt(attempt),
            ),
        }
    }

    pub(super) fn in_attempt(&mut self, seq: u64, attempt: &str, what: &str) {
        if !self.attempts.get(attempt).is_some_and(|a| a.open) {
            self.push(
                Deviation::new(codes::ATTEMPT_LIFECYCLE, Some(seq), format!("{what} in attempt `{attempt}`, which is not running"))
                    .expected(format!("attempt_started {attempt} before, and no attempt end in between"))
                    .attempt(attempt),
            );
        }
    }

    pub(super) fn tool_permitted(&mut self, seq: u64, tool: &str, node: &str, attempt: &str, agent: Option<&str>) {
        let Some(plan) = &self.plan else { return };
        let program = self.program;
        let problem = match agent {
            Some(agent) => {
                let allowed_by_agent = program.decls.get(agent).map(|d| d.holds_tool(tool)).unwrap_or(false);
                let allowed_by_tool = program.decls.get(tool).map(|d| d.allows_agent(agent)).unwrap_or(false);
                match (allowed_by_agent, allowed_by_tool) {
                    (true, true) => None,
                    (false, _) => Some((format!("agent `{agent}` called `{tool}`, which is not among its tools"), "a tool_call_refused")),
                    (_, false) => {
                        Some((format!("agent `{agent}` called `{tool}`, whose allowed_agents exclude it"), "a tool_call_refused"))
                    }
                }
            }
            None => match plan.node(node) {
                Some(n) if n.kind() == NodeKind::Tool && n.target.first().is_some_and(|t| t == tool) => None,
                Some(n) if n.kind() == NodeKind::Tool => Some((format!("tool node `{node}` called `{tool}`"), "its own tool")),
                _ => Some((format!("`{tool}` was called in node `{node}` with no calling agent"), "calls by the node's agent")),
            },
        };
        if let Some((message, expected)) = problem {
            self.push(
                Deviation::new(codes::TOOL_NOT_PERMITTED, Some(seq), message)
                    .expected(expected)
                    .actual(format!("tool_call_started {tool}"))
                    .node(node)
                    .attempt(attempt),
            );
        }
    }

    /// The executor was lost: the attempt ends, its calls and reservations with it.
    pub(super) fn lease_expired(&mut self, seq: u64, attempt_id: &str) {
        // The executor was lost: the attempt ends, its calls and
        // reservations with it.
        if let Some(a) = self.attempts.get_mut(attempt_id) {
            a.open = false;
            a.calls = 0;
            let held = std::mem::take(&mut a.reservations);
            self.release(&held);
        } else {
            self.push(
                Deviation::new(
                    codes::ATTEMPT_LIFECYCLE,
                    Some(seq),
                    format!("the lease of attempt `{attempt_id}` expired, but it never started"),
                )
                .attempt(attempt_id),
            );
        }
    }

    /// A turn is in an open attempt, of the agent its node runs.
    pub(super) fn agent_turn(&mut self, seq: u64, agent: &str, node: &str, attempt_id: &str) {
        self.in_attempt(seq, attempt_id, "an agent turn");
        if let Some(plan) = &self.plan {
            if let Some(expected) = plan.agent_of(node) {
                if expected != agent {
                    self.push(
                        Deviation::new(
                            codes::ATTEMPT_LIFECYCLE,
                            Some(seq),
                            format!("a turn of agent `{agent}` in node `{node}`, which runs `{expected}`"),
                        )
                        .expected(format!("agent {expected}"))
                        .actual(format!("agent {agent}"))
                        .node(node)
                        .attempt(attempt_id),
                    );
                }
            }
        }
    }

    /// A call completes only while one is in flight.
    pub(super) fn tool_call_completed(&mut self, seq: u64, tool: &str, attempt_id: &str) {
        let outstanding = self.attempts.get_mut(attempt_id).filter(|a| a.calls > 0);
        match outstanding {
            Some(a) => a.calls -= 1,
            None => self.push(
                Deviation::new(codes::ATTEMPT_LIFECYCLE, Some(seq), format!("tool `{tool}` completed without a call in flight"))
                    .expected("tool_call_started before tool_call_completed")
                    .attempt(attempt_id),
            ),
        }
    }
}
