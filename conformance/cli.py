"""``fx-conformance``: the command line. Exit codes: 0 clean, 1 a check failed, 2 usage error (``prove``: 3 unknown;
``verify``: 3 a fault of the harness, no verdict on the pass; 4 vacuous, the pass rewrote no graph: it changed none,
or only removed dead code where that is not its job, ``--dce-pass``)."""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys
import time

from .profiles import PROFILES, profile_name

SUITE_DIR = pathlib.Path(__file__).resolve().parent / "suite"


def _run(args) -> int:
    if args.db_readonly and not args.db:
        print("fx-conformance run: error: --db-readonly needs --db PATH or redis://host:port/N: there is no "
              "database to read", file=sys.stderr)
        return 2
    # A fresh interpreter, so pytest sees (and assertion-rewrites) the suite before anything imports it.
    argv = [sys.executable, "-m", "pytest", str(SUITE_DIR), "-p", "no:cacheprovider",
            f"--hypothesis-profile={profile_name(args.profile)}", "--fx-summary", "-q",
            *(["--fx-db", args.db] if args.db else []), *(["--fx-db-readonly"] if args.db_readonly else []),
            *_after_dashes(args.pytest_args)]
    code = subprocess.call(argv)
    return 0 if code == 0 else 1 if code == 1 else 2


def _campaign(args) -> int:
    """Exit 0: every run ok (or only accepted findings); 1: a violation, a crash or an error in some run;
    4: no violation, but some run never changed a graph; 2: a bad campaign file or option."""
    from . import campaign as C
    from ._errors import UsageError
    from .search.database import open_database

    try:
        name, head, runs = C.load_campaign(args.file)
        db = args.db if args.db is not None else head.get("db")
        open_database(db, args.db_readonly)  # a database that cannot be opened: said once, here
        workers = args.workers or int(head.get("workers", 0)) or (os.cpu_count() or 1)
        if workers < 1:
            raise UsageError(f"workers={workers}, but should be a positive integer")
        retries = C.RETRIES if args.retries is None else args.retries
        if retries < 0:
            raise UsageError(f"--retries {args.retries}, but should be 0 or more")
        cluster = args.cluster if args.cluster is not None else head.get("cluster")
        if cluster is not None:
            C.ray_module()  # without the extra, or an address where nothing answers: said once, here
            C.check_address(cluster)
    except UsageError as exc:
        print(f"fx-conformance campaign: error: {exc}", file=sys.stderr)
        return 2
    workers = min(workers, len(runs))
    where = f"Ray cluster {cluster}" if cluster is not None else f"{workers} workers"
    print(f"fx-conformance campaign {name}: {len(runs)} runs on {where}"
          + (f", database {db}" if db else ""), flush=True)
    t0 = time.monotonic()

    def done(record, finished, total):
        first = (record.get("violations") or [{}])[0].get("message") or record.get("error") or ""
        expected = " (its row says it never fires)" if record.get("never_fires") and record["verdict"] == "vacuous" else ""
        print(f"  [{finished}/{total}] {record['id']}: {record['verdict']}{expected}"
              + (f", changed {record['changed']} of {record['examples']} graphs" if "changed" in record else "")
              + (f": {first}" if first else ""), flush=True)

    try:
        records = C.run_campaign(runs, workers=workers, db=db, db_readonly=args.db_readonly, on_done=done,
                                 cluster=cluster, retries=retries)
    except UsageError as exc:  # a cluster that cannot be joined
        print(f"fx-conformance campaign: error: {exc}", file=sys.stderr)
        return 2
    doc = C.report(name, records, workers=workers, seconds=time.monotonic() - t0, db=db, cluster=cluster)
    C.write_reports(doc, args.json, args.markdown, args.html)
    print(f"{', '.join(f'{n} {v}' for v, n in sorted(doc['verdicts'].items()))}; "
          f"{len(doc['findings'])} distinct finding{'s' if len(doc['findings']) != 1 else ''}; "
          f"{doc['duration_s']} s; report {args.json}")
    verdicts = doc["verdicts"]
    if verdicts.get("violations") or verdicts.get("crashed") or verdicts.get("error"):
        return 1
    unexpected = [r for r in records if r["verdict"] == "vacuous" and not r.get("never_fires")]
    return VACUOUS_EXIT if unexpected else 0


def _after_dashes(extra: list) -> list:
    """``fx-conformance run -- -k cse``: argparse keeps the ``--`` that lets ``-k`` through."""
    return extra[1:] if extra[:1] == ["--"] else extra


