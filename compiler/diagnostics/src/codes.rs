//! The registry of stable diagnostic codes.
//!
//! A code is never reused or renumbered. Each has a title and an
//! explanation with a minimal triggering example (`flowc explain CODE`).
//! A test holds that every code is triggered by at least one UI test.

use serde::Serialize;

/// A stable diagnostic code such as `E0101` or `W0001`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Code(pub &'static str);

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

macro_rules! codes {
    ($($name:ident = $code:literal, $title:literal, $explanation:literal;)*) => {
        $(#[doc = $title] pub const $name: Code = Code($code);)*
        /// Every code, in order.
        pub const CODES: &[CodeInfo] = &[
            $(CodeInfo { code: $name, title: $title, explanation: $explanation },)*
        ];
    };
}

codes! {
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
the namespace of their workflow; states that of their machine.

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
guard on a machine's transition, and so on.

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
`len`, `exists`, `lower`, `upper`, `contains`, `starts_with`, `min`, `max`,
`sum`, `count`. (`schema("…")` is a type, not a function; gate evaluators and
handler actions have their own names, listed in docs/reference.md.)

Example:

    a -> b when size(a.items) > 0

Fix: use `len`."#;

    WRONG_ARGUMENTS = "E0206", "wrong arguments",
r#"A function, evaluator or action is called with the wrong number or kind
of arguments.

Example:

    a -> b when len(a.items, a.other) > 0

Fix: pass the arguments the message describes."#;

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

    UNUSED_DECLARATION = "W0001", "unused declaration",
r#"A top-level declaration in this file is never referred to: an agent no
node runs, a tool no agent or node uses, a type nothing mentions, a
principal no gate or node names. Declarations from imported modules are
exempt, and so are workflows and policies (they are what a file is for).

Example:

    agent forgotten { provider: local }

Fix: use it or remove it."#;
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
