"""Issue 56: matcher passes the generator was not written against (tests/passes/matchers.py), in the
shapes Inductor's, Torch-TensorRT's and vLLM's passes match edges: each correct twin's rewrite (not
dead-code removal) fires in at least a tenth of 200 graphs and holds, and each buggy twin is caught,
at seeds 0-2 (make sweep; make test verifies a spread of them at seed 0). The measured table is
docs/fire-rates.md's (scripts/matcher_corpus.py).

Also here: the equal-operands aim holds NaN and inf (``sub(x, x) -> zeros_like(x)`` is caught at
seeds 0-5 with the default focus), and a pass whose only change is dead-code removal is no verdict.
"""

from __future__ import annotations

import importlib
import os
import sys

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from conformance import check, load_pass, verify
from conformance.suite._tiers import spread
from tests.passes.matchers import CORPUS
from tests.passes.structures import STRUCTURES, remove_identity_arithmetic, remove_identity_arithmetic_though_written_later

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
GRAPHS = 200
FLOOR = GRAPHS // 10  # a rewrite in at least a tenth of the graphs


@pytest.fixture(scope="module", autouse=True)
def _examples_importable():
    """The user-op matchers live in examples/ (their ops registered by examples/mylib_rules.py)."""
    added = EXAMPLES not in sys.path
    if added:
        sys.path.insert(0, EXAMPLES)
    yield
    if added:
        sys.path.remove(EXAMPLES)


def _verify(target: str, name: str, seed: int, examples: int = GRAPHS):
    m = CORPUS.get(name) or STRUCTURES[name]
    return verify(target, ir=m.ir, graphs=m.graphs, ops=m.ops, max_examples=examples, seed=seed, device="cpu",
                  shrink=False, repro_dir=None)


def test_the_corpus_is_thirty_matchers_each_with_a_correct_and_a_buggy_twin():
    assert len(CORPUS) >= 30
    seen = set()
    for name, m in CORPUS.items():
        assert m.correct != m.buggy and not {m.correct, m.buggy} & seen, name
        seen |= {m.correct, m.buggy}
        for target in (m.correct, m.buggy):
            module = target.split(":")[0]
            if not module.startswith("tests."):
                importlib.import_module(module)  # (examples/ on the path: the fixture)
            assert load_pass(target).fn is not None, target
        assert m.bug and m.shape, name
    # custom-op fusions and no-op eliminations among them, as the issue asks
    assert any(m.ops for m in CORPUS.values()) and sum("noop" in n for n in CORPUS) >= 3


def _check(name: str, seed: int, examples: int = GRAPHS) -> None:
    m = CORPUS.get(name) or STRUCTURES[name]
    good = _verify(m.correct, name, seed, examples)
    assert good.ok, f"{name}: the correct twin is flagged: " + "; ".join(f"{v.property}: {v.headline}"
                                                                         for v in good.violations)
    assert good.rewrites >= examples // 10, f"{name} at seed {seed}: {good.fire_text}; focus {good.focus.get('edges')}"
    bad = _verify(m.buggy, name, seed, examples)
    assert bad.violations, f"{name} at seed {seed}: the buggy twin ({m.bug}) is not caught: {bad.fire_text}"


# Where the generator falls short of issue 56's bar, as measured (docs/fire-rates.md): a strict xfail
# each, so the day it meets the bar the test says so and the row goes. The reason is the structure the
# draws lack, not the pass's: every correct twin holds at every seed.
SHORT = {
    # measured with near misses on (verify's default, two a rewritten graph), on a 2-core Intel Xeon
    ("softmax-decomposition", 2): "the buggy twin not caught in 200 (29 rewritten): of its 68 softmaxes, 6 read a "
                                  "row of finite values that overflows exp, all float64 and masked downstream",
}


def _params(seeds, keep=None, corpus=CORPUS, first=None) -> list:
    """``(name, seed)`` params; ``keep``: of ``spread``'s cases run everywhere (the others ``sweep``),
    spread from ``first`` where given."""
    names = list(corpus)
    # make test's slice: of the names that meet the bar at the first seed (a strict xfail there would
    # test only that the generator still falls short)
    meeting = [name for name in names if (name, seeds[0]) not in SHORT]
    meeting = sorted(meeting, key=lambda name: name != first)
    everywhere = {p.values[0] for p in spread(meeting, keep) if not p.marks} if keep is not None else set()
    out = []
    for seed in seeds:
        for name in names:
            marks = [] if name in everywhere else [pytest.mark.sweep]
            out.append(pytest.param(name, seed, marks=marks + _short(name, seed), id=f"{name}-{seed}"))
    return out


