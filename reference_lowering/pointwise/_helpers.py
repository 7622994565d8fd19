"""Triton helper functions a kernel module includes when its body calls them.

Only ``triton.language`` builtins are used (not its ``@jit`` library functions such as ``tl.zeros``:
when triton was imported before ``TRITON_INTERPRET`` was set, those are compiled-mode functions the
interpreter refuses to call), and only core math: the Triton interpreter cannot call libdevice
(``extern_elementwise`` is not supported there), and one expression per op keeps the code that runs
on CPU the code that runs on GPU. So the functions libdevice would give (expm1, log1p, tanh, atan,
atan2, asin, hypot, pow, copysign, trunc, round-half-even) are written here, to eager's semantics
for special values (NaN, +-inf, signed zero) and to within a few ulp. Integer floor division and
remainder follow Python (Triton's ``//`` and ``%`` are C's). A fused multiply-add (``fma``) is a
helper too: Triton's interpreter before 3.9 computes ``tl.fma`` as ``a * b + c``, rounded twice. Each
helper is a template over the float type, so constants keep fp64 precision in fp64 kernels.

Here: the templates, their table (``HELPERS``), their GPU bodies and ``helper_sources`` (the helpers a
kernel body calls, callees first). Making fp32 divisions and square roots correctly rounded, which
floor division's helper needs and every kernel expression gets, is ``_correct_rounding.py``.
"""

from __future__ import annotations

import re

import torch

from ._correct_rounding import correctly_rounded
from ._types import TL, constant

_INT_OF = {torch.float32: "tl.int32", torch.float64: "tl.int64"}


def _floats(dtype, body: str) -> str:
    """``body`` with ``{F}`` (float type), ``{I}`` (same-width int) and ``{c(x)}`` constants filled."""
    return body.replace("{F}", TL[dtype]).replace("{I}", _INT_OF[dtype])


def _c(dtype, value) -> str:
    return constant(value, dtype)


def _signbit(dtype):
    return _floats(dtype, """
@triton.jit
def signbit_{S}(x):
    return x.to({I}, bitcast=True) < 0
""")


def _copysign(dtype):
    return """
@triton.jit
def copysign_{S}(a, b):
    return tl.where(signbit_{S}(b), -tl.abs(a), tl.abs(a))
"""


def _trunc(dtype):
    return """
@triton.jit
def trunc_{S}(x):
    return tl.where(x < 0, tl.ceil(x), tl.floor(x))
"""


def _round(dtype):
    # Half to even, like torch.round: exact, since x - floor(x) is exact in binary floating point.
    return f"""
@triton.jit
def round_{{S}}(x):
    r = tl.floor(x)
    d = x - r
    odd = (r % {_c(dtype, 2.0)}) != 0
    return tl.where((d > {_c(dtype, 0.5)}) | ((d == {_c(dtype, 0.5)}) & odd), r + 1, r)
"""


def _expm1(dtype):
    # Kahan's trick: exp(x) - 1 corrected by x / log(exp(x)), accurate near 0 where exp(x) - 1 cancels.
    return f"""
@triton.jit
def expm1_{{S}}(x):
    u = tl.exp(x)
    um1 = u - 1
    r = tl.where(um1 == 0, x, um1 * (x / tl.log(u)))  # x / log(u) ~ 1: no overflow near the top
    r = tl.where(um1 == -1, {_c(dtype, -1.0)}, r)
    return tl.where(u == {_c(dtype, float("inf"))}, u, r)
"""


def _log1p(dtype):
    return f"""
@triton.jit
def log1p_{{S}}(x):
    u = 1 + x
    r = tl.where(u == 1, x, tl.log(u) * (x / (u - 1)))
    return tl.where((u == {_c(dtype, float("inf"))}) | (u == 0), tl.log(u), r)
"""


