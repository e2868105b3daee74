//! A generator of large, valid Flow programs, for benchmarks and scale
//! tests of the front end.
//!
//! [`workflow`] writes one program: a few record types (with nested lists),
//! providers, a principal, a handful of tools and agents, an evaluator, a
//! budget, one workflow whose nodes form a chain-and-branch DAG of agent and
//! tool nodes (edges guarded by `when` conditions over the nodes' outputs,
//! gates with `predicate(…)` evaluators and handlers, handoffs), and a few
//! policies. The output is a pure function of `(nodes, seed)` and checks
//! with no diagnostics at all (no errors, no warnings).

use std::fmt::Write as _;

/// A tiny deterministic PRNG (xorshift64*), so generated programs need no
/// `rand` dependency and are the same on every platform.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        // Mix the seed so that nearby seeds diverge at once; never zero.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Rng(if z == 0 { 0x2545_F491_4F6C_DD1D } else { z })
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        ((self.next() >> 11) % n as u64) as usize
    }

    /// A number in `lo..=hi`.
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `percent / 100`.
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// The output types nodes produce. Each is a declared record type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Out {
    Report,
    Verdict,
    Finding,
    SearchResult,
}

impl Out {
    fn type_name(self) -> &'static str {
        match self {
            Out::Report => "Report",
            Out::Verdict => "Verdict",
            Out::Finding => "Finding",
            Out::SearchResult => "SearchResult",
        }
    }

    /// The prefix of node names producing this type.
    fn prefix(self) -> &'static str {
        match self {
            Out::Report => "report",
            Out::Verdict => "review",
            Out::Finding => "extract",
            Out::SearchResult => "search",
        }
    }
}

const AGENT_OUTPUTS: &[Out] = &[Out::Report, Out::Verdict, Out::Finding];

/// Tools: name and output type. Every tool takes a `Query`.
const TOOLS: &[(&str, Out)] = &[
    ("web_search", Out::SearchResult),
    ("extract_claims", Out::Finding),
    ("lint_draft", Out::Verdict),
    ("summarize_sources", Out::Report),
];

/// Agents: name and instructions.
const AGENTS: &[(&str, &str)] = &[
    ("researcher", "Collect evidence and cite every source."),
    ("analyst", "Extract the claims the evidence supports."),
    ("writer", "Write sections from the outline and the findings."),
    ("critic", "Review the draft; list issues with a severity."),
    ("editor", "Tighten the prose; keep every citation."),
    ("summarizer", "Summarize the findings for the next stage."),
];

const PROMPTS: &[&str] = &[
    "Draft the next section from the findings so far.",
    "Check every claim against its citations.",
    "Merge the partial results into one report.",
    "List the open issues and how severe they are.",
    "Extract the key claims with their evidence.",
    "Rewrite the weakest section.",
];

const TAGS: &[&str] = &["core", "background", "needs_review", "contested", "primary", "survey"];

#[derive(Debug, Clone)]
struct Node {
    name: String,
    out: Out,
    /// `Some(tool index)` for tool nodes, `None` for agent nodes.
    tool: Option<usize>,
    agent: usize,
}

#[derive(Debug, Clone)]
struct Edge {
    from: usize,
    to: usize,
    guard: Option<String>,
}

