"""Helpers whose exactness is the point, against exact rational arithmetic: the fused multiply-add
(lerp, as eager CUDA computes it: one rounding, no overflow the product alone has) and fp32 pow
(exact wherever its result, or the halfway point it rounds from, is). Run under the Triton
interpreter, with the interpreter's own ``tl.fma`` and with the one Triton 3.6 to 3.8 have
(``a * b + c``, rounded twice); the GPU path's lerp is read off its PTX for sm_90."""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
from fractions import Fraction
from importlib.metadata import version

import numpy as np
import pytest
import torch

from reference_lowering.pointwise import _runtime, lower_pointwise
from reference_lowering.pointwise._helpers import helper_sources
from tests.graphs import build
from tests.pointwise_cases import FLOAT_SCALARS, FLOATS

aten = torch.ops.aten
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_helper(call: str, *arrays: np.ndarray) -> np.ndarray:
    """``call`` (over ``a``, ``b``, ...: e.g. ``"fma_f32(a, b, c)"``) evaluated elementwise under the
    interpreter, on arrays of one dtype."""
    names = "abcd"[:len(arrays)]
    body = "\n".join(f"    {n} = tl.load({n}_ptr + i, mask)" for n in names)
    kernel = (f"@triton.jit\ndef NAME({', '.join(f'{n}_ptr' for n in names)}, out_ptr, n, BLOCK: tl.constexpr):\n"
              f"    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n    mask = i < n\n{body}\n"
              f"    tl.store(out_ptr + i, {call}, mask)\n")
    source = "\n\n\n".join(["import triton\nimport triton.language as tl", *helper_sources(call), kernel])
    name = "helper_" + hashlib.sha1(source.encode()).hexdigest()[:12]
    fn = _runtime.compile_kernel(name, source.replace("NAME", name), torch.device("cpu"))
    tensors = [torch.from_numpy(np.ascontiguousarray(a)) for a in arrays]
    out = torch.empty_like(tensors[0])
    fn[(math.ceil(len(out) / 1024),)](*tensors, out, len(out), BLOCK=1024)
    return out.numpy()


def nearest_f32(q: Fraction) -> np.float32:
    """``q`` rounded to the nearest fp32, ties to even, overflowing to inf as IEEE does (no double rounding)."""
    top = Fraction(float(np.finfo(np.float32).max))
    if abs(q) >= top + Fraction(2) ** 103:  # max + half its ulp: rounds to inf (max is odd)
        return np.float32(math.copysign(math.inf, q))
    start = np.float32(float(q)) if abs(q) < top else np.float32(math.copysign(float(top), q))
    near = [np.nextafter(start, np.float32(-np.inf)), start, np.nextafter(start, np.float32(np.inf))]
    near = [c for c in near if np.isfinite(c)]
    return min(near, key=lambda c: (abs(Fraction(float(c)) - q), int(c.view(np.int32)) & 1))


def exact_fma(a, b, c, dtype=np.float32):
    """``a * b + c`` rounded once to ``dtype`` (fp32 or fp64), IEEE special values and signed zeros included."""
    a, b, c = dtype(a), dtype(b), dtype(c)
    if not (np.isfinite(a) and np.isfinite(b) and np.isfinite(c)):
        with np.errstate(all="ignore"):  # no finite product to lose: IEEE's rules, as a * b + c has them
            return dtype(np.float64(a) * np.float64(b) + np.float64(c)) if dtype == np.float32 else a * b + c
    q = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    if q == 0:  # -0 only from -0 + -0 (an exact product of zero keeps the product's sign)
        product_negative = (a == 0 or b == 0) and (np.signbit(a) != np.signbit(b))
        return dtype(-0.0) if product_negative and np.signbit(c) and c == 0 else dtype(0.0)
    if dtype == np.float32:
        return nearest_f32(q)
    try:
        return np.float64(q.numerator / q.denominator)  # Python's int / int is correctly rounded
    except OverflowError:
        return np.float64(math.copysign(math.inf, q))


def cuda_lerp(s, e, weight, dtype):
    """Eager CUDA's lerp (ATen/native/Lerp.h, cuda/Lerp.cu) of one pair: the weight and the operands in
    the compute type (fp32 for f16/bf16), each form one fused multiply-add (as nvcc contracts it),
    rounded to ``dtype``."""
    op = np.float64 if dtype == torch.float64 else np.float32
    s, e, w = op(s), op(e), op(weight)
    with np.errstate(all="ignore"):
        diff = e - s
        r = exact_fma(w, diff, s, op) if abs(w) < 0.5 else exact_fma(-diff, op(1) - w, e, op)
    return torch.tensor(r).to(dtype)