VACUOUS_EXIT = 4  # like pytest's 5 for "no tests ran": nothing was verified


# verify: the harness failed (a bug of ours, or a worker that cannot start), no verdict; or torch crashed
# the generator while drawing (the verdict on the pass stands; the crash is a recorded torch finding)
HARNESS_FAULT_EXIT = 3


def _verify(args) -> int:
    from . import HarnessError, UsageError, verify
    from ._console import ConsoleReporter
    from .adapters import parse_pass_args

    _freeze_heap()
    try:
        result = verify(args.target, max_examples=args.max_examples, seed=args.seed, graphs=args.graphs,
                        special_values=not args.no_special_values, constants=not args.no_constants,
                        ensure=args.ensure or (), preserve=args.preserve or (),
                        properties=args.properties, signature=args.signature,
                        settings_factory=args.settings_factory, pass_kwargs=parse_pass_args(args.pass_arg),
                        context=args.context, device=args.device, timeout=args.timeout,
                        isolate=args.isolate, json=args.json, junit=args.junit, markdown=args.markdown,
                        repro_dir=args.repro_dir, workers=args.workers, signed_zeros=args.signed_zeros,
                        specials=args.specials, shrink=not args.no_shrink, focus=args.focus, seed_graphs=args.seed_graphs,
                        sizes=args.sizes, ir=args.ir, requires_grad=args.requires_grad, dynamic=args.dynamic,
                        ops=args.ops, hops=args.hops, db=args.db, db_readonly=args.db_readonly, dce_pass=args.dce_pass,
                        near_misses=args.near_misses,
                        reporter=ConsoleReporter(verbose=args.verbose))
    except UsageError as exc:
        print(f"fx-conformance verify: error: {exc}", file=sys.stderr)
        return 2
    except HarnessError as exc:
        print(f"fx-conformance verify: harness fault: {first_line(exc)}", file=sys.stderr)
        return HARNESS_FAULT_EXIT
    if result.violations:
        return 1
    if result.interrupted:
        return 130
    if result.generator_crashes:  # the verdict stands, but the run was not clean: torch crashed under us
        print(f"fx-conformance verify: torch crashed the generator {len(result.generator_crashes)} time(s) while "
              f"drawing graphs (recorded above and in the report; not the pass's doing)", file=sys.stderr)
        return HARNESS_FAULT_EXIT
    return VACUOUS_EXIT if result.vacuous and not args.allow_vacuous else 0


def first_line(exc) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _freeze_heap() -> None:
    """Move what the imports built (torch's modules, op tables: most of the heap) out of the
    garbage collector's reach: a full collection walks every tracked object, and a verify run draws,
    copies and discards thousands of graphs. Measured (2-core AMD EPYC): a 200-example verify of the
    identity pass took 3.7 s instead of 4.2 s (docs/search-measurements.md)."""
    import gc

    gc.collect()
    gc.freeze()


_PROVE_EXIT = {"proved": 0, "refuted": 1, "unknown": 3}


def _prove(args) -> int:
    import json

    from . import UsageError
    from .symbolic import prove_equal

    try:
        result = prove_equal(args.lhs, args.rhs, assumptions=args.assume or (), timeout_ms=args.timeout_ms)
    except UsageError as exc:
        print(f"fx-conformance prove: error: {exc}", file=sys.stderr)
        return 2
    claim = f"{args.lhs} == {args.rhs}" + (f" assuming {' and '.join(args.assume)}" if args.assume else "")
    print(f"{result.verdict}: {claim} ({result.time_ms:.1f} ms)")
    record = {"schema_version": 1, "verdict": result.verdict, "lhs": args.lhs, "rhs": args.rhs,
              "assumptions": list(args.assume or ()), "timeout_ms": args.timeout_ms, "time_ms": result.time_ms}
    if result.verdict == "refuted":
        print("  counterexample: " + ", ".join(f"{k}={v}" for k, v in result.counterexample.items()))
        print(f"  lhs = {result.lhs_value}\n  rhs = {result.rhs_value}")
        record.update(counterexample=result.counterexample, lhs_value=str(result.lhs_value),
                      rhs_value=str(result.rhs_value))
    elif result.verdict == "unknown":
        print(f"  {result.reason}")
        record["reason"] = result.reason
    if args.json:
        path = pathlib.Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record, indent=2) + "\n")
    return _PROVE_EXIT[result.verdict]


