//! Edges: node order against the plan's graph, with the engine's implicit
//! edges (fan-out, join, loop rounds, map items, handler jumps), hop limits
//! (T01x, T020).

use super::*;

impl<'a> Checker<'a> {
    pub(super) fn edge_taken(&mut self, seq: u64, from: &str, to: &str, via: &Via) {
        self.rerun_edge(seq, to, via);
        let Some(plan) = &self.plan else { return };
        let mut found = Vec::new();
        if let Some(problem) = plan.edge_problem(from, to, via) {
            found.push(
                Deviation::new(codes::EDGE_NOT_IN_PLAN, Some(seq), format!("edge {from} -> {to} ({via}) is not in the plan: {problem}"))
                    .expected("an edge of the plan, or an implicit one")
                    .actual(format!("edge_taken {from} -> {to} via {via}"))
                    .node(to),
            );
        }
        // The state `from` must be in.
        let graph_edge = via.is_graph_edge();
        let inside = matches!(via, Via::Fanout | Via::LoopRound | Via::MapItem(_));
        let phase = self.nodes.get(from).map(|n| n.phase).unwrap_or_default();
        if graph_edge && phase != Phase::Completed {
            found.push(
                Deviation::new(codes::NODE_ORDER, Some(seq), format!("edge {from} -> {to} taken before `{from}` completed"))
                    .expected(format!("node_completed {from} before the edge"))
                    .actual(format!("{from} is {}", phase_name(phase)))
                    .node(from),
            );
        }
        if inside && phase != Phase::Running {
            found.push(
                Deviation::new(codes::NODE_ORDER, Some(seq), format!("edge {from} -> {to} ({via}) taken while `{from}` is not running"))
                    .expected(format!("{from} running"))
                    .actual(format!("{from} is {}", phase_name(phase)))
                    .node(from),
            );
        }
        if matches!(via, Via::Always | Via::When(_) | Via::Else | Via::Gate(_)) {
            found.extend(self.hop(seq, from, to));
        }
        let Some(plan) = &self.plan else { return };
        // A gated boundary opens only by a PASS or an approve.
        if let Some(gate) = plan.index.gate_name_on(from, to) {
            let rt = slot(&mut self.gates, gate);
            if !rt.open {
                found.push(
                    Deviation::new(
                        codes::GATE_NOT_PASSED,
                        Some(seq),
                        format!("boundary {from} -> {to} crossed without gate `{gate}` letting it"),
                    )
                    .expected(format!("gate_recorded {gate} PASS, or decision_applied approve on {gate}, before the crossing"))
                    .actual(format!("edge_taken {from} -> {to} via {via}"))
                    .node(to)
                    .gate(gate),
                );
            }
            rt.open = false;
            rt.awaiting = false;
        }
        self.deviations.append(&mut found);
        slot(&mut self.entries, to).push(Entry { from: from.to_string(), via: via.clone(), transfers: Vec::new() });
    }

    /// Counts a crossing between `from` and `to` against the pair's hop
    /// limit (`PlanIndex::hop_limit`), as the engine counts it: one past
    /// the limit is T012.
    fn hop(&mut self, seq: u64, from: &str, to: &str) -> Option<Deviation> {
        let limit = self.plan.as_ref()?.index.hop_limit(from, to)?;
        let pair = if from <= to { (from.to_string(), to.to_string()) } else { (to.to_string(), from.to_string()) };
        let (count, _) = self.hops.entry(pair).or_insert((0, limit));
        *count += 1;
        (*count > limit).then(|| {
            Deviation::new(
                codes::HOPS,
                Some(seq),
                format!("{from} -> {to} is crossing {} between `{from}` and `{to}`, past max_hops {limit}", *count),
            )
            .expected(format!("at most {limit} crossings, then `max_hops` raised"))
            .actual(format!("edge_taken {from} -> {to}"))
            .node(to)
        })
    }

    /// `max_hops` was raised: the pair that went past its limit starts
    /// counting again. Which pair it was the trace does not name, so every
    /// pair at its limit starts again (a checker that forgets too much
    /// accepts more, never a run of the engine less).
    pub(super) fn hops_raised(&mut self) {
        self.hops.retain(|_, (count, limit)| *count < *limit);
    }

    /// The declared transfers of the edge that led to `node` happened.
    pub(super) fn transfers_present(&mut self, seq: u64, node: &str, entry: &Entry) {
        let Some(plan) = &self.plan else { return };
        let graph_edge = matches!(entry.via, Via::Always | Via::Else | Via::When(_) | Via::Gate(_));
        let source = if graph_edge {
            Some(entry.from.as_str())
        } else if entry.via == Via::Fanout {
            // The engine's rule: the first transfer into the branch from
            // the fan-out node or from a node that completed earlier.
            let completed = |n: &str| self.nodes.get(n).is_some_and(|n| n.completed_once);
            plan.index.fanout_transfer(plan.wf, &entry.from, node, completed).map(|t| t.from.as_str())
        } else {
            None
        };
        let Some(source) = source else { return };
        let mut found = Vec::new();
        for t in plan.index.transfers_on(plan.wf, source, node) {
            let handoff = t.kind() == TransferKind::Handoff;
            if !entry.transfers.iter().any(|(h, f)| *h == handoff && *f == source) {
                found.push(
                    Deviation::new(
                        codes::TRANSFER,
                        Some(seq),
                        format!("node `{node}` started without the declared {} {source} -> {node}", t.kind()),
                    )
                    .expected(format!("{} {source} -> {node} before node_started", if handoff { "handoff" } else { "delegation" }))
                    .actual(format!("node_started {node}"))
                    .node(node),
                );
            }
        }
        self.deviations.append(&mut found);
    }
}