def _short(name: str, seed: int) -> list:
    """A strict xfail with SHORT's reason where ``(name, seed)`` falls short of the bar, else none."""
    return [pytest.mark.xfail(strict=True, reason=f"generator: {SHORT[name, seed]}")] if (name, seed) in SHORT else []


# make test: one of the corpus at seed 0 (a pair is 4-20 s of CPU with its discovery on the 2-core AMD
# EPYC: three of them were a tenth of a fresh clone's make test; noop-slice, 8 s, not bmm-transposed-
# operand, 19 s); make sweep: the others at seed 0, and all at seeds 1 and 2.
@pytest.mark.parametrize("name, seed", [*_params([0], keep=1, first="noop-slice"), *_params([1, 2])])
def test_a_matcher_fires_holds_and_its_bug_is_caught(name, seed):
    _check(name, seed)


def test_the_structures_corpus_names_a_bug_shape_for_each_structure_of_item_5():
    """tests/passes/structures.py: a pass for each structure issue 56 item 5 draws, its twins distinct
    and loadable."""
    assert set(STRUCTURES) >= {"cse-scalar-type", "cse-across-write", "noop-then-written", "reinplace-expanded",
                               "view-dtype-reorder", "silu-diamond", "abs-square-complex"}
    for name, m in STRUCTURES.items():
        assert m.correct != m.buggy and m.bug and m.shape, name
        assert load_pass(m.correct).fn is not None and load_pass(m.buggy).fn is not None, name


# The passes whose bugs need a structure drawn around their edge (item 5): each correct twin fires in a
# tenth of 200 graphs and holds, each buggy twin is caught, at seeds 0-2; make test runs one at seed 0.
# (make test: silu-diamond, the cheapest of the four at the bar at seed 0: 9 s of CPU, the others 19-30)
@pytest.mark.parametrize("name, seed", [*_params([0], keep=1, corpus=STRUCTURES, first="silu-diamond"),
                                        *_params([1, 2], corpus=STRUCTURES)])
def test_a_pass_whose_bug_needs_a_structure_around_its_edge_is_caught(name, seed):
    _check(name, seed)


# x - x is 0 only where x is finite: discovery finds the pass acts on sub(x, x) alone (Focus.pairs),
# and focus draws the pair two times in three, its x holding NaN or inf. Caught at graphs 4, 3, 1, 6,
# 15 and 1 of seeds 0-5 (before pairs: 4 and 24 of 200 graphs rewrote sub(x, x) at seeds 0 and 3, none
# caught). make test: seed 1; make sweep: all six.
@pytest.mark.parametrize("seed", [pytest.param(s, marks=[] if s == 1 else [pytest.mark.sweep]) for s in range(6)])
def test_sub_of_a_value_and_itself_to_zeros_is_caught_at_seeds_0_to_5(seed):
    result = _verify(CORPUS["sub-self"].buggy, "sub-self", seed)
    assert [v.property for v in result.violations] == ["values"], (seed, result.fire_text)


def test_the_no_op_removals_twins_leave_a_complex_product_by_one():
    """x * 1 is not x for a complex x where a part is infinite (by 1 + 0j: NaN in the other part, as
    torch's remove_no_ops finding has it): noop-then-written's twins leave it, and still remove a
    real x * 1 and a complex x + 0 (the search found the correct twin wrong on a complex x)."""
    aten = torch.ops.aten

    def graph(x):
        y = aten.neg.default(x)
        return aten.neg.default(aten.mul.Tensor(y, 1)), aten.neg.default(aten.add.Tensor(y, 0))

    for dtype, kept in ((torch.complex64, ["neg", "mul", "neg", "neg"]), (torch.float32, ["neg", "neg", "neg"])):
        x = torch.tensor([complex(float("inf"), 1.0), 2.0], dtype=dtype) if dtype.is_complex else torch.randn(2)
        for twin in (remove_identity_arithmetic, remove_identity_arithmetic_though_written_later):
            verdict = check(twin, make_fx(graph)(x), (x,))
            assert verdict.ok, (dtype, [v.message for v in verdict.violations])
            left = [n.target.__name__.split(".")[0] for n in twin(make_fx(graph)(x)).graph.nodes if n.op == "call_function"]
            assert left == kept, (dtype, left)
