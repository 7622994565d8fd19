"""Tests of the report writers: JSON round-trips with every key, atomic rewrites, JUnit and Markdown
show each property and each violation with its repro, and hostile message text cannot break them."""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET

import pytest

from conformance import report
from conformance._result import PropertyCount, VerifyResult, Violation
from conformance.report import render_markdown, report_dict, write_json, write_junit, write_markdown

BEFORE = "def forward(self, x):\n    add = torch.ops.aten.add.Tensor(x, x);  x = None\n    return (add,)\n"
AFTER = "def forward(self, x):\n    mul = torch.ops.aten.mul.Tensor(x, 3);  x = None\n    return (mul,)\n"
NASTY = 'values=out[0] <a & "b"> | \x00\x1bbad, but should be x [mypass(add)]\nworst abs err 1.0 at (0,)'

JSON_KEYS = {"schema_version", "tool", "generated_at", "started", "duration_s", "machine", "versions",
             "device", "commit", "target", "ok", "interrupted", "isolated", "seed", "examples", "shrink_runs",
             "options", "properties", "violations", "changed", "changed_dead_code_only", "rewrites", "dce_pass", "vacuous", "focus",
             "generator_crashes", "user_ops", "database", "warnings", "pass_warnings"}


def ok_result():
    return VerifyResult(target="mypkg.passes:fold", examples=25, changed=20, seed=1234, started="2024-05-01T12:00:00Z",
                        duration_s=1.5, options={"device": "cpu", "max_examples": 25},
                        properties={"validity": PropertyCount(25, False), "values": PropertyCount(25, False),
                                    "mutations": {"checked": 20, "violated": False}})


def failing_result():
    violations = [
        Violation("values", NASTY, graph_before=BEFORE, graph_after=AFTER, inputs="x: float32[3] (1,)",
                  repro_path="/tmp/repro/values_1.py", example=3),
        Violation("contracts:functional", "contract functional=False, but should be True [fold(add_)]",
                  graph_before=BEFORE, graph_after="", repro_path="/tmp/repro/contracts_2.py", example=7),
    ]
    return VerifyResult(target="mypkg.passes:fold", examples=7, seed=99, started="2024-05-01T12:00:00Z",
                        duration_s=0.25, violations=violations,
                        options={"device": "cuda", "properties": ("values", "contracts"), "fn": object()},
                        properties={"values": PropertyCount(7, True), "validity": PropertyCount(7, False),
                                    "contracts": PropertyCount(7, True)})


def interrupted_result():
    r = ok_result()
    r.interrupted, r.examples = True, 4
    return r


# --- JSON ---------------------------------------------------------------------------------------


def test_json_round_trips_with_every_key(tmp_path):
    path = write_json(failing_result(), tmp_path / "out" / "report.json")
    assert path == tmp_path / "out" / "report.json"
    text = path.read_text()
    assert text.endswith("}\n") and text.startswith('{\n  "schema_version": 1,')
    data = json.loads(text)
    assert set(data) == JSON_KEYS
    assert data["schema_version"] == 1
    assert data["tool"]["name"] == "fx-conformance" and isinstance(data["tool"]["version"], str)
    assert data["generated_at"].endswith("Z") and data["generated_at"][:2] == "20"
    assert set(data["machine"]) == {"hostname", "platform", "machine", "processor", "cpu_count", "python"}
    assert set(data["versions"]) == {"torch", "triton", "hypothesis", "numpy", "z3"}
    assert all(v is None or isinstance(v, str) for v in data["versions"].values())
    assert data["versions"]["hypothesis"]  # a dependency of this project, so it is installed
    assert set(data["commit"]) == {"sha", "dirty"}
    assert (data["device"], data["target"], data["seed"], data["examples"]) == ("cuda", "mypkg.passes:fold", 99, 7)
    assert data["ok"] is False and data["interrupted"] is False and data["isolated"] is False
    assert (data["started"], data["duration_s"]) == ("2024-05-01T12:00:00Z", 0.25)
    assert data["options"]["properties"] == ["values", "contracts"]
    assert data["options"]["fn"].startswith("<object object")  # not serialisable -> str()
    assert data["properties"] == {"values": {"checked": 7, "violated": True},
                                  "validity": {"checked": 7, "violated": False},
                                  "contracts": {"checked": 7, "violated": True}}
    assert [v["repro_path"] for v in data["violations"]] == ["/tmp/repro/values_1.py", "/tmp/repro/contracts_2.py"]
    assert data["violations"][0]["message"] == NASTY and data["violations"][1]["property"] == "contracts:functional"


