#!/usr/bin/env bash
# Runtime overhead: Flow vs LangGraph (PyPI `langgraph`), measured in the same run.
#
# Two workloads of no-op nodes, built the same way on both sides: a chain of
# 1,000 nodes and a 100-way fan-out joined again (102 nodes). The Flow side
# (tests/src/bin/flow_bench_run.rs) runs generated .flow sources through
# flow_runtime::driver::run: in memory, with the SQLite journal
# (synchronous=NORMAL, crash-safe) and with synchronous=FULL. The LangGraph
# side (bench/run_vs_langgraph.py) invokes the same graphs compiled without
# a checkpointer and with InMemorySaver. Then a 10,000-node Flow chain runs
# in a child process for its peak resident memory.
#
# Prints a table of µs per node, ratios and targets (met or not). A benchmark,
# not a test: it never fails on a missed target. Machines are shared and
# noisy: compare ratios, not absolute times. Raw JSON lines are kept in
# target/bench-run-vs-langgraph/.
#
# Usage: bench/run_vs_langgraph.sh
# Environment:
#   BUDGET_S=5         seconds per measurement (samples stop once spent)
#   CHAIN=1000 FANOUT=100 PEAK_NODES=10000
#   FLOW_MODES=memory,sqlite,sqlite-full
#   LANGGRAPH_PEAK=1   also measure LangGraph's peak memory on the big chain
#   FLOW_THREADS=0     tokio worker threads (0: current_thread runtime)
set -euo pipefail
cd "$(dirname "$0")/.."
BUDGET_S="${BUDGET_S:-5}"
CHAIN="${CHAIN:-1000}"
FANOUT="${FANOUT:-100}"
PEAK_NODES="${PEAK_NODES:-10000}"
FLOW_MODES="${FLOW_MODES:-memory,sqlite,sqlite-full}"
FLOW_THREADS="${FLOW_THREADS:-0}"
OUT=target/bench-run-vs-langgraph
VENV=target/bench-venv
mkdir -p "$OUT"

echo "building flow_bench_run (release)…" >&2
cargo build --release --locked --quiet -p flow-tests --bin flow_bench_run

# LangGraph in a venv of its own (works where the system pip is "externally managed").
PY="$VENV/bin/python"
if ! "$PY" -c 'import langgraph' 2>/dev/null; then
  echo "installing langgraph in $VENV…" >&2
  [ -x "$PY" ] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "langgraph>=1,<2"
fi
if ! "$PY" -c 'import langgraph.checkpoint.sqlite' 2>/dev/null; then
  echo "installing langgraph-checkpoint-sqlite in $VENV…" >&2
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "langgraph-checkpoint-sqlite>=2,<4"
fi

echo "== Flow ==" >&2
./target/release/flow_bench_run --chain "$CHAIN" --fanout "$FANOUT" --modes "$FLOW_MODES" \
  --budget-s "$BUDGET_S" --peak-nodes "$PEAK_NODES" --threads "$FLOW_THREADS" > "$OUT/flow.jsonl"
echo "== LangGraph ==" >&2
"$PY" bench/run_vs_langgraph.py --chain "$CHAIN" --fanout "$FANOUT" --budget-s "$BUDGET_S" \
  --modes plain,memory_saver,sqlite_saver > "$OUT/langgraph.jsonl"
if [ "${LANGGRAPH_PEAK:-0}" = 1 ] && [ "$PEAK_NODES" -gt 0 ]; then
  "$PY" bench/run_vs_langgraph.py --peak-mem "$PEAK_NODES" >> "$OUT/langgraph.jsonl"
fi

python3 - "$OUT/flow.jsonl" "$OUT/langgraph.jsonl" <<'PY'
import json, sys

def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]

flow, lg = load(sys.argv[1]), load(sys.argv[2])

def find(rows, workload, mode, metric=None):
    for r in rows:
        if r["workload"] == workload and r["mode"] == mode and r.get("metric") == metric:
            return r
    return None

print()
print(f"{'workload':<14} {'Flow':<13} {'µs/node':>9}  {'LangGraph':<14} {'µs/node':>9} {'ratio':>8}  {'target':<38} met")
print("-" * 118)

def row(workload, fmode, lmode, target_text, check):
    f, l = find(flow, workload, fmode), find(lg, workload, lmode)
    if not f or not l:
        return
    ratio = l["us_per_node"] / f["us_per_node"] if f["us_per_node"] > 0 else float("inf")
    met = "-" if check is None else ("yes" if check(f["us_per_node"], ratio) else "NO")
    label = f"{workload} {f['nodes']}"
    print(f"{label:<14} {fmode:<13} {f['us_per_node']:>9.2f}  {lmode:<14} {l['us_per_node']:>9.2f} {ratio:>7.1f}x  {target_text:<38} {met}")

for w in ("chain", "fanout"):
    row(w, "memory", "plain", "Flow <= 5 µs/node and >= 30x", lambda us, r: us <= 5 and r >= 30)
for w in ("chain", "fanout"):
    row(w, "sqlite", "memory_saver", "Flow cheaper per node (ratio > 1x)", lambda us, r: r > 1)
for w in ("chain", "fanout"):
    row(w, "sqlite", "sqlite_saver", "durable vs durable: Flow cheaper (> 1x)", lambda us, r: r > 1)
for w in ("chain", "fanout"):
    row(w, "sqlite-full", "sqlite_saver", "FULL (power loss) vs SqliteSaver", None)
# Group commit: synchronous=FULL within 2x of NORMAL, NORMAL <= 25 µs/node.
for w in ("chain",):
    normal, full = find(flow, w, "sqlite"), find(flow, w, "sqlite-full")
    if normal and full and normal["us_per_node"] > 0:
        r = full["us_per_node"] / normal["us_per_node"]
        ok = r <= 2 and normal["us_per_node"] <= 25
        print(f"{w + ' ' + str(normal['nodes']):<14} FULL/NORMAL {r:.2f}x, NORMAL {normal['us_per_node']:.2f} µs/node"
              f"{'':<21} target: FULL <= 2x NORMAL, NORMAL <= 25 µs/node  {'yes' if ok else 'NO'}")

peak = next((r for r in flow if r.get("metric") == "peak_rss"), None)
if peak and peak.get("peak_rss_mib") is not None:
    mb = peak["peak_rss_mib"] * 1.048576  # MiB -> MB (10^6 bytes)
    lg_peak = next((r for r in lg if r.get("metric") == "peak_rss"), None)
    lg_text = f"   LangGraph {lg_peak['peak_rss_mib'] * 1.048576:.1f} MB" if lg_peak else ""
    print(f"{'chain ' + str(peak['nodes']):<14} {'memory':<13} peak RSS {mb:.1f} MB "
          f"(run {peak['ms'] / 1e3:.1f} s, {peak['us_per_node']:.1f} µs/node){lg_text}")
    print(f"{'':<14} target: < 100 MB peak: {'yes' if mb < 100 else 'NO'}")
elif peak:
    print("peak memory: not measured (no /proc/self/status on this system)")
print()
print("ratio = LangGraph µs/node / Flow µs/node (higher: Flow faster). Per node: median run time /"
      " nodes (chain N; fan-out W + 2: split, branches, join).")
PY
