"""A persistent worker process, started without fork, that checks examples one at a time.

Where the examples run on CUDA (or this process initialised CUDA), a forked child cannot run them:
it would inherit a CUDA context it cannot use. The worker is a process of its own, started by
``multiprocessing``'s "forkserver" method (the default here) or "spawn", holding its own CUDA
context; it loads the pass once (``_wire.pass_recipe``) and then judges the examples sent to it.

- Start: a fresh interpreter importing torch costs seconds, so one worker serves every example of
  a search. Under "forkserver" the fork server (started fresh, never touching CUDA) imports torch
  and the harness once (``_PRELOAD``), and each worker is forked from it: a worker that died is
  replaced in a fraction of a second, which matters for a pass that crashes on every other graph.
- Protocol: over one ``multiprocessing`` pipe, the worker first answers ``("ready", pid)`` (or
  ``("failed", text)`` when the pass does not load there); then each request, ``("check", bytes
  of _wire.dumps_case)`` or ``("call", "pkg.mod:fn", args)`` (trigger discovery), is answered by
  ``("ok", value, retire, warned)`` or ``("error", text, retire, warned)`` (the check raised:
  ``ChildDied(raised=True)``, as a forked child reports it). ``warned``: the warnings the request
  raised outside a check's own count, for the parent's (``_warning_log``); the worker prints none.
  ``retire``: the worker's CUDA context is lost (an illegal
  memory access or a device-side assert is sticky: every later kernel of the process fails), so it
  leaves after this answer and the next example gets a new worker.
  While it checks, the worker also sends ``("phase", timed)`` where the pass's timed phases start
  and end (``deadlines.PHASE_HOOK``), so the grace time counts the pass alone (``isolate.Phases``).
- Death: no answer because the pipe closed (a signal, ``os._exit``, an abort in a kernel) or none
  within the grace time (a hang SIGALRM cannot interrupt, which is then killed) is a ``ChildDied``
  with the fork path's reasons (``isolate.death_reason``); the next request starts a new worker.
"""

from __future__ import annotations

import faulthandler
import gc
import importlib
import multiprocessing
import os
import pickle
import signal
import weakref

import torch

from .._errors import HarnessError, UsageError
from .._result import EXECUTION, Violation
from .. import deadlines
from .._warning_log import WarningLog, absorb, quietly, recording
from .isolate import ChildDied, Phases, death_reason, in_forked_child
from ._wire import dumps_case, load_recipe, loads_case, pass_recipe

START_METHODS = ("forkserver", "spawn")
# Importing torch, the strategies and the checker takes seconds; the fork server does it once
# (torch._dynamo: the first FakeTensorMode imports it, a second more per worker otherwise).
_PRELOAD = ["conformance.search._spawn", "conformance.search.triggers", "torch._dynamo"]
_START_TIMEOUT_S = 300.0  # a fresh interpreter's imports and, on CUDA, the context's creation


class Worker:
    """A worker process that checks examples with ``checker`` (whose pass is ``put``).

    ``Worker(put, checker)`` raises UsageError at once when the pass cannot reach a worker process
    (a lambda, a closure); the process itself starts on the first request. ``started`` counts the
    processes started so far.
    """

    def __init__(self, put, checker, *, method: str = "forkserver"):
        if method not in START_METHODS:
            raise HarnessError(f"start method={method!r}, but should be one of {', '.join(START_METHODS)}")
        self.recipe = pass_recipe(put, checker)
        self.method, self.started = method, 0
        self._proc = self._conn = None
        self._finalizer = None

    # --- requests ------------------------------------------------------------------------------
    def check(self, gm, inputs, symbolic=None, grace: float | None = None):
        """``checker.check(gm, inputs, symbolic)`` in the worker: its Verdict, or ChildDied."""
        return self._request(("check", dumps_case(gm, inputs, symbolic)), grace, phased=True)

    def call(self, fn: str, args: tuple, timeout: float | None = None):
        """``fn(put, *args)`` in the worker (``fn`` a ``pkg.mod:name`` path, ``args`` plain data)."""
        return self._request(("call", fn, args), timeout)

    def close(self) -> None:
        """Stop the worker (it leaves when its pipe closes); a later request starts a new one."""
        if self._finalizer is not None:
            self._finalizer()
        self._proc = self._conn = self._finalizer = None

    def _request(self, message, timeout, phased: bool = False):
        """Send ``message``; its answer. ``phased``: a check, whose ``("phase", timed)`` messages
        (``deadlines.PHASE_HOOK``) move the kill time as ``isolate.Phases`` says."""
        if self._proc is None:
            self._start()
        phases = Phases(timeout, announced=phased)
        try:
            self._conn.send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))
            while True:
                reply = pickle.loads(self._conn.recv_bytes()) if self._conn.poll(phases.wait()) else None
                if reply is None or reply[0] != "phase":
                    break
                phases.enter(reply[1])
        except (EOFError, OSError):  # the pipe closed: the worker is gone
            raise ChildDied(death_reason(self._reap())) from None
        except BaseException:  # Ctrl-C while it works: its answer would be read as the next one's
            self._kill()
            raise
        if reply is None:  # a hang the worker's own SIGALRM did not end
            self._kill()
            raise phases.died()
        kind, value, retire, warned = reply
        absorb(warned)
        if retire:
            self._reap()
        if kind == "ok":
            return value
        raise ChildDied.from_report(value)

    # --- the process ---------------------------------------------------------------------------
    def _start(self) -> None:
        ctx = multiprocessing.get_context(self.method)
        if self.method == "forkserver":
            # Only takes effect when this process's fork server starts (once); it also leaves out
            # the default "__main__", so a user's script is not run again inside the server.
            ctx.set_forkserver_preload(_PRELOAD)
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_serve, args=(child, self.recipe, self.method == "forkserver"),
                           name="fx-conformance-worker", daemon=True)
        proc.start()
        child.close()
        self._proc, self._conn = proc, parent
        self._finalizer = weakref.finalize(self, _stop, proc, parent)
        self.started += 1
        try:
            ready = parent.poll(_START_TIMEOUT_S)
            kind, value = pickle.loads(parent.recv_bytes()) if ready else ("failed", "no answer")
        except (EOFError, OSError):
            code = self._reap()
            how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
            raise HarnessError(f"the isolated worker process ended while starting ({how}); a script that calls "
                               f"verify() must do so under if __name__ == '__main__' (the worker imports it)") from None
        if kind != "ready":
            self._kill()
            if ready:
                raise UsageError(f"the pass cannot be loaded in the isolated worker process: {value}")
            raise HarnessError(f"the isolated worker process did not start within {_START_TIMEOUT_S:g} s")

    def _kill(self) -> None:
        self._proc.kill()
        self.close()

    def _reap(self) -> int:
        """The exit code of the worker, which closed its pipe (``-N``: signal N); forgets it."""
        proc = self._proc
        proc.join(10.0)
        if proc.exitcode is None:  # closed its pipe, yet alive: stuck on the way out
            proc.kill()
            proc.join()
        code = proc.exitcode
        self.close()
        return code


