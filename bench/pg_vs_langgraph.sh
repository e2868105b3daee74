#!/usr/bin/env bash
# Runs kept in PostgreSQL: Flow's Postgres journal and workers against
# LangGraph with PostgresSaver (PyPI `langgraph-checkpoint-postgres`), on
# the same server, in the same run. Starts its own server with durability
# on (fsync, synchronous commit), as a non-root user, on a free port
# (tests/postgres/server.sh), and stops it after.
#
# 1. Per-node cost with one worker: a chain of CHAIN no-op nodes and a
#    FANOUT-way fan-out, Flow (tests/src/bin/flow_bench_pg.rs: submitted,
#    claimed and driven over the fenced Postgres journal) against
#    LangGraph's invoke with PostgresSaver; ratios printed.
# 2. Throughput: RUNS small runs (SMALL-node chains) drained by 1, 2, 4 and
#    8 `flow worker` processes: runs/s, events/s, claim latency p50/p99.
#
# A benchmark, not a test: it never fails on a number. The machine is
# shared and noisy: compare ratios. Raw JSON lines in target/bench-pg/.
#
# Environment: BUDGET_S=5 CHAIN=1000 FANOUT=100 RUNS=200 SMALL=5 WORKERS=1,2,4,8 CONCURRENCY=4
set -euo pipefail
cd "$(dirname "$0")/.."
BUDGET_S="${BUDGET_S:-5}"
CHAIN="${CHAIN:-1000}"
FANOUT="${FANOUT:-100}"
RUNS="${RUNS:-200}"
SMALL="${SMALL:-5}"
WORKERS="${WORKERS:-1,2,4,8}"
CONCURRENCY="${CONCURRENCY:-4}"
OUT=target/bench-pg
VENV=target/bench-venv
mkdir -p "$OUT"

echo "building flow and flow_bench_pg (release)…" >&2
cargo build --release --locked --quiet -p flow-cli --bin flow
cargo build --release --locked --quiet -p flow-tests --bin flow_bench_pg

PY="$VENV/bin/python"
if ! "$PY" -c 'import langgraph.checkpoint.postgres, psycopg' 2>/dev/null; then
  echo "installing langgraph and langgraph-checkpoint-postgres in $VENV…" >&2
  [ -x "$PY" ] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "langgraph>=1,<2" \
    "langgraph-checkpoint-postgres>=3,<4" "psycopg[binary]>=3.2,<4"
fi

. tests/postgres/server.sh
dir="$(mktemp -d /tmp/flow-bench-pg.XXXXXX)"
trap 'pg_stop "$dir"; rm -rf "$dir"' EXIT
pg_start "$dir" durable
base="${FLOW_TEST_DB%/*}"
as_pg "$FLOW_TEST_PG_USER" "$FLOW_TEST_PG_BIN/createdb" -h 127.0.0.1 -p "${base##*:}" -U flow langgraph
echo "PostgreSQL (durable) at $FLOW_TEST_DB" >&2

echo "== Flow ==" >&2
./target/release/flow_bench_pg --db "$FLOW_TEST_DB" --chain "$CHAIN" --fanout "$FANOUT" --budget-s "$BUDGET_S" \
  --runs "$RUNS" --small "$SMALL" --workers "$WORKERS" --concurrency "$CONCURRENCY" \
  --flow target/release/flow > "$OUT/flow.jsonl"
echo "== LangGraph ==" >&2
"$PY" bench/run_vs_langgraph.py --chain "$CHAIN" --fanout "$FANOUT" --budget-s "$BUDGET_S" \
  --modes postgres_saver --pg "$base/langgraph" > "$OUT/langgraph.jsonl"

python3 - "$OUT/flow.jsonl" "$OUT/langgraph.jsonl" <<'PY'
import json, sys

def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]

flow, lg = load(sys.argv[1]), load(sys.argv[2])
print()
print(f"{'workload':<14} {'Flow':<10} {'µs/node':>9}  {'LangGraph':<15} {'µs/node':>9} {'ratio':>8}")
print("-" * 72)
for w in ("chain", "fanout"):
    f = next((r for r in flow if r.get("workload") == w and r.get("mode") == "postgres"), None)
    l = next((r for r in lg if r.get("workload") == w and r.get("mode") == "postgres_saver"), None)
    if f and l:
        ratio = l["us_per_node"] / f["us_per_node"] if f["us_per_node"] > 0 else float("inf")
        print(f"{w + ' ' + str(f['nodes']):<14} {'postgres':<10} {f['us_per_node']:>9.2f}  {'PostgresSaver':<15} {l['us_per_node']:>9.2f} {ratio:>7.1f}x")
print()
print(f"{'workers':>7} {'runs':>6} {'secs':>7} {'runs/s':>8} {'events/s':>9} {'claim p50':>10} {'claim p99':>10} {'vs 1 worker':>12}")
rows = [r for r in flow if r.get("metric") == "throughput"]
one = next((r["runs_per_s"] for r in rows if r["workers"] == 1), None)
for r in rows:
    scale = f"{r['runs_per_s'] / one:.2f}x" if one else "-"
    print(f"{r['workers']:>7} {r['runs']:>6} {r['secs']:>7.2f} {r['runs_per_s']:>8.1f} {r['events_per_s']:>9.0f} "
          f"{r['claim_p50_ms']:>8.2f}ms {r['claim_p99_ms']:>8.2f}ms {scale:>12}")
print()
print("ratio = LangGraph µs/node / Flow µs/node (higher: Flow faster); both durable on one server (fsync on).")
print("Each worker drives up to CONCURRENCY runs at once; the machine has 2 cores (see bench/README.md).")
PY
