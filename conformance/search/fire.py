"""Fire accounting: did the pass change the graphs it was given?

``check()`` records on each ``Verdict`` how many nodes the pass changed (``conformance.changes``).
A search logs one ``Run`` per graph the pass ran on, and at the end keeps the runs Hypothesis
*generated* apart from those it ran while shrinking: shrinking replays variations of a failing
graph, so counting them would inflate both the number of graphs and the share the pass changed. A
verdict on a pass that changed no generated graph is vacuous: nothing was verified.

The search steers by ``hypothesis.target(nodes changed)``, which acts in the generate phase: a
mutation of an example is kept only where the score does not drop. Measured on the pattern bugs
(7 bugs, seeds 0-5): caught in 39 of 42 runs either way, the median first counterexample at
example 26 instead of 50, and their correct twins changed 29% more graphs. Hypothesis's target
*phase* (hill-climbing the score) is left off: with it the bugs were caught at 14 of 21 (bug,
seed 0-2) pairs instead of 20, the budget spent on variations of the best-scoring graph
(docs/torch-facts.md section 6).
"""

from __future__ import annotations

import contextlib
from typing import NamedTuple

from hypothesis import target
from hypothesis.statistics import collector

# Phases whose test cases are examples (reuse: replayed from a database, as under pytest); a test
# case reached the test body when it ended valid or interesting (overrun and invalid ones stopped
# while drawing).
_EXAMPLE_PHASES = ("reuse-phase", "generate-phase")
_BODY_STATUSES = ("valid", "interesting")


class Run(NamedTuple):
    """One graph the pass ran on: nodes changed (None: it returned no graph), whether that was only
    dead-code removal, the properties checked (empty when the pass failed to execute), and why the
    fp64 reference did not run where a value needed it ("": it ran, or none did)."""

    changed: int | None
    dead_code_only: bool
    checked: tuple
    no_reference: str = ""
    held_focus: bool = False  # the graph held one of the focus ops (None of them: the IR's tracer decomposed them)


def steer(verdict) -> None:
    """Score an example by the nodes the pass changed (removing dead code alone scores 0: every
    pass that ends with a clean-up would do it)."""
    target(0.0 if verdict.dead_code_only else float(verdict.changed or 0), label="nodes changed by the pass")


def tally(runs) -> tuple:
    """``(changed, dead_code_only)``: the runs where the pass changed the graph, and of those the
    ones where it only removed dead code."""
    changed = [r for r in runs if r.changed]
    return len(changed), sum(r.dead_code_only for r in changed)


@contextlib.contextmanager
def generated_examples():
    """Within the block, a Hypothesis run reports how many of its test-body calls were examples
    (reused or generated) and how many shrank a failure: ``box["examples"]``, ``box["shrinking"]``,
    both absent when the run ended early (interrupted, or stopped by the search) and reported
    nothing.

    Hypothesis hands a run's statistics to ``hypothesis.statistics.collector`` after the run; the
    body calls come in phase order (reuse, generate with its interleaved target passes, shrink,
    then one final replay of each minimal failure), so the first ``box["examples"]`` calls are the
    examples. A collector already installed (Hypothesis's pytest plugin) still gets the statistics.
    """
    box: dict = {}
    outer = collector.value

    def body_calls(stats, phases) -> int:
        return sum(1 for phase in phases for case in stats.get(phase, {}).get("test-cases", ())
                   if case.get("status") in _BODY_STATUSES)

    def note(stats) -> None:
        box["examples"] = body_calls(stats, _EXAMPLE_PHASES)
        box["shrinking"] = body_calls(stats, ("shrink-phase",))
        if outer is not None:
            outer(stats)

    with collector.with_value(note):
        yield box


__all__ = ["Run", "generated_examples", "steer", "tally"]
