"""PassManager and pass-order constraints, drop-in for ``torch.fx.passes.infra.pass_manager``.

Same constructor, methods and constraint polarity as torch 2.13, without its measured flaws
(docs/torch-facts.md, section 3): the schedule is sorted over list POSITIONS, so a pass listed
twice no longer gives a false "circular dependency"; constraints are re-solved whenever the lists
change (also by direct mutation) and validated on every call; a real cycle names the passes on it;
``suppress_check_failures`` is honoured; ``graph.lint()`` runs after each pass when checks are asked
for; the caller's lists are copied; errors are ``LoweringError`` naming the pass and those before it.
"""

from __future__ import annotations

import heapq
import inspect
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch import fx

from .._errors import LoweringError
from ._infra import PassResult, is_pass_result_like, pass_name, type_name

__all__ = ["PassManager", "solve_pass_order", "this_before_that_pass_constraint"]

logger = logging.getLogger(__name__)

Pass = Callable[..., Any]
Constraint = Callable[[Pass, Pass], bool]


class _ThisBeforeThat:
    """Constraint object with a readable name; a class (not a closure) so its repr names the passes."""

    __slots__ = ("__name__", "that", "this")

    def __init__(self, this: Pass, that: Pass) -> None:
        self.this = this
        self.that = that
        self.__name__ = f"this_before_that({pass_name(this)}, {pass_name(that)})"

    def __call__(self, a: Pass, b: Pass) -> bool:
        # False exactly for (that, this): "that" may not run before "this" (torch's polarity).
        return a is not self.that or b is not self.this

    def __repr__(self) -> str:
        return self.__name__


def this_before_that_pass_constraint(this: Pass, that: Pass) -> Constraint:
    """A constraint that ``this`` runs before ``that``; ``constraint(a, b)`` is False only for (that, this).

    A constraint ``c`` is read for list positions i < j: ``c(p_i, p_j)`` False means p_i may not run
    before p_j. Passes are compared by identity, so the same function listed twice is one pass.

    Example:
        >>> def a(gm): return gm
        >>> def b(gm): return gm
        >>> c = this_before_that_pass_constraint(a, b)
        >>> c(b, a), c(a, b), c
        (False, True, this_before_that(a, b))
    """
    return _ThisBeforeThat(this, that)


def _constraint_name(c: Constraint) -> str:
    return pass_name(c)


def _must_follow(passes: Sequence[Pass], constraints: Sequence[Constraint], i: int, j: int) -> Constraint | None:
    """The first constraint that forbids p_i before p_j (so p_j must come first), or None."""
    for c in constraints:
        try:
            allowed = c(passes[i], passes[j])
        except Exception as exc:
            raise LoweringError(
                f"pass constraint {_constraint_name(c)} raised {type(exc).__name__}: {exc} when asked "
                f"whether {pass_name(passes[i])} (index {i}) may run before {pass_name(passes[j])} "
                f"(index {j}); a constraint must return a bool for any two passes"
            ) from exc
        if not allowed:
            return c
    return None


