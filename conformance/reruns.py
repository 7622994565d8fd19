"""The runs of the ORIGINAL graph that the oracle judges a value against, each on copies of the inputs.

``reference_run`` is the fp64 reference: the original on floating inputs and constants upcast to
float64 (random ops, and ops that refuse float64 operands, run as drawn; an ``eps`` that means the
input dtype's epsilon keeps it). The others are what eager gives for the same computation as much
as the original's own run (``ALTERNATIVES``): ``scalar_path_run`` every elementwise op on its scalar
CPU kernel, ``flushed_run`` on a GPU the inputs with subnormals flushed to zero, ``repeat_run`` on a
GPU a second run (atomics add in the order threads arrive), ``positive_nan_run`` every computed NaN
the positive one, judged against its own fp64 run (``positive_nan_reference_run``). ``RERUNS`` names
them all for ``oracle.Oracle``, which runs each once, on first need; nothing here compares values.
"""

from __future__ import annotations

import contextlib
import math

import torch
import torch.fx as fx
import torch.utils._pytree as pytree

from ._random import draws_random
from .copies import graph_run, restorage, snapshot, tensor_constants, widened


def upcast(tensors) -> tuple:
    """Copies of ``tensors`` with floating dtypes as float64: same sizes, strides, offsets and storage
    sharing (so the original graph's views and in-place writes mean the same thing)."""
    return restorage(tensors, float_dtype=torch.float64)


def reference_run(gm: fx.GraphModule, inputs: tuple, why: list | None = None):
    """Run ``gm`` with floating inputs and constants upcast to float64:
    (outputs, inputs after, ``{target: constant after}`` for its tensor constants, ``{node name:
    dtype}`` of every tensor it computed).

    Returns None when the graph cannot run that way (an op without a kernel for the dtypes it was
    drawn with, say); the oracle then falls back to the dtype table alone. Random ops, and ops that
    refuse float64 operands, run as drawn (see ``_AsDrawn``). Floats made from integers (``expm1``
    of an int64, ``mul`` of one by 0.5) and factories without a dtype take the default dtype, which
    is float64 for the run: else they were float32 in the reference too (``sin(expm1(10))``: eager
    0.23891716, the truth 0.23799354, and a lowering's 0.23702015, as close to the truth, was flagged
    as 3x eager's error against a "reference" that was eager itself).
    """
    return _fp64_run(gm, inputs, _AsDrawn, why)


def _fp64_run(gm: fx.GraphModule, inputs: tuple, interpreter: type, why: list | None = None):
    """``gm`` run by ``interpreter`` (an ``_AsDrawn``) in float64, random ops drawing in the host's dtype."""
    class AsDrawn(interpreter):
        host_default = torch.get_default_dtype()

    with _default_dtype(torch.float64):
        return _rerun(gm, inputs, AsDrawn, upcast_to=torch.float64, why=why)


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype):
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


class _AsDrawn(fx.Interpreter):
    """Random ops, and ops that refuse their upcast operands (``quantize_per_tensor`` takes float32
    only), run on their operands cast back to the dtypes their ``meta['val']`` had, their floating
    results upcast again: a random op then draws the numbers eager drew from the same generator
    state (in float64 it draws others), and one op that takes no float64, even a dead one, no
    longer leaves the whole graph without a reference."""

    host_default = torch.float32  # the default dtype eager ran with: a random factory draws in it

    def run_node(self, n):
        drawn = n.op == "call_function" and draws_random(n.target)
        eps = _dtype_eps(n) if n.op == "call_function" and not drawn else None
        if eps is not None:  # the original's meaning, in float64: its dtype's epsilon, not float64's
            with self._set_current_node(n):
                args, kwargs = self.fetch_args_kwargs_from_env(n)
                position = _eps_position(n.target)
                return n.target(*args[:position], **{**kwargs, "eps": eps}) if len(args) > position \
                    else n.target(*args, **{**kwargs, "eps": eps})
        try:
            if not drawn:
                return super().run_node(n)
        except Exception:  # noqa: BLE001 - retried as drawn; a second failure is the caller's
            if n.op != "call_function":
                raise
        with self._set_current_node(n):
            args, kwargs = self.fetch_args_kwargs_from_env(n)
            args = _recast(args, n.args)
            kwargs = {k: _recast((v,), (n.kwargs.get(k),))[0] for k, v in kwargs.items()}
            with _default_dtype(self.host_default):  # rand([3]) draws eager's float32 numbers
                out = n.target(*args, **kwargs)
        return pytree.tree_map(lambda t: t.to(widened(t.dtype, torch.float64))
                               if isinstance(t, torch.Tensor) and widened(t.dtype, torch.float64) else t, out)


