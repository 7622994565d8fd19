"""``verify()``: drive Hypothesis over generated graphs, shrink each violated property to a minimal
graph, write repro scripts and reports, stream progress.

Each violated property gets its own exception type, so Hypothesis shrinks each one separately and
the result holds one minimal counterexample per property. A pass that hangs is not shrunk for
long: after ``MAX_TIMEOUTS`` timed-out examples the search stops with the smallest one so far.

Here: ``verify()`` (setting the run up: the checker, isolation, discovery's focus; then the result
and the reports), ``_run`` (one search, or ``workers`` merged, searched again without a call that
crashed the generator) and ``_search`` (the Hypothesis test itself: drawing, checking each example
in this process, a forked child or a worker, recording what it found). What a search found and what
is made of it (the result's counts, repro scripts) is ``findings.py``; how progress reaches the
user and the streamed JSON, ``progress.py``; the options' checks, ``options.py``.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import inspect
import random
import re
import time

import torch
from hypothesis import HealthCheck, Phase, Verbosity, given, reject, seed as hseed, settings

from strategies import Focus, custom_health, custom_health_since, graphs

from .. import report as _report
from .._errors import HarnessError, OriginalFailed, UsageError
from .._result import EXECUTION, PropertyCount, Verdict, VerifyResult, Violation
from .._warning_log import quietly, recording
from ..adapters import load_pass
from ..dynamic import DYNAMIC
from ..invariants import first_line
from ..oracle import describe
from ..checker import Checker
from ..deadlines import can_time_out
from .findings import _fill, _Found, _order, _size, _write_repros, searched_text
from .fire import Run, generated_examples, steer, tally
from .focus import resolve_dynamic_focus, resolve_focus, resolve_seed_graphs, with_user_ops
from .database import open_database, other_devices, saved, search_key
from .options import resolve_ops, resolve_options
from .progress import NullReporter, _Events, _Stream
from ._spawn import Worker
from .isolate import ChildDied, can_isolate, fork_is_safe, probing_in, run_forked
from .near_miss import near_misses
from .warm import warm_for_drivers
from .workers import run_drivers

SEARCH_PHASES = (Phase.generate,)  # no Phase.target: see fire.py
MAX_TIMEOUTS = 3
_GENERATOR_CRASHES = 4  # torch killed the generator this often: the run gives up (a harness fault)


class PropertyViolated(Exception):
    """Raised inside the Hypothesis test for a failing example (one subclass per property)."""

    def __init__(self, verdict: Verdict, case):
        super().__init__(verdict.violations[0].message)
        self.verdict, self.case = verdict, case


class _StopSearch(BaseException):
    """Ends the Hypothesis run at once (too many timeouts); not an Exception, so it is not shrunk."""


class _HarnessFault(_StopSearch):
    """The harness itself failed while checking an example (not the pass, not the graph): the run
    ends at once, unshrunk, and ``verify`` raises ``HarnessError`` with this message."""


def harness_fault(example: int, what: str) -> _HarnessFault:
    return _HarnessFault(f"the harness failed while checking example {example} ({what}): a bug in "
                         f"fx-conformance, not a verdict on the pass")


_FAILURE_TYPES: dict = {}


def _failure_type(prop: str) -> type:
    if prop not in _FAILURE_TYPES:
        name = "Violated_" + re.sub(r"\W", "_", prop)
        _FAILURE_TYPES[prop] = type(name, (PropertyViolated,), {})
    return _FAILURE_TYPES[prop]


def verify(pass_, *, max_examples: int = 200, seed: int | None = None, graphs: str = "functional",
           special_values: bool = True, constants: bool = True, ensure=(), preserve=(), properties=None,
           signature: str | None = None, settings_factory=None, pass_kwargs=None, context=None, device: str = "auto", timeout: float | None = 10.0, isolate: bool = False,
           json: str | None = None, junit: str | None = None, markdown: str | None = None,
           repro_dir: str | None = "reports/repro", workers: int = 1, signed_zeros: bool = False,
           specials: str = "strict", shrink: bool = True, focus="auto", seed_graphs=None, sizes: str = "small",
           ir: str = "aten", requires_grad: bool = False, dynamic: bool = False, ops=None, hops=None, known=None,
           db: str | None = None, db_readonly: bool = False, dce_pass: bool = False, near_misses: int = 2,
           reporter=None,
           _start_method: str | None = None) -> VerifyResult:
    """Verify ``pass_`` on generated graphs; ``VerifyResult`` (``ok``, ``examples``, ``violations``).

    Args:
        pass_: a callable, PassBase, PassManager, or import path ``"pkg.mod:attr"`` (see adapters).
        graphs: "functional" (pure ops and views) or "mutating" (adds in-place ops, input and
            view mutation, metadata mutation, grad-mode regions).
        special_values: inputs may hold NaN, +-inf, -0.0, subnormals and extreme values.
        specials: the special-values policy: "strict" (NaN/inf exactly where the original has them)
            or "relaxed" (where the original overflowed or lost a value that the fp64 reference
            has, a result within tolerance of the reference passes).
        constants: graphs may read tensor constants through ``get_attr`` (module buffers).
        signature, settings_factory, pass_kwargs, context: how the pass is called (``load_pass``):
            its form, the settings factory, extra keyword arguments (literals, so the repro script
            can write them), a context-manager factory (or import path) it runs inside.
        ensure: contract names (``conformance.CONTRACTS``) the result must satisfy, whatever the
            original did (the pass establishes them: a repair pass, functionalization).
        preserve: contract names judged against the original: only violations the pass introduced
            count, and a graph it did not change is never reported. properties: names or "a,b".
        timeout: seconds per example; isolate: run each example in another process (survives
            segfaults and os._exit): a forked child on the CPU, a worker process started without
            fork on CUDA (the pass must then be importable: an import path or a module-level
            object); workers: independent searches in parallel processes.
        json, junit, markdown: report paths (JSON is rewritten as examples finish).
        repro_dir: where minimal counterexamples are written as scripts (None: not written).
        shrink: shrink each counterexample to a minimal graph (False: report it as first found,
            which is faster where only the verdict matters).
        focus: "auto" (find the ops and constants the pass acts on, and draw those far more often),
            "none" (the plain generator), or ops ("aten.log,aten.exp" or a list).
        ops: what graphs are drawn of (``graphs(ops=)``): catalog ops, and your own ops
            (``torch.ops.mylib.rms_norm.default``, ``"mylib::rms_norm"``, a namespace ``"mylib"``;
            comma-separated in a string), drawn from their schemas and ``op_rule``s among the catalog's
            ops. With focus "auto", your ops the pass's code names are focus ops, and the pairs of them
            whose own graphs make the pass act are chained.
        sizes: "small" (tensors of at most 2048 elements: fast, and what failures shrink to) or
            "large" (a third of leaves hold 4096-65536 elements, a third of matmul dims are 65-256:
            past the size thresholds of real rewrites; the fp64 reference keeps long sums' rounding
            from being flagged).
        ir: the form the graphs are drawn in (``strategies.IRS``): "aten" (default), or as a pipeline
            stage hands them to its passes: "post-grad", "export" (alias "core-aten"), "pre-dispatch".
            Outside "aten", module buffers are leading inputs; export graphs carry their signature
            in ``gm.meta["graph_signature"]``. The verdict names the IR.
        requires_grad: about half the floating inputs a graph does not write require grad, and its
            floating constants are ``nn.Parameter``s, so outputs carry autograd state; ``values``
            then compares each output's ``requires_grad`` and ``grad_fn`` presence ("aten" and
            "pre-dispatch" IRs only).
        dynamic: graphs over symbolic sizes (``graphs(dynamic=True)``): the ``dynamic`` property is
            checked too, so a result must hold at every size the original does (no new guards, its
            shape arithmetic proved equal by z3, the same outputs at other sizes: ``dynamic.py``).
            Floating, functional "aten" graphs; focus and seed graphs do not apply.
        hops: higher-order ops drawn among the steps (``strategies.HOPS``, a list or "cond,invoke_subgraph"):
            ``torch.cond`` with drawn branches, ``invoke_subgraph`` (one drawn block called more than
            once), their subgraphs ``get_attr`` submodules ("aten" and "post-grad" graphs).
        db: an example database shared between runs and machines (``database.py``): a directory,
            ``redis://host:port/N``, or several comma-separated; the failures it holds for this search
            (this pass, these options, this device type) are replayed first, and each one found is
            saved there. ``db_readonly``: replayed, never written (CI).
        known: ``fn(violation) -> bool``, violations already known (a finding being fixed upstream, a
            documented limit): each is recorded once in ``result.known`` and the search goes on, so
            they do not hide the ones not known; ``ok`` is about the others only. ``fn(violation,
            example)`` also gets the example the violation was met on (``.gm``, ``.example_inputs``),
            for a test that replays it: match the bug, not its symptom.
        seed_graphs: example programs the pass exists for, embedded (with fresh values, in drawn
            context) in the focused graphs: ``"pkg.mod:fn"`` or the object, which is (a function of no
            arguments returning) a list of ``(program, example_args)`` pairs or ``SeedGraph``s.

        dce_pass: removing dead code is the pass's job. By default a graph the pass only cleaned up
            (its change equals ``Graph.eliminate_dead_code``'s) is not one its rewrite acted on, and a
            run whose every change was that is vacuous; with ``dce_pass`` it counts.

        near_misses: after each graph the pass rewrote, check up to this many variants of it with one
            scalar argument of a node the rewrite removed moved (a dim to another, an integer by one, 1 to
            1.0, an alpha given): where a matcher's forgotten check lives (``near_miss.py``). Aten
            graphs of concrete sizes; 2 by default, 0 checks none.

    The result says how many graphs the pass changed (``changed``) and how many of those it only
    cleaned up (``changed_dead_code_only``; ``rewrites`` the others); ``vacuous`` is True when it
    rewrote none (changed none, with ``dce_pass``), so nothing was verified.

    >>> verify(lambda gm: gm, max_examples=5, repro_dir=None).ok
    True
    """
    opts = resolve_options(locals())
    put = load_pass(pass_, signature=signature, settings_factory=settings_factory, pass_kwargs=pass_kwargs,
                    context=context)
    opts["ops"] = resolve_ops(ops)  # after the pass's module, which may register them, is imported
    checker = Checker(put, properties=properties, ensure=ensure, preserve=preserve, timeout=timeout,
                      signed_zeros=signed_zeros, specials=specials, device=opts["device"], dynamic=dynamic)
    reporter = reporter or NullReporter()
    if isolate and not can_isolate():
        raise UsageError("--isolate needs os.fork (Linux)")
    asked = isolate
    if not isolate and timeout and not can_time_out():
        isolate = can_isolate()  # SIGALRM only works in the main thread: enforce the timeout by a child
    if not isolate and opts["device"] == "cuda" and can_isolate():
        # On CUDA the search runs in this process (no forked driver to die in its place): examples go
        # to a worker, so a bad kernel, a device-side assert or a SIGFPE ends an example, not the run.
        isolate = True
    worker = None
    # A process that initialised CUDA (or whose examples run on CUDA) must not fork: examples go to
    # a worker started without fork (_spawn.py). _start_method forces one ("forkserver", "spawn").
    if isolate and (_start_method is not None or opts["device"] != "cpu" or not fork_is_safe()):
        try:
            worker = Worker(put, checker, method=_start_method or "forkserver")
        except UsageError as exc:
            if asked:  # a pass that cannot reach a worker: one line saying what to do
                raise
            isolate = False  # isolation was not asked for: the pass runs here
            if opts["device"] == "cuda":
                reporter.note(f"examples run in this process, so a crash on CUDA ends the run ({exc})")
    seed = random.getrandbits(32) if seed is None else int(seed)
    prior = _Found()  # what the run met outside the search it reports: discovery, an earlier focused search
    with recording(prior.warnings):
        seeds = quietly("discovery", resolve_seed_graphs, seed_graphs)
    named = focus not in ("auto", "none", None)
    if opts["ir"] == "torch" and (named or seeds):  # focus and seeds are ATen ops and programs
        raise UsageError("focus ops and seed graphs shape ATen graphs; ir=torch draws nn.Modules (use focus none)")
    if dynamic and named:  # the symbolic program's steps that make these ops (discovery probes static graphs)
        focus_obj, focus_info = resolve_dynamic_focus(focus)
    else:
        if opts["ir"] == "torch" or dynamic:
            focus = "none"
        # discovery probes in the worker where this process may not fork
        with probing_in(worker), recording(prior.warnings):
            focus_obj, focus_info = quietly("discovery", resolve_focus, focus, put, mutations=graphs == "mutating",
                                            timeout=timeout)
        if focus == "auto" and opts["ops"]:
            with probing_in(worker), recording(prior.warnings):
                focus_obj, focus_info = quietly("discovery", with_user_ops, focus_obj, focus_info, opts["ops"], put,
                                                ir=opts["ir"], mutations=graphs == "mutating", device=opts["device"],
                                                timeout=timeout)
    if seeds:
        focus_obj = dataclasses.replace(focus_obj or Focus(), seeds=seeds)
        focus_info["seeds"] = [repr(s) for s in seeds]
    result = VerifyResult(target=put.name, options=opts, seed=seed, isolated=isolate, focus=focus_info,
                          started=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    reporter.start(put.name, max_examples, opts)
    reporter.focus(focus_info)
    if opts["db"] is not None:
        result.database = _database_info(put, opts)
        for device, n in result.database["other_devices"].items():
            reporter.note(f"the database holds {n} failing example{'s' if n > 1 else ''} of this search found on "
                          f"{device}, not replayed on {opts['device']}: run it there")
    t0 = time.monotonic()
    stream = _Stream(result, json, prior)

    def search(focus):
        run = functools.partial(_run, checker, put, opts, focus, seed, max_examples, workers, repro_dir, reporter,
                                stream, known=known, worker=worker,
                                searched=functools.partial(searched_text, focus_info if focus is not None else None))
        found, crashed = run(result.isolated)
        if crashed and not result.isolated:
            reporter.note(f"the pass crashed the interpreter ({crashed}); running again with every example isolated")
            result.isolated = True
            found, crashed = run(True)
        if crashed:
            raise HarnessError(f"a search process died ({crashed}) although examples were isolated")
        return found

    try:
        found = search(focus_obj)
        if _focus_made_it_vacuous(found, focus_info, seeds, dce_pass):
            # Discovery weighs its focus on a small sample (triggers._PAYOFF_EXAMPLES): a focus it kept
            # can still leave the pass idle for a whole run (the reference constant folding, focused on
            # the _unsafe_view it names, changed 0 of 200 graphs at one seed where plain graphs change
            # 3-11%). A vacuous run is no verdict: the same budget goes to plain graphs, and the
            # report says so.
            changed, dead_code_only = tally(r for r in found.runs if r is not None)
            focus_info["unfocused_after"] = {"examples": found.examples, "changed": changed,
                                             "dead_code_only": dead_code_only}
            what = "changed none" if not changed else f"only removed dead code in {changed}"
            reporter.note(f"the focused search {what} of {found.examples} graphs: searching plain graphs")
            prior.warnings.absorb(found.warnings.kinds())
            prior.pass_warnings.merge(found.pass_warnings)
            found = search(None)
    finally:
        if worker is not None:
            worker.close()
    result.interrupted = found.interrupted
    _fill(result, found, prior)
    checked = found.checked()
    result.properties = {p: PropertyCount(checked.get(p, 0), p in found.best) for p in checker.checked}
    result.violations = [found.best[p][1] for p in sorted(found.best, key=_order(checker.checked))]
    result.duration_s = round(time.monotonic() - t0, 3)
    stream.write()
    if junit:
        _report.write_junit(result, junit)
    if markdown:
        _report.write_markdown(result, markdown)
    reporter.finish(result)
    return result


def _run(checker, put, opts, focus, seed, max_examples, workers, repro_dir, reporter, stream, isolate, known=None,
         worker=None, searched=None):
    """One search (or ``workers`` merged searches): ``(found, crash description or None)``.
    ``searched(seed)``: how a search with that seed draws, for the repro scripts."""

    def search(i, budget, make_events):
        found = _Found()
        try:
            _search(checker, put, opts, focus, seed + i, budget, isolate, make_events(found), found, known, worker)
        except KeyboardInterrupt:
            found.interrupted = True
        _write_repros(found, put, opts, repro_dir, searched(seed + i) if searched else "")
        return found

    # No forked driver where fork is unsafe (CUDA initialised) or the examples run on CUDA: the search
    # runs here, so a pass that kills the interpreter ends the run unless examples are isolated in a
    # worker (``worker``). A spawned driver would need the whole search (strategy, focus, events) to travel.
    if worker is not None or not fork_is_safe() or opts["device"] != "cpu":
        return search(0, max_examples, lambda f: _Events(f, reporter, stream)), None
    total = _Found()

    def on_example(ok):
        total.runs.append(None)  # a placeholder: the drivers send their runs when they finish
        reporter.example(ok, total.examples)
        stream.update(total)

    def on_found(v):
        if v.property not in total.best:
            total.best[v.property] = ((0,), v, None)
            reporter.found(v)
            stream.update(total, force=True)

    def on_warned(warning):  # a driver's first of a kind: shown once, whichever driver met it first
        if total.pass_warnings.add(warning["example"], [warning]):
            reporter.warned(warning)

    budgets = [max_examples // workers + (1 if i < max_examples % workers else 0) for i in range(workers)]
    budgets = [b for b in budgets if b > 0]
    quietly("generator", warm_for_drivers, "aten" if opts["dynamic"] or opts["ir"] == "torch" else opts["ir"])
    avoid, generator_crashes = [], []
    while True:
        founds, crashed, interrupted = run_drivers(len(budgets), budgets, search, on_example, on_found, avoid,
                                                   on_warned=on_warned)
        if crashed is None or crashed.drawing is None or interrupted:
            break
        # torch died under the generator's own eager call: not the pass's doing. Recorded as a torch
        # finding; the search runs again (same seed: the same draws) without that call, and without
        # the op once it killed the process twice.
        op = crashed.drawing.split("(", 1)[0]
        generator_crashes.append({"call": crashed.drawing, "death": str(crashed), "op": op})
        twice = sum(c["op"] == op for c in generator_crashes) > 1
        avoid.append(f"op {op}" if twice else crashed.drawing)
        reporter.note(f"torch crashed the generator ({crashed}) running {crashed.drawing} while drawing a graph: "
                      f"recorded as a torch finding, not the pass's; searching again without "
                      f"{'that op' if twice else 'that call'}")
        if len(generator_crashes) >= _GENERATOR_CRASHES:
            raise HarnessError(f"torch crashed the generator {len(generator_crashes)} times while drawing graphs "
                               f"(last: {crashed.drawing}, {crashed}); no verdict")
        total.runs.clear()
        total.best.clear()
    merged = _Found()
    merged.generator_crashes = generator_crashes
    merged.interrupted = interrupted or any(f.interrupted for f in founds)
    for f in founds:
        merged.runs += f.runs
        merged.shrink_runs += f.shrink_runs
        merged.unrunnable += f.unrunnable
        merged.add_known(list(f.known.values()))
        merged.warnings.absorb(f.warnings.kinds())
        merged.pass_warnings.merge(f.pass_warnings)
        for name, health in f.user_ops.items():
            merged.user_ops[name] = merged.user_ops[name].merged(health) if name in merged.user_ops else health
        if f.dynamic:
            merged.add_dynamic(f.dynamic)
        for p, (size, v, _) in f.best.items():
            if p not in merged.best or size < merged.best[p][0]:
                merged.best[p] = (size, v, None)
    return merged, crashed


def _called(node):
    """What a node calls: a higher-order op's wrapped op (``auto_functionalized_v2(mylib.rms_norm, ...)``
    calls ``mylib.rms_norm``), else its target."""
    if node.op == "call_function" and isinstance(node.target, torch._ops.HigherOrderOperator) and node.args \
            and isinstance(node.args[0], torch._ops.OpOverload):
        return node.args[0]
    return node.target


def _focus_made_it_vacuous(found: _Found, focus_info: dict, seeds, dce_pass: bool = False) -> bool:
    """Whether a search that discovery focused ran whole and the pass acted on none of its graphs: it
    changed none, or only removed dead code (unless that is its job: ``dce_pass``). A focus the user
    named, or seed graphs, are searched as given."""
    changed, dead_code_only = tally(r for r in found.runs if r is not None)
    return (focus_info.get("mode") == "auto" and bool(focus_info.get("ops") or focus_info.get("edges")) and not seeds
            and not found.best and not found.interrupted and found.examples > 0
            and (changed if dce_pass else changed - dead_code_only) == 0)


def _search(checker: Checker, put, opts, focus, seed_value, max_examples, isolate, events, found, known=None,
            worker=None):
    user_ops_before = custom_health() if opts["ops"] else {}  # what this search draws of the user's ops
    if opts["dynamic"]:
        strategy = graphs(dynamic=True, focus=focus)
    else:
        # drawn on the device the search runs on, so every graph runs there (torch-IR graphs are drawn
        # on the CPU: check() moves them)
        strategy = graphs(mutations=opts["graphs"] == "mutating", special_values=opts["special_values"],
                          ir=opts["ir"], constants=opts["constants"], focus=focus, sizes=opts["sizes"], random=True,
                          ops=opts["ops"], hops=opts["hops"],
                          requires_grad=opts["requires_grad"], device="cpu" if opts["ir"] == "torch" else opts["device"])

    known_takes_example = known is not None and _takes_example(known)  # read once, not per violation
    near = opts["near_misses"] if opts["ir"] == "aten" and not opts["dynamic"] else 0
    focus_names = focus.op_names() if focus is not None else frozenset()

    def run_one(case) -> Verdict:
        example = len(found.runs) + 1
        if not isolate:
            try:
                return checker.check(case.gm, case.example_inputs, case.symbolic)
            except (OriginalFailed, UsageError):
                raise
            except Exception as exc:  # noqa: BLE001 - check() catches the pass's own: this is ours
                raise harness_fault(example, f"{type(exc).__name__}: {first_line(exc)}") from exc
        grace = None if checker.timeout is None else checker.timeout + 5.0
        try:
            if worker is not None:
                return worker.check(case.gm, case.example_inputs, case.symbolic, grace)
            return run_forked(lambda: checker.check(case.gm, case.example_inputs, case.symbolic), grace, phased=True)
        except ChildDied as exc:
            if exc.error_type == OriginalFailed.__name__:  # the graph did not run, in the child
                raise OriginalFailed(exc.error) from None
            if exc.error_type == UsageError.__name__:
                raise UsageError(exc.error) from None
            if exc.raised:  # check() returned no verdict and raised: the harness, in the child
                raise harness_fault(example, f"in the isolated process: {exc.error_type}: {exc.error}") from None
            if exc.harness:  # the harness's own work overran its budget in the child
                raise harness_fault(example, exc.reason) from None
            return Verdict(checked=checker.checked, graph_after="",
                           violations=[Violation(EXECUTION, exc.reason, kind="hung" if exc.timed_out else "crashed")])

    # the shared example database (verify(db=)): its examples of this search replayed first, each
    # failure found saved under the search's key (database.py)
    db = open_database(opts.get("db"), opts.get("db_readonly", False))

    @settings(max_examples=max_examples, deadline=None, database=db, derandomize=False,
              suppress_health_check=list(HealthCheck),
              phases=((Phase.reuse,) if db is not None else ()) + SEARCH_PHASES + ((Phase.shrink,) if opts["shrink"] else ()),
              report_multiple_bugs=True, verbosity=Verbosity.quiet, print_blob=False)
    @hseed(seed_value)
    @given(strategy)
    def search(case):
        try:
            verdict = run_one(case)
        except OriginalFailed as exc:  # the graph, not the pass: another graph is drawn
            found.unrunnable.append(str(exc))
            reject()
        found.warnings.absorb(verdict.warnings)
        warned = found.pass_warnings.add(len(found.runs) + 1, verdict.pass_warnings)
        timed_out = any(v.property == EXECUTION and v.kind == "hung" for v in verdict.violations)
        executed = not any(v.property == EXECUTION for v in verdict.violations)
        held = bool(focus_names) and any(str(t) in focus_names for t in map(_called, case.gm.graph.nodes))
        found.runs.append(Run(verdict.changed, bool(verdict.dead_code_only), verdict.checked if executed else (),
                              verdict.no_reference, held))
        steer(verdict)
        if near and verdict.ok and verdict.changed and not verdict.dead_code_only and case.symbolic is None:
            verdict, case = _near_misses(run_one, verdict, case, near)
        if verdict.dynamic:
            found.add_dynamic(verdict.dynamic)
        for v in verdict.violations:
            if v.property == DYNAMIC and verdict.dynamic:
                v.sizes = verdict.dynamic["failed_at"][:1]
            v.graph_before = case.gm.code.strip()
            v.graph_after = verdict.graph_after
            v.inputs = "\n".join(f"input[{i}]: {describe(t)}" for i, t in enumerate(case.example_inputs))
        if known is not None:  # accepted: recorded, and the search goes on
            accepted = [known(v, case) if known_takes_example else known(v) for v in verdict.violations]
            found.add_known([v for v, ok in zip(verdict.violations, accepted) if ok])
            verdict.violations = [v for v, ok in zip(verdict.violations, accepted) if not ok]
        new = found.add(verdict, case, _size(case))
        events.example(verdict, new, warned)
        if timed_out:
            found.timeouts += 1
            if found.timeouts >= MAX_TIMEOUTS:
                raise _StopSearch()
        if not verdict.ok:
            raise _failure_type(verdict.violations[0].property)(verdict, case)

    if db is not None:
        search._hypothesis_internal_database_key = search_key(_db_target(put), opts, torch.device(opts["device"]).type)

    with generated_examples() as generated, recording(found.warnings):
        try:
            quietly("generator", search)  # torch's warnings while drawing: counted, never shown
        except _HarnessFault as exc:
            raise HarnessError(str(exc)) from exc.__cause__
        except _StopSearch:
            pass
        except PropertyViolated as exc:
            _record_final(found, exc)
        except BaseExceptionGroup as group:
            rest = group.subgroup(lambda e: not isinstance(e, (PropertyViolated, BaseExceptionGroup)))
            if rest is not None:
                raise rest
            for exc in _leaves(group):
                _record_final(found, exc)
        finally:
            found.settle(generated)
            if opts["ops"]:
                found.user_ops = custom_health_since(user_ops_before)
    return found


def _near_misses(run_one, verdict, case, limit: int) -> tuple:
    """``(verdict, case)``: the first of ``case``'s near misses (``near_miss.py``) the pass fails and that
    variant, else the graph's own."""
    for variant in near_misses(case, verdict.graph_after, limit):
        try:
            other = run_one(variant)
        except OriginalFailed:  # the variant did not run: no graph
            continue
        if not other.ok:
            return other, variant
    return verdict, case


