"""Harness throughput: verified examples per second for the identity pass on 12-node graphs
(target: >= 100/s on one core), and the overhead ratio against bare build + run of the same graphs.

The draw loops draw the same derandomized graphs with the same Hypothesis settings; "bare" runs
each drawn graph once, "verified" runs the full default check (validity incl. meta['val'], values,
mutations, aliasing) through ``Checker``. "check" times the check alone on those graphs drawn
beforehand: the harness's own cost, without the strategy's (which test_strategies.py tracks).
Run timed with ``make bench``; under ``make test`` each runs once, on a tenth of the cases, as a smoke test. Correctness
first: every verified example must pass.
"""

from __future__ import annotations

import time

import pytest
import torch
from hypothesis import HealthCheck, Phase, given, settings

from benchmarks import per_round
from conformance import load_pass
from conformance.checker import Checker
from strategies import graphs, shared_fake_mode

N_CASES = 200
NODES = 12


def _loop(per_case, n: int) -> dict:
    stats = {"cases": 0, "failed": 0}

    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate], derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(graphs(min_nodes=NODES, max_nodes=NODES, special_values=True))
    def go(case):
        stats["cases"] += 1
        stats["failed"] += not per_case(case)

    start = time.perf_counter()
    go()
    stats["seconds"] = time.perf_counter() - start
    return stats


def _bare(case) -> bool:
    case.gm(*case.fresh_inputs())
    return True


_CHECKER = None


def _verified(case) -> bool:
    return _CHECKER.check(case.gm, case.example_inputs).ok


@pytest.fixture(scope="module")
def rates():
    global _CHECKER
    torch.set_num_threads(1)  # the target is per core
    shared_fake_mode()
    _CHECKER = Checker(load_pass(lambda gm: gm))
    return {}


def test_check_only_examples_per_second(benchmark, rates):
    cases, n = [], per_round(benchmark, N_CASES)
    _loop(lambda case: cases.append(case) or True, n)
    result = {}

    def run():
        start = time.perf_counter()
        result["failed"] = sum(not _verified(case) for case in cases)
        result["seconds"] = time.perf_counter() - start

    benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=1)
    assert len(cases) == n and result["failed"] == 0
    rate = n / result["seconds"]
    benchmark.extra_info.update(examples_per_second=round(rate, 1), nodes=NODES, cases_per_round=n)
    print(f"\nidentity pass, {NODES}-node graphs drawn beforehand: {rate:.1f} checked/s")


@pytest.mark.parametrize("mode", ["bare", "verified"])
def test_examples_per_second(benchmark, rates, mode):
    per_case = _bare if mode == "bare" else _verified
    result, n = {}, per_round(benchmark, N_CASES)

    def run():
        result.update(_loop(per_case, n))

    benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=1)
    assert result["cases"] == n and result["failed"] == 0
    rate = result["cases"] / result["seconds"]
    rates[mode] = rate
    benchmark.extra_info.update(examples_per_second=round(rate, 1), nodes=NODES, cases_per_round=n)
    if mode == "verified" and "bare" in rates:
        benchmark.extra_info["overhead_ratio_vs_bare"] = round(rates["bare"] / rate, 2)
        print(f"\nidentity pass, {NODES}-node graphs: {rate:.1f} verified/s, bare {rates['bare']:.1f}/s, "
              f"overhead x{rates['bare'] / rate:.2f}")
