//! Integrity: the hash chain (T080) and the signature over its head (T081).
//!
//! Each event's `prev` must be the digest of the line before it (the run's
//! genesis for the first, [`flow_trace::chain`]); the digest of a line is
//! taken over its bytes as read, so any edit shows. A signature, when the
//! caller asks for it to be verified, must be valid under the caller's key
//! and name this run, its last `seq` and its head.

use super::*;
use crate::signing::TraceSignature;
use flow_trace::chain;

/// Broken links reported one by one; past it, one deviation counts the rest.
const MAX_BREAKS: usize = 20;

/// The chain as far as the trace has been read.
#[derive(Debug, Default)]
pub(super) struct ChainCheck {
    /// The last event read: its seq and the digest of its line.
    last: Option<(u64, [u8; 32])>,
    /// Events that carry a `prev`, and the first that does not.
    linked: usize,
    first_unlinked: Option<u64>,
    unlinked: usize,
    breaks: usize,
    /// Not checked at all (events given without their lines).
    skipped: bool,
}

impl ChainCheck {
    pub(super) fn skip(&mut self, skip: bool) {
        self.skipped = skip;
    }
}

/// What a caller asks to be verified beyond the chain.
#[derive(Debug, Clone, Copy)]
pub struct SignatureCheck<'a> {
    /// The key the signature must verify under (the checker's own, never
    /// the one the signature file names).
    pub key: &'a ed25519_dalek::VerifyingKey,
    /// The signature file's record, or why there is none.
    pub record: Result<&'a TraceSignature, &'a str>,
}

/// How the trace's integrity stands (in [`TraceSummary`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Integrity {
    /// `intact` (every event linked), `broken`, `absent` (no event
    /// carries a `prev`), or `not checked` (events given without their
    /// lines, the chain not required).
    pub chain: &'static str,
    /// The digest of the last line: what a signature covers.
    pub head: Option<String>,
    /// `verified`, `failed`, or `not checked` (no key given).
    pub signature: &'static str,
}

impl Checker<'_> {
    /// Links the event just read (`digest`: of its line) to the one before.
    pub(super) fn link(&mut self, e: &Event, digest: [u8; 32]) {
        let chain = &mut self.chain;
        let Some(prev) = &e.prev else {
            chain.unlinked += 1;
            chain.first_unlinked.get_or_insert(e.seq);
            chain.last = Some((e.seq, digest));
            return;
        };
        chain.linked += 1;
        let before = chain.last.replace((e.seq, digest));
        let holds = match before {
            None => **prev == *chain::genesis(&e.run_id),
            Some((_, digest)) => chain::names(prev, &digest),
        };
        if holds {
            return;
        }
        chain.breaks += 1;
        if chain.breaks > MAX_BREAKS {
            return;
        }
        let (expected, message) = match before {
            None => (
                chain::genesis(&e.run_id),
                format!("the first event's `prev` is not the genesis of run `{}`: events were removed from the start of the trace, or this one was edited", e.run_id),
            ),
            Some((seq, digest)) => (
                chain::text(&digest),
                format!("the chain breaks here: `prev` is not the digest of the line before (seq {seq}) — that line was edited, or events were removed, inserted or moved here"),
            ),
        };
        self.push(Deviation::new(codes::CHAIN, Some(e.seq), message).expected(expected).actual(prev.to_string()));
    }

    /// The chain's verdict at the end, and the signature's.
    pub(super) fn seal(&mut self) -> Integrity {
        let c = std::mem::take(&mut self.chain);
        if c.breaks > MAX_BREAKS {
            self.push(Deviation::new(codes::CHAIN, None, format!("and {} more broken links", c.breaks - MAX_BREAKS)));
        }
        let head = c.last.map(|(_, d)| chain::text(&d));
        let state = match (c.linked, c.unlinked, c.breaks) {
            _ if c.skipped => "not checked",
            (0, _, _) => "absent",
            (_, 0, 0) => "intact",
            _ => "broken",
        };
        if c.linked > 0 && c.unlinked > 0 {
            self.push(
                Deviation::new(
                    codes::CHAIN,
                    c.first_unlinked,
                    format!(
                        "{} event(s) carry no `prev` in a chained trace, the first here: written by something other than Flow, or edited",
                        c.unlinked
                    ),
                )
                .expected("a `prev` on every event"),
            );
        }
        if c.linked == 0 && c.unlinked > 0 {
            if self.options.require_chain {
                self.push(
                    Deviation::new(
                        codes::CHAIN,
                        None,
                        "the trace carries no hash chain (no event has a `prev`): its integrity cannot be checked",
                    )
                    .expected("a `prev` on every event, as flow run and flowc verify write them"),
                );
            } else {
                self.notes.push("the trace carries no hash chain: its integrity was not checked".into());
            }
        }
        let signature = match self.options.signature {
            None => "not checked",
            Some(check) => match self.signature_deviation(check, c.last.map(|(seq, _)| seq), head.as_deref()) {
                None => "verified",
                Some(d) => {
                    self.push(d);
                    "failed"
                }
            },
        };
        Integrity { chain: state, head, signature }
    }

    fn signature_deviation(&self, check: SignatureCheck<'_>, last_seq: Option<u64>, head: Option<&str>) -> Option<Deviation> {
        let record = match check.record {
            Ok(record) => record,
            Err(why) => return Some(Deviation::new(codes::SIGNATURE, None, format!("the trace's signature cannot be read: {why}"))),
        };
        if let Err(why) = crate::signing::verify(check.key, record) {
            return Some(Deviation::new(codes::SIGNATURE, None, format!("the signature does not verify: {why}")));
        }
        let run_id = self.run_id.as_deref().unwrap_or("");
        if record.run_id != run_id {
            return Some(
                Deviation::new(codes::SIGNATURE, None, "the signature is of another run")
                    .expected(run_id.to_string())
                    .actual(record.run_id.clone()),
            );
        }
        if Some(record.seq) != last_seq || Some(record.head.as_str()) != head {
            let ends = match (last_seq, head) {
                (Some(seq), Some(head)) => format!("seq {seq}, head {head}"),
                _ => "no event".to_string(),
            };
            return Some(
                Deviation::new(
                    codes::SIGNATURE,
                    last_seq,
                    "the signature does not cover the trace as it ends: events were cut from the end or added after it, or the chain was recomputed",
                )
                .expected(format!("seq {}, head {}", record.seq, record.head))
                .actual(ends),
            );
        }
        None
    }
}
