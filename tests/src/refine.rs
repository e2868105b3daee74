//! Small random workflows for the refinement tests (`tests/tests/refinement.rs`):
//! the engine, the model checker and trace check must agree on every one.
//!
//! [`workflow`] writes one program from a seed: a line of *blocks* from the
//! start to `done`, each block one of the constructs the three readers of a
//! plan must give one meaning to —
//!
//! * an agent node (sometimes with a retry policy, or `on_failure: skip`),
//!   sometimes calling a tool;
//! * a tool node;
//! * a router: `when` and `else` edges, the `else` to an end node;
//! * a gate with a predicate, `schema_valid`, `exists`, `human` (the
//!   editor approves or rejects) or `llm` evaluator (a judge's verdict, or
//!   none: fail-closed), whose
//!   BLOCK terminates or asks for a decision (reject terminates; the
//!   decision may have a `timeout`, with or without a `timeout` handler);
//! * a static fan-out and a join (`all`, `any`, `majority`, or a vote —
//!   `majority(ok)`, `quorum(2, n)`, `weighted(ok, {…})`; branches with
//!   and without an edge of their own into the join; `conflicts: fail`
//!   sometimes, which fails the join when the branches disagree), sometimes
//!   with a second join listing the same branches (they arrive at the first);
//! * a bounded loop (`until`, `max_rounds`, `on_exhausted` continue or a
//!   fallback) of one node or of two, the first going on to the second
//!   when its guard holds and sometimes leaving the body by an `else`
//!   edge (which ends the round);
//! * a human approval (approve goes on, reject ends), sometimes with a
//!   `timeout` (no decision in time fails the visit);
//! * a map over an agent's list (at most two items; a longer list fails it);
//! * a compute node over an agent's output (its value can fail to be made,
//!   or fall outside its type), sometimes routed on;
//! * blackboards: agent nodes that append their output (at once, after an
//!   approval, or — the gated agent of a gate block — on the gate's PASS)
//!   and agent nodes that read them;
//! * a handoff between two agents, with or without a declared context,
//!   sometimes answered back while the receiver's output says so (a
//!   ping-pong under the workflow's `max_hops: 3`, raised with no handler,
//!   an escalation or a `goto`);
//!
//! sometimes with declared records (`record NAME { … }`) on nodes that
//! complete with an output and on gates, and a policy over one of them
//! (`recorded(NAME)`);
//!
//! under a run budget of tokens with zones (compress, `return_partial` or
//! a fallback) about half the time, and a few policies (response `warn`, so
//! the run monitors record violations and change nothing). The output is a
//! pure function of the seed, and checks with no errors.

use std::fmt::Write as _;

pub use crate::generate::Rng;

const HEADER: &str = r#"type Out = { ok: bool, n: int }
type Batch = { items: [Out] }

provider local: scripted { max_tokens: 100 }
principal editor
tool echo: builtin { description: "Echoes its input", input: any, output: any, function: "identity" }
agent w { provider: local, max_turns: 1 }
agent v { provider: local, tools: [echo], max_turns: 2 }
agent critic { provider: local, max_turns: 1 }
evaluator fair: llm { judge: critic, rubric: "Is the output fine?" }
evaluator panel: human { by: [editor] }
blackboard notes { entry: Out, writers: [w, v], readers: [w, v] }
blackboard signed { entry: Out, writers: [w, v], readers: [w, v], requires: approval }
blackboard checked { entry: Out, writers: [w, v], readers: [w, v], requires: gate_pass }
"#;

/// What the generator wrote, for the policies: node names, agent nodes
/// and termination reasons.
#[derive(Default)]
struct Names {
    nodes: Vec<String>,
    agents: Vec<String>,
    reasons: Vec<String>,
    handoffs: Vec<(String, String)>,
    /// A handoff block answers back (a ping-pong): the workflow declares
    /// `max_hops`.
    hops: bool,
    /// A gate asks an `llm` judge: the workflow has no token budget.
    judged: bool,
}

