//! Signed trace heads: `flow run --sign KEY` and `flow trace check
//! --verify-key KEY`.
//!
//! The hash chain ([`flow_trace::chain`]) makes every edit, deletion,
//! insertion or move inside a trace visible; what it cannot show alone is
//! the end edited or cut off, or the whole chain recomputed. A signature over the
//! head closes both: each `flow run`/`flow resume` with `--sign` writes
//! `trace.sig` next to `trace.jsonl` when it stops (ended, paused, stopped
//! or cancelled) — ed25519 over the run id, the last `seq` and the digest
//! of the last line ([`flow_trace::chain::signed_message`]).
//!
//! Keys are PEM files as `openssl genpkey -algorithm ed25519` writes them
//! (PKCS#8 private key; SubjectPublicKeyInfo public key), or made by
//! `flow key generate`.

use crate::proto::hex;
use ed25519_dalek::pkcs8::{spki::der::pem::LineEnding, DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The file a signed run's signature is written to, in its run directory.
pub const SIGNATURE_FILE: &str = "trace.sig";

/// What `trace.sig` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceSignature {
    pub format_version: u32,
    /// Always `ed25519`.
    pub algorithm: String,
    pub run_id: String,
    /// The `seq` of the last event signed.
    pub seq: u64,
    /// The digest of that event's line (`sha256:…`).
    pub head: String,
    /// The public key that verifies it (hex): which key signed, not a
    /// reason to trust it — the checker brings its own.
    pub public_key: String,
    /// The ed25519 signature (hex) of
    /// [`flow_trace::chain::signed_message`].
    pub signature: String,
}

/// Reads a private key (PEM, PKCS#8).
pub fn load_signing_key(path: &Path) -> Result<SigningKey, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read the signing key {}: {e}", path.display()))?;
    SigningKey::from_pkcs8_pem(&text).map_err(|e| {
        format!(
            "{} is not an ed25519 private key in PEM (PKCS#8), as `openssl genpkey -algorithm ed25519` or `flow key generate` writes: {e}",
            path.display()
        )
    })
}

/// Reads a public key (PEM, SubjectPublicKeyInfo); a private key is
/// accepted too (its public half is used).
pub fn load_verifying_key(path: &Path) -> Result<VerifyingKey, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read the key {}: {e}", path.display()))?;
    if let Ok(key) = VerifyingKey::from_public_key_pem(&text) {
        return Ok(key);
    }
    SigningKey::from_pkcs8_pem(&text).map(|k| k.verifying_key()).map_err(|e| {
        format!("{} is not an ed25519 public key in PEM, as `openssl pkey -pubout` or `flow key generate` writes: {e}", path.display())
    })
}

/// A fresh key pair from the operating system's generator, as PEM
/// (private, public).
pub fn generate() -> Result<(String, String), String> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| format!("the operating system gave no random bytes: {e}"))?;
    let key = SigningKey::from_bytes(&seed);
    let private = key.to_pkcs8_pem(LineEnding::LF).map_err(|e| e.to_string())?;
    let public = key.verifying_key().to_public_key_pem(LineEnding::LF).map_err(|e| e.to_string())?;
    Ok((private.to_string(), public))
}

/// Signs the head of run `run_id`'s trace.
pub fn sign(key: &SigningKey, run_id: &str, seq: u64, head: &str) -> TraceSignature {
    let signature = key.sign(&flow_trace::chain::signed_message(run_id, seq, head));
    TraceSignature {
        format_version: 1,
        algorithm: "ed25519".into(),
        run_id: run_id.into(),
        seq,
        head: head.into(),
        public_key: hex(key.verifying_key().as_bytes()),
        signature: hex(&signature.to_bytes()),
    }
}

/// Whether `record` is a valid signature by `key` (of what it says it
/// signs: comparing that with the trace is the caller's part).
pub fn verify(key: &VerifyingKey, record: &TraceSignature) -> Result<(), String> {
    if record.algorithm != "ed25519" {
        return Err(format!("the signature's algorithm is `{}`, not ed25519", record.algorithm));
    }
    let bytes: [u8; 64] = unhex(&record.signature).and_then(|b| b.try_into().ok()).ok_or("the signature is not 64 bytes of hex")?;
    let message = flow_trace::chain::signed_message(&record.run_id, record.seq, &record.head);
    key.verify(&message, &Signature::from_bytes(&bytes)).map_err(|_| {
        if record.public_key != hex(key.as_bytes()) {
            "the signature was made with another key than the one given".to_string()
        } else {
            "the signature does not match what it says it signs (the signature file was edited)".to_string()
        }
    })
}

/// Writes `record` to `dir/trace.sig` (atomically: a reader never sees half).
pub fn write(dir: &Path, record: &TraceSignature) -> Result<(), String> {
    let text = serde_json::to_string_pretty(record).map_err(|e| e.to_string())? + "\n";
    let tmp = dir.join(format!(".{SIGNATURE_FILE}.tmp"));
    std::fs::write(&tmp, text).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, dir.join(SIGNATURE_FILE)).map_err(|e| format!("cannot write {}: {e}", dir.join(SIGNATURE_FILE).display()))
}

/// Reads a signature file.
pub fn read(path: &Path) -> Result<TraceSignature, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{} is not a trace signature: {e}", path.display()))
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_under_its_key_only_and_only_unedited() {
        let (private, public) = generate().unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("k"), &private).unwrap();
        std::fs::write(dir.path().join("k.pub"), &public).unwrap();
        let key = load_signing_key(&dir.path().join("k")).unwrap();
        let public = load_verifying_key(&dir.path().join("k.pub")).unwrap();
        assert_eq!(load_verifying_key(&dir.path().join("k")).unwrap(), public, "a private key gives its public half");
        let record = sign(&key, "r", 7, "sha256:ab");
        write(dir.path(), &record).unwrap();
        let back = read(&dir.path().join(SIGNATURE_FILE)).unwrap();
        assert_eq!(back, record);
        assert!(verify(&public, &back).is_ok());
        for edit in [
            TraceSignature { seq: 6, ..back.clone() },
            TraceSignature { head: "sha256:ac".into(), ..back.clone() },
            TraceSignature { run_id: "s".into(), ..back.clone() },
        ] {
            assert!(verify(&public, &edit).unwrap_err().contains("edited"));
        }
        let (_, other) = generate().unwrap();
        std::fs::write(dir.path().join("o.pub"), other).unwrap();
        let other = load_verifying_key(&dir.path().join("o.pub")).unwrap();
        assert!(verify(&other, &back).unwrap_err().contains("another key"));
        assert!(load_signing_key(&dir.path().join("k.pub")).is_err());
        std::fs::write(dir.path().join("junk"), "not a key").unwrap();
        assert!(load_verifying_key(&dir.path().join("junk")).unwrap_err().contains("not an ed25519"));
    }
}