def test_json_ok_result_counts_plain_dict_properties(tmp_path):
    data = json.loads(write_json(ok_result(), tmp_path / "r.json").read_text())
    assert data["ok"] is True and data["violations"] == [] and data["device"] == "cpu"
    assert data["properties"]["mutations"] == {"checked": 20, "violated": False}
    assert data["properties"]["validity"] == {"checked": 25, "violated": False}


def test_json_non_finite_floats_stay_strict_json(tmp_path):
    r = ok_result()
    r.options["atol"] = float("nan")
    text = write_json(r, tmp_path / "r.json").read_text()
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))


def test_repeated_write_json_overwrites_atomically_and_cheaply(tmp_path, monkeypatch):
    report._commit.cache_clear()
    git_calls = []
    real_run = subprocess.run

    def counting_run(args, *a, **kw):
        if args and args[0] == "git":
            git_calls.append(args)
        return real_run(args, *a, **kw)

    monkeypatch.setattr(subprocess, "run", counting_run)
    path = tmp_path / "stream.json"
    r = ok_result()
    for i in range(1, 6):
        r.examples = i
        write_json(r, path)
        assert json.loads(path.read_text())["examples"] == i
    assert os.listdir(tmp_path) == ["stream.json"]  # no temp files left behind
    assert len(git_calls) <= 2  # rev-parse and status once, not once per write
    static = report.static_info()
    write_json(r, path, static=static)
    assert json.loads(path.read_text())["commit"] == static["commit"]


