//! SARIF 2.1.0 output: the same diagnostics as [`crate::render::to_json`],
//! in the OASIS Static Analysis Results Interchange Format read by code
//! scanning services and editors.
//!
//! The mapping:
//!
//! - one run whose `tool.driver` is `flowc`, with one `reportingDescriptor`
//!   per code used (title, explanation, default level from the registry);
//! - one result per diagnostic: `ruleId`/`ruleIndex`, `level`, the message
//!   (followed by the notes, the compact witness and the help, as in the
//!   human rendering), the primary label as `locations`, the other labels as
//!   `relatedLocations`, and a stable `partialFingerprints` entry;
//! - a witness becomes one `codeFlow` with one `threadFlow` whose locations
//!   are the steps in order (the first step of a lasso's cycle is marked);
//! - a "did you mean" becomes a `fix`: the suggestion replacing the
//!   misspelled name at every use the diagnostic labels;
//! - `artifacts` lists every file referenced, in [`FileId`] order.
//!
//! Regions are 1-based; columns count Unicode code points (the run's
//! `columnKind` is `unicodeCodePoints`), the same as [`SourceDb::line_col`].
//! The output is deterministic: the same input gives the same bytes.

use crate::{Diagnostic, FileId, Severity, SourceDb, Span, CODES};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// The `$schema` of the log.
pub const SARIF_SCHEMA_URI: &str = "https://json.schemastore.org/sarif-2.1.0.json";
/// The SARIF version written.
pub const SARIF_VERSION: &str = "2.1.0";
/// The `uriBaseId` of relative file names: the source root the user ran
/// `flowc` from.
pub const SRCROOT: &str = "%SRCROOT%";
/// The `uriBaseId` of the stdlib modules compiled into flowc (named
/// `<std.name>` in the [`SourceDb`]).
pub const STDLIB_BASE: &str = "FLOW_STDLIB";
/// The key of Flow's entry in `partialFingerprints`.
pub const FINGERPRINT_KEY: &str = "flowDiagnosticHash/v1";

/// How one run of `flowc` is described in its SARIF log: where its file
/// names start, what `%SRCROOT%` stands for, where the reference lives and
/// what kept it from checking an input. The shell fills it in (the core
/// reads no working directory).
#[derive(Debug, Clone, Default)]
pub struct SarifRun {
    pub tool_version: String,
    /// The absolute directory relative file names start from (flowc's
    /// working directory); `None`: they are taken as relative to the root.
    pub cwd: Option<String>,
    /// The absolute directory `%SRCROOT%` stands for (the repository root
    /// or `--sarif-root`); `None`: the working directory. Files under it
    /// are written relative to it; files elsewhere as `file://` URIs.
    pub root: Option<String>,
    /// The reference's address: the driver's `informationUri`, and each
    /// rule's `helpUri` (with `#` and the code in lower case).
    pub docs: Option<String>,
    /// Problems that kept the tool from checking an input (a file it could
    /// not read): `invocations[0].toolExecutionNotifications`, and
    /// `executionSuccessful` false.
    pub errors: Vec<String>,
}

impl SarifRun {
    /// A run described only by its tool version (names relative to the root).
    pub fn new(tool_version: &str) -> SarifRun {
        SarifRun { tool_version: tool_version.to_string(), ..SarifRun::default() }
    }
}

/// The whole `flowc verify --format sarif` document: a SARIF 2.1.0 log with
/// one run.
pub fn to_sarif(db: &SourceDb, diagnostics: &[Diagnostic], tool_version: &str) -> Value {
    to_sarif_run(db, diagnostics, &SarifRun::new(tool_version))
}

