"""reference_lowering.pointwise: regions, the wrapper graph, dtypes, dynamic sizes, strict subgraph
lowering and its errors, and the pointwise-kernels-only contract."""

from __future__ import annotations

import os

import pytest
import sympy
import torch

from conformance import check
from conformance.contracts import CONTRACTS, ContractContext
from reference_lowering import LoweringError
from reference_lowering.pointwise import PointwiseKernel, lower_pointwise, lower_pointwise_subgraph
from reference_lowering.pointwise import _runtime
from reference_lowering.symbolic import replace_floor_div
from tests.graphs import build

aten = torch.ops.aten
WRAPPER = "triton_kernel_wrapper_mutation"


def launches(gm) -> int:
    return sum(1 for n in gm.graph.nodes if n.op == "call_function" and getattr(n.target, "__name__", "") == WRAPPER)


def aten_targets(gm) -> list:
    return [n.target for n in gm.graph.nodes if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)
            and n.target not in (aten.empty_strided.default, aten.sym_size.int, aten.sym_stride.int)]


def lower(gm, sample_inputs):
    return lower_pointwise(gm, sample_inputs)


def assert_lowering_ok(gm, inputs, **kw):
    verdict = check(lower, gm, inputs, ensure=["pointwise-kernels-only"], **kw)
    assert verdict.ok, "\n".join(v.message for v in verdict.violations)


# --- regions --------------------------------------------------------------------------------------


def _chain(n):
    def body(g, c, x):
        ops = [aten.sin.default, aten.exp.default, aten.neg.default, aten.relu.default, aten.sigmoid.default,
               aten.abs.default, aten.cos.default, aten.tanh.default]
        v = x
        for i in range(n):
            v = c(ops[i % len(ops)], v)
        return [v]
    return body


def test_a_chain_of_pointwise_ops_is_one_kernel():
    gm = build(1, _chain(8))
    x = torch.randn(5, 7)
    lowered = lower_pointwise(gm, (x,))
    assert launches(lowered) == 1 and aten_targets(lowered) == []
    torch.testing.assert_close(lowered(x)[0], gm(x)[0])
    assert_lowering_ok(gm, (x,))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_narrow_float_is_not_rounded_again_where_an_op_selects_among_rounded_values(dtype):
    """relu, clamp to a bound the dtype holds, maximum and abs of f16/bf16 values already rounded give
    such a value: no second rounding (each costs instructions on a GPU). A clamp to 0.3, which bf16 and
    f16 do not hold, is rounded: the kernel stores the rounded bound eager stores (left unrounded, the
    store's conversion would give another value: bf16's narrowing by bits truncates)."""
    def body(g, c, x):
        v = c(aten.mul.Tensor, x, 1.25)
        v = c(aten.abs.default, c(aten.maximum.default, c(aten.clamp_min.default, c(aten.relu.default, v), -0.5), x))
        return [v, c(aten.clamp_min.default, c(aten.mul.Tensor, x, 1.25), 0.3)]

    gm = build(1, body)
    x = torch.tensor([-3.0, -0.1, 0.0, 0.1, 0.2, 1.7, float("nan"), float("inf")], dtype=dtype)
    lowered = lower_pointwise(gm, (x,))
    [kernel] = lowered.meta["pointwise_kernels"]
    rounds = ".to(tl.float16).to(tl.float32)" if dtype == torch.float16 else "bf16_round_f32("
    body_lines = [line for line in kernel.source.split("def pointwise_")[1].splitlines() if rounds in line]
    # the product (the kernel computes the two once), and the clamp to 0.3; not relu, the clamp to
    # -0.5, maximum or abs
    assert len(body_lines) == 2, kernel.source
    for got, want in zip(lowered(x), gm(x)):
        assert torch.equal(got.float().nan_to_num(), want.float().nan_to_num()), (got, want)
    assert lowered(x)[1][0].item() == torch.tensor(0.3, dtype=dtype).item()


