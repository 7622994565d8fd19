"""The numerical oracle: one tolerance table, one comparison, one mismatch format.

Policy (DESIGN.md): integers and bools exact. Floats first against the original's own result with
``torch.testing``'s per-dtype tolerances (of the least precise float the output is computed
through where the fp64 reference did not: an f64 output of an f32 computation gets f32's); failing that, against an fp64 reference (the ORIGINAL
graph run on inputs and constants upcast to float64, so casts inside the graph still round), where
an element passes when the transformed error is within ``ERROR_RATIO`` times the original's error
plus the dtype tolerance. Rounding noise passes; changed math, a dropped cast, a swapped operand
do not. NaN positions and +-inf follow the special-values policy (``SPECIALS``: exactly as the
original's, or, relaxed, as the fp64 reference's where the original lost the value); signed zeros
only when asked. Where eager's vectorized and scalar CPU kernels disagree, either result passes
(``scalar_path_run``): no verdict depends on one CPU's vector path. On a GPU, the original run on
inputs with subnormal floats flushed to zero passes too (``flushed_run``): the GPU's approximate
instructions flush subnormal operands, eager CUDA does not. The sign of a NaN an operation makes is
not specified (IEEE 754 6.3) and differs between eager's kernels by CPU capability; the original run
with every computed NaN made the positive one passes too (``positive_nan_run``), so a sign that
``copysign`` or ``signbit`` reads from a NaN is no verdict either.

Here: the tolerance table, the comparison (``compare_values``: a value against the original's, its
fp64 reference and eager's other results, in the house mismatch format; ``compare_metadata``,
``describe``), and the ``Oracle``, which holds one graph's runs and judges every value against them
(``compare_outputs`` a whole run). The runs themselves (``RERUNS``) are in ``reruns``.
"""

from __future__ import annotations

import math

import torch
import torch.fx as fx
import torch.utils._pytree as pytree

from ._result import SPECIALS
from .copies import clone_inputs, graph_run, restorage
from .reruns import RERUNS, eager_alternatives, reference_run

# dtype -> (rtol, atol): torch.testing.assert_close's defaults (torch/testing/_comparison.py).
# One row per dtype; anything not listed (ints, bool, float8) compares exactly.
TOLERANCES = {
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.complex64: (1.3e-6, 1e-5),
    torch.complex128: (1e-7, 1e-7),
}

# How much larger than the original's own error (against fp64) the transformed error may be.
ERROR_RATIO = 2.0
ERROR_RATIO_LOW_PRECISION = 3.0  # float16 / bfloat16, and tensors of fewer than TINY elements
TINY = 16


def tolerance(dtype: torch.dtype) -> tuple:
    """(rtol, atol) for ``dtype``; (0, 0) means exact."""
    return TOLERANCES.get(dtype, (0.0, 0.0))


def error_ratio(dtype: torch.dtype, numel: int) -> float:
    if dtype in (torch.float16, torch.bfloat16) or numel < TINY:
        return ERROR_RATIO_LOW_PRECISION
    return ERROR_RATIO


def significant_strides(shape, stride) -> tuple:
    """Strides that change what a tensor means: none for an empty tensor, none of size-1 dims."""
    if 0 in tuple(shape):
        return ()
    return tuple(st if n > 1 else None for n, st in zip(shape, stride))


def describe(t) -> str:
    """``float32[2, 3]`` plus ``stride=(1, 2)`` when not contiguous."""
    if not isinstance(t, torch.Tensor):
        return f"{type(t).__name__} {t!r}"
    dt = str(t.dtype).removeprefix("torch.")
    extra = "" if t.is_contiguous() else f" stride={tuple(t.stride())}"
    return f"{dt}{list(t.shape)}{extra}"


def compare_metadata(actual, expected, what: str, *, strides: bool) -> str | None:
    """Shape, dtype (and significant strides + storage offset when ``strides``): first difference."""
    if not isinstance(expected, torch.Tensor) or not isinstance(actual, torch.Tensor):
        if isinstance(expected, torch.Tensor) or isinstance(actual, torch.Tensor):
            return f"{what}={describe(actual)}, but should be {describe(expected)}"
        return None
    if actual.shape != expected.shape:
        return f"{what} shape={tuple(actual.shape)}, but should be {tuple(expected.shape)}"
    if actual.dtype != expected.dtype:
        return f"{what} dtype={actual.dtype}, but should be {expected.dtype}"
    if strides:
        got = significant_strides(actual.shape, actual.stride())
        want = significant_strides(expected.shape, expected.stride())
        if got != want:
            return f"{what} stride={tuple(actual.stride())}, but should be {tuple(expected.stride())}"
        if actual.numel() and actual.storage_offset() != expected.storage_offset():
            return f"{what} storage_offset={actual.storage_offset()}, but should be {expected.storage_offset()}"
    return None