def _lerp_grid(dtype, weight):
    s = torch.tensor(FLOATS, dtype=torch.float64).to(dtype).reshape(-1, 1)
    e = torch.tensor(FLOATS, dtype=torch.float64).to(dtype).reshape(1, -1)
    gm = build(2, lambda g, c, a, b: [c(aten.lerp.Scalar, a, b, weight)])
    got = lower_pointwise(gm, (s, e))(s, e)[0]
    want = torch.stack([torch.stack([cuda_lerp(a, b, weight, dtype) for b in e[0].tolist()])
                        for a in s[:, 0].tolist()])
    return got, want


def _fma_rounded_twice(monkeypatch):
    """The interpreter's ``tl.fma`` as Triton 3.6 to 3.8 have it (triton/runtime/interpreter.py)."""
    from triton.runtime.interpreter import InterpreterBuilder, TensorHandle

    monkeypatch.setattr(InterpreterBuilder, "create_fma",
                        lambda self, x, y, z: TensorHandle(x.data * y.data + z.data, z.dtype.scalar))


# fp64 has no wider type for the interpreter's fma helper: it is tl.fma, one rounding from Triton 3.9 on
# (before, within an ulp of eager CUDA's on this grid; a GPU's fma.rn.f64 is exact on every version)
LERP_CASES = [(d, fma) for fma in ("own-fma", "fma-rounded-twice") for d in (torch.float32, torch.bfloat16, torch.float16)]
if tuple(int(v) for v in version("triton").split(".")[:2]) >= (3, 9):
    LERP_CASES.append((torch.float64, "own-fma"))


@pytest.mark.parametrize("dtype,fma", LERP_CASES, ids=lambda v: str(v).removeprefix("torch."))
@pytest.mark.parametrize("weight", FLOAT_SCALARS)
def test_lerp_is_eager_cudas_fused_form_on_the_special_grid(monkeypatch, dtype, fma, weight):
    """lerp(0, 1.7e38, -1.5) is -2.55e38 on eager CUDA (one fma); rounding the product first gives -inf.
    Every value of the grid must be eager CUDA's, bit for bit (NaN for NaN), whatever the
    interpreter's tl.fma does."""
    if fma == "fma-rounded-twice":
        _fma_rounded_twice(monkeypatch)
    got, want = _lerp_grid(dtype, weight)
    same = (got == want) & (torch.signbit(got) == torch.signbit(want)) | (got.isnan() & want.isnan())
    bad = (~same).nonzero().tolist()
    assert not bad, (f"lerp(self, end, weight={weight}) dtype={dtype}: {len(bad)} of {got.numel()} values differ "
                     f"from eager CUDA's fused form, first at self={FLOATS[bad[0][0]]}, end={FLOATS[bad[0][1]]}: "
                     f"{got[tuple(bad[0])].item()}, but should be {want[tuple(bad[0])].item()}")


def test_the_grid_holds_the_overflow_eager_cuda_does_not_have():
    assert 0.0 in FLOATS and 1.7e38 in FLOATS and -1.5 in FLOAT_SCALARS
    assert cuda_lerp(0.0, 1.7e38, -1.5, torch.float32).item() == pytest.approx(-2.55e38, rel=1e-6)
    with np.errstate(over="ignore"):
        assert np.float32(1.7e38) * np.float32(2.5) == np.inf  # the product alone overflows in fp32


