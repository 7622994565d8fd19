"""Checking one graph: run the original and the pass's result on identical inputs, judge each property.

``check(pass_, gm, inputs)`` is the unit that ``verify()`` repeats over generated graphs, that
isolated workers run, and that repro scripts call. Properties (``PROPERTIES``):

- ``validity``: the result lints, keeps the signature, recompiles, runs; ``meta['val']`` where
  present matches what each node produces (shape, dtype, significant strides);
- ``values``: outputs match under the oracle (count, shapes, dtypes, values; strides of outputs
  that alias an input in the original);
- ``mutations``: every input after the run matches (values and metadata), so does every tensor
  constant the original reads (module state a run may write), and so does grad mode;
- ``dynamic`` (graphs over symbolic sizes, ``symbolic=``): the result holds at every size the
  original does: no new guards, shape arithmetic proved equal by z3, the same outputs at other
  sizes (``dynamic.py``);
- ``aliasing``: which outputs alias inputs, constants or each other is unchanged: an alias is never
  added (two outputs that come to share storage, as CSE of duplicate results made them, is a
  violation unless the original's shared it); a contract such as ``functional`` may allow aliases
  to be removed;
- ``contracts``: the ``ensure=`` names (``contracts.CONTRACTS``), which the result must satisfy
  whatever the original did (the pass establishes them), and the ``preserve=`` names, judged
  against the original: only violations the pass introduced count, never on a graph it left unchanged;
- ``idempotence``: the pass applied to its own result changes nothing (code, ``modified``);
- ``determinism``: the pass applied twice to the same graph gives the same code.

A pass that raises, hangs (``timeout``) or returns a non-graph violates ``execution``.

Here: ``check()`` and the ``Checker`` (its options, the property names it judges), and the runs of
one example: the original, the pass (again for ``idempotence`` and ``determinism``), the graph it
returned. The comparisons that judge the other properties on what those runs gave live in
``properties.py``; the time limit of the pass and its result in ``deadlines.py``.
"""

from __future__ import annotations

import traceback

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

from strategies import attach_meta, current_modes

from ._errors import OriginalFailed, UsageError
from ._result import DEFAULT_PROPERTIES, EXECUTION, PROPERTIES, Verdict
from ._warning_log import PASS, WarningLog, quietly, recording
from .adapters import PassReturnError, PassUnderTest, load_pass
from .changes import what_changed
from .contracts import ContractContext, get_contracts
from .copies import attr_or_none, clone_inputs, clone_tensor, graph_run, snapshot, tensor_constants, to_device
from .deadlines import ExampleTimeout, timed
from .dynamic import DYNAMIC, DynamicCheck, as_shapes
from .invariants import Recorder, first_line as _first_line, structural_errors
from .oracle import SPECIALS, Oracle
from .properties import Judgements, _node


def resolve_properties(properties, ensure, dynamic: bool = False) -> tuple:
    """Validated property names: the defaults when None (with ``dynamic`` for graphs over symbolic
    sizes), plus ``contracts`` when ``ensure`` is set."""
    if properties is None:
        names = list(DEFAULT_PROPERTIES) + ([DYNAMIC] if dynamic else [])
    else:
        names = [p.strip() for p in (properties.split(",") if isinstance(properties, str) else properties) if p.strip()]
        unknown = [p for p in names if p not in PROPERTIES]
        if unknown:
            raise UsageError(f"properties={','.join(unknown)} unknown; choose from {','.join(PROPERTIES)}")
        if not names:
            raise UsageError(f"properties is empty; choose from {','.join(PROPERTIES)}")
    if ensure and "contracts" not in names:
        names.append("contracts")
    if DYNAMIC in names and not dynamic:
        raise UsageError("the dynamic property needs graphs over symbolic sizes: --dynamic (verify(dynamic=True)) or "
                         "check(symbolic=...)")
    if "contracts" in names and not ensure:
        raise UsageError("the contracts property needs at least one --ensure NAME or --preserve NAME")
    return tuple(p for p in PROPERTIES if p in names)


