"""The op catalog is a table of facts: complete for what the issue names, and true in eager torch."""

from __future__ import annotations

import collections

import pytest
import torch
from hypothesis import strategies as st

from strategies import CATEGORIES, DOMAINS, OPS, graphs
from strategies._draw.support import cpu_support
from strategies._catalog.vocabulary import ALL_DTYPES, ARG_KINDS, BOOL, FILL, MASK, TENSORS, Kwarg
from tests._debug import find_any

aten = torch.ops.aten
NAMES = {row.name for row in OPS}


def test_rows_are_unique_and_well_formed():
    assert len(NAMES) == len(OPS)
    for row in OPS:
        assert isinstance(row.overload, torch._ops.OpOverload)
        assert row.category in CATEGORIES
        assert {a for a in row.args if not isinstance(a, tuple)} <= ARG_KINDS, row
        assert set(row.domain) <= set(DOMAINS), row
        assert row.dtypes, row
        assert all(isinstance(k, Kwarg) for k in row.kwargs)
        schema_names = {a.name for a in row.overload._schema.arguments}
        assert {k.name for k in row.kwargs} <= schema_names, row


def test_catalog_covers_what_the_issue_names():
    counts = collections.Counter(row.category for row in OPS)
    assert counts["pointwise"] >= 45 and counts["view"] >= 12 and counts["reduction"] >= 4
    data_inplace = [r for r in OPS if r.category == "inplace" and not r.mutates_metadata
                    and r.overload not in (aten.copy_.default, aten.fill_.Scalar)]
    assert len(data_inplace) >= 15
    named = """abs neg exp log sqrt rsqrt reciprocal floor ceil round trunc sign erf tanh sigmoid gelu relu
        add.Tensor sub.Tensor mul.Tensor div.Tensor div.Tensor_mode floor_divide remainder fmod pow.Tensor_Tensor
        pow.Tensor_Scalar maximum minimum atan2 eq lt logical_and bitwise_and where clamp.default clamp.Tensor
        _to_copy view reshape permute transpose t expand squeeze unsqueeze slice select flatten alias detach as_strided
        sum mean amax amin clone copy_ fill_""".split()
    for name in named:
        assert any(n.removeprefix("aten.").startswith(name + ("" if "." in name else ".")) for n in NAMES), name
    modes = {row.name: row for row in OPS}["aten.div.Tensor_mode"].kwargs[0].values
    assert {None, "trunc", "floor"} <= set(modes)


def _operand_dtype(row, node):
    """The dtype of the operand whose dtype the row's ``dtypes`` describes (not a mask); a
    factory's is its result's."""
    if row.args[0] == FILL:
        return node.meta["val"].dtype
    if row.draws_whole_call:
        first = node.args[0]
        return (first[0] if isinstance(first, list) else first).meta["val"].dtype
    position = next(i for i, k in enumerate(row.args) if k != MASK)
    arg = node.args[position][0] if row.args[position] == TENSORS else node.args[position]
    return arg.meta["val"].dtype


def _dtype_cases():
    """(row, dtype) for the rows the CPU has kernels for (the CUDA attention overloads are drawn on
    CUDA only: test_device.py). make test checks one dtype a row, the j-th row its j-th dtype (in
    turn, so every dtype is checked on some rows); make sweep every dtype of every row."""
    for j, row in enumerate(cpu_support().narrow(OPS)):
        dtypes = sorted(row.dtypes, key=str)
        for k, dtype in enumerate(dtypes):
            yield pytest.param(row, dtype, id=f"{row.name}-{str(dtype)[6:]}",
                               marks=() if k == j % len(dtypes) else (pytest.mark.sweep,))


@pytest.mark.parametrize("row, dtype", list(_dtype_cases()))
def test_every_listed_dtype_really_runs(row, dtype):
    """Each (op, dtype) the table lists is drawable, so it runs in eager (every node is run while drawn)."""
    drawn = dtype if dtype in ALL_DTYPES else torch.float32  # int8 and uint8 come from quantize
    strategy = graphs(ops=[row], dtypes=st.sampled_from([drawn] + ([] if drawn in BOOL else [torch.bool])),
                      mutations=row.category == "inplace", random=row.category == "random", max_nodes=3,
                      device="cpu")

    def has_it(case):
        return any(n.target is row.overload and _operand_dtype(row, n) is dtype for n in case.gm.graph.nodes
                   if n.op == "call_function")

    find_any(strategy, has_it, max_examples=600)