def _tanh(dtype):
    big = 10.0 if dtype == torch.float32 else 20.0  # tanh(x) rounds to 1 beyond this
    if dtype == torch.float32:
        # Cephes tanhf: an odd polynomial below 0.625, 1 - 2 / (e^2|x| + 1) above (one exp, one
        # division; ~2 ulp). The expm1 form below costs an exp, a log and two divisions.
        c = lambda v: _c(dtype, v)  # noqa: E731
        return f"""
@triton.jit
def tanh_{{S}}(x):
    ax = tl.abs(x)
    z = x * x
    p = ((({c(-5.70498872745e-3)} * z + {c(2.06390887954e-2)}) * z - {c(5.37397155531e-2)}) * z
         + {c(1.33314422036e-1)}) * z - {c(3.33332819422e-1)}
    small = x + x * z * p
    large = 1 - 2 / (tl.exp(2 * ax) + 1)
    large = tl.where(x < 0, -large, large)
    r = tl.where(ax < {c(0.625)}, small, large)
    r = tl.where(ax > {c(big)}, tl.where(x < 0, {c(-1.0)}, {c(1.0)}), r)
    return tl.where(x == 0, x, r)
"""
    return f"""
@triton.jit
def tanh_{{S}}(x):
    ax = tl.abs(x)
    t = expm1_{{S}}(2 * ax)
    r = t / (t + 2)
    r = tl.where(ax > {_c(dtype, big)}, {_c(dtype, 1.0)}, r)
    return tl.where(x < 0, -r, tl.where(x == 0, x, r))
"""


def _sigmoid(dtype):
    # Eager's form, 1 / (1 + exp(-x)), as a helper: its division is not made correctly rounded (a
    # kernel expression's is), which on a GPU is Triton's approximate one, as Inductor's tl.sigmoid
    # (~20 fewer instructions than div_rn on sm_90); eager's expf and exact division, and the
    # interpreter's numpy, differ from it by a few ulp of a value in [0, 1]. inf, NaN and -inf
    # (1 / inf = 0) come out as eager's.
    return """
@triton.jit
def sigmoid_{S}(x):
    return 1 / (1 + tl.exp(-x))
"""


def _atan(dtype):
    # Cephes atan: reduce to |x| <= 0.66, then a rational approximation (degree 4/5 in x^2).
    c = lambda v: _c(dtype, v)  # noqa: E731
    p = [-8.750608600031904122785e-01, -1.615753718733365076637e01, -7.500855792314704667340e01,
         -1.228866684490136173410e02, -6.485021904942025371773e01]
    q = [2.485846490142306297962e01, 1.650270098316988542046e02, 4.328810604912902668951e02,
         4.853903996359136964868e02, 1.945506571482613964425e02]
    num = c(p[0])
    for k in p[1:]:
        num = f"({num}) * z + {c(k)}"
    den = f"z + {c(q[0])}"
    for k in q[1:]:
        den = f"({den}) * z + {c(k)}"
    return f"""
@triton.jit
def atan_{{S}}(x):
    ax = tl.abs(x)
    big = ax > {c(2.41421356237309504880)}
    mid = (ax > {c(0.66)}) & (ax <= {c(2.41421356237309504880)})
    y0 = tl.where(big, {c(1.57079632679489661923)}, tl.where(mid, {c(0.78539816339744830962)}, {c(0.0)}))
    xr = tl.where(big, -1 / ax, tl.where(mid, (ax - 1) / (ax + 1), ax))
    z = xr * xr
    r = xr * z * ({num}) / ({den}) + xr
    r = r + tl.where(big, {c(6.123233995736765886130e-17)}, tl.where(mid, {c(0.5 * 6.123233995736765886130e-17)}, {c(0.0)}))
    r = y0 + r
    r = tl.where(ax == {c(float("inf"))}, {c(1.57079632679489661923)}, r)
    return tl.where(x < 0, -r, tl.where(x == 0, x, r))
"""


