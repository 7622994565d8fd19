"""Special values judged portably: the strict and relaxed policies, and eager's own two kernels.

strict (the default): NaN/+-inf exactly where the original has them. relaxed: where the original
lost a value the fp64 reference has (an intermediate overflow), the reference's value or a finite
value within tolerance of it passes; a NaN/inf the original does not have fails under both. Where
eager's vectorized and scalar CPU kernels disagree, the result of either passes under both.
"""

from __future__ import annotations

import importlib

import pytest
import torch
from torch.library import Library

from conformance import UsageError, check, verify
from conformance.oracle import compare_outputs, compare_values
from conformance.reruns import scalar_path_run
from strategies import attach_meta
from tests.graphs import build

aten = torch.ops.aten
verify_module = importlib.import_module("conformance.checker")
oracle = importlib.import_module("conformance.oracle")
reruns = importlib.import_module("conformance.reruns")


def _replace_outputs(make):
    """A pass whose graph returns ``make(graph, x)`` for its first input, instead of what it computed."""

    def pass_(gm):
        g = gm.graph
        x = next(n for n in g.nodes if n.op == "placeholder")
        out = next(n for n in g.nodes if n.op == "output")
        with g.inserting_before(out):
            out.args = ((make(g, x),),)
        g.eliminate_dead_code()
        gm.recompile()
        return gm

    return pass_


to_clone = _replace_outputs(lambda g, x: g.call_function(aten.clone.default, (x,)))
to_double_half = _replace_outputs(
    lambda g, x: g.call_function(aten.div.Tensor, (g.call_function(aten.mul.Tensor, (x, 2.0)), 2.0)))


def _mul_div(g, c, x):
    return [c(aten.div.Tensor, c(aten.mul.Tensor, x, 2.0), 2.0)]


HUGE = (torch.tensor([3e38, 1.0, -3e38]),)


def test_a_pass_that_avoids_an_overflow_fails_strict_and_passes_relaxed():
    gm = build(1, _mul_div)
    strict = check(to_clone, gm, HUGE)
    assert [v.property for v in strict.violations] == ["values"]
    message = strict.violations[0].message
    assert "NaN and +-inf at the same positions as the original" in message
    assert "the original overflows here (the fp64 reference is 3e+38); if your pass may avoid overflow, use " \
           "--specials relaxed" in message
    assert check(to_clone, gm, HUGE, specials="relaxed").ok


def test_a_pass_that_introduces_an_overflow_fails_under_both_policies():
    gm = build(1, lambda g, c, x: [c(aten.clone.default, x)])
    for specials in ("strict", "relaxed"):
        verdict = check(to_double_half, gm, HUGE, specials=specials)
        assert [v.property for v in verdict.violations] == ["values"], specials
        assert "the original overflows" not in verdict.violations[0].message


def test_relaxed_keeps_an_overflow_the_fp64_reference_has_too():
    # a cast to f16 rounds in the fp64 reference too: 1e5 is inf there, and dropping the casts is a bug
    def casts(g, c, x):
        h = g.call_function(aten._to_copy.default, (x,), {"dtype": torch.float16})
        return [g.call_function(aten._to_copy.default, (h,), {"dtype": torch.float32})]

    gm = build(1, casts)
    verdict = check(to_clone, gm, (torch.tensor([1e5, 1.0]),), specials="relaxed")
    assert [v.property for v in verdict.violations] == ["values"]
    assert "the original overflows" not in verdict.violations[0].message  # the reference overflows too


def test_relaxed_wants_the_reference_value_not_any_finite_one():
    gm = build(1, _mul_div)
    to_zero = _replace_outputs(lambda g, x: g.call_function(aten.mul.Tensor, (x, 0.0)))
    assert not check(to_zero, gm, HUGE, specials="relaxed").ok


def test_compare_values_relaxed_rules():
    e = torch.tensor([float("inf"), float("nan"), float("inf"), 1.0])
    r = torch.tensor([3e38, float("inf"), float("inf"), 1.0], dtype=torch.float64)
    ok = torch.tensor([3e38, float("inf"), float("inf"), 1.0])
    assert compare_values(ok, e, "o", reference=r, specials="relaxed") is None
    assert compare_values(ok, e, "o", reference=r) is not None  # strict
    for bad in ([3e38, float("inf"), 3e38, 1.0],  # the reference overflows here: must stay inf
                [3e38, float("inf"), float("inf"), float("inf")],  # an inf nobody has
                [1e38, float("inf"), float("inf"), 1.0]):  # finite, but not the reference's value
        assert compare_values(torch.tensor(bad), e, "o", reference=r, specials="relaxed") is not None, bad
    # without a reference there is nothing to relax against
    assert compare_values(ok, e, "o", specials="relaxed") is not None
    with pytest.raises(ValueError, match="specials='lenient'"):
        compare_values(ok, e, "o", specials="lenient")