def solve_pass_order(passes: Sequence[Pass], constraints: Sequence[Constraint]) -> list[int]:
    """The schedule as list positions: a stable topological sort of ``passes`` under ``constraints``.

    Kahn's algorithm over positions that always takes the smallest ready position, so a list that
    already satisfies the constraints is unchanged and the result is the lexicographically smallest
    valid order. Raises LoweringError naming the passes on one cycle when there is none.

    Example:
        >>> def a(gm): return gm
        >>> def b(gm): return gm
        >>> solve_pass_order([a, b, a], [this_before_that_pass_constraint(a, b)])
        [0, 2, 1]
    """
    n = len(passes)
    successors: list[list[int]] = [[] for _ in range(n)]
    reason: dict[tuple[int, int], Constraint] = {}  # edge (first, then) -> the constraint asking for it
    indegree = [0] * n
    if constraints:
        for i in range(n):
            for j in range(n):
                if i == j:
                    continue
                c = _must_follow(passes, constraints, i, j)
                if c is not None:  # p_i may not run before p_j: edge j -> i
                    successors[j].append(i)
                    reason[(j, i)] = c
                    indegree[i] += 1
    ready = [i for i in range(n) if indegree[i] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for k in successors[i]:
            indegree[k] -= 1
            if indegree[k] == 0:
                heapq.heappush(ready, k)
    if len(order) < n:
        _raise_cycle(passes, set(range(n)) - set(order), reason)
    return order


def _raise_cycle(passes: Sequence[Pass], unsorted: set[int], reason: dict[tuple[int, int], Constraint]) -> None:
    # Every unsorted position still has a predecessor among the unsorted ones (Kahn stopped there),
    # so walking predecessors from any of them must revisit a position: that loop is a real cycle.
    predecessors = {k: sorted(j for (j, i) in reason if i == k and j in unsorted) for k in unsorted}
    seen: dict[int, int] = {}
    walk: list[int] = []
    current = min(unsorted)
    while current not in seen:
        seen[current] = len(walk)
        walk.append(current)
        current = predecessors[current][0]
    cycle = walk[seen[current] :][::-1]  # the walk went backwards along edges
    start = cycle.index(min(cycle))
    cycle = cycle[start:] + cycle[:start]
    edges = list(zip(cycle, cycle[1:] + cycle[:1]))
    steps = ", ".join(f"{pass_name(passes[a])} must run before {pass_name(passes[b])}" for a, b in edges)
    names = ", ".join(dict.fromkeys(_constraint_name(reason[e]) for e in edges))
    raise LoweringError(
        f"circular pass constraints: {steps} (list positions {', '.join(map(str, cycle))}); "
        f"remove one of these constraints: {names}"
    )


class PassManager:
    """Runs passes in a constraint-respecting order, up to ``steps`` rounds or until nothing changes.

    Drop-in for ``torch.fx.passes.infra.pass_manager.PassManager``. A pass is ``fn(module) ->
    PassResult`` (wrap other forms with ``pass_result_wrapper``); a constraint is ``fn(a, b) -> bool``
    (see ``this_before_that_pass_constraint``). Unlike torch, ``add_checks`` ACCUMULATES checks
    (torch replaced the previous one) and ``check(module)`` runs all of them.

    Args:
        passes: the passes, copied (torch kept the caller's list and ``add_pass`` appended to it).
        constraints: pass-order constraints, copied.
        steps: most rounds over all passes; a round in which no pass reports ``modified`` ends the run.
        run_checks_after_each_pass: run ``graph.lint()`` and the checks after every pass.
        suppress_check_failures: log a failing check or lint as a warning and go on instead of raising.

    Example:
        >>> import torch.fx as fx
        >>> from reference_lowering.passes import PassManager, pass_result_wrapper
        >>> pm = PassManager([pass_result_wrapper(lambda gm: gm)], steps=3)
        >>> pm(fx.symbolic_trace(lambda x: x + 1)).modified
        False
    """

    def __init__(
        self,
        passes: Iterable[Pass] | None = None,
        constraints: Iterable[Constraint] | None = None,
        steps: int | None = 1,
        run_checks_after_each_pass: bool = False,
        suppress_check_failures: bool = False,
    ) -> None:
        self.passes: list[Pass] = _checked_callables(passes, "passes", "a pass fn(module) -> PassResult")
        self.constraints: list[Constraint] = _checked_callables(
            constraints, "constraints", "a constraint fn(pass_a, pass_b) -> bool"
        )
        # torch's signature defaults steps to None meaning 1; accept that spelling for drop-in use.
        self.steps = 1 if steps is None else steps
        self.run_checks_after_each_pass = run_checks_after_each_pass
        self.suppress_check_failures = suppress_check_failures
        self._checks: list[Callable[[torch.nn.Module], Any]] = []
        self._solved_for: tuple[tuple[Pass, ...], tuple[Constraint, ...]] | None = None

    @property
    def steps(self) -> int:
        return self._steps

    @steps.setter
    def steps(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"steps={value!r}, but should be an int >= 1; use steps=1 to run each pass once")
        self._steps = value

    def add_pass(self, _pass: Pass) -> None:
        """Appends a pass; the schedule is re-solved on the next call."""
        self.passes.extend(_checked_callables([_pass], "add_pass", "a pass fn(module) -> PassResult"))

    def add_constraint(self, constraint: Constraint) -> None:
        """Appends a constraint; the schedule is re-solved on the next call."""
        self.constraints.extend(
            _checked_callables([constraint], "add_constraint", "a constraint fn(pass_a, pass_b) -> bool")
        )

    def add_checks(self, check: Callable[[torch.nn.Module], Any]) -> None:
        """Adds a check ``fn(module)`` that raises when an invariant is broken.

        Checks accumulate (torch's ``add_checks`` replaced the previous check); ``check(module)``
        runs all of them in the order added: before the passes, and after each pass when
        ``run_checks_after_each_pass`` is set.
        """
        try:
            n_params = len(inspect.signature(check).parameters)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"add_checks was given {check!r}, which is not a callable with a signature") from exc
        if n_params != 1:
            raise TypeError(
                f"PassManager check function should only take in one variable, a module; "
                f"{pass_name(check)} takes {n_params} parameters; write it as check(module)"
            )
        self._checks.append(check)

    def check(self, module: torch.nn.Module) -> None:
        """Runs every check added with ``add_checks`` on ``module``; a check signals failure by raising."""
        for check in self._checks:
            check(module)

    def solve_constraints(self) -> None:
        """Reorders ``self.passes`` to satisfy the constraints (stable; see ``solve_pass_order``).

        A real cycle raises LoweringError whatever ``steps`` is (torch's docstring claimed steps > 1
        allows cycles; its code never did either). A reordering is logged at INFO, never silent.
        """
        order = solve_pass_order(self.passes, self.constraints)
        if order != list(range(len(self.passes))):
            before = [pass_name(p) for p in self.passes]
            self.passes = [self.passes[i] for i in order]
            logger.info(
                "pass schedule reordered to satisfy constraints: %s -> %s",
                before,
                [pass_name(p) for p in self.passes],
            )
        self._solved_for = (tuple(self.passes), tuple(self.constraints))

    def validate_constraints(self) -> None:
        """Raises LoweringError for the first pair of list positions i < j that a constraint forbids."""
        if not self.constraints:
            return
        for i in range(len(self.passes)):
            for j in range(i + 1, len(self.passes)):
                c = _must_follow(self.passes, self.constraints, i, j)
                if c is None:
                    continue
                a, b = pass_name(self.passes[i]), pass_name(self.passes[j])
                raise LoweringError(
                    f"pass schedule constraint violated: {_constraint_name(c)} expects {b} before {a}, "
                    f"but {a} is at index {i} and {b} at index {j} in the pass list; reorder the list "
                    "or call solve_constraints()"
                )

    def _schedule_is_current(self) -> bool:
        if self._solved_for is None:
            return False
        passes, constraints = self._solved_for
        return _same_items(passes, self.passes) and _same_items(constraints, self.constraints)

    def __call__(self, module: torch.nn.Module) -> PassResult:
        """Runs the schedule on ``module``; returns ``PassResult(final_module, any_pass_modified)``."""
        if not self._schedule_is_current():
            self.solve_constraints()
        self.validate_constraints()
        schedule = list(self.passes)
        names = [pass_name(p) for p in schedule]
        self._run_checks(module, None, lint=False)
        overall_modified = False
        for step in range(1, self.steps + 1):
            modified = False
            for index, fn in enumerate(schedule):
                where = f"pass {names[index]!r} (index {index} of the schedule, step {step})"
                logger.debug("running %s", where)
                try:
                    res = fn(module)
                    if not is_pass_result_like(res):
                        raise TypeError(
                            f"{names[index]} returned {type_name(res)}, but should return a PassResult "
                            f"(with .graph_module and .modified); wrap it: pass_result_wrapper({names[index]})"
                        )
                    module = res.graph_module
                    modified = modified or bool(res.modified)
                    if isinstance(module, fx.GraphModule):
                        module.recompile()
                except Exception as exc:
                    raise LoweringError(
                        f"{where} failed after passes {names[:index]}: {type(exc).__name__}: {exc}"
                    ) from exc
                if self.run_checks_after_each_pass:
                    self._run_checks(module, where, lint=True)
            overall_modified = overall_modified or modified
            if not modified:
                break
        return PassResult(module, overall_modified)

    def _run_checks(self, module: torch.nn.Module, where: str | None, lint: bool) -> None:
        label = f"after {where}" if where else "on the input module, before any pass"
        stages: list[tuple[str, Callable[[], Any]]] = []
        graph = getattr(module, "graph", None)
        if lint and isinstance(graph, fx.Graph):
            stages.append(("graph.lint()", graph.lint))
        if getattr(self.check, "__func__", None) is PassManager.check:
            stages += [(f"check {pass_name(c)}", lambda c=c: c(module)) for c in self._checks]
        else:  # check() overridden (subclass or assignment, torch's extension points): run it as is
            stages.append(("check()", lambda: self.check(module)))
        for what, run in stages:
            try:
                run()
            except Exception as exc:
                message = f"{what} failed {label}: {type(exc).__name__}: {exc}"
                if not self.suppress_check_failures:
                    raise LoweringError(message) from exc
                logger.warning("%s (continuing: suppress_check_failures=True)", message)


def _checked_callables(items: Iterable[Any] | None, what: str, expected: str) -> list[Any]:
    items = [] if items is None else list(items)
    for i, item in enumerate(items):
        if not callable(item):
            raise TypeError(
                f"{what}[{i}] is {type(item).__name__} ({item!r}), but should be {expected}; "
                "pass the function itself"
            )
    return items


def _same_items(a: Sequence[Any], b: Sequence[Any]) -> bool:
    # Identity, not ==: a pass object with a custom __eq__ must not hide a change of the list.
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))
