"""The op table, row by row: each catalog pointwise op, each dtype it takes, on a grid of special
values, lowered to one kernel and judged by the harness's oracle against eager (fp64 reference
included), on the CPU and, where there is one, on a CUDA device (kernels compiled by Triton, in a
process of their own: tests/_cuda_run.py). Also: the table covers the catalog; planted wrong rows
are caught."""

from __future__ import annotations

import math

import pytest
import torch

from conformance import check
from reference_lowering.pointwise import TRITON, lower_pointwise
from reference_lowering.pointwise import _table
from strategies import OPS
from tests import _cuda_run
from tests.pointwise_cases import POINTWISE, SPECIALS, eager_ok, graph_of, grid_cases


# "cpu" always; "cuda" where there is a device (its cases run in a process of their own)
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                                reason="needs a CUDA device"))]


def lower(gm, sample_inputs):
    return lower_pointwise(gm, sample_inputs)


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
        for args, kwargs in grid_cases(row, dtype):
            if eager_ok(row, args, kwargs):
                gm, inputs = graph_of(row, args, kwargs)
                caught |= not check(lower, gm, inputs, properties=["values"], specials=SPECIALS).ok
    assert caught


def test_fmod_by_subnormal_divisors_is_in_the_grid_and_judged_by_both_eager_paths():
    """fmod(1, 1e-40) is exact in C; eager's AVX2 loop gives NaN (its quotient overflows) and its
    scalar kernel the exact value. The grid keeps such divisors: the lowering (C's fmod) must match
    the scalar kernel, and on a CPU whose vectorized loop differs, the oracle accepts either."""
    row = next(r for r in POINTWISE if r.overload == torch.ops.aten.fmod.Tensor)
    args = (torch.tensor([1.0, 1e30] * 9), torch.tensor([1e-40, 1e-30] * 9))
    gm, inputs = graph_of(row, args, {})
    assert check(lower, gm, inputs, properties=["values"]).ok  # strict: no value lost, only a path differs
    lowered = lower(gm, inputs)(*inputs)[0]
    exact = torch.tensor([math.fmod(a, b) for a, b in zip(args[0].tolist(), args[1].tolist())], dtype=torch.float32)
    assert torch.equal(lowered, exact)