/// One block: its node and edge lines, its entry, and its exits (a node
/// and the guard of its edge to the next block's entry).
struct Block {
    lines: Vec<String>,
    entry: String,
    exits: Vec<(String, String)>,
    /// A gate on the edge into the next block: `(from, body)`.
    gate: Option<(String, String)>,
}

fn agent_line(rng: &mut Rng, name: &str, names: &mut Names, plain: bool) -> String {
    names.nodes.push(name.to_string());
    names.agents.push(name.to_string());
    let agent = if !plain && rng.chance(25) { "v" } else { "w" };
    let mut extra = String::new();
    if !plain && rng.chance(20) {
        extra.push_str(", retry: { attempts: 2 }");
    }
    if !plain && rng.chance(15) {
        extra.push_str(", on_failure: skip");
    }
    extra.push_str(&board_access(rng));
    format!("  node {name}: agent {agent} {{ output: Out{extra} }}")
}

/// Sometimes a blackboard an agent node appends to (at once or after an
/// approval), sometimes blackboards it reads.
fn board_access(rng: &mut Rng) -> String {
    let mut extra = String::new();
    match rng.below(10) {
        0 => extra.push_str(", writes: [notes]"),
        1 => extra.push_str(", writes: [signed]"),
        2 => extra.push_str(", writes: [notes, signed]"),
        _ => {}
    }
    if rng.chance(20) {
        extra.push_str(", reads: [notes, signed, checked]");
    }
    extra
}

