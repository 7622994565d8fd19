"""reference_lowering.functionalize on hand-made graphs, one per semantic the issue names, each
judged by the harness (values, input post-states with strides, aliasing, the functional contract).

The harness is the oracle here, so the last tests plant faults in the functionalizer and check
that the harness reports them.
"""

from __future__ import annotations

import operator

import pytest
import torch
import torch.fx as fx
from torch.fx.experimental.proxy_tensor import make_fx

from conformance import check
from reference_lowering import LoweringError
from reference_lowering.functionalize import SCHEMA_LIARS, functionalize
from reference_lowering.functionalize import _core
from reference_lowering.functionalize._storage import copies_sharing_storage
from tests.graphs import build

aten = torch.ops.aten
ALL = ["validity", "values", "mutations", "aliasing", "determinism"]


def fz(gm, sample_inputs):
    return functionalize(gm, sample_inputs)


def _ok(gm, inputs):
    verdict = check(fz, gm, inputs, ensure=["functional"], properties=ALL)
    assert verdict.ok, f"{verdict}\n{verdict.graph_after}"
    out = functionalize(gm, inputs)
    mutating = [n.target for n in out.graph.nodes if n.op == "call_function"
                and getattr(n.target, "_schema", None) is not None and n.target._schema.is_mutable]
    assert set(mutating) <= {aten.copy_.default, aten.as_strided_.default}
    return out


def test_in_place_copy_and_fill_on_intermediates_and_inputs():
    def body(g, c, x, y):
        t = c(aten.clone.default, x)
        c(aten.add_.Tensor, t, y)
        c(aten.mul_.Scalar, t, 2)
        u = c(aten.empty_like.default, x)
        c(aten.copy_.default, u, t)
        c(aten.fill_.Scalar, y, 3.0)  # an input
        c(aten.pow_.Scalar, x, 2)  # an input; pow_.Scalar's functional form is pow.Tensor_Scalar
        return [u, c(aten.sum.default, y)]
    out = _ok(build(2, body), (torch.randn(2, 3), torch.randn(3)))
    assert [n.target for n in out.graph.nodes if n.target == aten.copy_.default]  # the epilogue
    assert out.meta["functionalization"].input_mutations == "copy_"


# One row per view kind: (name, input shape, view builder on an intermediate `b`).
VIEWS = [
    ("view", (2, 3), lambda c, b: c(aten.view.default, b, [6])),
    ("reshape-as-view", (2, 3), lambda c, b: c(aten.reshape.default, b, [3, 2])),
    ("select", (2, 3), lambda c, b: c(aten.select.int, b, 0, 1)),
    ("slice", (4, 3), lambda c, b: c(aten.slice.Tensor, b, 0, 1, 4, 2)),
    ("t", (2, 3), lambda c, b: c(aten.t.default, b)),
    ("transpose", (2, 3), lambda c, b: c(aten.transpose.int, b, 0, 1)),
    ("permute", (2, 3, 2), lambda c, b: c(aten.permute.default, b, [2, 0, 1])),
    ("unsqueeze", (2, 3), lambda c, b: c(aten.unsqueeze.default, b, 1)),
    ("squeeze", (2, 1, 3), lambda c, b: c(aten.squeeze.dim, b, 1)),
    ("diagonal", (3, 3), lambda c, b: c(aten.diagonal.default, b)),
    ("as_strided", (3, 3), lambda c, b: c(aten.as_strided.default, b, [2, 2], [1, 3], 1)),
    ("chain", (2, 3, 2), lambda c, b: c(aten.select.int, c(aten.permute.default, b, [1, 0, 2]), 0, 2)),
]


@pytest.mark.parametrize("name, shape, view", VIEWS, ids=[v[0] for v in VIEWS])
@pytest.mark.parametrize("of_input", [False, True], ids=["intermediate", "input"])
def test_mutation_through_a_view_reaches_every_alias(name, shape, view, of_input):
    def body(g, c, x):
        base = x if of_input else c(aten.clone.default, x)
        other = c(aten.t.default, c(aten.view.default, base, [shape[0], -1]))  # another alias, made before
        v = view(c, base)
        before = c(aten.mul.Tensor, v, 1)  # a read before the write
        c(aten.mul_.Scalar, v, -2)
        c(aten.add_.Scalar, other, 1)  # then a write through the other alias
        return [before, c(aten.clone.default, v), c(aten.clone.default, other), c(aten.clone.default, base)]
    _ok(build(1, body), (torch.randn(*shape),))