def _atan2(dtype):
    c = lambda v: _c(dtype, v)  # noqa: E731
    return f"""
@triton.jit
def atan2_{{S}}(y, x):
    ax = tl.abs(x)
    ay = tl.abs(y)
    mx = tl.where(ax > ay, ax, ay)
    mn = tl.where(ax > ay, ay, ax)
    r = atan_{{S}}(mn / mx)
    r = tl.where(mx == 0, {c(0.0)}, r)
    r = tl.where((ax == {c(float("inf"))}) & (ay == {c(float("inf"))}), {c(0.78539816339744830962)}, r)
    r = tl.where(ay > ax, {c(1.57079632679489661923)} - r, r)
    r = tl.where(signbit_{{S}}(x), {c(3.14159265358979323846)} - r, r)
    r = copysign_{{S}}(r, y)
    return tl.where((x != x) | (y != y), x + y, r)
"""


def _asin(dtype):
    return """
@triton.jit
def asin_{S}(x):
    return atan_{S}(x / tl.sqrt((1 - x) * (1 + x)))
"""


def _hypot(dtype):
    # sqrt(a*a + b*b) where the squares neither overflow nor lose bits to underflow: about 1 ulp, and
    # exact where the sum of squares is (hypot(6, 1) is float64(sqrt(37)), as eager's std::hypot gives:
    # mx * sqrt(1 + q*q) was an ulp low there, and trunc(hypot(6, 1) / sqrt(37)) gave 0 for 1: make
    # conformance, seed 1771752921); the scaled form outside that range
    c = lambda v: _c(dtype, v)  # noqa: E731
    lo, hi = (1e-150, 1e150) if dtype == torch.float64 else (1e-18, 1e18)
    return f"""
@triton.jit
def hypot_{{S}}(a, b):
    aa = tl.abs(a)
    ab = tl.abs(b)
    mx = tl.where(aa > ab, aa, ab)
    mn = tl.where(aa > ab, ab, aa)
    q = mn / mx
    r = mx * tl.sqrt(1 + q * q)
    r = tl.where((mx > {c(lo)}) & (mx < {c(hi)}), tl.sqrt(aa * aa + ab * ab), r)
    r = tl.where(mx == 0, {c(0.0)}, r)
    r = tl.where((a != a) | (b != b), a + b, r)
    return tl.where((aa == {c(float("inf"))}) | (ab == {c(float("inf"))}), {c(float("inf"))}, r)
"""


def _pow(dtype):
    # C pow (std::pow, what eager calls) in fp64, then rounded: integer exponents below 2048 by
    # square-and-multiply and 0.5 by sqrt, exact wherever the result is (floor(pow(9., .5)) must be 3);
    # others through exp2(y * log2|x|). The sign and the special cases of C99 F.9.4.4 come after.
    # fp32 needs fewer exact cases (_pow_f32).
    c = lambda v: _c(dtype, v)  # noqa: E731
    if dtype == torch.float32:
        return _pow_f32(c)
    return f"""
@triton.jit
def pow_{{S}}(x, y):
    xd = x.to(tl.float64)
    yd = y.to(tl.float64)
    ax = tl.abs(xd)
    ayd = tl.abs(yd)
    r = tl.exp2(yd * tl.log2(ax))
    small_int = (tl.floor(yd) == yd) & (ayd < 2048)
    e = tl.where(small_int, ayd, 0).to(tl.int32)
{_square_and_multiply(11)}    r = tl.where(small_int, tl.where(yd < 0, 1 / p, p), r)
{_pow_specials(c)}"""


def _pow_f32(c):
    # fp32 (and f16/bf16, held in fp32): exp2(y * log2|x|) in fp64 is within 2^-44 of x^y where the fp32
    # result is finite and not 0, so it rounds to x^y wherever x^y is an fp32 number. Where an integer
    # power x^n is halfway between two, the exact product (square-and-multiply, rounded once) decides:
    # that needs m^n of exactly 25 bits (m the odd significand of x, >= 3), so m in [2^(24/n), 2^(25/n)),
    # which holds an odd integer for 0 < n < 8 only (11^7); x^-n is never halfway. So three rounds
    # instead of fp64's eleven, before the exp2 (fewer values live at once), and no 1 / p: sm_80 took
    # 138 registers per thread under Triton 3.6 with those (budget 128, tests/test_gpu_targets.py), 115
    # with these (3.9: 128 -> 104); the results are the same.
    return f"""
@triton.jit
def pow_{{S}}(x, y):
    yd = y.to(tl.float64)
    ax = tl.abs(x.to(tl.float64))
    small_int = (tl.floor(y) == y) & (y > 0) & (y < 8)
    e = tl.where(small_int, y, 0).to(tl.int32)
{_square_and_multiply(3)}    r = tl.where(small_int, p, tl.exp2(yd * tl.log2(ax)))
{_pow_specials(c)}"""