def test_the_gpu_path_takes_libdevices_tanh_and_an_approximate_sigmoid_division():
    """On a GPU, tanh is libdevice's (eager CUDA's own) and sigmoid's division Triton's approximate one
    (Inductor's form), in a helper, where a kernel expression's division would be correctly rounded;
    the interpreter, which cannot call libdevice, keeps the polynomial tanh."""
    from reference_lowering.pointwise._helpers import helper_sources

    body = "tanh_f32(x) + sigmoid_f32(x) + tanh_f64(y)"
    gpu, interpreted = "\n".join(helper_sources(body, interpreter=False)), "\n".join(helper_sources(body))
    assert gpu.count("return libdevice.tanh(x)") == 2 and "libdevice" not in interpreted
    for text in (gpu, interpreted):
        assert "return 1 / (1 + tl.exp(-x))" in text and "div_rn" not in text
    gm = build(1, lambda g, c, x: [c(aten.sigmoid.default, x)])
    x = torch.randn(16)
    [kernel] = lower_pointwise(gm, (x,)).meta["pointwise_kernels"]
    assert "sigmoid_f32(" in kernel.source and "div_rn" not in kernel.source, kernel.source


def test_two_outputs_of_one_region_come_from_one_kernel():
    gm = build(2, lambda g, c, x, y: [c(aten.add.Tensor, x, y), c(aten.mul.Tensor, x, y)])
    lowered = lower_pointwise(gm, (torch.randn(4), torch.randn(4)))
    assert launches(lowered) == 1
    assert len(lowered.meta["pointwise_kernels"][0].code.outputs) == 2


def test_a_reduction_splits_regions_and_stays_aten():
    gm = build(1, lambda g, c, x: [c(aten.exp.default, c(aten.sum.dim_IntList, c(aten.neg.default, x), [1], True))])
    x = torch.randn(3, 4)
    lowered = lower_pointwise(gm, (x,))
    assert launches(lowered) == 2 and aten_targets(lowered) == [aten.sum.dim_IntList]
    assert_lowering_ok(gm, (x,))


def test_a_region_never_wraps_around_a_node_outside_it():
    # b = a * sum(a): joining b to a's region would need sum(a) inside the kernel that makes a
    def body(g, c, x):
        a = c(aten.exp.default, x)
        s = c(aten.sum.dim_IntList, a, [1], True)
        return [c(aten.mul.Tensor, a, c(aten.expand.default, s, [3, 4]))]

    gm = build(1, body)
    x = torch.randn(3, 4)
    lowered = lower_pointwise(gm, (x,))
    assert launches(lowered) == 2
    assert_lowering_ok(gm, (x,))


def test_a_broadcast_producer_of_another_shape_is_its_own_kernel():
    gm = build(2, lambda g, c, x, b: [c(aten.add.Tensor, x, c(aten.exp.default, b))])
    x, b = torch.randn(3, 4), torch.randn(4)
    lowered = lower_pointwise(gm, (x, b))
    assert launches(lowered) == 2
    assert_lowering_ok(gm, (x, b))


def test_reads_and_writes_keep_their_order_across_an_in_place_op():
    def body(g, c, x):
        before = c(aten.mul.Tensor, x, 2)
        c(aten.add_.Tensor, x, 1)
        after = c(aten.mul.Tensor, x, 2)
        return [c(aten.sub.Tensor, after, before)]

    gm = build(1, body)
    assert_lowering_ok(gm, (torch.randn(4),), properties=["values", "mutations"])


def test_a_dead_pointwise_node_is_dropped():
    gm = build(1, lambda g, c, x: (c(aten.exp.default, x), [x])[1])
    assert launches(lower_pointwise(gm, (torch.randn(2),))) == 0


def test_zero_size_outputs_are_allocated_and_never_launched():
    gm = build(1, lambda g, c, x: [c(aten.exp.default, x)])
    x = torch.randn(0, 3)
    lowered = lower_pointwise(gm, (x,))
    assert launches(lowered) == 0
    assert lowered(x)[0].shape == (0, 3)


def test_outputs_get_eager_strides_from_a_transposed_input():
    gm = build(1, lambda g, c, x: [c(aten.exp.default, x)])
    x = torch.randn(4, 6).t()
    out = lower_pointwise(gm, (x,))(x)[0]
    assert out.stride() == gm(x)[0].stride() == (1, 6)


