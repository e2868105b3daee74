//! The plan: what `flowc build` emits and `flow run` executes — the checked
//! IR, versioned, with digests of the sources it was built from so traces
//! can name exactly what was verified.

use crate::ir::Program;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// The plan format version. Bump on any incompatible change of the IR.
pub const PLAN_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Plan {
    /// Always [`PLAN_VERSION`] for plans this compiler writes.
    pub flow_plan_version: u32,
    /// The compiler that built it, e.g. `flowc 0.1.0`.
    pub compiler: String,
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
        Plan {
            flow_plan_version: PLAN_VERSION,
            compiler: compiler.to_string(),
            source: SourceInfo { root: files.first().map(|f| f.name.clone()).unwrap_or_default(), digest, files },
            program: Arc::new(program),
        }
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
