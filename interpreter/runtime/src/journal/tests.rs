//! The journals' and the artifact stores' shared semantics.

use super::artifacts::sha256_hex;
use super::*;
use flow_trace::{Body, SCHEMA_VERSION};
use serde_json::json;

fn ev(run: &str, seq: u64, message: &str) -> Event {
    Event {
        run_id: run.into(),
        execution_id: "exec-1".into(),
        seq,
        event_id: Event::id_for(run, seq).into(),
        parent_event_id: None,
        producer: "control".into(),
        body: Body::Warning { schema_version: SCHEMA_VERSION, message: message.into() },
        time: "2026-01-01T00:00:00Z".into(),
        prev: None,
    }
}

/// Runs a test body over a fresh journal of each implementation.
fn both(body: impl Fn(&mut dyn Journal)) {
    let mut memory = MemoryJournal::new();
    body(&mut memory);
    let dir = tempfile::tempdir().unwrap();
    let mut sqlite = SqliteJournal::open(&dir.path().join("journal.db"), false).unwrap();
    body(&mut sqlite);
}

#[test]
fn appends_read_back_in_order() {
    both(|j| {
        assert_eq!(j.last_seq("r").unwrap(), 0);
        assert!(j.events("r").unwrap().is_empty());
        let events: Vec<Event> = (1..=20).map(|seq| ev("r", seq, &format!("m{seq}"))).collect();
        for event in &events {
            assert_eq!(j.append(event).unwrap(), Appended::New);
        }
        assert_eq!(j.events("r").unwrap(), events);
        assert_eq!(j.last_seq("r").unwrap(), 20);
        assert_eq!(j.last_seq("other").unwrap(), 0);
    });
}

#[test]
fn identical_append_is_a_duplicate() {
    both(|j| {
        j.append(&ev("r", 1, "a")).unwrap();
        j.append(&ev("r", 2, "b")).unwrap();
        assert_eq!(j.append(&ev("r", 1, "a")).unwrap(), Appended::Duplicate);
        assert_eq!(j.append(&ev("r", 2, "b")).unwrap(), Appended::Duplicate);
        assert_eq!(j.events("r").unwrap().len(), 2);
        // A batch that repeats recorded events and adds new ones.
        j.append_batch(&[ev("r", 2, "b"), ev("r", 3, "c")]).unwrap();
        assert_eq!(j.last_seq("r").unwrap(), 3);
        // The same new event twice in one batch.
        j.append_batch(&[ev("r", 4, "d"), ev("r", 4, "d")]).unwrap();
        assert_eq!(j.events("r").unwrap().len(), 4);
    });
}

#[test]
fn different_content_at_a_recorded_seq_conflicts() {
    both(|j| {
        j.append(&ev("r", 1, "a")).unwrap();
        let err = j.append(&ev("r", 1, "other")).unwrap_err();
        assert!(matches!(err, JournalError::Conflict { ref run_id, seq: 1 } if run_id == "r"), "{err}");
        assert_eq!(j.events("r").unwrap(), vec![ev("r", 1, "a")]);
    });
}

#[test]
fn gaps_and_old_seqs_are_stale() {
    both(|j| {
        let err = j.append(&ev("r", 2, "gap")).unwrap_err();
        assert!(matches!(err, JournalError::Stale { expected: 1, got: 2, .. }), "{err}");
        j.append(&ev("r", 1, "a")).unwrap();
        j.append(&ev("r", 2, "b")).unwrap();
        let err = j.append(&ev("r", 4, "gap")).unwrap_err();
        assert!(matches!(err, JournalError::Stale { expected: 3, got: 4, .. }), "{err}");
        let err = j.append(&ev("r", 0, "old")).unwrap_err();
        assert!(matches!(err, JournalError::Stale { expected: 3, got: 0, .. }), "{err}");
        assert_eq!(j.last_seq("r").unwrap(), 2);
    });
}

