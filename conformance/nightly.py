"""Nightly reports: benchmark results (pytest-benchmark JSON) and conformance counts -> one versioned
``report.json``, rendered to ``report.md`` and ``report.html`` with PNG plots, appended to a history,
and compared with the previous comparable run under gates like ``median:5%``.

Comparable means the same machine kind (GPU model, or CPU model and core count). Rows labelled
"interpreter" (the reference lowering on a CPU, under the Triton interpreter) are recorded but never
compared as performance.
"""

from __future__ import annotations

import datetime
import json
import math
import pathlib
import re
from dataclasses import dataclass

from ._errors import UsageError
from ._page import render_html
from .campaign import section as campaign_section
from .report import static_info

SCHEMA_VERSION = 1
KERNEL_KEYS = ("provider", "graph", "size", "dtype")


@dataclass(frozen=True)
class Gate:
    """``stat:pct%``: a row regresses when its new ``stat`` exceeds the old one by more than pct."""

    stat: str
    fraction: float

    @staticmethod
    def parse(text: str) -> "Gate":
        m = re.fullmatch(r"(median|min|mean):(\d+(?:\.\d+)?)%", text.strip())
        if not m:
            raise UsageError(f"--gate {text!r}, but should look like median:5% (stat median, min or mean)")
        return Gate(m.group(1), float(m.group(2)) / 100)

    def __str__(self) -> str:
        return f"{self.stat}:{self.fraction * 100:g}%"


# --- report.json -----------------------------------------------------------------------------------


def _load(path, what: str) -> dict:
    p = pathlib.Path(path)
    if not p.exists():
        raise UsageError(f"{what} {path} does not exist")
    try:
        return json.loads(p.read_text())
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what} {path} is not JSON: {exc}") from None


def _device(bench: dict, rows: list) -> dict:
    static = static_info()
    info = {**static["machine"], "versions": static["versions"]}
    cpu = bench.get("machine_info", {}).get("cpu", {})
    cpu_name = cpu.get("brand_raw") or bench.get("machine_info", {}).get("processor") or "unknown CPU"
    cores = cpu.get("count")
    gpu = next((r.get("device_name") for r in rows if r.get("device") == "cuda" and r.get("device_name")), None)
    if any(r.get("device") == "cuda" for r in rows):
        kind = f"cuda:{gpu or 'unknown GPU'}"
    else:
        kind = f"cpu:{cpu_name}:{cores} cores"
    driver = next((r.get("extra_info", {}).get("driver") for r in rows if r.get("extra_info", {}).get("driver")), None)
    return {"device_kind": kind, "gpu": gpu, "driver": driver, "cpu": cpu_name, "cpu_cores": cores, **info}


def _row(b: dict) -> dict:
    extra = b.get("extra_info", {})
    stats = b.get("stats", {})
    ms = {k: stats[k] * 1e3 for k in ("min", "max", "mean", "median", "stddev", "iqr") if k in stats}
    if "provider" in extra and "median_ms" in extra:  # the kernel timer (device events on a GPU) is the authority
        ms.update(median=extra["median_ms"], p20=extra.get("p20_ms"), p80=extra.get("p80_ms"))
    row = {"benchmark": b.get("fullname", b.get("name")), "name": b.get("name"),
           "stats_ms": ms, "rounds": stats.get("rounds")}
    for key in (*KERNEL_KEYS, "device", "label", "bytes", "gbps", "fraction_of_peak", "copy_gbps", "device_name"):
        if key in extra:
            row[key] = extra[key]
    row["extra_info"] = {k: v for k, v in extra.items() if k not in row}
    return row


