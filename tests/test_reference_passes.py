"""The reference lowering passes on hand-made graphs, one per hazard each pass must avoid.

Every hazard test runs the reference pass (the harness finds nothing) and a planted variant that
ignores the hazard (the harness finds the bug), so each graph is shown to really exercise what it
is named after. The planted variants blind the storage analysis (no writes, no aliasing) or skip
one rule; the last tests show that generated graphs find the blinded analyses too.
"""

from __future__ import annotations

import contextlib
import copy
from unittest import mock

import pytest
import torch

from conformance import check, verify
from strategies import attach_meta
from tests.graphs import build
from reference_lowering import LoweringError
from reference_lowering.passes import (
    common_subexpression_elimination,
    constant_fold,
    eliminate_dead_code,
    remove_detach,
    remove_noop_ops,
    repair_input_as_output,
    view_to_reshape,
)
from reference_lowering.passes import _analysis, _cleanup, _dce_cse, _fold, registry

aten = torch.ops.aten


def ops(gm) -> list:
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def applied(lowering_pass, gm, inputs=()):
    out = lowering_pass(gm, inputs)
    assert out is gm
    return gm


# --- planted variants ----------------------------------------------------------------------------

def _no_writes(gm):
    info = _analysis.analyze(gm)
    info.writes = {}
    return info


class _NoUnion(_analysis.UnionFind):
    def union(self, a, b):
        self.find(a), self.find(b)


def _no_aliasing(gm):
    with mock.patch.object(_analysis, "UnionFind", _NoUnion):
        return _analysis.analyze(gm)


@contextlib.contextmanager
def blind(analysis):
    """Every reference pass sees ``analysis`` instead of the real storage analysis."""
    with contextlib.ExitStack() as stack:
        for module in (_cleanup, _dce_cse, _fold):
            stack.enter_context(mock.patch.object(module, "analyze", analysis))
        yield


def _naive_key(value, position=None, alive=None):
    """CSE's key as a naive pass writes it: Python equality, so 1 == 1.0 == True and 0.0 == -0.0."""
    if isinstance(value, (list, tuple)):
        return tuple(_naive_key(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _naive_key(v)) for k, v in value.items()))
    return value


def _caught(lowering_pass, gm, inputs, planted, **options):
    assert check(lowering_pass, gm, inputs, **options).ok, "the reference pass is flagged"
    with planted:
        verdict = check(lowering_pass, gm, inputs, **options)
    assert not verdict.ok, "the planted variant is not caught on this graph"
    return verdict


# --- common_subexpression_elimination ------------------------------------------------------------

def test_cse_merges_equal_expressions():
    gm = build(1, lambda g, c, x: [c(aten.mul.Tensor, c(aten.add.Tensor, x, 1), c(aten.add.Tensor, x, 1))])
    applied(common_subexpression_elimination, gm)
    assert ops(gm) == [aten.add.Tensor, aten.mul.Tensor]


# (In these graphs the first of the two equal expressions reaches the output through another op: two
# outputs of their own are never merged, so a graph returning both would catch no planted bug.)


def test_cse_never_merges_across_a_write_to_an_argument():
    def body(g, c, x):
        a = c(aten.add.Tensor, x, 1)
        c(aten.add_.Tensor, x, 1)
        return [c(aten.neg.default, a), c(aten.add.Tensor, x, 1)]

    _caught(common_subexpression_elimination, build(1, body), (torch.randn(3),), blind(_no_writes))


def test_cse_never_merges_a_result_written_later():
    def body(g, c, x):
        a, b = c(aten.mul.Tensor, x, 2), c(aten.mul.Tensor, x, 2)
        c(aten.add_.Tensor, a, 1)
        return [a, c(aten.neg.default, b)]

    _caught(common_subexpression_elimination, build(1, body), (torch.randn(3),), blind(_no_writes))


def test_cse_never_merges_across_a_write_through_a_view():
    def body(g, c, x):
        y = c(aten.clone.default, x)
        a = c(aten.neg.default, y)
        c(aten.mul_.Tensor, c(aten.view.default, y, [3]), 2)
        return [c(aten.abs.default, a), c(aten.neg.default, y)]

    _caught(common_subexpression_elimination, build(1, body), (torch.randn(3),), blind(_no_aliasing))