def test_bad_specials_is_a_usage_error():
    gm = build(1, _mul_div)
    with pytest.raises(UsageError, match="specials='loose', but should be one of strict, relaxed"):
        check(to_clone, gm, HUGE, specials="loose")
    with pytest.raises(UsageError, match="specials='loose'"):
        verify(to_clone, specials="loose", max_examples=1, repro_dir=None)


# --- eager disagreeing with itself ----------------------------------------------------------------
# A pointwise op whose "vectorized loop" (contiguous operands of 2+ elements) gives NaN at +inf while
# its "scalar kernel" gives inf: eager's own disagreement, as measured for gelu on AVX-512 and fmod
# by a subnormal on AVX2, but the same on every CPU.
_LIB = Library("fxc_specials_test", "DEF")
_LIB.define("quirky(Tensor x) -> Tensor", tags=(torch.Tag.pointwise,))


def _quirky(x):
    out = x.clone()
    if x.is_contiguous() and x.numel() > 1:
        out[torch.isinf(x) & (x > 0)] = float("nan")
    return out


_LIB.impl("quirky", _quirky, "CPU")
_LIB.impl("quirky", lambda x: torch.empty_like(x), "Meta")
QUIRKY = torch.ops.fxc_specials_test.quirky.default
INF = (torch.tensor([1.0, float("inf"), -2.0, 4.0]),)


def _retarget(target):
    def pass_(gm):
        for n in gm.graph.nodes:
            if n.target == QUIRKY:
                n.target = target
        gm.recompile()
        return gm

    return pass_


def _quirky_graph():
    return build(1, lambda g, c, x: [c(aten.mul.Tensor, c(QUIRKY, x), 2.0)])


def test_scalar_path_run_takes_eager_scalar_kernels():
    gm = _quirky_graph()
    assert torch.isnan(gm(*INF)[0][1])  # the vectorized loop
    outputs = scalar_path_run(gm, INF)[0]
    assert torch.equal(outputs[0], torch.tensor([2.0, float("inf"), -4.0, 8.0]))


def test_scalar_path_keeps_in_place_writes_and_aliases():
    def body(g, c, x):
        y = c(aten.mul.Tensor, x, 1.0)
        return [c(aten.add_.Tensor, y, 1.0), y]

    gm = build(1, body)
    out = scalar_path_run(gm, (torch.arange(4.0),))[0]
    assert torch.equal(out[0], torch.arange(4.0) + 1) and out[0].data_ptr() == out[1].data_ptr()


def test_a_result_matching_eager_scalar_kernel_passes(monkeypatch):
    gm = _quirky_graph()
    assert check(_retarget(aten.clone.default), gm, INF).ok
    assert compare_outputs(gm, INF, [torch.tensor([2.0, float("inf"), -4.0, 8.0])]) is None
    assert compare_outputs(gm, INF, [torch.tensor([2.0, float("inf"), -4.0, 9.0])]) is not None
    # the same verdict without eager's scalar kernels is a violation: the test above can fail
    monkeypatch.setitem(reruns.RERUNS, "scalar", lambda gm, inputs: None)
    verdict = check(_retarget(aten.clone.default), gm, INF)
    assert [v.property for v in verdict.violations] == ["values"]


def test_a_result_matching_neither_eager_kernel_fails():
    verdict = check(_retarget(aten.neg.default), _quirky_graph(), INF)
    assert [v.property for v in verdict.violations] == ["values"]


def test_a_mutated_input_may_match_either_eager_kernel(monkeypatch):
    def body(g, c, x):
        g.call_function(aten.copy_.default, (x, c(QUIRKY, x)))
        return [c(aten.mul.Tensor, x, 1.0)]

    assert check(_retarget(aten.clone.default), build(1, body), INF).ok
    monkeypatch.setitem(reruns.RERUNS, "scalar", lambda gm, inputs: None)
    verdict = check(_retarget(aten.clone.default), build(1, body), INF)
    assert {v.property for v in verdict.violations} == {"values", "mutations"}


def test_eager_alternatives_are_computed_only_for_a_value_that_differs():
    calls = []

    def alternatives():
        calls.append(1)
        return [torch.tensor([1.0, float("inf")])]

    x = torch.tensor([1.0, float("nan")])
    assert compare_values(x.clone(), x, "o", alternatives=alternatives) is None and not calls
    assert compare_values(torch.tensor([1.0, float("inf")]), x, "o", alternatives=alternatives) is None
    assert calls == [1]


