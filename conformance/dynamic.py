"""The ``dynamic`` property: a pass's result on a graph over symbolic sizes holds for every size.

Given the graph's ``SymbolicShapes`` (``graphs(dynamic=True)`` draws them, ``check(symbolic=)``
takes them), a result *specialises* when it holds only at some of the sizes the original holds at.
The checks, in order (the first that finds something is reported):

1. **Guards.** The pass gets a copy whose ``meta['val']`` lives in a fresh ``ShapeEnv``; a guard the
   pass records there (``if val.shape[0] == 4``) that the original's guards do not imply is a
   specialisation. So is one that fake propagation of the *result* records.
   "Implies" assumes the original's guards and the ranges torch traced it under (``s >= 2`` for
   a symbol it did not specialise), as torch's own guards for a compiled graph do.
2. **Shape arithmetic, proved.** Every ATen node the result shares with the original (same name,
   op and tensor operands: passes keep those for a node whose size arguments they rewrite), and
   every output, must have the same symbolic
   value (a tensor's sizes, a SymInt) for all sizes the original's guards allow; where sympy does
   not already make them equal, the z3 prover decides (``conformance.symbolic``) under the same
   assumptions: proved, or a counterexample size. So are the sizes in the ``meta['val']`` the pass left (they must be what
   the node computes). A counterexample's sizes are run in step 3 and in the repro.
3. **Other sizes, run.** The result is run beside the original at sizes other than the example's
   that satisfy the original's guards (0 and 1 where the guards allow them, larger ones, each
   counterexample), and compared by the checker's oracle (``oracle.Oracle``, with its special-values
   and signed-zero options and eager's other results): outputs (shapes, dtypes, values), inputs
   after the run.

Runs are not bound by the ``>= 2`` torch's 0/1 specialisation assumes while tracing: any
non-negative sizes at which the original's recorded guards hold are tried (export's ``Dim``
ranges start at 0), and a size where the original itself fails is skipped.
"""

from __future__ import annotations

import contextlib

import sympy
import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

from strategies import InvalidArgument, SymbolicShapes, size_symbol, symbolic_value

from ._errors import UsageError
from .copies import clone_inputs, graph_run
from .invariants import first_line
from .oracle import Oracle, bitwise_equal, compare_metadata
from .symbolic import prove_equal, prove_implies

DYNAMIC = "dynamic"
MAX_SIZES = 4  # sizes run besides the example (counterexamples come on top)
MAX_RUN_NUMEL = 1 << 22  # elements of all inputs at a size the harness runs (larger sizes are proved, not run)
PROVE_TIMEOUT_MS = 2000


def as_shapes(symbolic) -> SymbolicShapes:
    """``symbolic`` as ``SymbolicShapes``: one already, or its dims (per input, names and ints)."""
    if isinstance(symbolic, SymbolicShapes):
        return symbolic
    try:
        return SymbolicShapes(dims=symbolic)
    except InvalidArgument as exc:
        raise UsageError(f"symbolic: {exc}") from None


def sizes_text(sizes: dict, examples: dict | None = None) -> str:
    """``s0=5, s1=3`` (with `` (the example: s0=4)`` for the ones that differ)."""
    text = ", ".join(f"{k}={v}" for k, v in sizes.items())
    if examples:
        differ = [f"{k}={examples[k]}" for k, v in sizes.items() if examples.get(k) != v]
        if differ:
            text += f" (the example: {', '.join(differ)})"
    return text


