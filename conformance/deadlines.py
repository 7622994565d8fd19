"""An example's time limit: ``deadline(seconds)`` raises ``ExampleTimeout`` in a pass (or a run of the
graph it returned) that overruns it, by SIGALRM, so it only works in the main thread
(``can_time_out()`` says whether it does here); ``timed(seconds)`` is a deadline that also announces
the timed phase to ``PHASE_HOOK``, which the isolation layer sets in its child process so the
parent's kill timer counts the pass's time apart from the harness's own work. The checker times the
pass and its result with ``timed``; trigger discovery bounds each probe with ``deadline``.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager


class ExampleTimeout(BaseException):
    """Raised (by SIGALRM) inside a pass that overran the example's time limit.

    A BaseException, so a pass's own ``except Exception`` cannot swallow it.
    """


# Set by the isolation layer in its child process (search/isolate.py, search/_spawn.py): called with
# True where a timed phase (the pass, a run of the graph it returned) starts and False where it ends,
# so the parent's kill timer counts the pass's time and gives the harness's own work (the original's
# reruns, proofs) a budget of its own. None in a process that runs examples itself.
PHASE_HOOK = None


@contextmanager
def timed(seconds: float | None):
    """A phase of the pass's: ``deadline(seconds)``, announced to ``PHASE_HOOK``."""
    hook = PHASE_HOOK
    if hook is not None:
        hook(True)
    try:
        with deadline(seconds):
            yield
    finally:
        if hook is not None:
            hook(False)


@contextmanager
def deadline(seconds: float | None):
    """Raise ExampleTimeout in the main thread after ``seconds`` (no limit elsewhere, or for None)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def _alarm(signum, frame):
        raise ExampleTimeout()

    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def can_time_out() -> bool:
    """Whether ``deadline`` can interrupt a pass here (SIGALRM exists and this is the main thread)."""
    return hasattr(signal, "SIGALRM") and threading.current_thread() is threading.main_thread()


__all__ = ["ExampleTimeout", "PHASE_HOOK", "can_time_out", "deadline", "timed"]
