"""The data a verification produces: per-example ``Verdict`` and per-run ``VerifyResult``.

Plain data (strings, numbers, lists), so results cross process boundaries (isolated examples,
``--workers``) by pickling and render to JSON without special cases.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

# The properties ``verify`` knows, in the order they are checked and reported. ``execution`` is
# implicit: a pass that raises, hangs, crashes or returns the wrong type violates it, and no other
# property can be checked for that example.
PROPERTIES = ("validity", "values", "mutations", "aliasing", "dynamic", "contracts", "idempotence", "determinism")
DEFAULT_PROPERTIES = ("validity", "values", "mutations", "aliasing")
EXECUTION = "execution"
# How an example's pass failed to give a graph to judge (``Violation.kind`` of an execution
# violation): it raised (or called sys.exit), hung (past the timeout: the pass, or a run of what it
# returned), crashed its process (a signal, os._exit), or returned something that is not a graph. A
# fault of the harness itself is none of these: ``HarnessError``, never a violation.
EXECUTION_KINDS = ("raised", "hung", "crashed", "returned")
# ``dynamic`` (conformance/dynamic.py) is checked on graphs over symbolic sizes only, and there by default.

# Special-values policies (the oracle). strict: NaN/+-inf exactly where the original has them
# (overflow to inf is behaviour: loss scaling relies on it). relaxed: where the original's NaN/inf is
# absent from the fp64 reference (it overflowed or lost the value), the reference's value or a finite
# value within tolerance of it passes too; a NaN/inf the original does not have fails under both.
SPECIALS = ("strict", "relaxed")

# Below this share of changed graphs a verdict says little: the console warns.
LOW_FIRE_SHARE = 0.10
VACUOUS_HINT = "try --focus aten.OP,... (the ops your pass rewrites) or --graphs mutating"


def vacuous_hint(options: dict) -> str:
    """``VACUOUS_HINT``, less what the run already did (``--graphs mutating``)."""
    if (options or {}).get("graphs") == "mutating":
        return "try --focus aten.OP,... (the ops your pass rewrites)"
    return VACUOUS_HINT


@dataclass
class Violation:
    """One property that one example violates.

    ``property`` is a name from PROPERTIES, ``"execution"``, or ``"contracts:<name>"``; ``message``
    follows the house mismatch format (``<what>=<actual>, but should be <expected> [<where>]``).
    The remaining fields are filled once the example is final (shrunk) and written out.
    """

    property: str
    message: str
    graph_before: str = ""  # gm.code of the (minimal) graph the pass was given
    graph_after: str = ""  # gm.code of what the pass returned ("" when it returned nothing usable)
    inputs: str = ""  # one line per input: dtype, shape, strides
    repro_path: str | None = None
    example: int | None = None  # which example (1-based) first showed it, before shrinking
    sizes: list = field(default_factory=list)  # dynamic: the symbol sizes it shows at ({"s0": 5, ...})
    # execution: how the pass failed, one of EXECUTION_KINDS ("" for the other properties)
    kind: str = ""

    @property
    def headline(self) -> str:
        return self.message.splitlines()[0] if self.message else ""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Verdict:
    """What checking one graph found: the properties checked and the violations (empty = ok)."""

    checked: tuple = ()
    violations: list = field(default_factory=list)
    graph_after: str = ""  # gm.code of what the pass returned
    changed: int | None = None  # nodes the pass changed (conformance.changes); None: it returned no graph
    dead_code_only: bool = False  # all it changed was removing dead code
    dynamic: dict | None = None  # graphs over symbolic sizes: sizes run, prover verdicts and time
    # why values that differed were judged by the dtype tolerances alone (the fp64 reference could not
    # run); "" when it ran or no value needed it
    no_reference: str = ""
    # warnings raised while the graphs ran, counted and not shown: {"category", "message", "where",
    # "count"} each (_warning_log.WHERES); and those the pass raised while it was called (no "where")
    warnings: list = field(default_factory=list)
    pass_warnings: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def __str__(self) -> str:
        text = f"ok ({', '.join(self.checked)})" if self.ok else \
            "\n".join(f"{v.property}: {v.message}" for v in self.violations)
        # what the pass warned is its own, so a repro script (which prints this) shows it too
        return text + "".join(f"\nthe pass warned: {w['category']}: {w['message']}" for w in self.pass_warnings)


@dataclass
class PropertyCount:
    """How many examples a property was checked on, and whether it was violated."""

    checked: int = 0
    violated: bool = False


@dataclass
class VerifyResult:
    """The outcome of ``verify()``: ``ok`` is True when no example violated any selected property."""

    target: str
    examples: int = 0  # graphs Hypothesis generated and the pass was checked on (at most max_examples)
    shrink_runs: int = 0  # graphs run while shrinking a counterexample (not examples: variations of one)
    changed: int = 0  # of those, the graphs the pass changed (0 with no violation: a vacuous verdict)
    changed_dead_code_only: int = 0  # of those, the graphs where it only removed dead code
    violations: list = field(default_factory=list)  # one per violated property, minimal example
    properties: dict = field(default_factory=dict)  # name -> PropertyCount
    options: dict = field(default_factory=dict)
    seed: int | None = None
    started: str = ""  # UTC ISO-8601
    duration_s: float = 0.0
    interrupted: bool = False
    isolated: bool = False  # examples ran in subprocesses (asked for, or after a crash)
    focus: dict = field(default_factory=dict)  # what trigger discovery found and how the search used it
    known: list = field(default_factory=list)  # violations verify(known=) accepted: one per distinct first line
    dynamic: dict | None = None  # dynamic=True: graphs, sizes run, prover verdicts and prove_ms, over the search
    unrunnable: int = 0  # drawn graphs that did not run as given on the device (no verdict: another was drawn)
    # graphs whose differing values were judged without the fp64 reference (it could not run), and the
    # first few reasons
    no_reference: int = 0
    no_reference_why: list = field(default_factory=list)
    # torch findings of the generator's own: eager calls that killed the drawing process (the call,
    # how it died, its op); each draw was discarded and the search ran again without it
    generator_crashes: list = field(default_factory=list)
    # verify(ops=): per user op, its drawn calls ({"tried", "ran", "fake_disagreements", "line", "fault"});
    # "fault" is the line saying its fake impl disagrees with its kernel (the op's fault), or None
    user_ops: dict = field(default_factory=dict)
    # verify(db=): {"db", "readonly", "saved" (examples of this search it held before the run),
    # "other_devices" ({device type: examples saved by the same search there, not replayed here})}
    database: dict = field(default_factory=dict)
    # warnings raised while graphs were drawn and run (the run's business: counted, never printed),
    # {"category", "message", "where", "count"} each, where one of _warning_log.WHERES
    warnings: list = field(default_factory=list)
    # warnings the pass raised while called: {"category", "message", "count", "example"} each, example
    # the first that raised it
    pass_warnings: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations and not self.interrupted

    @property
    def rewrites(self) -> int:
        """The graphs the pass rewrote: changed by more than removing dead code."""
        return self.changed - self.changed_dead_code_only

    @property
    def dce_pass(self) -> bool:
        """Removing dead code is the pass's job (``verify(dce_pass=True)``, ``--dce-pass``): a graph it
        only cleaned up counts as one it acted on."""
        return bool((self.options or {}).get("dce_pass"))

    @property
    def acted(self) -> int:
        """The graphs that count for the verdict: those rewritten, and those only cleaned up where
        cleaning up is the pass's job."""
        return self.changed if self.dce_pass else self.rewrites

    @property
    def vacuous(self) -> bool:
        """No violation, but the pass acted on none of the graphs: it changed none, or (unless removing
        dead code is its job) it only ever removed dead code, so its rewrite never fired and nothing
        was verified."""
        return self.ok and self.examples > 0 and self.acted == 0

    @property
    def changed_share(self) -> float:
        return self.changed / self.examples if self.examples else 0.0

    @property
    def rewrite_share(self) -> float:
        return self.rewrites / self.examples if self.examples else 0.0

    @property
    def fire_text(self) -> str:
        """``the pass changed K of N graphs (P%)``; where some of those changes were dead-code removal
        alone, the rewrites and the dead-code-only graphs apart: ``...: rewrites in R (Q%), dead code
        only in D``."""
        text = f"the pass changed {self.changed} of {self.examples} graphs ({100 * self.changed_share:.0f}%)"
        if self.changed_dead_code_only:
            text += (f": rewrites in {self.rewrites} ({100 * self.rewrite_share:.0f}%), dead code only in "
                     f"{self.changed_dead_code_only}")
        return text

    @property
    def vacuous_text(self) -> str:
        if self.changed == 0:
            return f"the pass changed none of the {self.examples} {self.ir_text}graphs, so nothing was verified"
        return (f"in each of the {self.changed} {self.ir_text}graphs it changed (of {self.examples}), the pass only "
                f"removed dead code: its rewrite never fired, so nothing was verified (--dce-pass if removing dead "
                f"code is the pass's job)")

    @property
    def graphs_text(self) -> str:
        """``200 graphs`` or ``200 graphs (+42 while shrinking)``."""
        more = f" (+{self.shrink_runs} while shrinking)" if self.shrink_runs else ""
        return f"{self.examples} {self.ir_text}graphs{more}"

    @property
    def ir_text(self) -> str:
        """``"post-grad "`` for graphs drawn in another IR than aten (what the verdict was checked on)."""
        ir = (self.options or {}).get("ir", "aten")
        return "" if ir == "aten" else f"{ir} "

    @property
    def repro_path(self) -> str | None:
        """Path of the first violation's repro script (None when there is none)."""
        return next((v.repro_path for v in self.violations if v.repro_path), None)

    def to_dict(self) -> dict:
        return asdict(self)