class DynamicCheck:
    """The ``dynamic`` property for one graph: the original's symbolic run, then ``judge(result)``."""

    def __init__(self, gm: fx.GraphModule, inputs: tuple, symbolic, sizes=(), *, specials: str = "strict",
                 signed_zeros: bool = False, timed=contextlib.nullcontext):
        self.shapes = as_shapes(symbolic)
        self.specials, self.signed_zeros = specials, signed_zeros  # the checker's oracle options, at every size
        self.timed = timed  # () -> the context each run of the pass's result is timed in (checker.timed)
        try:
            self.examples = self.shapes.example_sizes(inputs)
        except InvalidArgument as exc:
            raise UsageError(f"symbolic: {exc}") from None
        self.gm, self.inputs = gm, inputs
        try:
            self.original = self.shapes.propagate(gm, inputs)
        except Exception as exc:  # noqa: BLE001 - the user's graph, not the pass
            raise UsageError(f"the graph given with symbolic={self.shapes.dims!r} does not propagate over symbolic "
                             f"sizes ({type(exc).__name__}: {first_line(exc)}); check which dims are symbols") from None
        self.guards = self.original.guards()
        # What proofs assume: the guards, and the ranges torch traced under (s >= 2 for a symbol it did
        # not specialise): the sizes its graph is claimed for. Runs try 0 and 1 as well (``_picked``).
        self.assumed = [*self.guards, *self.original.ranges()]
        self.values = {n.name: (_identity(n), self.original.value(n)) for n in self.original.gm.graph.nodes
                       if isinstance(n.target, torch._ops.OpOverload)}
        self.outputs = _output_values(self.original)
        self.given_sizes = [self._full(s) for s in sizes]
        self.proofs = []  # (verdict, ms) of every prover call
        self.counterexamples = []
        self.ran = []  # the sizes the result was run at
        self.failed_at = []  # the sizes at which it differed from the original
        self._pass_runs = {}  # id(copy for_pass made) -> (its SymbolicRun, guards before the pass)

    def _full(self, sizes: dict) -> dict:
        unknown = sorted(set(sizes) - set(self.examples))
        if unknown:
            raise UsageError(f"sizes={sizes!r} names {', '.join(unknown)}, but the symbols are "
                             f"{', '.join(self.examples)}")
        return {**self.examples, **sizes}

    # --- the pass's copy ---------------------------------------------------------------------
    def for_pass(self) -> fx.GraphModule:
        """A copy of the original for the pass: ``meta['val']`` in a fresh ShapeEnv of its own, so
        the guards the pass records are its own (and the caller's graph never gains any)."""
        run = self.shapes.propagate(self.gm, self.inputs)
        run.gm.meta.update(self.gm.meta)
        self._pass_runs[id(run.gm)] = (run, len(run.shape_env.guards))  # guards so far: propagation's own
        return run.gm

    # --- judging the result --------------------------------------------------------------------
    def judge(self, given: fx.GraphModule, after: fx.GraphModule) -> list:
        """Messages (empty when the result holds at every size); ``given`` is what ``for_pass`` made."""
        if not self.examples:  # every size is static: nothing can specialise
            return []
        messages = self._pass_guards(given)
        if messages:
            return messages
        try:
            result = self.shapes.propagate(after, self.inputs)
        except Exception as exc:  # noqa: BLE001 - the result cannot be traced over the symbols
            return [f"fake propagation of the result over symbolic sizes raised {type(exc).__name__}: "
                    f"{first_line(exc)}, but should succeed as the original's does"] + self._run_sizes(after)[:1]
        messages = self._new_guards(result.guards(), "fake propagation of the result")
        messages += self._compare_values(result, after, given)
        return messages + self._run_sizes(after)

    def _pass_guards(self, given) -> list:
        run, before = self._pass_runs.get(id(given), (None, 0))
        if run is None:
            return []
        new = run.guards()[before:]
        return self._new_guards(new, "the pass")

    def _new_guards(self, guards: list, who: str) -> list:
        messages = []
        known = [str(g) for g in self.guards]
        for g in guards:
            if g in (sympy.true, True) or str(g) in known:
                continue
            verdict = self._prove(lambda: prove_implies(sympy.And(*self.assumed), g, timeout_ms=PROVE_TIMEOUT_MS))
            if verdict.verdict == "refuted":
                sizes = self._counterexample(verdict)
                messages.append(f"guard {g} recorded by {who}, but should not be needed: the original holds without "
                                f"it (its guards and ranges: {_guards_text(self.assumed)}), e.g. at "
                                f"{sizes_text(sizes, self.examples)} [specialised]")
        return messages

    def _compare_values(self, result, after, given) -> list:
        messages = []
        for i, (old, new) in enumerate(zip(self.outputs, _output_values(result))):
            messages += self._equal(old, new, f"output[{i}]")
        for node in result.gm.graph.nodes:
            identity, old = self.values.get(node.name, (None, None))
            if identity is None or identity != _identity(node):
                continue
            new = result.value(node)
            if old is None or new is None or not self._agree_at_example(old, new):
                continue
            messages += self._equal(old, new, f"%{node.name}")
        messages += self._stale_meta(result, after, given)
        return messages[:3]

    def _agree_at_example(self, old, new) -> bool:
        """Whether two values agree at the example's sizes, as a node the pass kept does (even one whose
        sizes it baked in: those hold at the example). A pass that traces the graph anew renames its
        nodes: export's ReplaceViewOpsWithViewCopyOpsPass dropped a dead ``full`` and the next took
        its name, ``full_1``, whose size was s0 // 2 where the original's was (s0**2 + 1) // 2."""
        def flat(v):
            return [x for item in v for x in flat(item)] if isinstance(v, tuple) else [v]

        env = _size_env(self.examples)
        old, new = flat(old), flat(new)
        if len(old) != len(new):
            return True  # a different structure: _equal says so
        for a, b in zip(old, new):
            if a is None or b is None:
                continue
            a, b = sympy.sympify(a).xreplace(env), sympy.sympify(b).xreplace(env)
            if a.is_number and b.is_number and a != b:
                return False
        return True

    def _stale_meta(self, result, after, given) -> list:
        """The sizes in the ``meta['val']`` the pass left against what each node computes."""
        run, _ = self._pass_runs.get(id(given), (None, 0))
        if run is None:
            return []
        truth = {n.name: result.value(n) for n in result.gm.graph.nodes}
        messages = []
        for node in after.graph.nodes:
            if node.op == "output" or node.name not in truth or truth[node.name] is None:
                continue
            left = symbolic_value(node.meta.get("val"), run.ours)
            if left is None or not _ours_only(left, self.examples):
                continue
            messages += self._equal(truth[node.name], left, f"meta['val'] of %{node.name}",
                                    verb="says", truth="what the node computes")
        return messages

    def _equal(self, old, new, what: str, verb="is", truth="the original's") -> list:
        if isinstance(old, tuple) != isinstance(new, tuple) or (isinstance(old, tuple) and len(old) != len(new)):
            return [f"{what} {verb} {_show(new)}, but should be {_show(old)} ({truth}) [specialised]"]
        pairs = list(zip(old, new)) if isinstance(old, tuple) else [(old, new)]
        for j, (a, b) in enumerate(pairs):
            if isinstance(a, tuple) or isinstance(b, tuple):
                sub = self._equal(a, b, f"{what}[{j}]", verb, truth)
                if sub:
                    return sub
                continue
            if a is None or b is None or a == b or sympy.expand(a - b) == 0:
                continue
            verdict = self._prove(lambda: prove_equal(a, b, assumptions=self.assumed, timeout_ms=PROVE_TIMEOUT_MS))
            if verdict.verdict == "proved":
                continue
            where = f" size[{j}]" if isinstance(old, tuple) else ""
            if verdict.verdict == "refuted":
                sizes = self._counterexample(verdict)
                return [f"{what}{where} {verb} {b}, but should be {a} ({truth}) for every allowed size: at "
                        f"{sizes_text(sizes, self.examples)} it is {verdict.rhs_value}, not {verdict.lhs_value} "
                        f"[specialised]"]
            return []  # unknown: not a verdict either way (counted in proofs)
        return []

    def _prove(self, fn):
        verdict = fn()
        self.proofs.append((verdict.verdict, verdict.time_ms))
        return verdict

    def _counterexample(self, verdict) -> dict:
        sizes = {**self.examples, **{k: v for k, v in verdict.counterexample.items() if k in self.examples}}
        if sizes not in self.counterexamples:
            self.counterexamples.append(sizes)
        return sizes

    # --- running at other sizes ------------------------------------------------------------------
    def sizes(self) -> list:
        """The sizes to run besides the example: given ones, counterexamples, then picked ones."""
        out = []
        for sizes in [*self.given_sizes, *self.counterexamples, *self._picked()]:
            if sizes not in out and sizes != self.examples and self._runnable(sizes):
                out.append(sizes)
        return out

    def _runnable(self, sizes: dict) -> bool:
        """Whether inputs at ``sizes`` fit in memory: z3 may refute with sizes such as 2**63 - 1 (a
        ``sym_min(s, INT64_MAX)`` bound), where the refutation is the verdict and nothing can run."""
        numel = 0
        for i in range(len(self.inputs)):
            n = 1
            for d in self.shapes.shape_at(i, sizes):
                n *= d
            numel += n
        return numel <= MAX_RUN_NUMEL

    def _picked(self) -> list:
        names = list(self.examples)
        ex = self.examples
        candidates = [{n: ex[n] + 1 + i for i, n in enumerate(names)},  # grown, still distinct
                      {n: 0 for n in names}, {n: 1 for n in names},
                      *({n: ex[n] + k * (1 + i) for i, n in enumerate(names)} for k in (2, 3, 4)),
                      *({**ex, n: v} for n in names for v in (1, 0, ex[n] + 1)),
                      {n: 2 * ex[n] + 1 for n in names}]
        picked = []
        for sizes in candidates:
            if len(picked) >= MAX_SIZES:
                break
            if sizes not in picked and self.allowed(sizes):
                picked.append(sizes)
        return picked

    def allowed(self, sizes: dict) -> bool:
        """Whether the original's guards hold at ``sizes``."""
        env = _size_env(sizes)
        try:
            return all(bool(g.xreplace(env)) for g in self.guards)
        except (TypeError, ZeroDivisionError, ArithmeticError):
            return False

    def _run_sizes(self, after) -> list:
        for sizes in self.sizes():
            message = self._run_at(after, sizes)
            if message:
                self.failed_at.append(sizes)
                return [message]
        return []

    def _run_at(self, after, sizes: dict) -> str | None:
        inputs = self.shapes.inputs_at(self.inputs, sizes)
        exp_in = clone_inputs(inputs)
        try:
            with graph_run(self.gm):
                expected = self.gm(*exp_in)
        except Exception:  # noqa: BLE001 - the original does not hold here either (a size torch's guards miss)
            return None
        self.ran.append(sizes)
        where = f"at {sizes_text(sizes, self.examples)}"
        act_in = clone_inputs(inputs)
        try:
            with graph_run(after), self.timed():
                actual = after(*act_in)
        except Exception as exc:  # noqa: BLE001
            return (f"{where}: running the result raised {type(exc).__name__}: {first_line(exc)}, but should run "
                    f"like the original [specialised]")
        exp_flat, act_flat = pytree.tree_leaves(expected), pytree.tree_leaves(actual)
        if len(exp_flat) != len(act_flat):
            return f"{where}: outputs={len(act_flat)}, but should be {len(exp_flat)}"
        oracle = Oracle(self.gm, inputs, specials=self.specials, signed_zeros=self.signed_zeros)
        for i, (a, e) in enumerate(zip(act_flat, exp_flat)):
            message = oracle.output(i, a, e, f"output[{i}]")
            if message:
                return f"{where}: {message}"
        for i, (a, e) in enumerate(zip(act_in, exp_in)):
            what = f"input[{i}] after the run"
            message = compare_metadata(a, e, what, strides=False)
            if message is None and isinstance(e, torch.Tensor) and not bitwise_equal(a, e):
                message = oracle.compare(a, e, what, lambda r, i=i: r[1][i])
            if message:
                return f"{where}: {message}"
        return None

    def stats(self) -> dict:
        counts = {"proved": 0, "refuted": 0, "unknown": 0}
        for verdict, _ in self.proofs:
            counts[verdict] += 1
        return {"sizes_run": len(self.ran), "proofs": counts,
                "prove_ms": round(sum(ms for _, ms in self.proofs), 3), "counterexamples": list(self.counterexamples),
                "failed_at": [*self.counterexamples, *(s for s in self.failed_at if s not in self.counterexamples)]}


