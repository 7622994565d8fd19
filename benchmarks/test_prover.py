"""Prover time: median proof time over a drawn corpus of rewrites (target: <= 20 ms median, no
Unknown at the 10 s limit).

The corpus is declared as data: each kind draws claims the suite proves (replace_floor_div on
drawn floor expressions, torch's sympy simplifications with constant divisors, flat-index
recomposition). Every claim's verdict is checked against what it must be before any time counts.
Run timed with ``make bench``; under ``make test`` each runs once as a smoke test.
"""

from __future__ import annotations

import statistics
import time

import pytest
import sympy
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from torch.utils._sympy import functions as tf

from conformance.symbolic import INERT, prove_equal
from reference_lowering.symbolic import replace_floor_div
from strategies import index_expressions

N_CLAIMS = 60
S0, S1 = sympy.symbols("s0 s1", integer=True, positive=True)
X = sympy.Symbol("x", integer=True)
_LINEAR = st.builds(lambda a, b, c: a * S0 + b * X + c, st.integers(-3, 3), st.integers(-3, 3), st.integers(-9, 9))
_DIV = st.integers(1, 16)


def _floor_claim(inner, d):
    expr = sympy.floor(inner / d)
    return expr, replace_floor_div(expr)


CORPUS = {  # kind -> strategy of (lhs, rhs) claims that are true
    "replace_floor_div": st.builds(_floor_claim, index_expressions(symbols=(S0, S1, X), max_leaves=5), _DIV),
    "torch_floordiv_nested": st.builds(lambda a, b, c: (tf.FloorDiv(tf.FloorDiv(a, b), c),
                                                        INERT["FloorDiv"](INERT["FloorDiv"](a, b), c)),
                                       _LINEAR, _DIV, _DIV),
    "torch_modular_indexing": st.builds(lambda a, b, c: (tf.ModularIndexing(a, b, c),
                                                         INERT["ModularIndexing"](a, b, c)), _LINEAR, _DIV, _DIV),
}


def _corpus(kind: str) -> list:
    claims = []

    @settings(max_examples=N_CLAIMS, database=None, deadline=None, phases=[Phase.generate], derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(CORPUS[kind])
    def draw(claim):
        claims.append(claim)

    draw()
    return claims


@pytest.mark.parametrize("kind", CORPUS)
def test_median_proof_time(benchmark, kind):
    claims = _corpus(kind)
    times, verdicts = [], {}

    def run():
        times.clear()
        verdicts.clear()
        for lhs, rhs in claims:
            start = time.perf_counter()
            result = prove_equal(lhs, rhs, timeout_ms=10_000)
            times.append((time.perf_counter() - start) * 1e3)
            verdicts[result.verdict] = verdicts.get(result.verdict, 0) + 1

    benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=1)
    assert verdicts == {"proved": len(claims)}, verdicts  # correct first: every claim is true and decided
    ordered = sorted(times)
    median = statistics.median(ordered)
    benchmark.extra_info.update(median_ms=round(median, 2), p90_ms=round(ordered[int(0.9 * len(ordered))], 2),
                                max_ms=round(ordered[-1], 2), claims=len(claims), unknown=0)
    print(f"\n{kind}: {len(claims)} claims, median {median:.2f} ms, p90 {ordered[int(0.9 * len(ordered))]:.2f} ms, "
          f"max {ordered[-1]:.1f} ms, unknown 0")
