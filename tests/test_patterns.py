"""Pattern bugs (tests/passes/patterns.py): rewrites that need an op chain, a constant or a dtype
to fire. Each planted bug is caught at seeds 0-5 with the default budget (200 graphs), and
its correct twin of the same shape is never flagged and is not vacuous (it fired). The seeds and
budgets were measured on CPU draws (a CUDA machine draws other graphs), so the searches say
device="cpu".

make test runs every bug at one seed (``MAKE_TEST_SEED``), one twin at seed 0 on ``TWIN_BUDGET``
graphs and one of the two chain bugs' focus comparisons; make sweep (and make nightly) every bug and every twin at seeds
0-5 on 200 graphs, and the other comparison."""

from __future__ import annotations

import functools

import pytest

from conformance import verify
from conformance.suite._tiers import spread, spread_over_seeds
from tests.passes.patterns import PATTERN_OPTIONS, PATTERNS

# Issue 31's seed sweep: make test runs one seed per bug, make sweep (and make nightly) seeds 0-5; every
# bug is caught and every twin is quiet and fires at each (docs/search-measurements.md has the figures).
# cast_round_trip at seed 1, missed since issue 15's catalog (a strict xfail here), is caught since
# issue 31's edges and aimed values: in 40 graphs.
#
# make test's seed is 0 except where seed 0 takes the most graphs of the six (measured, 2-core AMD
# EPYC, torch 2.13.0+cpu: the graph each seed 0-5 caught the bug at, out of 200): square 57, 8, 62,
# 9, 35, 9 (seed 1); integral_scalar 39, 16, 1, 2, 5, 4 (seed 4: the pass changed 5 graphs by then);
# fmax 29, 3, 8, 25, 4, 5 (seed 4). At seed 0: cast_round_trip 15, log_exp 5, repair_first 6,
# where_compare 5.
MAKE_TEST_SEED = {"square": 1, "integral_scalar": 4, "fmax": 4}


def _bug_params():
    return [pytest.param(name, seed, id=f"{name}-{seed}",
                         marks=() if seed == MAKE_TEST_SEED.get(name, 0) else pytest.mark.sweep)
            for name in sorted(PATTERNS) for seed in range(6)]


@functools.lru_cache(maxsize=None)
def _bug_search(name: str, seed: int):
    """The planted bug's search (shared: the chain test reads log_exp's at seed 0)."""
    return verify(PATTERNS[name][0], seed=seed, repro_dir=None, device="cpu", shrink=False, **PATTERN_OPTIONS[name])


@pytest.mark.parametrize("name, seed", _bug_params())
def test_pattern_bug_is_caught(name, seed):
    result = _bug_search(name, seed)
    assert not result.ok, f"{name}: no counterexample in {result.examples} graphs (seed {seed})"
    assert result.examples <= 200 and result.changed >= 1


# make test's twins search the fewest graphs where each still fires past the threshold of 3 at seed 0
# (measured, 2-core AMD EPYC, torch 2.13.0+cpu; every twin quiet): cast_round_trip 60 (it changed 13 of
# 60, 5 of 50, 2 of 30), integral_scalar 15 (11 of 15, 44 of 60), repair_first 30 (5 of 30, 9 of 60, 1 of
# 20). make sweep searches the default 200 at every seed, seed 0 too.
TWIN_BUDGET = {"cast_round_trip": 60, "integral_scalar": 15, "repair_first": 30}


def _twin_params():
    """``(name, seed, budget)``: one twin at seed 0 on ``TWIN_BUDGET[name]`` graphs runs everywhere (the
    bug tests run every pattern's search); every twin at every seed on 200 graphs is ``sweep``."""
    out = []
    for p in spread_over_seeds(sorted(PATTERNS), 1, range(6)):
        name, seed = p.values
        if not p.marks:
            out.append(pytest.param(name, seed, TWIN_BUDGET[name], id=f"{p.id}-{TWIN_BUDGET[name]}"))
        out.append(pytest.param(name, seed, 200, id=p.id, marks=pytest.mark.sweep))
    return out


@pytest.mark.parametrize("name, seed, budget", _twin_params())
def test_correct_twin_is_not_flagged_and_fires(name, seed, budget):
    result = verify(PATTERNS[name][1], seed=seed, max_examples=budget, repro_dir=None, device="cpu", shrink=False,
                    **PATTERN_OPTIONS[name])
    assert result.ok, "\n".join(f"{v.property}: {v.message}\n{v.graph_before}" for v in result.violations)
    assert result.examples == budget
    assert not result.vacuous and result.changed >= 3, f"{name}: the twin changed {result.changed} of {budget} graphs"


# the same comparison for two chains: make test checks log_exp, make sweep where_compare too. The plain
# search draws 40 graphs (100 before; it changed none of 40 or of 100 at seed 0 for log_exp, measured),
# the focused one is the bug test's search at seed 0 (caught at graph 5, the pass changed 4 of 5).
@pytest.mark.parametrize("name", spread(["log_exp", "where_compare"], 1))
def test_the_chain_bugs_need_focus(name):
    """The plain generator (focus none) changed none of 200 graphs for log_exp, cast_round_trip,
    where_compare and square at seeds 0, 1 and 2 (measured): the reason focus exists. The focused
    search finds the bug, and the share of graphs the pass changes is higher with focus."""
    plain = verify(PATTERNS[name][0], seed=0, max_examples=40, repro_dir=None, device="cpu", shrink=False, focus="none")
    focused = _bug_search(name, 0)
    assert not focused.ok
    assert plain.changed_share < focused.changed_share, (plain.fire_text, focused.fire_text)
