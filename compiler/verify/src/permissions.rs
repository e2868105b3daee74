//! Permission checks: tool access, delegation attenuation and limits, risky
//! tools behind human approval, information flow of private data.

use crate::flowgraph::{loc_span, FlowGraph, Parents};
use flow_check::ir::{Node, Program};
use flow_check::ir::{NodeKind, TransferKind};
use flow_check::lookup::agent_of;
use flow_check::spec::Kind;
use flow_check::view::Sink;
use flow_diagnostics::{codes, Diagnostic, Label};
use indexmap::{IndexMap, IndexSet};
use petgraph::graph::NodeIndex;
use petgraph::visit::EdgeRef;
use petgraph::Direction;
use std::collections::VecDeque;

/// E0711: an agent node on private data none of whose providers is local.
fn private_providers(flow: &FlowGraph<'_>, program: &Program, out: &mut Vec<Diagnostic>) {
    for node in flow.workflow.nodes.values().filter(|n| n.kind() == NodeKind::Agent) {
        let Some(agent) = agent_of(node, program) else { continue };
        if !flow_check::semantics::handles_private_data(node, agent) {
            continue;
        }
        let mut providers: Vec<String> = agent.provider().map(str::to_string).into_iter().collect();
        providers.extend(agent.routes().iter().filter_map(|r| r.provider.map(str::to_string)));
        if providers.iter().any(|p| program.decls.get(p).is_some_and(|d| d.local())) {
            continue;
        }
        let (file, span) = loc_span(node.loc);
        out.push(
            Diagnostic::new(
                codes::PRIVATE_NOT_LOCAL,
                file,
                span,
                format!("`{}` handles data labelled private, and no provider its turns may go to is local", node.name),
            )
            .with_primary_message("its turns could never be sent")
            .with_note(format!("providers: {}", providers.iter().map(|p| format!("`{p}`")).collect::<Vec<_>>().join(", ")))
            .with_help("declare a provider with `local: true` and route this work to it"),
        );
    }
}

/// E0701: an agent lists a tool that does not allow it.
pub fn check_agents(program: &Program, out: &mut Vec<Diagnostic>) {
    for agent in program.decls.values().filter(|d| d.kind == Kind::Agent && !d.imported) {
        for tool_name in agent.tools() {
            let Some(tool) = program.decls.get(&tool_name) else { continue };
            // A tool that names its agents (even none) allows only those.
            let Some(allowed) = tool.declared_allowed_agents() else { continue };
            if !allowed.contains(&agent.name) {
                let (file, span) = loc_span(agent.loc);
                let (tf, ts) = loc_span(tool.loc);
                out.push(
                    Diagnostic::new(
                        codes::TOOL_NOT_ALLOWED,
                        file,
                        span,
                        format!("agent `{}` lists tool `{tool_name}`, which does not allow it", agent.name),
                    )
                    .with_primary_message("not in the tool's `allowed_agents`")
                    .with_label(Label::secondary(
                        tf,
                        ts,
                        format!("`{tool_name}` allows: {}", if allowed.is_empty() { "no agent".into() } else { allowed.join(", ") }),
                    )),
                );
            }
        }
    }
}

/// The tools a node may call: a tool node's tool, an agent node's agent's tools.
fn tools_of(node: &Node, program: &Program) -> Vec<String> {
    match node.kind() {
        NodeKind::Tool => node.target.clone(),
        NodeKind::Agent => agent_of(node, program).map(|a| a.tools()).unwrap_or_default(),
        _ => Vec::new(),
    }
}

pub fn check(flow: &FlowGraph<'_>, program: &Program, out: &mut Vec<Diagnostic>) {
    delegations(flow, program, out);
    risky_tools(flow, program, out);
    information_flow(flow, program, out);
    private_providers(flow, program, out);
}