#[test]
fn batches_are_all_or_nothing() {
    both(|j| {
        j.append(&ev("r", 1, "a")).unwrap();
        // A gap in the middle.
        let err = j.append_batch(&[ev("r", 2, "b"), ev("r", 4, "d"), ev("r", 5, "e")]).unwrap_err();
        assert!(matches!(err, JournalError::Stale { expected: 3, got: 4, .. }), "{err}");
        assert_eq!(j.last_seq("r").unwrap(), 1);
        // A conflict in the middle.
        let err = j.append_batch(&[ev("r", 2, "b"), ev("r", 1, "changed"), ev("r", 3, "c")]).unwrap_err();
        assert!(matches!(err, JournalError::Conflict { seq: 1, .. }), "{err}");
        // A conflict within the batch itself.
        let err = j.append_batch(&[ev("r", 2, "b"), ev("r", 2, "b2")]).unwrap_err();
        assert!(matches!(err, JournalError::Conflict { seq: 2, .. }), "{err}");
        assert_eq!(j.events("r").unwrap(), vec![ev("r", 1, "a")]);
        // A good batch, across two runs.
        j.append_batch(&[ev("r", 2, "b"), ev("s", 1, "x"), ev("r", 3, "c"), ev("s", 2, "y")]).unwrap();
        assert_eq!(j.last_seq("r").unwrap(), 3);
        assert_eq!(j.last_seq("s").unwrap(), 2);
        j.append_batch(&[]).unwrap();
    });
}

#[test]
fn meta_is_upserted() {
    both(|j| {
        assert_eq!(j.meta("r", "plan").unwrap(), None);
        j.set_meta("r", "plan", "{}").unwrap();
        j.set_meta("r", "options", "o").unwrap();
        j.set_meta("r", "plan", "{\"v\":2}").unwrap();
        assert_eq!(j.meta("r", "plan").unwrap().as_deref(), Some("{\"v\":2}"));
        assert_eq!(j.meta("r", "options").unwrap().as_deref(), Some("o"));
        assert_eq!(j.meta("s", "plan").unwrap(), None);
    });
}

#[test]
fn runs_are_listed_once_sorted() {
    both(|j| {
        assert!(j.runs().unwrap().is_empty());
        j.append(&ev("run-b", 1, "a")).unwrap();
        j.append(&ev("run-b", 2, "b")).unwrap();
        j.append(&ev("run-a", 1, "a")).unwrap();
        j.set_meta("run-c", "plan", "{}").unwrap();
        j.set_meta("run-a", "plan", "{}").unwrap();
        assert_eq!(j.runs().unwrap(), vec!["run-a", "run-b", "run-c"]);
    });
}

#[test]
fn sqlite_journal_persists_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested").join("journal.db");
    let events: Vec<Event> = (1..=5).map(|seq| ev("r", seq, "m")).collect();
    {
        let mut j = SqliteJournal::open(&path, true).unwrap();
        j.append_batch(&events[..3]).unwrap();
        j.append(&events[3]).unwrap();
        j.append(&events[4]).unwrap();
        j.set_meta("r", "plan", "{}").unwrap();
    }
    let mut j = SqliteJournal::open(&path, false).unwrap();
    assert_eq!(j.events("r").unwrap(), events);
    assert_eq!(j.last_seq("r").unwrap(), 5);
    assert_eq!(j.meta("r", "plan").unwrap().as_deref(), Some("{}"));
    assert_eq!(j.runs().unwrap(), vec!["r"]);
    assert!(matches!(j.append(&ev("r", 3, "stale writer")).unwrap_err(), JournalError::Conflict { seq: 3, .. }));
    assert_eq!(j.append(&ev("r", 6, "m")).unwrap(), Appended::New);
}