def build_report(bench: dict, conformance: dict | None, static: dict | None = None,
                 campaign: dict | None = None) -> dict:
    """report.json's content from a pytest-benchmark JSON document, conformance counts, the static
    (compile-only) kernel figures (``python -m benchmarks.static_kernels``) and a campaign's merged
    report (``fx-conformance campaign --json``)."""
    rows = [_row(b) for b in bench.get("benchmarks", [])]
    kernels = [r for r in rows if "provider" in r and r.get("provider") != "copy"]
    machine = _device(bench, rows)
    copy = next((r.get("copy_gbps") for r in rows if r.get("copy_gbps")), None)
    on_gpu = machine["device_kind"].startswith("cuda:")
    label = None if on_gpu else ("CPU report: no GPU. eager and inductor rows are real CPU timings (at CPU "
                                 "sizes the data fits in cache, so GB/s can exceed the DRAM copy bandwidth); "
                                 "reference_lowering rows run under the Triton interpreter and are not "
                                 "performance figures")
    return {
        "schema_version": SCHEMA_VERSION,
        "datetime": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "benchmark_datetime": bench.get("datetime"),
        "machine_info": machine,
        "commit": _commit(bench),
        "label": label,
        "copy_gbps": copy,
        "results": kernels,
        "tracked": [r for r in rows if r not in kernels],
        "conformance": conformance,
        "static": static,
        "campaign": campaign,
    }


def _commit(bench: dict) -> dict:
    info = bench.get("commit_info") or {}
    if info.get("id"):
        return {"id": info["id"], "dirty": info.get("dirty"), "branch": info.get("branch")}
    static = static_info()["commit"]
    return {"id": static.get("sha"), "dirty": static.get("dirty"), "branch": None}


def row_key(row: dict) -> str:
    if all(k in row for k in KERNEL_KEYS):
        return "/".join(str(row[k]) for k in KERNEL_KEYS)
    return row["benchmark"]


# --- history and gates -------------------------------------------------------------------------------


def history_line(report: dict, report_path: str) -> dict:
    return {"datetime": report["datetime"], "commit": (report.get("commit") or {}).get("id"),
            "device_kind": report["machine_info"]["device_kind"], "report": report_path,
            "medians_ms": {row_key(r): r["stats_ms"].get("median") for r in report["results"] + report["tracked"]
                           if r.get("label") != "interpreter"},
            "stats_ms": {row_key(r): r["stats_ms"] for r in report["results"] + report["tracked"]
                         if r.get("label") != "interpreter"}}


def read_history(path) -> list:
    p = pathlib.Path(path)
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]


def compare(report: dict, history: list, gate: Gate) -> tuple:
    """``(regressions, notes)`` against the last history line of the same machine kind."""
    kind = report["machine_info"]["device_kind"]
    notes = []
    if history and history[-1]["device_kind"] != kind:
        notes.append(f"warning: the previous run was on {history[-1]['device_kind']}, this one on {kind}; "
                     f"comparing with the last run on {kind} instead")
    previous = next((h for h in reversed(history) if h["device_kind"] == kind), None)
    if previous is None:
        notes.append(f"no previous run on {kind}: nothing to compare")
        return [], notes
    notes.append(f"compared with {previous['datetime']} (commit {str(previous.get('commit'))[:12]}) under {gate}")
    regressions = []
    for row in report["results"] + report["tracked"]:
        if row.get("label") == "interpreter":
            continue
        key = row_key(row)
        old = (previous.get("stats_ms", {}).get(key) or {}).get(gate.stat)
        new = row["stats_ms"].get(gate.stat)
        if old and new and new > old * (1 + gate.fraction):
            regressions.append({"key": key, "old_ms": old, "new_ms": new, "change": new / old - 1})
    return regressions, notes


# --- rendering --------------------------------------------------------------------------------------------


def _kernel_rows(report):
    return [r for r in report["results"] if r.get("gbps") is not None]