@pytest.mark.parametrize("literals, inputs, options", [
    ((1, 1.0), (torch.arange(3),), {}),  # int + 1 stays int64, int + 1.0 becomes float32
    ((0.0, -0.0), (torch.tensor([-0.0, 1.0]),), {"signed_zeros": True}),  # -0.0 + 0.0 = 0.0
])
def test_cse_literals_compare_by_type_and_bits(literals, inputs, options):
    gm = build(1, lambda g, c, x: [c(aten.neg.default, c(aten.add.Tensor, x, literals[0])),
                                   c(aten.add.Tensor, x, literals[1])])
    _caught(common_subexpression_elimination, gm, inputs, mock.patch.object(_dce_cse, "value_key", _naive_key),
            **options)


def test_cse_never_merges_two_values_outputs_share():
    """Two equal results both returned (or one returned and a view of the other) stay two: merged, the
    outputs would share a storage (what torch's CSE once did, fixed as a bug); one returned and one
    read inside the graph merge."""
    two = build(1, lambda g, c, x: [c(aten.add.Tensor, x, 1), c(aten.add.Tensor, x, 1)])
    assert check(common_subexpression_elimination, copy.deepcopy(two), (torch.randn(3),)).ok
    applied(common_subexpression_elimination, two)
    assert ops(two) == [aten.add.Tensor] * 2
    viewed = build(1, lambda g, c, x: [c(aten.add.Tensor, x, 1), c(aten.view.default, c(aten.add.Tensor, x, 1), [3])])
    applied(common_subexpression_elimination, viewed)
    assert ops(viewed) == [aten.add.Tensor, aten.add.Tensor, aten.view.default]
    inner = build(1, lambda g, c, x: [c(aten.add.Tensor, x, 1), c(aten.neg.default, c(aten.add.Tensor, x, 1))])
    applied(common_subexpression_elimination, inner)
    assert ops(inner) == [aten.add.Tensor, aten.neg.default]


def test_cse_keeps_explicit_copies_apart_and_the_pipeline_is_idempotent():
    """Found by `make conformance`: the default pipeline on (clone(x), abs(x) x3, x) was not
    idempotent. repair_input_as_output (after CSE) adds a second clone(x); a second application's
    CSE merged the two, so two outputs came to share a buffer. Copies are distinct buffers: kept."""
    gm = build(1, lambda g, c, x: [c(aten.clone.default, x), c(aten.clone.default, x)])
    applied(common_subexpression_elimination, gm)
    assert ops(gm) == [aten.clone.default] * 2

    def body(g, c, x):
        return [c(aten.clone.default, x), c(aten.abs.default, x), c(aten.abs.default, x), c(aten.abs.default, x), x]
    verdict = check(registry.apply_lowering_passes, build(1, body), (torch.randn(3),), ensure=["no-input-as-output"],
                    properties=["validity", "values", "mutations", "aliasing", "idempotence"])
    assert verdict.ok, verdict


def test_cse_keeps_random_ops_apart():
    gm = build(1, lambda g, c, x: [c(aten.rand_like.default, x), c(aten.rand_like.default, x)])
    applied(common_subexpression_elimination, gm)
    assert ops(gm) == [aten.rand_like.default] * 2


# --- eliminate_dead_code -------------------------------------------------------------------------

def test_dce_removes_dead_values_and_unobservable_writes():
    def body(g, c, x):
        y = c(aten.clone.default, x)
        c(aten.add_.Tensor, y, 1)  # written, never read again: dead
        c(aten.exp.default, x)
        return [c(aten.mul.Tensor, x, 2)]

    gm = applied(eliminate_dead_code, build(1, body))
    assert ops(gm) == [aten.mul.Tensor]


def test_dce_keeps_a_write_to_an_input():
    gm = build(1, lambda g, c, x: (c(aten.add_.Tensor, x, 1), [c(aten.mul.Tensor, x, 2)])[1])
    _caught(eliminate_dead_code, gm, (torch.randn(3),), blind(_no_writes))