def _size_env(sizes: dict) -> dict:
    """``{"s0": 3}`` as a substitution of the size symbols."""
    return {size_symbol(k): sympy.Integer(v) for k, v in sizes.items()}


def _identity(node: fx.Node) -> tuple:
    """What pairs a node of the result with the original's: its name, its op, and its arguments with
    tensor operands by name and size operands (SymInt nodes) left open. A pass keeps these for a
    node whose size arguments it rewrites; a graph built anew (a lowering) may reuse a name for
    another node, which this tells apart."""
    def arg(a):
        return a.name if isinstance(a.meta.get("val"), torch.Tensor) else "<size>"
    return node.name, node.target, repr(fx.map_arg((node.args, node.kwargs), arg))


def _output_values(run) -> list:
    output = next(n for n in run.gm.graph.nodes if n.op == "output")
    return [symbolic_value(a.meta.get("val"), run.ours) if isinstance(a, fx.Node)
            else symbolic_value(a, run.ours) for a in pytree.tree_leaves(output.args[0])]


def _ours_only(value, examples) -> bool:
    names = {size_symbol(n) for n in examples}
    exprs = value if isinstance(value, tuple) else (value,)
    for e in exprs:
        if isinstance(e, tuple):
            if not _ours_only(e, examples):
                return False
        elif e is None or not e.free_symbols <= names:
            return False
    return True


def _show(value) -> str:
    if isinstance(value, tuple):
        return "(" + ", ".join(_show(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return str(value)


def _guards_text(guards) -> str:
    return ", ".join(str(g) for g in guards) if guards else "none"


__all__ = ["DYNAMIC", "DynamicCheck", "as_shapes", "sizes_text"]