def _database_info(put, opts: dict) -> dict:
    db = open_database(opts["db"], opts["db_readonly"])
    target, device = _db_target(put), torch.device(opts["device"]).type
    return {"db": opts["db"], "readonly": opts["db_readonly"], "saved": saved(db, search_key(target, opts, device)),
            "other_devices": other_devices(db, target, opts, device)}


def _db_target(put) -> str:
    """What a database key names the pass by: its import path, or its name (a lambda has no other)."""
    return getattr(put, "reference", None) or put.name


def _takes_example(known) -> bool:
    """Whether a ``known=`` predicate takes the example too (two positional parameters)."""
    try:
        params = inspect.signature(known).parameters.values()
    except (TypeError, ValueError):
        return False
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params) >= 2 or \
        any(p.kind == p.VAR_POSITIONAL for p in params)


def _leaves(group):
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            yield from _leaves(exc)
        else:
            yield exc


def _record_final(found: _Found, exc: PropertyViolated) -> None:
    """Hypothesis' final replay of a minimal example: it wins for the properties it violates (with
    the first violation of each, as ``_Found.add`` keeps)."""
    done = set()
    for v in exc.verdict.violations:
        if v.property in done:
            continue
        done.add(v.property)
        old = found.best.get(v.property)
        v.example = old[1].example if old else v.example
        found.best[v.property] = (_size(exc.case), v, exc.case)


