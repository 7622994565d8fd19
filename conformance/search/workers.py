"""Searches in forked driver processes: one by default (so a pass that kills the interpreter kills
a driver, never the caller, and the run can be repeated with per-example isolation), N for
``--workers N`` (independent searches with their own seeds, merged).

A driver streams length-prefixed pickled frames: ``("example", ok, new_violations)`` as each
example finishes and ``("done", found)`` at the end, where ``found`` holds plain data only (the
driver writes its repro scripts itself; graphs do not cross the pipe).

Drivers are forked, so they exist only where ``isolate.fork_is_safe()`` (CUDA not initialised in
this process): where it is not, or the examples run on CUDA, ``verify()`` runs the search in its
own process and isolates examples, when asked, in a spawned worker (``_spawn.py``). Spawning the
drivers instead would mean sending the whole search (strategy, focus, reporter) to them.
"""

from __future__ import annotations

import mmap
import os
import pickle
import select
import signal
import struct
import sys

from .._errors import HarnessError
from .isolate import fork_is_safe, in_forked_child

_HEADER = struct.Struct("!I")


class DriverCrashed(Exception):
    """A driver process died without finishing (the pass crashed the interpreter)."""


def _send(fd: int, obj) -> None:
    data = pickle.dumps(obj)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class _FrameReader:
    def __init__(self, fd: int):
        self.fd, self.buf, self.eof = fd, b"", False

    def read_available(self) -> list:
        chunk = os.read(self.fd, 1 << 20)
        if not chunk:
            self.eof = True
        self.buf += chunk
        frames = []
        while len(self.buf) >= _HEADER.size:
            (n,) = _HEADER.unpack_from(self.buf)
            if len(self.buf) < _HEADER.size + n:
                break
            frames.append(pickle.loads(self.buf[_HEADER.size:_HEADER.size + n]))
            self.buf = self.buf[_HEADER.size + n:]
        return frames


class _ChildEvents:
    """The driver's side of the event stream (Violation is plain data, so it pickles as is)."""

    def __init__(self, fd, found):
        self.fd, self.found = fd, found

    def example(self, verdict, new, warned=()):
        _send(self.fd, ("example", verdict.ok, self.found.examples, list(new), list(warned)))


class DriverDeath(str):
    """How a driver died (``"SIGSEGV (signal 11)"``), and ``drawing``: the generator's eager call it
    was making (``strategies._build.eager.describe_call``), or None when it died elsewhere (in the pass
    under test, or in the harness)."""

    drawing: str | None = None

    @classmethod
    def of(cls, reason: str, drawing: str | None) -> "DriverDeath":
        death = cls(reason)
        death.drawing = drawing
        return death


_CALL_BYTES = 4096  # a driver's announced eager call (strategies._build.eager._CALL_TEXT characters fit)


def _announcer(buffer: mmap.mmap):
    """``write(text | None)`` into ``buffer``, shared with the parent: the call being made, or none."""

    def write(text):
        data = b"" if text is None else text.encode("utf-8", "replace")[:_CALL_BYTES - 1]
        buffer[:len(data) + 1] = data + b"\0"

    return write


def _announced(buffer: mmap.mmap) -> str | None:
    text = bytes(buffer).split(b"\0", 1)[0].decode("utf-8", "replace")
    return text or None