def test_expand_is_read_through_after_its_base_is_written():
    def body(g, c, x):
        b = c(aten.clone.default, x)
        e = c(aten.expand.default, b, [4, 3])
        c(aten.mul_.Scalar, b, 3)
        return [c(aten.clone.default, e)]
    _ok(build(1, body), (torch.randn(1, 3),))


META = [
    ("t_", (2, 3), lambda c, x: c(aten.t_.default, x)),
    ("transpose_", (2, 3, 1), lambda c, x: c(aten.transpose_.default, x, 0, 2)),
    ("unsqueeze_", (2, 3), lambda c, x: c(aten.unsqueeze_.default, x, 0)),
    ("squeeze_", (2, 1, 3), lambda c, x: c(aten.squeeze_.dim, x, 1)),
    ("as_strided_", (3, 3), lambda c, x: c(aten.as_strided_.default, x, [2, 2], [1, 3], 1)),
]


@pytest.mark.parametrize("name, shape, mutate", META, ids=[m[0] for m in META])
@pytest.mark.parametrize("of_input", [False, True], ids=["intermediate", "input"])
def test_metadata_mutations(name, shape, mutate, of_input):
    def body(g, c, x):
        t = x if of_input else c(aten.clone.default, x)
        mutate(c, t)
        c(aten.add_.Scalar, t, 1)  # a data write in the new layout
        return [c(aten.mul.Tensor, t, 2)]
    out = _ok(build(1, body), (torch.randn(*shape),))
    if of_input:
        assert "input[0]" in out.meta["functionalization"].input_metadata


def test_several_inputs_sharing_one_storage():
    base = torch.randn(6)
    inputs = (base[:4].view(2, 2), base[2:])  # overlapping views of one storage, as callers pass them

    def body(g, c, x, y):
        c(aten.mul_.Scalar, x, 10)
        return [c(aten.add.Tensor, y, 1)]  # reads elements x wrote
    _ok(build(2, body), inputs)


def test_outputs_mode_returns_new_values_with_a_signature():
    def body(g, c, x, y):
        c(aten.add_.Scalar, x, 1)
        c(aten.t_.default, y)
        return [c(aten.sum.default, x)]
    gm, x, y = build(2, body), torch.randn(2, 3), torch.randn(2, 3)
    out = functionalize(gm, (x, y), input_mutations="outputs")
    sig = out.meta["functionalization"]
    assert sig.user_outputs == 1 and sig.mutated_inputs == {1: "input[0]", 2: "input[1]"}
    assert not [n for n in out.graph.nodes if n.target in (aten.copy_.default, aten.as_strided_.default)]
    ex, ey, fx_, fy = x.clone(), y.clone(), x.clone(), y.clone()
    expected = gm(ex, ey)
    results = out(fx_, fy)
    assert torch.equal(results[0], expected[0])
    for index, label in sig.mutated_inputs.items():  # what a caller does with the signature
        target = (fx_, fy)[int(label[6:-1])]
        if label in sig.input_metadata:
            size, stride, offset = sig.input_metadata[label]
            target.as_strided_(size, stride, offset)
        target.copy_(results[index])
    for a, e in ((fx_, ex), (fy, ey)):
        assert torch.equal(a, e) and a.stride() == e.stride()


def test_output_that_is_a_view_of_a_mutated_input_stays_a_view_of_it():
    def body(g, c, x):
        c(aten.mul_.Scalar, x, 2)
        return [c(aten.select.int, x, 0, 1)]
    gm, x = build(1, body), torch.randn(3, 2)
    out = _ok(gm, (x,))
    assert out.meta["functionalization"].output_aliases == {0: "input[0]"}
    y = x.clone()
    result = out(y)[0]
    assert result.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()


def _f_no_grad(x):
    y = x.clone()
    y.view(-1).add_(1)
    with torch.no_grad():
        z = y * 3
        y.mul_(2)  # a write to an outer intermediate inside the region
        x.add_(1)  # and to an input
    return z + y.sum()