fn block(rng: &mut Rng, k: usize, names: &mut Names) -> Block {
    let n = format!("n{k}");
    let simple = |lines: Vec<String>, node: &str| Block {
        lines,
        entry: node.to_string(),
        exits: vec![(node.to_string(), String::new())],
        gate: None,
    };
    match rng.below(11) {
        0 | 1 => {
            let line = agent_line(rng, &n, names, false);
            simple(vec![line], &n)
        }
        2 => {
            names.nodes.push(n.clone());
            simple(vec![format!("  node {n}: tool echo {{ args: {{ ok: true, n: {k} }} }}")], &n)
        }
        3 => {
            let line = agent_line(rng, &n, names, true);
            let end = format!("e{k}");
            let reason = format!("alt{k}");
            names.nodes.push(end.clone());
            names.reasons.push(reason.clone());
            let status = *rng.pick(&["success", "partial", "failure"]);
            let lines = vec![line, format!("  node {end}: end {reason} {{ status: {status} }}"), format!("  {n} -> {end} else")];
            Block { lines, entry: n.clone(), exits: vec![(n.clone(), format!(" when {n}.ok"))], gate: None }
        }
        4 => {
            let line = agent_line(rng, &n, names, true);
            let evaluator = match rng.below(5) {
                0 => format!("predicate({n}.ok)"),
                1 => format!("schema_valid({n}, Out)"),
                2 => format!("exists({n}.n)"),
                3 => format!("panel({n})"),
                _ => {
                    // A judge's turns are not metered: no token budget.
                    names.judged = true;
                    format!("fair({n})")
                }
            };
            let blocked = format!("blocked{k}");
            names.reasons.push(blocked.clone());
            // A BLOCK asks the editor (sometimes with revise and replan
            // among the choices), re-runs (the gated node, or a replan
            // scope that `workflow` fills in with an earlier block's
            // entry, listed after it), or ends the run. A re-run is
            // bounded by the gated node's `max_visits`.
            let mut rerun = false;
            let on_block = match rng.below(10) {
                0..3 => {
                    let rejected = format!("rejected{k}");
                    names.reasons.push(rejected.clone());
                    // A decision may have a deadline, with or without its
                    // own handler (without one the run ends under the gate's
                    // reason).
                    let timeout = match rng.below(3) {
                        0 => String::new(),
                        1 => "\n    timeout: 5m".to_string(),
                        _ => {
                            let late = format!("late{k}");
                            names.reasons.push(late.clone());
                            format!("\n    timeout: 5m\n    on timeout -> terminate({late})")
                        }
                    };
                    rerun = rng.chance(40);
                    let decisions = if rerun { "approve, revise, replan, reject]\n    replan_scope: [@SCOPE@" } else { "approve, reject" };
                    format!("on BLOCK -> decide\n    decided_by: [editor]\n    decisions: [{decisions}]\n    on reject -> terminate({rejected}){timeout}")
                }
                3..7 => {
                    rerun = true;
                    if rng.chance(50) {
                        "replan_scope: [@SCOPE@]\n    on BLOCK -> replan".to_string()
                    } else {
                        format!("on BLOCK -> revise({n})")
                    }
                }
                _ => format!("on BLOCK -> terminate({blocked})"),
            };
            let line = if rerun { line.replacen("{ output: Out", "{ output: Out, max_visits: 2", 1) } else { line };
            let body = format!("{{\n    evaluate: [{evaluator}]\n    reason: \"{blocked}\"\n    on PASS -> continue\n    {on_block}\n  }}");
            // The gated agent appends on the gate's PASS, half the time.
            let line = if rng.chance(50) && !line.contains("writes:") {
                line.replacen("{ output: Out", "{ output: Out, writes: [checked]", 1)
            } else {
                line
            };
            Block { lines: vec![line], entry: n.clone(), exits: vec![(n.clone(), String::new())], gate: Some((n, body)) }
        }
        5 => {
            let (a, b, j) = (format!("a{k}"), format!("b{k}"), format!("j{k}"));
            let rule = *rng.pick(&["all", "all", "any", "majority", "majority(ok)", "quorum(2, n)", "weighted(ok, { a0: 2 })"]);
            let rule = rule.replace("a0", &a);
            let votes = rule.contains('(');
            let mut lines = vec![format!("  node {n}: parallel [{a}, {b}]")];
            names.nodes.push(n.clone());
            lines.push(agent_line(rng, &a, names, true));
            lines.push(agent_line(rng, &b, names, true));
            names.nodes.push(j.clone());
            // Sometimes the join fails when the branches disagree.
            let conflicts = if rng.chance(30) && !votes { ", conflicts: fail" } else { "" };
            lines.push(format!("  node {j}: join [{a}, {b}] {{ rule: {rule}{conflicts} }}"));
            if rng.chance(50) {
                lines.push(format!("  {a} -> {j}"));
                lines.push(format!("  {b} -> {j}"));
            }
            // A second join listing the same branches: they arrive at the
            // first, so it never runs (W0101).
            if rng.chance(25) {
                let late = format!("{j}x");
                names.nodes.push(late.clone());
                lines.push(format!("  node {late}: join [{a}, {b}] {{ rule: any }}"));
                lines.push(format!("  {late} -> done"));
            }
            Block { lines, entry: n, exits: vec![(j.clone(), String::new())], gate: None }
        }
        6 => {
            let body = format!("x{k}");
            names.nodes.push(n.clone());
            let exhausted = if rng.chance(50) {
                let reason = format!("gave_up{k}");
                names.reasons.push(reason.clone());
                format!(", on_exhausted: fallback({reason})")
            } else {
                String::new()
            };
            if rng.chance(60) {
                let mut lines = vec![format!("  node {n}: loop [{body}] {{ max_rounds: 2, until: {body}.ok{exhausted} }}")];
                lines.push(agent_line(rng, &body, names, true));
                return Block { lines, entry: n.clone(), exits: vec![(n, String::new())], gate: None };
            }
            // A round of two: `body` goes on to `second` when its guard
            // holds (else the round ends), and may take an edge out of
            // the body, which ends the round too (W0102).
            let second = format!("y{k}");
            let mut lines = vec![format!("  node {n}: loop [{body}, {second}] {{ max_rounds: 2, until: {second}.ok{exhausted} }}")];
            lines.push(agent_line(rng, &body, names, true));
            lines.push(agent_line(rng, &second, names, true));
            lines.push(format!("  {body} -> {second} when {body}.ok"));
            if rng.chance(50) {
                let out = format!("o{k}");
                names.nodes.push(out.clone());
                names.reasons.push(format!("left{k}"));
                lines.push(format!("  node {out}: end left{k}"));
                lines.push(format!("  {body} -> {out} else"));
            }
            Block { lines, entry: n.clone(), exits: vec![(n, String::new())], gate: None }
        }
        7 => {
            let end = format!("r{k}");
            let reason = format!("declined{k}");
            names.nodes.push(n.clone());
            names.nodes.push(end.clone());
            names.reasons.push(reason.clone());
            // A human node may have a deadline: no decision in time fails
            // the visit with `timeout`.
            let timeout = if rng.chance(40) { ", timeout: 5m" } else { "" };
            let lines = vec![
                format!("  node {n}: human editor {{ decisions: [approve, reject]{timeout} }}"),
                format!("  node {end}: end {reason} {{ status: failure }}"),
                format!("  {n} -> {end} else"),
            ];
            Block { lines, entry: n.clone(), exits: vec![(n.clone(), format!(" when {n}.decision == \"approve\""))], gate: None }
        }
        8 => {
            // A map over an agent's list: its item node runs once per item.
            let (map, item) = (format!("p{k}"), format!("x{k}"));
            names.nodes.push(n.clone());
            names.agents.push(n.clone());
            names.nodes.push(map.clone());
            let lines = vec![
                format!("  node {n}: agent w {{ output: Batch }}"),
                format!("  node {map}: map {item} {{ over: {n}.items, max_items: 2 }}"),
                agent_line(rng, &item, names, true),
                format!("  {n} -> {map}"),
            ];
            Block { lines, entry: n, exits: vec![(map, String::new())], gate: None }
        }
        9 => {
            // A computed value over an agent's output: it fails when the
            // division has no value (n = 0) and with `invalid_output` when
            // the level is outside its type (n < 0).
            let c = format!("c{k}");
            names.nodes.push(c.clone());
            let lines = vec![
                agent_line(rng, &n, names, true),
                format!("  node {c}: compute {{"),
                "    output: { ok: bool, level: \"low\" | \"high\" }".to_string(),
                format!("    let: {{ share: 100 / {n}.n }}"),
                format!("    value: {{ ok: {n}.ok and share > 10, level: if_else({n}.n > 1, \"high\", if_else({n}.n > 0, \"low\", \"none\")) }}"),
                "  }".to_string(),
                format!("  {n} -> {c}"),
            ];
            let guard = if rng.chance(50) { format!(" when {c}.ok") } else { String::new() };
            if guard.is_empty() {
                return Block { lines, entry: n, exits: vec![(c, String::new())], gate: None };
            }
            let (end, reason) = (format!("e{k}"), format!("low{k}"));
            names.nodes.push(end.clone());
            names.reasons.push(reason.clone());
            let mut lines = lines;
            lines.push(format!("  node {end}: end {reason} {{ status: partial }}"));
            lines.push(format!("  {c} -> {end} else"));
            Block { lines, entry: n, exits: vec![(c, guard)], gate: None }
        }
        _ => {
            let m = format!("m{k}");
            let mut lines = vec![agent_line(rng, &n, names, true), agent_line(rng, &m, names, true), format!("  {n} -> {m}")];
            let context = match rng.below(3) {
                0 => "",
                1 => ", context: fork",
                _ => ", context: filtered, context_fields: [\"ok\"]",
            };
            // Sometimes the receiver accepts only some payloads: a refused
            // handoff fails its sender.
            let accept = if rng.chance(30) { ", accept: [payload.ok]" } else { "" };
            lines.push(format!("  handoff {n} -> {m} {{ payload: Out{context}{accept} }}"));
            names.handoffs.push((n.clone(), m.clone()));
            if rng.chance(40) {
                // A QUERY/RESPONSE ping-pong: `m` answers back while its
                // output says so, bounded by the workflow's `max_hops`.
                lines.push(format!("  {m} -> {n} when {m}.ok"));
                names.hops = true;
                return Block { lines, entry: n, exits: vec![(m, " else".to_string())], gate: None };
            }
            Block { lines, entry: n, exits: vec![(m, String::new())], gate: None }
        }
    }
}

