"""fx-conformance report: report.json from pytest-benchmark JSON, its renderings and plots, the history,
and the regression gates (what regresses, what is never compared, when machines differ)."""

from __future__ import annotations

import json

import pytest

from conformance import cli
from conformance.nightly import Gate, build_report, write_report


def _kernel(provider, graph, size, dtype, median_ms, label="compiled", device="cpu"):
    return {"name": f"test_kernel[{provider}-{graph}-{dtype}-{size}]",
            "fullname": f"benchmarks/test_kernels.py::test_kernel[{provider}-{graph}-{dtype}-{size}]",
            "stats": {"min": median_ms / 1e3 * 0.9, "max": median_ms / 1e3 * 1.2, "mean": median_ms / 1e3,
                      "median": median_ms / 1e3, "stddev": 0.0, "iqr": 0.0, "rounds": 10},
            "extra_info": {"provider": provider, "graph": graph, "size": size, "dtype": dtype, "device": device,
                           "label": label, "median_ms": median_ms, "p20_ms": median_ms * 0.95,
                           "p80_ms": median_ms * 1.05, "bytes": size * 12, "gbps": size * 12 / median_ms / 1e6,
                           "copy_gbps": 10.0, "fraction_of_peak": size * 12 / median_ms / 1e6 / 10.0}}


def _bench(scale=1.0, interpreter_scale=1.0, cpu="Test CPU"):
    rows = []
    for graph in ("add", "chain8"):
        for size in (4096, 65536):
            rows.append(_kernel("eager", graph, size, "f32", 0.02 * size / 4096 * scale))
            rows.append(_kernel("inductor", graph, size, "f32", 0.01 * size / 4096))
            rows.append(_kernel("reference_lowering", graph, size, "f32", 5.0 * interpreter_scale, label="interpreter"))
    rows.append({"name": "test_harness_throughput", "fullname": "benchmarks/test_harness.py::test_harness_throughput",
                 "stats": {"min": 0.1, "max": 0.2, "mean": 0.15, "median": 0.15, "rounds": 3},
                 "extra_info": {"graphs_per_s": 450.0}})
    return {"machine_info": {"cpu": {"brand_raw": cpu, "count": 2}}, "commit_info": {"id": "abc123", "dirty": False},
            "datetime": "2026-11-22T00:00:00", "benchmarks": rows}


CONFORMANCE = {"modules": {"conformance/suite/test_a.py": {"passed": 3, "failed": 0, "skipped": 1, "xfailed": 2}},
               "total": {"passed": 3, "failed": 0, "skipped": 1, "xfailed": 2}, "exitstatus": 0,
               "known": [{"test": "conformance/suite/test_a.py::test_b[x]", "reason": "torch 2.13.0: a | b drops alpha"}]}


def _write(tmp_path, name, doc):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def test_report_json_has_the_schema_and_labels_a_cpu_run():
    report = build_report(_bench(), CONFORMANCE)
    assert report["schema_version"] == 1 and report["conformance"] == CONFORMANCE
    assert report["machine_info"]["device_kind"] == "cpu:Test CPU:2 cores"
    assert "CPU report" in report["label"] and "interpreter" in report["label"]
    row = report["results"][0]
    assert {"provider", "graph", "size", "dtype", "stats_ms", "gbps", "fraction_of_peak"} <= set(row)
    assert [t["benchmark"] for t in report["tracked"]] == ["benchmarks/test_harness.py::test_harness_throughput"]


def test_a_run_writes_json_markdown_html_plots_and_history(tmp_path):
    out, regressions, notes = write_report(_write(tmp_path, "b.json", _bench()), _write(tmp_path, "c.json", CONFORMANCE),
                                           out_dir=tmp_path / "r", history_path=tmp_path / "h.jsonl")
    names = {p.name for p in out.iterdir()}
    assert {"report.json", "report.md", "report.html", "gbps_vs_size.png", "ratio_vs_inductor.png",
            "conformance.png"} <= names
    md = (out / "report.md").read_text()
    assert "| add | f32 | 4096 | eager |" in md and "![gbps_vs_size.png](gbps_vs_size.png)" in md
    assert "| test_a.py::test_b[x] | torch 2.13.0: a \\| b drops alpha |" in md  # each finding, its pipe escaped
    page = (out / "report.html").read_text()
    assert "<table>" in page and "<td>torch 2.13.0: a | b drops alpha</td>" in page
    assert regressions == [] and "nothing to compare" in notes[0]
    assert len((tmp_path / "h.jsonl").read_text().splitlines()) == 1


