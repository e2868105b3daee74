//! Artifacts by digest: the canonical bytes of a value and their sha256,
//! the reference every event carries. Storing the bytes is the runtime's
//! (`flow_runtime::journal`); the engine only names them.

use flow_trace::ArtifactRef;
use sha2::{Digest, Sha256};

/// The reference and canonical bytes of an artifact: `serde_json::to_vec`
/// of the value (key order is the value's own, as `serde_json` preserves
/// order in this workspace) and its sha256.
pub fn artifact_ref(value: &serde_json::Value) -> (ArtifactRef, Vec<u8>) {
    // Serializing a `Value` cannot fail: its map keys are strings.
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    (artifact_ref_of(&bytes), bytes)
}

/// The reference of an artifact from its bytes (as [`artifact_ref`] encoded them).
pub fn artifact_ref_of(bytes: &[u8]) -> ArtifactRef {
    let mut digest = String::with_capacity(7 + 64);
    digest.push_str("sha256:");
    crate::proto::push_hex(&Sha256::digest(bytes), &mut digest);
    ArtifactRef { digest, size: bytes.len() as u64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_is_the_sha256_of_the_canonical_bytes() {
        let (r, bytes) = artifact_ref(&serde_json::json!({"b": 1, "a": [true]}));
        assert_eq!(bytes, br#"{"b":1,"a":[true]}"#);
        assert_eq!(r.size, bytes.len() as u64);
        assert_eq!(r, artifact_ref_of(&bytes));
        // sha256 of the empty string, a known value.
        assert_eq!(artifact_ref_of(b"").digest, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }
}