def _square_and_multiply(rounds: int) -> str:
    """``p = ax ** e`` in fp64 for the low ``rounds`` bits of the int32 ``e``, rounded once per step."""
    return f"""    p = tl.full(ax.shape, 1.0, tl.float64)
    b = ax
    for _ in range({rounds}):
        p = tl.where((e & 1) != 0, p * b, p)
        b = b * b
        e = e >> 1
"""


def _pow_specials(c) -> str:
    """The end of both pow helpers: 0.5 by sqrt, rounding to the float type, then the sign and the
    special cases of C99 F.9.4.4 (``r``: |x|^y in fp64, ``ax``: |x| in fp64, ``yd``: y in fp64)."""
    return f"""    r = tl.where(yd == 0.5, tl.sqrt(ax), r).to({{F}})
    ay = tl.abs(y)
    y_int = (tl.floor(y) == y) & (ay != {c(float("inf"))})
    y_odd = y_int & ((y % {c(2.0)}) != 0)
    neg = signbit_{{S}}(x)
    r = tl.where(neg & y_odd, -r, r)
    r = tl.where((x < 0) & (x > {c(float("-inf"))}) & (ay < {c(float("inf"))}) & ~y_int, {c(float("nan"))}, r)
    r = tl.where((x == {c(float("-inf"))}) & ~y_odd & (y > 0), {c(float("inf"))}, r)
    r = tl.where((x == {c(float("-inf"))}) & ~y_odd & (y < 0), {c(0.0)}, r)
    r = tl.where((ax == 1) & (ay == {c(float("inf"))}), {c(1.0)}, r)
    return tl.where((y == 0) | (x == 1), {c(1.0)}, r)
"""


def _ipow(dtype):
    # Square-and-multiply over every bit of the exponent: exact, and wrapping on overflow as eager's
    # loop does. Exponents are non-negative (eager raises on negative integer powers).
    bits = 64 if dtype == torch.int64 else 32
    return f"""
@triton.jit
def ipow_{{S}}(x, y):
    r = x * 0 + 1
    base = x
    e = y
    for _ in range({bits}):
        r = tl.where((e & 1) != 0, r * base, r)
        base = base * base
        e = e >> 1
    return r
"""


def _floordiv_int(dtype):
    return """
@triton.jit
def floordiv_{S}(a, b):
    q = a // b
    fix = ((a % b) != 0) & ((a < 0) != (b < 0))
    return tl.where(fix, q - 1, q)
"""


def _remainder_int(dtype):
    return """
@triton.jit
def remainder_{S}(a, b):
    r = a % b
    fix = (r != 0) & ((r < 0) != (b < 0))
    return tl.where(fix, r + b, r)
"""


def _floordiv_float(dtype):
    # c10's div_floor_floating: exact quotient from fmod, then floor; b == 0 gives a / b.
    c = lambda v: _c(dtype, v)  # noqa: E731
    return f"""
@triton.jit
def floordiv_{{S}}(a, b):
    mod = fmod_{{S}}(a, b)
    div = (a - mod) / b
    div = tl.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1, div)
    fl = tl.floor(div)
    fl = tl.where(div - fl > {c(0.5)}, fl + 1, fl)
    fl = tl.where(div == 0, copysign_{{S}}(tl.full(div.shape, 0.0, {{F}}), a / b), fl)
    return tl.where(b == 0, a / b, fl)
"""


def _remainder_float(dtype):
    return """
@triton.jit
def remainder_{S}(a, b):
    mod = fmod_{S}(a, b)
    return tl.where((mod != 0) & ((b < 0) != (mod < 0)), mod + b, mod)
"""