def test_lowering_twice_gives_the_same_code_and_the_caller_graph_is_untouched():
    gm = build(2, lambda g, c, x, y: [c(aten.add.Tensor, c(aten.exp.default, x), y)])
    before = gm.code
    inputs = (torch.randn(3), torch.randn(3))
    assert lower_pointwise(gm, inputs).code == lower_pointwise(gm, inputs).code
    assert gm.code == before


# --- dtypes -----------------------------------------------------------------------------------------


def test_narrow_floats_round_after_every_op_like_eager():
    # x + y - x in f16: eager rounds x + y to f16 first, so the result is not y
    gm = build(2, lambda g, c, x, y: [c(aten.sub.Tensor, c(aten.add.Tensor, x, y), x)])
    for dtype in (torch.float16, torch.bfloat16):
        x = torch.full((8,), 1000.0, dtype=dtype)
        y = torch.linspace(0.01, 0.9, 8, dtype=dtype)
        got, want = lower_pointwise(gm, (x, y))(x, y)[0], gm(x, y)[0]
        assert torch.equal(got, want), (dtype, got, want)
        assert not torch.equal(want, y)


def test_bf16_conversions_are_exact_under_the_interpreter():
    # the interpreter's own f32 -> bf16 truncates and its bf16 -> f32 flushes subnormals
    gm = build(1, lambda g, c, x: [c(aten.mul.Tensor, x, 1e20), c(aten.log.default, x)])
    x = torch.tensor([1e-7, 9.18e-41, 3.3, 1e-38], dtype=torch.bfloat16)
    for got, want in zip(lower_pointwise(gm, (x,))(x), gm(x)):
        assert torch.equal(got, want), (got, want)


def test_integer_division_and_remainder_follow_python():
    gm = build(2, lambda g, c, a, b: [c(aten.floor_divide.default, a, b), c(aten.remainder.Tensor, a, b),
                                      g.call_function(aten.div.Tensor_mode, (a, b), {"rounding_mode": "trunc"}),
                                      c(aten.fmod.Tensor, a, b)])
    a = torch.tensor([7, -7, 7, -7, 0], dtype=torch.int32)
    b = torch.tensor([2, 2, -2, -2, 3], dtype=torch.int32)
    for got, want in zip(lower_pointwise(gm, (a, b))(a, b), gm(a, b)):
        assert torch.equal(got, want), (got, want)


def test_python_scalars_and_mixed_dtypes_promote_like_torch():
    gm = build(3, lambda g, c, i, f, h: [c(aten.add.Tensor, i, 2.5), c(aten.mul.Tensor, h, i), c(aten.div.Tensor, i, i),
                                         c(aten.gt.Tensor, h, f), c(aten.add.Tensor, f, True)])
    inputs = (torch.tensor([1, -3, 4]), torch.tensor(0.25), torch.tensor([0.5, 2.0, -1.0], dtype=torch.float16))
    outs, want = lower_pointwise(gm, inputs)(*inputs), gm(*inputs)
    assert [o.dtype for o in outs] == [w.dtype for w in want]
    for got, w in zip(outs, want):
        torch.testing.assert_close(got, w)


# --- dynamic sizes -----------------------------------------------------------------------------------


def test_dynamic_lowering_takes_sizes_from_the_inputs_and_launches_a_floor_div_grid():
    gm = build(2, lambda g, c, x, b: [c(aten.relu.default, c(aten.add.Tensor, x, b))])
    lowered = lower_pointwise(gm, (torch.randn(3, 5), torch.randn(5)), dynamic=True)
    kernel = lowered.meta["pointwise_kernels"][0]
    assert "ks0" in kernel.source and "xnumel" in kernel.source
    assert kernel.grid == replace_floor_div(sympy.floor((sympy.Symbol("xnumel", integer=True, nonnegative=True)
                                                        + kernel.code.block - 1) / kernel.code.block))
    count = len(_runtime._FUNCTIONS)
    for shape in [(1 + 6, 9), (40, 33), (2, 2000)]:
        x, b = torch.randn(shape), torch.randn(shape[1])
        torch.testing.assert_close(lowered(x, b)[0], gm(x, b)[0])
        x = torch.randn(shape[::-1]).t()  # the same stride order is not required of inputs
        torch.testing.assert_close(lowered(x, b)[0], gm(x, b)[0])
    assert len(_runtime._FUNCTIONS) == count