/// A Flow program with one workflow `generated` of `1..=5` blocks, a pure
/// function of `seed`; its run budget (when it has one) limits tokens to
/// `tokens` (the refinement tests set it to the static worst case).
pub fn workflow(seed: u64, tokens: u64) -> String {
    let mut rng = Rng::new(seed);
    // Records are drawn from a stream of their own: the rest of the
    // program is what the seed made before records existed.
    let mut rec = Rng::new(seed ^ 0x005e_ed0f_5eed);
    let mut records: Vec<String> = Vec::new();
    let mut names = Names::default();
    let count = 1 + rng.below(5);
    let blocks: Vec<Block> = (0..count).map(|k| block(&mut rng, k, &mut names)).collect();
    // Half the programs bound a turn's input (a turn over it is refused
    // before it is sent); the others leave it unbounded (W0802).
    let mut s =
        if rng.chance(50) { HEADER.replace("max_tokens: 100 }", "max_tokens: 100, max_input_tokens: 4k }") } else { HEADER.to_string() };
    let budget = rng.chance(50) && !names.judged;
    if budget {
        let fuse = if rng.chance(50) {
            "return_partial".to_string()
        } else {
            names.reasons.push("low_budget".into());
            "fallback(low_budget)".to_string()
        };
        names.reasons.push("out_of_budget".into());
        // Tokens: the zones are entered by runs whose turns use a share of
        // the worst case, as the data plane reports it.
        let _ = write!(
            s,
            "budget b {{\n  tokens: {tokens}\n  zones: [\n    {{ zone: yellow, below: 98%, action: compress_context }},\n    {{ zone: fuse, below: 95%, action: {fuse} }},\n  ]\n  on_exhausted: fallback(out_of_budget)\n}}\n"
        );
    }
    let _ = writeln!(s, "workflow generated {{\n  start: {}\n  escalate_to: editor", blocks[0].entry);
    if budget {
        s.push_str("  budget: b\n");
    }
    if names.hops {
        s.push_str("  max_hops: 3\n");
        match rng.below(3) {
            0 => names.reasons.push("max_hops".into()),
            1 => s.push_str("  on max_hops -> escalate(editor)\n"),
            // Its own end: a `goto(done)` would pass by a gate into `done`.
            _ => {
                names.nodes.push("hopped".into());
                names.reasons.push("hopped".into());
                s.push_str("  on max_hops -> goto(hopped)\n  node hopped: end hopped\n");
            }
        }
    }
    // A refused handoff's message is dead-lettered: sometimes the run ends
    // on it, else the sender fails.
    if !names.handoffs.is_empty() && rng.chance(40) {
        names.reasons.push("undeliverable".into());
        s.push_str("  on dead_letter -> terminate(undeliverable)\n");
    }
    names.nodes.push("done".into());
    names.reasons.push("done".into());
    s.push_str("  node done: end done\n");
    for (i, b) in blocks.iter().enumerate() {
        for line in &b.lines {
            s.push_str(&with_record(&mut rec, line, &mut records));
            s.push('\n');
        }
        let next = blocks.get(i + 1).map_or("done", |n| n.entry.as_str());
        for (from, guard) in &b.exits {
            let _ = writeln!(s, "  {from} -> {next}{guard}");
        }
        if let Some((from, body)) = &b.gate {
            // A replan scope: the gated node, and an earlier block's
            // entry (if any) listed after it (the scope starts there).
            let earlier = &blocks[rng.below(i)].entry;
            let scope = if earlier == from { from.clone() } else { format!("{from}, {earlier}") };
            let mut body = body.replace("@SCOPE@", &scope);
            // Sometimes the gate writes a record of its outcome.
            if rec.chance(40) {
                let at = body.rfind("\n  }").unwrap_or(body.len());
                body.insert_str(at, &format!("\n    record rg{i} {{ outcome: outcome, ok: {from}.ok }}"));
                records.push(format!("rg{i}"));
            }
            let _ = writeln!(s, "  gate g{i}: {from} -> {next} {body}");
        }
    }
    s.push_str("}\n");
    for i in 0..3 {
        let _ = writeln!(s, "policy p{i}: {} {{ response: warn }}", policy(&mut rng, &names));
    }
    if !records.is_empty() {
        let r = rec.pick(&records).clone();
        let n = rec.pick(&names.nodes).clone();
        let formula = match rec.below(4) {
            0 => format!("never recorded({r})"),
            1 => format!("never terminated(done) before recorded({r})"),
            2 => format!("started({n}) => eventually recorded({r})"),
            _ => format!("always (recorded({r}) => not eventually failed({n}))"),
        };
        let _ = writeln!(s, "policy p3: {formula} {{ response: warn }}");
    }
    s
}

