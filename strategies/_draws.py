"""Cached primitive strategies: building a new strategy object per draw costs more than the draw.

The graph builder draws hundreds of small choices per graph; Hypothesis validates every new
strategy object, so the builder reuses these instead of calling ``st.integers(...)`` each time.
"""

from __future__ import annotations

import functools

from hypothesis import strategies as st

BOOLEANS = st.booleans()


@functools.lru_cache(maxsize=4096)
def integers(lo: int, hi: int) -> st.SearchStrategy:
    return st.integers(lo, hi)


def choose(draw, seq):
    """One element of a non-empty sequence; shrinks towards the first."""
    return seq[draw(integers(0, len(seq) - 1))]


def flag(draw) -> bool:
    return draw(BOOLEANS)
