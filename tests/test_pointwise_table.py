"""The op table, row by row: each catalog pointwise op, each dtype it takes, on a grid of special
values, lowered to one kernel and judged by the harness's oracle against eager (fp64 reference
included), on the CPU and, where there is one, on a CUDA device (kernels compiled by Triton, in a
process of their own: tests/_cuda_run.py). Also: the table covers the catalog; planted wrong rows
are caught."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from conformance import check
from reference_lowering.pointwise import TRITON, lower_pointwise
from reference_lowering.pointwise import _table
from strategies import OPS
from strategies import _catalog as C
from tests import _cuda_run
from tests.graphs import build

POINTWISE = [row for row in OPS if row.category == C.POINTWISE]

FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 3.0, -3.7, 0.7, 1e-30, -1e-30, 1e30, -1e30, 1e-40,
          100.0, -100.0, 7.0, 88.5, 1.7e38, -1.7e38, math.inf, -math.inf, math.nan]
INTS = [-7, -2, -1, 0, 1, 2, 3, 7, 100, -100]
FLOAT_SCALARS = [2.0, 0.5, -1.5, 3.0, -1.0, 0.0, -0.5, -0.998046875, math.inf, math.nan]  # -0.998...: -1 in bf16
INT_SCALARS = [2, -3, 0, 5, 1]
# "cpu" always; "cuda" where there is a device (its cases run in a process of their own)
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                                reason="needs a CUDA device"))]


def lower(gm, sample_inputs):
    return lower_pointwise(gm, sample_inputs)


# The lowering computes each op without intermediate overflow the math does not have; eager does not
# always (lerp without FMA under ATEN_CPU_CAPABILITY=default gives -inf for lerp(0, 1.7e38, -1.5),
# AVX2's fused multiply-add gives -2.55e38). So rows are judged under the relaxed special-values
# policy: where this CPU's eager loses a value the fp64 reference has, the reference's value passes.
# A NaN/inf eager does not have, or one the fp64 reference has too, must still match exactly; where
# eager's vectorized and scalar kernels disagree (fmod by a subnormal), either passes (the oracle).
SPECIALS = "relaxed"


def _values(dtype, domain):
    if dtype == torch.bool:
        return [False, True]
    if dtype.is_floating_point:
        return FLOATS
    vals = INTS
    if domain in (C.NONZERO, C.POSITIVE):
        vals = [v for v in vals if v != 0]
    if domain == C.EXPONENT:
        vals = [0, 1, 2, 3, 5]
    return vals


def _grid(values, dtype, position, arity):
    """Operand ``position`` of ``arity`` as a tensor varying along its own axis (an outer product)."""
    t = torch.tensor(values, dtype=torch.float64).to(dtype) if dtype != torch.bool else torch.tensor(values)
    shape = [1] * arity
    shape[position] = len(values)
    return t.reshape(shape)


def _scalars(dtype, domain):
    if dtype == torch.bool:
        return [True, False]
    if dtype.is_floating_point:
        return [s for s in FLOAT_SCALARS if domain != C.NONZERO or s != 0]
    if domain == C.EXPONENT:
        return [0, 2, 3]
    return [s for s in INT_SCALARS if domain not in (C.NONZERO,) or s != 0]


def _cases(row, dtype):
    """(args, kwargs) variants for one row and dtype: tensors from the special grid, every scalar and
    keyword choice."""
    tensor_positions = [i for i, k in enumerate(row.args) if k in (C.TENSOR, C.TENSOR_OR_SCALAR, C.MASK)]
    arity = max(1, len(tensor_positions))
    options = []
    for i, kind in enumerate(row.args):
        domain = row.domain_of(i)
        if kind == C.MASK:
            options.append([_grid([True, False, True], torch.bool, tensor_positions.index(i), arity)])
        elif kind == C.TENSOR:
            options.append([_grid(_values(dtype, domain), dtype, tensor_positions.index(i), arity)])
        elif kind == C.TENSOR_OR_SCALAR:
            options.append([_grid(_values(dtype, domain), dtype, tensor_positions.index(i), arity),
                            *_scalars(dtype, domain)])
        elif kind == C.SCALAR:
            options.append(_scalars(dtype, domain))
    kw_options = []
    for kw in row.kwargs:
        if kw.values == C.DTYPE:
            kw_options.append([(kw.name, d) for d in C.ALL_DTYPES])
        elif kw.values == C.SCALAR:
            kw_options.append([(kw.name, v) for v in ([2, 1] if dtype != torch.bool else [True])] +
                              ([(kw.name, 0.5)] if dtype.is_floating_point else []))
        else:
            kw_options.append([(kw.name, v) for v in kw.values])
    for args in itertools.product(*options):
        for kws in itertools.product(*kw_options) if kw_options else [()]:
            yield args, dict(kws)


def _graph(row, args, kwargs):
    tensors = [a for a in args if isinstance(a, torch.Tensor)]

    def body(g, call, *xs):
        it = iter(xs)
        real = [next(it) if isinstance(a, torch.Tensor) else a for a in args]
        return [g.call_function(row.overload, tuple(real), kwargs)]

    return build(len(tensors), body), tuple(tensors)


def _eager_ok(row, args, kwargs) -> bool:
    try:
        out = row.overload(*args, **kwargs)
    except (RuntimeError, ValueError):
        return False
    # float -> int casts of NaN, inf or out-of-range values are undefined in C++ (eager's own result
    # differs between CPU builds): not a property of the lowering
    if row.overload == torch.ops.aten._to_copy.default and not kwargs["dtype"].is_floating_point \
            and kwargs["dtype"] != torch.bool and args[0].dtype.is_floating_point:
        return False
    return out.numel() > 0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("row", POINTWISE, ids=lambda r: r.name)
def test_every_row_matches_eager_on_special_values(row, device):
    """On CUDA in a subprocess (every row in one, once per test process): this process may be in
    interpreter mode, which would not test the GPU path."""
    record = _cuda_run.judge_row(row, "cpu") if device == "cpu" else _cuda_run.batch("table")[row.name]
    assert record["cases"] > 0
    assert not record["failures"], _cuda_run.failure_report(record)
    assert record["modes"] == (["interpreter"] if device == "cpu" else ["compiled"]), record["modes"]


def test_the_table_covers_every_pointwise_op_of_the_catalog():
    missing = [row.name for row in POINTWISE if row.overload not in TRITON]
    assert not missing, f"catalog pointwise ops without a TRITON row: {missing}"


def test_every_table_row_is_a_catalog_op_or_tagged_pointwise():
    catalog = {row.overload for row in OPS}
    for op in TRITON:
        assert op in catalog or torch.Tag.pointwise in op.tags, op


@pytest.mark.parametrize("op,wrong", [
    # loses NaN propagation on every backend and Triton (tl.maximum's NaN behaviour differs between
    # Triton 3.6's interpreter, 3.9's and a GPU, so it would be a bug on some of them only)
    (torch.ops.aten.maximum.default, lambda o: f"tl.where({o.self} > {o.other}, {o.self}, {o.other})"),
    (torch.ops.aten.remainder.Tensor, lambda o: f"{o.self} % {o.other}"),  # C's sign, not Python's
    (torch.ops.aten.round.default, lambda o: f"tl.floor({o.self} + 0.5)" if o.is_float else o.self),  # not half-even
    # turns every overflow into 3e38, also where the fp64 reference overflows too (exp(1e30)): the
    # relaxed policy keeps those infinities
    (torch.ops.aten.exp.default, lambda o: f"tl.where(tl.exp({o.self}) == {o.const(float('inf'))}, {o.const(3e38)}, "
                                           f"tl.exp({o.self}))"),
    # introduces an overflow eager does not have (gelu(1e30) = 1e30): caught under both policies
    (torch.ops.aten.gelu.default, lambda o: f"{o.self} * {o.self} / {o.self}"),
])
def test_a_planted_wrong_row_is_caught(monkeypatch, op, wrong):
    row = next(r for r in POINTWISE if r.overload == op)
    monkeypatch.setitem(TRITON, op, _table.Row(TRITON[op].promote, TRITON[op].kind, wrong))
    caught = False
    for dtype in sorted(row.dtypes, key=str):
        for args, kwargs in _cases(row, dtype):
            if _eager_ok(row, args, kwargs):
                gm, inputs = _graph(row, args, kwargs)
                caught |= not check(lower, gm, inputs, properties=["values"], specials=SPECIALS).ok
    assert caught


def test_fmod_by_subnormal_divisors_is_in_the_grid_and_judged_by_both_eager_paths():
    """fmod(1, 1e-40) is exact in C; eager's AVX2 loop gives NaN (its quotient overflows) and its
    scalar kernel the exact value. The grid keeps such divisors: the lowering (C's fmod) must match
    the scalar kernel, and on a CPU whose vectorized loop differs, the oracle accepts either."""
    row = next(r for r in POINTWISE if r.overload == torch.ops.aten.fmod.Tensor)
    args = (torch.tensor([1.0, 1e30] * 9), torch.tensor([1e-40, 1e-30] * 9))
    gm, inputs = _graph(row, args, {})
    assert check(lower, gm, inputs, properties=["values"]).ok  # strict: no value lost, only a path differs
    lowered = lower(gm, inputs)(*inputs)[0]
    exact = torch.tensor([math.fmod(a, b) for a, b in zip(args[0].tolist(), args[1].tolist())], dtype=torch.float32)
    assert torch.equal(lowered, exact)