fn delegations(flow: &FlowGraph<'_>, program: &Program, sink: &mut Vec<Diagnostic>) {
    let workflow = flow.workflow;
    let reached = flow.reachable();
    let delegates: Vec<&flow_check::ir::Transfer> = workflow.transfers.iter().filter(|t| t.kind() == TransferKind::Delegate).collect();
    let mut fanout: IndexMap<&str, usize> = IndexMap::new();
    for t in &delegates {
        *fanout.entry(t.from.as_str()).or_default() += 1;
    }
    for t in &delegates {
        let mut out: Vec<Diagnostic> = Vec::new();
        // Each finding about this delegation carries the run that reaches it.
        let witness = match (flow.index.get(&t.from), flow.index.get(&t.to)) {
            (Some(&a), Some(&b)) if reached.contains_key(&a) => {
                let mut path = flow.path_to(&reached, a);
                path.push(b);
                let mut w = flow.witness(&path);
                if let Some(last) = w.steps.last_mut() {
                    last.message = format!("`{}` delegates to `{}`", t.from, t.to);
                }
                Some(w)
            }
            _ => None,
        };
        let (file, span) = loc_span(t.loc);
        let Some(contract_name) = t.contract() else { continue };
        let Some(contract) = t.contract_decl(program) else { continue };
        let (Some(from), Some(to)) = (workflow.nodes.get(&t.from), workflow.nodes.get(&t.to)) else { continue };
        let delegator = agent_of(from, program);
        let delegate = agent_of(to, program);
        let (cf, cs) = loc_span(contract.loc);
        // May the delegator delegate at all?
        if let Some(agent) = delegator {
            if !agent.can_delegate() {
                let (af, asp) = loc_span(agent.loc);
                out.push(
                    Diagnostic::new(
                        codes::DELEGATION_FORBIDDEN,
                        file,
                        span,
                        format!("`{}` delegates, but its agent `{}` may not delegate", t.from, agent.name),
                    )
                    .with_primary_message("delegation here")
                    .with_label(Label::secondary(af, asp, "`can_delegate` is false (the default)")),
                );
            }
        }
        for parent in delegates.iter().filter(|p| p.to == t.from) {
            if let Some(name) = parent.contract() {
                if let Some(parent_contract) = program.decls.get(name) {
                    if !parent_contract.can_delegate() {
                        let (pf, ps) = loc_span(parent.loc);
                        out.push(
                            Diagnostic::new(
                                codes::DELEGATION_FORBIDDEN,
                                file,
                                span,
                                format!("`{}` delegates further, but its own contract `{name}` forbids it", t.from),
                            )
                            .with_primary_message("further delegation")
                            .with_label(Label::secondary(
                                pf,
                                ps,
                                format!("`{}` was delegated under `{name}` (can_delegate: false)", t.from),
                            )),
                        );
                    }
                }
            }
        }
        // Attenuation: tools, scope, budget.
        let granted = contract.declared_tools();
        if let Some(agent) = delegator {
            let held = agent.tools();
            for tool in granted.iter().flatten().filter(|t| !held.contains(t)) {
                out.push(
                    Diagnostic::new(
                        codes::ATTENUATION,
                        cf,
                        cs,
                        format!("contract `{contract_name}` grants tool `{tool}`, which the delegator `{}` does not hold", agent.name),
                    )
                    .with_primary_message("more than the delegator has")
                    .with_label(Label::secondary(file, span, format!("used by `{} -> {}`", t.from, t.to))),
                );
            }
            let scope = agent.scope();
            for s in contract.scope().iter().filter(|s| !scope.contains(s)) {
                out.push(
                    Diagnostic::new(
                        codes::ATTENUATION,
                        cf,
                        cs,
                        format!("contract `{contract_name}` grants scope \"{s}\" outside the delegator's scope"),
                    )
                    .with_label(Label::secondary(file, span, format!("used by `{} -> {}`", t.from, t.to))),
                );
            }
            let parent_budget = from.budget(program).or_else(|| agent.budget(program)).or_else(|| workflow.budget(program));
            if let (Some(parent), Some(child)) = (parent_budget, contract.budget(program)) {
                let available = 1.0 - parent.reserve.total();
                for key in ["tokens", "cost", "tool_calls", "duration", "steps"] {
                    if let (Some(p), Some(c)) = (parent.limit(key), child.limit(key)) {
                        if c > p * available + 1e-9 {
                            out.push(
                                Diagnostic::new(
                                    codes::ATTENUATION,
                                    cf,
                                    cs,
                                    format!(
                                        "contract `{contract_name}` grants more {key} than its delegator can give ({} > {} after reserves)",
                                        fmt_num(c),
                                        fmt_num(p * available)
                                    ),
                                )
                                .with_label(Label::secondary(
                                    file,
                                    span,
                                    format!("used by `{} -> {}`", t.from, t.to),
                                )),
                            );
                        }
                    }
                }
            }
        }
        if let Some(agent) = delegate {
            // A contract that declares `tools` (even none) grants only those.
            if let Some(granted) = &granted {
                for tool in agent.tools().iter().filter(|t| !granted.contains(t)) {
                    let (af, asp) = loc_span(agent.loc);
                    out.push(
                        Diagnostic::new(
                            codes::ATTENUATION,
                            af,
                            asp,
                            format!("delegate agent `{}` holds tool `{tool}`, which contract `{contract_name}` does not grant", agent.name),
                        )
                        .with_primary_message("more than the contract grants")
                        .with_label(Label::secondary(file, span, format!("delegated by `{} -> {}`", t.from, t.to))),
                    );
                }
            }
        }
        // Limits of the subtree the contract governs: how many delegates the
        // delegate may start, and how deep delegation may go below it.
        if let Some(max) = contract.max_fanout() {
            let n = fanout.get(t.to.as_str()).copied().unwrap_or(0);
            if n as u64 > max {
                out.push(Diagnostic::new(
                    codes::DELEGATION_LIMIT,
                    file,
                    span,
                    format!(
                        "`{}` starts {n} delegate{}, more than its contract `{contract_name}` allows (max_fanout: {max})",
                        t.to,
                        if n == 1 { "" } else { "s" }
                    ),
                ));
            }
        }
        if let Some(max) = contract.max_depth() {
            let depth = depth_below(&t.to, &delegates, 0);
            if depth as u64 > max {
                out.push(Diagnostic::new(
                    codes::DELEGATION_LIMIT,
                    file,
                    span,
                    format!("the delegation tree below `{}` is {depth} levels deep, more than contract `{contract_name}` allows (max_depth: {max})", t.to),
                ));
            }
        }
        for d in out {
            sink.push(match &witness {
                Some(w) => d.with_witness(w.clone()),
                None => d,
            });
        }
    }
}

