"""Fire accounting: did the pass change the graphs it was given?

``check()`` records on each ``Verdict`` how many nodes the pass changed (``conformance.changes``);
``FireCount`` sums that over a search, and steers Hypothesis towards graphs the pass changes more
(``hypothesis.target``). A verdict on a pass that changed no graph is vacuous: nothing was verified.
"""

from __future__ import annotations

from hypothesis import target


class FireCount:
    """Graphs the pass changed, out of those it was run on (picklable, merged across workers)."""

    def __init__(self):
        self.changed = 0
        self.dead_code_only = 0

    def add(self, verdict) -> None:
        """Count one checked example, and steer towards graphs the pass rewrites more (removing dead
        code alone does not count: every pass that ends with a clean-up would do it)."""
        n = verdict.changed or 0
        if n > 0:
            self.changed += 1
            self.dead_code_only += verdict.dead_code_only
        target(0.0 if verdict.dead_code_only else float(n), label="nodes changed by the pass")

    def merge(self, other: "FireCount") -> None:
        self.changed += other.changed
        self.dead_code_only += other.dead_code_only

    def fill(self, result) -> None:
        result.changed, result.changed_dead_code_only = self.changed, self.dead_code_only