/// A deterministic, valid Flow program with `nodes` node statements in its
/// one workflow (two of them `end` nodes when `nodes >= 10`). The same
/// `(nodes, seed)` always gives the same text.
pub fn workflow(nodes: usize, seed: u64) -> String {
    let mut rng = Rng::new(seed);
    let nodes = nodes.max(1);
    let ends = if nodes >= 10 {
        2
    } else if nodes >= 2 {
        1
    } else {
        0
    };
    let work = nodes - ends;
    let done = (ends >= 1).then_some("done");
    let blocked = (ends >= 2).then_some("blocked");

    // ---------------------------------------------------------- the nodes
    let mut graph: Vec<Node> = Vec::with_capacity(work);
    for i in 0..work {
        // The first node searches; afterwards roughly a third are tools.
        let (tool, out) = if i == 0 || rng.chance(30) {
            let t = if i == 0 { 0 } else { rng.below(TOOLS.len()) };
            (Some(t), TOOLS[t].1)
        } else {
            (None, *rng.pick(AGENT_OUTPUTS))
        };
        let agent = rng.below(AGENTS.len());
        graph.push(Node { name: format!("{}_{i}", out.prefix()), out, tool, agent });
    }

    // ---------------------------------------------------------- the edges
    let mut preds = vec![0usize; work];
    let mut edges: Vec<Edge> = Vec::new();
    for i in 1..work {
        let pred = if rng.chance(60) { i - 1 } else { rng.range(i.saturating_sub(10), i - 1) };
        preds[i] = pred;
        let primary = rng.chance(35).then(|| guard(&mut rng, &graph, pred));
        edges.push(Edge { from: pred, to: i, guard: primary });
        // Some nodes join two branches: a second, guarded incoming edge.
        if i >= 3 && rng.chance(20) {
            let other = rng.range(i.saturating_sub(20), i - 1);
            if other != pred {
                let second = guard(&mut rng, &graph, other);
                edges.push(Edge { from: other, to: i, guard: Some(second) });
            }
        }
    }

    // ---------------------------------------------------------- the text
    let mut s = String::with_capacity(work * 320 + 4096);
    let _ = writeln!(s, "// Generated by flow_tests::generate::workflow({nodes}, {seed}): {work} work nodes.");
    s.push_str(HEADER);

    // Tools: each lists the agents allowed to call it; agents list tools.
    for (t, (name, out)) in TOOLS.iter().enumerate() {
        let allowed: Vec<&str> = AGENTS.iter().enumerate().filter(|(a, _)| a % TOOLS.len() == t).map(|(_, (n, _))| *n).collect();
        let _ = write!(
            s,
            "tool {name}: builtin {{\n  description: \"Generated tool {name}\"\n  input: Query\n  output: {}\n  allowed_agents: [{}]\n  timeout: {}s\n  rate_limit: {} / 1m\n  risk: {}\n  effect: none\n}}\n\n",
            out.type_name(),
            allowed.join(", "),
            10 + 5 * t,
            10 * (t + 1),
            ["low", "medium"][t % 2],
        );
    }
    for (a, (name, instructions)) in AGENTS.iter().enumerate() {
        let tool = TOOLS[a % TOOLS.len()].0;
        let _ = write!(s, "agent {name} {{\n  provider: local\n  tools: [{tool}]\n  instructions: \"{instructions}\"\n");
        if a == 0 {
            s.push_str("  routes: [{ when: task.risk == \"high\" or \"sensitive\" in task.labels, use: remote, model: \"large\" }]\n");
        }
        if a % 2 == 1 {
            s.push_str("  context: filtered\n  context_fields: [\"findings\", \"notes\"]\n");
        }
        s.push_str("}\n\n");
    }

    // The workflow's gates and handoffs, chosen now so the evaluator is
    // declared only when some gate uses it.
    let mut gates: Vec<usize> = Vec::new(); // indices into `edges`
    let mut handoffs: Vec<usize> = Vec::new();
    for (e, edge) in edges.iter().enumerate() {
        if preds[edge.to] != edge.from {
            continue; // only primary edges carry gates and handoffs
        }
        let agents = graph[edge.from].tool.is_none() && graph[edge.to].tool.is_none();
        if rng.chance(7) {
            gates.push(e);
        } else if agents && rng.chance(5) {
            handoffs.push(e);
        }
    }
    // At least one gate, and one behind a report (for `quality_check`).
    if !gates.iter().any(|&e| graph[edges[e].from].out == Out::Report) {
        if let Some(e) = edges.iter().position(|e| preds[e.to] == e.from && graph[e.from].out == Out::Report) {
            gates.push(e);
            gates.sort_unstable();
        }
    }
    if gates.is_empty() && !edges.is_empty() {
        gates.push(0);
    }
    let evaluator_gate = gates.iter().copied().find(|&e| graph[edges[e].from].out == Out::Report).or(gates.first().copied());
    if handoffs.is_empty() {
        if let Some(e) = edges.iter().position(|e| preds[e.to] == e.from && graph[e.from].tool.is_none() && graph[e.to].tool.is_none()) {
            handoffs.push(e);
        }
    }
    let uses_evaluator = !gates.is_empty();
    if uses_evaluator {
        s.push_str(
            "evaluator quality_check: predicate {\n  description: \"A report is confident and backed by findings\"\n  input: Report\n  check: input.confidence >= 0.6 and len(input.findings) > 0 and all(f in input.findings: len(f.citations) > 0)\n  fail: REQUIRES_DECISION\n  reason: \"low_quality\"\n}\n\n",
        );
    }
    s.push_str(BUDGET);

    let _ = write!(
        s,
        "workflow generated {{\n  description: \"A generated workflow of {nodes} nodes\"\n  input: Query\n  output: Report\n  start: {}\n  budget: run_budget\n  escalate_to: reviewer\n  deadline: 2h\n  concurrency: 8\n  max_hops: 4\n\n",
        graph[0].name
    );

    for (i, node) in graph.iter().enumerate() {
        match node.tool {
            Some(t) => {
                let args = tool_args(&graph, i, preds[i]);
                let _ = write!(s, "  node {}: tool {} {{\n    args: {args}\n", node.name, TOOLS[t].0);
                if rng.chance(40) {
                    let _ = writeln!(s, "    retry: {{ attempts: {}, backoff: {}s }}", rng.range(2, 4), rng.range(1, 5));
                }
                let _ = writeln!(s, "    on_failure: {}", rng.pick(&["retry", "skip", "terminate", "degrade"]));
                s.push_str("  }\n");
            }
            None => {
                let _ = write!(
                    s,
                    "  node {}: agent {} {{ output: {}, prompt: \"{}\", repair: {}",
                    node.name,
                    AGENTS[node.agent].0,
                    node.out.type_name(),
                    rng.pick(PROMPTS),
                    rng.range(0, 2)
                );
                if rng.chance(30) {
                    let _ = write!(s, ", timeout: {}m", rng.range(1, 10));
                }
                if rng.chance(20) {
                    let _ = write!(s, ", labels: [\"{}\"]", rng.pick(TAGS));
                }
                if rng.chance(25) {
                    let _ = write!(
                        s,
                        "\n    on {} -> {}\n  ",
                        rng.pick(&["failure", "timeout", "invalid_output"]),
                        rng.pick(&["retry", "skip", "degrade"])
                    );
                } else {
                    s.push(' ');
                }
                s.push_str("}\n");
            }
        }
    }
    if let Some(done) = done {
        let _ = writeln!(s, "  node {done}: end completed");
    }
    if let Some(blocked) = blocked {
        let _ = writeln!(s, "  node {blocked}: end gate_blocked {{ status: failure }}");
    }
    s.push('\n');

    // Edges, merged into chains `a -> b -> c` where unguarded hops meet.
    let mut k = 0;
    while k < edges.len() {
        let mut chain = vec![edges[k].from, edges[k].to];
        let mut guard = edges[k].guard.as_deref();
        while guard.is_none() && chain.len() < 5 && k + 1 < edges.len() && edges[k + 1].from == *chain.last().expect("non-empty") {
            k += 1;
            chain.push(edges[k].to);
            guard = edges[k].guard.as_deref();
        }
        let names: Vec<&str> = chain.iter().map(|&n| graph[n].name.as_str()).collect();
        let _ = write!(s, "  {}", names.join(" -> "));
        match guard {
            Some(g) => {
                let _ = writeln!(s, " when {g}");
            }
            None => s.push('\n'),
        }
        k += 1;
    }
    // Sinks go to `done`; nodes whose every way out is guarded get an
    // `else` edge to it.
    if let Some(done) = done {
        let mut outs = vec![(0usize, 0usize); work]; // (guarded, unguarded)
        for edge in &edges {
            if edge.guard.is_some() {
                outs[edge.from].0 += 1;
            } else {
                outs[edge.from].1 += 1;
            }
        }
        for (i, (guarded, unguarded)) in outs.iter().enumerate() {
            match (guarded, unguarded) {
                (0, 0) => {
                    let _ = writeln!(s, "  {} -> {done}", graph[i].name);
                }
                (_, 0) => {
                    let _ = writeln!(s, "  {} -> {done} else", graph[i].name);
                }
                _ => {}
            }
        }
    }
    s.push('\n');

    for &e in &gates {
        let edge = &edges[e];
        let from = &graph[edge.from];
        let mut evaluators = vec![format!("predicate({})", guard(&mut rng, &graph, edge.from))];
        if rng.chance(50) {
            evaluators.push(format!("predicate({})", guard(&mut rng, &graph, edge.from)));
        }
        if Some(e) == evaluator_gate || (from.out == Out::Report && rng.chance(50)) {
            evaluators.push(format!("quality_check({})", from.name));
        }
        let on_block = match blocked {
            Some(b) => format!("goto({b})"),
            None => "terminate(gate_blocked)".to_string(),
        };
        let _ = write!(
            s,
            "  gate gate_{}: {} -> {} {{\n    evaluate: [\n      {},\n    ]\n    on_error: BLOCK\n    reason: \"gate_{}\"\n    decided_by: [reviewer]\n    timeout: {}m\n    on PASS -> continue\n    on BLOCK -> {on_block}\n    on REQUIRES_DECISION -> escalate(reviewer)\n  }}\n",
            edge.to,
            from.name,
            graph[edge.to].name,
            evaluators.join(",\n      "),
            edge.to,
            rng.range(1, 30),
        );
    }
    for &e in &handoffs {
        let edge = &edges[e];
        let from = &graph[edge.from];
        let (fields, accept) = match from.out {
            Out::Report => ("\"findings\", \"notes\"", "len(payload.findings) > 0, payload.status != \"fail\""),
            Out::Verdict => ("\"issues\"", "payload.verdict != \"reject\""),
            Out::Finding => ("\"citations\"", "len(payload.citations) > 0"),
            Out::SearchResult => ("\"hits\"", "payload.total > 0"),
        };
        let _ = write!(
            s,
            "  handoff {} -> {} {{\n    reason: \"{} ready\"\n    payload: {}\n    context: filtered\n    context_fields: [{fields}]\n    accept: [{accept}]\n    max_hops: 2\n  }}\n",
            from.name,
            graph[edge.to].name,
            from.out.type_name().to_lowercase(),
            from.out.type_name(),
        );
    }
    s.push_str("\n  on budget_exhausted -> fallback(budget_exhausted)\n  on timeout -> escalate(reviewer)\n");
    let _ = writeln!(s, "\n  policy first_step_completes: eventually completed({}) {{ response: warn }}", graph[0].name);
    s.push_str("}\n\n");

    // Top-level policies: over the workflow's nodes, gates and tools.
    if let Some(&e) = gates.first() {
        let edge = &edges[e];
        let _ = writeln!(
            s,
            "// The node behind the first gate never starts before the gate passes.\npolicy gated_{0}: never started({1}) before outcome(gate_{0}, PASS)\n",
            edge.to, graph[edge.to].name
        );
    }
    if done.is_some() {
        let _ = writeln!(
            s,
            "// Every run that starts terminates.\npolicy terminates: started({}) => eventually (terminated(completed) or terminated(gate_blocked) or terminated(budget_exhausted))\n",
            graph[0].name
        );
    }
    let _ = writeln!(
        s,
        "policy search_by_researcher: always (called(web_search, by: researcher) => within 20 steps completed({})) {{ response: warn }}",
        graph[work - 1].name
    );
    s
}