def compare_values(actual, expected, what: str, *, reference=None, signed_zeros: bool = False,
                   computed_in: torch.dtype | None = None, specials: str = "strict", alternatives=()) -> str | None:
    """None when ``actual`` is acceptable for ``expected`` (same shape and dtype), else a message.

    ``reference`` is the fp64 value of the original computation (or None when unavailable);
    ``computed_in`` the least precise float dtype the value passed through in eager where the reference
    did not (``least_precise``): an f64 output of an f32 computation is only as exact as f32, and gets
    f32's tolerances. ``specials`` is the special-values policy (``SPECIALS``). ``alternatives`` are
    other results eager gives for the same computation (its scalar kernels where the vectorized ones
    differ: ``scalar_path_run``), or a function returning them, called only when ``expected`` alone
    does not pass: an element passes when it passes against any of them.

    >>> x = torch.tensor([3e38])
    >>> compare_values(x, x * 2 / 2, "out", reference=x.double()).splitlines()[-1].strip()
    'the original overflows here (the fp64 reference is 3e+38); if your pass may avoid overflow, use --specials relaxed'
    >>> compare_values(x, x * 2 / 2, "out", reference=x.double(), specials="relaxed") is None
    True
    """
    if specials not in SPECIALS:
        raise ValueError(f"specials={specials!r}, but should be one of {', '.join(SPECIALS)}")
    if not isinstance(expected, torch.Tensor):
        if _scalar_equal(actual, expected):
            return None
        return f"{what}={actual!r}, but should be {expected!r}"
    if expected.numel() == 0:
        return None
    if expected.is_complex() and actual.is_complex():  # judged as (real, imaginary) float pairs
        def parts(t):
            return torch.view_as_real(t.detach().resolve_conj().resolve_neg()) \
                if isinstance(t, torch.Tensor) and t.is_complex() else None

        def other_parts():
            found = alternatives() if callable(alternatives) else alternatives
            return [(parts(t[0]), parts(t[1])) if isinstance(t, tuple) else parts(t) for t in found or ()]

        return compare_values(parts(actual), parts(expected), f"{what} (as real, imaginary pairs)",
                              reference=parts(reference), signed_zeros=signed_zeros,
                              computed_in=computed_in.to_real() if computed_in is not None and computed_in.is_complex
                              else computed_in, specials=specials, alternatives=other_parts)
    a, e = actual.detach(), expected.detach()

    def others():
        """[(value, its reference)]: an alternative given alone has ``reference`` as its own."""
        found = alternatives() if callable(alternatives) else alternatives
        pairs = [t if isinstance(t, tuple) else (t, reference) for t in found or ()]
        return [(t.detach().to(a.device), r) for t, r in pairs if isinstance(t, torch.Tensor)
                and t.shape == e.shape and t.dtype == e.dtype]

    if not (e.is_floating_point() or e.is_complex()):
        bad = a != e
        for other, _ in others() if bool(bad.any()) else ():
            bad &= a != other
        if bool(bad.any()) and reference is not None and reference.shape == e.shape and reference.dtype == e.dtype:
            # what the fp64 reference computes is right too: a comparison (or a cast) of a float that the
            # pass rounds differently, within the float tolerance, flips where the operands tie, and eager's
            # side of the tie is its rounding, not the truth (atan(3) <= its own float32 value: eager True,
            # fp64 False)
            bad &= a != reference.detach().to(a.device)
        if not bool(bad.any()):
            return None
        return _report(what, a, e, bad, "exactly equal (integer/bool dtype)")
    a64, e64 = a.to(torch.float64), e.to(torch.float64)
    r64 = _as_reference(reference, e, a.device)
    tol_dtype = e.dtype if computed_in is None or _eps(computed_in) <= _eps(e.dtype) else computed_in
    judged = _judge(a64, e64, r64, tol_dtype, signed_zeros, specials)
    if judged is None:
        return None
    bad, special, rules = judged
    for other, other_ref in others():  # an element passes against any of eager's results
        other_r64 = _as_reference(other_ref, e, a.device)
        other_judged = _judge(a64, other.to(torch.float64), other_r64, tol_dtype, signed_zeros, specials)
        if other_judged is None:
            return None
        bad = bad & other_judged[0]
    if not bool(bad.any()):
        return None
    special &= bad
    hint = _relaxed_hint(a64, e64, r64, special) if specials == "strict" else None
    return _report(what, a, e, bad, "; ".join(rules), special=special, reference=r64, hint=hint)