def test_grad_region_becomes_one_higher_order_node_with_a_functional_body():
    gm = make_fx(_f_no_grad, pre_dispatch=True)(torch.randn(2, 3))
    assert [n for n in gm.graph.nodes if n.target is torch._C._set_grad_enabled]
    out = _ok(gm, (torch.randn(2, 3),))
    hops = [n for n in out.graph.nodes if n.target is torch.ops.higher_order.wrap_with_set_grad_enabled]
    assert len(hops) == 1 and not [n for n in out.graph.nodes if n.target is torch._C._set_grad_enabled]
    body = getattr(out, hops[0].args[1].target)
    assert not [n for n in body.graph.nodes if getattr(n.target, "_schema", None) is not None
                and n.target._schema.is_mutable]


def test_grad_mode_after_the_call_is_the_callers():
    """torch's pre-dispatch graph hard-codes the restore: called under no_grad it leaves grad on."""
    gm = make_fx(_f_no_grad, pre_dispatch=True)(torch.randn(2, 3))
    out = functionalize(gm, (torch.randn(2, 3),))
    with torch.no_grad():
        gm(torch.randn(2, 3))
        leaked = torch.is_grad_enabled()
        torch._C._set_grad_enabled(False)
        out(torch.randn(2, 3))
        after = torch.is_grad_enabled()
    assert leaked and not after


def test_export_graph_with_a_region_node_buffer_and_input_writes():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("buf", torch.zeros(3))

        def forward(self, x):
            with torch.no_grad():
                z = x * 3
            self.buf.add_(1)
            x.add_(1)
            return z + 1
    ep = torch.export.export(M(), (torch.randn(2, 3),))
    gm = fx.GraphModule(ep.graph_module, ep.graph_module.graph)  # buffers lifted to inputs
    assert [n for n in gm.graph.nodes if n.target is torch.ops.higher_order.wrap_with_set_grad_enabled]
    _ok(gm, (torch.zeros(3), torch.randn(2, 3)))


def test_writes_to_the_graphs_own_constants_are_written_back():
    gm = build(1, lambda g, c, x: [c(aten.add_.Tensor, g.get_attr("c"), x), c(aten.mul.Tensor, x, 2)][1:],
               constants={"c": torch.zeros(3)})
    out = _ok(gm, (torch.ones(3),))
    assert [n for n in out.graph.nodes if n.target == aten.copy_.default and n.args[0].op == "get_attr"]
    functionalize(gm, (torch.ones(3),))
    assert torch.equal(gm.c, torch.zeros(3))  # functionalizing never runs the caller's module on its buffers


# --- the schema-liar table -------------------------------------------------------------------------

LIAR_CASES = {  # op -> (graph body, inputs): each row exercised where its decomposition matters
    aten.reshape.default: (lambda c, x: c(aten.reshape.default, c(aten.t.default, x), [6]), (torch.randn(2, 3),)),
    aten.flatten.using_ints: (lambda c, x: c(aten.flatten.using_ints, c(aten.t.default, x), 0, 1),
                              (torch.randn(2, 3),)),
    aten.reshape_as.default: (lambda c, x: c(aten.reshape_as.default, x, c(aten.view.default, x, [3, 2])),
                              (torch.randn(2, 3),)),
    aten.to.dtype: (lambda c, x: c(aten.to.dtype, x, torch.float64), (torch.randn(3),)),
    aten.to.dtype_layout: (lambda c, x: c(aten.to.dtype_layout, x, dtype=torch.float32), (torch.randn(3),)),
    aten.to.device: (lambda c, x: c(aten.to.device, x, torch.device("cpu"), torch.float16), (torch.randn(3),)),
    aten.to.other: (lambda c, x: c(aten.to.other, x, c(aten.ones.default, [1], dtype=torch.int32)),
                    (torch.randn(3),)),
    aten.type_as.default: (lambda c, x: c(aten.type_as.default, x, x), (torch.randn(3),)),
    aten.contiguous.default: (lambda c, x: c(aten.contiguous.default, c(aten.t.default, x)), (torch.randn(2, 3),)),
    aten.native_batch_norm.default: (
        lambda c, x, m, v: c(aten.native_batch_norm.default, x, None, None, m, v, True, 0.1, 1e-5),
        (torch.randn(4, 3), torch.zeros(3), torch.ones(3))),
    aten.batch_norm.default: (
        lambda c, x, m, v: c(aten.batch_norm.default, x, None, None, m, v, True, 0.1, 1e-5, False),
        (torch.randn(4, 3), torch.zeros(3), torch.ones(3))),
    aten.rrelu_with_noise.default: (
        lambda c, x, n: c(aten.rrelu_with_noise.default, x, n, 0.1, 0.3, False), (torch.randn(5), torch.zeros(5))),
}