const HEADER: &str = r#"
type Citation = { id: string, year: int, tags: [string] }

type Finding = { claim: string, score: float, citations: [Citation], tags: [string] }

type Status = "ok" | "retry" | "fail"

type Report = {
  title: string,
  status: Status,
  confidence: float,
  summary?: string,
  findings: [Finding],
  notes: [string],
  sections: [{ name: string, claims: [string], citation_ids: [string] }],
}

type Verdict = {
  verdict: "accept" | "revise" | "reject",
  score: int,
  issues: [{ code: string, severity: int }],
}

type SearchResult = { hits: [Citation], total: int, complete: bool }

type Query = { topic: string, limit: int, keywords: [string] }

provider local: scripted {
  description: "Deterministic replies for offline runs"
  script: "cassettes/generated.yaml"
}

provider remote: openai {
  base_url: "https://api.example.com/v1"
  model: "example-large"
  api_key_env: "EXAMPLE_API_KEY"
  timeout: 60s
}

principal reviewer: human { description: "Decides when a gate cannot" }

"#;

const BUDGET: &str = r#"budget run_budget {
  steps: 100k
  tokens: 50M
  duration: 12h
  tool_calls: 20k
  cost: $500.00
  reserve: { verification: 10% }
  zones: [
    { zone: yellow, below: 50%, action: compress_context },
    { zone: red, below: 20%, action: skip_reasoning },
    { zone: fuse, below: 5%, action: return_partial },
  ]
  on_exhausted: fallback(budget_exhausted)
}

