//! The normative grammar of Flow, `grammar/flow.pest`, and the reference
//! parser pest derives from it.
//!
//! This parser is the specification, not the production path: the
//! compiler's hand-written parser (crate `flow-syntax`) must accept exactly
//! the inputs this one accepts. Use [`accepts`] for that comparison.

use pest::Parser as _;

/// The pest-derived reference parser.
#[derive(pest_derive::Parser, Debug)]
#[grammar = "flow.pest"]
pub struct FlowGrammar;

/// Whether `source` is a syntactically valid Flow file.
pub fn accepts(source: &str) -> bool {
    check(source).is_ok()
}

/// Parses `source` with the reference grammar; the error, if any, is pest's
/// own rendering.
pub fn check(source: &str) -> Result<(), String> {
    FlowGrammar::parse(Rule::file, source).map(|_| ()).map_err(|error| error.to_string())
}

/// Whether `input`, in full, matches grammar rule `rule`. For per-rule tests.
pub fn matches_rule(rule: Rule, input: &str) -> bool {
    match FlowGrammar::parse(rule, input) {
        Ok(mut pairs) => pairs.next().is_some_and(|pair| pair.as_str() == input),
        Err(_) => false,
    }
}
