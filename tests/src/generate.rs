//! A generator of large, valid Flow programs, for benchmarks and scale
//! tests of the compiler.
//!
//! [`workflow`] writes one program: record types with nested lists, a
//! provider, a principal, tools and agents (with budgets), a run budget,
//! and one workflow `generated` of exactly `nodes` nodes — a chain of agent
//! and tool nodes with routers (a guarded edge and an `else` that skips
//! ahead), gates with `predicate(…)` evaluators and full handlers, handoffs,
//! bounded loops — and a few policies. The output is a pure function of
//! `(nodes, seed)` and checks and verifies with no diagnostics at all.

use std::fmt::Write as _;

/// A tiny deterministic PRNG (xorshift64*): no `rand` dependency, the same
/// numbers on every platform. Shared by the workspace's generators.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() >> 11) % n.max(1) as u64) as usize
    }

    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const HEADER: &str = r#"type Query = { topic: string, depth: int }
type Citation = { id: string, year: int, tags: [string] }
type Finding = { claim: string, score: float, citations: [Citation], tags: [string] }
type Report = { title: string, confidence: float, findings: [Finding], verdict: "accept" | "revise" | "reject" }
type Hits = { query: string, hits: [Citation], total: int }

provider local: scripted { max_tokens: 2k, max_input_tokens: 2k }
principal reviewer: human { description: "Decides when a gate cannot" }

tool search: builtin {
  description: "Searches the index"
  input: { query: string }
  output: Hits
  allowed_agents: [analyst, writer]
  timeout: 10s
  rate_limit: 20 / 1m
  risk: low
  effect: none
}

agent analyst { provider: local, tools: [search], budget: { tool_calls: 1000000 } }
agent writer { provider: local, tools: [search], budget: { tool_calls: 1000000 } }
agent critic { provider: local }

evaluator confident: predicate {
  description: "A report is confident and backed by findings"
  input: Report
  check: input.confidence >= 0.6 and len(input.findings) > 0 and all(f in input.findings: len(f.citations) > 0)
  reason: "low_confidence"
}
"#;

/// What a generated node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// An agent node with a `Report` output.
    Report(usize),
    /// A tool node calling `search`.
    Search,
    /// A loop node whose round is the next node.
    Loop,
}