class Oracle:
    """The oracle for one graph on one set of inputs, with a checker's options: the runs of the
    ORIGINAL graph it judges against (``RERUNS``: the fp64 reference, eager's other results), each
    computed once on the inputs given, on first need, and the one comparison every check makes
    (``verify``'s values, mutations and constants, the ``dynamic`` property at each size,
    ``compare_outputs``). ``gm`` and ``inputs`` are never modified.

    >>> import torch.fx as fx
    >>> gm = fx.symbolic_trace(lambda x: torch.ops.aten.mul.Tensor(x, 3.0) / 3.0)
    >>> oracle = Oracle(gm, (torch.tensor([3e38]),), specials="relaxed")
    >>> oracle.output(0, torch.tensor([3e38]), gm(torch.tensor([3e38])), "out") is None
    True
    """

    def __init__(self, gm: fx.GraphModule, inputs: tuple, *, specials: str = "strict", signed_zeros: bool = False):
        if specials not in SPECIALS:
            raise ValueError(f"specials={specials!r}, but should be one of {', '.join(SPECIALS)}")
        self.gm, self.inputs = gm, tuple(inputs)
        self.specials, self.signed_zeros = specials, signed_zeros
        self._runs: dict = {}
        # why the fp64 reference could not run, where a value needed it ("": it ran, or none needed it):
        # those values were judged by the dtype tolerances alone, and the verdict says so
        self.missing_reference = ""
        output = next((n for n in gm.graph.nodes if n.op == "output"), None)
        self._sources = pytree.tree_leaves(output.args[0]) if output is not None else []

    def run(self, kind: str):
        """The original run again (``RERUNS[kind]``) as (flat outputs, inputs after, constants after,
        ``{node name: dtype}``), or None where that run is unavailable."""
        if kind not in self._runs:
            why = []
            rerun = RERUNS[kind]
            done = rerun(self.gm, clone_inputs(self.inputs), why=why) if rerun is reference_run \
                else rerun(self.gm, clone_inputs(self.inputs))
            self._runs[kind] = None if done is None else (_leaves(done[0]), *done[1:])
            if done is None and kind == "reference":
                self.missing_reference = f"the fp64 reference did not run: {why[0] if why else 'no run'}"
        return self._runs[kind]

    def reference(self):
        """The fp64 run of the original (``reference_run``), as ``run`` returns it, or None."""
        return self.run("reference")

    def output(self, i: int, a, e, what: str) -> str | None:
        """None when ``a`` is acceptable as the original's ``i``-th flat output ``e``, else the message
        (metadata first, strides aside; then values). An output computed through a float less precise
        in eager than in the reference gets that float's tolerances (``least_precise``)."""
        message = compare_metadata(a, e, what, strides=False)
        if message is not None or bitwise_equal(a, e):
            return message
        ref = self.reference() if isinstance(e, torch.Tensor) else None
        computed_in = least_precise(self._sources[i], ref[3]) if ref and i < len(self._sources) else None
        return self.compare(a, e, what, lambda r: r[0][i], computed_in)

    def compare(self, a, e, what: str, pick, computed_in: torch.dtype | None = None) -> str | None:
        """``compare_values`` of ``a`` against the original's ``e``; ``pick(run)`` is that value in a
        ``run()`` result (an output, an input or a constant after the run). Where it differs, eager's
        other results (``ALTERNATIVES``) are as acceptable as the original's."""
        if not isinstance(e, torch.Tensor):
            return compare_values(a, e, what)
        ref = self.reference()
        reference = pick(ref) if ref else None
        return compare_values(a, e, what, reference=reference, signed_zeros=self.signed_zeros,
                              computed_in=computed_in, specials=self.specials,
                              alternatives=lambda: eager_alternatives(self.run, pick, reference))


def compare_outputs(gm: fx.GraphModule, inputs: tuple, actual, what: str = "output", *, specials: str = "strict",
                    signed_zeros: bool = False) -> str | None:
    """The oracle on a whole run: ``actual`` (the flat outputs of something computing what ``gm``
    computes) against ``gm`` run eagerly on copies of ``inputs`` (an ``Oracle``). None, or the first
    message.

    >>> import torch.fx as fx
    >>> gm = fx.symbolic_trace(lambda x: torch.ops.aten.mul.Tensor(x, 2.0))
    >>> compare_outputs(gm, (torch.ones(3),), [torch.full((3,), 2.0)]) is None
    True
    """
    with graph_run(gm):
        expected = _leaves(gm(*restorage(inputs)))
    actual = list(actual)
    if len(actual) != len(expected):
        return f"{what}s={len(actual)}, but should be {len(expected)}"
    oracle = Oracle(gm, inputs, specials=specials, signed_zeros=signed_zeros)
    for i, (a, e) in enumerate(zip(actual, expected)):
        message = oracle.output(i, a, e, f"{what}[{i}]")
        if message is not None:
            return message
    return None


