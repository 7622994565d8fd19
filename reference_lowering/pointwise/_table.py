"""TRITON: the op table, one commented row per ATen overload the pointwise lowering puts in a kernel.

A row says which operands take part in type promotion and how (torch's
``ELEMENTWISE_TYPE_PROMOTION_KIND``), and how to write the op over operands already converted to
the common dtype (``o.self``, ``o.other``, ...: Triton expressions in ``arithmetic(dtype)``; bools
in int8; f16/bf16 in fp32). A row returning a predicate says ``returns="bool"``. Integer and float
semantics differ where torch's do (floor vs trunc division, remainder sign, NaN propagation of
maximum/minimum and clamp); those branches are on ``o.is_float``.

tests/test_pointwise.py runs every row against eager on special values, per dtype, and checks that
every pointwise op of the strategies catalog has a row.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

aten = torch.ops.aten

DEFAULT, INT_TO_FLOAT, ALWAYS_BOOL, BOOL_TO_LONG, SELF = "default", "int_to_float", "always_bool", "bool_to_long", "self"


@dataclass(frozen=True)
class Row:
    """How one overload becomes a Triton expression.

    ``promote``: the schema arguments converted to the common dtype (the first must be a tensor);
    ``kind``: how the common dtype is found (SELF: the first operand's dtype); ``emit(o)``: the
    expression; ``predicate``: extra schema arguments that are bool masks; ``unsupported(args)``:
    a reason the call cannot be lowered (an unusual keyword), or None.
    """

    promote: tuple
    kind: str
    emit: object
    returns: str = "common"  # "common" or "bool"
    masks: tuple = ()
    rounds_scalars: bool = False  # eager converts scalar operands to an f16/bf16 dtype first
    # the result is one of its operands, or exactly their abs or negation, or a literal of the emit that
    # every float dtype holds (relu's 0): of f16/bf16 operands already rounded, it needs no rounding
    # (where each scalar operand is exact in that dtype too)
    selects: bool = False
    unsupported: object = None
    note: str = field(default="", compare=False)


def _unary(emit, kind=DEFAULT, **kw):
    return Row(("self",), kind, emit, **kw)


def _binary(emit, kind=DEFAULT, names=("self", "other"), **kw):
    return Row(names, kind, emit, **kw)


def _plus_scaled(o, a, b, sign, names):
    """``a + sign * alpha * b`` (add, sub, rsub). Eager computes floats as ``fma(b, sign * alpha, a)``,
    rounded once: CUDA's ``a + alpha * b`` is contracted by nvcc, and the CPU's vectorized kernels call
    ``vec::fmadd`` (so 1.7e38 - 2 * 1.7e38 is -1.7e38, not -inf). ``names``: the operands' schema names."""
    alpha = o.arg("alpha", 1)
    op = "+" if sign > 0 else "-"
    if o.dtype == torch.bool:  # eager casts alpha to bool first: add(a, b, alpha=-1) is a | b, alpha=0 is a
        alpha = int(bool(alpha))
        if alpha == 0:
            return a
    if alpha == 1:
        return f"{a} {op} {b}"
    if not o.is_float:
        return f"{a} {op} ({b} * {o.const(alpha)})"
    a, b = (x if o.tensor(n) else _filled_expr(o, x) for x, n in zip((a, b), names))  # helpers take blocks
    return _f(o, "fma", b, _filled(o, sign * alpha), a)


def _f(o, name, *args):
    """A helper call ``name_<dtype>(args)`` (see _helpers.py)."""
    return f"{o.helper(name)}({', '.join(args)})"


def _nan_max(a, b):  # torch.maximum: NaN wins
    return f"tl.where(({a} > {b}) | ({a} != {a}), {a}, {b})"


def _nan_min(a, b):
    return f"tl.where(({a} < {b}) | ({a} != {a}), {a}, {b})"


def _max(o, a, b):
    return _nan_max(a, b) if o.is_float else f"tl.maximum({a}, {b})"


def _min(o, a, b):
    return _nan_min(a, b) if o.is_float else f"tl.minimum({a}, {b})"


def _floor_div(o, a, b):
    return _f(o, "floordiv" if o.is_float else "floordiv_int", a, b)


def _trunc_div(o, a, b):
    return _f(o, "trunc", f"{a} / {b}") if o.is_float else f"({a} // {b})"


def _div_mode(o):
    mode = o.arg("rounding_mode", None)
    if mode is None:
        return f"{o.self} / {o.other}"
    return (_trunc_div if mode == "trunc" else _floor_div)(o, o.self, o.other)


def _fmod(o, a, b):
    # Triton's integer % is C's (truncating) remainder; a float's is the fmod helper (exact: a GPU
    # compiles a float % to frem, a - trunc(a / b) * b with an approximate division)
    return _f(o, "fmod", a, b) if o.is_float else f"{a} % {b}"


def _div_mode_kind(args):
    return INT_TO_FLOAT if args.get("rounding_mode") is None else DEFAULT


def _pow(o, base, exponent):
    if not o.is_float:
        scalar = o.scalar("exponent")
        if scalar is None:
            return _f(o, "ipow", base, exponent)
        return _int_power_chain(base, int(scalar))
    scalar = o.scalar("exponent")
    if scalar is not None and o.dtype in (torch.float16, torch.bfloat16):
        # eager converts the exponent to the tensor's dtype first (pow(-0., -0.998) in bf16 is pow(-0., -1))
        scalar = float(torch.tensor(float(scalar), dtype=o.dtype))
        exponent = o.const(scalar)
    # eager's pow_tensor_scalar takes these exponents through cheaper exact forms (and so must we:
    # sqrt(-inf) is NaN where C's pow(-inf, 0.5) is inf); on the CPU f16 skips the sqrt forms, on CUDA
    # it takes them (measured: eager CUDA's f16 pow(-inf, 0.5) is NaN, pow(-0., -0.5) -inf, H100).
    special = {2.0: f"{base} * {base}", 3.0: f"{base} * {base} * {base}", -1.0: f"1 / {base}",
               -2.0: f"1 / ({base} * {base})"}
    if o.dtype != torch.float16 or not o.interpreter:
        special.update({0.5: f"tl.sqrt({base})", -0.5: f"tl.rsqrt({base})"})
    if scalar is not None and float(scalar) in special:
        return special[float(scalar)]
    if scalar is not None:  # the helper works on blocks
        exponent = o.name(f"tl.full({o.block_shape}, {exponent}, {o.triton_type})")
    return _f(o, "pow", base, exponent)


def _int_power_chain(base, n):
    """``base ** n`` for a known non-negative n, by repeated squaring at codegen time."""
    if n == 0:
        return f"({base} * 0 + 1)"
    terms, square = [], base
    while n:
        if n & 1:
            terms.append(square)
        n >>= 1
        if n:
            square = f"({square} * {square})"
    return "(" + " * ".join(terms) + ")"


def _clamp(o):
    # eager: minimum(maximum(x, min), max), NaN-propagating, so a NaN bound (tensor or scalar) gives NaN
    out = o.self
    if o.get("min") is not None:
        out = o.name(_max(o, out, o.min))
    if o.get("max") is not None:
        out = _min(o, out, o.max)
    return out


def _lerp(o):
    # eager CUDA (ATen/native/Lerp.h, cuda/Lerp.cu): the weight in the compute type (fp32 for f16/bf16),
    # and the form exact at the end nearer the weight, which nvcc contracts into one fused multiply-add
    # (so end - (end - self) * 2.5 does not overflow at 1.7e38, and is NaN at end = inf). The fma helper
    # rounds once on every path (a GPU's fma.rn; Triton's interpreter before 3.9 rounds tl.fma twice).
    # end - diff * (1 - w) is fma(diff, w - 1, end), the same product: Triton before 3.9 computes a
    # float's -x as 0 - x, so -diff would be +0 where diff is +0, and lerp(-0., -0., 2.) -0. (eager: +0.).
    weight = torch.tensor(float(o.arg("weight")), dtype=torch.float64 if o.dtype == torch.float64 else torch.float32)
    diff = o.name(f"{o.end} - {o.self}")
    if weight.abs() < 0.5:
        return _f(o, "fma", _filled(o, weight.item()), diff, o.self)
    return _f(o, "fma", diff, _filled(o, (weight - 1).item()), o.end)


def _filled(o, value):
    """A block of the constant ``value`` (helpers take blocks)."""
    return _filled_expr(o, o.const(value))


def _filled_expr(o, expr):
    return o.name(f"tl.full({o.block_shape}, {expr}, {o.triton_type})")


def _sign(o):
    x = o.self
    if o.dtype == torch.bool:
        return x
    return f"tl.where({x} > 0, {o.const(1)}, tl.where({x} < 0, {o.const(-1)}, {o.const(0)}))"


def _gelu(o):
    x = o.self
    if o.arg("approximate", "none") == "tanh":
        inner = f"{o.const(0.7978845608028654)} * ({x} + {o.const(0.044715)} * {x} * {x} * {x})"
        return f"{o.const(0.5)} * {x} * (1 + {_f(o, 'tanh', inner)})"
    # 0.5 * x first: no overflow the math does not have (gelu(x) is x for huge x, and +inf at +inf).
    # Some eager CPU kernels differ there (AVX-512: NaN at +inf, bf16 gelu(2**127) = inf) in their
    # vectorized loop only, and their scalar kernel agrees with this.
    return f"{o.const(0.5)} * {x} * (1 + tl.erf({x} * {o.const(0.7071067811865476)}))"


def _to_copy_unsupported(args):
    extra = {k: v for k, v in args.items() if k not in ("self", "dtype") and v not in (None, False)
             and not (k == "memory_format" and v == torch.preserve_format)}
    return f"keyword arguments {extra} (only dtype= is lowered)" if extra else None


def _clone_unsupported(args):
    fmt = args.get("memory_format")
    return None if fmt in (None, torch.preserve_format) else f"memory_format={fmt} (only preserve_format is lowered)"


TRITON: dict = {
    # ---- unary ------------------------------------------------------------------------------------
    aten.abs.default: _unary(lambda o: f"tl.abs({o.self})", selects=True),
    aten.neg.default: _unary(lambda o: f"-{o.self}", selects=True),
    aten.exp.default: _unary(lambda o: f"tl.exp({o.self})", INT_TO_FLOAT),
    aten.exp2.default: _unary(lambda o: f"tl.exp2({o.self})", INT_TO_FLOAT),
    aten.expm1.default: _unary(lambda o: _f(o, "expm1", o.self), INT_TO_FLOAT),
    aten.log.default: _unary(lambda o: f"tl.log({o.self})", INT_TO_FLOAT),
    aten.log2.default: _unary(lambda o: f"tl.log2({o.self})", INT_TO_FLOAT),
    aten.log1p.default: _unary(lambda o: _f(o, "log1p", o.self), INT_TO_FLOAT),
    aten.sqrt.default: _unary(lambda o: f"tl.sqrt({o.self})", INT_TO_FLOAT),
    aten.rsqrt.default: _unary(lambda o: f"tl.rsqrt({o.self})", INT_TO_FLOAT),
    aten.reciprocal.default: _unary(lambda o: f"1 / {o.self}", INT_TO_FLOAT),
    aten.sin.default: _unary(lambda o: f"tl.sin({o.self})", INT_TO_FLOAT),
    aten.cos.default: _unary(lambda o: f"tl.cos({o.self})", INT_TO_FLOAT),
    aten.tanh.default: _unary(lambda o: _f(o, "tanh", o.self), INT_TO_FLOAT),
    aten.atan.default: _unary(lambda o: _f(o, "atan", o.self), INT_TO_FLOAT),
    aten.asin.default: _unary(lambda o: _f(o, "asin", o.self), INT_TO_FLOAT),
    aten.sigmoid.default: _unary(lambda o: _f(o, "sigmoid", o.self), INT_TO_FLOAT),
    aten.erf.default: _unary(lambda o: f"tl.erf({o.self})", INT_TO_FLOAT),
    aten.gelu.default: _unary(_gelu),  # approximate='none' (erf) or 'tanh'
    aten.silu.default: _unary(lambda o: f"{o.self} / (1 + tl.exp(-{o.self}))"),  # eager's x / (1 + e^-x)
    aten.relu.default: _unary(lambda o: f"tl.where({o.self} < 0, 0, {o.self})", selects=True),  # NaN stays NaN
    aten.floor.default: _unary(lambda o: f"tl.floor({o.self})" if o.is_float else o.self),  # identity on ints
    aten.ceil.default: _unary(lambda o: f"tl.ceil({o.self})" if o.is_float else o.self),
    aten.round.default: _unary(lambda o: _f(o, "round", o.self) if o.is_float else o.self),  # half to even
    aten.trunc.default: _unary(lambda o: _f(o, "trunc", o.self) if o.is_float else o.self),
    aten.frac.default: _unary(lambda o: f"{o.self} - {_f(o, 'trunc', o.self)}"),
    aten.sign.default: _unary(_sign),  # sign(NaN) = 0, as eager's (0 < x) - (x < 0)
    aten.isnan.default: _unary(lambda o: f"{o.self} != {o.self}", ALWAYS_BOOL, returns="bool"),
    aten.logical_not.default: _unary(lambda o: f"{o.self} == 0", ALWAYS_BOOL, returns="bool"),
    aten.bitwise_not.default: _unary(lambda o: f"({o.self} == 0)" if o.dtype == torch.bool else f"~{o.self}"),
    aten.clone.default: _unary(lambda o: o.self, SELF, unsupported=_clone_unsupported),  # a copy: the kernel's store
    aten._to_copy.default: _unary(lambda o: o.self, SELF, unsupported=_to_copy_unsupported),  # the cast is the store's
    torch.ops.prims.convert_element_type.default: Row(("a",), SELF, lambda o: o.a),  # decompositions' cast
    # ---- binary arithmetic (alpha scales the second operand) -------------------------------------
    aten.add.Tensor: _binary(lambda o: _plus_scaled(o, o.self, o.other, 1, ("self", "other"))),
    aten.add.Scalar: _binary(lambda o: _plus_scaled(o, o.self, o.other, 1, ("self", "other"))),
    aten.sub.Tensor: _binary(lambda o: _plus_scaled(o, o.self, o.other, -1, ("self", "other"))),
    aten.sub.Scalar: _binary(lambda o: _plus_scaled(o, o.self, o.other, -1, ("self", "other"))),
    aten.rsub.Scalar: _binary(lambda o: _plus_scaled(o, o.other, o.self, -1, ("other", "self"))),  # other - alpha * self
    aten.mul.Tensor: _binary(lambda o: f"{o.self} * {o.other}"),
    aten.mul.Scalar: _binary(lambda o: f"{o.self} * {o.other}"),
    aten.div.Tensor: _binary(lambda o: f"{o.self} / {o.other}", INT_TO_FLOAT),  # true division
    aten.div.Tensor_mode: _binary(_div_mode, _div_mode_kind),  # None: true; trunc; floor (Python's)
    aten.div.Scalar: _binary(lambda o: f"{o.self} / {o.other}", INT_TO_FLOAT),
    aten.floor_divide.default: _binary(lambda o: _floor_div(o, o.self, o.other)),
    aten.remainder.Tensor: _binary(lambda o: _f(o, "remainder" if o.is_float else "remainder_int", o.self, o.other)),
    aten.remainder.Scalar: _binary(lambda o: _f(o, "remainder" if o.is_float else "remainder_int", o.self, o.other)),
    aten.fmod.Tensor: _binary(lambda o: _fmod(o, o.self, o.other)),
    aten.fmod.Scalar: _binary(lambda o: _fmod(o, o.self, o.other)),
    aten.pow.Tensor_Tensor: _binary(lambda o: _pow(o, o.self, o.exponent), BOOL_TO_LONG, ("self", "exponent")),
    aten.pow.Tensor_Scalar: _binary(lambda o: _pow(o, o.self, o.exponent), BOOL_TO_LONG, ("self", "exponent")),
    aten.maximum.default: _binary(lambda o: _max(o, o.self, o.other), selects=True),  # NaN propagates
    aten.minimum.default: _binary(lambda o: _min(o, o.self, o.other), selects=True),
    aten.atan2.default: _binary(lambda o: _f(o, "atan2", o.self, o.other), INT_TO_FLOAT),
    aten.hypot.default: _binary(lambda o: _f(o, "hypot", o.self, o.other)),
    aten.copysign.Tensor: _binary(lambda o: _f(o, "copysign", o.self, o.other), INT_TO_FLOAT),
    aten.lerp.Scalar: Row(("self", "end", "weight"), DEFAULT, _lerp),
    # ---- comparisons and logic: predicates over the common dtype ---------------------------------
    aten.eq.Tensor: _binary(lambda o: f"{o.self} == {o.other}", ALWAYS_BOOL, returns="bool", rounds_scalars=True),
    aten.eq.Scalar: _binary(lambda o: f"{o.self} == {o.other}", ALWAYS_BOOL, returns="bool", rounds_scalars=True),
    aten.ne.Tensor: _binary(lambda o: f"{o.self} != {o.other}", ALWAYS_BOOL, returns="bool", rounds_scalars=True),
    aten.lt.Tensor: _binary(lambda o: f"{o.self} < {o.other}", ALWAYS_BOOL, returns="bool", rounds_scalars=True),
    aten.le.Tensor: _binary(lambda o: f"{o.self} <= {o.other}", ALWAYS_BOOL, returns="bool", rounds_scalars=True),
    aten.gt.Tensor: _binary(lambda o: f"{o.self} > {o.other}", ALWAYS_BOOL, returns="bool", rounds_scalars=True),
    aten.ge.Tensor: _binary(lambda o: f"{o.self} >= {o.other}", ALWAYS_BOOL, returns="bool", rounds_scalars=True),
    aten.gt.Scalar: _binary(lambda o: f"{o.self} > {o.other}", ALWAYS_BOOL, returns="bool", rounds_scalars=True),
    aten.logical_and.default: _binary(lambda o: f"({o.self} != 0) & ({o.other} != 0)", ALWAYS_BOOL, returns="bool"),
    aten.logical_or.default: _binary(lambda o: f"({o.self} != 0) | ({o.other} != 0)", ALWAYS_BOOL, returns="bool"),
    aten.logical_xor.default: _binary(lambda o: f"({o.self} != 0) ^ ({o.other} != 0)", ALWAYS_BOOL, returns="bool"),
    aten.bitwise_and.Tensor: _binary(lambda o: f"{o.self} & {o.other}"),
    aten.bitwise_or.Tensor: _binary(lambda o: f"{o.self} | {o.other}"),
    aten.bitwise_xor.Tensor: _binary(lambda o: f"{o.self} ^ {o.other}"),
    # ---- selection and clamping -------------------------------------------------------------------
    aten.where.self: Row(("self", "other"), DEFAULT, lambda o: f"tl.where({o.condition}, {o.self}, {o.other})",
                         masks=("condition",)),
    aten.masked_fill.Scalar: Row(("self",), SELF, lambda o: f"tl.where({o.mask}, {o.const(o.arg('value'))}, {o.self})",
                                 masks=("mask",)),
    aten.clamp.default: Row(("self", "min", "max"), DEFAULT, _clamp, selects=True),  # scalar bounds; NaN anywhere wins
    aten.clamp.Tensor: Row(("self", "min", "max"), DEFAULT, _clamp, selects=True),  # tensor bounds
    aten.clamp_min.default: Row(("self", "min"), DEFAULT, _clamp, selects=True),
    aten.clamp_max.default: Row(("self", "max"), DEFAULT, _clamp, selects=True),
}