# Ops whose ``eps=None`` means the epsilon of their input's dtype (``torch.finfo(dtype).eps``): run
# in float64 by the reference, they would take float64's, 9 orders of magnitude smaller, and the
# original's own "error" against such a reference is then as large as a pass's change of eps
# (rms_norm at inputs near 1e-4: 0.278 in float32, 1.0 in the float64 "reference"; a pass that set
# eps=1e-5 gave 0.03 and was judged within 3x of the original's error).
_EPS_OF_DTYPE = {torch.ops.aten.rms_norm.default, torch.ops.aten._fused_rms_norm.default}


def _dtype_eps(n: fx.Node) -> float | None:
    """For an ``_EPS_OF_DTYPE`` call with ``eps`` None (or left out): the epsilon of the dtype its input
    had in eager (``meta['val']``); None otherwise."""
    if n.target not in _EPS_OF_DTYPE:
        return None
    position = _eps_position(n.target)
    given = n.kwargs["eps"] if "eps" in n.kwargs else n.args[position] if len(n.args) > position else None
    val = n.args[0].meta.get("val") if n.args and isinstance(n.args[0], fx.Node) else None
    if given is not None or not isinstance(val, torch.Tensor) or not val.dtype.is_floating_point:
        return None
    return torch.finfo(val.dtype).eps


def _eps_position(target) -> int:
    return next(i for i, a in enumerate(target._schema.arguments) if a.name == "eps")


def _recast(values: tuple, nodes: tuple) -> tuple:
    """``values`` (a call's operands, upcast) with each tensor whose node's ``meta['val']`` had another
    floating dtype cast back to it."""
    def back(v, a):
        val = a.meta.get("val") if isinstance(a, fx.Node) else None
        if isinstance(v, torch.Tensor) and isinstance(val, torch.Tensor) and v.dtype != val.dtype and (
                (v.is_floating_point() and val.dtype.is_floating_point) or (v.is_complex() and val.dtype.is_complex)):
            return v.to(val.dtype)
        if isinstance(v, (list, tuple)) and isinstance(a, (list, tuple)) and len(v) == len(a):
            return type(v)(back(x, y) for x, y in zip(v, a))
        return v
    return tuple(back(v, a) for v, a in zip(values, nodes))


def scalar_path_run(gm: fx.GraphModule, inputs: tuple):
    """Run ``gm`` as eager would with every elementwise op on its scalar CPU kernel, as
    ``reference_run`` returns it (or None where it cannot run, or nothing is on the CPU).

    Eager CPU computes an elementwise op with vectorized code over the body of a contiguous tensor
    and with the scalar lambda elsewhere (the tail, a 1-element tensor, strided operands); the two
    disagree on some special values (measured: fmod by a subnormal divisor, gelu(+inf) and bf16
    gelu near the top of the range on AVX-512), and differently on each ``ATEN_CPU_CAPABILITY``.
    Both are eager: a result matching either is not a pass's fault.
    """
    if not any(isinstance(t, torch.Tensor) and t.device.type == "cpu" for t in inputs):
        return None
    return _rerun(gm, inputs, _ScalarPath)


class _ScalarPath(fx.Interpreter):
    """Each elementwise op is also run on copies of its operands with an inner stride of 2, which
    no vectorized loop takes, and its result (eager's layout, aliasing and writes) gets those values."""

    def call_function(self, target, args, kwargs):
        if not _elementwise(target):
            return super().call_function(target, args, kwargs)
        scalar = target(*_strided_copies(args), **dict(zip(kwargs, _strided_copies(tuple(kwargs.values())))))
        out = super().call_function(target, args, kwargs)  # in-place ops write the operands' memory here
        if isinstance(out, torch.Tensor) and isinstance(scalar, torch.Tensor) and out.shape == scalar.shape \
                and out.numel() > 1:
            with torch.no_grad():
                out.copy_(scalar)
        return out


