"""Which cases of a parametrized property ``make test`` checks: an even spread of them.

``make test`` (CI) checks every property, each on a few of its cases; the others, like a property's
other seeds, are marked ``sweep`` and run in ``make sweep``, ``make nightly`` and ``make conformance``
(``fx-conformance run`` selects no marker, so it runs every case).

>>> [p.marks[0].name if p.marks else "kept" for p in spread("abcde", 2)]
['kept', 'sweep', 'kept', 'sweep', 'sweep']
"""

from __future__ import annotations

import pytest

_PARAM = type(pytest.param(None))  # pytest's ParameterSet


def kept(n: int, keep: int) -> set:
    """The indices of ``keep`` of ``n`` cases: the first, then evenly spaced."""
    return {i * n // keep for i in range(min(keep, n))}


def spread(cases, keep: int, ids=None) -> list:
    """``cases`` (a value, a tuple of values, or a ``pytest.param`` each) as params: ``keep`` of them,
    evenly spread from the first, run everywhere; the others marked ``sweep``. ``ids``: a function of
    a case's values."""
    cases = list(cases)
    chosen = kept(len(cases), keep)
    out = []
    for i, case in enumerate(cases):
        values, marks, id_ = (case.values, tuple(case.marks), case.id) if isinstance(case, _PARAM) \
            else (case if isinstance(case, tuple) else (case,), (), None)
        if id_ is None and ids is not None:
            id_ = ids(*values)
        out.append(pytest.param(*values, marks=marks if i in chosen else (*marks, pytest.mark.sweep), id=id_))
    return out


def spread_over_seeds(names, keep: int, seeds) -> list:
    """``(name, seed)`` params: ``keep`` of the names, evenly spread, at the first seed run everywhere;
    the other names, and every name at the other seeds, marked ``sweep``.

    >>> [(p.id, bool(p.marks)) for p in spread_over_seeds(["a", "b"], 1, [0, 1])]
    [('a-0', False), ('a-1', True), ('b-0', True), ('b-1', True)]
    """
    chosen, seeds = kept(len(names), keep), list(seeds)
    return [pytest.param(name, seed, id=f"{name}-{seed}",
                         marks=() if i in chosen and seed == seeds[0] else (pytest.mark.sweep,))
            for i, name in enumerate(names) for seed in seeds]
