#!/usr/bin/env python3
"""Model checking: Flow's checker vs SPIN, measured in the same run.

For each size (K parallel branches of D agents, under a budget, three
policies: two hold, one is violated), the same workflow is
  * verified by Flow in-process (parse + check + model checking of all three
    policies: `flow_bench_mc flow K D`), and
  * written as Promela (`flow_bench_mc promela K D`) and verified by SPIN end
    to end: `spin -a`, `gcc -O2`, then `pan -a -N p` for each property.
Verdicts must agree. Prints time to verdict for both and their ratio,
product states explored and states per second (Flow) against pan's own
states per second (pan alone, without spin/gcc), and peak memory (max RSS)
of Flow's process and of the largest pan run; then Flow again with the
dead-variable, cone-of-influence and shared-exploration reductions off
(`plain`: the checker before them), its states, time and memory. Flow's
states are those it built: one exploration for all of a workflow's
policies, or the sum of one per policy (plain).

A second table runs Flow alone on generated workflows (`flow-gen NODES`:
routers, loops, gates, three policies) with `flowc verify`'s bound of
2,000,000 states per policy, with the reductions and without.

Machines are shared and noisy: read the ratios, not the absolute times.

Usage: bench/mc_vs_spin.py [K:D ...]   (default 2:3 3:4 4:4 4:6 5:5)
       GEN="300 780 2000" bench/mc_vs_spin.py   (the generated sizes; "" skips them)
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "flow_bench_mc")


def timed(argv, cwd=None):
    """Runs a command with its resource use: (seconds, max RSS KiB, stdout)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    pid, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    out = proc.stdout.read().decode()
    err = proc.stderr.read().decode()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"{' '.join(argv)} failed ({code}): {err.strip()}")
    return seconds, usage.ru_maxrss, out


def main():
    sizes = [tuple(int(x) for x in s.split(":")) for s in (sys.argv[1:] or ["2:3", "3:4", "4:4", "4:6", "5:5"])]
    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "flow-tests", "--bin", "flow_bench_mc"], cwd=ROOT, check=True)
    for tool in ("spin", "gcc"):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            sys.exit(f"{tool} is not installed (apt-get install spin gcc)")
    header = (
        f"{'K:D':>6} {'states':>10} {'flow s':>8} {'spin+gcc+pan s':>15} {'ratio':>7} {'flow st/s':>11} {'pan st/s':>10} "
        f"{'rate ratio':>10} {'flow MiB':>9} {'pan MiB':>8} {'plain states':>13} {'plain s':>8} {'plain MiB':>10}"
    )
    print(header)
    for k, d in sizes:
        flow_s, flow_rss, out = timed([BIN, "flow", str(k), str(d)])
        flow = json.loads(out)
        states = flow["explored"]
        plain_s, plain_rss, plain_out = timed([BIN, "flow", str(k), str(d), "plain"])
        plain = json.loads(plain_out)
        if plain["verdicts"] != flow["verdicts"]:
            sys.exit(f"K={k} D={d}: the reductions changed a verdict: {flow['verdicts']} against {plain['verdicts']}")
        plain_states = plain["explored"]
        with tempfile.TemporaryDirectory() as work:
            with open(os.path.join(work, "m.pml"), "w") as f:
                f.write(subprocess.run([BIN, "promela", str(k), str(d)], capture_output=True, text=True, check=True).stdout)
            spin_s, _, _ = timed(["spin", "-a", "m.pml"], cwd=work)
            gcc_s, _, _ = timed(["gcc", "-O2", "-o", "pan", "pan.c"], cwd=work)
            pan_s = 0.0
            pan_rss = 0
            pan_states = 0.0
            pan_elapsed = 0.0
            for prop in ("a", "b", "c"):
                s, rss, text = timed(["./pan", "-a", "-N", prop, "-m1000000", "-w24"], cwd=work)
                pan_s += s
                pan_rss = max(pan_rss, rss)
                errors = int(re.search(r"errors: (\d+)", text).group(1))
                verdict = "violated" if errors > 0 else "holds"
                if verdict != flow["verdicts"][prop]:
                    sys.exit(f"K={k} D={d} policy {prop}: Flow says {flow['verdicts'][prop]}, SPIN says {verdict}")
                stored = re.search(r"([\d.e+]+) states, stored", text)
                elapsed = re.search(r"elapsed time ([\d.e+]+)", text)
                pan_states += float(stored.group(1)) if stored else 0.0
                pan_elapsed += float(elapsed.group(1)) if elapsed else 0.0
        spin_total = spin_s + gcc_s + pan_s
        flow_rate = states / flow_s if flow_s > 0 else float("inf")
        pan_rate = pan_states / pan_elapsed if pan_elapsed > 0 else float("inf")
        rate_ratio = flow_rate / pan_rate if pan_rate not in (0, float("inf")) else float("nan")
        print(
            f"{k}:{d:<4} {states:>10} {flow_s:>8.3f} {spin_total:>15.3f} {spin_total / flow_s:>6.1f}x "
            f"{flow_rate:>11.0f} {pan_rate:>10.0f} {rate_ratio:>9.2f}x {flow_rss / 1024:>9.1f} {pan_rss / 1024:>8.1f} "
            f"{plain_states:>13} {plain_s:>8.3f} {plain_rss / 1024:>10.1f}"
        )
    print("ratio: SPIN end-to-end time / Flow time (above 1: Flow reaches the verdicts faster).")
    print("rate ratio: Flow states/s / pan states/s (pan alone; 0.5 or more is within 2x).")
    print("plain: Flow without the dead-variable, cone-of-influence and shared-exploration reductions.")
    generated(os.environ.get("GEN", "300 780 2000").split())


def generated(sizes):
    """Flow alone on generated workflows, with and without the reductions."""
    if not sizes:
        return
    print()
    print(f"{'nodes':>6} {'':>8} {'verdicts':<40} {'states':>10} {'s':>8} {'MiB':>8}")
    for nodes in sizes:
        for mode in ("reduced", "plain"):
            argv = [BIN, "gen", nodes] + (["plain"] if mode == "plain" else [])
            seconds, rss, out = timed(argv)
            result = json.loads(out)
            verdicts = " ".join(v[0].upper() if v != "unknown" else "?" for v in result["verdicts"].values())
            states = result["explored"]
            print(f"{nodes:>6} {mode:>8} {verdicts:<40} {states:>10} {seconds:>8.3f} {rss / 1024:>8.1f}")
    print("verdicts, one letter per policy: H holds, V violated, ? unknown (past 2,000,000 states).")


if __name__ == "__main__":
    main()