def test_every_liar_row_has_a_reason_and_a_case():
    assert set(LIAR_CASES) == set(SCHEMA_LIARS)
    assert all(len(row.reason) > 20 for row in SCHEMA_LIARS.values())


@pytest.mark.parametrize("op", list(LIAR_CASES), ids=str)
@pytest.mark.parametrize("then_write", [False, True], ids=["read", "then-write"])
def test_schema_liar_is_decomposed(op, then_write):
    body_of, inputs = LIAR_CASES[op]

    def body(g, c, *xs):
        out = body_of(lambda target, *args, **kwargs: g.call_function(target, args, kwargs), *xs)
        first = c(operator.getitem, out, 0) if op == aten.native_batch_norm.default else out
        if then_write:  # a write through the result must reach the input exactly when eager aliased
            c(aten.mul_.Scalar, first, 2)
        return [c(aten.clone.default, first), *[c(aten.clone.default, x) for x in xs]]
    gm = build(len(inputs), body)
    out = _ok(gm, inputs)
    assert op not in {n.target for n in out.graph.nodes}


def test_batch_norm_running_statistics_are_written_back():
    x, m, v = torch.randn(4, 3), torch.zeros(3), torch.ones(3)
    gm = build(3, lambda g, c, x, m, v: [c(aten.batch_norm.default, x, None, None, m, v, True, 0.1, 1e-5, False)])
    out = functionalize(gm, (x, m, v))
    m1, v1, m2, v2 = m.clone(), v.clone(), m.clone(), v.clone()
    gm(x, m1, v1)
    out(x, m2, v2)
    assert not torch.equal(m1, m) and torch.equal(m1, m2) and torch.equal(v1, v2)


# --- usage errors and planted faults ----------------------------------------------------------------


def test_bad_arguments_are_lowering_errors():
    gm = build(1, lambda g, c, x: [c(aten.neg.default, x)])
    with pytest.raises(LoweringError, match="input_mutations"):
        functionalize(gm, (torch.randn(2),), input_mutations="nope")
    with pytest.raises(LoweringError, match="meta\\['val'\\]: pass example_inputs"):
        functionalize(gm)
    with pytest.raises(LoweringError, match="1 inputs"):
        functionalize(gm, (torch.randn(2), torch.randn(2)))
    odd = build(1, lambda g, c, x: [c(aten.neg.default, c(torch.sin, x))])
    with pytest.raises(LoweringError, match="is not an ATen op"):
        functionalize(odd, (torch.randn(2),))


def test_meta_val_stands_in_for_example_inputs():
    from strategies import attach_meta

    gm = build(1, lambda g, c, x: [c(aten.add_.Scalar, c(aten.t.default, x), 1), x][1:])
    attach_meta(gm, (torch.randn(2, 3).t(),))
    out = functionalize(gm)
    x = torch.randn(2, 3).t()
    y = x.clone().t().contiguous().t()
    out(y)
    assert torch.equal(y, x + 1)


@pytest.mark.parametrize("fault", ["no write-back", "stale reads", "no epilogue"])
def test_the_harness_catches_a_broken_functionalizer(fault, monkeypatch):
    if fault == "no write-back":
        monkeypatch.setattr(_core.Walk, "write", lambda self, target, new: None)
    elif fault == "stale reads":
        monkeypatch.setattr(_core.Walk, "read_node", lambda self, node: self.fx[node] if self.fx[node] is not None
                            else self.replay(self.real[node]))
    else:
        original = _core.Walk.finish

        def no_epilogue(self, node):
            self.callers = {}
            return original(self, node)
        monkeypatch.setattr(_core.Walk, "finish", no_epilogue)

    def body(g, c, x):
        b = c(aten.clone.default, x)
        v = c(aten.select.int, b, 0, 0)
        c(aten.mul_.Scalar, v, 2)
        c(aten.add_.Scalar, x, 1)
        return [c(aten.clone.default, b)]
    verdict = check(fz, build(1, body), (torch.randn(2, 3),), ensure=["functional"])
    assert not verdict.ok and {v.property for v in verdict.violations} & {"values", "mutations", "execution"}


