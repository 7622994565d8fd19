"""Random ops under the harness draw in logical order (conformance/_random.py): a pass that only
changes the layout of a random op's operand keeps its values; one that moves draws between
elements, or drops or merges one, does not."""

import operator

import torch
import torch.fx as fx

from conformance import check

aten = torch.ops.aten


def _graph(random_op):
    """x0 (a transposed input) unsqueezed, then ``random_op`` of that view, and the view itself."""
    g = fx.Graph()
    x = g.placeholder("x0")
    view = g.call_function(aten.unsqueeze.default, (x, 2))
    out = random_op(g, view)
    g.output((*out, view) if isinstance(out, tuple) else (out, view))
    return fx.GraphModule(torch.nn.Module(), g)


def _dropout(g, x):
    drop = g.call_function(aten.native_dropout.default, (x, 0.25, True))
    return tuple(g.call_function(operator.getitem, (drop, i)) for i in range(2))


def _rand_like(g, x):
    return g.call_function(aten.rand_like.default, (x,))


def _views_as_copies(gm):
    """What torch's ReplaceViewOpsWithViewCopyOpsPass does: unsqueeze -> unsqueeze_copy (contiguous)."""
    for node in gm.graph.nodes:
        if node.target is aten.unsqueeze.default:
            node.target = aten.unsqueeze_copy.default
    gm.recompile()
    return gm


def _transposed_draw(gm):
    """rand_like(x) -> rand_like(x.transpose).transpose: the same shape and distribution, but each
    element gets another element's number (a pass that does this changes the program)."""
    g = gm.graph
    for node in list(g.nodes):
        if node.target is aten.rand_like.default:
            with g.inserting_before(node):
                t = g.call_function(aten.transpose.int, (node.args[0], 0, 1))
                r = g.call_function(aten.rand_like.default, (t,))
                back = g.call_function(aten.transpose.int, (r, 0, 1))
            node.replace_all_uses_with(back)
            g.erase_node(node)
    gm.recompile()
    return gm


def _inputs():
    return (torch.randn(3, 2, device="cpu").t(),)  # strides (1, 2): the view's layout is not row-major


def test_a_pass_that_makes_a_random_ops_operand_contiguous_keeps_its_values():
    """make conformance (seed 601579088): export's ReplaceViewOpsWithViewCopyOpsPass was flagged
    for native_dropout's mask, filled in the memory order of a view it had made a contiguous copy."""
    for op in (_dropout, _rand_like):
        verdict = check(_views_as_copies, _graph(op), _inputs(), properties=["values"], ensure=["no-views"])
        assert verdict.ok, verdict.violations


def test_a_pass_that_moves_draws_between_elements_is_still_caught():
    verdict = check(_transposed_draw, _graph(_rand_like), (torch.randn(3, 3, device="cpu"),), properties=["values"])
    assert not verdict.ok and verdict.violations[0].property == "values"


def test_in_place_draws_on_a_strided_tensor_keep_eagers_layout_and_logical_numbers():
    from conformance._random import logical_order

    base = torch.zeros(4, 3).t()  # (3, 4), strides (1, 3)
    torch.manual_seed(0)
    with logical_order():
        got = base.clone().uniform_()  # clone keeps the strides
        out = aten.rand_like.default(base)
    torch.manual_seed(0)
    want = torch.zeros(3, 4).uniform_()  # row-major draws of the same shape
    want_out = torch.rand(3, 4)
    assert got.stride() == base.stride() and out.stride() == base.stride()
    assert torch.equal(got, want) and torch.equal(out, want_out)


def test_a_lowered_graph_with_random_ops_runs_its_kernels():
    """The mode lets higher-order ops through: rand_like beside a lowered kernel
    (triton_kernel_wrapper_mutation) raised NotImplementedError in the mode (make conformance,
    seeds 156368142 and 2553381437 of 8e65989), a harness fault reported as the lowering's."""
    from reference_lowering.pointwise import lower_pointwise

    g = fx.Graph()
    x = g.placeholder("x0")
    g.output((g.call_function(aten.abs.default, (g.call_function(aten.rand_like.default, (x,)),)),))
    verdict = check(lambda gm, sample_inputs: lower_pointwise(gm, sample_inputs),
                    fx.GraphModule(torch.nn.Module(), g), (torch.randn(3, 2, device="cpu"),),
                    properties=["validity", "values"])
    assert verdict.ok, verdict.violations
    assert verdict.changed
