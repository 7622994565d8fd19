"""Campaigns: many searches (passes x options x seeds) run as one, merged into one report (issue 37).

``fx-conformance campaign CAMPAIGN.toml`` reads a list of jobs::

    [campaign]
    name = "nightly"
    workers = 2                      # processes (default: the CPU count, at most the runs)
    db = ".fx-examples"              # optional: the example database every run shares (verify --db)
    cluster = "auto"                 # optional: each run a Ray task (--cluster; see run_on_ray)

    [[job]]                          # a pass, with verify()'s options
    target = "my_passes.py:canonicalize_sub"
    seeds = [0, 1, 2]
    examples = 200
    device = "cpu"
    options = { ir = "post-grad", graphs = "mutating" }

    [[job]]                          # the suite's torch-pass rows, each exactly as its row says
    suite = "torch-passes"           # (conformance/suite/test_torch_passes.py), findings accepted
    rows = ["post_grad.remove_noop_ops"]   # optional: these rows only

A suite is a module named by import path (``torch-passes`` is short for
``conformance.suite.test_torch_passes``) with ``campaign_rows()`` (its rows' names) and
``campaign_run(row, examples, seed, **options)`` (``(VerifyResult, {"ir", "never_fires"})``): the
harness loads it as it loads a pass, and imports nothing of the suite itself.

Each (job, row, seed) is one run: ``verify()`` in a worker process of a local pool (forked where no
CUDA context exists yet, else spawned), all sharing the database where one is named. A run whose
process dies (a pass that segfaults) ends that run only: it is reported ``crashed`` and the
campaign goes on in a fresh pool. With ``--cluster`` (``local``, ``auto`` or a Ray address) each run
is a Ray task instead (``run_on_ray``: one CPU, a GPU for a CUDA run, run again where its worker or
node died). Progress is one line per finished run. The merged report (JSON,
and Markdown or HTML where asked) has each run's verdict (``ok``, ``violations``, ``vacuous``: it
never changed a graph, ``known``: only findings the row accepts, ``crashed``, ``error``), its fire
counts and first lines, and the findings deduplicated by minimal graph: one entry per distinct
graph a violation was shown on, naming every run that met it.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime
import hashlib
import json
import multiprocessing
import os
import pathlib
import re
import sys
import tempfile
import time
import tomllib
from concurrent.futures.process import BrokenProcessPool

from ._errors import UsageError
from ._page import render_html

SUITES = {"torch-passes": "conformance.suite.test_torch_passes"}  # short names of suites (module docstring)
RETRIES = 2  # a Ray task whose worker or node died runs again, at most this many times
_JOB_KEYS = {"target", "suite", "rows", "seeds", "examples", "device", "options", "name"}


@dataclasses.dataclass(frozen=True)
class Run:
    """One search of a campaign: ``target`` (an import path) with ``options``, or ``row`` of ``suite``."""

    id: str
    seed: int
    examples: int
    target: str | None = None
    suite: str | None = None
    row: str | None = None
    device: str = "auto"
    options: tuple = ()  # sorted (name, value) pairs of verify()'s options


def load_campaign(path) -> tuple:
    """``(name, settings, runs)`` of the campaign file at ``path``; UsageError naming what is wrong."""
    path = pathlib.Path(path)
    try:
        doc = tomllib.loads(path.read_text())
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not TOML: {exc}") from None
    head = doc.get("campaign", {})
    jobs = doc.get("job", [])
    if not jobs:
        raise UsageError(f"{path}: no [[job]] tables: a campaign is a list of jobs")
    runs = []
    for i, job in enumerate(jobs, 1):
        where = f"{path}: job {i}"
        unknown = set(job) - _JOB_KEYS
        if unknown:
            raise UsageError(f"{where}: unknown key {sorted(unknown)[0]!r}; a job has {', '.join(sorted(_JOB_KEYS))}")
        if ("target" in job) == ("suite" in job):
            raise UsageError(f"{where}: give target = \"pkg.mod:pass\" or suite = \"torch-passes\", one of them")
        seeds = job.get("seeds", [0])
        if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) for s in seeds):
            raise UsageError(f"{where}: seeds = {seeds!r}, but should be a list of integers")
        examples = job.get("examples", 100)
        if not isinstance(examples, int) or examples < 1:
            raise UsageError(f"{where}: examples = {examples!r}, but should be a positive integer")
        options = job.get("options", {})
        if not isinstance(options, dict):
            raise UsageError(f"{where}: options should be a table of verify()'s options")
        device = job.get("device", "auto")
        if "suite" in job:
            rows = _suite_rows(job["suite"], job.get("rows"), where)
            runs += [Run(f"{row}@{seed}", seed, examples, suite=job["suite"], row=row, device=device,
                         options=tuple(sorted(options.items()))) for row in rows for seed in seeds]
        else:
            name = job.get("name", job["target"])
            runs += [Run(f"{name}@{seed}", seed, examples, target=job["target"], device=device,
                         options=tuple(sorted(options.items()))) for seed in seeds]
    ids = [r.id for r in runs]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise UsageError(f"{path}: the run {dup!r} is listed twice (give one of its jobs a name = \"...\")")
    return head.get("name", path.stem), head, runs


def _suite(suite: str, where: str = ""):
    """The suite module ``suite`` names (module docstring)."""
    import importlib

    try:
        module = importlib.import_module(SUITES.get(suite, suite))
    except ImportError:
        module = None
    if not (hasattr(module, "campaign_rows") and hasattr(module, "campaign_run")):
        raise UsageError(f"{where}: suite = {suite!r} is no suite (a module with campaign_rows() and campaign_run()); "
                         f"the suites are {', '.join(SUITES)}")
    return module


def _suite_rows(suite: str, rows, where: str) -> list:
    names = list(_suite(suite, where).campaign_rows())
    if rows is None:
        return names
    unknown = [r for r in rows if r not in names]
    if unknown:
        raise UsageError(f"{where}: {unknown[0]!r} is not a row of {suite}")
    return list(rows)


def run_one(run: Run, db: str | None = None, db_readonly: bool = False) -> dict:
    """One run's record (in a worker process): its verdict, counts, first lines and findings. What the
    run writes to stderr meanwhile (torch's logs: a pass's fake propagation logs every kernel that
    refuses; from the run's forked searches too) is kept in the record (``stderr_lines``, the last
    ``stderr_tail``), not printed: interleaved from every worker it would bury the campaign's lines."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as capture:
        os.dup2(capture.fileno(), 2)
        try:
            record = _run_one(run, db, db_readonly)
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        capture.seek(0)
        lines = capture.read().decode(errors="replace").splitlines()
    record["stderr_lines"], record["stderr_tail"] = len(lines), lines[-20:]
    return record