def run_drivers(n: int, budgets: list, search, on_example, on_found, avoid=(), on_warned=None) -> tuple:
    """Run ``search(i, budget, events) -> _Found`` in ``n`` forked drivers; merge their results.
    Each driver announces the generator's eager calls as it makes them, and never makes those in
    ``avoid`` (``strategies._build.eager.watch_eager_calls``).

    ``on_warned(warning)``: a kind of warning the pass raised that a driver had not met before (torch's
    own warnings while the driver draws and runs graphs are counted in its ``_Found``, never printed).

    Returns ``(founds, crashed, interrupted)``: the drivers' results, the ``DriverDeath`` of the
    first driver that died (or None), and whether the run was interrupted (Ctrl-C).
    """
    if not fork_is_safe():
        raise HarnessError("run_drivers forks, but this process initialised CUDA (or cannot fork): run the "
                           "search in this process (verify() does)")
    sys.stdout.flush()
    sys.stderr.flush()
    children, calls = {}, {}
    for i in range(n):
        read_fd, write_fd = os.pipe()
        calls[read_fd] = mmap.mmap(-1, _CALL_BYTES)  # anonymous and shared: the child writes, we read
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            _child(i, budgets[i], search, write_fd, _announcer(calls[read_fd]), avoid)  # never returns
        os.close(write_fd)
        children[read_fd] = (pid, _FrameReader(read_fd))
    founds, crashed, finished = [], None, set()
    interrupted = False

    def on_sigint(signum, frame):
        # Ctrl-C may land anywhere in this loop (in select, or while a report is being written):
        # the handler only records it and tells the drivers, which finish with what they found
        # (a terminal's Ctrl-C reaches them too; a signal sent to this process alone does not).
        nonlocal interrupted
        interrupted = True
        for fd in open_fds:
            _signal_quietly(children[fd][0], signal.SIGINT)

    open_fds = set(children)
    previous = _install_sigint(on_sigint)
    try:
        while open_fds:
            ready, _, _ = select.select(list(open_fds), [], [])  # retried after the handler (PEP 475)
            for fd in ready:
                pid, reader = children[fd]
                for frame in reader.read_available():
                    if frame[0] == "example":
                        on_example(frame[1])
                        for v in frame[3]:
                            on_found(v)
                        for w in frame[4] if on_warned is not None else ():
                            on_warned(w)
                    elif frame[0] == "done":
                        founds.append(frame[1])
                        finished.add(fd)
                        interrupted |= frame[2]
                    elif frame[0] == "error":
                        raise frame[1]
                if reader.eof:
                    open_fds.discard(fd)
                    os.close(fd)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    for fd, (pid, _) in children.items():
        _, status = os.waitpid(pid, 0)
        if crashed is None and fd not in finished:
            crashed = DriverDeath.of(_describe(status), _announced(calls[fd]))
        calls[fd].close()
    return founds, crashed, interrupted


def _install_sigint(handler):
    """Install ``handler`` for SIGINT; returns the previous one (None where only the main thread may)."""
    try:
        return signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread: Ctrl-C goes to the main thread anyway
        return None


def _signal_quietly(pid: int, sig) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _describe(status) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            return f"{signal.Signals(sig).name} (signal {sig})"
        except ValueError:
            return f"signal {sig}"
    return f"exit code {os.WEXITSTATUS(status)}"


def _interrupt_once(signum, frame):
    """A driver's SIGINT handler: the first ends the search (KeyboardInterrupt, which it catches);
    later ones are ignored. A terminal's Ctrl-C reaches the driver and the parent, and the parent
    forwards it: the second SIGINT then landed while the driver wrote up what it had found, and its
    KeyboardInterrupt went to the parent as the driver's error (a traceback, not exit 130)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def _child(i: int, budget: int, search, fd: int, announce, avoid) -> None:
    from strategies._build.eager import watch_eager_calls

    in_forked_child()  # one thread (OpenMP does not survive fork), no C-level traceback dump
    code = 0
    try:
        signal.signal(signal.SIGINT, _interrupt_once)
        with watch_eager_calls(announce, avoid):
            found = search(i, budget, lambda f: _ChildEvents(fd, f))
        _send(fd, ("done", found, bool(getattr(found, "interrupted", False))))
    except BaseException as exc:  # noqa: BLE001 - usage errors and bugs travel to the parent
        try:
            _send(fd, ("error", exc))
        except Exception:  # noqa: BLE001 - unpicklable: send its text
            _send(fd, ("error", RuntimeError(f"{type(exc).__name__}: {exc}")))
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