def flushed_run(gm: fx.GraphModule, inputs: tuple):
    """On a GPU (an input on a CUDA/ROCm device): ``gm`` run as eager would on its inputs with every
    subnormal float flushed to zero, sign kept, as ``reference_run`` returns it; else None.

    Triton compiles ``tl.exp``/``log``/``sin``/``cos`` (and Inductor's ``tl_math``) to ``.approx.ftz``
    instructions and links libdevice with flush-to-zero (``enable_reflect_ftz``): a subnormal operand
    is zero to them (``log(1e-40)`` is ``-inf``). Eager CUDA keeps subnormals. A kernel's result that
    matches the original on flushed inputs is what a correct kernel on that GPU gives. Subnormal
    results are within every float tolerance of zero, so they need no rule of their own.
    """
    if not on_gpu(inputs):
        return None
    flushed = tuple(flush_subnormals(t) if isinstance(t, torch.Tensor) else t for t in inputs)
    if all(f is t for f, t in zip(flushed, inputs)):
        return None
    return _rerun(gm, flushed, fx.Interpreter)


def repeat_run(gm: fx.GraphModule, inputs: tuple):
    """On a GPU (an input on a CUDA device): ``gm`` run once more as eager runs it, as
    ``reference_run`` returns it; else None.

    Eager CUDA's atomic kernels (``index_add``, ``scatter_add``, ``index_put`` accumulating, the
    backward of gathers) add in the order threads arrive, so two runs of one graph may round
    differently: either is eager's result (``torch.use_deterministic_algorithms`` names them). Where
    eager is deterministic the second run equals the first and accepts nothing more.
    """
    if not on_gpu(inputs):
        return None
    return _rerun(gm, inputs, fx.Interpreter)


def positive_nan_run(gm: fx.GraphModule, inputs: tuple):
    """``gm`` run as eager would with the NaNs that each computing elementwise op (and each cast)
    makes replaced by the positive quiet NaN, as ``reference_run`` returns it; None where no op made a
    NaN (or it cannot run).

    IEEE 754 leaves the sign of a NaN an operation returns unspecified, save for the sign-bit
    operations (``neg``, ``abs``, ``copysign``) and copies; hardware and kernels differ: measured,
    eager's bfloat16 ``exp`` of a negative NaN keeps the sign on an AVX-512 CPU and drops it under
    ``ATEN_CPU_CAPABILITY=default``, as c10's float -> bfloat16 rounding does. Where ``copysign``
    (or ``signbit``) then reads that sign, both results are eager's. Machines that keep a NaN's sign
    are the eager run itself; this run is the machine that drops it. Its values are judged against
    ``positive_nan_reference_run``, the fp64 reference of that machine.
    """
    made = []
    run = _rerun(gm, inputs, _positive_nans(fx.Interpreter, made))
    return run if made else None


def positive_nan_reference_run(gm: fx.GraphModule, inputs: tuple):
    """``reference_run`` with the NaNs each computing op makes positive, as ``positive_nan_run``'s."""
    return _fp64_run(gm, inputs, _positive_nans(_AsDrawn, []))


def _positive_nans(interpreter: type, made: list) -> type:
    """``interpreter`` with the NaNs each op that computes them makes replaced by the positive one;
    each such op is appended to ``made``."""
    class PositiveNaNs(interpreter):
        def call_function(self, target, args, kwargs):
            out = super().call_function(target, args, kwargs)
            if _makes_nan_sign(target) and isinstance(out, torch.Tensor) and out.is_floating_point() \
                    and out.numel() > 0:
                nan = torch.isnan(out)
                if bool(nan.any()):
                    made.append(target)
                    with torch.no_grad():  # in place: an in-place op's result is the operand it wrote
                        out.copy_(torch.where(nan, torch.full_like(out, math.nan), out))
            return out

    return PositiveNaNs


# IEEE 754's sign-bit operations and copies: the sign of a NaN they return is the operand's.
_SIGN_KEEPING = {"neg", "abs", "copysign", "positive", "clone", "where", "masked_fill"}


def _makes_nan_sign(target) -> bool:
    if not isinstance(target, torch._ops.OpOverload):
        return False
    name = target.overloadpacket.__name__.rstrip("_")
    if name in ("_to_copy", "to"):
        return True
    return torch.Tag.pointwise in target.tags and name not in _SIGN_KEEPING


