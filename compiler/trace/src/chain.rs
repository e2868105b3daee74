//! The hash chain that makes a trace tamper-evident.
//!
//! Every event written by `flow run` (and every witness `flowc verify`
//! writes) carries in `prev` the digest of the line before it: the SHA-256
//! of that event's canonical encoding — its JSON line exactly as Flow
//! writes it (`serde_json`, fields in declaration order, no trailing line
//! break), `prev` included. The first event's `prev` is the run's
//! [`genesis`]. So editing, deleting, inserting or moving any event breaks
//! the link after it; only the end of a trace (its last line, or lines
//! cut off) is not held by a later event: the *head* (the digest of the
//! last line) is what a signature covers ([`signed_message`]).

use crate::Event;
use sha2::{Digest, Sha256};

/// The prefix of every digest in the chain.
pub const PREFIX: &str = "sha256:";

/// What the chain of run `run_id` starts from: the `prev` of its first
/// event.
pub fn genesis(run_id: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"flow-trace-chain/1\n");
    hasher.update(run_id.as_bytes());
    text(&hasher.finalize().into())
}

/// The digest of one line (without its line break), as raw bytes.
pub fn digest(line: &[u8]) -> [u8; 32] {
    Sha256::digest(line).into()
}

/// The digest of one line, written as it appears in `prev`.
pub fn link(line: &str) -> String {
    text(&digest(line.as_bytes()))
}

/// A raw digest written as in `prev`: `sha256:` and 64 lowercase hex digits.
pub fn text(digest: &[u8; 32]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(PREFIX.len() + 64);
    out.push_str(PREFIX);
    for b in digest {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 15) as usize] as char);
    }
    out
}

/// Whether `prev` names the raw digest `digest` (without allocating).
pub fn names(prev: &str, digest: &[u8; 32]) -> bool {
    let Some(hex) = prev.strip_prefix(PREFIX) else { return false };
    let hex = hex.as_bytes();
    hex.len() == 64
        && digest.iter().enumerate().all(|(i, b)| {
            let nibble = |c: u8| match c {
                b'0'..=b'9' => Some(c - b'0'),
                b'a'..=b'f' => Some(c - b'a' + 10),
                _ => None,
            };
            matches!((nibble(hex[2 * i]), nibble(hex[2 * i + 1])), (Some(h), Some(l)) if (h << 4 | l) == *b)
        })
}

/// Links `events` into a chain that continues from `prev` (the
/// [`genesis`] for a new run, else the digest of the last line written):
/// sets each event's `prev`, encodes it, and returns the lines and the new
/// head.
pub fn link_events(events: &mut [Event], mut prev: String) -> Result<(Vec<String>, String), serde_json::Error> {
    let mut lines = Vec::with_capacity(events.len());
    for event in events.iter_mut() {
        event.prev = Some(prev.into());
        let line = serde_json::to_string(event)?;
        prev = link(&line);
        lines.push(line);
    }
    Ok((lines, prev))
}

/// A whole trace as JSONL, chained from its run's genesis (witnesses).
pub fn to_jsonl(events: &[Event]) -> Result<String, serde_json::Error> {
    let Some(first) = events.first() else { return Ok(String::new()) };
    let mut events = events.to_vec();
    let (lines, _) = link_events(&mut events, genesis(&first.run_id))?;
    Ok(lines.into_iter().flat_map(|l| [l, "\n".to_string()]).collect())
}

/// The bytes a trace signature signs: the run, the `seq` of its last event
/// and the head (the digest of that event's line).
pub fn signed_message(run_id: &str, seq: u64, head: &str) -> Vec<u8> {
    format!("flow-trace-head/1\n{run_id}\n{seq}\n{head}\n").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Body, SCHEMA_VERSION};

    fn events(n: u64) -> Vec<Event> {
        (1..=n)
            .map(|seq| Event {
                run_id: "r".into(),
                execution_id: "exec-1".into(),
                seq,
                event_id: Event::id_for("r", seq).into(),
                parent_event_id: None,
                producer: "control".into(),
                body: Body::Warning { schema_version: SCHEMA_VERSION, message: format!("m{seq}") },
                time: "t".into(),
                prev: None,
            })
            .collect()
    }

    #[test]
    fn each_event_names_the_digest_of_the_line_before_it() {
        let mut evs = events(3);
        let (lines, head) = link_events(&mut evs, genesis("r")).unwrap();
        assert_eq!(evs[0].prev.as_deref(), Some(genesis("r").as_str()));
        assert_eq!(evs[1].prev.as_deref(), Some(link(&lines[0]).as_str()));
        assert_eq!(evs[2].prev.as_deref(), Some(link(&lines[1]).as_str()));
        assert_eq!(head, link(&lines[2]));
        // The line read back encodes to itself: the digest is reproducible.
        let back: Event = serde_json::from_str(&lines[1]).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), lines[1]);
        assert!(lines[1].ends_with(&format!(r#","prev":"{}"}}"#, link(&lines[0]))), "{}", lines[1]);
    }

    #[test]
    fn names_compares_a_written_digest_with_raw_bytes() {
        let d = digest(b"line");
        assert!(names(&text(&d), &d));
        assert!(!names(&text(&digest(b"other")), &d));
        assert!(!names(&text(&d).to_uppercase(), &d));
        assert!(!names("sha256:00", &d));
        assert!(!names(&text(&d)[1..], &d));
        assert_ne!(genesis("r"), genesis("s"));
    }
}
