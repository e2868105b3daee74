//! Gates compare tool results, not what agents restate (issue "Computed,
//! not claimed"; seed 003): `calls.NODE.TOOL` holds what a node's tool
//! calls returned, filled in by the control plane. The harness holds a
//! refund against the order total `orders_lookup` returned (not the total
//! the research agent restates); the delegation accepts the verifier's
//! "pass" only with a test run of its own that reported no failure.
#![allow(clippy::disallowed_methods)]

mod common;
use common::*;

use serde_json::Value;
use std::path::Path;

fn ending(run: &Path) -> String {
    let events = events(run);
    let last = events.last().unwrap();
    assert_eq!(last["kind"], "run_terminated");
    last["payload"]["reason"].as_str().unwrap().to_string()
}

/// The evaluator outcomes of `gate`'s last outcome, in order.
fn evaluators(run: &Path, gate: &str) -> Vec<String> {
    let events = events(run);
    let recorded = events.iter().rev().find(|e| e["kind"] == "gate_recorded" && e["payload"]["gate"] == gate).unwrap();
    recorded["payload"]["evaluators"].as_array().unwrap().iter().map(|e| e["outcome"].as_str().unwrap().to_string()).collect()
}

#[test]
fn a_refund_above_the_order_total_the_tool_returned_is_declined_whatever_the_agent_restates() {
    // As recorded: the refund of 89.0 is within ORD-5531's 89.0.
    let (_dir, run) = run_example("harness", &[], 0);
    assert_eq!(ending(&run), "resolved");
    assert_eq!(evaluators(&run, "refund_rules"), ["PASS", "PASS", "PASS"]);
    // The research agent restates a total of 890.0 and the refund asks
    // 890.0: a rule over the agent's total would pass it; the rule over
    // what orders_lookup returned blocks it, and the refund is declined.
    let inflate = |t: String| {
        t.replacen("      order_total: 89.0", "      order_total: 890.0", 1).replacen(
            "      refund:\n        order_id: ORD-5531\n        amount: 89.0",
            "      refund:\n        order_id: ORD-5531\n        amount: 890.0",
            1,
        )
    };
    let (_dir, run) = run_example("harness", &[("harness.cassette.yaml", &inflate)], 1);
    assert_eq!(ending(&run), "refund_declined");
    assert_eq!(evaluators(&run, "refund_rules"), ["BLOCK", "PASS", "PASS"], "only the rule over the tool's result blocks");
    // The payment tool was never called.
    assert!(!events(&run).iter().any(|e| e["kind"] == "tool_call_started" && e["payload"]["tool"] == "issue_refund"));
}

#[test]
fn the_verifiers_pass_counts_only_with_a_test_run_that_reported_no_failure() {
    let fail_one = |t: String| {
        t.replacen("output: { passed: 214, failed: [] }", "output: { passed: 213, failed: [ledger::post_rounds_half_even] }", 1)
    };
    let (_dir, run) = run_example("delegation", &[], 0);
    assert_eq!(ending(&run), "accepted");
    let (_dir, run) = run_example("delegation", &[("delegation.cassette.yaml", &fail_one)], 1);
    assert_eq!(ending(&run), "verification_failed");
    // The verifier still said "pass".
    assert_eq!(output_of(&run, "verify")["status"], "pass");
}

/// The last output `node` completed with, read from the run's artifacts.
fn output_of(run: &Path, node: &str) -> Value {
    let events = events(run);
    let done = events.iter().rev().find(|e| e["kind"] == "node_completed" && e["payload"]["node"] == node).unwrap();
    let hex = done["payload"]["output"]["digest"].as_str().unwrap().trim_start_matches("sha256:").to_string();
    let path = run.join("artifacts").join(&hex[..2]).join(format!("{hex}.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}
