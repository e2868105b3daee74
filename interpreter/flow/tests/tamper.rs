//! The tamper campaign: every example runs signed (`flow run --sign`), and
//! ten kinds of edit are applied to its trace at random places. Trace
//! check with the public key (`--verify-key`) must detect every one; the
//! hash chain alone must detect every edit that leaves the end in place.
//!
//! The places are drawn from a seed printed at the start (set
//! `FLOW_TAMPER_SEED` to replay one); a miss names the seed, the example,
//! the kind and the place.
#![allow(clippy::disallowed_methods)]

mod common;
use common::*;

use flow_runtime::signing;
use flow_runtime::tracecheck::{self, Options, SignatureCheck};
use flow_tests::generate::Rng;
use flow_trace::chain;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Places per kind of edit and example.
const PLACES: usize = 20;

fn example(name: &str) -> PathBuf {
    repo().join(format!("examples/{name}/{name}.flow"))
}

/// The ten kinds of edit (the issue's classes).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    /// A value inside one event's payload changed.
    EditPayload,
    /// A gate's outcome changed (PASS to BLOCK, anything else to PASS).
    GateOutcome,
    /// An event's envelope changed (its time or producer).
    EditEnvelope,
    /// One event removed.
    Delete,
    /// One event removed and the rest renumbered to hide the gap.
    DeleteRenumbered,
    /// A copy of an event inserted elsewhere.
    Insert,
    /// A forged event inserted and the rest renumbered.
    InsertRenumbered,
    /// Two adjacent events swapped.
    Reorder,
    /// The last events cut off.
    Truncate,
    /// An edit, then every digest after it recomputed: a forger who
    /// knows the chain's rule but not the key.
    Rechain,
}

const KINDS: [Kind; 10] = [
    Kind::EditPayload,
    Kind::GateOutcome,
    Kind::EditEnvelope,
    Kind::Delete,
    Kind::DeleteRenumbered,
    Kind::Insert,
    Kind::InsertRenumbered,
    Kind::Reorder,
    Kind::Truncate,
    Kind::Rechain,
];

impl Kind {
    /// Whether the chain alone (no key) must see it: everything but an
    /// end cut off, a recomputed chain, or an edit of the last line (no
    /// line after it holds its digest).
    fn chain_sees(self, place: &Place) -> bool {
        !matches!(self, Kind::Truncate | Kind::Rechain) && !place.last_line
    }
}

/// Where an edit was made.
struct Place {
    what: String,
    /// Only the last line was changed.
    last_line: bool,
}