def _fmod(dtype):
    # C's fmod, exact. The interpreter's float % is numpy's fmod; a GPU compiles % to frem, which
    # is a - trunc(a / b) * b with an approximate division (fmod(1e30, 0.09) off by 1e30, H100):
    # there it is libdevice's fmod (_GPU_BODIES), as eager CUDA's.
    return """
@triton.jit
def fmod_{S}(a, b):
    return a % b
"""


def _fma(dtype):
    # a * b + c rounded once, as a GPU's fma.rn and eager CUDA's a * b + c (contracted by nvcc) round it:
    # lerp's end - (end - self) * 2.5 is -2.55e38 at self = 0, end = 1.7e38, where two roundings give -inf.
    # On a GPU this is tl.fma (_GPU_BODIES). Triton's interpreter computes tl.fma as a * b + c before 3.9,
    # so fp32 goes through fp64: the product is exact there, and the sum is rounded to odd (its last bit
    # set where TwoSum says it is inexact; NaN error where the sum is inf or NaN: left as is), so
    # narrowing to fp32 rounds once more without a double-rounding error. fp64 has no wider type: tl.fma,
    # exact from Triton 3.9 (before, rounded twice, which overflows only beyond 1.8e308).
    if dtype == torch.float64:
        return """
@triton.jit
def fma_{S}(a, b, c):
    return tl.fma(a, b, c)
"""
    return """
@triton.jit
def fma_{S}(a, b, c):
    p = a.to(tl.float64) * b.to(tl.float64)
    cd = c.to(tl.float64)
    s = p + cd
    t = s - p
    err = (p - (s - t)) + (cd - t)
    bits = s.to(tl.int64, bitcast=True)
    inexact = (err != 0) & (err == err) & ((bits & 1) == 0)
    bits = tl.where(inexact, tl.where((err > 0) == (s > 0), bits + 1, bits - 1), bits)
    return bits.to(tl.float64, bitcast=True).to(tl.float32)
"""


# bf16 by bits: the interpreter converts f32 -> bf16 by truncation and flushes bf16 subnormals to
# zero when widening, so the conversions are integer operations (exact on every backend).
def _bf16_round(dtype):
    # c10's float -> BFloat16 also makes every NaN the positive quiet one (copysign and signbit see it)
    return """
@triton.jit
def bf16_round_{S}(x):
    b = x.to(tl.int32, bitcast=True)
    r = (b + 0x7FFF + ((b >> 16) & 1)) & -65536
    return tl.where(x != x, float("nan"), r.to(tl.float32, bitcast=True))
"""


def _bf16_widen(dtype):
    return """
@triton.jit
def bf16_widen_{S}(x):
    return (x.to(tl.int16, bitcast=True).to(tl.int32) << 16).to(tl.float32, bitcast=True)
"""


def _bf16_narrow(dtype):
    return """
@triton.jit
def bf16_narrow_{S}(x):
    return (x.to(tl.int32, bitcast=True) >> 16).to(tl.int16).to(tl.bfloat16, bitcast=True)
"""


# name -> (template over the dtype, helpers it calls, the dtypes it is made for); ``{S}`` is the dtype suffix.
_F, _I = (torch.float32, torch.float64), (torch.int8, torch.int32, torch.int64)
HELPERS = {
    "signbit": (_signbit, (), _F),
    "copysign": (_copysign, ("signbit",), _F),
    "trunc": (_trunc, (), _F),
    "round": (_round, (), _F),
    "expm1": (_expm1, (), _F),
    "log1p": (_log1p, (), _F),
    "tanh": (_tanh, ("expm1",), _F),
    "sigmoid": (_sigmoid, (), _F),
    "atan": (_atan, (), _F),
    "atan2": (_atan2, ("atan", "signbit", "copysign"), _F),
    "asin": (_asin, ("atan",), _F),
    "hypot": (_hypot, (), _F),
    "pow": (_pow, ("signbit",), _F),
    "fma": (_fma, (), _F),
    "ipow": (_ipow, (), _I),
    "floordiv_int": (_floordiv_int, (), _I),
    "remainder_int": (_remainder_int, (), _I),
    "fmod": (_fmod, (), _F),
    "floordiv": (_floordiv_float, ("signbit", "copysign", "fmod"), _F),
    "remainder": (_remainder_float, ("fmod",), _F),
    "bf16_round": (_bf16_round, (), (torch.float32,)),
    "bf16_widen": (_bf16_widen, (), (torch.float32,)),
    "bf16_narrow": (_bf16_narrow, (), (torch.float32,)),
}