def on_gpu(inputs) -> bool:
    return any(isinstance(t, torch.Tensor) and t.device.type == "cuda" for t in inputs)


def flush_subnormals(t: torch.Tensor) -> torch.Tensor:
    """``t`` with its subnormal floats replaced by zeros of the same sign (``t`` itself when none)."""
    if not t.is_floating_point() or t.numel() == 0:
        return t
    tiny = torch.finfo(t.dtype).tiny
    sub = (t != 0) & (t.abs() < tiny)
    if not bool(sub.any()):
        return t
    return torch.where(sub, t * 0, t)


# The runs of the ORIGINAL graph the oracle may compare against, by kind; each is computed once, on
# first use, and the alternatives (all but "reference") only where a value differs.
RERUNS = {"reference": reference_run, "scalar": scalar_path_run, "flushed": flushed_run, "again": repeat_run,
          "positive_nan": positive_nan_run, "positive_nan_reference": positive_nan_reference_run}
# The runs whose results are eager's as much as the original run's (a value passes against any of
# them), each with the run that is its fp64 reference, or None where the original's reference is.
ALTERNATIVES = {"scalar": None, "flushed": None, "again": None, "positive_nan": "positive_nan_reference"}


def eager_alternatives(run, pick, reference) -> list:
    """``[(value, its fp64 reference)]`` from each of ``ALTERNATIVES`` that ``run(kind)`` (a ``RERUNS``
    result, or None) has; ``pick(run)`` is the value in a run, ``reference`` the original's."""
    found = []
    for kind, reference_kind in ALTERNATIVES.items():
        done = run(kind)
        if done:
            own = run(reference_kind) if reference_kind else None
            found.append((pick(done), reference if reference_kind is None else pick(own) if own else None))
    return found


def _elementwise(target) -> bool:
    return isinstance(target, torch._ops.OpOverload) and torch.Tag.pointwise in target.tags \
        and torch.Tag.nondeterministic_seeded not in target.tags


def _strided_copies(values) -> tuple:
    out = []
    for v in values:
        if isinstance(v, torch.Tensor) and v.device.type == "cpu" and v.numel() > 1:
            copy = torch.empty((*v.shape, 2), dtype=v.dtype)[..., 0]
            with torch.no_grad():
                copy.copy_(v)
            v = copy
        out.append(v)
    return tuple(out)


def _rerun(gm: fx.GraphModule, inputs: tuple, interpreter: type, upcast_to: torch.dtype | None = None,
           why: list | None = None):
    """Run a snapshot of ``gm`` with ``interpreter`` on copies of ``inputs`` (floats as ``upcast_to``):
    (outputs, inputs after, constants after, ``{node name: dtype}``), or None when it cannot run (and
    why, appended to ``why``)."""
    try:
        ref = snapshot(gm)  # a copy: the caller's constants stay as they are
        if upcast_to is not None:
            for node in ref.graph.nodes:
                if node.op == "get_attr":
                    _upcast_attr(ref, node.target)
                elif node.op == "call_module":  # a torch-IR layer: its floating parameters and buffers
                    ref.get_submodule(node.target).to(upcast_to)
        ref_inputs = restorage(inputs, float_dtype=upcast_to)
        dtypes = {}

        class Recorder(interpreter):
            def run_node(self, n):
                out = super().run_node(n)
                if isinstance(out, torch.Tensor):
                    dtypes[n.name] = out.dtype
                return out

        with graph_run(ref):
            outputs = Recorder(ref).run(*ref_inputs)
        return outputs, ref_inputs, tensor_constants(ref), dtypes
    except Exception as exc:  # noqa: BLE001 - any failure only means "no such run available"
        if why is not None:
            why.append(f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}")
        return None


def _upcast_attr(gm: torch.nn.Module, target: str) -> None:
    owner_path, _, leaf = target.rpartition(".")
    owner = gm.get_submodule(owner_path)
    value = getattr(owner, leaf)
    if isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex()):
        new = upcast((value,))[0]
        if leaf in owner._buffers:
            owner._buffers[leaf] = new
        elif leaf in owner._parameters:
            owner._parameters[leaf] = torch.nn.Parameter(new, requires_grad=False)
        else:
            setattr(owner, leaf, new)