def test_writes_to_an_expanded_input_and_empty_writes():
    """Found by `make conformance`: an empty write (add_ on a zero-size slice) of an expanded input
    made the epilogue copy_ into overlapping memory, which raises. Empty writes write nothing; a real
    write through a view of an expanded input goes back through a dense view of its storage."""
    expanded = torch.randn(1, 1).expand(1, 2)
    _ok(build(1, lambda g, c, x: [c(aten.add_.Scalar, c(aten.slice.Tensor, x, 1, 0, 0), 1.0)]), (expanded,))
    _ok(build(1, lambda g, c, x: [c(aten.mul_.Scalar, c(aten.select.int, x, 1, 0), 3.0), x][1:]), (expanded,))


# --- found in review -----------------------------------------------------------------------------


def test_an_element_of_a_tuple_read_after_a_write_sees_it():
    def body(g, c, x):
        y = c(aten.clone.default, x)
        parts = c(aten.split.Tensor, y, 1)
        c(aten.add_.Scalar, y, 1)
        return [c(aten.add.Tensor, c(operator.getitem, parts, 0), 0)]
    _ok(build(1, body), (torch.zeros(2),))


def test_tied_constants_stay_tied():
    shared = torch.zeros(3)
    gm = build(1, lambda g, c, x: [c(aten.add_.Tensor, g.get_attr("b"), x),
                                   c(aten.mul.Tensor, g.get_attr("a"), 1)][1:],
               constants={"a": shared, "b": shared})  # one tensor under two names
    assert gm.a is gm.b
    _ok(gm, (torch.ones(3),))


def test_writes_outside_the_inputs_own_view_reach_the_caller():
    base = torch.zeros(4)
    gm = build(1, lambda g, c, x: [c(aten.fill_.Scalar, c(aten.as_strided.default, x, [4], [1], 0), 5.0),
                                   c(aten.neg.default, x)][1:])
    _ok(gm, (base[2:],))


@pytest.mark.parametrize("op", [aten.contiguous.default, aten.to.dtype])
def test_liar_copies_keep_the_requested_memory_format(op):
    x = torch.randn(2, 3, 4, 5)
    args = (torch.float64,) if op == aten.to.dtype else ()
    gm = build(1, lambda g, c, x: [g.call_function(op, (x, *args), {"memory_format": torch.channels_last})])
    _ok(gm, (x,))


def test_outputs_mode_counts_top_level_outputs():
    g = fx.Graph()
    x = g.placeholder("x")
    g.call_function(aten.add_.Scalar, (x, 1))
    a = g.call_function(aten.neg.default, (x,))
    g.output(((a, a), a))  # nested
    out = functionalize(fx.GraphModule(torch.nn.Module(), g), (torch.zeros(2),), input_mutations="outputs")
    sig = out.meta["functionalization"]
    results = out(torch.zeros(2))
    assert sig.user_outputs == 2 and sig.mutated_inputs == {2: "input[0]"} and len(results) == 3
    assert torch.equal(results[2], torch.ones(2))


def test_functionalize_leaves_the_callers_random_state_alone():
    gm = build(1, lambda g, c, x: [c(aten.add.Tensor, c(aten.rand_like.default, x), x)])
    torch.manual_seed(0)
    expected = torch.rand(1)
    torch.manual_seed(0)
    functionalize(gm, (torch.zeros(3),))
    assert torch.equal(torch.rand(1), expected)