/// [`to_sarif`] for a run described by `run`.
pub fn to_sarif_run(db: &SourceDb, diagnostics: &[Diagnostic], described: &SarifRun) -> Value {
    let uris = Uris { cwd: described.cwd.as_deref(), root: described.root.as_deref() };
    // Rules: the codes used, in registry order (unknown codes after, sorted).
    let mut used: Vec<&'static str> = diagnostics.iter().map(|d| d.code.0).collect();
    used.sort_by_key(|code| (CODES.iter().position(|info| info.code.0 == *code).unwrap_or(usize::MAX), *code));
    used.dedup();
    let rule_index: BTreeMap<&str, usize> = used.iter().enumerate().map(|(i, code)| (*code, i)).collect();
    let rules: Vec<Value> = used.iter().map(|code| rule_json(code, described.docs.as_deref())).collect();

    // Artifacts: every file referenced, in FileId order.
    let mut files: Vec<FileId> = Vec::new();
    for diagnostic in diagnostics {
        files.extend(diagnostic.labels.iter().map(|label| label.file));
        if let Some(witness) = &diagnostic.witness {
            files.extend(witness.steps.iter().map(|step| step.file));
        }
    }
    files.retain(|file| (file.0 as usize) < db.len());
    files.sort();
    files.dedup();
    let artifact_index: BTreeMap<FileId, usize> = files.iter().enumerate().map(|(i, file)| (*file, i)).collect();
    let artifacts: Vec<Value> = files
        .iter()
        .map(|&file| {
            let mut artifact = Map::new();
            artifact.insert("location".into(), artifact_location(db, &uris, file, None));
            artifact.insert("length".into(), Value::from(db.text(file).len()));
            if let Some(language) = source_language(db.name(file)) {
                artifact.insert("sourceLanguage".into(), Value::from(language));
            }
            Value::Object(artifact)
        })
        .collect();

    let results: Vec<Value> =
        diagnostics.iter().map(|diagnostic| result_json(db, &uris, diagnostic, rule_index[diagnostic.code.0], &artifact_index)).collect();

    let mut run = Map::new();
    let mut driver = Map::new();
    driver.insert("name".into(), Value::from("flowc"));
    driver.insert("version".into(), Value::from(described.tool_version.as_str()));
    if let Some(docs) = &described.docs {
        driver.insert("informationUri".into(), Value::from(docs.as_str()));
    }
    driver.insert("rules".into(), Value::Array(rules));
    run.insert("tool".into(), json!({ "driver": Value::Object(driver) }));
    // Every base a location names is declared (consumers such as code
    // scanning resolve `%SRCROOT%` to the checkout they analysed).
    let mut bases = Map::new();
    if files.iter().any(|&file| uris.of(db.name(file)).1 == Some(SRCROOT)) {
        let text = "The source root: the repository flowc ran in (or --sarif-root); file names are relative to it.";
        bases.insert(SRCROOT.into(), json!({ "description": { "text": text } }));
    }
    if files.iter().any(|&file| stdlib_module(db.name(file)).is_some()) {
        bases.insert(STDLIB_BASE.into(), json!({ "description": { "text": "Flow's standard library modules, built into flowc." } }));
    }
    if !bases.is_empty() {
        run.insert("originalUriBaseIds".into(), Value::Object(bases));
    }
    let notifications: Vec<Value> =
        described.errors.iter().map(|error| json!({ "level": "error", "message": { "text": error } })).collect();
    let mut invocation = Map::new();
    invocation.insert("executionSuccessful".into(), Value::from(notifications.is_empty()));
    if !notifications.is_empty() {
        invocation.insert("toolExecutionNotifications".into(), Value::Array(notifications));
    }
    run.insert("invocations".into(), json!([Value::Object(invocation)]));
    run.insert("artifacts".into(), Value::Array(artifacts));
    run.insert("results".into(), Value::Array(results));
    run.insert("columnKind".into(), Value::from("unicodeCodePoints"));

    json!({
        "$schema": SARIF_SCHEMA_URI,
        "version": SARIF_VERSION,
        "runs": [Value::Object(run)],
    })
}

