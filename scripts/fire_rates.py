"""Fire rates of real torch graph passes: the share of generated graphs each pass changes.

A graph counts as *fired* when the pass changed it structurally (``conformance/changes.py``'s
``what_changed``: nodes added, removed or reordered, names ignored) and the change was more than
removing dead code; graphs where all it did was dead-code removal are counted apart, and so are
graphs on which the pass raised. The passes are ``tests/real_passes.py``'s ``REAL_PASSES`` (on
functional graphs; those in ``MUTATING`` on mutating graphs as well).

Modes (seed 0, 200 graphs, the same measuring code in both):

--before   the generator before issue 14 (run with ``PYTHONPATH=<worktree of f8f00fb>`` so that
           ``import strategies`` is the old one): the plain draws.
--after    the current generator: focus none (the plain draws) and focus auto (trigger discovery's
           ``Focus``, as ``verify(focus="auto")`` draws), measured as above; then, unless
           ``--no-verify``, ``verify(target, focus="auto", shrink=False, repro_dir=None)`` per pass
           for its verdict and its own count (``result.changed``; its search also steers towards
           graphs the pass changes, with ``hypothesis.target``).
--table BEFORE.json AFTER.json   the combined Markdown table of docs/fire-rates.md.
--compare OLD.json NEW.json      two --after runs: an older tree's (run this script from a worktree
           of it, with that tree on PYTHONPATH) against the current one; what fires now and did not.

Each pass runs on its own copy of each graph; the plain graphs are drawn once per graph kind in the
parent, the focused ones per pass, and passes are measured in ``--jobs`` forked processes.

    PYTHONPATH=/tmp/pre14 .venv/bin/python scripts/fire_rates.py --before --json /tmp/fire-before.json
    .venv/bin/python scripts/fire_rates.py --after --json /tmp/fire-after.json
    .venv/bin/python scripts/fire_rates.py --table /tmp/fire-before.json /tmp/fire-after.json
"""

from __future__ import annotations

import argparse
import copy
import importlib
import importlib.util
import inspect
import json
import multiprocessing
import os
import pathlib
import platform
import signal
import sys
import time
import traceback
import warnings

ROOT = pathlib.Path(__file__).resolve().parent.parent
PASS_TIMEOUT_S = 30  # per graph; a pass slower than this counts as raised