def test_a_slower_row_is_a_regression_and_fails_unless_no_fail(tmp_path, capsys):
    history = str(tmp_path / "h.jsonl")
    base = ["report", "--history", history, "--out"]
    assert cli.main([*base, str(tmp_path / "1"), "--benchmarks", _write(tmp_path, "b1.json", _bench())]) == 0
    slower = _write(tmp_path, "b2.json", _bench(scale=1.2, interpreter_scale=3.0))
    assert cli.main([*base, str(tmp_path / "2"), "--benchmarks", slower]) == 1
    printed = capsys.readouterr().out
    assert "REGRESSION eager/add/4096/f32" in printed
    assert "reference_lowering" not in printed  # interpreter rows are never compared
    assert printed.count("REGRESSION") == 4  # the four eager rows, +20%
    assert cli.main([*base, str(tmp_path / "3"), "--benchmarks", slower, "--gate", "median:25%"]) == 0
    assert cli.main([*base, str(tmp_path / "4"), "--benchmarks", _write(tmp_path, "b3.json", _bench(scale=2.0)),
                     "--no-fail"]) == 0


def test_a_run_on_another_machine_kind_is_not_compared_with(tmp_path, capsys):
    history = str(tmp_path / "h.jsonl")
    cli.main(["report", "--history", history, "--out", str(tmp_path / "1"), "--benchmarks",
              _write(tmp_path, "a.json", _bench())])
    code = cli.main(["report", "--history", history, "--out", str(tmp_path / "2"), "--benchmarks",
                     _write(tmp_path, "b.json", _bench(scale=3.0, cpu="Other CPU"))])
    out = capsys.readouterr().out
    assert code == 0 and "warning: the previous run was on cpu:Test CPU" in out and "nothing to compare" in out


def _campaign_doc():
    from conformance.campaign import graph_key, report

    graph = "def forward(self, x):\n    sub = torch.ops.aten.sub.Tensor(x, x);  x = None\n    return (sub,)"
    bad = {"id": "add_to_sub@0", "verdict": "violations", "examples": 7, "changed": 6,
           "violations": [{"property": "values", "message": "output[0]: 1 of 4 elements differ | worst 2",
                           "graph": graph, "graph_key": graph_key(graph)}]}
    records = [bad, {"id": "dce@0", "verdict": "ok", "examples": 20, "changed": 12, "violations": []},
               {"id": "crash@0", "verdict": "crashed", "error": "its Ray worker died on each of 3 tries"}]
    return report("nightly-passes", records, workers=2, seconds=12.5, db=None, cluster="auto")


def test_a_campaign_is_a_section_of_the_report_with_its_plot(tmp_path):
    """``fx-conformance report --campaign``: the campaign's runs (a cell's pipe escaped) and its findings
    with their graphs, in report.md and as the page's table and code block, and campaign.png."""
    code = cli.main(["report", "--benchmarks", _write(tmp_path, "b.json", _bench()),
                     "--campaign", _write(tmp_path, "c.json", _campaign_doc()),
                     "--history", str(tmp_path / "h"), "--out", str(tmp_path / "o")])
    assert code == 0
    out = tmp_path / "o"
    md = (out / "report.md").read_text()
    assert "## Campaign nightly-passes" in md and "3 runs on Ray cluster auto in 12.5 s: 1 crashed, 1 ok, 1 violations" in md
    assert "| add_to_sub@0 | violations | 7 | 6 | output[0]: 1 of 4 elements differ \\| worst 2 |" in md
    assert "### Findings (one per minimal graph)" in md and "```python\ndef forward(self, x):" in md
    page = (out / "report.html").read_text()
    assert "<td>output[0]: 1 of 4 elements differ | worst 2</td>" in page and "<td>crashed</td>" in page
    assert "<pre>def forward(self, x):\n    sub = torch.ops.aten.sub.Tensor(x, x);" in page
    assert "![campaign.png](campaign.png)" in md and (out / "campaign.png").stat().st_size > 1000
    assert json.loads((out / "report.json").read_text())["campaign"]["verdicts"] == {"violations": 1, "ok": 1,
                                                                                     "crashed": 1}