def bitwise_equal(a, e) -> bool:
    """Tensors equal bit for bit (NaN payloads included): the fast path for nearly every value."""
    if not (isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor)) or a.dtype != e.dtype or a.shape != e.shape:
        return False
    if a.is_complex():
        a, e = torch.view_as_real(a.resolve_conj()), torch.view_as_real(e.resolve_conj())
    if a.is_floating_point():
        view = {2: torch.int16, 4: torch.int32, 8: torch.int64}.get(a.element_size())
        return view is not None and torch.equal(a.contiguous().view(view), e.contiguous().view(view))
    return torch.equal(a, e)


def _leaves(out) -> list:
    """A graph's outputs as a flat list of leaves."""
    from torch.utils import _pytree as pytree

    return pytree.tree_leaves(out)


def _judge(a64, e64, r64, tol_dtype, signed_zeros: bool, specials: str):
    """One expected value: None when ``a64`` passes everywhere, else (bad elements, of which NaN/inf
    misplacements, the rules broken)."""
    nan_a, nan_e = torch.isnan(a64), torch.isnan(e64)
    same = (a64 == e64) | (nan_a & nan_e)
    if signed_zeros:
        same &= torch.signbit(a64) == torch.signbit(e64)
    if bool(same.all()):
        return None
    rtol, atol = tolerance(tol_dtype)
    k = error_ratio(tol_dtype, e64.numel())
    # Exact rules first: NaN placement, infinities, (signed zeros); then tolerances on the rest.
    special = (nan_a != nan_e) | ((torch.isinf(a64) | torch.isinf(e64)) & (a64 != e64) & ~nan_a & ~nan_e)
    rules = []
    if specials == "relaxed" and r64 is not None and bool(special.any()):
        # The original's NaN/inf that the fp64 reference lacks (it overflowed or lost the value):
        # the reference's value, or a finite value within tolerance of it, is as good.
        lost = (nan_e | torch.isinf(e64)) & ~_same_value(e64, r64)
        near = torch.isfinite(a64) & torch.isfinite(r64) & ((a64 - r64).abs() <= k * (atol + rtol * r64.abs()))
        special &= ~(lost & (_same_value(a64, r64) | near))
    if bool(special.any()):
        rules.append("NaN and +-inf at the same positions as the original" +
                     (" or as the fp64 reference where the original lost the value" if specials == "relaxed" else ""))
    if signed_zeros:
        zero_bad = (a64 == 0) & (e64 == 0) & (torch.signbit(a64) != torch.signbit(e64))
        if bool(zero_bad.any()):
            special |= zero_bad
            rules.append("zeros of the same sign")
    finite = torch.isfinite(a64) & torch.isfinite(e64)
    far = finite & ((a64 - e64).abs() > atol + rtol * e64.abs())
    if bool(far.any()):
        rule = f"within rtol={rtol:g}, atol={atol:g} of the original"
        if r64 is not None:
            err_a, err_e = (a64 - r64).abs(), (e64 - r64).abs()
            far &= ~((err_a <= k * err_e + atol + rtol * r64.abs()) & torch.isfinite(r64))
            if bool(far.any()) and not bool(special.any()) and \
                    _rms_close(err_a, err_e, finite & torch.isfinite(r64), k, atol):
                return None  # rounding moved (reassociation): overall error no worse than k x the original's
            rule += f", or within {k:g}x the original's error against the fp64 reference"
        if bool(far.any()):
            rules.append(rule)
    bad = special | far
    if not bool(bad.any()):
        return None
    return bad, special, rules


def _as_reference(reference, e: torch.Tensor, device):
    return reference.detach().to(device, torch.float64) if isinstance(reference, torch.Tensor) \
        and reference.shape == e.shape else None


