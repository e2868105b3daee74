//! The VS Code extension (grammar/editors/vscode) against the language:
//! its TextMate grammar highlights exactly the lexer's reserved words, its
//! rules are wired together, and its manifest contributes the grammar for
//! `.flow` files.
//!
//! The scopes themselves are checked by the extension's own test, which
//! tokenizes real files with VS Code's engine (`npm test`, run by
//! `.ci/build-vsix.sh`).

use std::collections::BTreeSet;
use std::path::Path;

use flow_syntax::lexer::KEYWORDS;
use serde_json::Value;

const GRAMMAR: &str = include_str!("../editors/vscode/syntaxes/flow.tmLanguage.json");
const PACKAGE: &str = include_str!("../editors/vscode/package.json");
const LANGUAGE_CONFIGURATION: &str = include_str!("../editors/vscode/language-configuration.json");

fn extension_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/editors/vscode"))
}

fn json(name: &str, text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|error| panic!("{name} is not valid JSON: {error}"))
}

fn grammar() -> Value {
    json("flow.tmLanguage.json", GRAMMAR)
}

/// The literal words of a regex: runs of identifier characters outside
/// escapes (`\b`, `\s`) and character classes (`[A-Za-z_]`).
fn regex_words(pattern: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c.is_ascii_alphanumeric() || c == '_' {
            current.push(c);
            continue;
        }
        if !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        match c {
            '\\' => {
                chars.next();
            }
            '[' => {
                // Skip the class; `]` right after `[` or `[^` is a literal.
                let mut first = true;
                while let Some(inner) = chars.next() {
                    match inner {
                        '\\' => {
                            chars.next();
                        }
                        '^' if first => continue,
                        ']' if !first => break,
                        _ => {}
                    }
                    first = false;
                }
            }
            _ => {}
        }
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// Every `match`, `begin`, `end` and `while` regex under `value`.
fn patterns(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                match (key.as_str(), child) {
                    ("match" | "begin" | "end" | "while", Value::String(regex)) => out.push(regex.clone()),
                    _ => patterns(child, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| patterns(item, out)),
        _ => {}
    }
}

/// Every `include` under `value`.
fn includes(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                match (key.as_str(), child) {
                    ("include", Value::String(target)) => out.push(target.clone()),
                    _ => includes(child, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| includes(item, out)),
        _ => {}
    }
}

fn words_of_rule(grammar: &Value, rule: &str) -> BTreeSet<String> {
    let entry = &grammar["repository"][rule];
    assert!(entry.is_object(), "the grammar has no repository rule `{rule}`");
    let mut regexes = Vec::new();
    patterns(entry, &mut regexes);
    regexes.iter().flat_map(|regex| regex_words(regex)).collect()
}

#[test]
fn regex_words_skips_escapes_and_classes() {
    assert_eq!(regex_words(r"(?<![A-Za-z0-9_.])(?:on|when|else)\b"), ["on", "when", "else"]);
    assert_eq!(regex_words(r"\b(?:true|false)\s*[^\]a-z]x"), ["true", "false", "x"]);
}

#[test]
fn grammar_is_valid_json_with_the_flow_scope() {
    let grammar = grammar();
    assert_eq!(grammar["scopeName"], "source.flow");
    assert_eq!(grammar["name"], "Flow");
    assert!(grammar["patterns"].as_array().is_some_and(|p| !p.is_empty()), "the grammar has no top-level patterns");
    assert!(grammar["repository"].as_object().is_some_and(|r| !r.is_empty()), "the grammar has no repository");
}

#[test]
fn every_reserved_word_is_a_keyword_pattern_and_nothing_else_is() {
    let grammar = grammar();
    let highlighted = words_of_rule(&grammar, "keywords");
    let reserved: BTreeSet<String> = KEYWORDS.iter().map(|(word, _)| (*word).to_string()).collect();
    let missing: Vec<_> = reserved.difference(&highlighted).collect();
    assert!(missing.is_empty(), "reserved words missing from the grammar's `keywords` rule: {missing:?}");
    // Contextual words (`steps`, node kinds, outcomes) have their own rules:
    // highlighting one as reserved would tell users it cannot be a name.
    let extra: Vec<_> = highlighted.difference(&reserved).collect();
    assert!(extra.is_empty(), "the grammar's `keywords` rule highlights words the lexer does not reserve: {extra:?}");
}

#[test]
fn contextual_words_have_their_rules() {
    let grammar = grammar();
    let expect = |rule: &str, words: &[&str]| {
        let found = words_of_rule(&grammar, rule);
        for word in words {
            assert!(found.contains(*word), "`{word}` is missing from the grammar's `{rule}` rule: {found:?}");
        }
    };
    expect("gate-outcomes", &["PASS", "REQUIRES_DECISION", "BLOCK"]);
    expect("decisions", &["approve", "revise", "replan", "reject"]);
    expect("node-statement", &["node", "agent", "tool", "human", "parallel", "map", "join", "loop", "flow", "end"]);
    expect("within-steps", &["within", "steps"]);
}

#[test]
fn a_record_statement_scopes_the_contextual_record_and_its_name() {
    let grammar = grammar();
    let rule = &grammar["repository"]["record-statement"];
    let regex = rule["match"].as_str().expect("`record-statement` is a match rule");
    // `record NAME {`: the word, then a name; `record:` (a key) and
    // `record -> b` (an edge) are not records.
    assert!(regex.contains(r"(record)\s+([A-Za-z_][A-Za-z0-9_]*)"), "`record` must be followed by a name: {regex}");
    assert!(regex.contains(r"(?=\s*(?:\{|$))"), "a record's name is followed by its block: {regex}");
    assert_eq!(regex_words(regex), ["record"], "one word, `record`: {regex}");
    assert_eq!(rule["captures"]["1"]["name"], "storage.type.record.flow");
    assert_eq!(rule["captures"]["2"]["name"], "entity.name.function.record.flow");
    // Among the top-level patterns, so every block (through `$self`) has it.
    let top: Vec<&str> = grammar["patterns"].as_array().expect("patterns").iter().filter_map(|p| p["include"].as_str()).collect();
    let at = |rule: &str| top.iter().position(|r| *r == rule).unwrap_or_else(|| panic!("`{rule}` is not a top-level pattern"));
    assert!(at("#record-statement") < at("#keywords") && at("#record-statement") < at("#function-call"), "{top:?}");
    // Contextual: never a reserved word.
    assert!(!KEYWORDS.iter().any(|(word, _)| *word == "record"), "`record` is not reserved");
    assert!(!words_of_rule(&grammar, "keywords").contains("record"));
}

#[test]
fn every_include_resolves_and_every_rule_is_used() {
    let grammar = grammar();
    let repository = grammar["repository"].as_object().expect("repository");
    let mut targets = Vec::new();
    includes(&grammar, &mut targets);
    let mut used = BTreeSet::new();
    for target in &targets {
        match target.strip_prefix('#') {
            Some(rule) => {
                assert!(repository.contains_key(rule), "`include: {target}` names no repository rule");
                used.insert(rule.to_string());
            }
            None => assert!(target == "$self" || target == "source.flow", "unexpected include `{target}`"),
        }
    }
    let unused: Vec<_> = repository.keys().filter(|rule| !used.contains(*rule)).collect();
    assert!(unused.is_empty(), "repository rules never included: {unused:?}");
}

#[test]
fn every_rule_has_a_regex() {
    let mut regexes = Vec::new();
    patterns(&grammar(), &mut regexes);
    assert!(regexes.len() > 20, "suspiciously few patterns: {}", regexes.len());
    assert!(regexes.iter().all(|regex| !regex.is_empty()), "an empty pattern");
}

#[test]
fn package_json_contributes_the_language_and_the_grammar() {
    let package = json("package.json", PACKAGE);
    assert_eq!(package["name"], "flow-lang");
    assert_eq!(package["publisher"], "flow-lang");
    assert_eq!(package["main"], "./extension.js");
    assert!(extension_dir().join("extension.js").is_file(), "extension.js is missing");
    assert!(extension_dir().join("LICENSE").is_file(), "LICENSE is missing (vsce refuses to package without one)");
    assert!(
        package["activationEvents"].as_array().is_some_and(|events| events.iter().any(|e| e == "onLanguage:flow")),
        "activationEvents lacks onLanguage:flow"
    );
    assert!(package["dependencies"]["vscode-languageclient"].is_string(), "vscode-languageclient is not a run-time dependency");

    let contributes = &package["contributes"];
    let languages = contributes["languages"].as_array().expect("contributes.languages");
    let flow = languages.iter().find(|language| language["id"] == "flow").expect("no language with id `flow`");
    assert!(
        flow["extensions"].as_array().is_some_and(|extensions| extensions.iter().any(|e| e == ".flow")),
        "the `flow` language does not claim .flow files"
    );
    let configuration = flow["configuration"].as_str().expect("the `flow` language has no configuration");
    assert!(extension_dir().join(configuration).is_file(), "{configuration} does not exist");

    let grammars = contributes["grammars"].as_array().expect("contributes.grammars");
    let grammar = grammars.iter().find(|grammar| grammar["scopeName"] == "source.flow").expect("no grammar for source.flow");
    assert_eq!(grammar["language"], "flow");
    let path = grammar["path"].as_str().expect("grammar path");
    assert_eq!(Path::new(path), Path::new("./syntaxes/flow.tmLanguage.json"), "contributes.grammars points elsewhere");
    assert!(extension_dir().join(path).is_file(), "{path} does not exist");

    let settings = &contributes["configuration"]["properties"];
    assert_eq!(settings["flow.serverPath"]["default"], "flowc");
    assert!(settings["flow.trace.server"].is_object(), "flow.trace.server is not contributed");
}

#[test]
fn language_configuration_matches_the_lexer() {
    let configuration = json("language-configuration.json", LANGUAGE_CONFIGURATION);
    assert_eq!(configuration["comments"]["lineComment"], "//");
    assert_eq!(configuration["comments"]["blockComment"], serde_json::json!(["/*", "*/"]));
    let brackets = configuration["brackets"].as_array().expect("brackets");
    for pair in [["{", "}"], ["[", "]"], ["(", ")"]] {
        assert!(brackets.contains(&serde_json::json!(pair)), "brackets lack {pair:?}");
    }
}
