"""The pointwise lowering's fixed cases: the op table's special-value grid and the golden graphs.

tests/test_pointwise_table.py judges every catalog pointwise row on its grid (``grid_cases``), and
tests/test_pointwise_golden.py snapshots the kernels of the ``GOLDEN`` graphs; both judge them on
CUDA too, in a process of their own (tests/_cuda_run.py), which reads the same cases from here.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import torch

from strategies import OPS
from strategies._catalog import vocabulary as C
from tests.graphs import build

aten = torch.ops.aten


# The lowering's table: the catalog's pointwise rows on the dtypes the lowering takes (Triton has no
# complex type: reference_lowering refuses complex operands with a LoweringError, and a complex row's
# cases here are its real ones).
POINTWISE = [dataclasses.replace(row, dtypes=row.dtypes - C.COMPLEX) for row in OPS if row.category == C.POINTWISE]


FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 3.0, -3.7, 0.7, 1e-30, -1e-30, 1e30, -1e30, 1e-40,
          100.0, -100.0, 7.0, 88.5, 1.7e38, -1.7e38, math.inf, -math.inf, math.nan]


INTS = [-7, -2, -1, 0, 1, 2, 3, 7, 100, -100]


FLOAT_SCALARS = [2.0, 0.5, -1.5, 3.0, -1.0, 0.0, -0.5, -0.998046875, math.inf, math.nan]  # -0.998...: -1 in bf16


INT_SCALARS = [2, -3, 0, 5, 1]


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


def grid_cases(row, dtype):
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
            kw_options.append([(kw.name, d) for d in C.ALL_DTYPES if not d.is_complex])  # (no complex in Triton)
        elif kw.values == C.SCALAR:
            kw_options.append([(kw.name, v) for v in ([2, 1] if dtype != torch.bool else [True])] +
                              ([(kw.name, 0.5)] if dtype.is_floating_point else []))
        else:
            kw_options.append([(kw.name, v) for v in kw.values])
    for args in itertools.product(*options):
        for kws in itertools.product(*kw_options) if kw_options else [()]:
            yield args, dict(kws)


def graph_of(row, args, kwargs):
    return graph_of_cases(row, [(args, kwargs)])


def graph_of_cases(row, cases):
    """One graph calling ``row`` once per case ``(args, kwargs)``, an output each; a tensor that several
    cases share (``grid_cases`` reuses each operand's grid) is one input. Returns ``(gm, inputs)``."""
    tensors = []
    for args, _ in cases:
        tensors += [a for a in args if isinstance(a, torch.Tensor) and not any(a is t for t in tensors)]

    def body(g, call, *xs):
        def node(a):
            return xs[next(i for i, t in enumerate(tensors) if t is a)] if isinstance(a, torch.Tensor) else a

        return [g.call_function(row.overload, tuple(map(node, args)), kwargs) for args, kwargs in cases]

    return build(len(tensors), body), tuple(tensors)


def eager_ok(row, args, kwargs) -> bool:
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


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _chain8(g, c, x):
    v = x
    for op in (aten.sin.default, aten.exp.default, aten.neg.default, aten.relu.default, aten.sigmoid.default,
               aten.abs.default, aten.cos.default, aten.tanh.default):
        v = c(op, v)
    return [v]


def _where_mask(g, c, x, y):
    m = c(aten.gt.Tensor, x, y)
    return [c(aten.masked_fill.Scalar, c(aten.where.self, m, x, y), c(aten.isnan.default, x), 0.0)]


def _cast_chain(g, c, x):
    h = g.call_function(aten._to_copy.default, (x,), {"dtype": torch.float16})
    return [g.call_function(aten._to_copy.default, (c(aten.mul.Tensor, h, 3),), {"dtype": torch.float32})]


# name -> (graph body, inputs, dynamic); inputs are made from fixed seeds
GOLDEN = {
    "add": (lambda g, c, x, y: [c(aten.add.Tensor, x, y)],
            lambda: (torch.randn(64, generator=_gen(0)), torch.randn(64, generator=_gen(1))), False),
    "chain8": (_chain8, lambda: (torch.randn(8, 32, generator=_gen(2)),), False),
    "bias_gelu_tanh": (lambda g, c, x, b: [g.call_function(aten.gelu.default, (c(aten.add.Tensor, x, b),),
                                                           {"approximate": "tanh"})],
                       lambda: (torch.randn(16, 24, generator=_gen(3)), torch.randn(24, generator=_gen(4))), False),
    "cast_chain_f16": (_cast_chain, lambda: (torch.randn(100, generator=_gen(5)),), False),
    "bf16_mul_add": (lambda g, c, x, y: [c(aten.add.Tensor, c(aten.mul.Tensor, x, y), 1)],
                     lambda: (torch.randn(50, generator=_gen(6)).bfloat16(), torch.randn(50, generator=_gen(7)).bfloat16()),
                     False),
    "two_outputs": (lambda g, c, x, y: [c(aten.add.Tensor, x, y), c(aten.mul.Tensor, x, y)],
                    lambda: (torch.randn(6, 6, generator=_gen(8)), torch.randn(6, 6, generator=_gen(9))), False),
    "transposed_input": (lambda g, c, x, y: [c(aten.sub.Tensor, x, y)],
                         lambda: (torch.randn(12, 10, generator=_gen(10)).t(), torch.randn(10, 12, generator=_gen(11))),
                         False),
    "expanded_input": (lambda g, c, x, r: [c(aten.mul.Tensor, x, c(aten.expand.default, r, [9, 7]))],
                       lambda: (torch.randn(9, 7, generator=_gen(12)), torch.randn(9, 1, generator=_gen(13))), False),
    "int_floor_div_remainder": (lambda g, c, a, b: [c(aten.floor_divide.default, a, b), c(aten.remainder.Tensor, a, b)],
                                lambda: (torch.randint(-50, 50, (40,), generator=_gen(14), dtype=torch.int32),
                                         torch.randint(1, 9, (40,), generator=_gen(15), dtype=torch.int32)), False),
    "where_masked_fill": (_where_mask, lambda: (torch.randn(30, generator=_gen(16)), torch.randn(30, generator=_gen(17))),
                          False),
    "pow_atan2_f64": (lambda g, c, x, y: [c(aten.atan2.default, c(aten.pow.Tensor_Scalar, x, 1.7), y)],
                      lambda: (torch.rand(20, generator=_gen(18), dtype=torch.float64) + 0.1,
                               torch.randn(20, generator=_gen(19), dtype=torch.float64)), False),
    "dynamic_bias_relu": (lambda g, c, x, b: [c(aten.relu.default, c(aten.add.Tensor, x, b))],
                          lambda: (torch.randn(8, 16, generator=_gen(20)), torch.randn(16, generator=_gen(21))), True),
    "reduction_between_kernels": (lambda g, c, x: [c(aten.exp.default, c(aten.amax.default, c(aten.neg.default, x),
                                                                          [1], True))],
                                  lambda: (torch.randn(5, 11, generator=_gen(22)),), False),
}