def test_dce_keeps_a_write_read_later_through_another_view():
    def body(g, c, x):
        y = c(aten.clone.default, x)
        c(aten.add_.Tensor, c(aten.view.default, y, [3]), 1)
        return [c(aten.mul.Tensor, y, 2)]

    _caught(eliminate_dead_code, build(1, body), (torch.randn(3),), blind(_no_aliasing))


def test_dce_keeps_grad_mode_switches_and_random_ops():
    def body(g, c, x):
        g.call_function(torch._C._set_grad_enabled, (False,))
        c(aten.rand_like.default, x)
        g.call_function(torch._C._set_grad_enabled, (True,))
        return [c(aten.neg.default, x)]

    gm = applied(eliminate_dead_code, build(1, body))
    assert ops(gm) == [torch._C._set_grad_enabled, aten.rand_like.default, torch._C._set_grad_enabled,
                       aten.neg.default]


# --- constant_fold -------------------------------------------------------------------------------

def _constant_graph(body, value=None):
    def with_c(g, c, x):
        return body(g, c, x, g.get_attr("c"))

    return build(1, with_c, {"c": torch.arange(3.0) if value is None else value})


def test_constant_fold_folds_constant_subgraphs_into_buffers():
    gm = _constant_graph(lambda g, c, x, k: [c(aten.add.Tensor, x, c(aten.exp.default, c(aten.mul.Tensor, k, 2)))])
    assert check(constant_fold, gm, (torch.randn(3),)).ok
    applied(constant_fold, gm)
    assert ops(gm) == [aten.add.Tensor] and not hasattr(gm, "c")
    torch.testing.assert_close(gm._folded_constant_0, torch.arange(3.0).mul(2).exp())


def test_pipeline_removes_dead_writes_before_cse():
    """Found by `make conformance` (idempotence): a dead neg_ into abs(x) kept CSE from merging it
    with a later abs(x); DCE removed the write after CSE, so only a second run merged them."""
    def body(g, c, x):
        a = c(aten.abs.default, x)
        b = c(aten.abs.default, a)
        c(aten.neg_.default, a)
        return [c(aten.abs.default, x), b]
    verdict = check(registry.apply_lowering_passes, build(1, body), (torch.randn(3),),
                    properties=["validity", "values", "mutations", "aliasing", "idempotence"])
    assert verdict.ok, verdict


def test_pipeline_removes_dead_writes_before_folding():
    """Found by `make conformance` (idempotence): a dead add_ into abs(c) kept constant_fold from
    folding it; DCE removed the write after folding, so only a second run folded it."""
    def body(g, c, x, k):
        a = c(aten.abs.default, k)
        out = c(aten.mul.Tensor, c(aten.view.default, a, [3]), x)
        c(aten.add_.Tensor, a, k)
        return [out]
    verdict = check(registry.apply_lowering_passes, _constant_graph(body), (torch.randn(3),),
                    properties=["validity", "values", "mutations", "aliasing", "idempotence"])
    assert verdict.ok, verdict


def test_constant_fold_names_buffers_in_graph_order_every_time():
    """Found by `make conformance` (determinism): the folded buffers were numbered in the order of a
    set of nodes, so two runs on the same graph could name them differently."""
    def body(g, c, x, k):
        return [c(aten.cat.default, [x, c(aten.neg.default, k), c(aten.exp.default, k), c(aten.abs.default, k)])]
    for _ in range(10):
        gm = applied(constant_fold, _constant_graph(body))
        folded = [n.target for n in gm.graph.nodes if n.op == "get_attr"]
        assert folded == ["_folded_constant_0", "_folded_constant_1", "_folded_constant_2"]
        torch.testing.assert_close(gm._folded_constant_0, torch.arange(3.0).neg())
        torch.testing.assert_close(gm._folded_constant_2, torch.arange(3.0).abs())


