//! Reading an event from one line of JSON, fast.
//!
//! [`event_from_str`] first reads the line with a small deserializer for the
//! JSON this crate writes: strings without escapes (borrowed, found 16 bytes
//! at a time), non-negative integers, decimals, `true`, `false`, `null`,
//! objects and arrays. Anything else — an escape, a negative number, deep
//! nesting, a value of the wrong type, a missing field, a syntax error —
//! makes it give up, and the line is read again by `serde_json`, whose
//! result (the event or the error) is then the answer. So the fast reader
//! only has to be right when it succeeds: on every line it accepts, it
//! yields exactly the event `serde_json` would (a differential test holds it
//! to that).

use crate::Event;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::fmt;

/// Reads one event from a line of JSON: the same result as
/// `serde_json::from_str::<Event>(line)`, in about half the time for the
/// lines `flow run` writes.
pub fn event_from_str(line: &str) -> Result<Event, serde_json::Error> {
    match read_fast(line) {
        Some(event) => Ok(event),
        None => serde_json::from_str(line),
    }
}

/// The fast reader alone: `None` when it gave up.
fn read_fast(line: &str) -> Option<Event> {
    let mut reader = Reader { text: line, pos: 0, depth: 0 };
    let event = Event::deserialize(&mut reader).ok()?;
    reader.skip_ws();
    (reader.pos == line.len()).then_some(event)
}

/// Why the fast reader gave up (the reason does not matter: `serde_json`
/// reads the line again and says what is wrong).
#[derive(Debug)]
struct GiveUp;

impl fmt::Display for GiveUp {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("not read by the fast reader")
    }
}

impl std::error::Error for GiveUp {}

impl de::Error for GiveUp {
    fn custom<T: fmt::Display>(_: T) -> GiveUp {
        GiveUp
    }
}

/// Nesting deeper than this is left to `serde_json` (whose limit is 128).
const MAX_DEPTH: u32 = 64;

struct Reader<'de> {
    text: &'de str,
    pos: usize,
    depth: u32,
}

impl<'de> Reader<'de> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.pos += 1;
        }
    }

    /// The next byte after white space.
    fn next_token(&mut self) -> Result<u8, GiveUp> {
        self.skip_ws();
        self.peek().ok_or(GiveUp)
    }

    fn expect(&mut self, byte: u8) -> Result<(), GiveUp> {
        if self.next_token()? == byte {
            self.pos += 1;
            Ok(())
        } else {
            Err(GiveUp)
        }
    }

    fn literal(&mut self, word: &str) -> Result<(), GiveUp> {
        if self.text.as_bytes()[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(GiveUp)
        }
    }

    /// A string whose opening quote is at `pos`; only one without escapes
    /// or control characters.
    fn string(&mut self) -> Result<&'de str, GiveUp> {
        let start = self.pos + 1;
        let bytes = &self.text.as_bytes()[start..];
        let end = start + special(bytes);
        if self.text.as_bytes().get(end) != Some(&b'"') {
            return Err(GiveUp);
        }
        self.pos = end + 1;
        // The quotes are ASCII, so the slice is on character boundaries.
        self.text.get(start..end).ok_or(GiveUp)
    }

    /// A number at `pos`: a non-negative integer (without leading zeros)
    /// as `u64`, or a decimal as `f64` read by `serde_json` itself.
    fn number<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value, GiveUp> {
        let bytes = self.text.as_bytes();
        let start = self.pos;
        let mut end = start;
        while let Some(b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') = bytes.get(end) {
            end += 1;
        }
        let token = &bytes[start..end];
        self.pos = end;
        if token.iter().all(u8::is_ascii_digit) {
            if token.len() > 1 && token[0] == b'0' {
                return Err(GiveUp);
            }
            let mut n: u64 = 0;
            for &d in token {
                n = n.checked_mul(10).and_then(|n| n.checked_add(u64::from(d - b'0'))).ok_or(GiveUp)?;
            }
            return visitor.visit_u64(n);
        }
        // Negative numbers (serde_json reads `-0` as a float) are left to it.
        if token.first() == Some(&b'-') {
            return Err(GiveUp);
        }
        let text = self.text.get(start..end).ok_or(GiveUp)?;
        let value: f64 = serde_json::from_str(text).map_err(|_| GiveUp)?;
        visitor.visit_f64(value)
    }

    fn enter(&mut self) -> Result<(), GiveUp> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(GiveUp);
        }
        Ok(())
    }
}