def _add_prove(sub) -> None:
    p = sub.add_parser("prove", help="prove a symbolic rewrite (z3) or show a counterexample",
                       description="Prove LHS == RHS for all integers (free names are integer symbols; FloorDiv, "
                                   "CeilDiv, CleanDiv, ModularIndexing, PythonMod, Mod, CMod, floor, ceiling, Abs, "
                                   "Min, Max in scope, never simplified). Exit 0: proved; 1: refuted (a checked "
                                   "counterexample); 3: unknown; 2: usage error.")
    p.add_argument("lhs")
    p.add_argument("rhs")
    p.add_argument("--assume", action="append", metavar="EXPR", help="a condition the symbols satisfy (repeatable)")
    p.add_argument("--timeout-ms", type=_positive_int, default=10_000, help="z3 time limit (default 10000)")
    p.add_argument("--json", default=None, metavar="PATH", help="write the verdict as JSON")
    p.set_defaults(func=_prove)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return value


def _add_verify(sub) -> None:
    from ._result import PROPERTIES, SPECIALS
    from ._signatures import SIGNATURES

    v = sub.add_parser("verify", help="verify a graph pass on generated graphs",
                       description="Verify an FX graph pass on generated ATen graphs. Exit 0: no counterexample; "
                                   "1: a property was violated; 2: usage error; 4: vacuous (the pass changed none of "
                                   "the graphs, or only removed dead code in them, so nothing was verified).")
    v.add_argument("target", help="the pass: pkg.module:attr or path/to/file.py:attr")
    v.add_argument("--max-examples", type=_positive_int, default=200, help="graphs to generate (default 200)")
    v.add_argument("--seed", type=int, default=None, help="random seed (default: random, printed at the end)")
    v.add_argument("--graphs", choices=("functional", "mutating"), default="functional",
                   help="functional (default) or mutating: adds in-place ops, input and view mutation, grad regions")
    v.add_argument("--ir", choices=("aten", "post-grad", "export", "core-aten", "export-module", "dynamo", "pre-dispatch", "torch"), default="aten",
                   help="the form graphs are drawn in: aten (default), or as a pipeline stage hands them to its "
                        "passes: post-grad (AOTAutograd inference: functional, input mutations a copy_ epilogue), "
                        "export/core-aten (torch.export + run_decompositions; the signature in "
                        "gm.meta['graph_signature']), export-module (ExportedProgram.module(), as Torch-TensorRT's "
                        "post_lowering gets it: state as get_attr, user-less copy_ write-backs, _guards_fn), dynamo "
                        "(the graph a torch.compile backend gets: typed placeholders, example_value), pre-dispatch "
                        "(make_fx(pre_dispatch=True))")
    v.add_argument("--requires-grad", action="store_true",
                   help="about half the floating inputs a graph does not write require grad, and floating "
                        "constants are nn.Parameters: outputs' requires_grad and grad_fn must then match "
                        "(aten and pre-dispatch IRs)")
    v.add_argument("--dynamic", action="store_true",
                   help="graphs over symbolic sizes (make_fx symbolic traces: SymInt sizes, sym_size nodes, size "
                        "arithmetic feeding view/expand/full/arange/slice, guards): the result must hold at every "
                        "size the original does (no new guards, shape arithmetic proved by z3, the same outputs at "
                        "other sizes, 0 and 1 among them where the guards allow)")
    v.add_argument("--no-special-values", action="store_true", help="no NaN/inf/-0.0/extreme input values")
    v.add_argument("--sizes", choices=("small", "large"), default="small",
                   help="large: some tensors of 4096-65536 elements and matmul dims over 64, past the size "
                        "thresholds real rewrites check (default small: fast, and what failures shrink to)")
    v.add_argument("--hops", metavar="cond,invoke_subgraph", default=None,
                   help="draw higher-order ops too: torch.cond with drawn branches, invoke_subgraph (one drawn "
                        "block called more than once), in aten and post-grad graphs; wrap_with_set_grad_enabled, "
                        "wrap_with_autocast (grad and autocast regions) in pre-dispatch graphs, and in aten "
                        "graphs as make_fx traces them")
    v.add_argument("--db", metavar="PATH|redis://host:port/N", default=None,
                   help="an example database shared between runs and machines (several comma-separated): its "
                        "failures of this search are replayed first, and each one found is saved there")
    v.add_argument("--db-readonly", action="store_true",
                   help="replay the database's failures, write nothing (CI replaying what a team found)")
    v.add_argument("--no-constants", action="store_true",
                   help="no get_attr tensor constants (for passes that fake-propagate real buffers badly)")
    v.add_argument("--specials", choices=SPECIALS, default="strict",
                   help="strict (default): NaN/inf exactly where the original has them; relaxed: where the "
                        "original overflows or loses a value the fp64 reference has, a result near the "
                        "reference passes too")
    v.add_argument("--signed-zeros", action="store_true", help="-0.0 and 0.0 differ in outputs and inputs")
    v.add_argument("--ensure", action="append", metavar="NAME",
                   help="a contract the result must satisfy whatever the original did (repeatable)")
    v.add_argument("--preserve", action="append", metavar="NAME",
                   help="a contract the pass must not break: judged against the original, only on graphs the pass "
                        "changed (repeatable)")
    v.add_argument("--properties", default=None, help=f"comma-separated subset of {','.join(PROPERTIES)} "
                                                      f"(default validity,values,mutations,aliasing)")
    v.add_argument("--signature", choices=sorted(SIGNATURES), default=None, help="the pass's calling form "
                                                                                "(default: detected)")
    v.add_argument("--settings-factory", default=None, metavar="PKG.MOD:FN",
                   help="zero-argument callable making the settings for fn(gm, settings) passes")
    v.add_argument("--pass-arg", action="append", metavar="NAME=VALUE",
                   help="an extra keyword argument for every call of the pass, e.g. is_inference=True (a Python "
                        "literal, else text; repeatable)")
    v.add_argument("--context", default=None, metavar="PKG.MOD:FN",
                   help="a function returning a context manager the pass runs inside (config.patch, "
                        "V.set_fake_mode); it may take gm and fake_mode (the graph's) by name")
    v.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    v.add_argument("--timeout", type=_positive_float, default=10.0, help="seconds per example (default 10)")
    v.add_argument("--isolate", action="store_true",
                   help="run every example in another process (survives segfaults; automatic after a crash on "
                        "the CPU): a forked child, or on CUDA a worker process, which imports the pass by its path")
    v.add_argument("--json", default=None, metavar="PATH", help="JSON report, rewritten as examples finish")
    v.add_argument("--junit", default=None, metavar="PATH", help="JUnit XML report")
    v.add_argument("--markdown", default=None, metavar="PATH", help="Markdown summary")
    v.add_argument("--repro-dir", default="reports/repro", metavar="DIR",
                   help="where counterexample scripts go (default reports/repro/)")
    v.add_argument("--no-shrink", action="store_true",
                   help="report counterexamples as first found, not shrunk (faster; bigger repro scripts)")
    v.add_argument("--focus", default="auto", metavar="auto|none|OPS",
                   help="draw more of what the pass acts on: auto (found from its code and by probing it on "
                        "one-op graphs; default), none, or ops such as aten.log,aten.exp")
    v.add_argument("--ops", default=None, metavar="OPS",
                   help="what graphs are drawn of: catalog ops, and your own (mylib::rms_norm, "
                        "mylib.rms_norm.default, or a namespace, mylib), comma-separated; your ops are drawn "
                        "from their schemas and op_rules among the catalog's (the pass's module, imported "
                        "first, registers them)")
    v.add_argument("--seed-graphs", default=None, metavar="PKG.MOD:FN",
                   help="example programs the pass exists for: a list of (program, example_args) pairs, or a "
                        "function returning one; traced with make_fx and embedded, with fresh values, in the "
                        "focused graphs")
    v.add_argument("--allow-vacuous", action="store_true",
                   help="exit 0, not 4, when the pass changed none of the graphs (or only removed dead code)")
    v.add_argument("--dce-pass", action="store_true",
                   help="removing dead code is the pass's job: a graph it only cleaned up counts as one it acted on "
                        "(by default a run whose every change was dead-code removal is vacuous: exit 4)")
    v.add_argument("--near-misses", type=int, default=2, metavar="K",
                   help="after each graph the pass rewrote, check up to K variants with one argument of a node the "
                        "rewrite removed moved (a dim to another, an integer by one, 1 to 1.0, an alpha given): "
                        "where a matcher's forgotten check lives (aten graphs; default 2, 0 turns them off)")
    v.add_argument("-n", "--workers", type=_positive_int, default=1, help="parallel search processes")
    v.add_argument("-v", "--verbose", action="store_true",
                   help="list each kind of warning torch raised while the run drew and ran graphs (they are "
                        "counted, never printed; a warning the pass raises is always shown with its example)")
    v.set_defaults(func=_verify)


