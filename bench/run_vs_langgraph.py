#!/usr/bin/env python3
"""Time LangGraph on the workflows of `flow_bench_run` (Flow bench baseline).

The same two graphs of no-op nodes as the Flow side (tests/src/bin/flow_bench_run.rs):

* chain:  START -> n1 -> n2 -> ... -> nN -> END            (N nodes)
* fanout: START -> split -> b1..bW (all at once) -> join -> END  (W + 2 nodes)

built with `langgraph.graph.StateGraph` (PyPI `langgraph`, tested with 1.2),
compiled once, and run with `invoke`. Every node returns `{}` (no update).
Modes:

* `plain`:  compiled without a checkpointer;
* `sqlite_saver`: compiled with `SqliteSaver` (PyPI
  `langgraph-checkpoint-sqlite`) on a fresh file, each invoke a new thread;
* `postgres_saver`: compiled with `PostgresSaver` (PyPI
  `langgraph-checkpoint-postgres`) on `--pg URL`, each invoke a new thread;
* `memory_saver`: compiled with `InMemorySaver` (alias `MemorySaver`), each
  invoke on a fresh `thread_id` (a checkpoint per superstep, in memory).

`recursion_limit` is raised to fit the chain (the default, 25, stops a
chain of more than 25 nodes). Only `invoke` is timed: building and
compiling the graph are not. Each measurement takes at most `--reps`
samples (`--saver-reps` with the checkpointer) after one warm-up invoke,
and starts none once `--budget-s` seconds are spent.

Output: one JSON line per measurement on stdout,

    {"tool": "langgraph", "workload": "chain", "nodes": 1000, "mode": "plain",
     "us_per_node": ..., "ms": ..., "ms_min": ..., "reps": ...}

where `us_per_node` is the median wall time divided by the node count, and
readable lines on stderr. `--peak-mem N` instead runs one N-node chain
(plain) and prints its peak resident set (`ru_maxrss`), compile included.

Usage: run_vs_langgraph.py [--chain N] [--fanout W] [--reps R] [--saver-reps R] [--budget-s S]
                           [--modes plain,memory_saver,sqlite_saver,postgres_saver] [--pg URL] [--peak-mem N]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import json
import resource
import statistics
import sys
import time
import uuid
from typing import TypedDict


class State(TypedDict, total=False):
    x: int


def noop(state: State) -> dict:
    return {}


def chain_graph(n: int, checkpointer=None):
    from langgraph.graph import END, START, StateGraph

    g = StateGraph(State)
    names = [f"n{i}" for i in range(1, n + 1)]
    for name in names:
        g.add_node(name, noop)
    g.add_edge(START, names[0])
    for a, b in zip(names, names[1:]):
        g.add_edge(a, b)
    g.add_edge(names[-1], END)
    return g.compile(checkpointer=checkpointer)


def fanout_graph(w: int, checkpointer=None):
    from langgraph.graph import END, START, StateGraph

    g = StateGraph(State)
    branches = [f"b{i}" for i in range(1, w + 1)]
    g.add_node("split", noop)
    for b in branches:
        g.add_node(b, noop)
    g.add_node("join", noop)
    g.add_edge(START, "split")
    for b in branches:
        g.add_edge("split", b)
    # A list of start keys: `join` waits for every branch.
    g.add_edge(branches, "join")
    g.add_edge("join", END)
    return g.compile(checkpointer=checkpointer)


def saver():
    try:
        from langgraph.checkpoint.memory import InMemorySaver
    except ImportError:  # older releases
        from langgraph.checkpoint.memory import MemorySaver as InMemorySaver
    return InMemorySaver()


def sqlite_saver(path: str):
    """LangGraph's durable checkpointer (PyPI `langgraph-checkpoint-sqlite`)
    on a fresh file: durable against durable with Flow's SQLite journal."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    return SqliteSaver(sqlite3.connect(path, check_same_thread=False))


def postgres_saver(url: str):
    """LangGraph's PostgreSQL checkpointer (PyPI `langgraph-checkpoint-postgres`,
    psycopg 3) on the server Flow's Postgres journal is measured on, its
    tables made by `setup()`: durable against durable."""
    import psycopg
    from psycopg.rows import dict_row

    from langgraph.checkpoint.postgres import PostgresSaver

    conn = psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    checkpointer = PostgresSaver(conn)
    checkpointer.setup()
    return checkpointer


def config(nodes: int, checkpointed: bool) -> dict:
    cfg: dict = {"recursion_limit": nodes + 10}
    if checkpointed:
        cfg["configurable"] = {"thread_id": uuid.uuid4().hex}
    return cfg


