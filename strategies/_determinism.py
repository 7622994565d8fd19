"""Drawn graphs depend only on the seed, not on which modules the process imported.

Hypothesis (6.13x and later) mines literals from every local non-test module in ``sys.modules`` and
draws them about 5% of the time. For these strategies that made a derandomized run depend on what
else was imported: importing the nightly report module, say, changed the graphs a fixed seed drew,
and a CI run's failure could not be reproduced by running its test alone. The literals of this
project (Triton helper constants, report thresholds) are also not interesting values for graphs:
the strategies draw special values from their own domains (``special_floats``). So the local pool
is kept empty; Hypothesis's global constants (0, -1, NaN, inf, ...) stay.

This is process-wide: Hypothesis tests in a process that imports ``strategies`` draw no local-code
constants either.
"""

from __future__ import annotations


def pin_local_constants() -> bool:
    """Make Hypothesis's local-constant pool empty and fixed; False when this Hypothesis has none."""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - a Hypothesis without the providers module
        return False
    if not hasattr(providers, "_get_local_constants") or not hasattr(providers, "Constants"):
        return False
    empty = providers.Constants()
    providers._get_local_constants = lambda: empty
    return True


PINNED = pin_local_constants()