/// The offset of the first `"`, `\` or control character in `bytes` (or its
/// length), eight bytes at a time: a byte is found when subtracting from it
/// borrows (the lowest such byte is exact, which is the one wanted).
fn special(bytes: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero_in = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let mut i = 0;
    for chunk in bytes.chunks_exact(8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word);
        let hits =
            zero_in(x ^ (ONES * u64::from(b'"'))) | zero_in(x ^ (ONES * u64::from(b'\\'))) | (x.wrapping_sub(ONES * 0x20) & !x & HIGH);
        if hits != 0 {
            return i + (hits.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i + bytes[i..].iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20).unwrap_or(bytes.len() - i)
}

impl<'de> Deserializer<'de> for &mut Reader<'de> {
    type Error = GiveUp;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, GiveUp> {
        match self.next_token()? {
            b'{' => {
                self.pos += 1;
                self.enter()?;
                let mut access = Items::new(self, b'}');
                let value = visitor.visit_map(&mut access)?;
                access.finish()?;
                Ok(value)
            }
            b'[' => {
                self.pos += 1;
                self.enter()?;
                let mut access = Items::new(self, b']');
                let value = visitor.visit_seq(&mut access)?;
                access.finish()?;
                Ok(value)
            }
            b'"' => visitor.visit_borrowed_str(self.string()?),
            b't' => {
                self.literal("true")?;
                visitor.visit_bool(true)
            }
            b'f' => {
                self.literal("false")?;
                visitor.visit_bool(false)
            }
            b'n' => {
                self.literal("null")?;
                visitor.visit_unit()
            }
            b'0'..=b'9' => self.number(visitor),
            _ => Err(GiveUp),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, GiveUp> {
        if self.next_token()? == b'n' {
            self.literal("null")?;
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> Result<V::Value, GiveUp> {
        visitor.visit_newtype_struct(self)
    }

    // Enums and bytes are read differently by serde_json: left to it.
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, GiveUp> {
        Err(GiveUp)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, GiveUp> {
        Err(GiveUp)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, GiveUp> {
        Err(GiveUp)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        unit unit_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

/// The items of an object or an array, up to `close`.
struct Items<'a, 'de> {
    reader: &'a mut Reader<'de>,
    close: u8,
    first: bool,
    done: bool,
}

impl<'a, 'de> Items<'a, 'de> {
    fn new(reader: &'a mut Reader<'de>, close: u8) -> Self {
        Items { reader, close, first: true, done: false }
    }

    /// Whether another item follows (its separator is consumed); at the
    /// closing bracket, consumes it and answers no.
    fn more(&mut self) -> Result<bool, GiveUp> {
        if self.done {
            return Ok(false);
        }
        let token = self.reader.next_token()?;
        if token == self.close {
            self.reader.pos += 1;
            self.done = true;
            return Ok(false);
        }
        if !self.first {
            if token != b',' {
                return Err(GiveUp);
            }
            self.reader.pos += 1;
        }
        self.first = false;
        Ok(true)
    }

    /// The visitor took every item: leave the container.
    fn finish(self) -> Result<(), GiveUp> {
        if !self.done {
            return Err(GiveUp);
        }
        self.reader.depth -= 1;
        Ok(())
    }
}

impl<'de> MapAccess<'de> for Items<'_, 'de> {
    type Error = GiveUp;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, GiveUp> {
        if !self.more()? {
            return Ok(None);
        }
        if self.reader.next_token()? != b'"' {
            return Err(GiveUp);
        }
        let key = self.reader.string()?;
        seed.deserialize(de::value::BorrowedStrDeserializer::new(key)).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, GiveUp> {
        self.reader.expect(b':')?;
        seed.deserialize(&mut *self.reader)
    }
}

impl<'de> SeqAccess<'de> for Items<'_, 'de> {
    type Error = GiveUp;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, GiveUp> {
        if !self.more()? {
            return Ok(None);
        }
        seed.deserialize(&mut *self.reader).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ArtifactRef, Body, Usage};
    use proptest::prelude::*;

    fn event(body: Body) -> Event {
        Event {
            run_id: "run-20261201-061635-62d8e2".into(),
            execution_id: "exec-1".into(),
            seq: 7,
            event_id: "run-20261201-061635-62d8e2/7".into(),
            parent_event_id: Some("run-20261201-061635-62d8e2/6".into()),
            producer: "control".into(),
            body,
            time: "2026-12-01T06:16:36.669Z".into(),
            prev: None,
        }
    }

    fn bodies() -> Vec<Body> {
        vec![
            Body::NodeStarted { schema_version: 1, node: "n3".into(), node_kind: crate::NodeKind::Tool, visit: 1 },
            // The closed words (status, outcome, context) are read fast too.
            Body::NodeCompleted { schema_version: 1, node: "n3".into(), status: crate::NodeStatus::Skipped, output: None },
            Body::GateRecorded {
                schema_version: 1,
                gate: "g".into(),
                from: "a".into(),
                to: "b".into(),
                outcome: crate::Outcome::RequiresDecision,
                reason: None,
                evaluators: vec![crate::EvaluatorResult {
                    evaluator: "p".into(),
                    outcome: crate::Outcome::Block,
                    reason: None,
                    error: false,
                }],
                trigger: "control".into(),
            },
            Body::RunTerminated { schema_version: 1, reason: "done".into(), status: crate::TerminationStatus::Partial, output: None },
            Body::BudgetSettled {
                schema_version: 1,
                scope: "run".into(),
                attempt_id: "a#1.1".into(),
                used: Usage { steps: 1, tokens: 120, tool_calls: 0, cost: 0.0125, duration_ms: 3 },
                remaining: Usage { steps: 9, tokens: 880, tool_calls: 2, cost: 1e-7, duration_ms: 0 },
            },
            Body::Handoff {
                schema_version: 1,
                from: "a".into(),
                to: "b".into(),
                reason: None,
                context: crate::ContextMode::Filtered,
                context_fields: vec!["x".into(), "y".into()],
                payload: ArtifactRef { digest: "sha256:00".into(), size: 2 },
                accepted: true,
                artifacts: vec![ArtifactRef { digest: "sha256:01".into(), size: 3 }],
            },
            Body::NodeFailed {
                schema_version: 1,
                node: "w".into(),
                error_code: crate::ErrorCode::ToolError,
                message: "said \"no\"\n".into(),
            },
        ]
    }

    #[test]
    fn written_events_are_read_fast_and_the_same() {
        for body in bodies() {
            let e = event(body);
            let text = serde_json::to_string(&e).unwrap();
            assert_eq!(event_from_str(&text).unwrap(), e, "{text}");
            // Escapes are left to serde_json; the rest is read fast.
            assert_eq!(read_fast(&text).is_some(), !text.contains('\\'), "{text}");
        }
    }

    #[test]
    fn what_the_fast_reader_leaves_gets_serde_json_answers() {
        let base = serde_json::to_string(&event(bodies().remove(0))).unwrap();
        let cases = [
            base.replace("\"seq\":7", "\"seq\":-7"),
            base.replace("\"seq\":7", "\"seq\":07"),
            base.replace("\"seq\":7", "\"seq\":7.0"),
            base.replace("\"seq\":7", "\"seq\":99999999999999999999"),
            base.replace("\"seq\":7", "\"seq\":\"7\""),
            base.replace("\"visit\":1", "\"visit\":-0"),
            base.replace("\"control\"", "\"con\\u0074rol\""),
            base.replace("\"control\"", "\"con\ttrol\""),
            base.replace(",\"time\"", ",,\"time\""),
            base.replace('}', " } "),
            format!("{base} x"),
            format!("{base}{{}}"),
            base[..base.len() - 1].to_string(),
            base.replace("\"kind\":\"node_started\",", ""),
            base.replace("\"time\"", "\"extra\":[1,[2,{\"a\":null}],true,1.5e3],\"time\""),
            base.replace("\"time\"", "\"seq\":8,\"time\""),
            "[]".to_string(),
            String::new(),
        ];
        for text in cases {
            let expected = serde_json::from_str::<Event>(&text).map_err(|e| e.to_string());
            let fast = read_fast(&text);
            if let Some(fast) = &fast {
                assert_eq!(Ok(fast), expected.as_ref(), "{text}");
            }
            assert_eq!(event_from_str(&text).map_err(|e| e.to_string()), expected, "{text}");
        }
    }

    #[test]
    fn deep_nesting_is_left_to_serde_json() {
        let base = serde_json::to_string(&event(bodies().remove(0))).unwrap();
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        let text = base.replace("\"time\"", &format!("\"extra\":{deep},\"time\""));
        assert!(read_fast(&text).is_none());
        // serde_json skips an unknown field without recursing.
        assert_eq!(event_from_str(&text).unwrap(), serde_json::from_str::<Event>(&text).unwrap());
    }

    /// 3000 cases from a fixed seed, unless `PROPTEST_RNG_SEED` sets one.
    fn config() -> ProptestConfig {
        let from_env = ProptestConfig::default();
        let rng_seed = match from_env.rng_seed {
            proptest::test_runner::RngSeed::Random => proptest::test_runner::RngSeed::Fixed(0x0f1a_57ed),
            seed => seed,
        };
        ProptestConfig { cases: 3000, rng_seed, failure_persistence: None, ..from_env }
    }

    proptest! {
        #![proptest_config(config())]
        /// The word-at-a-time search finds what a byte-by-byte one finds.
        #[test]
        fn special_finds_the_first_quote_backslash_or_control(bytes in prop::collection::vec(
            prop::sample::select(vec![b'a', b'"', b'\\', 0x00, 0x1f, 0x20, 0x7f, 0x80, 0xa0, 0xff, b'#']), 0..40)) {
            let naive = bytes.iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20).unwrap_or(bytes.len());
            prop_assert_eq!(special(&bytes), naive);
        }

        /// Whatever a line is, the fast reader accepts it only when serde_json
        /// reads the same event from it.
        #[test]
        fn the_fast_reader_agrees_with_serde_json(
            which in 0usize..4,
            cut in 0usize..400,
            splice in prop::sample::select(vec![
                "", " ", "\\", "\"", "-", "0", "1.5", "e9", ",", ":", "{", "}", "[", "]", "null", "true",
                "\u{1}", "é", "\"x\":1,", "9999999999999999999999",
            ]),
            drop in 0usize..3,
        ) {
            let text = serde_json::to_string(&event(bodies().remove(which))).unwrap();
            let at = text.char_indices().map(|(i, _)| i).nth(cut % text.chars().count()).unwrap_or(0);
            let rest = &text[at..];
            let skip = rest.char_indices().map(|(i, _)| i).nth(drop).unwrap_or(rest.len());
            let mutated = format!("{}{}{}", &text[..at], splice, &rest[skip..]);
            let expected = serde_json::from_str::<Event>(&mutated).map_err(|e| e.to_string());
            if let Some(fast) = read_fast(&mutated) {
                prop_assert_eq!(Ok(&fast), expected.as_ref(), "{}", mutated);
            }
            prop_assert_eq!(event_from_str(&mutated).map_err(|e| e.to_string()), expected);
        }
    }
}