def test_a_dynamic_graph_skips_the_launch_at_size_zero():
    gm = build(1, lambda g, c, x: [c(aten.exp.default, x)])
    lowered = lower_pointwise(gm, (torch.randn(3, 4),), dynamic=True)
    assert lowered(torch.randn(0, 4))[0].shape == (0, 4)


# --- strict subgraph lowering ----------------------------------------------------------------------


def test_lower_pointwise_subgraph_returns_source_and_a_launcher():
    gm = build(2, lambda g, c, x, y: [c(aten.maximum.default, x, y), c(aten.minimum.default, x, y)])
    x, y = torch.tensor([1.0, float("nan"), 3.0]), torch.tensor([2.0, 0.0, float("nan")])
    kernel = lower_pointwise_subgraph(gm, (x, y))
    assert isinstance(kernel, PointwiseKernel) and kernel.mode == "interpreter"
    assert f"def {kernel.name}(" in kernel.source and "@triton.jit" in kernel.source
    for got, want in zip(kernel(x, y), gm(x, y)):
        torch.testing.assert_close(got, want, equal_nan=True)


@pytest.mark.parametrize("make,reason", [
    (lambda g, c, x: [c(aten.sum.default, x)], "not a pointwise op"),
    (lambda g, c, x: [c(aten.add_.Tensor, x, 1)], "mutates an operand"),
    (lambda g, c, x: [c(aten.view.default, x, [-1])], "not a pointwise op"),
    (lambda g, c, x: [c(aten.sinh.default, x)], "pointwise op without a row"),
])
def test_lower_pointwise_subgraph_names_the_node_it_cannot_lower(make, reason):
    gm = build(1, make)
    with pytest.raises(LoweringError) as info:
        lower_pointwise_subgraph(gm, (torch.randn(2, 2),))
    node = next(n for n in gm.graph.nodes if n.op == "call_function")
    assert f"%{node.name}" in str(info.value) and str(node.target) in str(info.value) and reason in str(info.value)


def test_lower_pointwise_subgraph_refuses_outputs_of_two_shapes():
    gm = build(2, lambda g, c, x, y: [c(aten.exp.default, x), c(aten.exp.default, y)])
    with pytest.raises(LoweringError, match="one iteration space"):
        lower_pointwise_subgraph(gm, (torch.randn(2), torch.randn(3)))


@pytest.mark.parametrize("call,message", [
    (lambda: lower_pointwise("not a graph", ()), "should be a torch.fx.GraphModule"),
    (lambda: lower_pointwise(build(1, lambda g, c, x: [x]), None), "needs the inputs' layouts"),
    (lambda: lower_pointwise(build(1, lambda g, c, x: [x]), (1, 2)), "2 values, but the graph has 1"),
    (lambda: lower_pointwise_subgraph(build(1, lambda g, c, x: [c(aten.exp.default, x)])), "no meta['val']"),
    (lambda: lower_pointwise(build(1, lambda g, c, x: [c(aten.view.default, x, [5])]), (torch.randn(3),)),
     "does not run on example_inputs"),
])
def test_bad_input_gives_a_lowering_error(call, message):
    with pytest.raises(LoweringError, match=message.replace("[", r"\[").replace("]", r"\]").replace("'", "'")):
        call()


# --- the contract ------------------------------------------------------------------------------------


def _contract(before, after, inputs):
    return CONTRACTS["pointwise-kernels-only"].check(ContractContext(before, after, inputs, after(*inputs)))


def test_the_contract_flags_a_pointwise_op_left_outside_a_kernel():
    gm = build(1, lambda g, c, x: [c(aten.sum.default, c(aten.exp.default, x))])
    x = (torch.randn(3),)
    errors = _contract(gm, gm, x)
    assert len(errors) == 1 and "aten.exp.default" in errors[0]
    assert _contract(gm, lower_pointwise(gm, x), x) == []
    assert not check(lambda g: g, gm, x, ensure=["pointwise-kernels-only"]).ok


