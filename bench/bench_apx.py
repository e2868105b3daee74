#!/usr/bin/env python3
"""Time agentproofx's structural checks on workflow graphs (Flow bench baseline).

agentproofx (PyPI `agentproofx`, import name `agentproof`, tested with 0.3.1)
checks a framework-neutral `AgentGraph`. It needs no framework installed.
Setup:

    python3 -m venv /tmp/apx && /tmp/apx/bin/pip install agentproofx==0.3.1

Usage:

    bench_apx.py                       # generate graphs of 1000, 5000, 20000 nodes
    bench_apx.py --sizes 1000,5000     # other sizes
    bench_apx.py graph.json [more.json]  # time graphs that another tool wrote
    bench_apx.py --emit-dir DIR        # also write the generated graphs as JSON

The script prints one JSON line per graph on stdout:

    {"tool": "agentproofx", "nodes": N, "ms": M, ...}

`ms` is the median wall time of `--runs` (default 5) calls of
`agentproof.verify(graph, require_human=True, sensitive_tools=S)`. That call
runs every structural and policy check the package has: exit_reachability,
reverse_reachability, dead_ends, router_shape, human_presence,
human_gate_coverage (only when S is given) and tool_declarations. `ms_core`
is the same without `sensitive_tools`, so without human_gate_coverage. This
is the configuration behind the package authors' own scaling numbers.
`ms_min` is the fastest run; `cpu_ms`/`cpu_ms_core` are medians of process
CPU time (steadier when other jobs share the machine). Building the
`AgentGraph` is not timed; `ms_build` reports it. Check results go to stderr.

Graph JSON (input of a positional path, output of --emit-dir):

    {
      "name": "generated_5000",            optional
      "start": "n0",                       optional: default is the first node,
                                           or the node of kind "entry"/"start"
      "sensitive_tools": ["wire_funds"],   optional, for human_gate_coverage
      "nodes": [
        {"id": "n0", "kind": "agent"},
        {"id": "n7", "kind": "tool", "tools": ["wire_funds"]},
        {"id": "done", "kind": "end"}
      ],
      "edges": [
        {"from": "n0", "to": "n1"},
        {"from": "r3", "to": "n4", "guard": "r3.ok"},       guarded edge
        {"from": "r3", "to": "n5", "else": true},           else edge
        {"from": "n9", "to": "n6", "loop_bound": 3},        bounded back edge
        {"from": "a", "to": "b", "gate": "approve_b"}       gate on the boundary
      ]
    }

`source`/`target` are accepted for `from`/`to`. A file that already holds
agentproofx's own format (`graph_to_dict`, with `entry_id`) is loaded as is.

Mapping to agentproofx: node kinds agent/llm -> LLM, tool -> TOOL, human ->
HUMAN, router -> ROUTER, end/exit/terminal -> EXIT, flow/subgraph ->
SUBGRAPH, entry/start -> ENTRY, parallel/map/join/loop/passthrough and others
-> PASSTHROUGH. End nodes are the graph's exits. Edges: loop_bound -> LOOP
(the bound is kept in metadata, which no agentproofx check reads), guard or
else -> CONDITIONAL, an edge out of a parallel/map node -> PARALLEL, other ->
DIRECT. agentproofx has no edge gates: a gate can only be a HUMAN node, so an
edge with `gate` is split by a HUMAN node `gate:<name>:<n>` (reported as
`apx_nodes` > `nodes`). A tool node with no `tools` gets its own id as its
tool name, so tool_declarations does not fail on generated input; a tool node
is sensitive when one of its tools is in `sensitive_tools` or it has
`"sensitive": true` (then its tools join the sensitive set).

The generated shape (no positional path): a layered DAG like a Flow workflow
of N nodes: one start agent node, layers 1-4 nodes wide of agent (~59%) and
tool (~28%) nodes, router nodes (~10%) whose out-edges are all guarded with
one `else`, parallel fan-outs closed by a join node, sensitive tool nodes
(~2%) each behind a human approval node that is their only way in, a few
bounded back edges (one per ~250 nodes, loop_bound 2-5) inside a window of
earlier layers, and two end nodes (`done`, reached from every node of the last
layer, and `blocked`, reached from some routers). Every node is reachable and
reaches an end node, so every agentproofx check passes: the timings are of a
clean graph (failing checks add one BFS per finding for witness paths).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from agentproof import verify
from agentproof.graph.model import AgentGraph, EdgeKind, GraphEdge, GraphNode, NodeKind, graph_from_dict

try:
    from importlib.metadata import version as _dist_version

    APX_VERSION = _dist_version("agentproofx")
except Exception:  # noqa: BLE001 - only for the report
    APX_VERSION = "unknown"

DEFAULT_SIZES = (1000, 5000, 20000)
SENSITIVE_TOOLS = ("wire_funds", "delete_records")

KIND_MAP = {
    "agent": NodeKind.LLM,
    "llm": NodeKind.LLM,
    "tool": NodeKind.TOOL,
    "human": NodeKind.HUMAN,
    "router": NodeKind.ROUTER,
    "end": NodeKind.EXIT,
    "exit": NodeKind.EXIT,
    "terminal": NodeKind.EXIT,
    "flow": NodeKind.SUBGRAPH,
    "subgraph": NodeKind.SUBGRAPH,
    "entry": NodeKind.ENTRY,
    "start": NodeKind.ENTRY,
}
FANOUT_KINDS = {"parallel", "map"}


# --------------------------------------------------------------------------
# Generated graph (the neutral JSON shape above)
# --------------------------------------------------------------------------


def generate(n: int, seed: int = 2024) -> dict[str, Any]:
    """A layered workflow DAG of exactly `n` nodes (n >= 8), with branches,
    parallel fan-out/join, human-gated sensitive tools and bounded loops."""
    if n < 8:
        raise ValueError("generate needs n >= 8")
    rng = random.Random(seed)
    nodes: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    budget = n - 2  # two end nodes at the end

    def add(kind: str, **extra: Any) -> str:
        nid = f"n{len(nodes)}"
        nodes.append({"id": nid, "kind": kind, **extra})
        return nid

    def link(src: str, dst: str) -> None:
        # a router's single way out into a one-node layer is its `else`.
        edges.append({"from": src, "to": dst, "else": True} if src in routers else {"from": src, "to": dst})

    layers: list[list[str]] = [[add("agent")]]
    routers: set[str] = set()
    while len(nodes) < budget:
        prev = layers[-1]
        left = budget - len(nodes)
        roll = rng.random()
        if roll < 0.03 and left >= 5:
            # parallel fan-out into 2-3 branches, closed by a join.
            width = min(rng.randint(2, 3), left - 2)
            p = add("parallel")
            for src in prev:
                link(src, p)
            branches = [add(rng.choice(("agent", "agent", "tool"))) for _ in range(width)]
            for b in branches:
                edges.append({"from": p, "to": b})
            j = add("join")
            for b in branches:
                edges.append({"from": b, "to": j})
            layers.append([p])
            layers.append(branches)
            layers.append([j])
            continue
        if roll < 0.05 and left >= 2:
            # a human approval in front of a sensitive tool (its only way in).
            h = add("human")
            for src in prev:
                link(src, h)
            t = add("tool", tools=[rng.choice(SENSITIVE_TOOLS)], sensitive=True)
            edges.append({"from": h, "to": t})
            layers.append([h])
            layers.append([t])
            continue
        # an ordinary layer of 1-4 agent / tool / router nodes.
        width = min(rng.randint(1, 4), left)
        layer = []
        for _ in range(width):
            r = rng.random()
            kind = "router" if r < 0.11 else "tool" if r < 0.39 else "agent"
            nid = add(kind)
            if kind == "router":
                routers.add(nid)
            layer.append(nid)
        # every node of the new layer gets a predecessor in the previous one,
        # every node of the previous layer a successor in the new one.
        succ: dict[str, list[str]] = {src: [] for src in prev}
        for dst in layer:
            succ[rng.choice(prev)].append(dst)
        for src in prev:
            if not succ[src]:
                succ[src].append(rng.choice(layer))
            if len(layer) > 1 and rng.random() < 0.25:  # an extra branch
                extra = rng.choice(layer)
                if extra not in succ[src]:
                    succ[src].append(extra)
        for src in prev:
            outs = succ[src]
            if src in routers:
                # a router: every way out is guarded, the last one is `else`.
                if len(outs) == 1 and len(layer) > 1:
                    other = rng.choice([x for x in layer if x != outs[0]])
                    outs.append(other)
                for k, dst in enumerate(outs):
                    if k == len(outs) - 1:
                        edges.append({"from": src, "to": dst, "else": True})
                    else:
                        edges.append({"from": src, "to": dst, "guard": f"{src}.choice == {k}"})
            else:
                for k, dst in enumerate(outs):
                    edge = {"from": src, "to": dst}
                    if len(outs) > 1 and k < len(outs) - 1:
                        edge["guard"] = f"{src}.score > 0.{k + 5}"
                    edges.append(edge)
        layers.append(layer)

    done = f"n{len(nodes)}"
    nodes.append({"id": done, "kind": "end"})
    blocked = f"n{len(nodes)}"
    nodes.append({"id": blocked, "kind": "end", "status": "failure"})
    for src in layers[-1]:
        link(src, done)
    # some routers may also end the run (guarded, before their `else`).
    for r in sorted(routers, key=lambda x: int(x[1:]))[::7]:
        edges.append({"from": r, "to": blocked, "guard": f"{r}.blocked"})
    # a few bounded back edges: from a plain node to one 1-3 layers earlier.
    # Targets are never sensitive tools, so every way into those stays gated.
    plain = {x["id"] for x in nodes if x["kind"] in ("agent", "tool") and not x.get("sensitive")}
    candidates = [(i, nid) for i, layer in enumerate(layers) for nid in layer if nid in plain]
    for _ in range(max(2, n // 250)):
        for _attempt in range(50):
            li, src = rng.choice(candidates)
            if li < 2:
                continue
            back = [t for t in layers[li - rng.randint(1, min(3, li))] if t in plain]
            if back:
                edges.append({"from": src, "to": rng.choice(back), "guard": f"{src}.retry", "loop_bound": rng.randint(2, 5)})
                break
    assert len(nodes) == n, (len(nodes), n)
    return {"name": f"generated_{n}", "start": nodes[0]["id"], "sensitive_tools": list(SENSITIVE_TOOLS), "nodes": nodes, "edges": edges}


# --------------------------------------------------------------------------
# Neutral JSON -> agentproofx AgentGraph
# --------------------------------------------------------------------------


def to_agent_graph(spec: dict[str, Any]) -> tuple[AgentGraph, set[str] | None]:
    """Convert the neutral graph JSON (or agentproofx's own dict format) into
    an AgentGraph and the set of sensitive tool names (None when there is none)."""
    if "entry_id" in spec:  # already agentproofx's graph_to_dict format
        sens = spec.get("sensitive_tools")
        return graph_from_dict(spec), (set(sens) if sens else None)

    raw_nodes = spec["nodes"]
    sensitive = set(spec.get("sensitive_tools", ()))
    kinds: dict[str, str] = {}
    gnodes: list[GraphNode] = []
    for raw in raw_nodes:
        nid = str(raw["id"])
        kind = str(raw.get("kind", "agent")).lower()
        kinds[nid] = kind
        apx_kind = KIND_MAP.get(kind, NodeKind.PASSTHROUGH)
        tools = tuple(raw.get("tools", ()))
        if apx_kind is NodeKind.TOOL and not tools:
            tools = (nid,)
        if raw.get("sensitive") and apx_kind is NodeKind.TOOL:
            sensitive.update(tools)
        gnodes.append(GraphNode(id=nid, kind=apx_kind, label=str(raw.get("label", nid)), tools=tools))

    start = spec.get("start")
    if start is None:
        start = next((x["id"] for x in raw_nodes if str(x.get("kind", "")).lower() in ("entry", "start")), raw_nodes[0]["id"])

    gedges: list[GraphEdge] = []
    gate_nodes = 0
    for raw in spec["edges"]:
        src = str(raw.get("from", raw.get("source")))
        dst = str(raw.get("to", raw.get("target")))
        bound = raw.get("loop_bound")
        guard = raw.get("guard") or raw.get("condition") or ""
        is_else = bool(raw.get("else"))
        if bound is not None:
            ekind = EdgeKind.LOOP
        elif guard or is_else:
            ekind = EdgeKind.CONDITIONAL
        elif kinds.get(src) in FANOUT_KINDS:
            ekind = EdgeKind.PARALLEL
        else:
            ekind = EdgeKind.DIRECT
        cond = "else" if is_else and not guard else str(guard)
        meta = (("loop_bound", int(bound)),) if bound is not None else ()
        gate = raw.get("gate")
        if gate:
            # agentproofx gates are HUMAN nodes: split the edge.
            gate_nodes += 1
            hid = f"gate:{gate}:{gate_nodes}"
            gnodes.append(GraphNode(id=hid, kind=NodeKind.HUMAN, label=str(gate)))
            gedges.append(GraphEdge(source=src, target=hid, kind=ekind, condition=cond, metadata=meta))
            gedges.append(GraphEdge(source=hid, target=dst, kind=EdgeKind.CONDITIONAL, condition="PASS"))
        else:
            gedges.append(GraphEdge(source=src, target=dst, kind=ekind, condition=cond, metadata=meta))

    exits = tuple(n.id for n in gnodes if n.kind is NodeKind.EXIT)
    graph = AgentGraph(
        name=str(spec.get("name", "flow_bench")),
        framework="flow",
        nodes=tuple(gnodes),
        edges=tuple(gedges),
        entry_id=str(start),
        exit_ids=exits,
    )
    return graph, (sensitive or None)


# --------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------


def timed(fn, runs: int) -> tuple[float, float, float, Any]:
    """Median wall ms, minimum wall ms and median process-CPU ms of `runs`
    calls, and the last result. The CPU time is the steadier number on a
    machine shared with other work."""
    wall: list[float] = []
    cpu: list[float] = []
    result = None
    for _ in range(runs):
        gc.collect()
        c0 = time.process_time()
        t0 = time.perf_counter()
        result = fn()
        wall.append((time.perf_counter() - t0) * 1000.0)
        cpu.append((time.process_time() - c0) * 1000.0)
    return statistics.median(wall), min(wall), statistics.median(cpu), result


def bench(spec: dict[str, Any], runs: int, label: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    graph, sensitive = to_agent_graph(spec)
    build_ms = (time.perf_counter() - t0) * 1000.0

    ms, ms_min, cpu_ms, report = timed(lambda: verify(graph, require_human=True, sensitive_tools=sensitive), runs)
    ms_core, _, cpu_ms_core, _ = timed(lambda: verify(graph, require_human=True), runs)

    checks = report["structural"]["checks"]
    failed = [c["check_id"] for c in checks if not c["passed"]]
    print(
        f"[{label}] {len(graph.nodes)} nodes, {len(graph.edges)} edges: "
        + ", ".join(f"{c['check_id']}={'PASS' if c['passed'] else 'FAIL'}" for c in checks),
        file=sys.stderr,
    )
    return {
        "tool": "agentproofx",
        "nodes": len(spec.get("nodes", ())),
        "ms": round(ms, 3),
        "ms_min": round(ms_min, 3),
        "cpu_ms": round(cpu_ms, 3),
        "ms_core": round(ms_core, 3),
        "cpu_ms_core": round(cpu_ms_core, 3),
        "ms_build": round(build_ms, 3),
        "apx_nodes": len(graph.nodes),
        "edges": len(graph.edges),
        "runs": runs,
        "checks": [c["check_id"] for c in checks],
        "failed": failed,
        "version": APX_VERSION,
        "input": label,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("graphs", nargs="*", help="graph JSON files (default: generate)")
    ap.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="node counts to generate")
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--runs", type=int, default=5, help="timed runs per graph (median reported)")
    ap.add_argument("--emit-dir", help="write each generated graph here as JSON")
    args = ap.parse_args()

    if args.graphs:
        jobs = [(p, json.loads(Path(p).read_text())) for p in args.graphs]
    else:
        jobs = []
        for n in (int(s) for s in args.sizes.split(",") if s.strip()):
            spec = generate(n, args.seed)
            if args.emit_dir:
                out = Path(args.emit_dir)
                out.mkdir(parents=True, exist_ok=True)
                (out / f"graph_{n}.json").write_text(json.dumps(spec))
            jobs.append((f"generated:{n}:seed={args.seed}", spec))

    for label, spec in jobs:
        print(json.dumps(bench(spec, args.runs, label)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
