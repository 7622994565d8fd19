"""Helpers for testing strategies, after Hypothesis' own tests/common/debug.py."""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis.errors import NoSuchExample

_QUIET = dict(database=None, deadline=None, suppress_health_check=list(HealthCheck))


class _Found(Exception):
    pass


def find_any(strategy, condition=lambda _: True, max_examples: int = 1000):
    """Some example satisfying ``condition`` (no shrinking), or fail naming the condition."""
    found = []

    @settings(max_examples=max_examples, phases=[Phase.generate], **_QUIET)
    @given(strategy)
    def search(value):
        if condition(value):
            found.append(value)
            raise _Found

    try:
        search()
    except _Found:
        return found[0]
    raise AssertionError(f"no example satisfying {getattr(condition, '__name__', condition)} "
                         f"in {max_examples} draws of {strategy!r}")


def minimal(strategy, condition, max_examples: int = 2000):
    """The example Hypothesis shrinks to among those satisfying ``condition``."""
    try:
        return find(strategy, condition, settings=settings(max_examples=max_examples, **_QUIET))
    except NoSuchExample as exc:
        raise AssertionError(f"no example satisfying {condition}") from exc