@pytest.mark.parametrize("args,message", [
    (["--benchmarks", "/nonexistent.json"], "does not exist"),
    (["--benchmarks", "{bench}", "--gate", "fast:5"], "should look like median:5%"),
    (["--benchmarks", "{bench}", "--campaign", "{bench}"], "not a campaign report"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, args, message):
    bench = _write(tmp_path, "b.json", _bench())
    args = [a.replace("{bench}", bench) for a in args]
    assert cli.main(["report", "--history", str(tmp_path / "h"), "--out", str(tmp_path / "o"), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_gate_parsing():
    assert Gate.parse("median:5%") == Gate("median", 0.05) and str(Gate.parse("min:2.5%")) == "min:2.5%"


def test_gpu_targets_are_evaluated_from_compiled_rows_only():
    from conformance.nightly import targets

    cpu = build_report(_bench(), None)
    assert targets(cpu) == []  # interpreter rows only
    rows = []
    for graph in ("chain8", "chain16"):
        rows.append(_kernel("eager", graph, 2 ** 24, "f32", 3.0, device="cuda"))
        rows.append(_kernel("inductor", graph, 2 ** 24, "f32", 1.0, device="cuda"))
        rows.append(_kernel("reference_lowering", graph, 2 ** 24, "f32", 0.98, device="cuda"))
    for r in rows:
        r["extra_info"]["fraction_of_peak"] = 0.9
    gpu = build_report({"machine_info": {}, "benchmarks": rows}, None)
    assert gpu["machine_info"]["device_kind"].startswith("cuda:") and gpu["label"] is None
    got = {name.split(":")[0]: (value, met) for name, value, met in targets(gpu)}
    assert got["f32 chains >= 2^24 elements"] == ("90.0%", True)
    assert got["geomean time / Inductor's <= 1.05"] == ("0.980", True)
    assert got["8-op chain"] == ("3.06x", True)


def _static(ratio):
    kernel = {"graph": "add", "dtype": "f32", "provider": "reference_lowering", "target": "sm_90", "num_warps": 4,
              "registers": 16, "local_bytes": 0, "stack_bytes": 0, "shared_bytes": 0, "instructions": 29,
              "instructions_per_element": 3.625, "load_bits": {"128": 4}, "store_bits": {"128": 2},
              "bytes_per_element": 12.0}
    return {"kind": "static", "numel": 1048576, "targets": ["sm_90", "sm_80", "gfx942"], "torch": "2.13.0",
            "triton": "3.9.0", "kernels": [kernel, dict(kernel, provider="inductor")], "notes": [],
            "ratios": [{"graph": "add", "dtype": "f32", "target": "sm_90", "ours": 3.625 * ratio, "inductor": 3.625,
                        "ratio": ratio}, {"graph": "chain8", "dtype": "f32", "target": "sm_90", "ours": 3.0,
                                          "inductor": 3.0, "ratio": 1.0}]}


def test_the_static_section_and_plot_show_ratios_and_mark_those_over_the_target(tmp_path):
    out, _, _ = write_report(_write(tmp_path, "b.json", _bench()), static_path=_write(tmp_path, "s.json", _static(3.3)),
                             out_dir=tmp_path / "r", history_path=tmp_path / "h.jsonl")
    md = (out / "report.md").read_text()
    assert "## Static (compile-only)" in md and "1 of 2 within 1.2x" in md
    assert "| add | f32 | sm_90 | 12 | 3.62 | 3.30 **over** |" in md
    assert "| chain8 | f32 | sm_90 | 3 | 3 | 1.00 |" in md
    assert "| add | f32 | inductor | sm_90 | 4 | 16 | 0 | 0 | 0 | 29 | 3.62 | 128: 4 | 128: 2 | 12 |" in md
    assert (out / "static_instructions_vs_inductor.png").exists()
    assert json.loads((out / "report.json").read_text())["static"]["ratios"][0]["ratio"] == 3.3
    plain, _, _ = write_report(_write(tmp_path, "b.json", _bench()), out_dir=tmp_path / "p",
                               history_path=tmp_path / "h.jsonl")
    assert "Static" not in (plain / "report.md").read_text()


def test_static_kernels_compiles_the_corpus_for_every_target(tmp_path, monkeypatch, capsys):
    """benchmarks.static_kernels end to end on two corpus graphs (our kernels; Inductor's are nightly-only):
    every target, figures in the JSON, the transposed graph's accesses vectorized."""
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(TRITON_CACHE_DIR=str(tmp_path / "cache"), TRITON_DEFAULT_FP_FUSION="0")
    out = tmp_path / "static.json"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.static_kernels", str(out), "--no-inductor", "--numel",
                           "65536", "--graphs", "add,transposed_input", "--dtypes", "f32"], cwd=root, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    rows = doc["kernels"]
    assert {(r["graph"], r["target"]) for r in rows} == {(g, t) for g in ("add", "transposed_input")
                                                         for t in ("sm_90", "sm_80", "gfx942")}
    for r in rows:
        assert r["instructions"] > 0 and r["local_bytes"] == 0 and r["bytes_per_element"] > 0
        if r["target"] == "sm_90" and r["dtype"] == "f32":  # 128-bit accesses only, transposed operand included
            assert set(r["load_bits"]) == {"128"} and set(r["store_bits"]) == {"128"}, r
    from benchmarks.static_kernels import main  # a usage error compiles nothing: main() in this process

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert main([str(out), "--graphs", "nope"]) == 2 and "not in the corpus" in capsys.readouterr().err
