"""Functionalization throughput: call nodes functionalized per second on 200-node mutating graphs.

``graphs()`` draws at most 64 nodes, so each 200-node program is the disjoint union of four drawn
50-node mutating graphs (in-place ops, writes through views, metadata mutation, input writes,
grad regions), renamed into one graph. Correctness first: each functionalized program must match
the original (outputs and inputs after the run) before anything is timed. Run timed with
``make bench``; under ``make test`` it runs once, on one program, as a smoke test.
"""

from __future__ import annotations

import time

import pytest
import torch
import torch.fx as fx
from hypothesis import HealthCheck, Phase, given, settings

from reference_lowering.functionalize import functionalize
from reference_lowering.functionalize._storage import copies_sharing_storage
from strategies import graphs

N_PROGRAMS = 4
PARTS, PART_NODES = 4, 50


def _union(cases) -> tuple:
    """One GraphModule computing every case side by side: (gm, inputs)."""
    g, root, inputs, outputs = fx.Graph(), torch.nn.Module(), [], []
    for i, case in enumerate(cases):
        env = {}
        for node in case.gm.graph.nodes:
            if node.op == "placeholder":
                env[node] = g.placeholder(f"p{i}_{node.name}")
            elif node.op == "get_attr":
                name = f"c{i}_{node.target}"
                root.register_buffer(name, getattr(case.gm, node.target).clone())
                env[node] = g.get_attr(name)
            elif node.op == "output":
                outputs.extend(env[a] if isinstance(a, fx.Node) else a for a in node.args[0])
            else:
                env[node] = g.node_copy(node, lambda a: env[a])
        inputs.extend(case.fresh_inputs())
    g.output(tuple(outputs))
    return fx.GraphModule(root, g), tuple(inputs)


def _programs(n: int) -> list:
    parts = []

    @settings(max_examples=n * PARTS, database=None, deadline=None, phases=[Phase.generate],
              derandomize=True, suppress_health_check=list(HealthCheck))
    @given(graphs(mutations=True, min_nodes=PART_NODES, max_nodes=PART_NODES))
    def draw(case):
        parts.append(case)

    draw()
    return [_union(parts[i:i + PARTS]) for i in range(0, len(parts), PARTS)]


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return a.shape == b.shape and a.stride() == b.stride() and torch.equal(a.nan_to_num(), b.nan_to_num())
    return a == b


@pytest.fixture(scope="module")
def programs(pytestconfig):
    # a smoke run (make test: --benchmark-disable) times nothing: one program shows it runs and is correct
    # (drawing the four took 5.7 s of the run on the 2-core AMD EPYC)
    torch.set_num_threads(1)
    found = _programs(1 if pytestconfig.getoption("benchmark_disable") else N_PROGRAMS)
    for gm, inputs in found:  # correct before timed
        out = functionalize(gm, inputs)  # specialised to the inputs' layouts: called with copies keeping them
        ours, eager = copies_sharing_storage(inputs), copies_sharing_storage(inputs)
        assert all(_same(a, b) for a, b in zip(out(*ours), gm(*eager)))
        assert all(_same(a, b) for a, b in zip(ours, eager))
    return found


def test_nodes_functionalized_per_second(benchmark, programs):
    nodes = sum(sum(n.op == "call_function" for n in gm.graph.nodes) for gm, _ in programs)
    result = {}

    def run():
        start = time.perf_counter()
        for gm, inputs in programs:
            functionalize(gm, inputs)
        result["seconds"] = time.perf_counter() - start

    benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=1)
    rate = nodes / result["seconds"]
    benchmark.extra_info.update(nodes_per_second=round(rate), programs=len(programs),
                                mean_nodes=round(nodes / len(programs), 1))
    print(f"\nfunctionalize: {len(programs)} programs of {nodes / len(programs):.0f} call nodes, {rate:.0f} nodes/s")
