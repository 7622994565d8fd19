"""One eager call of the generator: run, tried first where it may kill the process, and watched.

The builder computes every node in eager as it adds it (``builder.py``). Torch's eager kernels are
not all safe to call: some kill the process on arguments known here (``kills_eager``), some on
arguments not pinned down (``_CRASH_PRONE``: run first in a forked trial), some give results that
depend on more than their operands (``RUN_TWICE``). A call that kills the process anyway is no
pass's fault: ``watch_eager_calls`` lets a watcher (the search's driver) learn which call it was.
``quiet_logs`` drops what torch logs about a refusal that is an answer here.
"""

from __future__ import annotations

import contextlib
import faulthandler
import logging
import operator
import os
import signal
import time
import warnings

import torch
import torch.utils._pytree as pytree

from .device import record_attempt


class StepRejected(Exception):
    """A drawn node cannot be added (it would raise, overflow, or write somewhere undefined)."""


# Ops whose eager CPU kernels leave some results depending on more than their operands (measured,
# torch 2.13: the CPU flash attention's logsumexp for rows a mask or special values empty out):
# each drawn call is run twice and kept only where both runs agree bit for bit.
RUN_TWICE = frozenset({torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default})


# Ops whose results after the first are left without a getitem: the CPU flash attention's
# logsumexp is not written for some rows (measured: two runs that agreed while drawn disagreed later).
# So are the CUDA attention overloads' (log-sum-exp, RNG state, SymInt lengths: what autograd saves).
FIRST_RESULT_ONLY = RUN_TWICE | frozenset({torch.ops.aten._scaled_dot_product_efficient_attention.default,
                                           torch.ops.aten._scaled_dot_product_flash_attention.default,
                                           torch.ops.aten._scaled_dot_product_cudnn_attention.default})


# Calls that kill the process in eager CPU instead of raising (measured, torch 2.13: SIGFPE). Never
# run, so never drawn: a drawn graph must run, and a crash while drawing is no pass's fault. The
# most negative integer divided by -1 overflows, and x86's idiv traps; the trunc path divides in C.
_TRUNC_DIVISIONS = frozenset({torch.ops.aten.div.Tensor_mode, torch.ops.aten.div_.Tensor_mode,
                              torch.ops.aten.div.Scalar_mode, torch.ops.aten.div_.Scalar_mode})


def kills_eager(target, args, kwargs) -> str | None:
    """Why running this call would kill the process (SIGFPE), or None."""
    if target in _TRUNC_DIVISIONS and kwargs.get("rounding_mode") == "trunc" and len(args) >= 2:
        x, d = args[0], args[1]
        if isinstance(x, torch.Tensor) and x.dtype in (torch.int32, torch.int64) and x.numel():
            low = torch.iinfo(x.dtype).min
            minus_one = bool((d == -1).any()) if isinstance(d, torch.Tensor) else d == -1
            if minus_one and bool((x == low).any()):
                return f"{target} of {low} by -1 with rounding_mode='trunc' kills eager CPU (SIGFPE)"
    return None


_FAKE_LOG = logging.getLogger("torch._subclasses.fake_tensor")


class _DropAll(logging.Filter):
    def filter(self, record) -> bool:
        return False


@contextlib.contextmanager
def quiet_logs(*names: str):
    """Drop what torch's loggers ``names`` log while inside: a refusal torch logs as an error (a
    meta kernel that raises, a guard Dynamo cannot build for a graph it then rejects) is an answer
    here. Scoped: the filters are on those loggers only, and removed on the way out."""
    f, loggers = _DropAll(), [logging.getLogger(n) for n in names]
    for logger in loggers:
        logger.addFilter(f)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(f)


def quiet_fake_log():
    """FakeTensorMode logs a traceback for every meta kernel that raises."""
    return quiet_logs(_FAKE_LOG.name)


# Calls whose eager CPU kernels kill the process (SIGSEGV) on some arguments not pinned down (measured,
# torch 2.13: a bfloat16 3-d convolution of a (1, 1, 3, 1, 2) input by a (2, 1, 2, 3, 3) weight with
# stride 2, dilation 2 and padding (2, 3, 4); float32, or stride or dilation 1, run). Each such call
# is run first in a forked trial process, and one that kills the trial is never drawn.
_CRASH_PRONE = {torch.ops.aten.convolution.default: (torch.bfloat16, torch.float16)}


_TRIAL_S = 20.0


