//! Coverage obligations: what a set of test traces must exercise (after
//! "Testing Agentic Workflows with Structural Coverage Criteria"): every
//! reachable agent, every allowed tool edge, every restricted tool edge
//! (probed and refused), every delegation edge, every gate outlet.

use crate::flowgraph::FlowGraph;
use flow_check::ir::Program;
use flow_check::ir::{NodeKind, TransferKind};
use flow_check::spec::Kind;
use serde::Serialize;

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Obligation {
    /// `agent`, `tool_edge`, `restricted_tool_edge`, `delegation_edge`, `gate_outlet`.
    pub kind: String,
    /// A stable identifier, e.g. `tool_edge:researcher->search`.
    pub id: String,
    pub workflow: String,
    /// The parts: agent and tool, delegator and delegate, gate and outlet.
    pub subject: Vec<String>,
    pub description: String,
}

/// Every obligation of every workflow, in a stable order.
pub fn obligations(program: &Program) -> Vec<Obligation> {
    let mut out = Vec::new();
    let tools: Vec<&flow_check::ir::Decl> = program.decls.values().filter(|d| d.kind == Kind::Tool).collect();
    for workflow in program.workflows.values() {
        let flow = FlowGraph::new(workflow, program);
        let reached = flow.reachable();
        let mut agents: Vec<String> = Vec::new();
        for n in reached.keys() {
            let node = flow.node(n);
            if node.kind() == NodeKind::Agent {
                if let Some(agent) = node.target.first() {
                    if !agents.contains(agent) {
                        agents.push(agent.clone());
                    }
                }
            }
        }
        let w = &workflow.name;
        for agent in &agents {
            out.push(Obligation {
                kind: "agent".into(),
                id: format!("agent:{agent}"),
                workflow: w.clone(),
                subject: vec![agent.clone()],
                description: format!("agent `{agent}` takes part in a run"),
            });
            let allowed = program.decls.get(agent).map(|a| a.tools()).unwrap_or_default();
            for tool in &allowed {
                out.push(Obligation {
                    kind: "tool_edge".into(),
                    id: format!("tool_edge:{agent}->{tool}"),
                    workflow: w.clone(),
                    subject: vec![agent.clone(), tool.clone()],
                    description: format!("agent `{agent}` calls tool `{tool}`"),
                });
            }
            // Restricted: tools that name their allowed agents and exclude this one.
            for tool in &tools {
                if allowed.contains(&tool.name) {
                    continue;
                }
                if tool.declared_allowed_agents().is_some_and(|names| !names.contains(agent)) {
                    out.push(Obligation {
                        kind: "restricted_tool_edge".into(),
                        id: format!("restricted_tool_edge:{agent}->{}", tool.name),
                        workflow: w.clone(),
                        subject: vec![agent.clone(), tool.name.clone()],
                        description: format!("a call of `{}` by agent `{agent}` is probed and refused", tool.name),
                    });
                }
            }
        }
        for t in workflow.transfers.iter().filter(|t| t.kind() == TransferKind::Delegate) {
            out.push(Obligation {
                kind: "delegation_edge".into(),
                id: format!("delegation_edge:{}->{}", t.from, t.to),
                workflow: w.clone(),
                subject: vec![t.from.clone(), t.to.clone()],
                description: format!("`{}` delegates to `{}`", t.from, t.to),
            });
        }
        for gate in workflow.gates.values() {
            for exit in crate::gates::possible_exits(gate, program) {
                out.push(Obligation {
                    kind: "gate_outlet".into(),
                    id: format!("gate_outlet:{}:{exit}", gate.name),
                    workflow: w.clone(),
                    subject: vec![gate.name.clone(), exit.clone()],
                    description: format!("gate `{}` exits with {exit}", gate.name),
                });
            }
        }
    }
    out
}