def test_constant_fold_never_folds_a_mutated_constant():
    def body(g, c, x, k):
        c(aten.add_.Tensor, k, 1)
        return [c(aten.add.Tensor, x, c(aten.mul.Tensor, k, 2))]

    _caught(constant_fold, _constant_graph(body), (torch.randn(3),), blind(_no_writes))


def test_constant_fold_never_folds_a_result_written_later():
    def body(g, c, x, k):
        y = c(aten.mul.Tensor, k, 2)
        c(aten.add_.Tensor, y, x)  # would accumulate into a folded buffer across calls
        return [c(aten.neg.default, y)]

    gm = _constant_graph(body)
    assert check(constant_fold, gm, (torch.randn(3),), properties=["validity", "values", "idempotence"]).ok
    applied(constant_fold, gm)
    assert aten.mul.Tensor in ops(gm)


def test_constant_fold_never_returns_a_buffer_and_never_folds_random_ops():
    gm = _constant_graph(lambda g, c, x, k: [c(aten.mul.Tensor, k, 2), c(aten.add.Tensor, x, c(aten.rand_like.default, k))])
    assert check(constant_fold, gm, (torch.randn(3),), properties=["validity", "aliasing"]).ok
    applied(constant_fold, gm)
    assert ops(gm) == [aten.mul.Tensor, aten.rand_like.default, aten.add.Tensor]


def test_constant_fold_names_the_node_that_cannot_run():
    gm = _constant_graph(lambda g, c, x, k: [c(aten.add.Tensor, x, c(aten.mul.Tensor, k, c(aten.ones.default, [2])))])
    with pytest.raises(LoweringError, match=r"constant_fold: evaluating %mul_tensor \(aten.mul.Tensor\).*cannot run"):
        constant_fold(gm, ())


# --- remove_noop_ops, remove_detach, view_to_reshape ---------------------------------------------

def test_remove_noop_ops_removes_same_metadata_views_and_private_copies():
    def body(g, c, x):
        y = c(aten.exp.default, x)
        z = c(aten.clone.default, c(aten.view.default, y, [2, 3]))
        return [c(aten.mul.Tensor, c(aten.expand.default, z, [2, 3]), 2)]

    gm = build(1, body)
    assert check(remove_noop_ops, gm, (torch.randn(2, 3),)).ok
    gm = attach_meta(gm, (torch.randn(2, 3),))  # the pass decides from meta['val']
    assert ops(applied(remove_noop_ops, gm)) == [aten.exp.default, aten.mul.Tensor]


def test_remove_noop_ops_needs_meta_to_act():
    gm = build(1, lambda g, c, x: [c(aten.alias.default, c(aten.exp.default, x))])
    assert ops(applied(remove_noop_ops, gm)) == [aten.exp.default, aten.alias.default]


def test_remove_noop_ops_keeps_a_copy_of_an_input():
    gm = build(1, lambda g, c, x: [c(aten.clone.default, x)])
    _caught(remove_noop_ops, gm, (torch.randn(3),), blind(_no_aliasing))


def test_remove_noop_ops_keeps_a_copy_written_later():
    def body(g, c, x):
        y = c(aten.exp.default, x)
        z = c(aten.clone.default, y)
        c(aten.add_.Tensor, z, 1)  # would write y too once z is y
        return [c(aten.neg.default, y), z]

    _caught(remove_noop_ops, build(1, body), (torch.randn(3),), blind(_no_writes))


@pytest.mark.parametrize("lowering_pass, view", [(remove_noop_ops, aten.alias.default),
                                                (remove_detach, aten.detach.default)])
def test_no_view_is_removed_whose_metadata_is_mutated(lowering_pass, view):
    def body(g, c, x):
        y = c(aten.exp.default, x)
        v = c(view, y)
        c(aten.transpose_.default, v, 0, 1)  # would transpose y itself once v is y
        return [c(aten.neg.default, y), c(aten.neg.default, v)]

    planted = mock.patch.object(_cleanup, "reshaped_classes", lambda gm, info: set())
    _caught(lowering_pass, build(1, body), (torch.randn(2, 3),), planted)


