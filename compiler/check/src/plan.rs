//! The plan: what `flowc build` emits and `flow run` executes — the checked
//! IR, versioned, with digests of the sources it was built from so traces
//! can name exactly what was verified, and a digest of its own content, so
//! a plan that was edited after it was built is not taken for the one that
//! was verified.

use crate::ir::Program;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Component, Path};
use std::sync::Arc;

/// The plan format version. Bump on any incompatible change of the IR.
pub const PLAN_VERSION: u32 = 2;

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Plan {
    /// Always [`PLAN_VERSION`] for plans this compiler writes.
    pub flow_plan_version: u32,
    /// The compiler that built it, e.g. `flowc 0.1.0`.
    pub compiler: String,
    /// `sha256:` over the plan's canonical JSON (compact, fields in
    /// order) with this field empty: the identity of the plan as built.
    /// `flow run` refuses a plan whose content does not match it.
    #[serde(default)]
    pub content_digest: String,
    pub source: SourceInfo,
    // Shared: every run of the plan reads the same program.
    pub program: Arc<Program>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SourceInfo {
    /// The root file, as named on the command line.
    pub root: String,
    /// `sha256:` over the digests of every file, in order: the identity
    /// of what was verified.
    pub digest: String,
    /// Every file the program was built from (root, imports, schemas).
    pub files: Vec<SourceFileDigest>,
    /// The root file's directory relative to the plan file's (`/`
    /// separators), for a plan written by `flowc build`: the flow's
    /// relative paths (provider scripts, tool `cwd`, files read by builtin
    /// tools and evaluators, MCP servers) and the default input and
    /// cassette beside the root file are found from it. An absolute path
    /// when the two share no root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SourceFileDigest {
    pub name: String,
    pub sha256: String,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Plan {
    /// A plan for `program`, built from `files` (name and text, the root
    /// first).
    pub fn new(program: Program, compiler: &str, files: &[(&str, &str)]) -> Plan {
        let (digest, files) = source_digest(files);
        let mut plan = Plan {
            flow_plan_version: PLAN_VERSION,
            compiler: compiler.to_string(),
            content_digest: String::new(),
            source: SourceInfo { root: files.first().map(|f| f.name.clone()).unwrap_or_default(), digest, files, dir: None },
            program: Arc::new(program),
        };
        plan.seal();
        plan
    }

    /// The plan as written to a file whose directory reaches the root
    /// file's directory by `dir` (see [`relative_dir`]), sealed again.
    pub fn located(mut self, dir: Option<String>) -> Plan {
        self.source.dir = dir;
        self.seal();
        self
    }

    /// The digest of the plan's content: `sha256:` over its canonical JSON
    /// with `content_digest` empty.
    pub fn compute_digest(&self) -> String {
        let blank = Plan { content_digest: String::new(), ..self.clone() };
        let bytes = serde_json::to_vec(&blank).unwrap_or_default();
        format!("sha256:{}", hex(&Sha256::digest(&bytes)))
    }

    /// Reads a plan from JSON, within [`crate::limits`] (a plan nested too
    /// deeply, or too large, is refused with an error saying so).
    pub fn from_json(text: &str) -> Result<Plan, String> {
        crate::limits::json_from_str("the plan", text)
    }

    /// Reads a plan from YAML (`flowc build --emit yaml`), within [`crate::limits`].
    pub fn from_yaml(text: &str) -> Result<Plan, String> {
        crate::limits::yaml_from_str("the plan", text)
    }

    /// Records the digest of the plan's content.
    pub fn seal(&mut self) {
        self.content_digest = self.compute_digest();
    }

    /// Whether the plan is what was built: its content matches its digest.
    /// The error says what differs.
    pub fn check_digest(&self) -> Result<(), String> {
        if self.content_digest.is_empty() {
            return Err("it records no content digest (built by an older flowc?)".into());
        }
        let actual = self.compute_digest();
        if actual != self.content_digest {
            return Err(format!(
                "its content does not match its digest: it records {}, its content hashes to {actual}",
                self.content_digest
            ));
        }
        Ok(())
    }
}

/// The path from directory `from` to directory `to` (both absolute and
/// normalised, as `canonicalize` gives them), `/`-separated: `.` when they
/// are the same, `to` itself when they share no root (another drive).
pub fn relative_dir(from: &Path, to: &Path) -> String {
    let (from_parts, to_parts): (Vec<Component>, Vec<Component>) = (from.components().collect(), to.components().collect());
    if from_parts.first() != to_parts.first() {
        return to.to_string_lossy().replace('\\', "/");
    }
    let common = from_parts.iter().zip(&to_parts).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".to_string(); from_parts.len() - common];
    parts.extend(to_parts[common..].iter().map(|c| c.as_os_str().to_string_lossy().into_owned()));
    if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    }
}

/// The digest of a program's sources (name and text, the root first):
/// `sha256:` over each file's name and digest, and the per-file digests.
pub fn source_digest(files: &[(&str, &str)]) -> (String, Vec<SourceFileDigest>) {
    let files: Vec<SourceFileDigest> = files
        .iter()
        .map(|(name, text)| SourceFileDigest { name: name.to_string(), sha256: hex(&Sha256::digest(text.as_bytes())) })
        .collect();
    let mut all = Sha256::new();
    for file in &files {
        all.update(file.name.as_bytes());
        all.update([0]);
        all.update(file.sha256.as_bytes());
        all.update([0]);
    }
    (format!("sha256:{}", hex(&all.finalize())), files)
}

/// The JSON Schema of plans, as published in `stdlib/schemas/plan.schema.json`.
pub fn plan_schema() -> serde_json::Value {
    let schema = schemars::schema_for!(Plan);
    serde_json::to_value(schema).unwrap_or(serde_json::Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_dirs() {
        let rel = |a: &str, b: &str| relative_dir(Path::new(a), Path::new(b));
        assert_eq!(rel("/tmp", "/work/wt/examples/x"), "../work/wt/examples/x");
        assert_eq!(rel("/work/wt/examples/x", "/work/wt/examples/x"), ".");
        assert_eq!(rel("/work/wt/examples/x/plans", "/work/wt/examples/x"), "..");
        assert_eq!(rel("/work/wt", "/work/wt/examples/x"), "examples/x");
        assert_eq!(rel("/", "/a"), "a");
    }

    #[test]
    fn the_content_digest_covers_the_whole_plan_and_survives_a_round_trip() {
        let mut program = Program::default();
        program.types.insert(
            "T".into(),
            crate::ir::TypeDef { name: "T".into(), ty: crate::types::Ty::Float, loc: Default::default(), schema: None },
        );
        let plan = Plan::new(program, "test", &[("a.flow", "workflow w {}")]).located(Some("../src".into()));
        assert!(plan.content_digest.starts_with("sha256:"));
        assert_eq!(plan.check_digest(), Ok(()));
        // Pretty or compact, a plan read back is the same plan.
        let text = serde_json::to_string_pretty(&plan).unwrap();
        let read: Plan = serde_json::from_str(&text).unwrap();
        assert_eq!(read.check_digest(), Ok(()));
        // Any change shows: the program, the sources, where it points.
        let mut edited = read.clone();
        Arc::make_mut(&mut edited.program).types.shift_remove("T");
        assert!(edited.check_digest().unwrap_err().contains("does not match"));
        let mut moved = read.clone();
        moved.source.dir = Some("/elsewhere".into());
        assert!(moved.check_digest().is_err());
        let mut unsealed = read;
        unsealed.content_digest.clear();
        assert!(unsealed.check_digest().unwrap_err().contains("no content digest"));
    }
}