# --- the option everywhere ------------------------------------------------------------------------


def test_the_plugin_module_judges_with_the_policy():
    from types import SimpleNamespace

    from conformance.suite import test_third_party_pass as module

    class Data:  # what Hypothesis' st.data() hands the module's test: here, one fixed graph
        def draw(self, strategy, label=None):
            return SimpleNamespace(gm=build(1, _mul_div), example_inputs=HUGE, symbolic=None)

    put = verify_module.load_pass(to_clone)
    module._check((put, (), None, "relaxed", False, "cpu"), Data(), "values")
    with pytest.raises(AssertionError, match="the original overflows here"):
        module._check((put, (), None, "strict", False, "cpu"), Data(), "values")


def test_on_a_gpu_a_result_of_flushed_subnormal_inputs_passes_and_on_a_cpu_it_does_not(monkeypatch):
    """The GPU's approximate instructions flush subnormal operands (log(1e-40) is -inf there); eager
    CUDA does not. On a GPU the oracle accepts the original's value on flushed inputs; on a CPU, where
    nothing flushes, the same result is a violation."""
    from conformance import oracle

    aten = torch.ops.aten
    gm = build(1, lambda g, c, x: [c(aten.log.default, x)])
    tiny = torch.finfo(torch.float32).tiny

    def flushing(gm):  # what a kernel with .ftz instructions computes: log of the flushed input
        log = next(n for n in gm.graph.nodes if n.target == aten.log.default)
        x = log.args[0]
        with gm.graph.inserting_before(log):
            keep = gm.graph.call_function(aten.ge.Scalar, (gm.graph.call_function(aten.abs.default, (x,)), tiny))
            log.args = (gm.graph.call_function(aten.where.ScalarOther, (keep, x, 0.0)),)
        gm.recompile()
        return gm

    x = torch.tensor([1e-40, 1.0, 2.0])
    flushed = [torch.log(torch.tensor([0.0, 1.0, 2.0]))]
    assert oracle.compare_outputs(gm, (x,), flushed) is not None
    assert check(flushing, gm, (x,), properties=["values"]).violations
    monkeypatch.setattr(reruns, "on_gpu", lambda inputs: True)
    assert oracle.compare_outputs(gm, (x,), flushed) is None
    assert check(flushing, gm, (x,), properties=["values"]).ok
    wrong = [torch.tensor([float("nan"), 1.0, 2.0])]  # not what flushing gives: still caught
    assert oracle.compare_outputs(gm, (x,), wrong) is not None
    assert reruns.flush_subnormals(torch.tensor([-1e-40, 1e-30])).tolist() == [0.0, pytest.approx(1e-30)]
    assert torch.signbit(reruns.flush_subnormals(torch.tensor([-1e-40]))).item()


_CALLS = []


def _differs_each_run(x):
    """Stands in for a kernel whose rounding depends on the run (CUDA atomics): the first float32 run
    gives x + 1, later ones round the other way; the fp64 reference is exact."""
    _CALLS.append(x.dtype)
    late = sum(d == torch.float32 for d in _CALLS) > 1
    return x + 1 + (2 ** -10 if late and x.dtype == torch.float32 else 0)


torch.fx.wrap("_differs_each_run")


def test_on_a_gpu_a_second_run_of_the_original_is_eagers_result_too(monkeypatch):
    """Where eager disagrees with itself between runs (atomics on a GPU), a result matching another
    run of the original passes; on the CPU (no such kernels) it does not, and a value no run gives
    fails everywhere."""
    gm = torch.fx.symbolic_trace(lambda x: _differs_each_run(x))
    x = (torch.zeros(3),)
    monkeypatch.setitem(reruns.RERUNS, "scalar", lambda gm, inputs: None)  # another run too, on the CPU
    other = [torch.full((3,), 1 + 2 ** -10)]
    wrong = [torch.full((3,), 1 + 2 ** -5)]
    _CALLS.clear()
    assert oracle.compare_outputs(gm, x, other) is not None
    monkeypatch.setattr(reruns, "on_gpu", lambda inputs: True)
    _CALLS.clear()
    assert oracle.compare_outputs(gm, x, other) is None
    _CALLS.clear()
    assert oracle.compare_outputs(gm, x, wrong) is not None
    assert torch.float32 in _CALLS[2:]  # the alternative was run: the check above could pass by it


# --- the sign of a NaN an op makes ------------------------------------------------------------------

NAN_SIGNS = (torch.tensor([-float("nan"), 0.5, float("nan")]), torch.tensor([1.0, 2.0, 3.0]))


def _sign_of_exp(g, c, x0, x1):
    return [c(aten.copysign.Tensor, x1, c(aten.exp.default, x0))]