fn depth_below(node: &str, delegates: &[&flow_check::ir::Transfer], guard: usize) -> usize {
    if guard > 64 {
        return guard;
    }
    delegates.iter().filter(|t| t.from == node).map(|t| 1 + depth_below(&t.to, delegates, guard + 1)).max().unwrap_or(0)
}

fn fmt_num(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// Whether a node is a human approval point.
fn approves(node: &Node) -> bool {
    node.kind() == NodeKind::Human
}

/// Whether crossing this written edge passes a gate a human always judges.
fn human_gate(flow: &FlowGraph<'_>, program: &Program, from: &str, to: &str) -> bool {
    flow.workflow.gates.values().any(|g| {
        g.from == from
            && g.to == to
            && g.evaluators().iter().any(|e| !e.builtin && program.decls.get(e.name).is_some_and(|d| d.variant.as_deref() == Some("human")))
    })
}

/// E0705 alone (for [`crate::verify_structural`]).
pub fn check_risky_tools(flow: &FlowGraph<'_>, program: &Program, out: &mut Vec<Diagnostic>) {
    risky_tools(flow, program, out);
}

/// E0705: risky or confirm-required tools reachable without approval.
fn risky_tools(flow: &FlowGraph<'_>, program: &Program, out: &mut Vec<Diagnostic>) {
    let risky = |tool: &str| program.decls.get(tool).is_some_and(|t| t.is_risky());
    // Nothing to prove when no tool is risky, or no node can call one
    // (checked without allocating: most nodes call none).
    if !program.decls.values().any(|d| d.kind == Kind::Tool && risky(&d.name)) {
        return;
    }
    let calls_risky = |node: &Node| match node.kind() {
        NodeKind::Tool => node.target.iter().any(|t| risky(t)),
        NodeKind::Agent => agent_of(node, program).is_some_and(|a| a.tools().iter().any(|t| risky(t))),
        _ => false,
    };
    let callers: IndexMap<NodeIndex, String> = flow
        .graph
        .node_indices()
        .filter(|&n| calls_risky(flow.node(n)))
        .filter_map(|n| tools_of(flow.node(n), program).into_iter().find(|t| risky(t)).map(|t| (n, t)))
        .collect();
    if callers.is_empty() {
        return;
    }
    let gated: IndexSet<(NodeIndex, NodeIndex)> = flow
        .workflow
        .gates
        .values()
        .filter(|g| human_gate(flow, program, &g.from, &g.to))
        .filter_map(|g| Some((*flow.index.get(&g.from)?, *flow.index.get(&g.to)?)))
        .collect();
    let parents = flow.bfs(|_, a, b| approves(flow.node(a)) || gated.contains(&(a, b)));
    for (&index, tool) in &callers {
        if !parents.contains_key(&index) || approves(flow.node(index)) {
            continue;
        }
        let node = flow.node(index);
        let (file, span) = loc_span(node.loc);
        let path = flow.path_to(&parents, index);
        let tool_decl = &program.decls[tool];
        let (tf, ts) = loc_span(tool_decl.loc);
        out.push(
            Diagnostic::new(
                codes::UNCONFIRMED_RISK,
                file,
                span,
                format!("`{}` can call `{tool}` without a human approval on the way", node.name),
            )
            .with_primary_message("reached without approval")
            .with_label(Label::secondary(tf, ts, "high risk or `confirm: true`"))
            .with_help("put a `human` node (or a gate with a human evaluator) before this node on every path")
            .with_witness(flow.witness(&path)),
        );
    }
}

fn is_private_source(node: &Node, program: &Program) -> bool {
    let private = |labels: &[String]| labels.iter().any(|l| l == "private");
    if private(node.labels()) {
        return true;
    }
    match node.kind() {
        NodeKind::Agent => agent_of(node, program).is_some_and(|a| private(&a.labels())),
        NodeKind::Tool => node.target.first().and_then(|t| program.decls.get(t)).is_some_and(|t| private(&t.labels())),
        _ => false,
    }
}

fn public_sink(node: &Node, program: &Program) -> Option<String> {
    tools_of(node, program).into_iter().find(|t| program.decls.get(t).is_some_and(|d| d.sink() == Some(Sink::Public)))
}

/// E0706: private data reaching a public sink along edges and handoffs.
fn information_flow(flow: &FlowGraph<'_>, program: &Program, out: &mut Vec<Diagnostic>) {
    let workflow = flow.workflow;
    let mut reported: IndexSet<NodeIndex> = IndexSet::new();
    // A handoff whose payload is labelled private hands private data over.
    let private_handoff =
        |to: &str| workflow.transfers.iter().find(|t| t.to == to && t.labels().iter().any(|l| l == "private")).map(|t| t.from.clone());
    let sources =
        flow.graph.node_indices().filter(|&n| is_private_source(flow.node(n), program) || private_handoff(flow.name(n)).is_some());
    for source in sources {
        let mut parent = Parents::new(flow.graph.node_count());
        parent.insert(source, None);
        let mut queue = VecDeque::from([source]);
        while let Some(n) = queue.pop_front() {
            let mut next: Vec<NodeIndex> = flow.graph.edges_directed(n, Direction::Outgoing).map(|e| e.target()).collect();
            let name = flow.name(n).to_string();
            next.extend(workflow.transfers.iter().filter(|t| t.from == name).filter_map(|t| flow.index.get(&t.to).copied()));
            // What a node appends to a blackboard, every reader of it reads.
            let writes = &flow.node(n).common.writes;
            if !writes.is_empty() {
                let readers = workflow.nodes.values().filter(|r| r.common.reads.iter().any(|b| writes.contains(b)));
                next.extend(readers.filter_map(|r| flow.index.get(&r.name).copied()));
            }
            for t in next {
                if parent.insert(t, Some(n)) {
                    queue.push_back(t);
                }
            }
        }
        for n in parent.keys() {
            let node = flow.node(n);
            if let Some(tool) = public_sink(node, program) {
                if !reported.insert(n) {
                    continue;
                }
                let path = flow.path_to(&parent, n);
                let mut witness = flow.witness(&path);
                // A step through a blackboard says so (no edge joins the two).
                for (i, pair) in path.windows(2).enumerate() {
                    let (w, r) = (flow.node(pair[0]), flow.node(pair[1]));
                    let board = w.common.writes.iter().find(|b| r.common.reads.contains(b));
                    if let (Some(board), None) = (board, flow.graph.edges_connecting(pair[0], pair[1]).next()) {
                        if let Some(step) = witness.steps.get_mut(i + 1) {
                            step.message = format!("`{}` reads blackboard `{board}`, which `{}` appends to", r.name, w.name);
                        }
                    }
                }
                if let Some(first) = witness.steps.first_mut() {
                    first.message = match private_handoff(&first.name).filter(|_| !is_private_source(flow.node(source), program)) {
                        Some(from) => format!("`{}` receives a handoff from `{from}` labelled private", first.name),
                        None => format!("`{}` produces data labelled private", first.name),
                    };
                }
                let (file, span) = loc_span(node.loc);
                out.push(
                    Diagnostic::new(
                        codes::PRIVATE_TO_PUBLIC,
                        file,
                        span,
                        match private_handoff(flow.name(source)).filter(|_| !is_private_source(flow.node(source), program)) {
                            Some(from) => format!(
                                "private data handed from `{from}` to `{}` can reach the public sink `{tool}` at `{}`",
                                flow.name(source),
                                node.name
                            ),
                            None => {
                                format!("private data from `{}` can reach the public sink `{tool}` at `{}`", flow.name(source), node.name)
                            }
                        },
                    )
                    .with_primary_message("public sink")
                    .with_witness(witness),
                );
            }
        }
    }
}