def _report(args) -> int:
    from . import UsageError
    from .nightly import write_report

    try:
        out, regressions, notes = write_report(args.benchmarks, args.conformance, out_dir=args.out,
                                               history_path=args.history, gate=args.gate, static_path=args.static,
                                               campaign_path=args.campaign)
    except UsageError as exc:
        print(f"fx-conformance report: {exc}", file=sys.stderr)
        return 2
    for note in notes:
        print(note)
    for r in regressions:
        print(f"REGRESSION {r['key']}: {r['old_ms']:.4g} ms -> {r['new_ms']:.4g} ms ({r['change']:+.1%})")
    print(f"report: {out / 'report.md'} ({len(regressions)} regression{'s' if len(regressions) != 1 else ''})")
    return 1 if regressions and not args.no_fail else 0


def _add_report(sub) -> None:
    r = sub.add_parser("report", help="render a nightly report from benchmark JSON; compare with the last run")
    r.add_argument("--benchmarks", required=True, metavar="PATH", help="pytest-benchmark JSON (--benchmark-json)")
    r.add_argument("--conformance", default=None, metavar="PATH", help="conformance counts (--fx-summary-json)")
    r.add_argument("--static", default=None, metavar="PATH",
                   help="static kernel figures (python -m benchmarks.static_kernels): the compile-only section")
    r.add_argument("--campaign", default=None, metavar="PATH",
                   help="a campaign's merged report (fx-conformance campaign --json): its runs and findings as a "
                        "section, with a plot")
    r.add_argument("--out", default=None, metavar="DIR", help="report directory (default reports/nightly/<UTC date>)")
    r.add_argument("--history", default="reports/history.jsonl", metavar="PATH", help="history file to compare and append to")
    r.add_argument("--gate", default="median:5%", help="regression gate, stat:pct%% (default median:5%%)")
    r.add_argument("--no-fail", action="store_true", help="exit 0 even when a row regressed")
    r.set_defaults(func=_report)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fx-conformance",
                                     description="Property-based conformance checks for PyTorch FX graph passes.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the conformance suite over the reference implementations")
    run.add_argument("--profile", choices=sorted({*PROFILES, *(n.removeprefix("fx-") for n in PROFILES)}),
                     default="dev", help="Hypothesis profile: dev (quick), ci (small, derandomized), nightly "
                                         "(large); fx-dev, fx-ci, fx-nightly are the same")
    run.add_argument("--db", metavar="PATH|redis://host:port/N", default=None,
                     help="an example database shared between runs and machines (pytest --fx-db): every search "
                          "replays its saved failures first and saves the ones it finds")
    run.add_argument("--db-readonly", action="store_true", help="with --db: replay, write nothing (CI)")
    run.add_argument("pytest_args", nargs=argparse.REMAINDER, help="extra arguments passed to pytest")
    run.set_defaults(func=_run)
    c = sub.add_parser("campaign", help="run a campaign: many searches (passes x options x seeds) merged into one "
                                        "report")
    c.add_argument("file", help="the campaign: a TOML file of [[job]] tables (see conformance/campaign.py)")
    c.add_argument("-n", "--workers", type=int, default=None,
                   help="processes (default: the file's workers, else the CPU count)")
    c.add_argument("--db", metavar="PATH|redis://host:port/N", default=None,
                   help="the example database every run shares (default: the file's db, else none)")
    c.add_argument("--db-readonly", action="store_true", help="replay the database's failures, write nothing")
    c.add_argument("--cluster", metavar="local|auto|ADDRESS", default=None,
                   help="run each job as a Ray task (the cluster extra; default: the file's cluster, else a local "
                        "process pool): local starts Ray on this machine (-n CPUs of it), auto joins the one "
                        "running here, ray://head:10001 a remote cluster; CUDA jobs ask for a GPU")
    c.add_argument("--retries", type=int, default=None,
                   help="with --cluster: times a run is tried again when its worker or node died (default 2)")
    c.add_argument("--json", default="reports/campaign.json", help="the merged report (default %(default)s)")
    c.add_argument("--markdown", default=None, help="the merged report as Markdown")
    c.add_argument("--html", default=None, help="the merged report as HTML")
    c.set_defaults(func=_campaign)
    _add_verify(sub)
    _add_prove(sub)
    _add_report(sub)
    return parser


def main(argv=None) -> int:
    # pkg.mod:attr targets are found in the current directory, as `python -m` finds them (the console
    # script's sys.path starts at its own bin directory)
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed one usage line
        return 2 if exc.code else 0
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
