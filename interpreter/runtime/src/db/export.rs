//! A run kept in the database, written out as a run directory: the
//! journal (`journal.sqlite`: events, metadata, proposals), `trace.jsonl`
//! (the lines the database holds, hash chain included) and the artifacts
//! the events name. Every command that reads a run directory (`flow
//! status`, `show`, `report`, `replay`, `trace check`) reads this one.

use super::{pg, PgConn};
use crate::journal::{ArtifactStore, DirArtifacts, Journal, JournalError, SqliteJournal};
use flow_trace::{ArtifactRef, Event};
use std::io::Write;
use std::path::Path;

/// What an export wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    pub events: usize,
    pub proposals: usize,
    pub artifacts: usize,
}

/// Writes run `run_id` to `dir` (which must not exist, or be empty).
pub fn export(conn: &PgConn, run_id: &str, dir: &Path) -> Result<Exported, JournalError> {
    if dir.exists() && std::fs::read_dir(dir).map(|mut d| d.next().is_some()).unwrap_or(true) {
        return Err(JournalError::Storage(format!("{} exists and is not empty; export writes a new run directory", dir.display())));
    }
    let id = run_id.to_string();
    let (lines, meta, proposals) = conn.call(move |client| {
        // One snapshot: a worker committing meanwhile changes nothing read.
        let mut client =
            client.build_transaction().isolation_level(postgres::IsolationLevel::RepeatableRead).read_only(true).start().map_err(pg)?;
        if client.query_opt("SELECT 1 FROM flow_runs WHERE run_id = $1", &[&id]).map_err(pg)?.is_none() {
            return Err(JournalError::Storage(format!("no run `{id}` in the database")));
        }
        let lines: Vec<String> = client
            .query("SELECT json FROM flow_events WHERE run_id = $1 ORDER BY seq", &[&id])
            .map_err(pg)?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let meta: Vec<(String, String)> = client
            .query("SELECT key, value FROM flow_meta WHERE run_id = $1 ORDER BY key", &[&id])
            .map_err(pg)?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        let proposals: Vec<(i64, String)> = client
            .query("SELECT n, json FROM flow_proposals WHERE run_id = $1 ORDER BY n", &[&id])
            .map_err(pg)?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        client.commit().map_err(pg)?;
        Ok((lines, meta, proposals))
    })?;
    let io = |what: &str, e: std::io::Error| JournalError::Storage(format!("cannot write {what} in {}: {e}", dir.display()));
    std::fs::create_dir_all(dir).map_err(|e| io("the directory", e))?;
    let events = lines
        .iter()
        .map(|line| {
            serde_json::from_str::<Event>(line).map_err(|e| JournalError::Corrupt(format!("unreadable event of run `{run_id}`: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut journal = SqliteJournal::open(&dir.join("journal.sqlite"), false)?;
    let mut entries = meta;
    entries.extend(proposals.iter().map(|(n, json)| (format!("proposal/{n:08}"), json.clone())));
    journal.commit_group(run_id, &entries, &events, &lines)?;
    let mut trace = std::io::BufWriter::new(std::fs::File::create(dir.join("trace.jsonl")).map_err(|e| io("trace.jsonl", e))?);
    for line in &lines {
        writeln!(trace, "{line}").map_err(|e| io("trace.jsonl", e))?;
    }
    trace.flush().map_err(|e| io("trace.jsonl", e))?;
    let digests = digests_in(&lines);
    let wanted = digests.clone();
    let stored: Vec<(String, i64, Vec<u8>)> = conn.call(move |client| {
        let rows = client.query("SELECT digest, size, bytes FROM flow_artifacts WHERE digest = ANY($1)", &[&wanted]).map_err(pg)?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect())
    })?;
    let mut artifacts = DirArtifacts::open(&dir.join("artifacts"))?;
    for (digest, size, bytes) in &stored {
        let artifact = ArtifactRef { digest: digest.clone(), size: u64::try_from(*size).unwrap_or(0) };
        artifacts.put_encoded(&artifact, bytes)?;
    }
    Ok(Exported { events: events.len(), proposals: proposals.len(), artifacts: stored.len() })
}

/// Every `sha256:…` digest the lines name, once each.
fn digests_in(lines: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for line in lines {
        let mut rest = line.as_str();
        while let Some(at) = rest.find("sha256:") {
            let candidate = &rest[at..];
            let hex: String = candidate[7..].chars().take_while(|c| c.is_ascii_hexdigit()).collect();
            if hex.len() == 64 {
                let digest = format!("sha256:{hex}");
                if seen.insert(digest.clone()) {
                    out.push(digest);
                }
            }
            rest = &candidate[7..];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn digests_are_found_once_each_wherever_they_sit() {
        let a = format!("sha256:{}", "a".repeat(64));
        let b = format!("sha256:{}", "0".repeat(64));
        let lines = vec![format!(r#"{{"x":"{a}","y":["{b}","{a}"]}}"#), "sha256:short".to_string()];
        assert_eq!(super::digests_in(&lines), vec![a, b]);
    }
}