fn level(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

/// The reporting descriptor of one code.
fn rule_json(code: &'static str, docs: Option<&str>) -> Value {
    let default_level = if code.starts_with('W') { "warning" } else { "error" };
    let mut rule = match CODES.iter().find(|info| info.code.0 == code) {
        Some(info) => json!({
            "id": code,
            "name": pascal_case(info.title),
            "shortDescription": { "text": info.title },
            "fullDescription": { "text": info.explanation },
            "help": { "text": info.explanation },
            "defaultConfiguration": { "level": default_level },
        }),
        None => json!({
            "id": code,
            "defaultConfiguration": { "level": default_level },
        }),
    };
    if let Some(docs) = docs {
        rule["helpUri"] = Value::from(format!("{docs}#{}", code.to_ascii_lowercase()));
    }
    rule
}

/// `undefined name` → `UndefinedName`: SARIF's rule `name` is an
/// identifier-like friendly name.
fn pascal_case(title: &str) -> String {
    title
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(|word| {
            let mut chars = word.chars();
            match chars.next() {
                Some(first) => first.to_uppercase().chain(chars).collect::<String>(),
                None => String::new(),
            }
        })
        .collect()
}

fn result_json(db: &SourceDb, uris: &Uris, diagnostic: &Diagnostic, rule_index: usize, artifacts: &BTreeMap<FileId, usize>) -> Value {
    let mut text = diagnostic.message.clone();
    for note in &diagnostic.notes {
        text.push_str("\nnote: ");
        text.push_str(note);
    }
    if let Some(witness) = &diagnostic.witness {
        text.push_str("\nwitness: ");
        text.push_str(&witness.compact());
    }
    if let Some(help) = &diagnostic.help {
        text.push_str("\nhelp: ");
        text.push_str(help);
    }

    let mut result = Map::new();
    result.insert("ruleId".into(), Value::from(diagnostic.code.0));
    result.insert("ruleIndex".into(), Value::from(rule_index));
    result.insert("level".into(), Value::from(level(diagnostic.severity)));
    result.insert("message".into(), json!({ "text": text }));

    // The primary label as `Diagnostic::primary` picks it: the first marked
    // primary, else the first label.
    let primary_at = diagnostic.labels.iter().position(|label| label.primary).or(if diagnostic.labels.is_empty() { None } else { Some(0) });
    let primary = primary_at.map(|i| &diagnostic.labels[i]).filter(|label| (label.file.0 as usize) < db.len());
    if let Some(label) = primary {
        result.insert("locations".into(), json!([location_json(db, uris, label.file, label.span, &label.message, artifacts, None)]));
    }

    let related: Vec<Value> = diagnostic
        .labels
        .iter()
        .enumerate()
        .filter(|(i, label)| Some(*i) != primary_at && (label.file.0 as usize) < db.len())
        .enumerate()
        .map(|(n, (_, label))| location_json(db, uris, label.file, label.span, &label.message, artifacts, Some(n + 1)))
        .collect();
    if !related.is_empty() {
        result.insert("relatedLocations".into(), Value::Array(related));
    }

    if let Some(witness) = &diagnostic.witness {
        let steps: Vec<Value> = witness
            .steps
            .iter()
            .enumerate()
            .filter(|(_, step)| (step.file.0 as usize) < db.len())
            .map(|(i, step)| {
                let cycle = if witness.cycle_start == Some(i) { " (the cycle starts here)" } else { "" };
                let message = format!("step {}: {}: {}{cycle}", i + 1, step.name, step.message);
                json!({
                    "location": location_json(db, uris, step.file, step.span, &message, artifacts, None),
                    "executionOrder": i + 1,
                })
            })
            .collect();
        let mut code_flow = Map::new();
        code_flow.insert("message".into(), json!({ "text": witness.compact() }));
        code_flow.insert("threadFlows".into(), json!([{ "locations": steps }]));
        if let Some(start) = witness.cycle_start {
            code_flow.insert("properties".into(), json!({ "cycleStart": start }));
        }
        result.insert("codeFlows".into(), json!([Value::Object(code_flow)]));
    }

    // Fixes: a suggestion ("did you mean") replacing the misspelled text at
    // every label holding it, and inserted handlers or properties.
    let fixes: Vec<Value> = diagnostic
        .fixes(db)
        .into_iter()
        .map(|fix| {
            let mut by_file: BTreeMap<FileId, Vec<Value>> = BTreeMap::new();
            for edit in fix.edits {
                by_file
                    .entry(edit.file)
                    .or_default()
                    .push(json!({ "deletedRegion": region_json(db, edit.file, edit.span), "insertedContent": { "text": edit.text } }));
            }
            let changes: Vec<Value> = by_file
                .into_iter()
                .map(|(file, replacements)| {
                    json!({ "artifactLocation": artifact_location(db, uris, file, artifacts.get(&file).copied()), "replacements": replacements })
                })
                .collect();
            json!({ "description": { "text": fix.title }, "artifactChanges": changes })
        })
        .collect();
    if !fixes.is_empty() {
        result.insert("fixes".into(), Value::Array(fixes));
    }

    // The file as the log names it (relative to the root), so that the
    // fingerprint does not depend on the directory flowc ran in.
    let file = primary.map(|label| uris.of(db.name(label.file)).0).unwrap_or_default();
    result.insert("partialFingerprints".into(), json!({ FINGERPRINT_KEY: fingerprint(diagnostic.code.0, &file, &diagnostic.message) }));
    Value::Object(result)
}

/// A `location` with a physical location (file and region), an optional
/// message and, for related locations, an id.
fn location_json(
    db: &SourceDb,
    uris: &Uris,
    file: FileId,
    span: Span,
    message: &str,
    artifacts: &BTreeMap<FileId, usize>,
    id: Option<usize>,
) -> Value {
    let mut location = Map::new();
    if let Some(id) = id {
        location.insert("id".into(), Value::from(id));
    }
    location.insert(
        "physicalLocation".into(),
        json!({
            "artifactLocation": artifact_location(db, uris, file, artifacts.get(&file).copied()),
            "region": region_json(db, file, span),
        }),
    );
    if !message.is_empty() {
        location.insert("message".into(), json!({ "text": message }));
    }
    Value::Object(location)
}

/// A 1-based region in code points; the end column is that of the
/// character after the span.
fn region_json(db: &SourceDb, file: FileId, span: Span) -> Value {
    let len = db.text(file).len() as u32;
    let start = span.start.min(len);
    let end = span.end.clamp(start, len);
    let from = db.line_col(file, start);
    let to = db.line_col(file, end);
    json!({
        "startLine": from.line,
        "startColumn": from.column,
        "endLine": to.line,
        "endColumn": to.column,
    })
}

fn artifact_location(db: &SourceDb, uris: &Uris, file: FileId, index: Option<usize>) -> Value {
    let (uri, base) = uris.of(db.name(file));
    let mut location = Map::new();
    location.insert("uri".into(), Value::from(uri));
    if let Some(base) = base {
        location.insert("uriBaseId".into(), Value::from(base));
    }
    if let Some(index) = index {
        location.insert("index".into(), Value::from(index));
    }
    Value::Object(location)
}

/// `<std.consensus>` → `std.consensus`: the SourceDb name of a stdlib module.
fn stdlib_module(name: &str) -> Option<&str> {
    name.strip_prefix('<').and_then(|rest| rest.strip_suffix('>')).filter(|module| module.starts_with("std."))
}

/// How file names become URIs in one log.
struct Uris<'a> {
    cwd: Option<&'a str>,
    root: Option<&'a str>,
}