_SUFFIX = {torch.float32: "f32", torch.float64: "f64", torch.int32: "i32", torch.int64: "i64", torch.int8: "i8"}


def helper_name(name: str, dtype: torch.dtype) -> str:
    """``name`` made for ``dtype``: ``atan_f32``, ``floordiv_i64`` (the ``_int`` variants share the name)."""
    if dtype not in HELPERS[name][2]:
        raise ValueError(f"no {name} helper for {dtype}")
    return f"{name.removesuffix('_int')}_{_SUFFIX[dtype]}"


# Helpers whose fp32 divisions must be correctly rounded: floor division recovers an exact quotient
# from ``(a - fmod(a, b)) / b``. The others approximate a function to a few ulp (as libdevice's own
# routines do, with approximate divisions inside) and keep Triton's ``/``; pow computes in fp64.
_ROUNDED_HELPERS = {"floordiv"}


# On a GPU, bf16 <-> fp32 are native conversions (cvt.rn.bf16x2.f32 rounds to nearest even and makes
# NaN the positive quiet one, as c10 does); the interpreter truncates f32 -> bf16, so it gets the
# same conversions by bits. A GPU's fma is the fma.rn instruction; the interpreter's is exact by fp64
# (_fma). A GPU's fmod is libdevice's (the kernel module imports it); the interpreter's, numpy's. A
# GPU's tanh is libdevice's too: the function eager CUDA's tanh calls (nvcc links the same
# libdevice), 37 instructions per element of Cephes' polynomial on sm_90 against 18; the
# interpreter, which cannot call libdevice, keeps the polynomial.
# The kernel body is the same in both; only these helpers differ (``{S}``: the dtype suffix).
_GPU_BODIES = {
    "bf16_round": "@triton.jit\ndef bf16_round_f32(x):\n    return x.to(tl.bfloat16).to(tl.float32)",
    "bf16_widen": "@triton.jit\ndef bf16_widen_f32(x):\n    return x.to(tl.float32)",
    "bf16_narrow": "@triton.jit\ndef bf16_narrow_f32(x):\n    return x.to(tl.bfloat16)",
    "fma": "@triton.jit\ndef fma_{S}(a, b, c):\n    return tl.fma(a, b, c)",
    "fmod": "@triton.jit\ndef fmod_{S}(a, b):\n    return libdevice.fmod(a, b)",
    "tanh": "@triton.jit\ndef tanh_{S}(x):\n    return libdevice.tanh(x)",
}


def helper_sources(body: str, interpreter: bool = True) -> list:
    """Source text of the helpers ``body`` calls and of those they call, each once, callees first
    (for the Triton interpreter, or for a GPU: ``_GPU_BODIES``)."""
    order, seen = [], set()

    def visit(name, dtype):
        if (name, dtype) in seen:
            return
        seen.add((name, dtype))
        template, calls, _ = HELPERS[name]
        text = template(dtype).replace("{S}", _SUFFIX[dtype]).replace("{F}", TL[dtype]).strip()
        if not interpreter and name in _GPU_BODIES:
            text = _GPU_BODIES[name].replace("{S}", _SUFFIX[dtype])
        for callee in calls:  # those this dtype's text calls (f32 tanh does without expm1)
            if re.search(rf"\b{helper_name(callee, dtype)}\(", text):
                visit(callee, dtype)
        order.append(correctly_rounded(text, dtype).strip() if name in _ROUNDED_HELPERS else text)

    called = set(re.findall(r"\b(\w+)\(", body))
    for name, (_, _, dtypes) in sorted(HELPERS.items()):
        for dtype in dtypes:
            if helper_name(name, dtype) in called:
                visit(name, dtype)
    return order