def time_invokes(graph, nodes: int, checkpointed: bool, reps: int, budget_s: float) -> list[float]:
    """At most `reps` timed invokes after a warm-up, none started once
    `budget_s` seconds are spent. A warm-up longer than a second is kept as
    a sample (first-run effects are negligible there)."""
    t0 = time.perf_counter()
    graph.invoke({"x": 0}, config(nodes, checkpointed))
    warm = time.perf_counter() - t0
    times = [warm] if warm > 1.0 else []
    while len(times) < reps and (not times or sum(times) < budget_s):
        cfg = config(nodes, checkpointed)
        t0 = time.perf_counter()
        graph.invoke({"x": 0}, cfg)
        times.append(time.perf_counter() - t0)
    return times


def peak_rss_mib() -> float:
    # ru_maxrss is in KiB on Linux, bytes on macOS.
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chain", type=int, default=1000)
    ap.add_argument("--fanout", type=int, default=100)
    ap.add_argument("--reps", type=int, default=7, help="invokes per measurement without a checkpointer")
    ap.add_argument("--saver-reps", type=int, default=5, help="invokes per measurement with InMemorySaver")
    ap.add_argument("--budget-s", type=float, default=5.0, help="start no new invoke once this many seconds are spent")
    ap.add_argument("--modes", default="plain,memory_saver")
    ap.add_argument("--peak-mem", type=int, metavar="N", help="run one N-node chain and print the peak RSS")
    ap.add_argument("--pg", metavar="URL", help="the PostgreSQL server of the postgres_saver mode")
    args = ap.parse_args()

    import langgraph  # noqa: F401  (fail early with a clear error)
    from importlib.metadata import version

    lg_version = version("langgraph")

    if args.peak_mem:
        rss0 = peak_rss_mib()
        graph = chain_graph(args.peak_mem)
        rss_compiled = peak_rss_mib()
        t0 = time.perf_counter()
        graph.invoke({"x": 0}, config(args.peak_mem, False))
        secs = time.perf_counter() - t0
        line = {
            "tool": "langgraph", "version": lg_version, "workload": "chain", "nodes": args.peak_mem,
            "mode": "plain", "metric": "peak_rss", "peak_rss_mib": peak_rss_mib(),
            "peak_rss_after_compile_mib": rss_compiled, "rss_at_start_mib": rss0,
            "ms": secs * 1e3, "us_per_node": secs * 1e6 / args.peak_mem,
        }
        print(json.dumps(line), flush=True)
        return

    modes = [m for m in args.modes.split(",") if m]
    workloads = []
    if args.chain > 0:
        workloads.append(("chain", args.chain, lambda cp: chain_graph(args.chain, cp)))
    if args.fanout > 0:
        workloads.append(("fanout", args.fanout + 2, lambda cp: fanout_graph(args.fanout, cp)))
    print(f"langgraph {lg_version}, Python {sys.version.split()[0]}", file=sys.stderr)
    for workload, nodes, build in workloads:
        for mode in modes:
            if mode not in ("plain", "memory_saver", "sqlite_saver", "postgres_saver"):
                sys.exit(f"unknown mode {mode!r}")
            checkpointed = mode != "plain"
            if mode == "postgres_saver":
                if not args.pg:
                    sys.exit("postgres_saver needs --pg URL")
                checkpointer = postgres_saver(args.pg)
            elif mode == "sqlite_saver":
                scratch = tempfile.mkdtemp(prefix="lg-sqlite-")
                checkpointer = sqlite_saver(os.path.join(scratch, f"{workload}.sqlite"))
            else:
                checkpointer = saver() if checkpointed else None
            graph = build(checkpointer)
            reps = args.saver_reps if checkpointed else args.reps
            times = time_invokes(graph, nodes, checkpointed, reps, args.budget_s)
            reps = len(times)
            med = statistics.median(times)
            line = {
                "tool": "langgraph", "version": lg_version, "workload": workload, "nodes": nodes,
                "mode": mode, "reps": reps, "ms": med * 1e3, "ms_min": min(times) * 1e3,
                "us_per_node": med * 1e6 / nodes,
            }
            print(json.dumps(line), flush=True)
            print(
                f"langgraph {workload:<7} {nodes:>6} nodes  {mode:<12} median {med * 1e3:>9.3f} ms  "
                f"min {min(times) * 1e3:>9.3f} ms  {med * 1e6 / nodes:>8.2f} µs/node  ({reps} reps)",
                file=sys.stderr,
            )
            del graph


if __name__ == "__main__":
    main()