@pytest.mark.parametrize("alpha", [-1, 0, 2])
def test_a_bool_add_casts_its_alpha_to_bool_as_eager_does(alpha):
    """add(a, b, alpha) of bool tensors: eager casts alpha to bool first (-1 and 2 make a | b, 0 makes
    a); computing a + alpha * b in int8 gave False for True + -1 * True (near misses found it, moving
    a drawn alpha to -1)."""
    gm = build(2, lambda g, c, x, y: [g.call_function(aten.add.Tensor, (x, y), {"alpha": alpha})])
    inputs = (torch.tensor([True, False, True, False]), torch.tensor([True, True, False, False]))
    assert_lowering_ok(gm, inputs)


def test_an_op_on_complex_values_stays_an_aten_call_and_the_rest_is_lowered():
    """Triton has no complex type: ne(x, y) of complex x, y stays an ATen call (the lowering falls back,
    as Inductor does, rather than refuse the graph: a drawn graph on an Intel Xeon held one), the
    float chain beside it is a kernel, and the contract holds. Left unlowered (an identity pass), the
    contract names the float ops and not ne of complex values; of real values, ne too."""
    gm = build(3, lambda g, c, x, y, z: [c(aten.ne.Tensor, x, y), c(aten.exp.default, c(aten.neg.default, z))])
    x, y = torch.randn(4, dtype=torch.complex64), torch.randn(4, dtype=torch.complex64)
    y[1] = x[1]
    inputs = (x, y, torch.randn(4))
    lowered = lower_pointwise(gm, inputs)
    assert launches(lowered) == 1 and aten_targets(lowered) == [aten.ne.Tensor]
    assert_lowering_ok(gm, inputs)
    for values, named in ((inputs, ["exp", "neg"]), ((torch.randn(4), torch.randn(4), torch.randn(4)), ["ne", "exp", "neg"])):
        verdict = check(lambda g: g, gm, values, ensure=["pointwise-kernels-only"], properties=["validity"])
        message = "\n".join(v.message for v in verdict.violations)
        assert [op for op in ("ne", "exp", "neg") if f"aten.{op}." in message] == named, message


def test_a_planted_broadcasting_bug_is_caught(monkeypatch):
    from reference_lowering.pointwise import _index

    real = _index.offset
    monkeypatch.setattr(_index, "offset", lambda sizes, shape, strides, axes=None: _index.XINDEX
                        if len(shape) < len(sizes) else real(sizes, shape, strides, axes))
    gm = build(2, lambda g, c, x, b: [c(aten.add.Tensor, x, b)])
    verdict = check(lower, gm, (torch.randn(3, 4), torch.randn(4)), properties=["values"])
    assert not verdict.ok and verdict.violations[0].property == "values"


def test_the_sign_of_nan_follows_eager_through_narrow_floats():
    # frac(inf) is a NaN; c10's float -> bf16 makes it positive, f16 and f32 keep x86's negative one
    gm = build(1, lambda g, c, x: [c(aten.copysign.Tensor, x, c(aten.frac.default, x))])
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        x = torch.tensor([float("inf"), -float("inf"), 2.5], dtype=dtype)
        assert torch.equal(lower_pointwise(gm, (x,))(x)[0], gm(x)[0]), dtype


def test_two_regions_never_feed_each_other():
    # {a1, a2} and {b1, b2} are each a fine region, but a1 -> s -> b2 and b1 -> t -> a2: both kernels
    # would have to run before the other
    def body(g, c, x, y):
        a1, b1 = c(aten.exp.default, x), c(aten.neg.default, y)
        s = c(aten.expand.default, c(aten.sum.dim_IntList, a1, [0], True), [4])
        t = c(aten.expand.default, c(aten.sum.dim_IntList, b1, [0], True), [4])
        return [c(aten.mul.Tensor, a1, t), c(aten.mul.Tensor, b1, s)]

    gm = build(2, body)
    assert_lowering_ok(gm, (torch.randn(4), torch.randn(4)))