def plot(report: dict, out: pathlib.Path) -> list:
    """PNG plots: GB/s against size per provider and dtype; time against Inductor; conformance counts."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    rows = _kernel_rows(report)
    dtypes = sorted({r["dtype"] for r in rows})
    if rows:
        fig, axes = plt.subplots(1, len(dtypes), figsize=(5 * len(dtypes), 4), squeeze=False)
        for ax, dtype in zip(axes[0], dtypes):
            for provider in sorted({r["provider"] for r in rows}):
                pts = {}
                for r in rows:
                    if r["dtype"] == dtype and r["provider"] == provider:
                        pts.setdefault(r["size"], []).append(r["gbps"])
                sizes = sorted(pts)
                interp = any(r.get("label") == "interpreter" for r in rows if r["provider"] == provider)
                ax.plot(sizes, [_geomean(pts[s]) for s in sizes], marker="o", linestyle="--" if interp else "-",
                        label=provider + (" (interpreter)" if interp else ""))
            if report.get("copy_gbps"):
                ax.axhline(report["copy_gbps"], color="grey", linewidth=0.8, label="copy bandwidth")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("elements")
            ax.set_ylabel("GB/s (geomean over graphs)")
            ax.set_title(dtype)
            ax.legend(fontsize=7)
        fig.suptitle(report["machine_info"]["device_kind"], fontsize=9)
        made.append(_save(plt, fig, out, "gbps_vs_size.png"))
        ratios = ratio_table(report)
        if ratios:
            graphs = sorted(ratios)
            providers = sorted({p for g in ratios.values() for p in g})
            fig, ax = plt.subplots(figsize=(8, 4))
            width = 0.8 / max(1, len(providers))
            for i, p in enumerate(providers):
                ax.bar([j + i * width for j in range(len(graphs))], [ratios[g].get(p, math.nan) for g in graphs],
                       width, label=p)
            ax.axhline(1.0, color="grey", linewidth=0.8)
            ax.set_xticks([j + width * (len(providers) - 1) / 2 for j in range(len(graphs))], graphs, rotation=30,
                          fontsize=8)
            ax.set_ylabel("time / inductor time (geomean)")
            ax.legend(fontsize=8)
            made.append(_save(plt, fig, out, "ratio_vs_inductor.png"))
    static = report.get("static") or {}
    if static.get("ratios"):
        made.append(_static_plot(plt, static, out))
    conf = report.get("conformance")
    if conf and conf.get("modules"):
        modules = list(conf["modules"])
        fig, ax = plt.subplots(figsize=(8, 0.4 * len(modules) + 1.5))
        left = [0] * len(modules)
        for outcome, color in (("passed", "tab:green"), ("xfailed", "tab:orange"), ("skipped", "tab:grey"),
                               ("failed", "tab:red")):
            vals = [conf["modules"][m].get(outcome, 0) for m in modules]
            ax.barh([m.split("/")[-1] for m in modules], vals, left=left, color=color, label=outcome)
            left = [a + b for a, b in zip(left, vals)]
        ax.set_xlabel("tests")
        ax.legend(fontsize=8)
        made.append(_save(plt, fig, out, "conformance.png"))
    camp = report.get("campaign")
    if camp and camp.get("runs"):
        made.append(_campaign_plot(plt, camp, out))
    return made


_VERDICT_COLORS = {"ok": "tab:green", "known": "tab:orange", "vacuous": "tab:grey", "violations": "tab:red",
                   "crashed": "black", "error": "tab:purple"}


def _campaign_plot(plt, camp: dict, out: pathlib.Path) -> str:
    """Each run's graphs, the changed ones darker, coloured by its verdict."""
    runs = camp["runs"]
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(runs) + 1.5))
    names = [r["id"] for r in runs]
    colors = [_VERDICT_COLORS.get(r["verdict"], "tab:blue") for r in runs]
    ax.barh(names, [r.get("examples") or 0 for r in runs], color=colors, alpha=0.35)
    ax.barh(names, [r.get("changed") or 0 for r in runs], color=colors)
    ax.invert_yaxis()
    ax.tick_params(axis="y", labelsize=7)
    ax.set_xlabel("graphs checked (light) and changed by the pass (dark)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for v, c in _VERDICT_COLORS.items() if v in camp["verdicts"]]
    ax.legend(handles, [v for v in _VERDICT_COLORS if v in camp["verdicts"]], fontsize=7)
    ax.set_title(f"campaign {camp['campaign']}", fontsize=9)
    return _save(plt, fig, out, "campaign.png")


def _static_plot(plt, static: dict, out: pathlib.Path) -> str:
    """Instructions per element, ours over Inductor's, per graph and dtype, one bar group per target."""
    ratios = static["ratios"]
    keys = sorted({(r["graph"], r["dtype"]) for r in ratios})
    target_names = [t for t in static.get("targets", []) if any(r["target"] == t for r in ratios)]
    fig, ax = plt.subplots(figsize=(max(8, 0.45 * len(keys)), 4))
    width = 0.8 / max(1, len(target_names))
    for i, t in enumerate(target_names):
        by = {(r["graph"], r["dtype"]): r["ratio"] for r in ratios if r["target"] == t}
        ax.bar([j + i * width for j in range(len(keys))], [by.get(k, math.nan) for k in keys], width, label=t)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.axhline(STATIC_RATIO_TARGET, color="tab:red", linewidth=0.8, linestyle="--",
               label=f"{STATIC_RATIO_TARGET}x target")
    ax.set_xticks([j + width * (len(target_names) - 1) / 2 for j in range(len(keys))],
                  [f"{g} {d}" for g, d in keys], rotation=45, ha="right", fontsize=7)
    ax.set_ylabel("instructions per element / Inductor's")
    ax.set_title("static (compile-only): reference_lowering against Inductor", fontsize=9)
    ax.legend(fontsize=8)
    return _save(plt, fig, out, "static_instructions_vs_inductor.png")


STATIC_RATIO_TARGET = 1.2


def static_section(static: dict | None) -> list:
    """Markdown lines of the "Static (compile-only)" section: per graph, dtype and target our
    instructions per element against Inductor's, then every kernel's figures."""
    if not static:
        return []
    lines = ["", "## Static (compile-only)", "",
             f"Kernels compiled for {', '.join(static.get('targets', []))} with no GPU (torch {static.get('torch')}, "
             f"triton {static.get('triton')}), {static.get('numel')} elements; nothing was launched. "
             f"Instructions per element = machine instructions (SASS without NOPs; AMDGCN) / elements per thread.",
             ""]
    if static.get("ratios"):
        over = [r for r in static["ratios"] if r["ratio"] > STATIC_RATIO_TARGET]
        lines += [f"Our instructions per element over Inductor's: {len(static['ratios']) - len(over)} of "
                  f"{len(static['ratios'])} within {STATIC_RATIO_TARGET}x.", ""]
        lines += _table(["graph", "dtype", "target", "ours", "inductor", "ratio"],
                        [[r["graph"], r["dtype"], r["target"], _fmt(r["ours"]), _fmt(r["inductor"]),
                          f"{r['ratio']:.2f}" + (" **over**" if r["ratio"] > STATIC_RATIO_TARGET else "")]
                         for r in static["ratios"]])
    lines += ["", "### Kernels", ""]
    lines += _table(["graph", "dtype", "provider", "target", "warps", "regs", "spill B", "stack B", "smem B",
                     "instr", "instr/elem", "loads (bits: n)", "stores (bits: n)", "bytes/elem"],
                    [[r["graph"], r["dtype"], r["provider"], r["target"], r["num_warps"], r["registers"],
                      r["local_bytes"], r["stack_bytes"], r["shared_bytes"], r["instructions"],
                      _fmt(r["instructions_per_element"]),
                      ", ".join(f"{b}: {n}" for b, n in r["load_bits"].items()),
                      ", ".join(f"{b}: {n}" for b, n in r["store_bits"].items()), _fmt(r["bytes_per_element"])]
                     for r in static.get("kernels", [])])
    lines += [f"- note: {n}" for n in static.get("notes", [])]
    return lines


def _save(plt, fig, out: pathlib.Path, name: str) -> str:
    fig.tight_layout()
    fig.savefig(out / name, dpi=110)
    plt.close(fig)
    return name


def _geomean(values) -> float:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def ratio_table(report: dict) -> dict:
    """graph -> provider -> geomean over sizes and dtypes of time / Inductor's time (interpreter rows
    left out: they are not performance)."""
    by = {}
    for r in _kernel_rows(report):
        by[(r["graph"], r["size"], r["dtype"], r["provider"])] = r
    out = {}
    for (graph, size, dtype, provider), r in by.items():
        base = by.get((graph, size, dtype, "inductor"))
        if provider == "inductor" or base is None or r.get("label") == "interpreter":
            continue
        out.setdefault(graph, {}).setdefault(provider, []).append(r["stats_ms"]["median"] / base["stats_ms"]["median"])
    return {g: {p: _geomean(v) for p, v in ps.items()} for g, ps in out.items()}


def _table(header: list, rows: list) -> list:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def _fmt(x, digits=3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{digits}g}" if isinstance(x, float) else str(x)


# The GPU targets (benchmark figures, not tests): reference_lowering at >= 85% of the copy
# bandwidth for f32 chains at 2**24 elements and up; geomean time within 5% of Inductor or better;
# at least 3x faster than eager on the 8-op chain.
def targets(report: dict) -> list:
    """``(target, value, met)`` rows; empty when no reference_lowering row is a compiled-kernel timing."""
    rows = [r for r in _kernel_rows(report) if r.get("label") != "interpreter"]
    ours = [r for r in rows if r["provider"] == "reference_lowering"]
    if not ours:
        return []
    out = []
    chains = [r["fraction_of_peak"] for r in ours
              if r["graph"].startswith("chain") and r["dtype"] == "f32" and r["size"] >= 2 ** 24]
    if chains:
        worst = min(chains)
        out.append(("f32 chains >= 2^24 elements: fraction of copy bandwidth (worst) >= 85%", f"{worst:.1%}",
                    worst >= 0.85))
    by = {(r["graph"], r["size"], r["dtype"], r["provider"]): r["stats_ms"]["median"] for r in rows}
    ratios = [t / by[(g, n, d, "inductor")] for (g, n, d, p), t in by.items()
              if p == "reference_lowering" and (g, n, d, "inductor") in by]
    if ratios:
        gm = _geomean(ratios)
        out.append(("geomean time / Inductor's <= 1.05", f"{gm:.3f}", gm <= 1.05))
    speedups = [by[(g, n, d, "eager")] / t for (g, n, d, p), t in by.items()
                if p == "reference_lowering" and g == "chain8" and (g, n, d, "eager") in by]
    if speedups:
        best = max(speedups)
        out.append(("8-op chain: speedup over eager (best size and dtype) >= 3x", f"{best:.2f}x", best >= 3.0))
    return out


def summary_table(report: dict, graph: str = "chain8", dtype: str = "f32") -> str:
    """One graph's rows (every size and provider) as a Markdown table: what the README shows."""
    rows = sorted((r for r in _kernel_rows(report) if r["graph"] == graph and r["dtype"] == dtype),
                  key=lambda r: (r["size"], r["provider"]))
    return "\n".join(_table(["elements", "provider", "median ms", "GB/s", "of copy bw", "label"],
                             [[r["size"], r["provider"], _fmt(r["stats_ms"]["median"]), _fmt(r["gbps"]),
                               f"{r['fraction_of_peak']:.1%}", r.get("label", "")] for r in rows]))


def render_markdown(report: dict, plots: list, regressions: list, notes: list) -> str:
    m = report["machine_info"]
    commit = report.get("commit") or {}
    lines = [f"# fx-conformance nightly report, {report['datetime']}", ""]
    if report.get("label"):
        lines += [f"> **{report['label']}**", ""]
    v = m.get("versions", {})
    lines += [f"- machine: {m['device_kind']}" + (f", driver {m['driver']}" if m.get("driver") else "")
              + f" (torch {v.get('torch')}, triton {v.get('triton')}, python {m.get('python')})",
              f"- commit: {str(commit.get('id'))[:12]}{' (dirty)' if commit.get('dirty') else ''}",
              f"- copy bandwidth measured in this run: {_fmt(report.get('copy_gbps'))} GB/s", ""]
    lines += ["## Regressions", ""]
    lines += [f"- {n}" for n in notes]
    lines += [f"- **{r['key']}**: {r['old_ms']:.4g} ms -> {r['new_ms']:.4g} ms ({r['change']:+.1%})"
              for r in regressions] or ["- none"]
    goals = targets(report)
    lines += ["", "## Targets (GPU benchmark figures, not tests)", ""]
    if goals:
        lines += _table(["target", "measured", "met"], [[t, v, "yes" if ok else "**no**"] for t, v, ok in goals])
    else:
        lines += ["- not evaluated: no compiled reference_lowering timings in this run (interpreter rows are not "
                  "performance)"]
    conf = report.get("conformance")
    if conf:
        lines += ["", f"## Conformance (Hypothesis profile {conf.get('profile') or 'default'})", ""]
        cols = ("passed", "failed", "skipped", "xfailed")
        lines += _table(["module", *cols], [[mod, *(c.get(k, 0) for k in cols)] for mod, c in conf["modules"].items()]
                        + [["total", *(conf["total"].get(k, 0) for k in cols)]])
        if conf.get("known"):
            lines += ["", "### Known findings and divergences (strict xfails: each fails the day torch changes it)", ""]
            lines += _table(["test", "behaviour"], [[k["test"].split("/")[-1], k["reason"].replace("|", "\\|")]
                                                    for k in conf["known"]])
    ratios = ratio_table(report)
    if ratios:
        providers = sorted({p for g in ratios.values() for p in g})
        lines += ["", "## Time against Inductor (geomean over sizes and dtypes; < 1 is faster)", ""]
        lines += _table(["graph", *providers], [[g, *(_fmt(ratios[g].get(p)) for p in providers)] for g in sorted(ratios)])
    rows = sorted(_kernel_rows(report), key=lambda r: (r["graph"], r["dtype"], r["size"], r["provider"]))
    if rows:
        lines += ["", "## Kernels", ""]
        lines += _table(["graph", "dtype", "elements", "provider", "median ms", "p20-p80 ms", "GB/s", "of copy bw",
                         "label"],
                        [[r["graph"], r["dtype"], r["size"], r["provider"], _fmt(r["stats_ms"]["median"]),
                          f"{_fmt(r['stats_ms'].get('p20'))}-{_fmt(r['stats_ms'].get('p80'))}", _fmt(r["gbps"]),
                          f"{r['fraction_of_peak']:.1%}", r.get("label", "")] for r in rows])
    if report["tracked"]:
        lines += ["", "## Tracked", ""]
        lines += _table(["benchmark", "median ms", "min ms", "rounds", "extra"],
                        [[r["benchmark"].split("::")[-1], _fmt(r["stats_ms"].get("median")),
                          _fmt(r["stats_ms"].get("min")), r.get("rounds"),
                          ", ".join(f"{k}={_fmt(v) if isinstance(v, float) else v}"
                                    for k, v in sorted(r["extra_info"].items()))] for r in report["tracked"]])
    lines += static_section(report.get("static"))
    camp = report.get("campaign")
    if camp:
        lines += ["", f"## Campaign {camp['campaign']}", "", *campaign_section(camp)]
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p}]({p})" for p in plots]
    return "\n".join(lines) + "\n"