def _run_one(run: Run, db: str | None, db_readonly: bool) -> dict:
    t0 = time.monotonic()
    record = {"id": run.id, "target": run.target or run.row, "suite": run.suite, "seed": run.seed,
              "examples_asked": run.examples}
    try:
        options = dict(run.options)
        if db is not None:
            options.update(db=db, db_readonly=db_readonly)
        if run.suite is not None:
            result, info = _suite(run.suite).campaign_run(run.row, run.examples, run.seed, **options)
            record.update(info)
        else:
            from . import verify

            result = verify(run.target, seed=run.seed, max_examples=run.examples, device=run.device,
                            repro_dir=None, **options)
            record["ir"] = result.options.get("ir")
    except UsageError as exc:
        record.update(verdict="error", error=str(exc), seconds=round(time.monotonic() - t0, 2))
        return record
    except Exception as exc:  # noqa: BLE001 - a run that fails is that run's verdict, not the campaign's end
        record.update(verdict="error", error=f"{type(exc).__name__}: {exc}", seconds=round(time.monotonic() - t0, 2))
        return record
    record.update(outcome(result), seconds=round(time.monotonic() - t0, 2))
    return record


def outcome(result) -> dict:
    """A run's verdict and counts from its ``VerifyResult``: each violation with its first line, its
    graph and the graph's key; each accepted finding by its first line."""
    violations = [{"property": v.property, "message": v.headline, "graph": v.graph_before,
                   "graph_key": graph_key(v.graph_before)} for v in result.violations]
    verdict = "violations" if violations else "vacuous" if result.acted == 0 else \
        "known" if result.known else "ok"
    return dict(verdict=verdict, examples=result.examples, changed=result.changed,
                changed_dead_code_only=result.changed_dead_code_only, rewrites=result.rewrites, violations=violations,
                known=[v.headline for v in result.known])


