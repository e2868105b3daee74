//! The registry of stable diagnostic codes.
//!
//! A code is never reused or renumbered. Each has a title and an
//! explanation with a minimal triggering example (`flowc explain CODE`).
//! A test holds that every code is triggered by at least one UI test.

use serde::Serialize;

/// A stable diagnostic code such as `E0101` or `W0001`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Code(pub &'static str);

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// What `flowc explain` knows about a code.
#[derive(Debug, Clone, Copy)]
pub struct CodeInfo {
    pub code: Code,
    pub title: &'static str,
    pub explanation: &'static str,
}

/// Looks a code up by its text (case-insensitive).
pub fn lookup(code: &str) -> Option<&'static CodeInfo> {
    CODES.iter().find(|info| info.code.0.eq_ignore_ascii_case(code))
}

/// A registry of stable codes: one constant per code (documented by its
/// title) and `CODES`, every code with its title and explanation, in order.
/// The diagnostic codes below use it, and so do trace check's deviation
/// codes (`flow_runtime::tracecheck::codes`): one mechanism for both.
#[macro_export]
macro_rules! code_registry {
    ($($name:ident = $code:literal, $title:literal, $explanation:literal;)*) => {
        $(#[doc = $title] pub const $name: $crate::Code = $crate::Code($code);)*
        /// Every code, in order.
        pub const CODES: &[$crate::CodeInfo] = &[
            $($crate::CodeInfo { code: $name, title: $title, explanation: $explanation },)*
        ];
    };
}

code_registry! {
    INVALID_TOKEN = "E0001", "invalid token",
r#"The source contains characters that start no Flow token: a character
outside the language (such as `!` alone, `@` or `#`), a string that is not
closed on its line, or an invalid escape inside a string (only `\"`, `\\`,
`\n`, `\t` and `\r` are allowed).

Example:

    agent writer { instructions: "unterminated }

Fix: close the string, remove the character, or put it inside a string."#;

    UNEXPECTED_TOKEN = "E0002", "unexpected token",
r#"The parser found a token where the grammar (grammar/flow.pest) does not
allow it. The message says what was expected. The parser recovers at the
next entry or item, so every syntax error in a file is reported at once.

Example:

    workflow w {
      node a: agent writer
      a -> -> b
    }

Fix: write the construct the message names; see docs/reference.md."#;

    UNCLOSED_DELIMITER = "E0003", "unclosed delimiter",
r#"A `{`, `(` or `[` is never closed: the file (or the declaration) ends
first. The label points at the opening delimiter.

Example:

    agent writer {
      provider: local

Fix: add the matching closing delimiter."#;

    TOO_DEEP = "E0004", "nested too deeply",
r#"The file is valid by the grammar but past one of Flow's limits on
nesting, which keep every pass of the compiler and the runtime within its
stack: brackets and parentheses nest at most 100 deep, and an expression
or policy formula is at most 256 levels tall. Chains of `and`, `or` and
`|` may be as long as you like (they count only the logarithm of their
length); every `+ - * /`, `not`, prefix `-`, `.field`, call, index and
`?` adds a level.

Example:

    workflow w {
      start: a
      a -> b when 1 + 1 + 1 + … (300 terms) > 0
    }

Fix: split the expression (name its parts as separate nodes' outputs or
shorter conditions), or remove needless nesting."#;

    UNDEFINED_NAME = "E0101", "undefined name",
r#"A name is used but never declared: an agent, tool, type, node, state or
any other declaration. When a declared name is close in spelling, the help
suggests it.

Example:

    workflow w {
      start: a
      node a: agent reseacher   // the agent is called `researcher`
    }

Fix: declare the name, import the module that declares it, or correct the
spelling."#;

    DUPLICATE_DECLARATION = "E0102", "duplicate declaration",
r#"Two declarations share one name in the same scope. Top-level declarations
of every kind share one namespace (imports included); nodes and gates share
the namespace of their workflow, its records (`record NAME { … }`) one of
their own; states share that of their machine. A node may not take a name the control
plane fills in expressions: `input`, `calls` or `facts`.

Example:

    agent writer { provider: local }
    tool writer: builtin { description: "x", input: {}, output: {} }

Fix: rename one of them."#;

    WRONG_KIND = "E0103", "wrong kind of declaration",
r#"A name refers to a declaration of another kind than the place requires:
a tool where an agent is expected, a type where a node is expected, and so
on.

Example:

    tool search: builtin { description: "x", input: {}, output: {} }
    workflow w {
      start: a
      node a: agent search   // `search` is a tool, not an agent
    }

Fix: refer to a declaration of the expected kind."#;

    MODULE_NOT_FOUND = "E0104", "module not found",
r#"An `import` names a stdlib module that does not exist or a file that
cannot be read.

Example:

    import std.nonexistent

Fix: `flowc explain --list` does not list modules; see docs/reference.md
("Imports") for the stdlib modules, or check the relative path."#;

    UNKNOWN_PROPERTY = "E0110", "unknown property",
r#"A property key is not one that this declaration accepts. The help
names the closest accepted key. docs/reference.md lists every property of
every declaration.

Example:

    tool search: builtin {
      description: "x", input: {}, output: {}
      timout: 30s          // `timeout`
    }

Fix: correct or remove the key."#;

    MISSING_PROPERTY = "E0111", "missing required property",
r#"A declaration lacks a property it requires: a tool without `input`, a
workflow without `start`, a gate without evaluators, and so on.

Example:

    tool search: builtin { description: "x", output: {} }   // no `input`

Fix: add the property."#;

    DUPLICATE_PROPERTY = "E0112", "duplicate property",
r#"The same property is given twice in one block; only one value can hold.

Example:

    agent writer { provider: local, provider: remote }

Fix: keep one."#;

    ENTRY_NOT_ALLOWED = "E0113", "entry not allowed here",
r#"An entry appears in a block that does not accept it: a node outside a
workflow, an edge in an agent, a handler in a tool or on an `end` node, a
record (`record NAME { … }`) on an `end`, `parallel` or `flow` node or
outside a node or gate, anything but a field inside a record, a guard on a
machine's transition, and so on.

Example:

    agent writer {
      provider: local
      node a: agent writer   // nodes belong in workflows
    }

Fix: move the entry to a block that accepts it."#;

    INVALID_VALUE = "E0114", "invalid value",
r#"A property has a value of the wrong form: a word outside the allowed set,
a string where a duration is expected, a number where a list is expected.
The message lists what is accepted.

Example:

    tool deploy: command { description: "x", input: {}, output: {},
                           argv: ["deploy"], risk: extreme }   // low|medium|high|critical

Fix: use one of the accepted values."#;

    UNKNOWN_VARIANT = "E0115", "unknown kind",
r#"The `: kind` after a declaration name, or the node kind after
`node NAME:`, is not one Flow knows.

Example:

    tool search: carrier_pigeon { ... }   // command | http | mcp | builtin
    node a: robot writer                   // agent | tool | human | ...

Fix: use one of the kinds listed in the message."#;

    NOT_SUPPORTED = "E0116", "not supported yet",
r#"The construct is valid Flow, but neither the runtime nor the model
checker gives it a meaning yet. Rather than accept it and ignore it at run
time, the checker refuses it: what `flowc verify` accepts is what `flow
run` does.

Today: a `flow` node (a sub-flow) is refused, and so is `output` on a
`human` node (its answer is `{ decision, comment }`), a `timeout` on any
evaluator but a `command` probe (a `human` panel's decision never times
out, an `llm` judge's turn is not bounded by it, `predicate`, `schema` and
`builtin` evaluators are answered at once), an `llm` evaluator where a token or cost
budget would have to count its judge's turns (they are not metered yet),
and a `parallel` node's `max_concurrency`
below its number of branches (every branch starts at once). A
blackboard's `append_only: false` is refused (no node changes an entry),
as are `writes` on nodes other than agent, tool and human nodes and
`reads` on nodes other than agent nodes. A gate's
`trigger.on` may only list `"node_completed"` (a gate runs
when its `from` node completes; no other boundary event is raised). A
gate's `replan_scope` must have an entry, a listed node that leads to every
other (a replan re-runs the scope from there, then what depends on it):
a scope in parts that do not lead to one another is refused. A workflow's
`dead_letter` handler may only end the run or move control on
(`terminate`, `halt`, `fallback`, `return_partial`, `goto`, `activate`,
`revise`, `replan`): the sender has completed. A
budget zone's `action` may only be `terminate(reason)`, `halt`,
`fallback(reason)`, `return_partial` (each ends the run), or
`compress_context`, `switch_model(provider)`, `skip_reasoning`, `warn`
(each changes how later turns are made). An action that moves control
(`goto`, `activate`, `revise`, `replan`, `escalate`, `decide`, `retry`,
`continue`, `skip`, `degrade`) has no node or gate to act on when a zone
is entered.

Example:

    budget b {
      tokens: 10k
      zones: [ { zone: fuse, below: 5%, action: goto(wrap_up) } ]
    }

Fix: end the run with `fallback(reason)` and handle the reason, or route
on the budget's `on_exhausted`."#;

    CONFLICTING_PROPERTIES = "E0117", "conflicting properties",
r#"Two properties that exclude each other are both given: an `mcp` tool
reaches its server by `server` (a command line, over stdio) or by `url`
(Streamable HTTP), not both; it calls a tool (`remote_name`), reads a
`resource` or gets a `prompt`, one of the three; and `headers` go only to a
`url` server.

Example:

    tool docs: mcp {
      description: "x", input: {}, output: string
      server: ["mcp-docs"]
      url: "http://127.0.0.1:3001/mcp"   // which one?
    }

Fix: keep the one you mean."#;

    TYPE_MISMATCH = "E0201", "type mismatch",
r#"An expression's operands or value do not have the types the place
requires: comparing a string with a number, `and` over a non-boolean, a
condition that is not a boolean, a duration where tokens are expected.

Example:

    type Pack = { items: [string] }
    workflow w {
      start: a
      node a: agent researcher { output: Pack }
      a -> b when a.items > 3      // a list compared with a number
    }

Fix: compare values of one type (here `len(a.items) > 3`)."#;

    UNKNOWN_FIELD = "E0202", "unknown field",
r#"A field path names a field that the artifact's type does not have. The
help names the closest field.

Example:

    type Pack = { items: [string] }
    ...
    a -> b when len(a.itmes) > 0

Fix: correct the field name or add the field to the type."#;

    NOT_A_TYPE = "E0203", "not a type",
r#"An expression in a type position (after `type X =`, or as `input`,
`output` or `payload`) is not a type. Types are primitive names (`string`,
`int`, `float`, `number`, `bool`, `duration`, `money`, `percent`, `any`,
`null`), declared type names, `[T]`, `T?`, records `{ f: T, g?: T }`, enums
`"a" | "b"`, and `schema("file.json")`.

Example:

    type Score = 0.75

Fix: write a type."#;

    UNKNOWN_UNIT = "E0204", "unknown unit",
r#"A number carries a suffix that is not a unit. Durations: `ms`, `s`, `m`,
`h`, `d`; counts: `k` (thousand), `M` (million); percentages: `%`.

Example:

    budget b { duration: 30min }

Fix: use `30m`."#;

    UNKNOWN_FUNCTION = "E0205", "unknown function",
r#"A call names a function that does not exist in expressions. Functions:
`len`, `exists`, `lower`, `upper`, `contains`, `starts_with`, `matches`,
`split`, `tokens`, `min`, `max`, `sum`, `avg`, `count`, `filter`, `map`,
`flat_map`, `sort_by`, `group_by`, `distinct`, `zip`, `union`,
`intersection`, `difference`, `jaccard`, `round`, `clamp`, `keys`,
`values`, `get` (reference §4.3 gives each one's arguments and result).
(`schema("…")` is a type, not a function; gate evaluators and handler
actions have their own names, listed in docs/reference.md.)

Example:

    a -> b when size(a.items) > 0

Fix: use `len`."#;

    WRONG_ARGUMENTS = "E0206", "wrong arguments",
r#"A function, evaluator or action is called with the wrong number or kind
of arguments: a list where a string is needed, a binding `x in xs: body`
given to a function that binds no variable (or a body of the wrong type:
`filter` needs a bool), a literal `matches` pattern that is not a regular
expression, a `get` key that names no field of the record.

Example:

    a -> b when len(a.items, a.other) > 0
    a -> b when count(filter(i in a.items: i.year)) > 0

Fix: pass the arguments the message describes (here `len(a.items)`, and
`filter(i in a.items: i.year > 2020)`)."#;

    RECURSIVE_TYPE = "E0207", "recursive type alias",
r#"A type is defined in terms of itself without a record or list in
between, so it has no finite meaning.

Example:

    type A = B
    type B = A

Fix: break the cycle."#;

    SCHEMA_UNREADABLE = "E0301", "schema file unreadable",
r#"A `schema("…")` reference names a JSON Schema file that cannot be read.
Paths are relative to the .flow file that names them.

Example:

    type Draft = schema("schemas/missing.json")

Fix: correct the path or add the file."#;

    SCHEMA_INVALID_JSON = "E0302", "schema file is not valid JSON",
r#"A referenced JSON Schema file does not parse as JSON. The label points
at the offending position inside the schema file.

Example (schemas/draft.json):

    { "type": "object", }

Fix: correct the JSON."#;

    SCHEMA_INVALID = "E0303", "invalid JSON Schema",
r#"A referenced file is JSON but not a valid JSON Schema (checked against
the draft 2020-12 meta-schema with the `jsonschema` crate). The label points
into the schema file at the offending keyword.

Example (schemas/draft.json):

    { "type": "objekt" }

Fix: correct the schema."#;

    CANNOT_TERMINATE = "E0401", "node cannot reach an end",
r#"From this node no path leads to an `end` node or a terminating handler:
once the run gets here it can only go around forever (a livelock) or stop
without a declared termination. The witness is a path from the start to the
node.

Example:

    workflow w {
      start: a
      node a: agent x { output: string }
      node b: agent x { output: string }
      node done: end ok
      a -> b
      b -> a          // a and b only lead to each other
    }

Fix: add an edge from the cycle to an `end` node (or a handler that
terminates)."#;

    DEAD_END = "E0402", "dead end",
r#"A node that is not an `end` node has no way on: no edge, no fan-out, no
loop or map to return to, and no handler that terminates. A run reaching it
would stop without a termination reason. The witness is a path to it.

Example:

    workflow w {
      start: a
      node a: agent x { output: string }   // nothing follows `a`
    }

Fix: add an edge to the next node or to an `end` node."#;

    UNBOUNDED_CYCLE = "E0403", "cycle without a bound",
r#"The graph has a cycle that nothing bounds: it is not a `loop` node's
round (bounded by `max_rounds`), no node on it declares `max_visits`, it
crosses no pair of nodes with a hop limit (`max_hops`, whose handler does
not just go on: `continue`, `skip`, `degrade`, `warn` or `retry` let the
pair count again), and the workflow has no budget with a hard limit — or the cycle is of `compute` nodes only, which spend no step and no time, so no budget bounds it. A run may go around it forever.
The witness is a lasso: a path from the start, then the cycle.

Example:

    workflow w {
      start: write
      node write: agent writer { output: Draft }
      node review: agent reviewer { output: Review }
      node done: end ok
      write -> review
      review -> write when review.verdict == "revise"
      review -> done else
    }

Fix: declare `max_visits: 3` on `write` (or `review`), use a `loop` node,
give the workflow `max_hops: 6` (it bounds the back-and-forth between
`write` and `review`), or give the workflow a budget with `steps`."#;

    ROUTER_GAP = "E0404", "routing gap",
r#"Every outgoing edge of this node has a `when` guard, there is no `else`,
and the guards do not cover every case: when none holds, the run has
nowhere to go. Guards over an enum are exhaustive when they cover every
value; guards over a bool when they cover `true` and `false`.

Example:

    review -> publish when review.verdict == "accept"
    review -> write when review.verdict == "revise"
    // verdict is "accept" | "revise" | "reject": "reject" goes nowhere

Fix: add `review -> NODE else`, or a guard for the missing values."#;

    OVERLAPPING_GUARDS = "E0405", "overlapping guards",
r#"The node declares `exclusive: true`, but two of its outgoing guards can
hold at the same time. (Without `exclusive`, edges are tried in source order
and the first whose guard holds is taken.)

Example:

    node route: agent r { output: { level: "low" | "high" }, exclusive: true }
    route -> a when route.level == "low"
    route -> b when route.level == "low" or route.level == "high"

Fix: make the guards disjoint, or drop `exclusive`."#;

    FANOUT_WITHOUT_JOIN = "E0406", "fan-out without a join",
r#"A branch of a `parallel` node never reaches a `join` node that lists it
or a node of the branch: its result is never merged, and the parallel step
has no defined end. A listed node arrives at its join when it finishes, so
a branch of several nodes is joined by listing its last node.

Example:

    node fan: parallel [a, b]
    node merge: join [a]       // `b` is never joined

Fix: list every branch (or the node that ends it) in a `join`."#;

    GATE_NOT_ON_EDGE = "E0501", "gate on a boundary that is not an edge",
r#"A gate guards `from -> to`, but the workflow has no edge from `from` to
`to`: the gate would never be evaluated.

Example:

    video -> voice
    voice -> compose
    gate audio: video -> compose { ... }   // video -> compose is not an edge

Fix: put the gate on an existing edge, or add the edge."#;

    UNHANDLED_OUTCOME = "E0502", "unhandled gate outcome or decision",
r#"A gate can produce an outcome (PASS, REQUIRES_DECISION, BLOCK) or accept a
decision (approve, revise, replan, reject) that no handler covers. Which
outcomes are possible follows from the evaluators and `on_error`: BLOCK when
any evaluator can fail with BLOCK (the default), REQUIRES_DECISION when an
evaluator fails with it or `on_error: REQUIRES_DECISION`; decisions are
possible when REQUIRES_DECISION is (all four, or those in `decisions`).

Example:

    gate g: a -> b {
      evaluate: [predicate(a.ok)]
      on PASS -> continue          // BLOCK has no handler
    }

Fix: add `on BLOCK -> terminate(reason)` (and a handler for each decision)."#;

    GATE_BYPASS = "E0503", "gate bypass",
r#"The node a gate protects can be reached without crossing the gated edge:
some path from the start reaches `to` another way. The witness is that path.

Example:

    a -> b
    x -> b
    gate g: a -> b { ... }   // start -> x -> b skips the gate

Fix: route every path into `to` through the gated edge, or gate the other
edges too."#;

    UNAUTHORISED_TRIGGER = "E0504", "gate trigger not authorised",
r#"A gate's `trigger.by` names an agent that does not run the gate's `from`
node: it can never produce the boundary event, and allowing it would let an
unrelated agent open the gate.

Example:

    node video: agent video_generator { ... }
    gate g: video -> compose { trigger: { by: [composer], on: ["node_completed"] }, ... }

Fix: name the agent that runs `from` (or a principal)."#;

    FAIL_OPEN_GATE = "E0505", "fail-open gate",
r#"The gate's configuration lets a failed, erroring, timed-out or
inconclusive evaluation through: a handler sends BLOCK or `timeout` on to
the guarded node (`continue`, `skip`, `degrade`, or `goto` the `to` node), a
REQUIRES_DECISION is let through without a decision, or the gate has no
evaluators at all. Gates fail closed.

Example:

    gate g: video -> compose {
      evaluate: [audio_probe(video.scenes)]
      on PASS -> continue
      on BLOCK -> continue        // a failed probe passes anyway
    }

Fix: on BLOCK terminate, replan or activate a repair path; on
REQUIRES_DECISION `decide`."#;

    NO_DECIDER = "E0506", "decision without a decider",
r#"The gate can require a decision (REQUIRES_DECISION is possible) but names
no principal in `decided_by`: nobody is allowed to decide, so the run would
wait forever.

Example:

    gate g: a -> b { evaluate: [review(a)], on_error: REQUIRES_DECISION, ... }

Fix: add `decided_by: [editor]`."#;

    EDGE_TYPE_MISMATCH = "E0601", "incompatible types across an edge",
r#"A node declares the `input` type it needs, but a predecessor's output does
not satisfy it: a required field is missing, or a field has another type.
The message names the mismatching field path on both sides. Tool nodes
without `args` take their predecessor's output as the tool's input.

Example:

    node a: agent x { output: { title: string } }
    node b: agent y { input: { title: string, sections: [string] }, output: string }
    a -> b      // `sections` is missing in a's output

Fix: produce the field upstream, or make it optional downstream."#;

    HANDOFF_TYPE_MISMATCH = "E0602", "handoff payload does not fit",
r#"A handoff's `payload` type is not satisfied by the sending node's output,
or does not satisfy the receiving node's declared `input`.

Example:

    node a: agent x { output: { summary: string } }
    handoff a -> b { payload: { summary: string, focus: [string] } }

Fix: align the payload type with what the nodes produce and need."#;

    TOOL_NOT_ALLOWED = "E0701", "tool not allowed",
r#"An agent lists a tool whose `allowed_agents` does not include it, or a
contract grants a tool the receiving agent may not call.

Example:

    tool deploy: command { ..., allowed_agents: [ops] }
    agent writer { provider: p, tools: [deploy] }

Fix: add the agent to the tool's `allowed_agents`, or remove the tool."#;

    ATTENUATION = "E0702", "delegation grants more than the delegator has",
r#"A delegate never gets more than its delegator can give: a contract's
tools must be tools the delegating agent holds, its scope within the
delegator's scope, its budget within what the delegator's budget leaves
after reserves; and the delegate agent's own tools must be within the
contract's.

Example:

    agent manager { provider: p, tools: [search], can_delegate: true }
    contract c { objective: "x", output: R, tools: [search, deploy] }   // deploy

Fix: grant only what the delegator holds."#;

    DELEGATION_FORBIDDEN = "E0703", "delegation not permitted",
r#"A node delegates although its agent may not (`can_delegate` is false by
default), or a delegate delegates further although its contract says
`can_delegate: false`.

Example:

    agent worker { provider: p }          // can_delegate defaults to false
    delegate w -> helper { contract: c }  // w runs `worker`

Fix: set `can_delegate: true` where delegation is intended."#;

    DELEGATION_LIMIT = "E0704", "delegation depth or fan-out exceeded",
r#"A delegation tree is deeper than a contract's `max_depth`, or one
delegator starts more delegates than its contract's `max_fanout`.

Example:

    contract c { objective: "x", output: R, max_fanout: 2 }
    delegate m -> a { contract: c }
    delegate m -> b { contract: c }
    delegate m -> d { contract: c }   // third delegate

Fix: raise the limit or delegate less."#;

    UNCONFIRMED_RISK = "E0705", "risky tool reachable without human approval",
r#"A tool with `risk: high` or `critical`, or with `confirm: true`, can be
called on some path from the start that passes no human node and no gate
that a human decides. The witness is that path.

Example:

    tool refund: http { ..., risk: high, confirm: true }
    node pay: tool refund { ... }
    start -> pay          // no approval before

Fix: put a `human` node (or a gate with `decided_by`) before every call."#;

    PRIVATE_TO_PUBLIC = "E0706", "private data reaches a public sink",
r#"Data labelled "private" (by a node's, agent's or tool's `labels`, or by
a handoff's `labels` on what it hands over) flows along edges and
handoffs to a node that sends data to a tool with
`sink: public`. The witness is the flow from the private source to the
sink.

Example:

    node read: tool read_patient_record { labels: ["private"] }
    node post: tool publish_blog { ... }       // publish_blog has sink: public
    read -> post

Fix: remove the flow, or route it through a node that drops the private
data (and not labelled private)."#;

    BOARD_WRITE = "E0707", "blackboard append not permitted",
r#"A node `writes` a blackboard whose `writers` do not include who acts for
it: the node's agent, or a human node's principals (roles count for their
members). A tool node has nobody acting for it, so it may write only a
blackboard that declares no `writers`. At run time such an append would
be refused; the witness is a path to the node.

Example:

    blackboard decisions { entry: Decision, writers: [scribe] }
    node draft: agent writer { output: Decision, writes: [decisions] }

Fix: add the agent to `writers`, or let a writer append."#;

    BOARD_READ = "E0708", "blackboard read not permitted",
r#"A node `reads` a blackboard whose `readers` do not include the node's
agent. The entries would go into the context of an agent that may not see
them; the witness is a path to the node.

Example:

    blackboard baseline { entry: Requirement, readers: [planner] }
    node code: agent coder { output: Patch, reads: [baseline] }

Fix: add the agent to `readers`, or read the blackboard elsewhere."#;

    BOARD_ENTRY = "E0709", "output does not fit the blackboard's entry",
r#"A node `writes` a blackboard, and its output type does not satisfy the
blackboard's `entry` type: the entry appended would not be of the type
every reader relies on. (A human node's output is `{ decision, comment }`.)

Example:

    blackboard decisions { entry: { topic: string, decision: string } }
    node note: agent scribe { output: { topic: string }, writes: [decisions] }

Fix: make the node's `output` produce every field of the entry."#;

    BOARD_UNAPPENDABLE = "E0710", "blackboard append can never happen",
r#"A node `writes` a blackboard whose `requires` can never be met there:
`requires: approval` and nobody to approve (no principal among the
blackboard's `writers` and no `escalate_to` on the workflow), or
`requires: gate_pass` and no gate on any edge that leaves the node (the
entry is appended only when such a gate records PASS).

Example:

    blackboard decisions { entry: Decision, writers: [scribe], requires: approval }
    workflow w { ... }        // no escalate_to: nobody can approve

Fix: name who approves (a principal in `writers`, or the workflow's
`escalate_to`), or put a gate on an edge out of the writer."#;

    PRIVATE_NOT_LOCAL = "E0711", "private data with no local provider",
r#"An agent node handles data labelled "private" (its `labels`, its
`task.labels` or its agent's `labels`), and none of the providers its
turns may go to — the agent's own and those its `routes` name — is
declared `local: true`. Such a turn is sent only to a local provider: this
node's turns could never be sent. (With a local route but a non-local
default, a turn whose routes do not hold is not sent either: it fails with
`not_local`.)

Example:

    provider cloud: openai { ... }               // not local
    agent clerk { provider: cloud, labels: ["private"] }
    node read: agent clerk { output: Record }

Fix: declare a local provider (`local: true`) and route the private work
to it, or make it the agent's provider."#;

    BUDGET_EXCEEDED = "E0801", "worst-case cost exceeds the budget",
r#"The static worst-case bound of steps, tool calls, tokens or cost over all
paths (loop rounds, map items, `max_visits` and retries included) exceeds
what the workflow's budget allows after its reserves. The witness is the
worst path.

Example:

    budget b { steps: 5 }
    workflow w { start: a; budget: b; node a: loop [x] { max_rounds: 10 } ... }

Fix: raise the budget, lower the bounds, or shorten the path."#;

    INVALID_BUDGET = "E0802", "reserves or zones do not fit",
r#"A budget's reserves add up to more than the whole, or its zones are not
ordered (yellow above red above fuse) or repeat a zone.

Example:

    budget b { tokens: 100k, reserve: { verification: 60%, orchestration: 50% } }

Fix: make the reserves sum to less than 100% and order the zones."#;

    UNREACHABLE_STATE = "E0901", "unreachable state",
r#"A state of a machine cannot be reached from its `initial` state by its
transitions.

Example:

    machine Task { initial: PENDING; PENDING -> DONE; ARCHIVED -> DONE }

Fix: add a transition into the state, or remove it."#;

    STUCK_STATE = "E0902", "machine without a way to finish",
r#"A machine declares no terminal state, names a terminal state that has
transitions out of it, or has a non-terminal state with no transition out.

Example:

    machine Task { initial: PENDING; PENDING -> REVIEW }   // no terminal

Fix: declare `terminal: [...]` and give every other state a way on."#;

    ILLEGAL_TRANSITION = "E0903", "illegal state transition",
r#"Along some path of the workflow, consecutive `state:` settings move the
task between two states the machine does not connect. The witness is the
path.

Example:

    machine Task { initial: PENDING; PENDING -> DISPATCHED -> REVIEW -> MERGED }
    node dispatch: agent d { ..., state: Task.DISPATCHED }
    node merge: agent m { ..., state: Task.MERGED }
    dispatch -> merge      // DISPATCHED -> MERGED is not a transition

Fix: go through the states the machine requires."#;

    MACHINE_MISMATCH = "E0904", "state of an undeclared machine",
r#"A node sets a state of a machine that is not the workflow's `machine`
(or the workflow declares none).

Example:

    workflow w { start: a; node a: agent x { output: string, state: Task.DONE } ... }

Fix: add `machine: Task` to the workflow."#;

    POLICY_VIOLATED = "E1001", "policy violated",
r#"The model checker found a run of the workflow that violates a policy
(reference §8). The witness is that run, step by step: as numbered labels in
the source, and as trace events in the vocabulary of `flow run`
(`flowc verify --witness-dir DIR` writes it as JSONL; `flow trace check`
reports the same violation on it). A run that can cycle forever while an
`eventually`, `until` or `within` is still owed is shown as a lasso: the
prefix, then the cycle. What the data plane decides (an agent's output, a
tool's result, which `when` guard holds, a gate's outcome, a human's
decision) is a free choice of the model, so the witness may need a model
or a human to answer in a particular way.

Example:

    workflow w {
      start: draft
      node draft: agent writer { output: { text: string } }
      node ship: tool deploy { args: {} }
      node done: end shipped
      draft -> ship -> done
      policy reviewed: never started(ship) before approved(editor)
    }

Fix: add the missing gate, decision or edge so that no run breaks the
policy, or correct the policy."#;

    UNUSED_DECLARATION = "W0001", "unused declaration",
r#"A top-level declaration in this file is never referred to: an agent no
node runs, a tool no agent or node uses, a type nothing mentions, a
principal no gate or node names. Declarations from imported modules are
exempt, and so are workflows and policies (they are what a file is for).

Example:

    agent forgotten { provider: local }

Fix: use it or remove it."#;

    UNREACHABLE_NODE = "W0101", "unreachable node",
r#"No path from the workflow's `start` (nor any workflow-level handler)
reaches this node: it can never run.

Example:

    workflow w {
      start: a
      node a: end done
      node orphan: agent x { output: string }
    }

Fix: connect it or remove it."#;

    ROUND_EXIT = "W0102", "edge leaves a loop round",
r#"A node of a `loop`'s round has an edge to a node outside the round.
Taking it does not cross to that node: the round ends there, and the
loop decides what runs next — another round (unless `until` holds or
`max_rounds` rounds have run), then the loop node's own edges. The
edge's target runs only if some other path leads there.

Example:

    workflow w {
      start: refine
      node refine: loop [draft, review] { max_rounds: 3, until: review.ok }
      node draft: agent writer { output: string }
      node review: agent critic { output: { ok: bool } }
      node publish: end published
      draft -> review
      review -> publish when review.ok     // ends the round instead
      refine -> publish
    }

Fix: leave the loop through the loop node's own edges (`refine ->
publish`) and end rounds with `until`; remove the edge from the round."#;

    NOT_ENFORCED = "W0117", "not enforced at run time yet",
r#"The property is valid Flow and the checker checks its value, but
nothing at run time acts on it yet: a run behaves as if it were not
written. Rather than accept it in silence, the checker says so where it
is written, and reference §13 (the property ledger) lists it as
`warned`. Today: a tool's `audit` level and retention, and a contract's
`reporting_interval`.

Example:

    contract c {
      objective: "Summarise"
      reporting_interval: 1m   // W0117: delegates report no progress yet
    }

Fix: nothing is required — the flow runs — but do not rely on the
property until the runtime enforces it."#;

    NO_STATIC_BOUND = "W0801", "no static bound",
r#"The workflow declares a budget limit, but the compiler cannot bound the
worst case of that quantity: a `map` has no `max_items`, a cycle is
bounded only by the budget itself (a rework cycle without `max_visits`, a
`revise` handler that restarts its node), or a `flow` node runs another
workflow. The budget is still enforced at run time; this is a warning
that the static guarantee is missing. (Turns whose input is unbounded
are W0802.)

Example:

    budget b { tokens: 100k }
    workflow w {
      start: draft; budget: b
      node draft: agent writer { output: string }
      node check: agent critic { output: { ok: bool } }
      node done: end ok
      draft -> check
      check -> done when check.ok
      check -> draft else                  // nothing bounds the rework
    }

Fix: give a node on the cycle `max_visits`, a `map` its `max_items`, or
the nodes a `budget: { tokens: …, cost: … }`."#;

    BUDGET_CONDITIONAL = "W0802", "budget bound is conditional",
r#"A budget limits tokens (or cost), and some model turn it pays for has no
input ceiling: neither its agent nor its provider declares
`max_input_tokens`. A run meters every turn's input tokens as the
provider reports them, and nothing bounds that turn's input, so the budget
is not proven sufficient, whatever the rest of the bound says. The message
gives what is counted (every output at `max_tokens`, the declared inputs)
and how many turns' inputs are left out; the bound holds only if those
inputs fit in what remains. Reported in any scope: the run, an agent's
budget, a node's, a contract's. (Cost is conditional only when the
provider prices input tokens.)

Example:

    provider p: scripted { max_tokens: 2k }   // no max_input_tokens
    agent a { provider: p, max_turns: 1 }
    budget b { tokens: 16k }
    workflow w { start: x; budget: b; node x: agent a { output: string }; ... }

Fix: declare `max_input_tokens` on the provider (or the agent). Each turn
then counts as at most `max_input_tokens + max_tokens`, and the control
plane refuses to send a turn whose request may hold more input
(`input_too_large`)."#;

    POLICY_UNKNOWN = "W1001", "policy not decided",
r#"The model checker could not decide a policy: the product of the
workflow's abstract state space and the policy's automaton exceeds the
state bound (`--max-states`, default 2,000,000), the policy has more
than 64 distinct atoms, or the workflow has more than 65,534 nodes (or
gates, tools, agents, handler sites), past the model's 16-bit numbering.
Nothing is claimed: the policy is neither proven
nor refuted (it is never reported as holding).

Example:

    workflow w {
      start: fan
      node fan: parallel [a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12]
      ...
    }

Fix: raise `--max-states`, reduce parallel branches or loop bounds, or
split the workflow."#;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_sorted_and_well_formed() {
        for pair in CODES.windows(2) {
            assert!(pair[0].code.0 < pair[1].code.0 || pair[0].code.0.starts_with('E') && pair[1].code.0.starts_with('W'));
        }
        for info in CODES {
            let c = info.code.0;
            assert_eq!(c.len(), 5);
            assert!(c.starts_with('E') || c.starts_with('W'));
            assert!(info.explanation.contains("Example"), "{c} has no example");
        }
        assert_eq!(lookup("e0101").map(|i| i.code), Some(UNDEFINED_NAME));
    }
}
