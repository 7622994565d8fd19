"""How fast the strategies draw: GraphCases per second, metadata included (target: >= 150/s on one core).

Run timed with ``make bench``; under ``make test`` (``--benchmark-disable``) each runs once, on a tenth
of the cases, as a smoke test.
The figure is what a harness run experiences: Hypothesis' engine, the eager run of every node while
drawing, ``meta['val']`` by fake-tensor propagation, and feature measurement.
"""

from __future__ import annotations

import time

import pytest
import torch
from hypothesis import HealthCheck, Phase, given, settings

from benchmarks import per_round
from strategies import Focus, graphs, shared_fake_mode

N_CASES = 200
SWEEP = {  # declared as data: name -> graphs() options
    "default": dict(max_nodes=12),
    "mutations": dict(max_nodes=12, mutations=True),
    "special-values": dict(max_nodes=12, special_values=True),
    # focus (issue 14): the ops and constants of a log(exp(x)) pass, drawn far more often; it must
    # not cost more than 30% of the draw rate (compare with special-values, which it extends)
    "focus": dict(max_nodes=12, special_values=True,
                  focus=Focus(ops=["aten.log.default", "aten.exp.default"], scalars=(2, 0.5))),
}


def _draw_many(options: dict, n: int) -> dict:
    stats = {"cases": 0, "nodes": 0}

    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate], derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(graphs(**options))
    def draw(case):
        stats["cases"] += 1
        stats["nodes"] += sum(node.op == "call_function" for node in case.gm.graph.nodes)

    start = time.perf_counter()
    draw()
    stats["seconds"] = time.perf_counter() - start
    return stats


@pytest.mark.parametrize("name", SWEEP)
def test_graph_cases_per_second(benchmark, name):
    torch.set_num_threads(1)  # the target is per core
    shared_fake_mode()  # the one-off import of the fake-tensor machinery is not a per-draw cost
    result = {}

    n = per_round(benchmark, N_CASES)

    def run():
        result.update(_draw_many(SWEEP[name], n))

    benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=1)
    assert result["cases"] == n
    rate = result["cases"] / result["seconds"]
    benchmark.extra_info.update(cases_per_second=round(rate, 1),
                                mean_call_nodes=round(result["nodes"] / result["cases"], 2),
                                cases_per_round=n)


# IR modes (issue 16): mutating graphs traced by a pipeline stage's tracer. Fewer cases per round
# than the sweep above: export spends about 0.2 s a graph in run_decompositions().
IR_CASES = {"post-grad": 60, "pre-dispatch": 60, "export": 15, "torch": 60}


@pytest.mark.parametrize("ir", IR_CASES)
def test_ir_graph_cases_per_second(benchmark, ir):
    torch.set_num_threads(1)
    shared_fake_mode()
    options = dict(max_nodes=12, mutations=ir != "torch", ir=ir)  # torch-IR graphs are modules, never mutating
    _draw_many(options, 2)  # the tracer's one-off imports and set-up
    result, n = {}, per_round(benchmark, IR_CASES[ir])

    def run():
        result.update(_draw_many(options, n))

    benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=0)
    assert result["cases"] == n
    benchmark.extra_info.update(cases_per_second=round(result["cases"] / result["seconds"], 1),
                                mean_call_nodes=round(result["nodes"] / result["cases"], 2),
                                cases_per_round=n)
