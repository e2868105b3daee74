//! Reading events without buffering: the envelope fields are read as they
//! come, and the payload is handed to [`Body`]'s own (adjacently tagged)
//! deserializer together with the `kind` read before it. A payload that
//! precedes its `kind` (not what this crate writes, but valid JSON) is
//! buffered and read afterwards.

use crate::{Body, Event, Str};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, IntoDeserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::cell::RefCell;
use std::fmt;

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum Field {
    RunId,
    ExecutionId,
    Seq,
    EventId,
    ParentEventId,
    Producer,
    Kind,
    Payload,
    Time,
    Prev,
    #[serde(other)]
    Other,
}

/// A deserializer presenting `{"kind": KIND, "payload": PAYLOAD}` to
/// [`Body`]'s derived deserializer, with the payload still unread.
struct Tagged<'a, D> {
    kind: &'a str,
    payload: D,
}

struct TaggedMap<'a, D> {
    kind: &'a str,
    payload: Option<D>,
    stage: u8,
}

impl<'de, D: Deserializer<'de>> MapAccess<'de> for TaggedMap<'_, D> {
    type Error = D::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, D::Error> {
        match self.stage {
            0 => seed.deserialize(IntoDeserializer::<D::Error>::into_deserializer("kind")).map(Some),
            1 => seed.deserialize(IntoDeserializer::<D::Error>::into_deserializer("payload")).map(Some),
            _ => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, D::Error> {
        self.stage += 1;
        if self.stage == 1 {
            return seed.deserialize(IntoDeserializer::<D::Error>::into_deserializer(self.kind));
        }
        match self.payload.take() {
            Some(payload) => seed.deserialize(payload),
            None => Err(de::Error::custom("the payload was already read")),
        }
    }
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Tagged<'_, D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        visitor.visit_map(TaggedMap { kind: self.kind, payload: Some(self.payload), stage: 0 })
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

/// Reads a payload as the body of `kind`.
struct BodySeed<'a>(&'a str);

impl<'de> DeserializeSeed<'de> for BodySeed<'_> {
    type Value = Body;

    fn deserialize<D: Deserializer<'de>>(self, payload: D) -> Result<Body, D::Error> {
        Body::deserialize(Tagged { kind: self.0, payload })
    }
}

/// An event's `kind`, read without allocating when it is short (every
/// kind this crate knows is).
enum KindText {
    Inline([u8; 32], u8),
    Heap(String),
}

impl KindText {
    fn as_str(&self) -> &str {
        match self {
            // Only whole `&str`s are copied in, so the bytes are UTF-8.
            KindText::Inline(bytes, len) => std::str::from_utf8(&bytes[..*len as usize]).unwrap_or(""),
            KindText::Heap(text) => text,
        }
    }
}

impl<'de> Deserialize<'de> for KindText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<KindText, D::Error> {
        struct KindVisitor;
        impl Visitor<'_> for KindVisitor {
            type Value = KindText;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an event kind")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<KindText, E> {
                let mut bytes = [0u8; 32];
                match bytes.get_mut(..v.len()) {
                    Some(head) => {
                        head.copy_from_slice(v.as_bytes());
                        Ok(KindText::Inline(bytes, v.len() as u8))
                    }
                    None => Ok(KindText::Heap(v.to_string())),
                }
            }
        }
        deserializer.deserialize_str(KindVisitor)
    }
}

/// The envelope strings read last on this thread: consecutive events
/// repeat their run id, execution id, producer and (often) time, and name a
/// recent event as parent, so those are shared instead of allocated again.
#[derive(Default)]
struct Recent {
    run_id: Option<Str>,
    execution_id: Option<Str>,
    time: Option<Str>,
    producers: Vec<Str>,
    /// The last event ids read, oldest first.
    ids: std::collections::VecDeque<Str>,
}

/// How many event ids [`Recent`] keeps (a parent is usually a few events back).
const RECENT_IDS: usize = 16;
/// How many producers [`Recent`] keeps.
const RECENT_PRODUCERS: usize = 32;

thread_local! {
    static RECENT: RefCell<Recent> = RefCell::new(Recent::default());
}

/// Which envelope field a string is read for.
#[derive(Clone, Copy)]
enum Slot {
    RunId,
    ExecutionId,
    EventId,
    Parent,
    Producer,
    Time,
}