def _load_file(name: str, path: pathlib.Path):
    """Import a module by file path (under --before, ``tests`` and ``conformance`` on sys.path are
    the old tree's, which lacks these files)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


real_passes = _load_file("_fire_real_passes", ROOT / "tests" / "real_passes.py")
changes = _load_file("_fire_changes", ROOT / "conformance" / "changes.py")


# --- resolving and calling a pass ------------------------------------------------------------------


def resolve(target: str):
    module_name, attr = target.split(":")
    module = real_passes if module_name == "tests.real_passes" else importlib.import_module(module_name)
    obj = module
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def calling_form(fn) -> tuple:
    """``(form, callable)``: ``gm`` (fn(gm) -> gm | None | PassResult, and PassBase), ``graph``
    (fn(graph) -> None | bool | Graph), ``gm-varargs`` (fn(gm, *sample_args))."""
    import torch.fx as fx
    from torch.fx.passes.infra.pass_base import PassBase

    if isinstance(fn, type) and issubclass(fn, PassBase):
        fn = fn()
    if isinstance(fn, PassBase):
        return "gm (PassBase)", fn
    params = list(inspect.signature(fn).parameters.values())
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return "gm-varargs", fn
    first = params[0]
    ann = first.annotation
    ann = "" if ann is first.empty else (ann if isinstance(ann, str) else getattr(ann, "__qualname__", str(ann)))
    ann = ann.rsplit(".", 1)[-1].strip("'\"")
    if getattr(fn, "__qualname__", "").startswith("Graph.") or ann == "Graph" \
            or (ann == "" and first.name in ("graph", "g", "fx_g", "fx_graph")):
        return "graph", fn
    return "gm", fn


def snapshot(gm):
    """A copy of ``gm``: new graph and nodes (meta dicts copied, fake values shared), cloned constants."""
    import torch
    import torch.fx as fx

    graph = fx.Graph()
    graph._codegen = copy.deepcopy(gm.graph._codegen)
    env = {}
    for node in gm.graph.nodes:
        env[node] = new = graph.create_node(node.op, node.target, (), {}, node.name, node.type)
        new.meta = copy.copy(node.meta)
    for node, new in env.items():
        new.args, new.kwargs = fx.map_arg(node.args, env.__getitem__), fx.map_arg(node.kwargs, env.__getitem__)
    root = torch.nn.Module()
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            value = getattr(gm, node.target)
            if not hasattr(root, node.target):
                if isinstance(value, torch.Tensor):
                    root.register_buffer(node.target, value.detach().clone())
                else:
                    setattr(root, node.target, copy.deepcopy(value))
    return fx.GraphModule(root, graph)


def apply(form: str, fn, gm, inputs):
    """Run the pass on ``gm`` (a copy, modified) and return the resulting GraphModule."""
    import torch.fx as fx
    from torch.fx.passes.infra.pass_base import PassResult

    if form == "graph":
        ret = fn(gm.graph)
        if isinstance(ret, fx.Graph) and ret is not gm.graph:
            return fx.GraphModule(gm, ret)
        return gm
    ret = fn(gm, *inputs) if form == "gm-varargs" else fn(gm)
    if isinstance(ret, PassResult):
        ret = ret.graph_module
    if isinstance(ret, (tuple, list)) and ret and isinstance(ret[0], fx.GraphModule):
        ret = ret[0]
    if isinstance(ret, fx.GraphModule):
        return ret
    if ret is None or isinstance(ret, (bool, int)):
        return gm
    raise TypeError(f"the pass returned {type(ret).__qualname__}")


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout(f"took over {PASS_TIMEOUT_S} s")


def measure(form, fn, cases) -> dict:
    """Fire counts of one pass over ``cases``."""
    import torch

    out = {"examples": len(cases), "fired": 0, "dead_code_only": 0, "raised": 0, "unchanged": 0,
           "first_error": None, "seconds": 0.0}
    t0 = time.monotonic()
    signal.signal(signal.SIGALRM, _alarm)
    for case in cases:
        work = snapshot(case.gm)
        grad = torch.is_grad_enabled()
        signal.alarm(PASS_TIMEOUT_S)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                after = apply(form, fn, work, tuple(case.example_inputs))
        except (Exception, _Timeout) as exc:  # noqa: BLE001 - a raising pass is counted, not fatal
            out["raised"] += 1
            if out["first_error"] is None:
                out["first_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
            continue
        finally:
            signal.alarm(0)
            torch._C._set_grad_enabled(grad)
        n, dead_only = changes.what_changed(case.gm, after)
        if n == 0:
            out["unchanged"] += 1
        elif dead_only:
            out["dead_code_only"] += 1
        else:
            out["fired"] += 1
    out["seconds"] = round(time.monotonic() - t0, 2)
    return out


# --- drawing -----------------------------------------------------------------------------------------


def draw(n: int, seed: int, *, mutating: bool, focus=None) -> list:
    """``n`` GraphCases with the options verify() uses (special values, constants), Hypothesis seeded
    with ``seed``, generate phase only, no database; ``focus`` only for the current generator."""
    from hypothesis import HealthCheck, Phase, given, seed as hseed, settings

    import strategies

    opts = dict(mutations=mutating, special_values=True, constants=True)
    if focus is not None:
        opts["focus"] = focus
    cases = []

    @settings(max_examples=n, database=None, deadline=None, derandomize=False, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @hseed(seed)
    @given(strategies.graphs(**opts))
    def collect(case):
        cases.append(case)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        collect()
    return cases


def rows() -> list:
    """``(row name, pass name, graph kind)`` for every measurement."""
    out = [(name, name, "functional") for name in real_passes.REAL_PASSES]
    out += [(f"{name} (mutating)", name, "mutating") for name in real_passes.MUTATING]
    return out


# --- the two modes -----------------------------------------------------------------------------------


_PLAIN: dict = {}  # graph kind -> unfocused cases, drawn in the parent before forking
_ARGS = None


def _before_one(row):
    label, name, kind = row
    form, fn = calling_form(resolve(real_passes.REAL_PASSES[name]))
    return label, {"pass": name, "graphs": kind, "form": form, "before": measure(form, fn, _PLAIN[kind])}


def _after_one(row):
    label, name, kind = row
    target = real_passes.REAL_PASSES[name]
    from conformance import load_pass, verify
    from conformance.search.focus import resolve_focus

    form, fn = calling_form(resolve(target))
    entry = {"pass": name, "graphs": kind, "form": form, "target": target}
    try:
        entry["adapter_form"] = load_pass(target).form
    except Exception as exc:  # noqa: BLE001
        entry["adapter_form"] = f"{type(exc).__name__}: {exc}"
    entry["after_none"] = measure(form, fn, _PLAIN[kind])
    t0 = time.monotonic()
    focus, info = resolve_focus("auto", load_pass(target), mutations=kind == "mutating", timeout=10.0)
    entry["focus"] = info
    focused = draw(_ARGS.examples, _ARGS.seed, mutating=kind == "mutating", focus=focus) if focus else _PLAIN[kind]
    entry["draw_focused_s"] = round(time.monotonic() - t0, 2)
    entry["after_auto"] = measure(form, fn, focused)
    entry["after_auto"]["focused"] = focus is not None
    if not _ARGS.no_verify:
        t0 = time.monotonic()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = verify(target, graphs=kind, seed=_ARGS.seed, max_examples=_ARGS.examples, focus="auto",
                       repro_dir=None, shrink=False)
        entry["verify_auto"] = {
            "examples": r.examples, "changed": r.changed, "dead_code_only": r.changed_dead_code_only,
            "fired": r.changed - r.changed_dead_code_only, "ok": r.ok, "vacuous": r.vacuous,
            "seconds": round(time.monotonic() - t0, 2),
            "violations": [{"property": v.property, "message": v.message, "graph_before": v.graph_before,
                            "inputs": v.inputs, "example": v.example} for v in r.violations]}
    return label, entry


def _safe(fn, row):
    try:
        return fn(row)
    except Exception:  # noqa: BLE001 - one broken row must not lose the others
        return row[0], {"pass": row[1], "graphs": row[2], "error": traceback.format_exc(limit=4)}


def _run_rows(fn, todo, jobs):
    results = {}
    if jobs <= 1:
        for row in todo:
            label, entry = _safe(fn, row)
            results[label] = entry
            print(f"  {label}: done", file=sys.stderr, flush=True)
        return results
    ctx = multiprocessing.get_context("fork")
    # one thread in each worker: a forked child that enters an OpenMP parallel region of the
    # parent's team waits forever (docs/torch-facts.md section 7; seen here with --jobs 2)
    with ctx.Pool(jobs, maxtasksperchild=8, initializer=_one_thread) as pool:
        for label, entry in pool.imap_unordered(_call_safe(fn), todo):
            results[label] = entry
            print(f"  {label}: done", file=sys.stderr, flush=True)
    return results


def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)


class _call_safe:
    def __init__(self, fn):
        self.fn = fn

    def __call__(self, row):
        return _safe(self.fn, row)


def run(mode: str, args) -> dict:
    global _ARGS
    _ARGS = args
    import hypothesis
    import torch

    todo = [r for r in rows() if not args.passes or r[1] in args.passes]
    t0 = time.monotonic()
    for kind in sorted({r[2] for r in todo}):
        t = time.monotonic()
        _PLAIN[kind] = draw(args.examples, args.seed, mutating=kind == "mutating")
        print(f"drew {len(_PLAIN[kind])} {kind} graphs in {time.monotonic() - t:.1f} s", file=sys.stderr)
    results = _run_rows(_before_one if mode == "before" else _after_one, todo, args.jobs)
    ordered = {r[0]: results[r[0]] for r in todo}
    return {"mode": mode, "seed": args.seed, "tree": _tree(), "examples": args.examples, "torch": torch.__version__,
            "hypothesis": hypothesis.__version__,
            "strategies": str(pathlib.Path(sys.modules["strategies"].__file__).parent),
            "machine": f"{os.cpu_count()} cores, {_cpu_name()}, {torch.backends.cpu.get_cpu_capability()}",
            "python": platform.python_version(), "seconds": round(time.monotonic() - t0, 1), "rows": ordered}


def _tree() -> str:
    """The commit of the generator measured, and whether its tree had uncommitted changes."""
    import subprocess

    where = pathlib.Path(sys.modules["strategies"].__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "-C", str(where), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "--", "strategies", "conformance"],
                               capture_output=True, text=True, check=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        return str(where)
    dirty = [line[3:] for line in dirty if line.strip()]
    return f"{where} @ {head}" + (f" (uncommitted: {', '.join(dirty)})" if dirty else "")


def _cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


# --- tables ------------------------------------------------------------------------------------------


def cell(m: dict | None) -> str:
    if not m:
        return "-"
    text = f"{m['fired']}/{m['examples']}"
    extra = []
    if m.get("dead_code_only"):
        extra.append(f"+{m['dead_code_only']} dead-code only")
    if m.get("raised"):
        extra.append(f"{m['raised']} raised")
    return text + (f" ({', '.join(extra)})" if extra else "")


def verify_cell(v: dict | None) -> str:
    if not v:
        return "-"
    text = f"{v['fired']}/{v['examples']}"
    if v.get("dead_code_only"):
        text += f" (+{v['dead_code_only']} dead-code only)"
    return text + ("" if v["ok"] else f", NOT OK: {', '.join(x['property'] for x in v['violations'])}")


def discovery(entry: dict) -> str:
    if "focus" not in entry:
        return ""
    info = entry["focus"] or {}
    ops = [o["op"].removeprefix("aten.") for o in info.get("ops", [])]
    hows = sorted({o["how"] for o in info.get("ops", [])})
    text = ", ".join(ops[:6]) + (f" +{len(ops) - 6}" if len(ops) > 6 else "") if ops else "nothing"
    if ops:
        text += f" ({'/'.join(hows)})"
    missing = [m.removeprefix("aten.") for m in info.get("not_in_catalog", [])]
    if missing:
        text += f"; not in catalog: {', '.join(missing[:4])}" + (f" +{len(missing) - 4}" if len(missing) > 4 else "")
    return text


def notes(before: dict | None, after: dict) -> str:
    out = []
    for key, label in (("before", "before"), ("after_none", "none"), ("after_auto", "auto")):
        src = before if key == "before" else after
        m = (src or {}).get(key)
        if m and m.get("first_error"):
            out.append(f"raises ({label}): {m['first_error'][:120]}")
    v = after.get("verify_auto")
    if v and not v["ok"]:
        out.append("verify: " + "; ".join(f"{x['property']}: {x['message'].splitlines()[0][:140]}"
                                          for x in v["violations"]))
    return "<br>".join(dict.fromkeys(out)).replace("|", "\\|")


def form_comments() -> dict:
    """The calling-form comment after each REAL_PASSES entry in tests/real_passes.py."""
    import re

    text = (ROOT / "tests" / "real_passes.py").read_text()
    return {m.group(1): m.group(2).strip() for m in re.finditer(r'^\s+"([^"]+)": [^#\n]+#\s*(.+)$', text, re.M)}


def table(before: dict | None, after: dict | None) -> str:
    labels = list((after or before)["rows"])
    head = ("| pass | calling form | before (old generator): fired/N | after, focus none | after, focus auto "
            "| verify(focus=auto): fired/examples | what discovery found | notes |")
    lines = [head, "|" + "---|" * 8]
    comments = form_comments()
    for label in labels:
        b = (before or {}).get("rows", {}).get(label, {})
        a = (after or {}).get("rows", {}).get(label, {})
        name = a.get("pass") or b.get("pass") or label
        form = comments.get(name) or a.get("adapter_form") or a.get("form") or b.get("form", "?")
        if "error" in a or "error" in b:
            lines.append(f"| {label} | {form} | | | | | | measurement failed: "
                         f"{(a.get('error') or b.get('error')).splitlines()[-1][:150]} |")
            continue
        lines.append(f"| {label} | {form} | {cell(b.get('before'))} | {cell(a.get('after_none'))} | "
                     f"{cell(a.get('after_auto'))} | {verify_cell(a.get('verify_auto'))} | {discovery(a)} | "
                     f"{notes(b, a)} |")
    return "\n".join(lines)


def compare_table(old: dict, new: dict) -> str:
    """Two --after runs (an older generator's tree against the current one): what now fires."""
    head = ("| pass | old: focus none | old: focus auto | new: focus none | new: focus auto "
            "| new: verify(focus=auto) | fires now, not before |")
    lines = [head, "|" + "---|" * 7]
    for label in new["rows"]:
        o, n = old.get("rows", {}).get(label, {}), new["rows"][label]
        if "error" in n:
            lines.append(f"| {label} | | | | | | measurement failed: {n['error'].splitlines()[-1][:150]} |")
            continue
        fired_before = max((o.get(k) or {}).get("fired", 0) for k in ("after_none", "after_auto"))
        fired_now = max((n.get(k) or {}).get("fired", 0) for k in ("after_none", "after_auto"))
        new_mark = "yes" if fired_now and not fired_before else ""
        lines.append(f"| {label} | {cell(o.get('after_none'))} | {cell(o.get('after_auto'))} | "
                     f"{cell(n.get('after_none'))} | {cell(n.get('after_auto'))} | "
                     f"{verify_cell(n.get('verify_auto'))} | {new_mark} |")
    return "\n".join(lines)


def single_table(result: dict) -> str:
    return table(result if result["mode"] == "before" else None, result if result["mode"] == "after" else None)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--before", action="store_true", help="old generator (PYTHONPATH=<f8f00fb worktree>)")
    mode.add_argument("--after", action="store_true", help="current generator, focus none and auto, and verify()")
    mode.add_argument("--table", nargs=2, metavar=("BEFORE_JSON", "AFTER_JSON"), help="combined Markdown table")
    mode.add_argument("--compare", nargs=2, metavar=("OLD_AFTER_JSON", "NEW_AFTER_JSON"),
                      help="two --after runs (an older tree's, e.g. before issue 15, and the current one)")
    p.add_argument("--json", help="write the measurements here")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--examples", type=int, default=200)
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    p.add_argument("--passes", nargs="*", help="only these REAL_PASSES names")
    p.add_argument("--no-verify", action="store_true", help="--after without the verify() column")
    args = p.parse_args(argv)
    if args.table or args.compare:
        first, second = (json.loads(pathlib.Path(x).read_text()) for x in (args.table or args.compare))
        print(table(first, second) if args.table else compare_table(first, second))
        return 0
    os.environ.setdefault("FX_CONFORMANCE_CACHE", str(ROOT / ".fx-conformance-cache"))
    if args.after and str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import strategies

    if args.before == hasattr(strategies, "Focus"):  # Focus came with issue 14
        p.error(f"strategies is {pathlib.Path(strategies.__file__).parent}: --before needs the pre-issue-14 "
                f"generator (PYTHONPATH=<worktree of f8f00fb>), --after the current one")
    result = run("before" if args.before else "after", args)
    if args.json:
        pathlib.Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(args.json).write_text(json.dumps(result, indent=1))
    print(single_table(result))
    print(f"\n{result['mode']}: {len(result['rows'])} rows in {result['seconds']} s "
          f"(generator: {result['tree']}; {result['machine']}; torch {result['torch']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
