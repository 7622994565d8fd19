"""Run one function in a forked child: a pass that segfaults, aborts, calls ``os._exit`` or hangs
in C code takes down the child, never the harness.

Forking (not spawning) means the child already has the pass object, the graph and the inputs:
nothing is pickled on the way in, lambdas and closures work, and a child costs a few ms instead
of a fresh interpreter's torch import. Only the (plain-data) result is pickled back.

A process that has initialised CUDA cannot fork a child that uses torch (the child gets a copy of
a CUDA context it cannot use), so where ``fork_is_safe()`` is False, or the examples run on CUDA,
examples go to a persistent worker process started without fork (``_spawn.py``); a worker that
dies ends its example with the same ``ChildDied`` reasons as a forked child.
"""

from __future__ import annotations

import contextlib
import contextvars
import faulthandler
import gc
import os
import pickle
import select
import signal
import sys
import time

import torch

from .._errors import UsageError
from .._warning_log import absorb, child_call


class ChildDied(Exception):
    """The child did not return a result: ``reason`` says how it ended (signal, exit code, timeout)."""

    def __init__(self, reason: str, timed_out: bool = False, raised: bool = False, harness: bool = False):
        super().__init__(reason)
        self.reason, self.timed_out = reason, timed_out
        self.raised = raised  # the child raised a Python exception (and reported it) rather than dying
        self.harness = harness  # it overran the harness's budget outside the pass's timed phases: ours

    @classmethod
    def from_report(cls, report: str) -> "ChildDied":
        """What the child raised, from its ``"Type: message"`` report."""
        died = cls(f"the isolated check failed: {report}", raised=True)
        died.error_type, _, died.error = report.partition(": ")
        return died

    error_type = error = None  # from_report: the exception the child raised, and its message


def can_isolate() -> bool:
    return hasattr(os, "fork")


def fork_is_safe() -> bool:
    """Whether a forked child of this process may run torch: fork exists and CUDA is not initialised
    here (a child forked after that cannot use CUDA, and may not run at all)."""
    return can_isolate() and not torch.cuda.is_initialized()


_WORKER = contextvars.ContextVar("fx_conformance_worker", default=None)


def current_worker():
    """The spawned worker this search isolates examples in (``_spawn.Worker``), or None: trigger
    discovery probes the pass in it where this process may not fork."""
    return _WORKER.get()


@contextlib.contextmanager
def probing_in(worker):
    """``worker`` is the ``current_worker()`` inside the block (None: no worker)."""
    token = _WORKER.set(worker)
    try:
        yield
    finally:
        _WORKER.reset(token)


def death_reason(exit_code: int) -> str:
    """How a process that returned no result ended, as ``ChildDied`` says it; ``exit_code`` as
    ``multiprocessing`` gives it (a negative number: killed by that signal)."""
    if exit_code < 0:
        sig = -exit_code
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return (f"process killed by {name} (signal {sig}), but the pass should return a graph "
                f"(it crashed the interpreter)")
    return (f"process exit code={exit_code} before the pass returned, but the pass should "
            f"return a graph (os._exit or a crash in native code)")


_TIMED, _UNTIMED = b"T", b"U"


def timeout_reason(timeout: float) -> str:
    return (f"time={timeout:g} s elapsed, but the pass should finish within the timeout "
            f"(killed the isolated process)")


# What the harness's own work in a child may take between the pass's timed phases (the original's
# eager, fp64 and scalar-path runs, proofs, sizes of the dynamic property); past it the child is
# killed and the example is a fault of the harness, never the pass's timeout.
HARNESS_BUDGET_S = 300.0


