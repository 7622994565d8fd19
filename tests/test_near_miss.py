"""Near misses of a rewrite (conformance/search/near_miss.py, ``verify(near_misses=K)``): variants of a graph
the pass rewrote, one scalar argument of a node the rewrite removed moved. A matcher that forgets to
compare a dim is caught by them where 200 drawn graphs missed it, its correct twin still holds, and
the graph the variants come from is never changed."""

from __future__ import annotations

import torch
import torch.fx as fx

from conformance import verify
from conformance.search.near_miss import near_misses
from strategies import GraphCase, attach_meta
from strategies._tensors import Layout

aten = torch.ops.aten


def _case(build, *inputs) -> GraphCase:
    g = fx.Graph()
    xs = [g.placeholder(f"x{i}") for i in range(len(inputs))]
    g.output(build(g, *xs))
    gm = attach_meta(fx.GraphModule(torch.nn.Module(), g), tuple(t.clone() for t in inputs))
    recipes = tuple((t, Layout()) for t in inputs)
    return GraphCase(gm, tuple(t.clone() for t in inputs), frozenset(), recipes)


def _moved(case, variants):
    """Each variant's (target, args, kwargs) that differ from the graph's."""
    before = {n.name: repr((n.args, n.kwargs)) for n in case.gm.graph.nodes}
    return [(n.target, n.args, dict(n.kwargs)) for v in variants for n in v.gm.graph.nodes
            if n.op == "call_function" and repr((n.args, n.kwargs)) != before[n.name]]


def test_variants_move_one_argument_of_a_removed_node_and_leave_the_graph_alone():
    """select(unsqueeze(x, 1), 1, 0), the select removed: its dim goes to the others of rank 3 and by one,
    its index by one (-1 and 1, where 1 is out of range for the size-1 dim: no graph), never the kept
    unsqueeze; each variant runs, has meta for its own values, and the graph keeps its code."""
    case = _case(lambda g, x: (g.call_function(aten.select.int, (g.call_function(aten.unsqueeze.default, (x, 1)), 1, 0)),),
                 torch.randn(3, 2))
    code = case.gm.code
    after = ("def forward(self, x0):\n    unsqueeze_default = torch.ops.aten.unsqueeze.default(x0, 1)\n"
             "    alias_default = torch.ops.aten.alias.default(x0)\n")  # the select gone, the unsqueeze kept
    variants = near_misses(case, after, 20)
    moved = _moved(case, variants)
    assert moved and all(target is aten.select.int for target, _, _ in moved), moved
    dims = sorted(args[1] for _, args, _ in moved if args[2] == 0)
    assert dims == [-3, -2, -1, 0, 2], dims  # every other dim of the rank-3 operand
    assert sorted(args[2] for _, args, _ in moved if args[1] == 1) == [-1]  # index 1 of a size-1 dim: refused
    for v in variants:
        out = v.gm(*v.fresh_inputs())[0]
        assert next(n for n in v.gm.graph.nodes if n.target is aten.select.int).meta["val"].shape == out.shape
    assert case.gm.code == code
    assert near_misses(case, after, 0) == [] and near_misses(case, code, 5) == []  # nothing removed: no variant
    assert [v.gm.code for v in near_misses(case, after, 3)] == [v.gm.code for v in variants[:3]]  # by the code


def test_a_number_goes_to_its_other_type_and_an_alpha_is_given():
    case = _case(lambda g, x, y: (g.call_function(aten.add.Tensor, (g.call_function(aten.mul.Tensor, (x, 2)), y)),),
                 torch.arange(4), torch.arange(4))
    """mul(x, 2) + y, both removed: the 2 by one and as 2.0 (a Scalar), the add given alpha=2."""
    moved = _moved(case, near_misses(case, "def forward(self, x0, x1):\n    return (x0,)\n", 20))
    assert sorted(repr(a[1]) for t, a, _ in moved if t is aten.mul.Tensor) == ["1", "2.0", "3"], moved
    assert [k for t, _, k in moved if t is aten.add.Tensor] == [{"alpha": 2}], moved


def test_a_matcher_forgetting_its_dim_check_is_caught_by_near_misses_and_its_twin_holds():
    """The matcher corpus's select-of-unsqueeze at seed 1: its buggy twin, rewriting select(unsqueeze(x, d),
    d', 0) whatever d', was not caught in 200 graphs (every graph where it differed selected another
    size-1 dim); with two near misses a rewritten graph, at graph 8 of the same 30 graphs that miss it
    without them (near_misses=0; two is verify's default). Its correct twin holds on them (12 rewritten;
    61 of 200, holding, in the sweep's measure: docs/fire-rates.md)."""
    options = dict(max_examples=30, seed=1, device="cpu", shrink=False, repro_dir=None)
    buggy = "tests.passes.matchers:select_of_unsqueeze_any_dims"
    assert verify(buggy, near_misses=0, **options).ok  # not caught without them
    bad = verify(buggy, **options)  # the default: two
    assert [v.property for v in bad.violations][:1] in (["values"], ["validity"]), bad.violations
    good = verify("tests.passes.matchers:select_of_unsqueeze", **options)
    assert good.ok and good.rewrites >= 6, (good.violations, good.fire_text)


def test_near_misses_must_be_a_count_of_variants():
    import pytest

    from conformance import UsageError

    for bad in (-1, True, 1.5, "2"):
        with pytest.raises(UsageError, match="near_misses="):
            verify(lambda gm: gm, near_misses=bad, max_examples=1, device="cpu", repro_dir=None)