#[test]
fn artifact_ref_is_sha256_of_canonical_json() {
    let (artifact, bytes) = artifact_ref(&json!({"b": 1, "a": [true, null]}));
    assert_eq!(bytes, br#"{"b":1,"a":[true,null]}"#);
    assert_eq!(artifact.size, bytes.len() as u64);
    assert_eq!(artifact.digest, format!("sha256:{}", sha256_hex(&bytes)));
    assert_eq!(artifact.digest.len(), 7 + 64);
    let (empty, _) = artifact_ref(&json!(""));
    // sha256 of `""` (two quote characters).
    assert_eq!(empty.digest, "sha256:12ae32cb1ec02d01eda3581b127c1fee3b0dc53572ed6baf239721a03d82e126");
}

/// Runs an artifact test body over a fresh store of each implementation.
fn both_stores(body: impl Fn(&mut dyn ArtifactStore)) {
    body(&mut MemoryArtifacts::new());
    let dir = tempfile::tempdir().unwrap();
    body(&mut DirArtifacts::open(&dir.path().join("artifacts")).unwrap().with_fsync(true));
}

#[test]
fn artifacts_round_trip_and_put_is_idempotent() {
    both_stores(|store| {
        let value = json!({"title": "x", "items": [1, 2, {"k": "v"}]});
        let first = store.put(&value).unwrap();
        let second = store.put(&value).unwrap();
        assert_eq!(first, second);
        assert_eq!(store.get(&first).unwrap(), value);
        let other = store.put(&json!([1])).unwrap();
        assert_ne!(other, first);
        assert_eq!(store.get(&other).unwrap(), json!([1]));
    });
}

#[test]
fn missing_or_malformed_artifacts_are_corrupt() {
    both_stores(|store| {
        let (absent, _) = artifact_ref(&json!("never stored"));
        assert!(matches!(store.get(&absent).unwrap_err(), JournalError::Corrupt(_)));
        let traversal = ArtifactRef { digest: "sha256:../../etc/passwd".into(), size: 1 };
        assert!(matches!(store.get(&traversal).unwrap_err(), JournalError::Corrupt(_)));
        let md5 = ArtifactRef { digest: "md5:abc".into(), size: 1 };
        assert!(matches!(store.get(&md5).unwrap_err(), JournalError::Corrupt(_)));
    });
}

#[test]
fn tampered_artifact_files_are_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = DirArtifacts::open(dir.path()).unwrap();
    let artifact = store.put(&json!({"verdict": "PASS"})).unwrap();
    let path = store.path_of(&artifact).unwrap();
    let hex = artifact.digest.trim_start_matches("sha256:");
    assert_eq!(path, dir.path().join(&hex[..2]).join(format!("{hex}.json")));
    assert_eq!(fs::read(&path).unwrap(), br#"{"verdict":"PASS"}"#);
    // Same size, different content.
    fs::write(&path, br#"{"verdict":"FAIL"}"#).unwrap();
    let err = store.get(&artifact).unwrap_err();
    assert!(matches!(err, JournalError::Corrupt(_)), "{err}");
    // Truncated.
    fs::write(&path, b"{").unwrap();
    assert!(matches!(store.get(&artifact).unwrap_err(), JournalError::Corrupt(_)));
    // A put of the value repairs a file of the wrong size.
    store.put(&json!({"verdict": "PASS"})).unwrap();
    assert_eq!(store.get(&artifact).unwrap(), json!({"verdict": "PASS"}));
    // No temporary files are left behind.
    let leftovers: Vec<_> = fs::read_dir(path.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn sequence_only_journals_check_order_but_keep_nothing() {
    let mut j = MemoryJournal::sequence_only();
    j.append(&ev("r", 1, "a")).unwrap();
    j.append_batch(&[ev("r", 2, "b"), ev("r", 3, "c")]).unwrap();
    assert_eq!(j.last_seq("r").unwrap(), 3);
    assert!(j.events("r").unwrap().is_empty());
    assert!(matches!(j.append(&ev("r", 5, "e")), Err(JournalError::Stale { expected: 4, got: 5, .. })));
}

#[test]
fn errors_display() {
    let stale = JournalError::Stale { run_id: "r".into(), expected: 3, got: 5 };
    assert_eq!(stale.to_string(), "stale append to run `r`: expected seq 3, got 5");
    let boxed: Box<dyn std::error::Error> = Box::new(JournalError::Corrupt("x".into()));
    assert!(boxed.to_string().contains('x'));
}