/// A Flow program with one workflow of exactly `nodes` nodes (at least 3;
/// smaller sizes give 3).
pub fn workflow(nodes: usize, seed: u64) -> String {
    let nodes = nodes.max(3);
    let mut rng = Rng::new(seed);
    // The work nodes n0 … n(k-1), then `done` and `blocked`.
    let work = nodes - 2;
    // The first node is always the critic, gated by `confident`, so every
    // declaration is used at every size.
    let mut kinds = vec![Kind::Report(2)];
    let mut i = 1;
    while i < work {
        // A loop needs its body node after it, and a node after the body.
        if i > 0 && i + 2 < work && rng.chance(3) {
            kinds.push(Kind::Loop);
            kinds.push(Kind::Report(2));
            i += 2;
            continue;
        }
        kinds.push(if rng.chance(30) { Kind::Search } else { Kind::Report(rng.below(2)) });
        i += 1;
    }
    let agent = ["analyst", "writer", "critic"];
    let name = |i: usize| if i == work { "done".to_string() } else { format!("n{i}") };
    // Loop bodies return to their loop; the loop continues to the node after the body.
    let in_loop: Vec<bool> = (0..work).map(|i| i > 0 && kinds[i - 1] == Kind::Loop).collect();
    // Which nodes are routers (a guarded edge and an `else` skipping one node)
    // and which edges carry a gate (never into a node a skip can reach).
    let mut router = vec![false; work];
    let mut skipped_into = vec![false; work + 1];
    for i in 0..work {
        let plain = matches!(kinds[i], Kind::Report(_) | Kind::Search) && !in_loop[i];
        let next_plain = i + 1 < work && !in_loop[i + 1] && kinds[i + 1] != Kind::Loop;
        if i > 0 && plain && next_plain && i + 2 <= work && rng.chance(15) && !skipped_into[i] {
            router[i] = true;
            skipped_into[i + 2] = true;
        }
    }

    let mut s = String::with_capacity(nodes * 160);
    s.push_str(HEADER);
    let _ = write!(
        s,
        "\nbudget run_budget {{\n  steps: {steps}\n  tokens: {tokens}\n  tool_calls: {calls}\n  cost: $1000\n  reserve: {{ verification: 5% }}\n  zones: [\n    {{ zone: yellow, below: 50%, action: compress_context }},\n    {{ zone: red, below: 20%, action: [switch_model(local), skip_reasoning] }},\n    {{ zone: fuse, below: 5%, action: return_partial }},\n  ]\n  on_exhausted: fallback(budget_exhausted)\n}}\n\nworkflow generated {{\n  description: \"A generated workflow of {nodes} nodes\"\n  input: Query\n  output: Report\n  start: n0\n  budget: run_budget\n  escalate_to: reviewer\n  deadline: 2h\n  max_hops: 4\n\n",
        steps = nodes * 8 + 100,
        // A turn counts at most 4k (2k in, 2k out), an attempt 8 turns; a
        // loop body with retries runs 3 × 2 attempts.
        tokens = nodes * 120_000 + 100_000,
        calls = 3_000_000,
    );
    for (i, kind) in kinds.iter().enumerate() {
        let n = name(i);
        match kind {
            Kind::Report(a) => {
                let retry = if rng.chance(20) { ", retry: { attempts: 2, backoff: 1s }" } else { "" };
                let _ = writeln!(s, "  node {n}: agent {} {{ output: Report{retry} }}", agent[*a]);
            }
            Kind::Search => {
                let topic = match (0..i).rev().find(|&p| matches!(kinds[p], Kind::Report(_)) && !in_loop[p]) {
                    Some(p) => format!("n{p}.title"),
                    None => "input.topic".to_string(),
                };
                let _ = writeln!(s, "  node {n}: tool search {{ args: {{ query: {topic} }} }}");
            }
            Kind::Loop => {
                let _ = writeln!(s, "  node {n}: loop [n{}] {{ max_rounds: 3, until: n{}.confidence > 0.9 }}", i + 1, i + 1);
            }
        }
    }
    let _ = writeln!(s, "  node done: end completed");
    let _ = writeln!(s, "  node blocked: end gate_blocked {{ status: failure }}\n");

    let mut gates = 0;
    for i in 0..work {
        if in_loop[i] {
            continue; // the body returns to its loop node
        }
        // A loop goes on after its body.
        let after = if kinds[i] == Kind::Loop { i + 2 } else { i + 1 };
        let next = name(after);
        let from = name(i);
        if router[i] {
            let guard = match kinds[i] {
                Kind::Report(_) => format!("{from}.verdict == \"accept\" and len({from}.findings) > 0"),
                _ => format!("{from}.total > 0 and all(c in {from}.hits: c.year >= 2000)"),
            };
            let _ = writeln!(s, "  {from} -> {next} when {guard}");
            let _ = writeln!(s, "  {from} -> {} else", name(i + 2));
            continue;
        }
        let _ = writeln!(s, "  {from} -> {next}");
        // Gates on some plain edges whose target nothing else reaches.
        let target_plain = (after == work || kinds[after] != Kind::Loop) && !skipped_into[after] && kinds[i] != Kind::Loop;
        if target_plain && (i == 0 || rng.chance(8)) {
            gates += 1;
            let evaluators = match kinds[i] {
                Kind::Report(_) => format!("predicate({from}.confidence > 0.5), confident({from})"),
                Kind::Search => format!("predicate({from}.total > 0)"),
                Kind::Loop => format!("predicate({from}.converged)"),
            };
            let _ = writeln!(
                s,
                "  gate g{i}: {from} -> {next} {{\n    evaluate: [{evaluators}]\n    reason: \"g{i}\"\n    on PASS -> continue\n    on BLOCK -> goto(blocked)\n  }}"
            );
            if after < work && matches!((kinds[i], kinds[after]), (Kind::Report(_), Kind::Report(_))) {
                let _ = writeln!(s, "  handoff {from} -> {next} {{ payload: Report, accept: [len(payload.findings) >= 0] }}");
            }
        }
    }
    s.push_str("\n  on budget_exhausted -> fallback(budget_exhausted)\n}\n\n");
    s.push_str("// Every run that starts terminates.\npolicy terminates: started(n0) => eventually (terminated(completed) or terminated(gate_blocked) or terminated(budget_exhausted))\n");
    s.push_str("policy completes_cleanly: always (completed(n0) => not failed(n0))\n");
    if gates > 0 {
        s.push_str(
            "policy no_search_without_agents: never (called(search) and not (called(search, by: analyst) or called(search, by: writer)))\n",
        );
    }
    s
}

/// The builtin no-op tool the generated workflows use.
pub const NOOP_TOOL: &str = "tool noop: builtin { description: \"Does nothing\", input: any, output: any, function: \"noop\" }\n";

/// A workflow `chain` of `n` no-op tool nodes, `n1 -> … -> nN -> done`
/// (`done`: `end ok`), with `extra` (edges, policies; whole lines) before
/// its closing brace.
pub fn chain_source(n: usize, extra: &str) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(n * 48 + extra.len());
    s.push_str(NOOP_TOOL);
    s.push_str("workflow chain {\n  start: n1\n");
    for i in 1..=n {
        let _ = writeln!(s, "  node n{i}: tool noop");
    }
    s.push_str("  node done: end ok\n");
    for i in 1..n {
        let _ = writeln!(s, "  n{i} -> n{}", i + 1);
    }
    let _ = writeln!(s, "  n{n} -> done");
    s.push_str(extra);
    s.push_str("}\n");
    s
}