impl Uris<'_> {
    /// `name` (as in the [`SourceDb`]) as a SARIF URI and its base.
    fn of(&self, name: &str) -> (String, Option<&'static str>) {
        file_uri_under(name, self.cwd, self.root)
    }
}

/// A file name as in the [`SourceDb`] as a SARIF URI and its base:
/// relative names are relative to `%SRCROOT%`, absolute paths become
/// `file://` URIs, stdlib modules are relative to [`STDLIB_BASE`]. Every
/// character outside RFC 3986's unreserved set (and `/`) is
/// percent-encoded, so the URI is valid whatever the file is called.
pub fn file_uri(name: &str) -> (String, Option<&'static str>) {
    file_uri_under(name, None, None)
}

/// [`file_uri`] for a tool that ran in `cwd` with `%SRCROOT%` at `root`
/// (both absolute; the root defaults to `cwd`): a relative name is read from `cwd`, and a file under
/// `root` is written relative to it, whichever way it was named; other
/// files are `file://` URIs.
pub fn file_uri_under(name: &str, cwd: Option<&str>, root: Option<&str>) -> (String, Option<&'static str>) {
    if let Some(module) = stdlib_module(name) {
        return (percent_encode(module, false), Some(STDLIB_BASE));
    }
    let path = name.replace('\\', "/");
    let bytes = path.as_bytes();
    let drive = bytes.len() >= 3 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' && bytes[2] == b'/';
    let absolute = drive || path.starts_with('/');
    let full = match (absolute, cwd) {
        (true, _) => normalize(&path),
        (false, Some(cwd)) => normalize(&format!("{}/{path}", cwd.replace('\\', "/"))),
        (false, None) => return (percent_encode(&normalize(&path), false), Some(SRCROOT)),
    };
    if let Some(root) = root.or(cwd).map(|r| normalize(&r.replace('\\', "/"))) {
        let prefix = if root.ends_with('/') { root.clone() } else { format!("{root}/") };
        if let Some(relative) = full.strip_prefix(&prefix) {
            return (percent_encode(relative, false), Some(SRCROOT));
        }
    }
    if full.as_bytes().get(1) == Some(&b':') {
        // A Windows drive path: `C:/x` → `file:///C:/x`.
        let (drive, rest) = full.split_at(2);
        return (format!("file:///{drive}{}", percent_encode(rest, true)), None);
    }
    (format!("file://{}", percent_encode(&full, true)), None)
}