/// Applies `kind` at a random place of `lines`; `None` when the trace has
/// no place for it (no gate).
fn tamper(kind: Kind, lines: &[String], rng: &mut Rng) -> Option<(Place, Vec<String>)> {
    let n = lines.len();
    let values = || lines.iter().map(|l| serde_json::from_str::<Value>(l).unwrap()).collect::<Vec<_>>();
    let encode = |values: &[Value]| values.iter().map(|v| v.to_string()).collect::<Vec<_>>();
    let mut out = lines.to_vec();
    let place = match kind {
        Kind::EditPayload => {
            let i = rng.below(n);
            let mut v: Value = serde_json::from_str(&lines[i]).unwrap();
            let path = edit_leaf(&mut v["payload"], rng);
            out[i] = v.to_string();
            format!("seq {} payload{path}", i + 1)
        }
        Kind::GateOutcome => {
            let gates: Vec<usize> = (0..n).filter(|&i| lines[i].contains(r#""kind":"gate_recorded""#)).collect();
            let i = *gates.get(rng.below(gates.len().max(1)))?;
            let mut v: Value = serde_json::from_str(&lines[i]).unwrap();
            let to = if v["payload"]["outcome"] == "PASS" { "BLOCK" } else { "PASS" };
            v["payload"]["outcome"] = json!(to);
            out[i] = v.to_string();
            format!("seq {} outcome to {to}", i + 1)
        }
        Kind::EditEnvelope => {
            let i = rng.below(n);
            let mut v: Value = serde_json::from_str(&lines[i]).unwrap();
            if rng.below(2) == 0 {
                v["time"] = json!("2030-01-01T00:00:00.000Z");
            } else {
                v["producer"] = json!("human.mallory");
            }
            out[i] = v.to_string();
            format!("seq {} envelope", i + 1)
        }
        // The last event is not deleted here: that is a cut end (Truncate).
        Kind::Delete => {
            let i = rng.below(n - 1);
            out.remove(i);
            format!("seq {} deleted", i + 1)
        }
        Kind::DeleteRenumbered => {
            let i = rng.below(n - 1);
            let mut v = values();
            v.remove(i);
            out = encode(&renumber(v));
            format!("seq {} deleted, renumbered", i + 1)
        }
        Kind::Insert => {
            let (from, to) = (rng.below(n), rng.below(n + 1));
            out.insert(to, lines[from].clone());
            format!("seq {} copied before line {}", from + 1, to + 1)
        }
        Kind::InsertRenumbered => {
            let (from, to) = (rng.below(n), rng.below(n + 1));
            let mut v = values();
            let mut forged = v[from].clone();
            forged["producer"] = json!("control");
            v.insert(to, forged);
            out = encode(&renumber(v));
            format!("seq {} forged before line {}, renumbered", from + 1, to + 1)
        }
        Kind::Reorder => {
            let i = rng.below(n - 1);
            out.swap(i, i + 1);
            format!("seq {} and {} swapped", i + 1, i + 2)
        }
        Kind::Truncate => {
            let k = 1 + rng.below(n.min(5));
            out.truncate(n - k);
            format!("last {k} cut")
        }
        Kind::Rechain => {
            let i = rng.below(n);
            let mut v = values();
            let path = edit_leaf(&mut v[i]["payload"], rng);
            out = rechain(v);
            format!("seq {} payload{path}, chain recomputed", i + 1)
        }
    };
    assert_ne!(out, lines, "{kind:?} at {place} changed nothing");
    let last_line = out.len() == n && out[..n - 1] == lines[..n - 1];
    Some((Place { what: place, last_line }, out))
}

/// Changes one leaf of `value` (a string, number or boolean; an empty
/// container gets one); returns its path.
fn edit_leaf(value: &mut Value, rng: &mut Rng) -> String {
    match value {
        Value::Object(map) if !map.is_empty() => {
            let keys: Vec<String> = map.keys().cloned().collect();
            let key = keys[rng.below(keys.len())].clone();
            format!(".{key}{}", edit_leaf(map.get_mut(&key).unwrap(), rng))
        }
        Value::Array(items) if !items.is_empty() => {
            let i = rng.below(items.len());
            format!("[{i}]{}", edit_leaf(&mut items[i], rng))
        }
        Value::Object(map) => {
            map.insert("x".into(), json!(1));
            ".x".into()
        }
        Value::Array(items) => {
            items.push(json!(1));
            "[0]".into()
        }
        Value::String(s) => {
            s.push('x');
            String::new()
        }
        Value::Number(n) => {
            *value = json!(n.as_f64().unwrap_or(0.0) + 1.0);
            String::new()
        }
        Value::Bool(b) => {
            *b = !*b;
            String::new()
        }
        Value::Null => {
            *value = json!(0);
            String::new()
        }
    }
}

/// Recomputes every `prev` from the run's genesis, as Flow would have.
fn rechain(events: Vec<Value>) -> Vec<String> {
    let mut prev = chain::genesis(events[0]["run_id"].as_str().unwrap());
    events
        .into_iter()
        .map(|mut e| {
            e["prev"] = json!(prev);
            let line = e.to_string();
            prev = chain::link(&line);
            line
        })
        .collect()
}

/// One signed offline run of every example: (name, run directory).
fn signed_runs(root: &Path, key: &Path) -> Vec<(String, PathBuf)> {
    example_names()
        .into_iter()
        .map(|name| {
            let dir = root.join(&name);
            let out = flow(
                &[
                    "run",
                    example(&name).to_str().unwrap(),
                    "--run-dir",
                    dir.to_str().unwrap(),
                    "-q",
                    "--no-prompt",
                    "--sign",
                    key.to_str().unwrap(),
                ],
                root,
            );
            assert!(out.status.success(), "{name} did not run: {}", text(&out));
            assert!(dir.join(signing::SIGNATURE_FILE).exists(), "{name}: no trace.sig");
            (name, dir)
        })
        .collect()
}

fn program_of(file: &Path) -> flow_check::ir::Program {
    let mut db = flow_diagnostics::SourceDb::new();
    let root = db.add(flow_pipeline::normalize(file), std::fs::read_to_string(file).unwrap());
    flow_check::check_program(&mut db, root, &flow_pipeline::FsLoader).program
}

#[test]
fn every_kind_of_tampering_is_detected_at_every_place_tried() {
    let seed: u64 = std::env::var("FLOW_TAMPER_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1);
    eprintln!("tamper campaign: FLOW_TAMPER_SEED={seed}");
    let mut rng = Rng::new(seed);
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tamper");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let key = generated_key(&root, "key.pem");
    let public = signing::load_verifying_key(&root.join("key.pem.pub")).unwrap();
    let mut tried = [0usize; KINDS.len()];
    let mut misses = Vec::new();
    for (name, dir) in signed_runs(&root, &key) {
        let program = program_of(&example(&name));
        let text = std::fs::read_to_string(dir.join("trace.jsonl")).unwrap();
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        let record = signing::read(&dir.join(signing::SIGNATURE_FILE)).unwrap();
        let keyed =
            Options { require_chain: true, signature: Some(SignatureCheck { key: &public, record: Ok(&record) }), ..Default::default() };
        let unkeyed = Options { require_chain: true, ..Default::default() };
        let check = |lines: &[String], options: &Options| tracecheck::check_text(&program, &(lines.join("\n") + "\n"), options);
        // The untouched trace passes both: a detection below is the edit's.
        for options in [&keyed, &unkeyed] {
            let report = check(&lines, options);
            assert!(report.conformant, "{name}: the signed trace is not conformant: {:#?}", report.deviations);
        }
        assert_eq!(check(&lines, &keyed).trace.integrity.signature, "verified");
        for (k, kind) in KINDS.iter().enumerate() {
            for _ in 0..PLACES {
                let Some((place, edited)) = tamper(*kind, &lines, &mut rng) else { break };
                tried[k] += 1;
                if check(&edited, &keyed).conformant {
                    misses.push(format!("{name}: {kind:?} at {} passed the keyed check", place.what));
                }
                if kind.chain_sees(&place) && check(&edited, &unkeyed).conformant {
                    misses.push(format!("{name}: {kind:?} at {} passed the chain check", place.what));
                }
            }
        }
    }
    for (k, kind) in KINDS.iter().enumerate() {
        eprintln!("{kind:?}: {} edits", tried[k]);
        assert!(tried[k] >= PLACES, "{kind:?} was tried only {} times", tried[k]);
    }
    assert!(misses.is_empty(), "FLOW_TAMPER_SEED={seed}: {} edits not detected:\n{}", misses.len(), misses.join("\n"));
}

#[test]
fn trace_check_verifies_a_signature_from_the_command_line() {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tamper-cli");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let key = generated_key(&root, "k.pem");
    // A key is never overwritten by accident.
    let again = flow(&["key", "generate", "--out", key.to_str().unwrap()], &root);
    assert_eq!(again.status.code(), Some(2), "{}", text(&again));
    let plan = example("research_writer");
    let run = root.join("run");
    let out = flow(
        &["run", plan.to_str().unwrap(), "--run-dir", run.to_str().unwrap(), "-q", "--no-prompt", "--sign", key.to_str().unwrap()],
        &root,
    );
    assert!(out.status.success(), "{}", text(&out));
    let check = |extra: &[&str]| {
        let mut args = vec!["trace", "check", run.to_str().unwrap(), "--plan", plan.to_str().unwrap()];
        args.extend(extra);
        flow(&args, &root)
    };
    let public = root.join("k.pem.pub");
    let ok = check(&["--verify-key", public.to_str().unwrap()]);
    assert!(ok.status.success(), "{}", text(&ok));
    assert!(text(&ok).contains("integrity: chain intact, signature verified"), "{}", text(&ok));
    // Another key: the signature fails.
    generated_key(&root, "other.pem");
    let wrong = check(&["--verify-key", root.join("other.pem.pub").to_str().unwrap(), "--format", "json"]);
    assert_eq!(wrong.status.code(), Some(1), "{}", text(&wrong));
    let doc: Value = serde_json::from_slice(&wrong.stdout).unwrap();
    assert_eq!(doc["deviations"][0]["code"], "T081", "{doc:#}");
    assert!(doc["deviations"][0]["message"].as_str().unwrap().contains("another key"), "{doc:#}");
    assert_eq!(doc["trace"]["integrity"]["signature"], "failed");
    // The last event cut off: only the signature sees it.
    let trace = std::fs::read_to_string(run.join("trace.jsonl")).unwrap();
    let mut lines: Vec<&str> = trace.lines().collect();
    lines.pop();
    std::fs::write(run.join("trace.jsonl"), lines.join("\n") + "\n").unwrap();
    assert!(check(&[]).status.success(), "a cut end is invisible to the chain alone");
    let cut = check(&["--verify-key", public.to_str().unwrap()]);
    assert_eq!(cut.status.code(), Some(1), "{}", text(&cut));
    assert!(text(&cut).contains("T081"), "{}", text(&cut));
    // A trace without a chain is not vouched for.
    let bare: Vec<String> = lines
        .iter()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            v.as_object_mut().unwrap().remove("prev");
            v.to_string()
        })
        .collect();
    std::fs::write(run.join("trace.jsonl"), bare.join("\n") + "\n").unwrap();
    let unchained = check(&[]);
    assert_eq!(unchained.status.code(), Some(1), "{}", text(&unchained));
    assert!(text(&unchained).contains("T080") && text(&unchained).contains("no hash chain"), "{}", text(&unchained));
    // A bad key file is a usage error.
    std::fs::write(root.join("junk.pub"), "junk").unwrap();
    assert_eq!(check(&["--verify-key", root.join("junk.pub").to_str().unwrap()]).status.code(), Some(2));
}

#[test]
fn a_signed_run_is_resumed_signed_and_the_signature_follows_it() {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tamper-resume");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let key = generated_key(&root, "k.pem");
    // A run that pauses for a human decision.
    std::fs::write(
        root.join("pause.flow"),
        r#"
principal editor: human
tool nothing: builtin { description: "Does nothing", input: any, output: any, function: "noop" }
workflow pause {
  start: first
  node first: tool nothing { args: {} }
  node approve: human editor { decisions: [approve, reject] }
  node done: end ok
  node stopped: end rejected { status: failure }
  first -> approve
  approve -> done when approve.decision == "approve"
  approve -> stopped else
}
"#,
    )
    .unwrap();
    let plan = root.join("pause.flow");
    let run = root.join("run");
    let out = flow(
        &["run", plan.to_str().unwrap(), "--run-dir", run.to_str().unwrap(), "-q", "--no-prompt", "--sign", key.to_str().unwrap()],
        &root,
    );
    assert_eq!(out.status.code(), Some(4), "the run pauses: {}", text(&out));
    let paused = signing::read(&run.join(signing::SIGNATURE_FILE)).unwrap();
    let public = root.join("k.pem.pub");
    let verify = || {
        flow(&["trace", "check", run.to_str().unwrap(), "--plan", plan.to_str().unwrap(), "--verify-key", public.to_str().unwrap()], &root)
    };
    assert!(verify().status.success(), "{}", text(&verify()));
    let decided = pending_subject(&run).expect("a pending decision");
    let approve = flow(&["approve", run.to_str().unwrap(), &decided, "--decision", "approve"], &root);
    assert!(approve.status.success(), "{}", text(&approve));
    // Without the key, resuming would add unsigned events: refused.
    let unsigned = flow(&["resume", run.to_str().unwrap(), "-q", "--no-prompt"], &root);
    assert_eq!(unsigned.status.code(), Some(2), "{}", text(&unsigned));
    assert!(text(&unsigned).contains("--sign"), "{}", text(&unsigned));
    let resumed = flow(&["resume", run.to_str().unwrap(), "-q", "--no-prompt", "--sign", key.to_str().unwrap()], &root);
    assert!(resumed.status.success(), "{}", text(&resumed));
    let after = signing::read(&run.join(signing::SIGNATURE_FILE)).unwrap();
    assert!(after.seq > paused.seq, "the signature moved with the run: {paused:?} → {after:?}");
    assert!(verify().status.success(), "{}", text(&verify()));
}

/// `flow key generate --out ROOT/NAME`: the private key's path (the
/// public key is `NAME.pub` beside it).
fn generated_key(root: &Path, name: &str) -> PathBuf {
    let key = root.join(name);
    let out = flow(&["key", "generate", "--out", key.to_str().unwrap()], root);
    assert!(out.status.success(), "{}", text(&out));
    key
}

/// The subject of the first pending decision of a paused run.
fn pending_subject(run: &Path) -> Option<String> {
    let journal = flow_runtime::driver::open_journal(run, false).ok()?;
    let run_id = flow_runtime::driver::run_id_of(&journal).ok()?;
    flow_runtime::driver::pending_decisions(&journal, &run_id).ok()?.into_iter().next().map(|p| p.subject)
}