def _relaxed_hint(a64, e64, r64, special) -> str | None:
    """At the first NaN/inf misplacement: when the original lost a value the fp64 reference has, and
    the result kept it, say so and name the policy that accepts it."""
    if r64 is None or not bool(special.any()):
        return None
    i = int(torch.nonzero(special.flatten())[0])
    a, e, r = (float(t.flatten()[i]) for t in (a64, e64, r64))
    lost = not math.isfinite(e) and not (e == r or (math.isnan(e) and math.isnan(r)))
    if not lost or not (math.isfinite(a) or a == r):
        return None
    if math.isfinite(r):
        return (f"the original overflows here (the fp64 reference is {r:.6g}); if your pass may avoid overflow, "
                f"use --specials relaxed")
    return f"the original loses the value here (the fp64 reference is {r}); if your pass may keep it, use --specials relaxed"


def _same_value(x, y):
    """Elementwise: equal, infinities included, or both NaN."""
    return (x == y) | (torch.isnan(x) & torch.isnan(y))


def _eps(dtype: torch.dtype) -> float:
    if dtype.is_complex:
        dtype = dtype.to_real()
    return torch.finfo(dtype).eps if dtype.is_floating_point else 0.0


def least_precise(node, reference_dtypes: dict) -> torch.dtype | None:
    """The least precise float dtype that ``node`` or anything it is computed from has in eager but not
    in the fp64 reference (``reference_dtypes``: node name -> dtype there), or None. An f32 value
    promoted into an f64 output was f32 in eager and f64 in the reference: the output is only as exact
    as f32. A value after an explicit cast has the cast's dtype in both, and does not count (so a
    dropped cast is still caught)."""
    worst, seen, todo = None, set(), [node] if isinstance(node, fx.Node) else []
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        val, ref = n.meta.get("val"), reference_dtypes.get(n.name)
        if isinstance(val, torch.Tensor) and (val.dtype.is_floating_point or val.dtype.is_complex) \
                and ref is not None and _eps(val.dtype) > _eps(ref) and (worst is None or _eps(val.dtype) > _eps(worst)):
            worst = val.dtype
        todo.extend(n.all_input_nodes)
    return worst


def _rms_close(err_a, err_e, mask, k: float, atol: float) -> bool:
    """Inductor's ``same()`` rule: RMS error against fp64 within ``k`` x the original's, plus atol."""
    if not bool(mask.all()):
        return False
    rms_a = float(err_a.pow(2).mean().sqrt())
    rms_e = float(err_e.pow(2).mean().sqrt())
    return rms_a <= k * rms_e + atol


def _scalar_equal(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    return type(a) is type(b) and a == b


def _report(what, a, e, bad, rule, special=None, reference=None, hint=None) -> str:
    """The house mismatch message: count, first NaN/inf misplacement, worst abs and rel errors."""
    n_bad, n = int(bad.sum()), bad.numel()
    lines = [f"{what}: {n_bad} of {n} elements differ ({describe(e)}), but should be {rule}"]
    flat_a, flat_e = a.flatten(), e.flatten()
    if special is not None and bool(special.any()):
        i = int(torch.nonzero(special.flatten())[0])
        lines.append(f"  first NaN/inf mismatch at index {_index(i, e.shape)}: got {_fmt(flat_a[i])}, "
                     f"expected {_fmt(flat_e[i])}")
        if hint:
            lines.append(f"  {hint}")
    a64, e64 = flat_a.to(torch.float64), flat_e.to(torch.float64)
    finite_bad = bad.flatten() & torch.isfinite(a64) & torch.isfinite(e64)
    if not bool(finite_bad.any()):
        return "\n".join(lines)
    zero = torch.zeros((), dtype=torch.float64)
    diff = torch.where(finite_bad, (a64 - e64).abs(), zero)
    i = int(torch.argmax(diff))
    ref = f" (fp64 reference {_fmt(reference.flatten()[i])})" if reference is not None else ""
    lines.append(f"  worst abs error {float(diff[i]):.6g} at index {_index(i, e.shape)}: got {_fmt(flat_a[i])}, "
                 f"expected {_fmt(flat_e[i])}{ref}")
    rel = torch.where(finite_bad, diff / e64.abs().clamp_min(torch.finfo(torch.float64).tiny), zero)
    j = int(torch.argmax(rel))
    if j != i:
        lines.append(f"  worst rel error {float(rel[j]):.6g} at index {_index(j, e.shape)}: got {_fmt(flat_a[j])}, "
                     f"expected {_fmt(flat_e[j])}")
    return "\n".join(lines)


def _index(flat: int, shape) -> tuple:
    idx = []
    for n in reversed(tuple(shape)):
        idx.append(flat % n)
        flat //= n
    return tuple(reversed(idx))


def _fmt(x) -> str:
    v = x.item()
    return repr(v) if isinstance(v, (bool, int)) else f"{v:.8g}"