def graph_key(code: str) -> str:
    r"""A minimal graph's identity: its code (``gm.code``) with the names it binds (the forward's
    parameters, each assigned name) numbered in order, so two runs that met one graph under other node
    names give one key.

    >>> graph_key("def forward(self, x):\n    sin = torch.sin(x);  x = None\n    return (sin,)") == \
    ...     graph_key("def forward(self, arg0_1):\n    sin_1 = torch.sin(arg0_1);  arg0_1 = None\n    return (sin_1,)")
    True
    """
    text = code.strip()
    bound = []
    head = re.search(r"def forward\(self,?\s*([^)]*)\)", text)
    if head:
        bound += [p.strip().split(":")[0].split("=")[0].strip() for p in head.group(1).split(",") if p.strip()]
    bound += re.findall(r"^\s*([A-Za-z_]\w*) = ", text, flags=re.M)
    names = {}
    for name in bound:
        names.setdefault(name, f"v{len(names)}")
    if names:
        text = re.sub(r"(?<![.\w])(" + "|".join(map(re.escape, sorted(names, key=len, reverse=True))) + r")\b",
                      lambda m: names[m.group(1)], text)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_campaign(runs: list, *, workers: int = 0, db: str | None = None, db_readonly: bool = False,
                 on_done=None, start_method: str | None = None, cluster: str | None = None,
                 retries: int = RETRIES) -> list:
    """Every run's record, in the campaign's order. ``on_done(record, finished, total)`` is called as
    each finishes. A run whose process died is ``crashed``; the others go on in a fresh pool. Workers
    are forked where that is safe (no CUDA context here: they inherit what this process imported),
    else spawned; ``start_method`` says which. With ``cluster`` each run is a Ray task instead
    (``run_on_ray``)."""
    if cluster is not None:
        return run_on_ray(runs, cluster, db=db, db_readonly=db_readonly, on_done=on_done, retries=retries,
                          num_cpus=workers or None)
    from .search.isolate import fork_is_safe, in_forked_child

    start_method = start_method or ("fork" if fork_is_safe() else "spawn")
    total = len(runs)
    workers = max(1, min(workers or os.cpu_count() or 1, total))
    records: dict = {}
    pending = list(runs)
    suspects: list = []  # runs in flight when a pool broke: each is then run on its own
    while pending or suspects:
        solo = bool(suspects)
        batch, width = (suspects[:1], 1) if solo else (pending, workers)
        if solo:
            suspects = suspects[1:]
        else:
            pending = []
        ctx = multiprocessing.get_context(start_method)
        # a forked worker first does what every forked child of the harness does: one ATen thread (a
        # parent's OpenMP team is not copied by fork, and a child entering a parallel region would wait
        # for it forever: seen here, a campaign under pytest-xdist hung in its first eager call)
        init = in_forked_child if start_method == "fork" else None
        with concurrent.futures.ProcessPoolExecutor(max_workers=width, mp_context=ctx, initializer=init) as pool:
            futures = {pool.submit(run_one, run, db, db_readonly): run for run in batch}
            for future in concurrent.futures.as_completed(futures):
                run = futures[future]
                try:
                    record = future.result()
                except BrokenProcessPool:
                    if solo:  # on its own, its process died: this run's doing
                        record = _lost(run, "crashed",
                                       "its worker process died (a crash of the pass, or of torch under it)")
                    else:
                        suspects.append(run)
                        continue
                records[run.id] = record
                if on_done is not None:
                    on_done(record, len(records), total)
    return [records[r.id] for r in runs]


