"""How a search's progress reaches the user as it goes: the reporter (``NullReporter`` is the
Python API's silent one; the CLI's console reporter has the same methods), ``_Events`` routing each
finished example, new violation and first warning of a kind to it, and ``_Stream`` rewriting the
JSON report while the run goes (at most once a second, at once for a new violation), so that an
interrupted run keeps its findings.
"""

from __future__ import annotations

import time

from .. import report as _report
from .._result import Verdict, VerifyResult, Violation
from .findings import _fill, _Found

_STREAM_EVERY_S = 1.0


class NullReporter:
    """Progress sink that shows nothing (the Python API's default)."""

    def start(self, target, max_examples, options): ...
    def example(self, ok: bool, done: int): ...
    def found(self, violation: Violation): ...
    def note(self, text: str): ...
    def warned(self, warning: dict): ...
    def focus(self, focus: dict): ...
    def finish(self, result: VerifyResult): ...


class _Events:
    """Routes search events to the reporter and the streamed JSON."""

    def __init__(self, found: _Found, reporter, stream):
        self.found, self.reporter, self.stream = found, reporter, stream

    def example(self, verdict: Verdict, new: list, warned: list = ()):
        self.reporter.example(verdict.ok, self.found.examples)
        for w in warned:
            self.reporter.warned(w)
        for v in new:
            self.reporter.found(v)
        self.stream.update(self.found, force=bool(new))


class _Stream:
    """Rewrites the JSON report as the run goes (throttled), so an interrupted run keeps its findings."""

    def __init__(self, result: VerifyResult, path, prior: _Found | None = None):
        self.result, self.path, self.last, self.prior = result, path, 0.0, prior
        self.static = _report.static_info() if path else None

    def update(self, found: _Found, force=False):
        if not self.path or (not force and time.monotonic() - self.last < _STREAM_EVERY_S):
            return
        _fill(self.result, found, self.prior)
        self.result.violations = [v for _, v, _ in found.best.values()]
        self.write()

    def write(self):
        if self.path:
            _report.write_json(self.result, self.path, static=self.static)
            self.last = time.monotonic()


__all__ = ["NullReporter"]