def crashes_in_trial(target, args, kwargs) -> str | None:
    """Why ``target(*args, **kwargs)`` is not drawn (it killed a forked trial), or None. Only calls
    of ``_CRASH_PRONE`` ops at its dtypes, on CPU tensors, in a process that may fork."""
    dtypes = _CRASH_PRONE.get(target)
    first = next((a for a in args if isinstance(a, torch.Tensor)), None)
    if not dtypes or first is None or first.dtype not in dtypes or first.device.type != "cpu":
        return None
    if not hasattr(os, "fork") or torch.cuda.is_initialized():  # a forked child cannot use CUDA
        return None
    pid = os.fork()
    if pid == 0:  # the child: run it and report by exit status only
        try:
            torch.set_num_threads(1)  # a forked child entering OpenMP can hang (docs/torch-facts.md section 7)
            faulthandler.disable()  # its death is the answer, not a traceback on the host's stderr
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                target(*args, **kwargs)
        except BaseException:  # noqa: BLE001 - raising is the builder's to see, in this process
            os._exit(1)
        os._exit(0)
    deadline = time.monotonic() + _TRIAL_S
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:  # hung: as good as dead for a draw
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return f"{target} did not finish in a trial process within {_TRIAL_S:.0f} s"
        time.sleep(0.002)
    if os.WIFSIGNALED(status):
        return f"{target} killed a trial process ({signal.Signals(os.WTERMSIG(status)).name}): eager cannot run it"
    return None


def same_bits(a, b) -> bool:
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same_bits(x, y) for x, y in zip(a, b))
    if not isinstance(a, torch.Tensor):
        return a == b
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    a, b = a.detach().contiguous(), b.detach().contiguous()
    if a.is_floating_point():
        view = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
        a, b = a.view(view), b.view(view)
    return torch.equal(a, b)


def attempt(target, args, kwargs):
    """``run_eager``, its outcome reported to whoever listens (``device.report_calls``: the device probe)."""
    try:
        out = run_eager(target, args, kwargs)
    except StepRejected as exc:
        record_attempt(target, args, kwargs, str(exc))
        raise
    record_attempt(target, args, kwargs, None, out)
    return out


def run_eager(target, args, kwargs):
    watched = _WATCH is not None or _AVOID
    if watched:
        call = describe_call(target, args, kwargs)
        if call in _AVOID or op_key(target) in _AVOID:
            raise StepRejected(f"{call} killed the drawing process in an earlier draw")
        if _WATCH is not None:
            _WATCH(call)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _eager(target, args, kwargs)
    except (RuntimeError, ValueError, TypeError, IndexError, ZeroDivisionError, OverflowError) as exc:
        raise StepRejected(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
    finally:
        if _WATCH is not None:
            _WATCH(None)


def _eager(target, args, kwargs):
    return target(*args, **kwargs)


# --- a crash while drawing -------------------------------------------------------------------------
# An eager call that kills the process (a torch bug no table here lists yet: ``kills_eager``,
# ``_CRASH_PRONE``) is no pass's fault. ``watch_eager_calls(write)`` makes each eager call of the
# generator announce itself first (``write(description)``, ``write(None)`` once it returned), so
# whoever watches the drawing process die knows the call; ``avoid`` holds calls (descriptions) and ops
# (``op_name``) that killed it before, which are then rejected like calls that raise.
_WATCH = None


_AVOID = frozenset()


_CALL_TEXT = 2000  # longest description: what a watcher's buffer holds


@contextlib.contextmanager
def watch_eager_calls(write=None, avoid=()):
    """Within: every eager call the generator makes is announced to ``write`` (None: not watched),
    and the calls and ops in ``avoid`` are never made."""
    global _WATCH, _AVOID
    previous = _WATCH, _AVOID
    _WATCH, _AVOID = write, frozenset(avoid)
    try:
        yield
    finally:
        _WATCH, _AVOID = previous


def op_key(target) -> str:
    """How ``avoid`` names every call of ``target``: ``"op aten.sin.default"``."""
    return f"op {target if isinstance(target, torch._ops.OpOverload) else getattr(target, '__name__', repr(target))}"


def describe_call(target, args, kwargs) -> str:
    """``target(args)`` in one line: tensors as dtype[shape] with strides and device, other arguments
    as their repr; the same call drawn again is described the same way."""

    def arg(a) -> str:
        if isinstance(a, torch.Tensor):
            dense = a.is_contiguous()
            return (f"{str(a.dtype).removeprefix('torch.')}{list(a.shape)}"
                    f"{'' if dense else f' stride={a.stride()}'}{f' offset={a.storage_offset()}' if a.storage_offset() else ''}"
                    f"{'' if a.device.type == 'cpu' else f' on {a.device}'}")
        if isinstance(a, (list, tuple)):
            inner = ", ".join(arg(x) for x in a)
            return f"[{inner}]" if isinstance(a, list) else f"({inner}{',' if len(a) == 1 else ''})"
        return repr(a)

    parts = [arg(a) for a in args] + [f"{k}={arg(v)}" for k, v in kwargs.items()]
    text = f"{op_key(target).removeprefix('op ')}({', '.join(parts)})"
    return text if len(text) <= _CALL_TEXT else text[:_CALL_TEXT - 3] + "..."