def _stop(proc, conn) -> None:
    conn.close()  # the worker leaves when its pipe closes
    proc.join(5.0)
    if proc.exitcode is None:
        proc.kill()
        proc.join()


# --- the worker's side ----------------------------------------------------------------------------


def _serve(conn, recipe: bytes, forked_from_server: bool) -> None:
    """The worker's main loop (see the module docstring)."""
    # Ctrl-C reaches the whole process group: the harness decides what it ends, and closes the pipe.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if forked_from_server:
        in_forked_child()  # as a forked child: one thread, no C traceback
    else:
        faulthandler.disable()  # a crash here is the finding: no C traceback on the user's terminal
    try:
        put, checker = load_recipe(recipe)
        if checker.device == "cuda":
            torch.cuda.init()  # the context, before examples' timeouts start counting
        gc.collect()
        gc.freeze()  # the imports and the pass stay: kept out of every later full collection
    except BaseException as exc:  # noqa: BLE001 - reported, then this worker leaves
        conn.send_bytes(pickle.dumps(("failed", f"{type(exc).__name__}: {exc}")))
        return
    conn.send_bytes(pickle.dumps(("ready", os.getpid())))
    while True:
        try:
            message = pickle.loads(conn.recv_bytes())
        except EOFError:
            return
        warned = WarningLog()  # filed by the parent under what it asked for ("" here: discovery, the search)
        try:
            with recording(warned):
                reply = ["ok", quietly("", _answer, message, put, checker, conn)]
        except BaseException as exc:  # noqa: BLE001 - reported as the fork path reports it
            reply = ["error", f"{type(exc).__name__}: {exc}"]
        lost = _cuda_context_lost(checker.device)
        if lost and reply[0] == "ok" and message[0] == "check" and reply[1].ok:
            # a kernel of this example failed after its values were read: still this example's doing
            reply[1].violations.append(Violation(
                EXECUTION, f"the CUDA context failed after the run ({lost}), but should stay usable (a kernel of the "
                           f"pass's graph failed)", kind="crashed"))
        try:
            data = pickle.dumps((*reply, bool(lost), warned.kinds()), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - an unpicklable result: its text
            data = pickle.dumps(("error", f"{type(exc).__name__}: {exc}", bool(lost), warned.kinds()))
        conn.send_bytes(data)
        if lost:
            return


def _answer(message, put, checker, conn):
    """The value a request asks for: a check's Verdict, or what a ``pkg.mod:fn`` call returns."""
    if message[0] == "check":
        gm, inputs, symbolic = loads_case(message[1])
        deadlines.PHASE_HOOK = lambda timed: conn.send_bytes(pickle.dumps(("phase", timed)))
        try:
            return checker.check(gm, inputs, symbolic)
        finally:
            deadlines.PHASE_HOOK = None
    module, name = message[1].split(":")
    return getattr(importlib.import_module(module), name)(put, *message[2])


def _cuda_context_lost(device: str) -> str | None:
    """Where the examples run on CUDA: the sticky error that lost this process's context, or None."""
    if device != "cuda":
        return None
    try:
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - torch.AcceleratorError / RuntimeError: "CUDA error: ..."
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None


__all__ = ["START_METHODS", "Worker"]