/// A one-line node of a kind that completes with an output, sometimes
/// with a record of it (`record r_NAME { … }`): the record's name is added
/// to `records`.
fn with_record(rec: &mut Rng, line: &str, records: &mut Vec<String>) -> String {
    let Some((name, rest)) = line.strip_prefix("  node ").and_then(|r| r.split_once(": ")) else { return line.to_string() };
    let kind = rest.split_whitespace().next().unwrap_or_default();
    if !matches!(kind, "agent" | "tool" | "human" | "loop" | "join" | "map") || !line.ends_with(" }") || !rec.chance(30) {
        return line.to_string();
    }
    let field = match kind {
        // A share of 100 has no value when `n` is 0: the field is not made.
        // What the runtime measured of the visit, and (for an agent with
        // tools) what its calls returned: `facts` and `calls`.
        "agent" if line.contains("agent v ") => format!("ok: {name}.ok, share: 100 / {name}.n, echoed: len(calls.{name}.echo)"),
        "agent" if !line.contains("Batch") => format!("ok: {name}.ok, share: 100 / {name}.n, tokens: facts.{name}.tokens"),
        "human" => format!("decision: {name}.decision"),
        _ => format!("out: {name}"),
    };
    let record = format!("r_{name}");
    let line = format!("{}, record {record} {{ {field}, k: 1 }} }}", line.trim_end_matches('}').trim_end());
    records.push(record);
    line
}

fn policy(rng: &mut Rng, names: &Names) -> String {
    let node = |rng: &mut Rng| rng.pick(&names.nodes).clone();
    let reason = |rng: &mut Rng| rng.pick(&names.reasons).clone();
    match rng.below(7) {
        0 => format!("never started({}) before completed({})", node(rng), node(rng)),
        1 => format!("started({}) => eventually (terminated(done) or terminated({}))", node(rng), reason(rng)),
        2 => format!("never terminated({})", reason(rng)),
        3 => "never zone(fuse)".to_string(),
        4 => match rng.pick(&[names.handoffs.first().cloned(), None]) {
            Some((a, b)) => format!("never handed_off({a}, {b})"),
            None if names.agents.is_empty() => format!("never failed({})", node(rng)),
            None => format!("never failed({})", rng.pick(&names.agents)),
        },
        5 => format!("always (completed({0}) => not failed({0}))", node(rng)),
        _ => "never called(echo) before approved(editor)".to_string(),
    }
}
