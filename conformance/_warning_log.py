"""Where warnings go during a run: the harness's are counted, the pass's are kept with their example.

Drawing and running generated graphs makes torch warn (``scatter``'s deprecated ``reduce=``,
``var_mean`` with no degrees of freedom): that is the run's business, not the user's, so inside
``quietly(where, fn)`` every warning is counted in the active ``WarningLog`` by where, category and
message, and none is printed. ``where`` says which part of the run raised it (``WHERES``); the
checker files the pass's own calls under ``PASS``, which the search reports with the example.

Most of torch's warnings never reach Python's ``warnings`` on their own: an op called through
``torch.ops`` (as every FX graph calls it) has no Python warning handler around it, so torch's C++
``TORCH_WARN`` writes ``[W... file.cpp:N] Warning: ...`` straight to file descriptor 2. Torch's
Python entry points install that handler for the length of their call, and ``torch.neg`` of an
object with ``__torch_function__`` calls back into Python inside one: ``quietly`` runs ``fn``
there, so the C++ warnings of everything ``fn`` runs become Python warnings (when the call ends),
which a scoped ``warnings.catch_warnings`` records. Inside, ``torch.set_warn_always(True)``: a
warning torch gives once per process (``TORCH_WARN_ONCE``: scatter's) is counted wherever it is
raised, so the counts are what the seed drew and ran, not what the process happened to run
before (and a run does not use up the user's one warning). Nothing global outlives the call: the
filters, ``showwarning`` and torch's flag are restored on the way out, exceptions included, and
nothing touches ``os.environ``.

A forked child inherits the active log and sends what it counted back with its result
(``isolate.run_forked``, ``workers.py``'s drivers in their ``_Found``, ``_spawn.py``'s worker in
each answer); the parent ``absorb``s it.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
import warnings

import torch

PASS = "pass"  # the pass's own calls (checker._apply): shown with the example, not counted as noise
# Where the run's own warnings come from, as reports name them.
WHERES = {
    "discovery": "trigger discovery: its draws, and its probes of the pass",
    "generator": "drawing graphs in the search",
    "original": "the checker's runs of the original graph",
    "result": "the checker's runs of the graph the pass returned",
    "oracle": "the rest of the checker's work: the fp64 and other reference runs, other sizes, contracts",
}

_LOG: contextvars.ContextVar = contextvars.ContextVar("fx_conformance_warning_log", default=None)
_WHERE: contextvars.ContextVar = contextvars.ContextVar("fx_conformance_warning_where", default="oracle")
# torch's handler appends where in its own build tree the warning was raised: not part of what it says
_TRIGGERED = re.compile(r"\s*\(Triggered internally at [^)]*\)\s*$")


class WarningLog:
    """Warnings counted by ``(where, category, message)``; plain data, so it pickles across processes."""

    def __init__(self):
        self.counts: dict = {}

    def add(self, where: str, category: str, message: str, count: int = 1) -> None:
        key = (where, category, message)
        self.counts[key] = self.counts.get(key, 0) + count

    def absorb(self, kinds) -> None:
        """Add ``kinds`` (``kinds()`` of another log; a kind without ``where`` is filed under the
        current one: what a worker process that cannot know it counted)."""
        for k in kinds or ():
            self.add(k.get("where") or _WHERE.get(), k["category"], k["message"], k["count"])

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def kinds(self, where=None) -> list:
        """``[{"category", "message", "where", "count"}]``, most frequent first; ``where``: only
        those (a name, or a predicate on it)."""
        keep = where if callable(where) else (lambda w: where is None or w == where)
        rows = [{"category": c, "message": m, "where": w, "count": n}
                for (w, c, m), n in self.counts.items() if keep(w)]
        return sorted(rows, key=lambda k: (-k["count"], k["where"], k["category"], k["message"]))


class PassWarnings:
    """The distinct warnings the pass raised, each with the first example that raised it and a count."""

    def __init__(self):
        self.seen: dict = {}  # (category, message) -> {"category", "message", "count", "example"}

    def add(self, example: int | None, kinds) -> list:
        """Count ``kinds`` (a Verdict's ``pass_warnings``) raised on ``example``; the ones never seen before."""
        new = []
        for k in kinds or ():
            key = (k["category"], k["message"])
            if key in self.seen:
                self.seen[key]["count"] += k["count"]
            else:
                self.seen[key] = {"category": k["category"], "message": k["message"], "count": k["count"],
                                  "example": example}
                new.append(dict(self.seen[key]))
        return new

    def merge(self, other: "PassWarnings") -> None:
        """Another search's (another driver's numbering: the smaller example is kept)."""
        for key, k in other.seen.items():
            mine = self.seen.get(key)
            if mine is None:
                self.seen[key] = dict(k)
                continue
            mine["count"] += k["count"]
            if k["example"] is not None and (mine["example"] is None or k["example"] < mine["example"]):
                mine["example"] = k["example"]

    def listed(self) -> list:
        return sorted((dict(k) for k in self.seen.values()),
                      key=lambda k: (k["example"] is None, k["example"] or 0, k["category"], k["message"]))


def current() -> WarningLog | None:
    """The log ``quietly`` records into here (None: warnings behave as they always do)."""
    return _LOG.get()


@contextlib.contextmanager
def recording(log: WarningLog | None):
    """``quietly`` inside the block counts into ``log`` (None: it records nothing, and shows all)."""
    token = _LOG.set(log)
    try:
        yield log
    finally:
        _LOG.reset(token)


class _Inside:
    """What ``torch.neg`` is called on: its ``__torch_function__`` runs the call, inside torch's
    Python entry point (and so inside the warning handler that entry point installs)."""

    __slots__ = ("call", "entered")

    def __init__(self, call):
        self.call, self.entered = call, False

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        args[0].entered = True
        return args[0].call()


def _inside_torch(fn):
    """``fn()`` called from inside ``torch.neg``. Where torch does not hand the call over (a torch
    function mode of the caller's that refuses the object, ``DisableTorchFunction``), ``fn()`` is
    called here instead: torch's C++ warnings then go to fd 2, but a failure of this device is never
    ``fn``'s (never the pass's verdict)."""
    inside = _Inside(fn)
    try:
        value = torch.neg(inside)
    except Exception:  # noqa: BLE001 - fn's own exceptions pass; one before fn ran is this device's
        if inside.entered:
            raise
        return fn()
    return value if inside.entered else fn()


def quietly(where: str, fn, *args, **kwargs):
    """``fn(*args, **kwargs)``; each warning raised meanwhile (torch's C++ ones included) is counted
    under ``where`` in the current log and not shown. Without a current log it is a plain call."""
    log = _LOG.get()
    if log is None:
        return fn(*args, **kwargs)
    token, always = _WHERE.set(where), torch.is_warn_always_enabled()
    torch.set_warn_always(True)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")  # each one counted, none turned into an error by the host's filters
            try:
                return _inside_torch(lambda: fn(*args, **kwargs))
            finally:  # torch's handler has turned its buffered warnings into Python ones by now
                for w in caught:
                    log.add(where, w.category.__name__, _TRIGGERED.sub("", str(w.message)))
    finally:
        torch.set_warn_always(always)
        _WHERE.reset(token)


def child_call(fn) -> tuple:
    """In a forked child: ``(outcome, kinds)`` where ``outcome`` is ``("ok", fn())`` or ``("error",
    "Type: message")``, and ``kinds`` what it counted for the parent to ``absorb`` (only where the
    parent was recording, as the child inherited; else ``fn`` runs as it is and ``kinds`` is empty)."""
    log = WarningLog() if _LOG.get() is not None else None
    with recording(log):
        try:
            outcome = ("ok", quietly(_WHERE.get(), fn))
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, as the caller reports it
            outcome = ("error", f"{type(exc).__name__}: {exc}")
    return outcome, (log.kinds() if log is not None else [])


def absorb(kinds) -> None:
    """Count ``kinds`` (from a child process) in the current log; without one, they are dropped (the
    child counted them only because its parent was recording)."""
    log = _LOG.get()
    if log is not None and kinds:
        log.absorb(kinds)
