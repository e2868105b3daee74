//! Static verification of checked Flow programs.
//!
//! Reads only the typed IR (`flow_check::ir`), never the AST. Each check
//! has a stable code; findings about paths carry a witness: the nodes from
//! the start, as ordered source locations.
//!
//! Architecture invariant: like the checker, this crate is pure and
//! deterministic — no I/O, ordered maps, findings sorted before output.

mod boards;
pub mod budgets;
mod flowgraph;
pub mod gates;
mod graph_checks;
pub mod mc;
pub mod model;
pub mod obligations;
mod permissions;
pub mod policies;
pub mod render;
mod shared;
mod states;
mod types;

pub use budgets::{BudgetBound, Status as BudgetStatus};

/// A request to stop a verification whose result is no longer wanted (the
/// language server's next edit): another thread calls [`Cancel::cancel`],
/// the model checker sees it within a few thousand states and the
/// verification returns `None`. Clones share the flag.
#[derive(Debug, Clone, Default)]
pub struct Cancel(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Cancel {
    /// Asks the verification to stop.
    pub fn cancel(&self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether it was asked to stop.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}
pub use flowgraph::{EdgeKind, FlowGraph};

use flow_check::ir::Program;
use flow_diagnostics::Diagnostic;

/// Runs every static check over a program the checker accepted. (Run it
/// only when checking reported no errors: the IR of a broken program has
/// holes.)
pub fn verify(program: &Program) -> Vec<Diagnostic> {
    verify_with_budgets(program).0
}

/// [`verify`], and the static worst case of every budget scope and measure
/// of every workflow (in workflow, scope and measure order).
pub fn verify_with_budgets(program: &Program) -> (Vec<Diagnostic>, Vec<BudgetBound>) {
    let mut diagnostics = Vec::new();
    let mut bounds = Vec::new();
    let types = types::Types::new(program);
    for machine in program.machines.values() {
        states::check_machine(machine, &mut diagnostics);
    }
    for workflow in program.workflows.values() {
        let flow = FlowGraph::new(workflow, program);
        graph_checks::check(&flow, &types, &mut diagnostics);
        gates::check(&flow, program, &mut diagnostics);
        types::check_contracts(&flow, &types, &mut diagnostics);
        permissions::check(&flow, program, &mut diagnostics);
        boards::check(&flow, &types, &mut diagnostics);
        budgets::bounds_of(workflow, program, &mut diagnostics, &mut bounds);
        states::check_workflow(&flow, program, &mut diagnostics);
    }
    permissions::check_agents(program, &mut diagnostics);
    for budget in program.decls.values().filter(|d| d.kind == flow_check::spec::Kind::Budget) {
        budgets::check_budget_shape(&flow_check::view::Budget::of_decl(budget), budget.loc, &mut diagnostics);
    }
    flow_diagnostics::sort_diagnostics(&mut diagnostics);
    (diagnostics, bounds)
}

/// Everything `flowc verify` reports about a program.
#[derive(Debug)]
pub struct Verified {
    /// Every diagnostic, policies' included, sorted.
    pub diagnostics: Vec<Diagnostic>,
    /// Each policy's report.
    pub policies: Vec<policies::PolicyReport>,
    /// The worst case of every budget scope and measure.
    pub budgets: Vec<BudgetBound>,
}

/// [`verify_with_budgets`] and then the model checker: every policy against
/// every workflow it applies to (what `flowc verify` runs).
pub fn verify_all(program: &Program, plan_digest: &str, max_states: usize) -> Verified {
    verify_all_until(program, plan_digest, max_states, &Cancel::default()).expect("never cancelled")
}

/// [`verify_all`], or `None` once `cancel` is set.
pub fn verify_all_until(program: &Program, plan_digest: &str, max_states: usize, cancel: &Cancel) -> Option<Verified> {
    let (mut diagnostics, budgets) = verify_with_budgets(program);
    if cancel.is_cancelled() {
        return None;
    }
    let reports = policies::check_policies_until(program, plan_digest, max_states, policies::Reductions::default(), cancel)?;
    diagnostics.extend(reports.iter().filter_map(|r| r.diagnostic.clone()));
    flow_diagnostics::sort_diagnostics(&mut diagnostics);
    Some(Verified { diagnostics, policies: reports, budgets })
}

/// [`verify`] and then the model checker: every policy against every
/// workflow it applies to. Returns the diagnostics, sorted, and each
/// policy's report.
pub fn verify_with_policies(program: &Program, plan_digest: &str, max_states: usize) -> (Vec<Diagnostic>, Vec<policies::PolicyReport>) {
    let verified = verify_all(program, plan_digest, max_states);
    (verified.diagnostics, verified.policies)
}

/// The structural checks alone — reachability, dead ends, livelocks,
/// unbounded cycles, routing gaps, fan-out without join, risky tools behind
/// human approval: the subset that graph-only verifiers (such as
/// agentproofx) also run, for like-for-like benchmarks.
pub fn verify_structural(program: &Program) -> Vec<Diagnostic> {
    let mut diagnostics = Vec::new();
    let types = types::Types::new(program);
    for workflow in program.workflows.values() {
        let flow = FlowGraph::new(workflow, program);
        graph_checks::check(&flow, &types, &mut diagnostics);
        permissions::check_risky_tools(&flow, program, &mut diagnostics);
    }
    flow_diagnostics::sort_diagnostics(&mut diagnostics);
    diagnostics
}