/// `text` as a shared string: the one read before for the same field when
/// equal, else a new one (remembered).
fn share(slot: Slot, text: &str) -> Str {
    RECENT.with(|recent| {
        let mut recent = recent.borrow_mut();
        let last = match slot {
            Slot::RunId => &mut recent.run_id,
            Slot::ExecutionId => &mut recent.execution_id,
            Slot::Time => &mut recent.time,
            Slot::EventId => {
                let id = Str::from(text);
                if recent.ids.len() == RECENT_IDS {
                    recent.ids.pop_front();
                }
                recent.ids.push_back(id.clone());
                return id;
            }
            Slot::Parent => return recent.ids.iter().rev().find(|id| &***id == text).cloned().unwrap_or_else(|| Str::from(text)),
            Slot::Producer => {
                if let Some(p) = recent.producers.iter().find(|p| &***p == text) {
                    return p.clone();
                }
                let p = Str::from(text);
                if recent.producers.len() < RECENT_PRODUCERS {
                    recent.producers.push(p.clone());
                }
                return p;
            }
        };
        match last {
            Some(value) if &**value == text => value.clone(),
            _ => {
                let value = Str::from(text);
                *last = Some(value.clone());
                value
            }
        }
    })
}

/// Reads a string for an envelope field through [`share`].
struct Shared(Slot);

