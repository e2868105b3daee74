//! Drawing workflows: Graphviz DOT and Mermaid, with gates, guarded edges
//! and loop bounds visible.

use crate::flowgraph::{EdgeKind, FlowGraph};
use flow_check::ir::NodeKind;
use flow_check::ir::{Guard, Program};
use petgraph::visit::EdgeRef;
use std::fmt::Write;

fn shape(kind: &str) -> &'static str {
    match kind {
        "end" => "doubleoctagon",
        "human" => "house",
        "tool" => "component",
        "parallel" | "join" => "diamond",
        "loop" | "map" => "hexagon",
        _ => "box",
    }
}

fn node_label(flow: &FlowGraph<'_>, name: &str) -> String {
    let node = &flow.workflow.nodes[name];
    let target = node.target.join(", ");
    let mut label = format!("{name}\\n{} {target}", node.kind());
    if let Some(rounds) = node.max_rounds() {
        let _ = write!(label, "\\nmax_rounds {rounds}");
    }
    if let Some(v) = node.max_visits() {
        let _ = write!(label, "\\nmax_visits {v}");
    }
    label
}

fn edge_label(flow: &FlowGraph<'_>, kind: &EdgeKind<'_>, from: &str, to: &str) -> String {
    let mut parts = Vec::new();
    match kind {
        EdgeKind::Written(i) => match &flow.workflow.edges[*i].guard {
            Guard::When(_) => parts.push("when".to_string()),
            Guard::Else => parts.push("else".to_string()),
            Guard::Always => {}
        },
        EdgeKind::Handler { action, .. } => parts.push(action.to_string()),
        EdgeKind::LoopBack => parts.push("round".into()),
        EdgeKind::RoundExit(i) => parts.push(format!("round (edge to {})", flow.workflow.edges[*i].to)),
        EdgeKind::MapReturn => parts.push("item".into()),
        _ => {}
    }
    if matches!(kind, EdgeKind::Written(_)) {
        for gate in flow.workflow.gates.values().filter(|g| g.from == from && g.to == to) {
            parts.push(format!("gate {}", gate.name));
        }
    }
    parts.join(" | ")
}

fn escape(s: &str) -> String {
    s.replace('"', "\\\"")
}

/// Every workflow of the program as one DOT digraph with a cluster each.
pub fn dot(program: &Program) -> String {
    let mut out = String::from("digraph flow {\n  rankdir=LR;\n  node [fontname=\"Helvetica\"];\n");
    for workflow in program.workflows.values() {
        let flow = FlowGraph::new(workflow, program);
        let _ = writeln!(out, "  subgraph \"cluster_{}\" {{\n    label=\"workflow {}\";", escape(&workflow.name), escape(&workflow.name));
        for name in workflow.nodes.keys() {
            let _ = writeln!(
                out,
                "    \"{w}.{n}\" [label=\"{l}\", shape={s}];",
                w = escape(&workflow.name),
                n = escape(name),
                l = escape(&node_label(&flow, name)),
                s = shape(workflow.nodes[name].kind().as_str())
            );
        }
        if let Some(start) = flow.start {
            let _ = writeln!(
                out,
                "    \"{w}.__start\" [shape=point];\n    \"{w}.__start\" -> \"{w}.{n}\";",
                w = escape(&workflow.name),
                n = escape(flow.name(start))
            );
        }
        for edge in flow.graph.edge_references() {
            let (from, to) = (flow.name(edge.source()), flow.name(edge.target()));
            let label = edge_label(&flow, edge.weight(), from, to);
            let gated = label.contains("gate ");
            let style = match edge.weight() {
                EdgeKind::Written(_) => "solid",
                EdgeKind::Handler { .. } => "dotted",
                _ => "dashed",
            };
            let _ = writeln!(
                out,
                "    \"{w}.{from}\" -> \"{w}.{to}\" [label=\"{l}\", style={style}{color}];",
                w = escape(&workflow.name),
                from = escape(from),
                to = escape(to),
                l = escape(&label),
                color = if gated { ", color=red, penwidth=2" } else { "" }
            );
        }
        out.push_str("  }\n");
    }
    out.push_str("}\n");
    out
}

fn mermaid_id(workflow: &str, node: &str) -> String {
    format!("{workflow}__{node}").replace(|c: char| !c.is_ascii_alphanumeric() && c != '_', "_")
}