class Phases:
    """The parent's side of ``deadlines.PHASE_HOOK``: the kill time of a child, from the phase it is in.

    A timed phase (the pass, a run of what it returned) gets ``grace`` from its start; the rest of
    the check ``HARNESS_BUDGET_S`` from its own start (or ``grace``, where no phase was ever announced:
    a request that is the pass's throughout)."""

    def __init__(self, grace: float | None, announced: bool):
        self.grace, self.timed = grace, not announced
        self.end = None if grace is None else time.monotonic() + (grace if not announced else HARNESS_BUDGET_S)

    def enter(self, timed: bool) -> None:
        self.timed = timed
        if self.grace is not None:
            self.end = time.monotonic() + (self.grace if timed else HARNESS_BUDGET_S)

    def wait(self) -> float | None:
        return None if self.end is None else max(0.0, self.end - time.monotonic())

    def died(self) -> ChildDied:
        """The ChildDied of a child killed at ``end``."""
        if self.timed:
            return ChildDied(timeout_reason(self.grace), timed_out=True)
        return ChildDied(f"the harness's own work in the isolated process took more than {HARNESS_BUDGET_S:g} s "
                         f"(the pass had returned; killed the process)", timed_out=True, harness=True)


def in_forked_child() -> None:
    """First thing in a forked child of the harness.

    A parent that has run a parallel kernel holds an OpenMP thread team, and a forked child that
    enters a parallel region waits forever for team threads that fork did not copy (seen: oneDNN's
    gelu under libgomp). With one thread, ATen and oneDNN run kernels inline and never enter one;
    the graphs a search runs are small. A crash in the child is the finding, so no C traceback.

    What the child inherited is frozen out of its garbage collector (``gc.freeze``): a full
    collection would walk the parent's whole heap and, writing every object's GC header, copy each
    page of it.
    """
    import torch

    gc.freeze()
    faulthandler.disable()
    torch.set_num_threads(1)


def run_forked(fn, timeout: float | None, phased: bool = False):
    """``fn()`` in a forked child; its return value (picklable) or ChildDied. ``phased``: ``fn`` is a
    check that announces the pass's phases (``checker.timed``), and ``timeout`` bounds those alone."""
    if not can_isolate():
        raise UsageError("isolation needs os.fork (Linux); run without --isolate on this platform")
    sys.stdout.flush()
    sys.stderr.flush()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never return into the caller's stack
        from .. import deadlines

        in_forked_child()
        os.close(read_fd)
        # b"T"/b"U" at each phase change, before the pickled result (which starts with b"\x80")
        deadlines.PHASE_HOOK = (lambda timed: os.write(write_fd, _TIMED if timed else _UNTIMED)) if phased else None
        code = 0
        # anything fn raises is reported; the warnings it raised go back to the parent's count, unprinted
        (kind, value), warned = child_call(fn)
        try:
            payload = pickle.dumps((kind, value, warned))
        except BaseException as exc:  # noqa: BLE001 - an unpicklable result: report it, then leave
            payload = pickle.dumps(("error", f"{type(exc).__name__}: {exc}", warned))
        try:
            with os.fdopen(write_fd, "wb") as pipe:
                pipe.write(payload)
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001
            code = 70
        os._exit(code)
    os.close(write_fd)
    chunks, phases = [], Phases(timeout, announced=phased)
    killed = False
    with os.fdopen(read_fd, "rb") as pipe:
        while True:
            ready, _, _ = select.select([pipe], [], [], phases.wait())
            if not ready:
                killed = True
                os.kill(pid, signal.SIGKILL)
                break
            chunk = os.read(pipe.fileno(), 1 << 20)
            if not chunk:
                break
            if not chunks:  # still in the phase markers
                rest = chunk.lstrip(_TIMED + _UNTIMED)
                for marker in chunk[:len(chunk) - len(rest)]:
                    phases.enter(marker == _TIMED[0])
                chunk = rest
            if chunk:
                chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    if killed:
        raise phases.died()
    data = b"".join(chunks)
    if data:
        kind, value, warned = pickle.loads(data)
        absorb(warned)
        if kind == "ok":
            return value
        raise ChildDied.from_report(value)
    raise ChildDied(death_reason(os.waitstatus_to_exitcode(status)))
