//! What the runtime benchmarks share: the generated workloads and their
//! plans.

use flow_check::plan::Plan;
use std::fmt::Write as _;

/// A `parallel` node over `w` no-op branches, joined.
pub fn fanout_source(w: usize) -> String {
    let branches: Vec<String> = (1..=w).map(|i| format!("b{i}")).collect();
    let list = branches.join(", ");
    let mut s = String::with_capacity(w * 40);
    s.push_str(crate::generate::NOOP_TOOL);
    // Every branch may run at once, as in LangGraph's one superstep (the default is 8).
    let _ = writeln!(s, "workflow fanout {{\n  start: split\n  concurrency: {w}");
    let _ = writeln!(s, "  node split: parallel [{list}]");
    for b in &branches {
        let _ = writeln!(s, "  node {b}: tool noop");
    }
    let _ = writeln!(s, "  node merge: join [{list}]");
    s.push_str("  node done: end ok\n  merge -> done\n}\n");
    s
}

/// Checks and verifies `text` like `flow run` does, and builds its plan;
/// `Err` lists the first errors.
pub fn compile(name: &str, text: String, built_by: &str) -> Result<Plan, String> {
    let mut db = flow_diagnostics::SourceDb::new();
    let root = db.add(name.to_string(), text);
    let checked = flow_check::check_program(&mut db, root, &flow_check::NoFiles);
    let mut diagnostics = checked.diagnostics.clone();
    if !checked.has_errors() {
        diagnostics.extend(flow_verify::verify(&checked.program));
    }
    let errors: Vec<String> = diagnostics.iter().filter(|d| d.is_error()).map(|d| format!("{}: {}", d.code.0, d.message)).take(5).collect();
    if !errors.is_empty() {
        return Err(format!("the generated `{name}` does not check:\n  {}", errors.join("\n  ")));
    }
    let files: Vec<(&str, &str)> = (0..db.len() as u32).map(flow_diagnostics::FileId).map(|id| (db.name(id), db.text(id))).collect();
    Ok(Plan::new(checked.program, built_by, &files))
}

/// The median of samples (none: NaN).
pub fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    let n = xs.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => xs[n / 2],
        _ => (xs[n / 2 - 1] + xs[n / 2]) / 2.0,
    }
}
