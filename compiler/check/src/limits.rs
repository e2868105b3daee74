//! Bounds on the JSON and YAML Flow reads: plans, inputs, cassettes and
//! scripted replies. Reading them is linear in their size and their nesting
//! is bounded, so no input file can exhaust a reader's stack or make it
//! take quadratic time.
//!
//! The nesting is measured by one pass over the text before any parser sees
//! it: brackets (`[` `{`) outside strings, and for YAML also the block
//! levels opened by deeper indentation. A document nested deeper than
//! [`MAX_NESTING`] is refused with an error that says so.

use serde::de::DeserializeOwned;

/// The deepest nesting read. Plans nest about four levels per level of an
/// expression tree (a node, its arguments, its type), and expression trees
/// are at most [`flow_syntax::MAX_TREE_HEIGHT`] tall.
pub const MAX_NESTING: usize = 4 * flow_syntax::MAX_TREE_HEIGHT as usize + 64;

/// The largest document read, in bytes (256 MiB).
pub const MAX_SIZE: usize = 256 << 20;

/// How deeply `text` nests brackets outside strings (JSON, or YAML's flow
/// style), the deepest point first reached.
pub fn bracket_nesting(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut quote: Option<u8> = None;
    let mut escaped = false;
    for &b in text.as_bytes() {
        match quote {
            Some(q) => {
                if b == b'\n' {
                    // JSON strings hold no raw newline; YAML's quoted
                    // scalars rarely span lines: resynchronise.
                    quote = None;
                    escaped = false;
                } else if escaped {
                    escaped = false;
                } else if b == b'\\' && q == b'"' {
                    escaped = true;
                } else if b == q {
                    quote = None;
                }
            }
            None => match b {
                b'"' | b'\'' => quote = Some(b),
                b'[' | b'{' => {
                    depth += 1;
                    deepest = deepest.max(depth);
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
    }
    deepest
}

/// How deeply a YAML document nests: its flow-style brackets plus the
/// block levels its indentation opens (an upper bound on both).
pub fn yaml_nesting(text: &str) -> usize {
    let mut levels: Vec<usize> = Vec::new();
    let mut deepest_block = 0usize;
    for line in text.lines() {
        let content = line.trim_start_matches([' ', '-']);
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        // `- - a` opens a level per dash, like deeper indentation.
        let indent = line.len() - content.len();
        while levels.last().is_some_and(|&l| l >= indent) {
            levels.pop();
        }
        levels.push(indent);
        deepest_block = deepest_block.max(levels.len() + line[..indent].matches('-').count());
    }
    deepest_block + bracket_nesting(text)
}

/// Refuses a document larger than [`MAX_SIZE`] or nested deeper than [`MAX_NESTING`].
fn within_limits(what: &str, text: &str, nesting: usize) -> Result<(), String> {
    if text.len() > MAX_SIZE {
        return Err(format!("{what} is {} bytes; Flow reads at most {MAX_SIZE}", text.len()));
    }
    if nesting > MAX_NESTING {
        return Err(format!("{what} nests {nesting} levels deep; Flow reads at most {MAX_NESTING}"));
    }
    Ok(())
}

/// Reads JSON within the limits; `what` names the document in errors
/// ("the plan", "input.json").
pub fn json_from_str<T: DeserializeOwned>(what: &str, text: &str) -> Result<T, String> {
    within_limits(what, text, bracket_nesting(text))?;
    let mut deserializer = serde_json::Deserializer::from_str(text);
    // serde_json's own limit (128) is below what a valid plan may need;
    // the nesting was bounded above instead.
    deserializer.disable_recursion_limit();
    let value = T::deserialize(&mut deserializer).map_err(|e| format!("{what} is not valid: {e}"))?;
    deserializer.end().map_err(|e| format!("{what} is not valid: {e}"))?;
    Ok(value)
}

/// Reads YAML within the limits.
pub fn yaml_from_str<T: DeserializeOwned>(what: &str, text: &str) -> Result<T, String> {
    within_limits(what, text, yaml_nesting(text))?;
    serde_yaml::from_str(text).map_err(|e| format!("{what} is not valid: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brackets_inside_strings_do_not_count() {
        assert_eq!(bracket_nesting(r#"{"a": [1, {"b": "[[[\"{{"}]}"#), 3);
        assert_eq!(bracket_nesting("[]"), 1);
        assert_eq!(bracket_nesting("1"), 0);
    }

    #[test]
    fn yaml_counts_indentation_and_brackets() {
        assert_eq!(yaml_nesting("a: 1\nb: 2\n"), 1);
        assert_eq!(yaml_nesting("a:\n  b:\n    c: [1, [2]]\n"), 5);
        assert_eq!(yaml_nesting("- - - x\n"), 4);
    }

    #[test]
    fn a_deep_document_is_refused_with_its_depth() {
        let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
        let error = json_from_str::<serde_json::Value>("the input", &deep).unwrap_err();
        assert!(error.contains("nests 100000 levels deep"), "{error}");
        // One block level (the document) plus the brackets.
        let error = yaml_from_str::<serde_json::Value>("the cassette", &deep).unwrap_err();
        assert!(error.contains("nests 100001 levels deep"), "{error}");
        let within = format!("{}1{}", "[".repeat(600), "]".repeat(600));
        assert!(json_from_str::<serde_json::Value>("the input", &within).is_ok());
    }
}
