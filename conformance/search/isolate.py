"""Run one function in a forked child: a pass that segfaults, aborts, calls ``os._exit`` or hangs
in C code takes down the child, never the harness.

Forking (not spawning) means the child already has the pass object, the graph and the inputs:
nothing is pickled on the way in, lambdas and closures work, and a child costs a few ms instead
of a fresh interpreter's torch import. Only the (plain-data) result is pickled back.
"""

from __future__ import annotations

import faulthandler
import os
import pickle
import select
import signal
import sys
import time

from .._errors import UsageError


class ChildDied(Exception):
    """The child did not return a result: ``reason`` says how it ended (signal, exit code, timeout)."""

    def __init__(self, reason: str, timed_out: bool = False, raised: bool = False):
        super().__init__(reason)
        self.reason, self.timed_out = reason, timed_out
        self.raised = raised  # the child raised a Python exception (and reported it) rather than dying


def can_isolate() -> bool:
    return hasattr(os, "fork")


def in_forked_child() -> None:
    """First thing in a forked child of the harness.

    A parent that has run a parallel kernel holds an OpenMP thread team, and a forked child that
    enters a parallel region waits forever for team threads that fork did not copy (seen: oneDNN's
    gelu under libgomp). With one thread, ATen and oneDNN run kernels inline and never enter one;
    the graphs a search runs are small. A crash in the child is the finding, so no C traceback.
    """
    import torch

    faulthandler.disable()
    torch.set_num_threads(1)


def run_forked(fn, timeout: float | None):
    """``fn()`` in a forked child; its return value (picklable) or ChildDied."""
    if not can_isolate():
        raise UsageError("isolation needs os.fork (Linux); run without --isolate on this platform")
    sys.stdout.flush()
    sys.stderr.flush()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never return into the caller's stack
        in_forked_child()
        os.close(read_fd)
        code = 0
        try:
            payload = pickle.dumps(("ok", fn()))
        except BaseException as exc:  # noqa: BLE001 - report anything, then leave
            payload = pickle.dumps(("error", f"{type(exc).__name__}: {exc}"))
        try:
            with os.fdopen(write_fd, "wb") as pipe:
                pipe.write(payload)
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001
            code = 70
        os._exit(code)
    os.close(write_fd)
    chunks, end = [], None if timeout is None else time.monotonic() + timeout
    timed_out = False
    with os.fdopen(read_fd, "rb") as pipe:
        while True:
            wait = None if end is None else max(0.0, end - time.monotonic())
            ready, _, _ = select.select([pipe], [], [], wait)
            if not ready:
                timed_out = True
                os.kill(pid, signal.SIGKILL)
                break
            chunk = os.read(pipe.fileno(), 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    if timed_out:
        raise ChildDied(f"time={timeout:g} s elapsed, but the pass should finish within the timeout "
                        f"(killed the isolated process)", timed_out=True)
    data = b"".join(chunks)
    if data:
        kind, value = pickle.loads(data)
        if kind == "ok":
            return value
        raise ChildDied(f"the isolated check failed: {value}", raised=True)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        raise ChildDied(f"process killed by {name} (signal {sig}), but the pass should return a graph "
                        f"(it crashed the interpreter)")
    raise ChildDied(f"process exit code={os.WEXITSTATUS(status)} before the pass returned, but the pass should "
                    f"return a graph (os._exit or a crash in native code)")