def test_view_to_reshape_leaves_no_view():
    gm = build(1, lambda g, c, x: [c(aten.view.default, c(aten.view.default, x, [6]), [3, 2])])
    assert check(view_to_reshape, gm, (torch.randn(2, 3),)).ok
    assert ops(applied(view_to_reshape, gm)) == [aten.reshape.default] * 2


# --- repair_input_as_output ----------------------------------------------------------------------

def test_repair_input_as_output_shares_one_clone_per_input():
    gm = build(2, lambda g, c, x, y: [x, c(aten.neg.default, y), x])
    assert check(repair_input_as_output, gm, (torch.randn(3), torch.randn(3)), ensure=["no-input-as-output"]).ok
    applied(repair_input_as_output, gm)
    out = next(n for n in gm.graph.nodes if n.op == "output")
    assert out.args[0][0] is out.args[0][2] and out.args[0][0].target is aten.clone.default


def test_repair_input_as_output_describes_an_input_after_its_metadata_changed():
    gm = build(1, lambda g, c, x: (c(aten.unsqueeze_.default, x, 0), [x])[1])
    verdict = check(repair_input_as_output, gm, (torch.randn(3),), ensure=["no-input-as-output"])
    assert verdict.ok, verdict


# --- generated graphs find the blinded analyses ----------------------------------------------------

@pytest.mark.parametrize("lowering_pass, analysis, seed", [
    (common_subexpression_elimination, _no_writes, 3),
    (eliminate_dead_code, _no_writes, 0),
    (eliminate_dead_code, _no_aliasing, 1),
], ids=["cse-no-writes", "dce-no-writes", "dce-no-aliasing"])
def test_generated_mutating_graphs_find_a_blinded_analysis(lowering_pass, analysis, seed, tmp_path):
    """Plain mutating graphs find each blinded analysis, each at a seed that finds it within 300 graphs
    (the blinded CSE: at 5 of seeds 0-5, at 7-24 graphs where found, not at seed 0; at these seeds:
    examples 8, 4 and 4; the blinded aliasing at seed 0: 62). Since issue 56's structures the blinded
    CSE at seed 1 first made two outputs one tensor (aliasing, at graph 137); seeds 2-5 a values
    violation at graphs 16, 8, 33 and 7. Unfocused: discovery keys its
    cache on the pass's source, which the blinding does not change, so a focus would be the one
    the unblinded pass got or not, by test order."""
    with blind(analysis):
        # found is what matters here (shrinking is tested elsewhere): not shrunk, 3x faster
        result = verify(lowering_pass, max_examples=300, seed=seed, graphs="mutating", repro_dir=tmp_path,
                        shrink=False, focus="none")
    assert not result.ok
    assert {v.property for v in result.violations} & {"values", "mutations", "validity"}


def test_remove_detach_removes_both_forms():
    gm = build(1, lambda g, c, x: [c(aten.neg.default, c(aten.detach_.default, c(aten.detach.default, c(aten.exp.default, x))))])
    assert check(remove_detach, gm, (torch.randn(3),)).ok
    assert ops(applied(remove_detach, gm)) == [aten.exp.default, aten.neg.default]


def test_dce_keeps_a_write_through_an_unsafe_view():
    """``_unsafe_view``'s schema promises a new tensor, but eager returns a view: sqrt_ of it writes
    atan2's result, which a later clone reads (and relu_ of one on an input is the caller's). DCE
    dropped both (found by make conformance, dev profile)."""
    import torch.fx as fx

    aten = torch.ops.aten
    g = fx.Graph()
    x, y = g.placeholder("x0"), g.placeholder("x1")
    a = g.call_function(aten.atan2.default, (x, y))
    g.call_function(aten.sqrt_.default, (g.call_function(aten._unsafe_view.default, (a, [])),))
    g.call_function(aten.relu_.default, (g.call_function(aten._unsafe_view.default, (x, [])),))
    g.output((g.call_function(aten.clone.default, (a,)),))
    gm = fx.GraphModule(torch.nn.Module(), g)
    verdict = check("reference_lowering.passes._dce_cse:eliminate_dead_code", gm, (torch.tensor(-5.0), torch.tensor(1.0)))
    assert verdict.ok, verdict
