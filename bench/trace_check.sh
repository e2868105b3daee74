#!/usr/bin/env bash
# Trace checking and policy monitoring throughput (a benchmark: it prints
# figures and never fails on a missed target).
#
# Runs a generated chain of N no-op tool nodes with four policies through
# `flow run` (a real trace, about 12 events per node: N=85000 gives about a
# million events), then times on that trace: reading and parsing the JSONL,
# the whole `flow trace check`, and the policy monitors alone (flow-policy, one
# core). Targets: monitoring at least 10 million events/s; `flow trace check`
# of a million events in under a second. Agentproof reports about 247,000
# events/s for its runtime monitors.
#
# Usage: bench/trace_check.sh [N]   (default 85000)
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-85000}"
WORK="${TMPDIR:-/tmp}/flow-bench-trace"
mkdir -p "$WORK"
echo "building (release)…" >&2
cargo build --release --locked --quiet -p flow-cli -p flow-tests --bin flow --bin flow_bench_trace
./target/release/flow_bench_trace source "$N" > "$WORK/chain.flow"
rm -rf "$WORK/run"
echo "running a $N-node chain to get its trace…" >&2
./target/release/flow run "$WORK/chain.flow" --run-dir "$WORK/run" -q
./target/release/flow_bench_trace check "$WORK/run/trace.jsonl" "$WORK/chain.flow" 3