impl<'de> DeserializeSeed<'de> for Shared {
    type Value = Str;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Str, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for Shared {
    type Value = Str;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Str, E> {
        Ok(share(self.0, v))
    }
}

/// Reads `null` or a string through [`share`].
struct SharedOption(Slot);

impl<'de> DeserializeSeed<'de> for SharedOption {
    type Value = Option<Str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<Str>, D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for SharedOption {
    type Value = Option<Str>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string or null")
    }
    fn visit_none<E: de::Error>(self) -> Result<Option<Str>, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Option<Str>, E> {
        Ok(None)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<Str>, D::Error> {
        Shared(self.0).deserialize(d).map(Some)
    }
}

struct EventVisitor;

impl<'de> Visitor<'de> for EventVisitor {
    type Value = Event;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a trace event")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Event, M::Error> {
        let mut run_id = None;
        let mut execution_id = None;
        let mut seq = None;
        let mut event_id = None;
        let mut parent_event_id = None;
        let mut producer = None;
        let mut kind: Option<KindText> = None;
        let mut body = None;
        let mut early_payload: Option<serde_json::Value> = None;
        let mut time = None;
        let mut prev: Option<Str> = None;
        while let Some(field) = map.next_key::<Field>()? {
            match field {
                Field::RunId => run_id = Some(map.next_value_seed(Shared(Slot::RunId))?),
                Field::ExecutionId => execution_id = Some(map.next_value_seed(Shared(Slot::ExecutionId))?),
                Field::Seq => seq = Some(map.next_value::<u64>()?),
                Field::EventId => event_id = Some(map.next_value_seed(Shared(Slot::EventId))?),
                Field::ParentEventId => parent_event_id = map.next_value_seed(SharedOption(Slot::Parent))?,
                Field::Producer => producer = Some(map.next_value_seed(Shared(Slot::Producer))?),
                Field::Kind => kind = Some(map.next_value::<KindText>()?),
                Field::Payload => match &kind {
                    Some(k) => body = Some(map.next_value_seed(BodySeed(k.as_str()))?),
                    None => early_payload = Some(map.next_value::<serde_json::Value>()?),
                },
                Field::Time => time = Some(map.next_value_seed(Shared(Slot::Time))?),
                Field::Prev => prev = map.next_value::<Option<std::borrow::Cow<'de, str>>>()?.map(|p| Str::from(&*p)),
                Field::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let kind = kind.ok_or_else(|| de::Error::missing_field("kind"))?;
        let kind = kind.as_str();
        let body = match (body, early_payload) {
            (Some(body), _) => body,
            (None, Some(payload)) => BodySeed(kind).deserialize(payload).map_err(de::Error::custom)?,
            // A kind with no payload: let the body say whether that is valid.
            (None, None) => BodySeed(kind).deserialize(serde_json::Value::Null).map_err(de::Error::custom)?,
        };
        Ok(Event {
            run_id: run_id.ok_or_else(|| de::Error::missing_field("run_id"))?,
            execution_id: execution_id.ok_or_else(|| de::Error::missing_field("execution_id"))?,
            seq: seq.ok_or_else(|| de::Error::missing_field("seq"))?,
            event_id: event_id.ok_or_else(|| de::Error::missing_field("event_id"))?,
            parent_event_id,
            producer: producer.ok_or_else(|| de::Error::missing_field("producer"))?,
            body,
            time: time.ok_or_else(|| de::Error::missing_field("time"))?,
            prev,
        })
    }
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Event, D::Error> {
        deserializer.deserialize_map(EventVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ArtifactRef;

    fn sample() -> Vec<Event> {
        let bodies = vec![
            Body::NodeStarted { schema_version: 1, node: "a".into(), node_kind: crate::NodeKind::Agent, visit: 1 },
            Body::RunTerminated { schema_version: 1, reason: "done".into(), status: crate::TerminationStatus::Success, output: None },
            Body::Handoff {
                schema_version: 1,
                from: "a".into(),
                to: "b".into(),
                reason: Some("r".into()),
                context: crate::ContextMode::Filtered,
                context_fields: vec!["x".into()],
                payload: ArtifactRef { digest: "sha256:00".into(), size: 2 },
                accepted: true,
                artifacts: vec![ArtifactRef { digest: "sha256:01".into(), size: 3 }],
            },
        ];
        bodies
            .into_iter()
            .enumerate()
            .map(|(i, body)| Event {
                run_id: "r".into(),
                execution_id: "exec-1".into(),
                seq: i as u64 + 1,
                event_id: Event::id_for("r", i as u64 + 1).into(),
                parent_event_id: (i > 0).then(|| "r/1".into()),
                producer: "control".into(),
                body,
                time: "1970-01-01T00:00:00Z".into(),
                prev: None,
            })
            .collect()
    }

    #[test]
    fn events_round_trip_through_json_text_and_values() {
        for event in sample() {
            let text = serde_json::to_string(&event).unwrap();
            assert_eq!(serde_json::from_str::<Event>(&text).unwrap(), event, "{text}");
            let value = serde_json::to_value(&event).unwrap();
            assert_eq!(serde_json::from_value::<Event>(value).unwrap(), event);
        }
    }

    #[test]
    fn envelope_strings_are_shared_between_events_and_never_mixed_up() {
        let events = sample();
        let read: Vec<Event> = events.iter().map(|e| serde_json::from_str(&serde_json::to_string(e).unwrap()).unwrap()).collect();
        assert_eq!(read, events);
        // The same run id, and a parent naming a recent event, are one allocation.
        assert!(std::sync::Arc::ptr_eq(&read[0].run_id, &read[1].run_id));
        assert!(std::sync::Arc::ptr_eq(read[2].parent_event_id.as_ref().unwrap(), &read[0].event_id));
        // Another run's event gets its own strings, equal to what it says.
        let mut other = events[1].clone();
        other.run_id = "other".into();
        other.event_id = "other/2".into();
        other.parent_event_id = Some("r/9".into());
        let back: Event = serde_json::from_str(&serde_json::to_string(&other).unwrap()).unwrap();
        assert_eq!(back, other);
        let again: Event = serde_json::from_str(&serde_json::to_string(&events[0]).unwrap()).unwrap();
        assert_eq!(again, events[0]);
    }

    #[test]
    fn a_payload_before_its_kind_and_unknown_fields_are_read() {
        let text = r#"{"payload":{"schema_version":1,"node":"a","node_kind":"agent","visit":1},"extra":[1,2],"run_id":"r","execution_id":"exec-1","seq":1,"event_id":"r/1","producer":"control","kind":"node_started","time":"t"}"#;
        let event: Event = serde_json::from_str(text).unwrap();
        assert_eq!(event.body, Body::NodeStarted { schema_version: 1, node: "a".into(), node_kind: crate::NodeKind::Agent, visit: 1 });
    }

    #[test]
    fn a_wrong_payload_or_a_missing_field_is_an_error() {
        let wrong = r#"{"run_id":"r","execution_id":"e","seq":1,"event_id":"r/1","producer":"p","kind":"node_started","payload":{"node":3},"time":"t"}"#;
        assert!(serde_json::from_str::<Event>(wrong).is_err());
        let unknown =
            r#"{"run_id":"r","execution_id":"e","seq":1,"event_id":"r/1","producer":"p","kind":"no_such_kind","payload":{},"time":"t"}"#;
        assert!(serde_json::from_str::<Event>(unknown).is_err());
        let long = r#"{"run_id":"r","execution_id":"e","seq":1,"event_id":"r/1","producer":"p","kind":"a_kind_name_longer_than_thirty_two_bytes","payload":{},"time":"t"}"#;
        let err = serde_json::from_str::<Event>(long).unwrap_err().to_string();
        assert!(err.contains("a_kind_name_longer_than_thirty_two_bytes"), "{err}");
        let escaped = r#"{"run_id":"r","execution_id":"e","seq":1,"event_id":"r/1","producer":"p","kind":"node\u005fstarted","payload":{"schema_version":1,"node":"a","node_kind":"agent","visit":1},"time":"t"}"#;
        assert_eq!(serde_json::from_str::<Event>(escaped).unwrap().kind(), "node_started");
        let missing = r#"{"run_id":"r","execution_id":"e","event_id":"r/1","producer":"p","kind":"node_started","payload":{"schema_version":1,"node":"a","node_kind":"agent","visit":1},"time":"t"}"#;
        let err = serde_json::from_str::<Event>(missing).unwrap_err().to_string();
        assert!(err.contains("seq"), "{err}");
    }
}