class Checker:
    """Checks graphs against one pass with fixed options; ``check(gm, inputs) -> Verdict``."""

    def __init__(self, pass_: PassUnderTest, *, properties=None, ensure=(), preserve=(), timeout: float | None = 10.0,
                 signed_zeros: bool = False, specials: str = "strict", device: str = "cpu", dynamic: bool = False):
        if specials not in SPECIALS:
            raise UsageError(f"specials={specials!r}, but should be one of {', '.join(SPECIALS)}")
        self.pass_ = pass_
        self.ensure, self.preserve = tuple(ensure), tuple(preserve)
        if both := sorted(set(self.ensure) & set(self.preserve)):
            raise UsageError(f"contract {both[0]!r} is both --ensure (the result must satisfy it) and --preserve "
                             f"(the pass must not break it); give one")
        self.contracts = get_contracts(self.ensure)
        self.preserved = get_contracts(self.preserve)
        self.properties = resolve_properties(properties, self.ensure + self.preserve, dynamic)
        self.dynamic = dynamic
        self.timeout = timeout
        self.signed_zeros = signed_zeros
        self.specials = specials
        self.device = device
        self.alias_removal_ok = any(c.allows_alias_removal for c in self.contracts)

    @property
    def checked(self) -> tuple:
        """Property names as reported: ``contracts`` expands to ``contracts:<name>``."""
        out = []
        for p in self.properties:
            out.extend(f"contracts:{c}" for c in self.ensure + self.preserve) if p == "contracts" else out.append(p)
        return tuple(out)

    def check(self, gm: fx.GraphModule, inputs: tuple, symbolic=None, sizes=()) -> Verdict:
        """Judge the pass on ``gm`` with ``inputs`` (neither is modified), on ``self.device``.
        ``symbolic``: the ``SymbolicShapes`` of a graph over symbolic sizes (a dynamic checker needs
        it), ``sizes``: sizes to run it at besides the ones the ``dynamic`` property picks."""
        if self.dynamic and symbolic is None:
            raise UsageError("this checker judges graphs over symbolic sizes: pass symbolic= (their SymbolicShapes)")
        # Torch's warnings while the graphs run are counted in the verdict, never shown; the pass's own
        # are kept apart (``pass_warnings``): the search reports them with the example (_warning_log.py).
        log = WarningLog()
        with recording(log):
            verdict = quietly("oracle", self._check, gm, inputs, symbolic, sizes)
        verdict.warnings = log.kinds(lambda where: where != PASS)
        verdict.pass_warnings = [{k: v for k, v in kind.items() if k != "where"} for kind in log.kinds(PASS)]
        return verdict

    def _check(self, gm, inputs, symbolic, sizes) -> Verdict:
        tensors = (*inputs, *gm.buffers(), *gm.parameters())
        if any(isinstance(t, torch.Tensor) and t.device.type != self.device for t in tensors):
            gm, inputs = to_device(gm, tuple(inputs), self.device)  # drawn elsewhere (graphs(device=) draws here)
        dyn = DynamicCheck(gm, tuple(inputs), symbolic, sizes, specials=self.specials, signed_zeros=self.signed_zeros,
                           timed=lambda: timed(self.timeout)) if self.dynamic and DYNAMIC in self.properties else None
        run = _Run(self, gm, tuple(inputs), dyn)
        try:
            run.go()
        except ExampleTimeout:  # a timed run of the result the step did not catch itself (meta, other sizes)
            run.violation(EXECUTION, f"time={self.timeout:g} s elapsed running the graph the pass returned, but it "
                                     f"should run within the timeout: it hangs or is far too slow", kind="hung")
        run.verdict.no_reference = run.oracle.missing_reference
        return run.verdict


