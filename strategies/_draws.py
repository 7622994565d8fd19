"""The primitive choices every drawing rule makes, drawn so that later rows are as likely as earlier ones.

Every small choice (an op, an operand, a dimension, a flag) is drawn from the same Hypothesis
choice, ``UNIT`` (an integer in ``[0, 256)``), scaled to the range it picks from: one draw for up
to 16 alternatives, two (16 bits) for more, so no alternative gets more than 1/16 extra share. Why not
``st.integers(0, n - 1)`` or ``st.sampled_from``: Hypothesis generates most examples by mutating
earlier ones, replaying their choices; where a replayed choice's type or bounds differ from the
draw it lands on (the graph took another route, so ``n`` differs), Hypothesis substitutes the
simplest value, 0. With bounds that depend on the graph so far, that made the first row of every
table come up a quarter of the time (measured: ``abs`` in 105 of 200 graphs, ``add.Tensor`` in 20).
With one set of bounds for every choice a replay lands on a compatible draw and keeps its value.
Why 256: Hypothesis (6.1xx) draws bounded integers uniformly only within 256 of 0 and
log-distributed beyond, so a single wide draw (``[0, 2**16)``) favours small values again.
Scaling is monotone, so shrinking towards 0 still moves every choice towards its first row.
"""

from __future__ import annotations

import bisect
import functools
import itertools

from hypothesis import strategies as st

UNIT = st.integers(0, 255)
_ONE_DRAW = 16  # up to this many alternatives, one UNIT draw is fine enough


def index(draw, n: int) -> int:
    """An index in ``range(n)``, uniform; shrinks towards 0."""
    u = draw(UNIT)
    if n <= _ONE_DRAW:
        return (u * n) >> 8
    return (((u << 8) | draw(UNIT)) * n) >> 16


_NEUTRAL = frozenset({0, 1, 254, 255})  # the bounds and their neighbours, which Hypothesis favours
_SPREAD = 256 - len(_NEUTRAL)  # the others, 2..253


def neutral_or_index(draw, n: int) -> int | None:
    """None (the neutral choice: skip, or a default), or an index in ``range(n)``, uniform.

    The values Hypothesis favours (0, what everything shrinks to and what a misaligned replay
    gets; 255, the other bound; their neighbours, measured at 3-5x their share) are the neutral
    choice, so they do not pile onto row 0; the 252 others are spread over ``n`` (two draws when
    ``n`` is large). Shrinks towards None, then towards index 0.
    """
    u = draw(UNIT)
    if u in _NEUTRAL:
        return None
    if n > 64:
        v = draw(UNIT)
        if v in _NEUTRAL:
            return None
        return (((u - 2) * _SPREAD + (v - 2)) * n) // (_SPREAD * _SPREAD)
    return ((u - 2) * n) // _SPREAD


@functools.lru_cache(maxsize=4096)
def integers(lo: int, hi: int) -> st.SearchStrategy:
    """An integer in ``[lo, hi]``, uniform; shrinks towards ``lo`` (drawn through UNIT: see above)."""
    n = hi - lo + 1
    if n <= _ONE_DRAW:
        return UNIT.map(lambda u: lo + ((u * n) >> 8))
    if n <= 1 << 16:
        return st.tuples(UNIT, UNIT).map(lambda uv: lo + ((((uv[0] << 8) | uv[1]) * n) >> 16))
    return st.integers(lo, hi)


def choose(draw, seq):
    """One element of a non-empty sequence, uniform; shrinks towards the first."""
    return seq[index(draw, len(seq))]


BOUNDARY_SHARE = 1 / 3  # of the integers that index or bound a dim, how many are drawn at a boundary


def bound(draw, n: int, lo: int, hi: int) -> int:
    """An integer in ``[lo, hi]`` that indexes or bounds a dim of size ``n`` (a slice's start or end,
    select's index, a split size, a pad): a third of the time one of the boundaries ``0, 1, n-1, n,
    n+1, -1, -n`` that lie in range (where off-by-one rewrites differ from the truth), else uniform.
    Shrinks towards the boundaries, 0 first.

    >>> sorted(_edges(4, -5, 5))
    [-4, -1, 0, 1, 3, 4, 5]
    """
    edges = _edges(n, lo, hi)
    if edges and draw(UNIT) < 256 * BOUNDARY_SHARE:
        return choose(draw, edges)
    return draw(integers(lo, hi))


@functools.lru_cache(maxsize=1024)
def _edges(n: int, lo: int, hi: int) -> tuple:
    return tuple(dict.fromkeys(v for v in (0, 1, n - 1, n, n + 1, -1, -n) if lo <= v <= hi))


def flag(draw) -> bool:
    """A fair coin; shrinks towards False."""
    return draw(UNIT) >= 128


class Weighted:
    """Items drawn in proportion to their weights, or ``neutral`` (see ``neutral_or_index``).

    Shrinks towards ``neutral``, then towards the first item.

    >>> Weighted(["a", "b"], [3, 1]).share("a")
    0.75
    """

    def __init__(self, items, weights, neutral=None):
        self.items = tuple(items)
        self.weights = tuple(weights)
        self.neutral = neutral
        if not self.items or len(self.items) != len(self.weights) or min(self.weights) <= 0:
            raise ValueError(f"Weighted needs items with positive weights, got {self.items!r} {self.weights!r}")
        self.bounds = tuple(itertools.accumulate(self.weights))
        self.total = self.bounds[-1]

    def draw(self, draw):
        i = neutral_or_index(draw, self.total)
        return self.neutral if i is None else self.items[bisect.bisect_right(self.bounds, i)]

    def share(self, item) -> float:
        return sum(w for i, w in zip(self.items, self.weights) if i == item) / self.total
