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
# Then the whole command as a user runs it: `flow trace check` of a trace of
# about a million events (ROUNDS rounds of a four-node loop with four
# policies; 28000 rounds give 1,008,009 events), wall clock including
# compiling the plan, the median of three.
#
# Usage: bench/trace_check.sh [N] [ROUNDS]   (defaults 85000, 28000)
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-85000}"
ROUNDS="${2:-28000}"
WORK="${TMPDIR:-/tmp}/flow-bench-trace"
mkdir -p "$WORK"
echo "building (release)…" >&2
cargo build --release --locked --quiet -p flow-cli -p flow-tests --bin flow --bin flow_bench_trace
./target/release/flow_bench_trace source "$N" > "$WORK/chain.flow"
rm -rf "$WORK/run"
echo "running a $N-node chain to get its trace…" >&2
./target/release/flow run "$WORK/chain.flow" --run-dir "$WORK/run" -q
./target/release/flow_bench_trace check "$WORK/run/trace.jsonl" "$WORK/chain.flow" 3

./target/release/flow_bench_trace source-loop "$ROUNDS" > "$WORK/loop.flow"
rm -rf "$WORK/loop-run"
echo "running $ROUNDS rounds of a four-node loop to get its trace…" >&2
./target/release/flow run "$WORK/loop.flow" --run-dir "$WORK/loop-run" -q
events=$(wc -l < "$WORK/loop-run/trace.jsonl")
times=()
for _ in 1 2 3; do
  start=$(date +%s%N)
  ./target/release/flow trace check "$WORK/loop-run/trace.jsonl" --plan "$WORK/loop.flow" > /dev/null
  end=$(date +%s%N)
  times+=("$(( (end - start) / 1000000 ))")
done
median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n 2p)
echo "flow trace check, the whole command (compile the plan, read, parse, check): $events events in $median ms (median of ${times[*]} ms); per 1,000,000 events: $(( median * 1000000 / events )) ms (target < 1000 ms)"
rm -rf "$WORK/run" "$WORK/loop-run"