def write_report(bench_path, conformance_path=None, *, out_dir=None, history_path="reports/history.jsonl",
                 gate: str = "median:5%", static_path=None, campaign_path=None) -> tuple:
    """Build, render and record a nightly report: ``(report directory, regressions, notes)``."""
    parsed_gate = Gate.parse(gate)
    bench = _load(bench_path, "--benchmarks")
    conformance = _load(conformance_path, "--conformance") if conformance_path else None
    static = _load(static_path, "--static") if static_path else None
    campaign = _load(campaign_path, "--campaign") if campaign_path else None
    if campaign is not None and not (isinstance(campaign, dict)
                                     and {"campaign", "runs", "verdicts", "findings"} <= campaign.keys()):
        raise UsageError(f"--campaign {campaign_path}: not a campaign report (fx-conformance campaign --json)")
    report = build_report(bench, conformance, static, campaign)
    date = report["datetime"][:10]
    out = pathlib.Path(out_dir) if out_dir else pathlib.Path("reports/nightly") / date
    out.mkdir(parents=True, exist_ok=True)
    history = read_history(history_path)
    regressions, notes = compare(report, history, parsed_gate)
    report["regressions"] = regressions
    report["gate"] = str(parsed_gate)
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    plots = plot(report, out)
    markdown = render_markdown(report, plots, regressions, notes)
    (out / "report.md").write_text(markdown)
    (out / "report.html").write_text(render_html(markdown))
    hist = pathlib.Path(history_path)
    hist.parent.mkdir(parents=True, exist_ok=True)
    with hist.open("a") as f:
        f.write(json.dumps(history_line(report, str(out / "report.json"))) + "\n")
    return out, regressions, notes