"#;

/// Arguments of a tool node: from its predecessor's output where the types
/// fit, else from the workflow input.
fn tool_args(graph: &[Node], i: usize, pred: usize) -> String {
    if i == 0 {
        return "{ topic: input.topic, limit: input.limit, keywords: input.keywords }".into();
    }
    let p = &graph[pred].name;
    match graph[pred].out {
        Out::Report => format!("{{ topic: {p}.title, limit: len({p}.findings), keywords: {p}.notes }}"),
        Out::Verdict => format!("{{ topic: input.topic, limit: {p}.score, keywords: input.keywords }}"),
        Out::Finding => format!("{{ topic: {p}.claim, limit: len({p}.citations), keywords: {p}.tags }}"),
        Out::SearchResult => format!("{{ topic: input.topic, limit: {p}.total, keywords: input.keywords }}"),
    }
}

/// One boolean condition over the output of node `n`.
fn atom(rng: &mut Rng, graph: &[Node], n: usize) -> String {
    let p = &graph[n].name;
    let small = rng.range(0, 5);
    let frac = rng.range(1, 9);
    let year = rng.range(2000, 2024);
    match graph[n].out {
        Out::Report => match rng.below(8) {
            0 => format!("{p}.status == \"{}\"", rng.pick(&["ok", "retry", "fail"])),
            1 => format!("{p}.confidence >= 0.{frac}"),
            2 => format!("len({p}.findings) > {small}"),
            3 => format!("all(f in {p}.findings: f.score >= 0.{frac})"),
            4 => format!("any(f in {p}.findings: len(f.citations) >= {small} and all(c in f.citations: c.year >= {year}))"),
            5 => format!("exists({p}.summary)"),
            6 => format!("\"{}\" in {p}.notes", rng.pick(TAGS)),
            _ => format!("all(s in {p}.sections: len(s.citation_ids) >= len(s.claims))"),
        },
        Out::Verdict => match rng.below(5) {
            0 => format!("{p}.verdict == \"{}\"", rng.pick(&["accept", "revise", "reject"])),
            1 => format!("{p}.score >= {small}"),
            2 => format!("len({p}.issues) == 0"),
            3 => format!("all(i in {p}.issues: i.severity < {})", small + 1),
            _ => format!("any(i in {p}.issues: i.code == \"E{year}\")"),
        },
        Out::Finding => match rng.below(4) {
            0 => format!("{p}.score > 0.{frac}"),
            1 => format!("len({p}.citations) >= {small}"),
            2 => format!("\"{}\" in {p}.tags", rng.pick(TAGS)),
            _ => format!("all(c in {p}.citations: c.year >= {year} and len(c.tags) > 0)"),
        },
        Out::SearchResult => match rng.below(5) {
            0 => format!("{p}.complete"),
            1 => format!("{p}.total > {}", small * 10),
            2 => format!("len({p}.hits) >= {small}"),
            3 => format!("any(h in {p}.hits: h.year >= {year})"),
            _ => format!("not {p}.complete"),
        },
    }
}