def test_fma_helper_rounds_once_under_the_interpreter():
    """Against exact rationals: the overflow lerp meets, a sum that fp64 rounds onto an fp32 tie
    (round-to-odd must keep it off), signed zeros, special values, and random triples that cancel."""
    t = 2.0 ** -24
    a = [-1.7e38, -t * (1 + 2 ** -15), t * (1 + 2 ** -15), -0.0, 0.0, -0.0, math.inf, math.inf, math.nan, 1e-30, 3.0]
    b = [2.5, 1 - 2 ** -15, 1 - 2 ** -15, 1.0, -1.0, 1.0, 0.0, 1.0, 1.0, 1e-30, 1 / 3]
    c = [1.7e38, 1 + 2 ** -23, -(1 + 2 ** -23), -0.0, -0.0, 0.0, 1.0, -math.inf, 0.0, 1e-45, -1.0]
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(3000) * 2.0 ** rng.integers(-40, 40, 3000)).astype(np.float32)
    y = (rng.standard_normal(3000) * 2.0 ** rng.integers(-40, 40, 3000)).astype(np.float32)
    z = (-(x.astype(np.float64) * y) * (1 + rng.standard_normal(3000) * 2.0 ** -20)).astype(np.float32)  # cancels
    a, b, c = (np.concatenate([np.array(v, np.float32), w]) for v, w in ((a, x), (b, y), (c, z)))
    got = run_helper("fma_f32(a, b, c)", a, b, c)
    want = np.array([exact_fma(*abc) for abc in zip(a, b, c)], np.float32)
    same = (got.view(np.int32) == want.view(np.int32)) | (np.isnan(got) & np.isnan(want))
    bad = np.nonzero(~same)[0]
    assert not len(bad), [(a[i], b[i], c[i], got[i], want[i]) for i in bad[:5]]
    assert got[0] == want[0] != -np.inf and got[1] == np.float32(1 + 2 ** -23)  # where a * b + c would not be


@pytest.mark.parametrize("x,y", [(4097.0, 2.0), (257.0, 3.0), (65.0, 4.0), (11.0, 7.0), (-11.0, 7.0), (9.0, 0.5),
                                 (16.0, 1.5), (3.0, 15.0), (2.0, 100.0), (2.0, -140.0), (0.5, 30.0), (7.0, -2.0),
                                 (1.5, 20.0)])
def test_pow_f32_is_exact_where_its_result_or_halfway_point_is(x, y):
    """4097^2, 257^3, 65^4, 11^7 are halfway between two fp32 numbers (odd 25-bit significands): the
    exact product rounds to even; an exp2/log2 route can land on either side. Exact fp32 results
    (9^0.5, 16^1.5, 3^15, 2^-140) must come out exact; others (7^-2, 1.5^20) correctly rounded here."""
    got = run_helper("pow_f32(a, b)", np.array([x], np.float32), np.array([y], np.float32))[0]
    q = Fraction(x) ** int(y) if y == int(y) else Fraction(math.isqrt(int(x))) ** int(2 * y)  # x a square here
    assert got == nearest_f32(q), f"pow({x}, {y}) = {got!r}, but should be {nearest_f32(q)!r}"


LERP_PTX = r"""
import json, re, torch
from reference_lowering.pointwise import lower_pointwise
from reference_lowering.pointwise._runtime import launch_options
from reference_lowering.pointwise._targets import compile_triton, signature
from tests.graphs import build
out = {}
for dtype in (torch.float32, torch.bfloat16, torch.float64):
    for w in (-1.5, 0.25):
        x, y = (torch.empty(s, dtype=dtype, device="meta") for s in ((25, 1), (1, 25)))
        gm = build(2, lambda g, c, a, b: [c(torch.ops.aten.lerp.Scalar, a, b, w)])
        k = lower_pointwise(gm, (x, y)).meta["pointwise_kernels"][0]
        options = launch_options(k.code)
        sig, constexprs, aligned = signature(k.code)
        constexprs.update({n: options.pop(n) for n in ("XBLOCK", "YBLOCK") if n in options})
        compiled, _ = compile_triton(k.fn, sig, constexprs, "sm_90", num_warps=options.pop("num_warps"),
                                     aligned=aligned, options=options)
        ops = re.findall(r"^\s*((?:fma|mul|add|sub)\.[\w.]*f(?:32|64))\s", compiled.asm["ptx"], re.M)
        out[f"{dtype}/{w}"] = sorted(set(ops))
print(json.dumps(out))
"""


def test_lerp_on_a_gpu_is_one_fma_rn_per_element():
    """Compiled for sm_90 (in a process without TRITON_INTERPRET): the difference, then fma.rn, and no
    multiply of its own, which is the order eager CUDA's contracted a - b * c has."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", LERP_PTX], cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for case, ops in json.loads(proc.stdout.strip().splitlines()[-1]).items():
        bits = "64" if "float64" in case else "32"
        assert f"fma.rn.f{bits}" in ops and not any(op.startswith("mul") for op in ops), (case, ops)