/// `a/./b/../c` → `a/c`, lexically (a leading `/` and leading `..` of a
/// relative path are kept).
fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." if parts.last().is_some_and(|last| *last != "..") => {
                parts.pop();
            }
            ".." if path.starts_with('/') => {}
            _ => parts.push(part),
        }
    }
    let joined = parts.join("/");
    if path.starts_with('/') {
        format!("/{joined}")
    } else {
        joined
    }
}

/// Percent-encodes everything but unreserved characters and `/` (and `:`
/// in an absolute path, where it cannot be mistaken for a scheme).
fn percent_encode(text: &str, absolute: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for &byte in text.as_bytes() {
        let keep = byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~' | b'/') || (absolute && byte == b':');
        if keep {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

fn source_language(name: &str) -> Option<&'static str> {
    if stdlib_module(name).is_some() || name.ends_with(".flow") {
        Some("flow")
    } else if name.ends_with(".json") {
        Some("json")
    } else {
        None
    }
}

/// The stable fingerprint of a diagnostic: 64-bit FNV-1a over the code,
/// the file name and the message (separated by NUL bytes), as 16 hex
/// digits. It does not depend on the position, so a finding keeps its
/// fingerprint when lines above it are edited.
pub fn fingerprint(code: &str, file: &str, message: &str) -> String {
    let mut hash = Fnv1a::new();
    hash.write(code.as_bytes());
    hash.write(&[0]);
    hash.write(file.as_bytes());
    hash.write(&[0]);
    hash.write(message.as_bytes());
    format!("{:016x}", hash.finish())
}

/// 64-bit FNV-1a (Fowler–Noll–Vo): tiny, and
/// unlike `std`'s hasher it is the same on every platform and release.
struct Fnv1a(u64);

impl Fnv1a {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    fn new() -> Fnv1a {
        Fnv1a(Self::OFFSET_BASIS)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 ^= u64::from(byte);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fnv(bytes: &[u8]) -> u64 {
        let mut hash = Fnv1a::new();
        hash.write(bytes);
        hash.finish()
    }

    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        // From the FNV reference test suite.
        assert_eq!(fnv(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn fingerprint_is_stable_and_separates_its_parts() {
        let a = fingerprint("E0101", "examples/a.flow", "undefined name `x`");
        // Pinned (computed independently): a change here changes every
        // fingerprint users have stored.
        assert_eq!(a, "11f9dbcac28d5f46");
        assert_eq!(a, fingerprint("E0101", "examples/a.flow", "undefined name `x`"));
        assert_eq!(a.len(), 16);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(fingerprint("", "", ""), format!("{:016x}", fnv(b"\0\0")));
        assert_ne!(a, fingerprint("E0102", "examples/a.flow", "undefined name `x`"));
        assert_ne!(a, fingerprint("E0101", "examples/b.flow", "undefined name `x`"));
        assert_ne!(a, fingerprint("E0101", "examples/a.flow", "undefined name `y`"));
        // The NUL separators keep `ab`+`c` apart from `a`+`bc`.
        assert_ne!(fingerprint("E0101", "ab", "c"), fingerprint("E0101", "a", "bc"));
    }

    #[test]
    fn file_names_become_valid_uris() {
        assert_eq!(file_uri("examples/a.flow"), ("examples/a.flow".to_string(), Some(SRCROOT)));
        assert_eq!(file_uri("caf\u{e9} x.flow"), ("caf%C3%A9%20x.flow".to_string(), Some(SRCROOT)));
        assert_eq!(file_uri("/tmp/a.flow"), ("file:///tmp/a.flow".to_string(), None));
        assert_eq!(file_uri("C:\\src\\a.flow"), ("file:///C:/src/a.flow".to_string(), None));
        assert_eq!(file_uri("<std.consensus>"), ("std.consensus".to_string(), Some(STDLIB_BASE)));
        // The standard input is not a stdlib module.
        assert_eq!(file_uri("<stdin>"), ("%3Cstdin%3E".to_string(), Some(SRCROOT)));
        // A colon in a relative name must not read as a scheme.
        assert_eq!(file_uri("a:b.flow"), ("a%3Ab.flow".to_string(), Some(SRCROOT)));
    }

    #[test]
    fn files_are_named_from_the_root_whatever_the_working_directory() {
        let (root, sub) = (Some("/repo"), Some("/repo/examples/x"));
        let expected = ("examples/a.flow".to_string(), Some(SRCROOT));
        assert_eq!(file_uri_under("../a.flow", sub, root), expected);
        assert_eq!(file_uri_under("/repo/examples/a.flow", sub, root), expected);
        assert_eq!(file_uri_under("examples/./b/../a.flow", Some("/repo"), root), expected);
        assert_eq!(file_uri_under("a.flow", Some("/repo/examples"), None), ("a.flow".to_string(), Some(SRCROOT)));
        // Outside the root: an absolute URI.
        assert_eq!(file_uri_under("../../../elsewhere/a.flow", sub, root), ("file:///elsewhere/a.flow".to_string(), None));
        assert_eq!(file_uri_under("/repository2/a.flow", sub, root), ("file:///repository2/a.flow".to_string(), None));
        assert_eq!(file_uri_under("<std.consensus>", sub, root), ("std.consensus".to_string(), Some(STDLIB_BASE)));
    }

    #[test]
    fn a_run_says_whether_it_checked_everything_and_where_the_reference_is() {
        let mut db = SourceDb::new();
        let file = db.add("examples/a.flow", "x".to_string());
        let d = Diagnostic::new(crate::codes::UNDEFINED_NAME, file, Span::new(0, 1), "undefined");
        let run = SarifRun { docs: Some("https://example.org/reference.md".into()), ..SarifRun::new("0") };
        let log = to_sarif_run(&db, std::slice::from_ref(&d), &run);
        let run_json = &log["runs"][0];
        assert_eq!(run_json["invocations"][0]["executionSuccessful"], true);
        assert_eq!(run_json["tool"]["driver"]["informationUri"], "https://example.org/reference.md");
        assert_eq!(run_json["tool"]["driver"]["rules"][0]["helpUri"], "https://example.org/reference.md#e0101");
        let failed = SarifRun { errors: vec!["cannot read b.flow: not found".into()], ..SarifRun::new("0") };
        let log = to_sarif_run(&db, &[d], &failed);
        let invocation = &log["runs"][0]["invocations"][0];
        assert_eq!(invocation["executionSuccessful"], false);
        assert_eq!(invocation["toolExecutionNotifications"][0]["message"]["text"], "cannot read b.flow: not found");
        assert_eq!(invocation["toolExecutionNotifications"][0]["level"], "error");
    }

    #[test]
    fn every_uri_base_used_is_declared() {
        let mut db = SourceDb::new();
        let file = db.add("examples/a.flow", "x".to_string());
        let d = Diagnostic::new(crate::codes::UNDEFINED_NAME, file, Span::new(0, 1), "undefined");
        let log = to_sarif(&db, &[d], "0");
        let run = &log["runs"][0];
        assert_eq!(run["artifacts"][0]["location"]["uriBaseId"], SRCROOT);
        assert!(run["originalUriBaseIds"][SRCROOT]["description"]["text"].is_string(), "{run}");
        // An absolute path needs no base, so none is declared.
        let mut db = SourceDb::new();
        let file = db.add("/abs/a.flow", "x".to_string());
        let d = Diagnostic::new(crate::codes::UNDEFINED_NAME, file, Span::new(0, 1), "undefined");
        assert!(to_sarif(&db, &[d], "0")["runs"][0].get("originalUriBaseIds").is_none());
    }

    #[test]
    fn rule_names_are_pascal_case() {
        assert_eq!(pascal_case("undefined name"), "UndefinedName");
        assert_eq!(pascal_case("schema file is not valid JSON"), "SchemaFileIsNotValidJSON");
    }
}