def _exp_nans(make):
    """A pass that makes each NaN ``exp`` returns ``make(nan)``: ``where(isnan(e), make(e), e)``."""
    def pass_(gm):
        g = gm.graph
        for n in list(g.nodes):
            if n.target == aten.exp.default:
                with g.inserting_before(n.next):
                    isnan = g.call_function(aten.isnan.default, (n,))
                    made = make(g, n)
                    new = g.call_function(aten.where.self, (isnan, made, n))
                n.replace_all_uses_with(new, delete_user_cb=lambda u: u.target == aten.copysign.Tensor)
        gm.recompile()
        return attach_meta(gm, NAN_SIGNS)

    return pass_


def test_a_nan_whose_sign_an_op_drops_is_eagers_result_too():
    """exp(-nan) is -nan on an AVX-512 CPU's eager bfloat16 kernels and +nan under the default
    capability: the sign is not specified, and copysign reading it gives either sign. A pass whose
    NaNs are positive passes on every CPU."""
    gm = build(2, _sign_of_exp)
    positive = _exp_nans(lambda g, n: g.call_function(aten.abs.default, (n,)))
    assert check(positive, gm, NAN_SIGNS, device="cpu").ok
    for sign_of_first in (1.0, -1.0):  # what either machine gives
        assert compare_outputs(gm, NAN_SIGNS, [torch.tensor([sign_of_first, 2.0, 3.0])]) is None


def test_a_nan_sign_no_eager_gives_fails(monkeypatch):
    gm = build(2, _sign_of_exp)
    # +nan made negative: exp(+nan) is +nan on every machine
    negative = _exp_nans(lambda g, n: g.call_function(aten.neg.default, (g.call_function(aten.abs.default, (n,)),)))
    verdict = check(negative, gm, NAN_SIGNS, device="cpu")
    assert [v.property for v in verdict.violations] == ["values"] and "output[0]" in verdict.violations[0].message
    # the sign-bit operations keep a NaN's sign: -exp(+nan) is -nan, and copysign reads it
    neg = build(2, lambda g, c, x0, x1: [c(aten.copysign.Tensor, x1, c(aten.neg.default, c(aten.exp.default, x0)))])
    assert compare_outputs(neg, NAN_SIGNS, [torch.tensor([1.0, -2.0, -3.0])]) is None
    assert compare_outputs(neg, NAN_SIGNS, [torch.tensor([1.0, -2.0, 3.0])]) is not None
    # and the rule is what passes the positive pass: without it, a CPU whose exp keeps the sign flags it
    monkeypatch.setitem(reruns.RERUNS, "positive_nan", lambda gm, inputs: None)
    eager_first = torch.signbit(build(2, _sign_of_exp)(*NAN_SIGNS)[0][0]).item()
    assert (compare_outputs(gm, NAN_SIGNS, [torch.tensor([1.0, 2.0, 3.0])]) is None) == (not eager_first)


def test_positive_nan_run_is_none_where_no_op_makes_a_nan():
    gm = build(2, _sign_of_exp)
    assert reruns.positive_nan_run(gm, (torch.ones(3), torch.ones(3))) is None
    out = reruns.positive_nan_run(gm, NAN_SIGNS)[0]
    assert torch.equal(out[0], torch.tensor([1.0, 2.0, 3.0]))


# --- ops whose default epsilon is their dtype's -------------------------------------------------------


def _eps_set_to(value):
    """A pass that gives every rms_norm an explicit ``eps`` (where the original left it to the dtype)."""
    def pass_(gm):
        for n in gm.graph.nodes:
            if n.target == aten.rms_norm.default:
                args = [*n.args[:3], *[None] * (3 - len(n.args))]  # input, normalized_shape, weight
                n.args = (*args, value)
        gm.recompile()
        return gm

    return pass_


def test_an_eps_default_changed_is_caught_where_the_dtype_decides_it():
    """rms_norm's eps=None is float32's epsilon in eager; the fp64 reference keeps it (not float64's), so a
    pass that sets eps=1e-5 is caught at inputs near 1e-4 (88% off), and one that spells out the
    dtype's own epsilon passes."""
    gm = build(1, lambda g, c, x: [c(aten.rms_norm.default, x, [4])])
    x = (torch.full((2, 4), 1e-4, dtype=torch.float32) * torch.tensor([1.0, 1.5, 0.5, 2.0]),)
    verdict = check(_eps_set_to(1e-5), gm, x, device="cpu")
    assert [v.property for v in verdict.violations] == ["values"], verdict
    assert check(_eps_set_to(torch.finfo(torch.float32).eps), gm, x, device="cpu").ok