def test_reinterpreting_written_memory_as_another_dtype_is_refused():
    def body(g, c, x):
        y = c(aten.clone.default, x)
        z = c(aten.view.dtype, y, torch.int32)
        c(aten.add_.Scalar, y, 1.0)
        return [c(aten.add.Tensor, z, 0)]
    with pytest.raises(LoweringError, match="view\\(dtype\\)"):
        functionalize(build(1, body), (torch.zeros(2),))
    inputs = copies_sharing_storage((torch.ones(2), ))
    both = copies_sharing_storage((inputs[0], inputs[0].view(torch.int32)))  # one storage, two dtypes
    assert both[1].tolist() == [1065353216, 1065353216]


def test_an_empty_input_read_through_a_dtype_view_keeps_the_views_dtype():
    """x0 float32[0], view.dtype(x0, int32) reshaped to [1, 0] and written in place, then returned: the
    output came back float32 (make conformance, seed 601579088 of 14695ec): the storage's flat value
    was taken from the first node on it, the float32 input. It is now that node reinterpreted."""
    def body(g, c, x):
        r = c(aten.reshape.default, c(aten.view.dtype, x, torch.int32), [1, 0])
        a = c(aten.abs.default, r)
        return [c(aten.add_.Scalar, r, 0), a]
    verdict = check(lambda gm, sample_inputs: functionalize(gm, sample_inputs), build(1, body),
                    (torch.zeros(0),), ensure=["functional"])
    assert verdict.ok, verdict


def test_contract_epilogue_is_only_a_trailing_run():
    """A copy_ into an input in the middle of the graph, before more compute, is not an epilogue."""
    gm = build(1, lambda g, c, x: [c(aten.mul.Tensor, c(aten.copy_.default, x, c(aten.neg.default, x)), 2)])
    verdict = check(lambda gm: gm, gm, (torch.randn(3),), ensure=["functional"], properties=["values"])
    assert "contracts:functional" in {v.property for v in verdict.violations}


def test_contract_accepts_a_declared_alias_of_any_input_sharing_the_storage():
    base = torch.randn(2, 3)
    def body(g, c, x, y):
        c(aten.mul_.Scalar, y, 2)
        return [c(aten.select.int, x, 0, 0)]
    _ok(build(2, body), (base, base[1]))


def test_a_dtype_view_of_a_written_input_keeps_its_dtype():
    """view.dtype(x, int32) returned after exp_(x) wrote x: the output must show x's new bits as int32.
    It came back float32 (found by make conformance, dev profile): outputs on a written input are
    regenerated as views of the input, in the input's dtype. A dtype of another element size is
    refused with a LoweringError that says so."""
    def graph(dtype):
        g = fx.Graph()
        x = g.placeholder("x0")
        viewed = g.call_function(torch.ops.aten.view.dtype, (x, dtype))
        g.output((g.call_function(torch.ops.aten.exp_.default, (x,)), viewed))
        return fx.GraphModule(torch.nn.Module(), g)

    verdict = check(lambda gm, sample_inputs: functionalize(gm, sample_inputs), graph(torch.int32),
                    (torch.randn(3),), ensure=["functional"])
    assert verdict.ok, verdict
    with pytest.raises(LoweringError, match="view\\(dtype\\) reinterpretation of written memory is not supported"):
        functionalize(graph(torch.int16), (torch.randn(3),))


@pytest.mark.parametrize("shape", [(), (3,)])
def test_an_input_written_through_a_dtype_view_of_its_size_is_refused_not_misread(shape):
    """neg_(view.dtype(x, int32)), then x read as float32 (make conformance, seed 1295539565): a 0-d x
    and its view have one storage and one (size, stride, offset), and the replay cache, keyed on those
    alone, handed the int32 replay to the float32 read: an add of two int32 tensors (and an epilogue
    copying int32 values, not bits, into x). Each dtype is its own replay now, and the read meets the
    documented refusal."""
    g = fx.Graph()
    x = g.placeholder("x0")
    written = g.call_function(torch.ops.aten.neg_.default, (g.call_function(torch.ops.aten.view.dtype,
                                                                             (x, torch.int32)),))
    g.output((g.call_function(torch.ops.aten.add.Tensor, (written, x), {"alpha": 0.0}),))
    with pytest.raises(LoweringError, match="view\\(dtype\\) reinterpretation of written memory is not supported"):
        functionalize(fx.GraphModule(torch.nn.Module(), g), (torch.randn(shape),))