/// A guard over node `n`'s output: one to three conditions joined with
/// `and` / `or`, sometimes also about the workflow input or an earlier node.
fn guard(rng: &mut Rng, graph: &[Node], n: usize) -> String {
    let first = atom(rng, graph, n);
    match rng.below(6) {
        0 | 1 => first,
        2 => format!("{first} and {}", atom(rng, graph, n)),
        3 => format!("{first} or {}", atom(rng, graph, n)),
        4 => {
            let other = rng.range(n.saturating_sub(5), n);
            format!("{first} and ({} or {})", atom(rng, graph, other), atom(rng, graph, n))
        }
        _ => {
            let input = if rng.chance(50) {
                format!("input.limit > {}", rng.range(1, 50))
            } else {
                format!("len(input.keywords) >= {}", rng.range(0, 3))
            };
            format!("({first} or {input}) and not ({})", atom(rng, graph, n))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_deterministic_and_spread() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        let xs: Vec<u64> = (0..100).map(|_| a.next()).collect();
        let ys: Vec<u64> = (0..100).map(|_| b.next()).collect();
        assert_eq!(xs, ys);
        let mut c = Rng::new(0);
        let mut seen = [false; 10];
        for _ in 0..1000 {
            seen[c.below(10)] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }

    #[test]
    fn node_count_is_as_asked() {
        for n in [1, 2, 5, 10, 57] {
            let text = workflow(n, 3);
            assert_eq!(text.matches("\n  node ").count(), n, "{n} nodes asked:\n{text}");
        }
    }
}
