//! FlockMind's evidence checks are computed, not claimed (issue "Computed,
//! not claimed"; seed 000): the control plane builds the citation pack
//! (vendor blogs filtered out of it, not blocking the run), compares each
//! section's matched citations with the input's `minimum_citations`, and
//! links each claim of the outline to the citations that support it — and
//! the gates act on those computed values.
#![allow(clippy::disallowed_methods)]

mod common;
use common::*;

use serde_json::Value;
use std::path::{Path, PathBuf};

const INPUT: &str = "research_writer.input.json";
const REPLIES: &str = "cassettes/research_writer.yaml";
const SEARCH: &str = "research_writer.cassette.yaml";

/// The research writer with its files edited, run (exit `code`) and
/// trace-checked (`common::run_example`); the run directory.
fn research(code: i32, edits: &[Edit]) -> (tempfile::TempDir, PathBuf) {
    run_example("research_writer", edits, code)
}

fn ending(run: &Path) -> (String, String) {
    let events = events(run);
    let last = events.last().unwrap();
    assert_eq!(last["kind"], "run_terminated");
    (last["payload"]["reason"].as_str().unwrap().to_string(), last["payload"]["status"].as_str().unwrap().to_string())
}

fn started(run: &Path, node: &str) -> usize {
    events(run).iter().filter(|e| e["kind"] == "node_started" && e["payload"]["node"] == node).count()
}

fn ids(list: &Value) -> Vec<&str> {
    list.as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect()
}

#[test]
fn a_vendor_blog_is_dropped_from_the_citation_pack_and_the_run_publishes() {
    let (_dir, run) = research(0, &[]);
    assert_eq!(ending(&run), ("published".to_string(), "success".to_string()));
    let pack = &computed(&run, "evidence")[0];
    let kept: Vec<&str> = pack["items"].as_array().unwrap().iter().map(|i| i["citation_id"].as_str().unwrap()).collect();
    assert_eq!(kept, ["lewis2020", "zakka2024", "kresevic2024"]);
    assert_eq!(pack["dropped"][0]["citation_id"], "ragvendor2025");
    assert_eq!(ids(&pack["dropped"][0]["signals"]), ["vendor_blog"]);
    // Coverage counts only the pack: the vendor blog, grouped under both
    // sections, matches neither.
    let coverage = pack["coverage"].as_array().unwrap();
    assert_eq!(ids(&coverage[0]["matched_citation_ids"]), ["lewis2020", "zakka2024"]);
    assert_eq!(ids(&coverage[1]["matched_citation_ids"]), ["zakka2024", "kresevic2024"]);
    assert!(coverage.iter().all(|c| c["status"] == "sufficient" && c["minimum_citations"] == 2));
    assert_eq!(pack["sufficient"], true);
    let linkage = &computed(&run, "linkage")[0];
    assert_eq!(linkage["missing"], 0);
    assert_eq!(ids(&linkage["claims"][1]["supporting_citation_ids"]), ["zakka2024", "kresevic2024"]);
}

#[test]
fn a_section_short_of_the_minimum_citations_blocks_before_the_planner() {
    // The same search, three citations asked per section: both sections
    // are "partial", and a partial section no longer goes on to publish.
    let (_dir, run) = research(1, &[(INPUT, &|input| input.replace("\"minimum_citations\": 2", "\"minimum_citations\": 3"))]);
    assert_eq!(ending(&run), ("search_evidence_gate".to_string(), "failure".to_string()));
    let pack = &computed(&run, "evidence")[0];
    let statuses: Vec<&Value> = pack["coverage"].as_array().unwrap().iter().map(|c| &c["status"]).collect();
    assert_eq!(statuses, ["partial", "partial"]);
    assert_eq!(pack["coverage"][0]["minimum_citations"], 3);
    assert_eq!(pack["sufficient"], false);
    assert_eq!(started(&run, "outline"), 0, "the planner is never called");
}

#[test]
fn a_section_with_no_citation_in_the_pack_is_missing() {
    // The search finds nothing for the methods section but the vendor blog.
    let (_dir, run) = research(
        1,
        &[(SEARCH, &|search| {
            search
                .replace(
                    "section_groups: [background, methods]\n        claim_focuses: [unsafe",
                    "section_groups: [background]\n        claim_focuses: [unsafe",
                )
                .replace("section_groups: [methods]", "section_groups: [results]")
        })],
    );
    assert_eq!(ending(&run).0, "search_evidence_gate");
    let pack = &computed(&run, "evidence")[0];
    assert_eq!(pack["coverage"][1]["section"], "methods");
    assert_eq!(pack["coverage"][1]["status"], "missing");
    assert_eq!(ids(&pack["coverage"][1]["matched_citation_ids"]), Vec::<&str>::new());
}

#[test]
fn an_outline_claim_no_cited_evidence_supports_stops_before_the_writer() {
    // The planner cites only lewis2020 for the methods claim, which is not
    // about guideline corpora or unsafe completions, and cites a source the
    // pack does not hold.
    let (_dir, run) = research(
        1,
        &[(REPLIES, &|replies| replies.replacen("citation_ids: [zakka2024, kresevic2024]", "citation_ids: [lewis2020, ragvendor2025]", 1))],
    );
    assert_eq!(ending(&run), ("claim_linkage_gate".to_string(), "failure".to_string()));
    let linkage = &computed(&run, "linkage")[0];
    assert_eq!(linkage["missing"], 1);
    assert_eq!(linkage["claims"][1]["status"], "missing");
    assert_eq!(ids(&linkage["unknown_citation_ids"]), ["ragvendor2025"]);
    assert_eq!(started(&run, "write"), 0, "the writer never sees the outline");
}