def ray_module():
    """Ray, or UsageError saying what to install (``--cluster`` without the ``cluster`` extra)."""
    try:
        import ray
    except ImportError:
        raise UsageError("--cluster runs each job as a Ray task, and Ray is not installed: "
                         "pip install 'fx-conformance[cluster]'") from None
    return ray


def wants_gpu(run: Run) -> bool:
    """Whether a run asks Ray for a GPU: a run on ``cuda`` (``auto`` takes what its worker sees, which on
    a task without a GPU is the CPU: Ray hides the devices a task did not ask for)."""
    return str(run.device).startswith("cuda")


def run_on_ray(runs: list, cluster: str, *, db: str | None = None, db_readonly: bool = False, on_done=None,
               retries: int = RETRIES, num_cpus: int | None = None) -> list:
    """``run_campaign`` with each run a Ray task (``run_one`` in a Ray worker): one CPU each,
    ``num_gpus=1`` for a CUDA run, run again up to ``retries`` times where its worker or its node died
    (a run that raised is a record, never retried), ``crashed`` when the last try died too.

    ``cluster``: ``local`` starts a Ray instance on this machine (``num_cpus`` of it; default all) for
    the campaign and stops it after; ``auto`` joins the one running here (``ray start``); an address
    (``ray://head:10001``, ``head:6379``) joins that cluster. A Ray already initialised in this
    process (``ray.init()`` by the caller) is used as it is, and left running. Workers import the
    passes by name: on a cluster of several machines each must be able to (an installed package, or a
    shared file system), and the database they share is a Redis one (``--db redis://...``); a
    directory is each machine's own."""
    ray = ray_module()
    started = not ray.is_initialized()
    if started:
        options = dict(include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        if cluster == "local":
            ray.init(num_cpus=num_cpus, **options)
        else:
            check_address(cluster)
            try:
                ray.init(address=cluster, **options)
            except Exception as exc:  # noqa: BLE001 - Ray's many ways of not finding a cluster: one line
                why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise UsageError(f"--cluster {cluster}: cannot join a Ray cluster there ({why})") from None
    try:
        task = ray.remote(run_one)
        records: dict = {}
        gpus = ray.cluster_resources().get("GPU", 0)
        refs = {}
        for run in runs:
            if wants_gpu(run) and not gpus:  # a task no node can take waits for ever
                records[run.id] = _lost(run, "error", f"device {run.device}, and the Ray cluster has no GPU")
                if on_done is not None:
                    on_done(records[run.id], len(records), len(runs))
                continue
            ref = task.options(num_cpus=1, num_gpus=1 if wants_gpu(run) else 0, max_retries=retries,
                               retry_exceptions=False, name=run.id).remote(run, db, db_readonly)
            refs[ref] = run
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                run = refs[ref]
                try:
                    record = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:  # run_one keeps Exceptions: a SystemExit, say
                    record = _lost(run, "error", f"{type(exc.cause).__name__}: {exc.cause}")
                except ray.exceptions.RayError as exc:  # its worker or its node died, on every try
                    record = _lost(run, "crashed", f"its Ray worker died on each of {retries + 1} tries "
                                                   f"({type(exc).__name__})")
                records[run.id] = record
                if on_done is not None:
                    on_done(record, len(records), len(runs))
    finally:
        if started:
            ray.shutdown()
    return [records[r.id] for r in runs]


def check_address(cluster: str) -> None:
    """UsageError at once where nothing listens at a ``host:port`` address (``ray://host:port`` too):
    Ray itself retries one for minutes. ``auto`` and addresses without a port are Ray's to find."""
    import socket

    host, sep, port = cluster.removeprefix("ray://").rpartition(":")
    if cluster == "auto" or not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as exc:
        raise UsageError(f"--cluster {cluster}: nothing answers there ({exc.strerror or exc}); start Ray there "
                         f"(ray start --head) or give its address") from None


def _lost(run: Run, verdict: str, error: str) -> dict:
    """The record of a run that left no record of its own."""
    return {"id": run.id, "target": run.target or run.row, "suite": run.suite, "seed": run.seed,
            "verdict": verdict, "error": error}


def findings(records: list) -> list:
    """The violations of every run, one entry per distinct minimal graph, naming the runs that met it."""
    merged: dict = {}
    for rec in records:
        for v in rec.get("violations", ()):
            entry = merged.setdefault(v["graph_key"], {"graph_key": v["graph_key"], "graph": v["graph"],
                                                       "properties": [], "messages": [], "runs": []})
            if v["property"] not in entry["properties"]:
                entry["properties"].append(v["property"])
            if v["message"] not in entry["messages"]:
                entry["messages"].append(v["message"])
            if rec["id"] not in entry["runs"]:
                entry["runs"].append(rec["id"])
    return list(merged.values())


def report(name: str, records: list, *, workers: int, seconds: float, db: str | None, cluster: str | None = None) -> dict:
    """The merged report: ``workers`` processes, or the Ray ``cluster`` the runs were tasks on."""
    counts = {}
    for rec in records:
        counts[rec["verdict"]] = counts.get(rec["verdict"], 0) + 1
    return {"campaign": name, "finished": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "workers": workers, "cluster": cluster, "duration_s": round(seconds, 1), "db": db, "verdicts": counts, "runs": records,
            "findings": findings(records)}


def _where(doc: dict) -> str:
    return f"Ray cluster {doc['cluster']}" if doc.get("cluster") else f"{doc['workers']} workers"


def section(doc: dict) -> list:
    """The report's body as Markdown lines: the verdict counts, a row per run (verdict, graphs, changed,
    first violation or error), the findings one per minimal graph with the graph. The campaign's own
    report is its title and this; the nightly report (``fx-conformance report --campaign``) holds it
    as a section."""
    lines = [f"{len(doc['runs'])} runs on {_where(doc)} in {doc['duration_s']} s: "
             + ", ".join(f"{n} {v}" for v, n in sorted(doc["verdicts"].items())), "",
             "| run | verdict | graphs | changed | first violation |", "|---|---|---|---|---|"]
    for rec in doc["runs"]:
        first = rec.get("violations", [{}])[0].get("message", "") if rec.get("violations") else rec.get("error", "")
        lines.append(f"| {rec['id']} | {rec['verdict']} | {rec.get('examples', '')} | {rec.get('changed', '')} | "
                     f"{first.replace('|', chr(92) + '|')} |")
    if doc["findings"]:
        lines += ["", "### Findings (one per minimal graph)", ""]
        for f in doc["findings"]:
            lines += [f"- {', '.join(f['properties'])}: {f['messages'][0]} (runs: {', '.join(f['runs'])})", "",
                      "```python", f["graph"], "```", ""]
    return lines


def to_markdown(doc: dict) -> str:
    return "\n".join([f"# Campaign {doc['campaign']}", "", *section(doc)]) + "\n"


def to_html(doc: dict) -> str:
    """The Markdown report as the nightly report's page (``_page.render_html``)."""
    return render_html(to_markdown(doc), title=f"Campaign {doc['campaign']}")


def write_reports(doc: dict, json_path=None, markdown_path=None, html_path=None) -> None:
    for path, text in ((json_path, lambda: json.dumps(doc, indent=2) + "\n"), (markdown_path, lambda: to_markdown(doc)),
                       (html_path, lambda: to_html(doc))):
        if path:
            p = pathlib.Path(path)
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text())