class _Run(Judgements):
    """The state of checking one example (a class so the steps can share what earlier ones ran): the
    runs of the original, the pass and its result; the properties judged on them (``Judgements``)."""

    def __init__(self, checker: Checker, gm: fx.GraphModule, inputs: tuple, dyn=None):
        self.c, self.gm, self.inputs, self.dyn = checker, gm, inputs, dyn
        self.verdict = Verdict(checked=checker.checked)
        self.oracle = Oracle(gm, inputs, specials=checker.specials, signed_zeros=checker.signed_zeros)

    def wants(self, prop: str) -> bool:
        return prop in self.c.properties

    def go(self) -> None:
        exp_in = clone_inputs(self.inputs)
        original = _pristine(self.gm)
        try:
            exp_out, exp_modes = quietly("original", _call, original, exp_in)
        except Exception as exc:  # noqa: BLE001 - the graph itself, not the pass: never the pass's verdict
            device = next((t.device for t in self.inputs if isinstance(t, torch.Tensor)), "cpu")
            raise OriginalFailed(f"the original graph does not run on {device}: {type(exc).__name__}: "
                                 f"{_first_line(str(exc))}") from exc
        self.expected = (pytree.tree_flatten(exp_out), exp_in, exp_modes)
        self.exp_constants = tensor_constants(original)  # after its one run
        given = self.dyn.for_pass() if self.dyn else self.gm  # over symbols of its own (dynamic.py)
        applied = self._apply(given, self.inputs)
        if applied is None:
            return
        after = applied.gm
        self.verdict.changed, self.verdict.dead_code_only = what_changed(self.gm, after)
        errors = structural_errors(after, len(self.inputs))  # recompiles when the graph is sound
        self.verdict.graph_after = _code(after) if errors else after.code.strip()
        if errors:
            self.violation("validity", errors[0])
            return
        act_in = clone_inputs(self.inputs)
        try:
            with timed(self.c.timeout):
                act_out, act_modes = quietly("result", _call, after, act_in)
        except ExampleTimeout:
            self.violation(EXECUTION, f"time={self.c.timeout:g} s elapsed running the graph the pass returned, but "
                                      f"it should run within the timeout: it hangs or is far too slow", kind="hung")
            return
        except Exception as exc:  # noqa: BLE001 - any failure of the result is the pass's
            self.violation("validity", _run_failure(after, self.inputs, exc))
            return
        # The result's state under the original's constant names, copied before any further run of it.
        act_constants = {name: _copy_or_none(attr_or_none(after, name)) for name in self.exp_constants}
        (exp_flat, exp_spec), _, _ = self.expected
        act_flat, act_spec = pytree.tree_flatten(act_out)
        if self.wants("validity"):
            self._meta(after)
        if self.wants("values"):
            self._values(exp_flat, exp_spec, act_flat, act_spec, exp_in, act_in)
        if self.wants("mutations"):
            self._mutations(act_in, act_modes)
            self._constant_writes(act_constants)
        if self.wants("aliasing") and len(exp_flat) == len(act_flat):
            self._aliasing(exp_flat, exp_in, act_flat, act_in, after)
        if self.dyn is not None:
            for message in self.dyn.judge(given, after):
                self.violation(DYNAMIC, message)
            self.verdict.dynamic = self.dyn.stats()
        if self.wants("contracts"):
            ctx = ContractContext(self.gm, after, act_in, tuple(act_flat))
            for contract in self.c.contracts:
                for message in contract.check(ctx):
                    self.violation(f"contracts:{contract.name}", message)
            if self.c.preserved and self.verdict.changed:
                self._preserved(ctx, ContractContext(self.gm, self.gm, exp_in, tuple(exp_flat)))
        if self.wants("idempotence"):
            self._idempotence(applied)
        if self.wants("determinism"):
            self._determinism(after)

    # --- the pass ------------------------------------------------------------------------------
    def _apply(self, gm, inputs):
        try:
            with graph_run(), timed(self.c.timeout):
                return quietly(PASS, self.c.pass_.apply, gm, clone_inputs(inputs))
        except PassReturnError as exc:
            self.violation(EXECUTION, str(exc), kind="returned")
        except UsageError:
            raise
        except ExampleTimeout:
            self.violation(EXECUTION, f"time={self.c.timeout:g} s elapsed, but the pass should finish within the "
                                      f"timeout: it hangs or is far too slow", kind="hung")
        except SystemExit as exc:
            self.violation(EXECUTION, f"pass called sys.exit({exc.code!r}), but should return a graph", kind="raised")
        except Exception as exc:  # noqa: BLE001 - the pass's own failure is a finding
            self.violation(EXECUTION, f"pass raised {type(exc).__name__}: {_first_line(exc)}, but should return "
                                      f"a graph{_where(exc)}", kind="raised")
        return None

    # --- properties that apply the pass again ------------------------------------------------
    def _idempotence(self, applied):
        again = self._apply(applied.gm, self.inputs)
        if again is None:
            return
        first, second = _code(applied.gm), _code(again.gm)
        if first != second:
            self.violation("idempotence", f"code after a second application differs{_diff(first, second)}, but "
                                          f"should be unchanged")
        elif again.modified:
            self.violation("idempotence", "PassResult.modified=True on a second application, but should be False "
                                          "(the graph did not change)")

    def _determinism(self, after):
        again = self._apply(self.dyn.for_pass() if self.dyn else self.gm, self.inputs)
        if again is None:
            return
        first, second = _code(after), _code(again.gm)
        if first != second:
            self.violation("determinism", f"code of a second run on the same graph differs{_diff(first, second)}, "
                                          f"but should be identical")


# --- helpers -------------------------------------------------------------------------------------


def _call(gm, inputs):
    """Run ``gm``: (outputs, grad mode and autocast right after the run); both are then restored."""
    with graph_run(gm):
        out = gm(*inputs)
        return out, current_modes()



