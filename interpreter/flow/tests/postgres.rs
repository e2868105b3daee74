//! Runs shared through a real PostgreSQL server: the journal's append and
//! fencing rules, the run queue, and `flow worker` processes — many runs
//! over four workers, a worker killed (kill -9) and taken over, a worker
//! stopped (SIGSTOP) past its lease and fenced off, a decision recorded
//! from another process.
//!
//! Run by `tests/postgres/run.sh`, which starts the server (initdb and
//! pg_ctl, as a non-root user, on a free port) and sets `FLOW_TEST_DB`.
#![allow(clippy::disallowed_methods)]

mod common;

use common::*;
use flow_runtime::db::{self, queue, PgArtifacts, PgConn, PgJournal};
use flow_runtime::journal::{Appended, ArtifactStore, Journal, JournalError};
use flow_trace::{Body, Event, SCHEMA_VERSION};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Output};
use std::time::Duration;

/// The server `tests/postgres/run.sh` started; never skipped.
fn server() -> String {
    std::env::var("FLOW_TEST_DB").expect("FLOW_TEST_DB is not set: run tests/postgres/run.sh, which starts a PostgreSQL server")
}

/// A fresh, migrated database of its own for one test.
fn fresh_db(name: &str) -> String {
    let admin = PgConn::connect(&server()).expect("the test server answers");
    let db = format!("flow_t_{name}");
    // One statement each: CREATE DATABASE cannot run in a transaction.
    sql(&admin, &format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"));
    sql(&admin, &format!("CREATE DATABASE {db}"));
    let (base, _) = server().rsplit_once('/').map(|(b, d)| (b.to_string(), d.to_string())).unwrap();
    let url = format!("{base}/{db}");
    let applied = db::migrate(&PgConn::connect(&url).unwrap()).unwrap();
    assert_eq!(applied.len(), db::MIGRATIONS.len());
    url
}

fn sql(conn: &PgConn, text: &str) {
    let text = text.to_string();
    conn.call(move |c| c.batch_execute(&text).map_err(|e| JournalError::Storage(format!("{e:?}")))).unwrap();
}

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

#[test]
fn migrations_apply_once() {
    let url = fresh_db("migrations");
    let conn = PgConn::connect(&url).unwrap();
    assert!(db::migrate(&conn).unwrap().is_empty(), "a second migrate applies nothing");
    assert!(db::pending_migrations(&conn).unwrap().is_empty());
    let out = flow_env(&["db", "migrate"], &repo(), &[("FLOW_DB", &url)]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("up to date"), "{}", text(&out));
}

#[test]
fn the_journal_keeps_the_append_rules() {
    let url = fresh_db("journal");
    let conn = PgConn::connect(&url).unwrap();
    queue::submit(&conn, "r", Some("w"), "{}", "{}").unwrap();
    let mut j = PgJournal::new(conn.clone());
    assert_eq!(j.last_seq("r").unwrap(), 0);
    let events: Vec<Event> = (1..=20).map(|seq| ev("r", seq, &format!("m{seq}"))).collect();
    for event in &events[..10] {
        assert_eq!(j.append(event).unwrap(), Appended::New);
    }
    j.append_batch(&events[10..]).unwrap();
    assert_eq!(j.events("r").unwrap(), events);
    assert_eq!(j.last_seq("r").unwrap(), 20);
    // The same event again is a harmless duplicate; other content is a conflict.
    assert_eq!(j.append(&events[4]).unwrap(), Appended::Duplicate);
    let err = j.append(&ev("r", 5, "other")).unwrap_err();
    assert!(matches!(err, JournalError::Conflict { seq: 5, .. }), "{err}");
    // A gap is a stale writer's.
    let err = j.append(&ev("r", 22, "gap")).unwrap_err();
    assert!(matches!(err, JournalError::Stale { expected: 21, got: 22, .. }), "{err}");
    // A batch is all or nothing.
    let err = j.append_batch(&[ev("r", 21, "ok"), ev("r", 23, "gap")]).unwrap_err();
    assert!(matches!(err, JournalError::Stale { expected: 22, got: 23, .. }), "{err}");
    assert_eq!(j.last_seq("r").unwrap(), 20);
    // Metadata and proposals.
    j.set_meta("r", "plan", "{\"p\":1}").unwrap();
    j.set_meta("r", "proposal/00000001", "{\"key\":\"k1\"}").unwrap();
    assert_eq!(j.meta("r", "plan").unwrap().as_deref(), Some("{\"p\":1}"));
    assert_eq!(j.meta("r", "proposal/00000001").unwrap().as_deref(), Some("{\"key\":\"k1\"}"));
    assert_eq!(j.meta("r", "proposal/00000002").unwrap(), None);
    // A group commit writes metadata and events together.
    let group = [ev("r", 21, "g1"), ev("r", 22, "g2")];
    let json: Vec<String> = group.iter().map(|e| serde_json::to_string(e).unwrap()).collect();
    j.commit_group("r", &[("proposal/00000002".into(), "{\"key\":\"k2\"}".into())], &group, &json).unwrap();
    assert_eq!(j.last_seq("r").unwrap(), 22);
    assert!(j.meta("r", "proposal/00000002").unwrap().is_some());
    // A proposal is recorded once: again the same is a no-op, other content is refused.
    j.set_meta("r", "proposal/00000001", "{\"key\":\"k1\"}").unwrap();
    let err = j.set_meta("r", "proposal/00000001", "{\"key\":\"forged\"}").unwrap_err();
    assert!(err.to_string().contains("already recorded with other content"), "{err}");
    assert_eq!(j.meta("r", "proposal/00000001").unwrap().as_deref(), Some("{\"key\":\"k1\"}"));
    // Inside one batch, the same event twice is a duplicate; another in its place a conflict.
    j.append_batch(&[ev("r", 23, "twice"), ev("r", 23, "twice")]).unwrap();
    assert_eq!(j.last_seq("r").unwrap(), 23);
    let err = j.append_batch(&[ev("r", 24, "one"), ev("r", 24, "other")]).unwrap_err();
    assert!(matches!(err, JournalError::Conflict { seq: 24, .. }), "{err}");
    assert_eq!(j.last_seq("r").unwrap(), 23);
    // A run the database does not hold cannot be written.
    let err = j.append(&ev("nobody", 1, "x")).unwrap_err();
    assert!(err.to_string().contains("no run `nobody`"), "{err}");
    assert_eq!(j.runs().unwrap(), vec!["r".to_string()]);
}

#[test]
fn artifacts_are_checked_against_their_digest() {
    let url = fresh_db("artifacts");
    let conn = PgConn::connect(&url).unwrap();
    let mut store = PgArtifacts::new(conn.clone());
    let value = json!({"title": "RAG", "sections": ["a", "b"]});
    let artifact = store.put(&value).unwrap();
    assert_eq!(store.put(&value).unwrap(), artifact, "storing again is a no-op");
    assert_eq!(store.get(&artifact).unwrap(), value);
    sql(
        &conn,
        &format!("UPDATE flow_artifacts SET bytes = convert_to('{{\"title\":\"forged\"}}', 'UTF8') WHERE digest = '{}'", artifact.digest),
    );
    assert!(matches!(store.get(&artifact).unwrap_err(), JournalError::Corrupt(_)));
    let absent = flow_trace::ArtifactRef { digest: format!("sha256:{}", "0".repeat(64)), size: 2 };
    assert!(matches!(store.get(&absent).unwrap_err(), JournalError::Corrupt(_)));
}

fn stored_artifacts(conn: &PgConn) -> i64 {
    conn.call(|c| Ok(c.query_one("SELECT count(*) FROM flow_artifacts", &[]).map_err(|e| JournalError::Storage(format!("{e:?}")))?.get(0)))
        .unwrap()
}

#[test]
fn a_run_s_artifacts_are_written_with_the_events_that_name_them() {
    let url = fresh_db("pending");
    let conn = PgConn::connect(&url).unwrap();
    queue::submit(&conn, "r", Some("w"), "{}", "{}").unwrap();
    let claim = queue::claim(&conn, "w", Duration::from_secs(30)).unwrap().unwrap();
    let (mut journal, mut store) = db::fenced_storage(PgConn::connect(&url).unwrap(), "r", claim.epoch);
    let value = json!({"draft": "text"});
    let artifact = store.put(&value).unwrap();
    assert_eq!(store.get(&artifact).unwrap(), value, "read back before it is committed");
    assert_eq!(stored_artifacts(&conn), 0, "nothing is written before the commit");
    // A commit refused (a stale seq) keeps the artifact for the next one.
    assert!(journal.append(&ev("r", 2, "gap")).is_err());
    assert_eq!(stored_artifacts(&conn), 0);
    journal.append(&ev("r", 1, "names it")).unwrap();
    assert_eq!(stored_artifacts(&conn), 1, "written in the commit");
    assert_eq!(PgArtifacts::new(conn.clone()).get(&artifact).unwrap(), value);
}

#[test]
fn a_writer_whose_claim_was_taken_over_is_fenced_off() {
    let url = fresh_db("fencing");
    let conn = PgConn::connect(&url).unwrap();
    queue::submit(&conn, "r", Some("w"), "{}", "{}").unwrap();
    let a = queue::claim(&conn, "worker-a", Duration::from_secs(30)).unwrap().expect("a claims");
    assert_eq!((a.run_id.as_str(), a.epoch, a.takeover), ("r", 1, false));
    assert_eq!(queue::claim(&conn, "worker-b", Duration::from_secs(30)).unwrap(), None, "a live lease is not claimable");
    let mut ja = PgJournal::fenced(conn.clone(), "r", a.epoch);
    ja.append(&ev("r", 1, "by a")).unwrap();
    ja.check_fence().unwrap();
    // A's lease runs out (it stopped heartbeating); B takes the run over.
    sql(&conn, "UPDATE flow_runs SET lease_expires_at = now() - interval '1 second'");
    let b = queue::claim(&conn, "worker-b", Duration::from_secs(30)).unwrap().expect("b takes over");
    assert_eq!((b.epoch, b.takeover), (2, true));
    // Whatever A still tries is refused, and leaves nothing behind.
    let err = ja.append(&ev("r", 2, "late, by a")).unwrap_err();
    assert!(matches!(err, JournalError::Fenced { claimed: 1, current: 2, .. }), "{err}");
    let group = [ev("r", 2, "late group, by a")];
    let json = vec![serde_json::to_string(&group[0]).unwrap()];
    let err = ja.commit_group("r", &[("proposal/00000001".into(), "{}".into())], &group, &json).unwrap_err();
    assert!(matches!(err, JournalError::Fenced { .. }), "{err}");
    assert!(matches!(ja.check_fence().unwrap_err(), JournalError::Fenced { .. }));
    assert!(!queue::release(&conn, "r", a.epoch, queue::Release::Queued).unwrap(), "a stale release is refused");
    let mut jb = PgJournal::fenced(conn.clone(), "r", b.epoch);
    jb.append(&ev("r", 2, "by b")).unwrap();
    assert_eq!(jb.events("r").unwrap().iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(jb.meta("r", "proposal/00000001").unwrap(), None, "the fenced group left no proposal");
    // B's heartbeat keeps its lease; A's extends nothing.
    assert_eq!(queue::heartbeat(&conn, "worker-a", Duration::from_secs(30)).unwrap(), vec![]);
    assert_eq!(queue::heartbeat(&conn, "worker-b", Duration::from_secs(30)).unwrap(), vec![("r".to_string(), 2)]);
    // A journal claimed for one run writes no other.
    queue::submit(&conn, "other", Some("w"), "{}", "{}").unwrap();
    let err = jb.append(&ev("other", 1, "not mine")).unwrap_err();
    assert!(err.to_string().contains("cannot write run `other`"), "{err}");
    assert!(queue::release(&conn, "r", b.epoch, queue::Release::Finished { outcome: "success".into(), exit_code: 0 }).unwrap());
    let row = queue::get(&conn, "r").unwrap().unwrap();
    assert_eq!((row.status.as_str(), row.outcome.as_deref(), row.lease_owner), ("finished", Some("success"), None));
}

#[test]
fn a_decision_fences_off_a_worker_whose_lease_ran_out() {
    let url = fresh_db("decision_fence");
    let conn = PgConn::connect(&url).unwrap();
    queue::submit(&conn, "r", Some("w"), "{}", "{}").unwrap();
    let a = queue::claim(&conn, "worker-a", Duration::from_secs(30)).unwrap().unwrap();
    let mut ja = PgJournal::fenced(conn.clone(), "r", a.epoch);
    ja.append(&ev("r", 1, "by a")).unwrap();
    // A's lease runs out (it stopped heartbeating) but nobody claimed the run.
    sql(&conn, "UPDATE flow_runs SET lease_expires_at = now() - interval '1 second'");
    queue::record_decision(&conn, "r", "decision:review#1", "{\"key\":\"decision:review#1\"}").unwrap();
    // A wakes: it can neither overwrite the decision nor release over it.
    let group = [ev("r", 2, "late, by a")];
    let json = vec![serde_json::to_string(&group[0]).unwrap()];
    let err = ja.commit_group("r", &[("proposal/00000001".into(), "{\"key\":\"mine\"}".into())], &group, &json).unwrap_err();
    assert!(matches!(err, JournalError::Fenced { .. }), "{err}");
    assert!(!queue::release(&conn, "r", a.epoch, queue::Release::Paused).unwrap());
    let row = queue::get(&conn, "r").unwrap().unwrap();
    assert_eq!((row.status.as_str(), row.lease_owner), ("queued", None));
    assert_eq!(PgJournal::new(conn.clone()).meta("r", "proposal/00000001").unwrap().as_deref(), Some("{\"key\":\"decision:review#1\"}"));
}

#[test]
fn a_run_starts_when_it_is_claimed_not_when_it_was_queued() {
    let url = fresh_db("start_time");
    let fx = fixtures();
    let d = fx.path();
    let run = submit(&url, d, &["decide.flow"]);
    std::thread::sleep(Duration::from_millis(1500));
    // A real clock, this time.
    finish(spawn_flow(&["worker", "--db", &url, "--exit-when-idle", "--poll-ms", "100"], d));
    let submitted = flow_trace::time::millis(row(&url, &run)["submitted_at"].as_str().unwrap()).unwrap();
    let events = exported_events(&url, &run, d);
    let started = flow_trace::time::millis(events[0]["time"].as_str().unwrap()).unwrap();
    assert!(started >= submitted + 1400, "the run started at {started}, {} ms after it was queued", started - submitted);
    // Nothing of the wait counts against the run's time.
    let paused = events.iter().find(|e| e["kind"] == "run_paused").expect("the run pauses for its decision");
    let at = flow_trace::time::millis(paused["time"].as_str().unwrap()).unwrap();
    assert!(at - started < 1400, "{at} - {started}");
}

#[test]
fn an_empty_flow_db_names_no_database() {
    let fx = fixtures();
    let d = fx.path();
    let rd = d.join("run");
    let out = flow(&["run", "decide.flow", "--run-dir", rd.to_str().unwrap(), "--fake-clock", "-q", "--no-prompt"], d);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    // A run directory is read as one, not taken for a run in a database.
    let status = flow_env(&["status", rd.to_str().unwrap()], d, &[("FLOW_DB", "")]);
    assert!(text(&status).contains("state: paused"), "{}", text(&status));
    let runs = flow_env(&["runs"], d, &[("FLOW_DB", "")]);
    assert_eq!(runs.status.code(), Some(2));
    assert!(text(&runs).contains("no database: pass --db URL"), "{}", text(&runs));
}

#[test]
fn a_claim_skips_a_locked_run_instead_of_waiting() {
    let url = fresh_db("skip_locked");
    let conn = PgConn::connect(&url).unwrap();
    queue::submit(&conn, "first", Some("w"), "{}", "{}").unwrap();
    queue::submit(&conn, "second", Some("w"), "{}", "{}").unwrap();
    // Another session holds the oldest run's row.
    let holder = PgConn::connect(&url).unwrap();
    sql(&holder, "BEGIN; SELECT 1 FROM flow_runs WHERE run_id = 'first' FOR UPDATE");
    let claim = queue::claim(&conn, "w1", Duration::from_secs(30)).unwrap().expect("a claim");
    assert_eq!(claim.run_id, "second");
    sql(&holder, "ROLLBACK");
    assert_eq!(queue::claim(&conn, "w1", Duration::from_secs(30)).unwrap().map(|c| c.run_id).as_deref(), Some("first"));
}

/// A worker process.
fn worker(url: &str, cwd: &Path, extra: &[&str]) -> Child {
    let mut args = vec!["worker", "--db", url, "--fake-clock", "--poll-ms", "100"];
    args.extend_from_slice(extra);
    spawn_flow(&args, cwd)
}

fn finish(child: Child) -> Output {
    let out = child.wait_with_output().expect("the worker ends");
    assert!(out.status.success(), "worker: {}", text(&out));
    out
}

/// `flow submit` → the run id (its last line).
fn submit(url: &str, cwd: &Path, args: &[&str]) -> String {
    let mut all = vec!["submit", "--db", url, "-q"];
    all.extend_from_slice(args);
    let out = flow(&all, cwd);
    assert!(out.status.success(), "submit: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).lines().last().expect("a run id").trim().to_string()
}

fn runs_json(url: &str) -> Vec<Value> {
    let out = flow(&["runs", "--db", url, "--format", "json", "--limit", "10000"], &repo());
    assert!(out.status.success(), "{}", text(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["runs"].as_array().unwrap().clone()
}

/// The run's events from the database (`flow export --out`).
fn exported_events(url: &str, run: &str, scratch: &Path) -> Vec<Value> {
    static EXPORTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = EXPORTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = scratch.join(format!("export-{run}-{n}"));
    let out = flow(&["export", run, "--db", url, "--out", dir.to_str().unwrap()], &repo());
    assert!(out.status.success(), "{}", text(&out));
    events(&dir)
}

/// An event as it compares across runs: ids, times, executions, leases
/// and the hash chain aside.
fn comparable(event: &Value, run_id: &str) -> Value {
    let text = serde_json::to_string(event).unwrap().replace(run_id, "RUN");
    let mut v: Value = serde_json::from_str(&text).unwrap();
    let o = v.as_object_mut().unwrap();
    for key in ["time", "execution_id", "prev"] {
        o.remove(key);
    }
    if let Some(p) = o.get_mut("payload").and_then(Value::as_object_mut) {
        for key in ["owner", "expires_at", "duration_ms", "started_at"] {
            p.remove(key);
        }
    }
    v
}

fn comparable_run(events: &[Value]) -> Vec<Value> {
    let run_id = events[0]["run_id"].as_str().unwrap().to_string();
    events.iter().map(|e| comparable(e, &run_id)).collect()
}

#[test]
fn many_runs_over_four_workers_match_single_process_runs() {
    let url = fresh_db("many");
    let scratch = tempfile::tempdir().unwrap();
    let examples = ["research_writer", "decision_meeting", "agent_proxy", "delegation"];
    // Each example twice in a single process: the reference. Delegation's
    // parallel branches answer in the order they finish (the engine feeds
    // answers as they arrive), which differs under load, and with it the
    // shared budget's `remaining` after each settlement: for it the
    // outcomes (nodes, turns, tool results, artifacts, gates, the ending)
    // are held equal, not their order.
    let parallel = ["delegation"];
    let mut reference: BTreeMap<&str, (Vec<Value>, bool)> = BTreeMap::new();
    for name in examples {
        let dir = scratch.path().join(name);
        copy_tree(&repo().join("examples").join(name), &dir);
        let mut single = Vec::new();
        for n in 0..2 {
            let run = dir.join(format!("single-{n}"));
            let out =
                flow(&["run", &format!("{name}.flow"), "--run-dir", run.to_str().unwrap(), "--fake-clock", "-q", "--no-prompt"], &dir);
            assert!(matches!(out.status.code(), Some(0 | 1 | 4 | 5)), "{name}: {}", text(&out));
            single.push(comparable_run(&events(&run)));
        }
        let ordered = !parallel.contains(&name);
        assert!(!ordered || single[0] == single[1], "{name}: two single-process runs differ");
        same(&unordered(&single[0]), &unordered(&single[1]), &format!("{name}: two single-process runs"));
        reference.insert(name, (single.swap_remove(0), ordered));
    }
    // 200 runs, submitted round robin, driven by four workers at once.
    let mut submitted: Vec<(String, &str)> = Vec::new();
    for i in 0..200 {
        let name = examples[i % examples.len()];
        let dir = scratch.path().join(name);
        submitted.push((submit(&url, &dir, &[&format!("{name}.flow")]), name));
    }
    let workers: Vec<Child> =
        (0..4).map(|i| worker(&url, &repo(), &["--concurrency", "4", "--exit-when-idle", "--name", &format!("w{i}")])).collect();
    let outputs: Vec<Output> = workers.into_iter().map(finish).collect();
    let claimed: Vec<String> =
        outputs.iter().map(|o| text(o).lines().filter(|l| l.contains(": claimed run-")).count().to_string()).collect();
    eprintln!("claims per worker: {}", claimed.join(", "));
    assert!(claimed.iter().filter(|c| *c != "0").count() >= 2, "the work was not shared: {claimed:?}");
    let rows = runs_json(&url);
    assert_eq!(rows.len(), 200);
    for row in &rows {
        assert!(matches!(row["status"].as_str(), Some("finished" | "paused")), "{row}");
    }
    let mut exact = 0;
    for (run, name) in &submitted {
        let got = comparable_run(&exported_events(&url, run, scratch.path()));
        let (want, ordered) = &reference[name];
        assert_eq!(got.len(), want.len(), "{name} ({run}): event count");
        if *ordered {
            exact += 1;
            same(&got, want, &format!("{name} ({run}) against the single-process run"));
        } else {
            same(&unordered(&got), &unordered(want), &format!("{name} ({run}) against the single-process run, in any order"));
        }
    }
    assert!(exact >= 100, "too few runs compared event by event: {exact}");
}

/// What a run produced, sorted: its nodes' endings, turns, tool results,
/// artifacts, gates and its own ending — their place in the run aside.
fn unordered(events: &[Value]) -> Vec<Value> {
    let kinds =
        ["node_completed", "node_failed", "agent_turn", "tool_call_completed", "artifact_recorded", "gate_recorded", "run_terminated"];
    let mut out: Vec<Value> = events
        .iter()
        .filter(|e| kinds.contains(&e["kind"].as_str().unwrap_or_default()))
        .map(|e| json!({ "kind": e["kind"], "payload": e["payload"] }))
        .collect();
    out.sort_by_key(|e| e.to_string());
    out
}

/// `got` and `want` are equal; else the first difference is shown.
fn same(got: &[Value], want: &[Value], what: &str) {
    if let Some(i) = (0..got.len().min(want.len())).find(|&i| got[i] != want[i]) {
        panic!("{what}: item {} differs:\n  got:  {}\n  want: {}", i + 1, got[i], want[i]);
    }
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
}

fn row(url: &str, run: &str) -> Value {
    runs_json(url).into_iter().find(|r| r["run_id"] == run).unwrap_or_else(|| panic!("no run {run}"))
}

fn pending(url: &str, run: &str) -> Vec<String> {
    let out = flow(&["status", run, "--db", url, "--format", "json"], &repo());
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    doc["pending_decisions"].as_array().unwrap().iter().map(|p| p["subject"].as_str().unwrap().to_string()).collect()
}

fn conformant(url: &str, run: &str, plan: &Path) {
    let out = flow(&["trace", "check", run, "--db", url, "--plan", plan.to_str().unwrap()], &repo());
    assert!(out.status.success(), "{run}: {}", text(&out));
}

fn ledger(dir: &Path) -> Vec<String> {
    let mut lines: Vec<String> =
        std::fs::read_to_string(dir.join("pg_ledger.txt")).unwrap_or_default().lines().map(str::to_string).collect();
    lines.sort();
    lines
}

/// Submits pg_chain runs tagged t0… with these step lengths.
fn submit_chains(url: &str, dir: &Path, seconds: &[f64]) -> Vec<String> {
    seconds
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let input = dir.join(format!("input-{i}.json"));
            std::fs::write(&input, json!({ "tag": format!("t{i}"), "seconds": s }).to_string()).unwrap();
            submit(url, dir, &["pg_chain.flow", "--input", input.to_str().unwrap()])
        })
        .collect()
}

fn under_way(url: &str, runs: &[String], events: i64) -> bool {
    let rows = runs_json(url);
    runs.iter().all(|run| rows.iter().any(|r| r["run_id"] == *run && r["status"] == "running" && r["events"].as_i64() > Some(events)))
}

#[test]
fn a_killed_worker_s_runs_are_taken_over_and_no_call_is_made_twice() {
    let url = fresh_db("kill");
    let fx = fixtures();
    let d = fx.path();
    // Killed at about 0.9 s, each run is in a different step: in `first`,
    // in `post` or just past it, or in `second` (each run lasts at least
    // 1.4 s); a slow machine only moves them earlier.
    let runs = submit_chains(&url, d, &[0.6, 1.0, 1.4, 1.8]);
    let mut a = worker(&url, d, &["--concurrency", "4", "--lease-ms", "1500", "--name", "a"]);
    wait_until("every run under way", || under_way(&url, &runs, 5));
    std::thread::sleep(Duration::from_millis(900));
    signal(&a, "KILL");
    let _ = a.wait();
    let unfinished = runs.iter().filter(|run| row(&url, run)["status"] == "running").count();
    assert!(unfinished >= 1, "every run finished before the kill: nothing to take over");
    // Another worker takes the runs over once their leases run out.
    let b = finish(worker(&url, d, &["--concurrency", "4", "--lease-ms", "1500", "--exit-when-idle", "--name", "b"]));
    let took_over = text(&b).lines().filter(|l| l.contains("took over")).count();
    assert_eq!(took_over, unfinished, "{}", text(&b));
    // A `post` in flight when the worker died has an unknown outcome: it
    // is reconciled by a human, never blindly made again.
    let mut reconciled = 0;
    for (i, run) in runs.iter().enumerate() {
        if row(&url, run)["status"] == "paused" {
            let subjects = pending(&url, run);
            assert!(subjects.len() == 1 && subjects[0].starts_with("reconcile.post#"), "{run}: {subjects:?}");
            let happened = ledger(d).contains(&format!("t{i}"));
            let mut args = vec!["approve", run, &subjects[0], "--decision", "approve", "--db", &url];
            if happened {
                args.extend(["--output", "{\"posted\": true}"]);
            }
            let out = flow(&args, d);
            assert!(out.status.success(), "{}", text(&out));
            reconciled += 1;
        }
    }
    if reconciled > 0 {
        finish(worker(&url, d, &["--exit-when-idle", "--name", "c"]));
    }
    for run in &runs {
        let r = row(&url, run);
        assert_eq!((r["status"].as_str(), r["outcome"].as_str()), (Some("finished"), Some("success")), "{r}");
        conformant(&url, run, &d.join("pg_chain.flow"));
    }
    assert_eq!(ledger(d), vec!["t0", "t1", "t2", "t3"], "a non-idempotent call was made twice (or lost)");
}

#[test]
fn a_stopped_worker_past_its_lease_is_fenced_off_and_nothing_is_lost() {
    let url = fresh_db("stop");
    let fx = fixtures();
    let d = fx.path();
    let runs = submit_chains(&url, d, &[2.0]);
    let run = &runs[0];
    let a = worker(&url, d, &["--concurrency", "1", "--lease-ms", "1000", "--exit-when-idle", "--name", "a"]);
    wait_until("the run under way", || under_way(&url, &runs, 5));
    signal(&a, "STOP");
    // B takes the run over after A's lease runs out, and finishes it.
    let b = finish(worker(&url, d, &["--lease-ms", "1000", "--exit-when-idle", "--name", "b"]));
    assert!(text(&b).contains(&format!("took over {run}")), "{}", text(&b));
    let before = exported_events(&url, run, d);
    // A wakes: what it computed meanwhile is refused (fenced), and it goes.
    signal(&a, "CONT");
    let a = finish(a);
    assert!(text(&a).contains(&format!("lost {run}")) && text(&a).contains("fenced"), "{}", text(&a));
    assert!(text(&a).contains("lost 1"), "{}", text(&a));
    let after = exported_events(&url, run, d);
    assert_eq!(after, before, "the fenced worker changed the journal");
    // A's events all come before B's: nothing of A's after the takeover.
    let executions: Vec<&str> = after.iter().map(|e| e["execution_id"].as_str().unwrap()).collect();
    let first_b = executions.iter().position(|x| *x != "exec-1").expect("B's events");
    assert!(executions[first_b..].iter().all(|x| *x != "exec-1"), "{executions:?}");
    assert!(after.iter().any(|e| e["kind"] == "run_resumed"), "B resumed the run");
    let r = row(&url, run);
    assert_eq!((r["status"].as_str(), r["outcome"].as_str()), (Some("finished"), Some("success")), "{r}");
    conformant(&url, run, &d.join("pg_chain.flow"));
    assert_eq!(ledger(d), vec!["t0"]);
}

#[test]
fn a_decision_from_another_process_lets_any_worker_resume_the_run() {
    let url = fresh_db("approve");
    let fx = fixtures();
    let d = fx.path();
    let run = submit(&url, d, &["decide.flow"]);
    let a = finish(worker(&url, d, &["--exit-when-idle", "--name", "a"]));
    assert!(text(&a).contains("paused"), "{}", text(&a));
    assert_eq!(row(&url, &run)["status"], "paused");
    assert_eq!(pending(&url, &run), vec!["review"]);
    // Not a decision the gate allows, or not a decider: refused, nothing recorded.
    let out = flow(&["approve", &run, "review", "--decision", "maybe", "--db", &url], d);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let out = flow(&["approve", &run, "review", "--decision", "approve", "--by", "intruder", "--db", &url], d);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(row(&url, &run)["status"], "paused");
    let out = flow(&["approve", &run, "review", "--decision", "approve", "--by", "editor", "--db", &url], d);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(row(&url, &run)["status"], "queued", "a decision queues the run");
    let again = flow(&["approve", &run, "review", "--decision", "reject", "--db", &url], d);
    assert_eq!(again.status.code(), Some(2), "a second decision: {}", text(&again));
    let b = finish(worker(&url, d, &["--exit-when-idle", "--name", "b"]));
    assert!(text(&b).contains(&format!("claimed {run}")), "{}", text(&b));
    let r = row(&url, &run);
    assert_eq!((r["status"].as_str(), r["outcome"].as_str()), (Some("finished"), Some("success")), "{r}");
    let shown = flow(&["show", &run, "--db", &url], d);
    assert!(text(&shown).contains("editor decided approve on review"), "{}", text(&shown));
    conformant(&url, &run, &d.join("decide.flow"));
}
