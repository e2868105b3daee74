#!/usr/bin/env bash
# Static verification: Flow vs agentproofx (PyPI), measured in the same run.
#
# For each size, one generated workflow (flow-gen) is verified by flowc
# (parse + check + every static check, in-process: flow-bench-verify) and
# its graph (flowc graph --format json: the same nodes, edges, routers,
# gates, loop bounds and sensitive tools) is handed to agentproofx's
# structural checks (bench/bench_apx.py). Prints both timings and the ratio.
# Machines are shared and noisy: compare ratios, not absolute times.
#
# Usage: bench/verify_vs_agentproofx.sh [SIZE…]   (default 1000 5000 20000)
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES="${*:-1000 5000 20000}"
WORK="${TMPDIR:-/tmp}/flow-bench-apx"
mkdir -p "$WORK"

echo "building (release)…" >&2
cargo build --release --locked --quiet -p flowc -p flow-tests --bins
if [ ! -x "$WORK/venv/bin/python" ]; then
  python3 -m venv "$WORK/venv"
fi
"$WORK/venv/bin/pip" install --quiet --disable-pip-version-check "agentproofx==0.3.1"

printf '%-8s %12s %12s %12s %16s %10s\n' nodes "check ms" "verify ms" "struct. ms" "agentproofx ms" "ratio"
for n in $SIZES; do
  ./target/release/flow-gen "$n" 2024 > "$WORK/gen_$n.flow"
  ./target/release/flowc graph --format json "$WORK/gen_$n.flow" > "$WORK/gen_$n.json"
  flow=$(./target/release/flow-bench-verify "$WORK/gen_$n.flow" 5)
  apx=$("$WORK/venv/bin/python" bench/bench_apx.py --runs 5 "$WORK/gen_$n.json" 2>/dev/null)
  python3 - "$n" "$flow" "$apx" <<'PY'
import json, sys
n, flow, apx = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
if flow["findings"]:
    sys.exit(f"flowc found {flow['findings']} problems in the generated workflow: not a fair comparison")
ratio = apx["ms"] / flow["structural_ms"] if flow["structural_ms"] > 0 else float("inf")
print(f"{n:<8} {flow['check_ms']:>12.2f} {flow['verify_ms']:>12.2f} {flow['structural_ms']:>12.2f} {apx['ms']:>16.2f} {ratio:>9.1f}x")
PY
done
echo "(check: parse + resolve + type check; verify: every static check (graph, gates, contracts," >&2
echo " permissions, budgets, state machines; target < 100 ms at 5,000 nodes); struct.: the" >&2
echo " structural subset agentproofx also runs. Ratio = agentproofx / struct.; target >= 20x.)" >&2