def _pristine(gm: fx.GraphModule) -> fx.GraphModule:
    """``gm``, or a snapshot of it when it reads constants: a graph may write to its own constants,
    and the original's run must leave them as they were for the pass's copy (and the caller)."""
    if any(n.op in ("get_attr", "call_module") for n in gm.graph.nodes):  # a module's buffers too
        return snapshot(gm)
    return gm



def _copy_or_none(t):
    return clone_tensor(t) if isinstance(t, torch.Tensor) else None



def _code(gm) -> str:
    try:
        gm.recompile()  # a pass that edits in place leaves .code stale
        return gm.code.strip()
    except Exception:  # noqa: BLE001 - code of a broken module is best-effort
        return str(gm.graph)



def _diff(a: str, b: str) -> str:
    la, lb = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            return f" at line {i + 1}: {x.strip()!r} vs {y.strip()!r}"
    return f" in length: {len(la)} vs {len(lb)} lines"



def _where(exc: BaseException) -> str:
    """Where in the pass it raised: the innermost frame outside torch and this package."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if "/torch/" not in f.filename and "/conformance/" not in f.filename]
    if not frames:
        return ""
    f = frames[-1]
    return f" [at {f.filename}:{f.lineno} in {f.name}]"



def _run_failure(after, inputs, exc) -> str:
    rec = Recorder(after)
    try:
        with graph_run(after):
            quietly("result", rec.run, *clone_inputs(inputs))
    except Exception:  # noqa: BLE001 - we only want the failing node
        pass
    return (f"running the transformed graph raised {type(exc).__name__}: {_first_line(exc)}, but should run "
            f"like the original{_node(after, rec.failed)}")



def check(pass_, gm: fx.GraphModule, example_inputs, *, properties=None, ensure=(), preserve=(), signature=None,
          settings_factory=None, pass_kwargs=None, context=None, device: str = "cpu", timeout: float | None = 10.0,
          signed_zeros: bool = False, specials: str = "strict", symbolic=None, sizes=()) -> Verdict:
    """Check ``pass_`` on one graph: ``Verdict`` with the violated properties (``.ok`` when none).

    ``symbolic``: for a graph over symbolic sizes, which input dims are symbols (``SymbolicShapes``
    or its dims, e.g. ``(("s0", 1), ("s0", "s1"))``); then ``dynamic`` is checked too, at the sizes
    it picks and at ``sizes`` (a list of ``{"s0": 5, ...}``, as a repro script gives them).

    ``specials``: "strict" (NaN/inf exactly where the original has them) or "relaxed" (where the
    original overflowed or lost a value the fp64 reference has, a result near the reference passes).
    ``pass_kwargs``/``context``: extra keyword arguments for the pass, and a context-manager factory it
    runs inside (see ``load_pass``). ``gm`` and ``example_inputs`` are never modified.
    Warnings raised while the graphs run are counted in ``verdict.warnings``, not shown; the pass's
    own in ``verdict.pass_warnings``. Nodes without ``meta['val']`` get it from an
    eager run on a copy, as generated graphs have it (many passes read it).

    >>> import torch, torch.fx as fx
    >>> gm = fx.symbolic_trace(lambda x: torch.ops.aten.relu.default(x))
    >>> check(lambda gm: gm, gm, (torch.randn(3),)).ok
    True
    """
    put = load_pass(pass_, signature=signature, settings_factory=settings_factory, pass_kwargs=pass_kwargs,
                    context=context)
    inputs = tuple(example_inputs)
    if not isinstance(gm, fx.GraphModule):
        raise UsageError(f"gm is a {type(gm).__name__}, but should be a torch.fx.GraphModule")
    try:
        if any(n.op != "output" and "val" not in n.meta for n in gm.graph.nodes):
            # The run that records meta may write the copy's constants: the meta moves to a fresh copy.
            recorded, gm = attach_meta(snapshot(gm), clone_inputs(inputs)), snapshot(gm)
            for src, dst in zip(recorded.graph.nodes, gm.graph.nodes):
                dst.meta.update(src.meta)
        else:  # the graph must run on its own inputs before a pass is judged on it
            _call(_pristine(gm), clone_inputs(inputs))
    except Exception as exc:  # noqa: BLE001
        raise UsageError(f"the graph given to check() raised {type(exc).__name__} on its own inputs: "
                         f"{_first_line(exc)}") from None
    checker = Checker(put, properties=properties, ensure=ensure, preserve=preserve, timeout=timeout,
                      signed_zeros=signed_zeros, specials=specials, device=device, dynamic=symbolic is not None)
    if symbolic is not None:
        symbolic = as_shapes(symbolic)
    return checker.check(gm, inputs, symbolic, tuple(sizes or ()))



__all__ = ["Checker", "check", "resolve_properties"]