def _layout(kind):
    g = torch.Generator().manual_seed(3)
    if kind == "one_transposed":
        return torch.randn(40, 24, generator=g).t(), torch.randn(24, 40, generator=g)
    if kind == "both_transposed":
        return torch.randn(40, 24, generator=g).t(), torch.randn(40, 24, generator=g).t()
    if kind == "permuted_3d":
        return torch.randn(3, 20, 12, generator=g).permute(0, 2, 1), torch.randn(3, 12, 20, generator=g)
    if kind == "channels_last":
        return (torch.randn(2, 6, 5, 7, generator=g).contiguous(memory_format=torch.channels_last),
                torch.randn(2, 6, 5, 7, generator=g))
    raise ValueError(kind)


@pytest.mark.parametrize("kind,axes", [("one_transposed", 2), ("both_transposed", 1), ("permuted_3d", 2),
                                       ("channels_last", 2)])
def test_operands_of_different_layouts_are_walked_in_order(kind, axes):
    """Operands whose stride-1 dims differ get a 2-D tile (each contiguous along one tile axis); when
    every operand is transposed alike, one flat index walks them in memory order. Values match eager."""
    from reference_lowering.pointwise import _index

    x, y = _layout(kind)
    gm = build(2, lambda g, c, a, b: [c(aten.mul.Tensor, c(aten.sub.Tensor, a, b), 0.5)])
    lowered = lower_pointwise(gm, (x, y))
    (kernel,) = lowered.meta["pointwise_kernels"]
    assert len(kernel.code.axes) == axes
    contiguous = [a for a in kernel.code.accesses if a[1] == _index.XINDEX]
    if axes == 1:  # the flat index is each operand's own memory order
        assert len(contiguous) == 3, kernel.source
    torch.testing.assert_close(lowered(x, y)[0], (x - y) * 0.5, rtol=0, atol=0)


# --- CPU and GPU kernels in one process ------------------------------------------------------------


@pytest.mark.skipif(_runtime.interpreting(), reason="TRITON_INTERPRET=1 set by the user: every kernel is interpreted")
def test_cpu_and_gpu_lowerings_each_run_in_their_own_mode_in_one_process():
    """A CPU lowering runs in the interpreter; the same graph lowered for the GPU path afterwards (the
    meta device: no GPU needed) is a compiled kernel that compiles for sm_90; the CPU one still runs.
    Nothing sets TRITON_INTERPRET."""
    from reference_lowering.pointwise import compile_for_target

    gm = build(2, lambda g, c, x, y: [c(aten.mul.Tensor, c(aten.sigmoid.default, x), y)])
    x, y = torch.randn(33), torch.randn(33)
    cpu = lower_pointwise_subgraph(gm, (x, y))
    torch.testing.assert_close(cpu(x, y)[0], gm(x, y)[0])
    meta = lower_pointwise_subgraph(gm, (x.to("meta"), y.to("meta")))
    assert (cpu.mode, meta.mode) == ("interpreter", "compiled") and cpu.name == meta.name and cpu.fn is not meta.fn
    figures = compile_for_target(meta, "sm_90")
    assert figures.instructions > 0 and figures.registers > 0
    torch.testing.assert_close(cpu(x, y)[0], gm(x, y)[0])
    assert "TRITON_INTERPRET" not in os.environ


def test_hypot_is_exact_where_the_sum_of_squares_is():
    """hypot(6, 1) is float64(sqrt(37)), as eager's std::hypot gives: trunc(hypot(6, 1) / sqrt(37)) is
    1 (the scaled form was an ulp low, and the trunc gave 0: make conformance, seed 1771752921)."""
    import math

    gm = build(3, lambda g, c, a, b, d: [g.call_function(aten.div.Tensor_mode, (c(aten.hypot.default, a, b), d),
                                                         {"rounding_mode": "trunc"})])
    for dtype in (torch.float64, torch.float32):
        a, b = torch.tensor([6.0, 3.0, 5.0], dtype=dtype), torch.tensor([1.0, 4.0, 12.0], dtype=dtype)
        d = torch.tensor([math.sqrt(37), 5.0, 13.0], dtype=dtype)
        assert lower_pointwise(gm, (a, b, d))(a, b, d)[0].tolist() == [1.0, 1.0, 1.0], dtype