/// Every workflow as a Mermaid flowchart, one subgraph each.
pub fn mermaid(program: &Program) -> String {
    let mut out = String::from("flowchart LR\n");
    for workflow in program.workflows.values() {
        let flow = FlowGraph::new(workflow, program);
        let _ = writeln!(out, "  subgraph {}[\"workflow {}\"]", mermaid_id(&workflow.name, ""), workflow.name);
        for (name, node) in &workflow.nodes {
            let label = node_label(&flow, name).replace("\\n", "<br/>").replace('"', "'");
            let id = mermaid_id(&workflow.name, name);
            let _ = match node.kind() {
                NodeKind::End => writeln!(out, "    {id}((\"{label}\"))"),
                NodeKind::Parallel | NodeKind::Join => writeln!(out, "    {id}{{\"{label}\"}}"),
                NodeKind::Loop | NodeKind::Map => writeln!(out, "    {id}{{{{\"{label}\"}}}}"),
                NodeKind::Human => writeln!(out, "    {id}[/\"{label}\"/]"),
                _ => writeln!(out, "    {id}[\"{label}\"]"),
            };
        }
        for edge in flow.graph.edge_references() {
            let (from, to) = (flow.name(edge.source()), flow.name(edge.target()));
            let label = edge_label(&flow, edge.weight(), from, to).replace('"', "'");
            let arrow = match edge.weight() {
                EdgeKind::Written(_) if label.contains("gate ") => "==>",
                EdgeKind::Written(_) => "-->",
                _ => "-.->",
            };
            let (a, b) = (mermaid_id(&workflow.name, from), mermaid_id(&workflow.name, to));
            if label.is_empty() {
                let _ = writeln!(out, "    {a} {arrow} {b}");
            } else {
                let _ = writeln!(out, "    {a} {arrow}|\"{label}\"| {b}");
            }
        }
        out.push_str("  end\n");
    }
    out
}

/// Every workflow's graph as neutral JSON: `{name, start, sensitive_tools,
/// nodes: [{id, kind, tools, sensitive}], edges: [{from, to, guard | else,
/// loop_bound, gate}]}` — the exchange format of the verification
/// benchmark (bench/), which feeds the same graph to other tools. A node
/// whose written edges are all guarded is a `router`.
pub fn json(program: &Program) -> serde_json::Value {
    use serde_json::json;
    let mut workflows = Vec::new();
    for workflow in program.workflows.values() {
        let flow = FlowGraph::new(workflow, program);
        let risky = |tool: &str| program.decls.get(tool).is_some_and(|t| t.is_risky());
        let mut sensitive_tools: Vec<String> = Vec::new();
        let nodes: Vec<serde_json::Value> = workflow
            .nodes
            .values()
            .map(|node| {
                let written: Vec<&flow_check::ir::Edge> = workflow.edges.iter().filter(|e| e.from == node.name).collect();
                let router = !written.is_empty() && written.iter().all(|e| !matches!(e.guard, Guard::Always));
                let kind = if router { "router" } else { node.kind().as_str() };
                let tools: Vec<String> = if node.kind() == NodeKind::Tool { node.target.clone() } else { Vec::new() };
                let sensitive = tools.iter().any(|t| risky(t));
                if sensitive {
                    sensitive_tools.extend(tools.iter().cloned());
                }
                json!({"id": node.name, "kind": kind, "tools": tools, "sensitive": sensitive})
            })
            .collect();
        let edges: Vec<serde_json::Value> = flow
            .graph
            .edge_references()
            .map(|edge| {
                let (from, to) = (flow.name(edge.source()), flow.name(edge.target()));
                let mut e = json!({"from": from, "to": to});
                match edge.weight() {
                    EdgeKind::Written(i) => match &workflow.edges[*i].guard {
                        Guard::When(_) => e["guard"] = json!(format!("{from}->{to}")),
                        Guard::Else => e["else"] = json!(true),
                        Guard::Always => {}
                    },
                    EdgeKind::LoopBack | EdgeKind::RoundExit(_) => {
                        if let Some(b) = workflow.nodes.get(to).and_then(|l| l.max_rounds()) {
                            e["loop_bound"] = json!(b);
                        }
                    }
                    _ => {}
                }
                if let Some(gate) = workflow.gates.values().find(|g| g.from == from && g.to == to) {
                    e["gate"] = json!(gate.name);
                }
                e
            })
            .collect();
        sensitive_tools.sort();
        sensitive_tools.dedup();
        workflows.push(json!({
            "name": workflow.name,
            "start": flow.start.map(|s| flow.name(s).to_string()),
            "sensitive_tools": sensitive_tools,
            "nodes": nodes,
            "edges": edges,
        }));
    }
    if workflows.len() == 1 {
        workflows.remove(0)
    } else {
        json!({ "workflows": workflows })
    }
}