def test_failed_write_leaves_old_file_and_no_temp(tmp_path, monkeypatch):
    path = write_json(ok_result(), tmp_path / "r.json")
    before = path.read_text()

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(report.os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        write_json(failing_result(), path)
    assert path.read_text() == before and os.listdir(tmp_path) == ["r.json"]


def test_commit_is_none_outside_git_or_without_git(tmp_path, monkeypatch):
    report._commit.cache_clear()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert report_dict(ok_result())["commit"] == {"sha": None, "dirty": None}

    def no_git(*a, **kw):
        raise FileNotFoundError("git")

    report._commit.cache_clear()
    monkeypatch.setattr(subprocess, "run", no_git)
    assert report_dict(ok_result())["commit"] == {"sha": None, "dirty": None}
    report._commit.cache_clear()


def test_commit_in_a_git_checkout(tmp_path, monkeypatch):
    try:
        subprocess.run(["git", "init", "-q", str(tmp_path)], check=True, capture_output=True, timeout=10)
        env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
        subprocess.run(["git", "-C", str(tmp_path), "commit", "-q", "--allow-empty", "-m", "x"],
                       check=True, capture_output=True, timeout=10, env={**os.environ, **env})
    except (OSError, subprocess.SubprocessError):
        pytest.skip("git not usable here")
    report._commit.cache_clear()
    monkeypatch.chdir(tmp_path)
    commit = report_dict(ok_result())["commit"]
    assert len(commit["sha"]) == 40 and commit["dirty"] is False
    (tmp_path / "new.txt").write_text("x")
    report._commit.cache_clear()
    assert report_dict(ok_result())["commit"]["dirty"] is True
    report._commit.cache_clear()


# --- JUnit --------------------------------------------------------------------------------------


def _junit(result, tmp_path):
    path = write_junit(result, tmp_path / "junit" / "verify.xml")
    suite = ET.parse(path).getroot().find("testsuite")
    return path, suite, {c.get("name"): c for c in suite.findall("testcase")}


def test_junit_one_testcase_per_property_plus_extra_violated(tmp_path):
    path, suite, cases = _junit(failing_result(), tmp_path)
    assert list(cases) == ["values", "validity", "contracts", "contracts:functional", "pass changed graphs"]
    assert suite.get("name") == "fx-conformance verify mypkg.passes:fold"
    assert suite.get("tests") == "5" and suite.get("failures") == "3" and suite.get("errors") == "0"
    assert suite.get("time") == "0.250" and suite.get("timestamp") == "2024-05-01T12:00:00Z"
    assert all(c.get("classname") == "fx-conformance.mypkg.passes:fold" for c in cases.values())
    failing = [n for n, c in cases.items() if c.find("failure") is not None]
    assert failing == ["values", "contracts", "contracts:functional"]
    assert int(suite.get("failures")) == len(failing)
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["seed"] == "99" and props["device"] == "cuda" and {"torch", "triton"} <= set(props)

    failure = cases["values"].find("failure")
    assert failure.get("type") == "values"
    assert failure.get("message") == 'values=out[0] <a & "b"> | bad, but should be x [mypass(add)]'
    assert "/tmp/repro/values_1.py" in failure.text and "x: float32[3] (1,)" in failure.text
    assert "aten.add.Tensor(x, x)" in failure.text and "aten.mul.Tensor(x, 3)" in failure.text
    assert "worst abs err 1.0" in failure.text  # the full message, not just the headline
    assert cases["contracts"].find("failure").get("message") == "contracts violated; see contracts:functional"
    extra = cases["contracts:functional"].find("failure")
    assert extra.get("type") == "contracts:functional" and "/tmp/repro/contracts_2.py" in extra.text
    raw = path.read_text()
    assert "\x00" not in raw and "\x1b" not in raw


def test_junit_ok_and_interrupted(tmp_path):
    _, suite, cases = _junit(ok_result(), tmp_path)
    assert suite.get("failures") == "0" and suite.get("errors") == "0" and suite.get("tests") == "4"
    assert suite.get("skipped") == "0" and cases["pass changed graphs"].find("skipped") is None
    assert all(c.find("failure") is None and c.find("error") is None for c in cases.values())

    _, suite, cases = _junit(interrupted_result(), tmp_path)
    assert list(cases) == ["validity", "values", "mutations", "pass changed graphs", "run"]
    error = cases["run"].find("error")
    assert error is not None and error.get("message").startswith("interrupted")
    assert suite.get("errors") == "1" and suite.get("tests") == "5" and suite.get("failures") == "0"
    assert os.listdir(tmp_path / "junit") == ["verify.xml"]


# --- Markdown -----------------------------------------------------------------------------------


def _table_rows(md):
    return [line for line in md.splitlines() if line.startswith("| ") and not line.startswith(("| property", "| ---"))]


def test_markdown_pass(tmp_path):
    md = write_markdown(ok_result(), tmp_path / "r.md").read_text()
    assert md.splitlines()[0] == "# fx-conformance verify: mypkg.passes:fold"
    assert "**PASS**: no counterexample in 25 examples" in md
    assert "the pass changed 20 of 25 graphs (80%)" in md
    assert _table_rows(md) == ["| validity | 25 | pass |", "| values | 25 | pass |", "| mutations | 20 | pass |"]
    assert "FAIL" not in md and "```" not in md


def test_markdown_fail_has_table_and_violation_sections():
    md = render_markdown(failing_result())
    assert "**FAIL**: 3 properties violated" in md and "PASS" not in md
    assert _table_rows(md) == ["| values | 7 | FAIL |", "| validity | 7 | pass |", "| contracts | 7 | FAIL |",
                               "| contracts:functional | - | FAIL |"]
    assert r'## values: values=out[0] <a & "b"> \| ' in md  # pipe escaped in the headline
    clean = NASTY.replace("\x00", "").replace("\x1b", "")
    assert "```\n" + clean + "\n```" in md  # the full message, fenced, minus control characters
    assert "\x00" not in md and "\x1b" not in md
    assert "repro: `/tmp/repro/values_1.py`" in md and "repro: `/tmp/repro/contracts_2.py`" in md
    assert "```python\n" + BEFORE.rstrip() + "\n```" in md and "```python\n" + AFTER.rstrip() + "\n```" in md
    assert md.count("## ") == 2 and md.index("## values") < md.index("## contracts:functional")


def test_markdown_escapes_pipes_in_table_cells_and_fences_backticks():
    r = failing_result()
    r.properties["a|b"] = PropertyCount(1, False)
    r.violations[0].graph_before = "# ```\n" + BEFORE
    md = render_markdown(r)
    assert r"| a\|b | 1 | pass |" in md
    assert "````python\n# ```\n" in md  # a longer fence, so the inner ``` cannot close it


def test_markdown_interrupted():
    md = render_markdown(interrupted_result())
    assert "**INTERRUPTED** after 4 examples" in md and "PASS" not in md


def test_a_pass_that_changed_no_graph_is_vacuous_in_every_report(tmp_path):
    """PASS would claim something was verified: the reports say VACUOUS (JUnit: a skipped case)."""
    r = ok_result()
    r.changed = 0
    assert r.ok and r.vacuous
    md = write_markdown(r, tmp_path / "r.md").read_text()
    assert "**VACUOUS**: the pass changed none of the 25 graphs" in md and "**PASS**" not in md
    _, suite, cases = _junit(r, tmp_path)
    assert suite.get("skipped") == "1" and cases["pass changed graphs"].find("skipped") is not None
    data = json.loads(write_json(r, tmp_path / "r.json").read_text())
    assert (data["examples"], data["changed"], data["vacuous"]) == (25, 0, True)
