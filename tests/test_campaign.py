"""Campaigns (issue 37, item 2, the local pool; ``conformance/campaign.py``): a TOML list of jobs run as
one, a run that kills its worker reported and the rest carried on, the merged report's verdicts and
its findings deduplicated by minimal graph, and bad campaign files as one clear error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

from conformance import UsageError
from conformance.campaign import findings, graph_key, load_campaign, outcome, report, run_campaign, to_html, to_markdown

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CRASH = "import os\nos._exit(3)  # at import: the process that loads this pass dies\n\n\ndef p(gm):\n    return gm\n"


# a correct pass that writes to stderr (tests/passes/simple.py): vacuous, its noise kept in its record
_NOISY = '''[[job]]
target = "tests.passes.simple:noisy_identity"
name = "noisy"
examples = 5
device = "cpu"
options = { focus = "none" }
'''


def _campaign(tmp_path, body: str):
    (tmp_path / "crash.py").write_text(_CRASH)
    path = tmp_path / "c.toml"
    path.write_text(textwrap.dedent(body).replace("{noisy}", _NOISY))
    return path


def test_a_campaign_runs_every_job_reports_a_crash_and_merges_findings_by_minimal_graph(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    path = _campaign(tmp_path, '''
        [campaign]
        name = "four"

        [[job]]
        target = "tests.passes.simple:add_to_sub"
        name = "add_to_sub"
        seeds = [1, 2]
        examples = 20
        device = "cpu"
        options = { focus = "aten.add.Tensor", shrink = false }

        [[job]]
        target = "crash.py:p"
        examples = 5
        device = "cpu"

        {noisy}

        [[job]]
        suite = "torch-passes"
        rows = ["fx.Graph.eliminate_dead_code", "export.replace_set_grad_with_hop_pass"]
        examples = 10
    ''')
    name, head, runs = load_campaign(path)
    assert name == "four" and [r.id for r in runs] == [
        "add_to_sub@1", "add_to_sub@2", "crash.py:p@0", "noisy@0",
        "fx.Graph.eliminate_dead_code@0", "export.replace_set_grad_with_hop_pass@0"]
    seen = []
    records = run_campaign(runs, workers=2, on_done=lambda rec, k, n: seen.append((rec["id"], k, n)))
    assert sorted(s[0] for s in seen) == sorted(r.id for r in runs) and [s[1] for s in seen] == [1, 2, 3, 4, 5, 6]
    verdicts = {r["id"]: r["verdict"] for r in records}
    assert verdicts == {"add_to_sub@1": "violations", "add_to_sub@2": "violations",
                        "crash.py:p@0": "crashed", "noisy@0": "vacuous",
                        # the suite's verdicts: the row holds and fires; the other never fires, as its row says
                        "fx.Graph.eliminate_dead_code@0": "ok", "export.replace_set_grad_with_hop_pass@0": "vacuous"}, \
        records
    assert [r.get("never_fires") for r in records[4:]] == [False, True]
    assert records[3]["stderr_lines"] >= 5 and "noise from the pass" in records[3]["stderr_tail"]
    found = findings(records)  # each minimal graph once, naming the runs that met it
    met = {(f["graph_key"], run) for f in found for run in f["runs"]}
    assert met == {(v["graph_key"], r["id"]) for r in records for v in r.get("violations", ())}
    assert len({f["graph_key"] for f in found}) == len(found)
    doc = report(name, records, workers=2, seconds=1.0, db=None)
    assert doc["verdicts"] == {"violations": 2, "crashed": 1, "vacuous": 2, "ok": 1}
    assert "| crash.py:p@0 | crashed |" in to_markdown(doc) and "<td>crashed</td>" in to_html(doc)
    json.dumps(doc)  # the JSON report holds only plain values


def test_the_command_writes_the_reports_and_says_what_it_found(tmp_path):
    path = _campaign(tmp_path, '''
        [[job]]
        target = "tests.passes.simple:add_to_sub"
        name = "add_to_sub"
        examples = 10
        device = "cpu"
        options = { focus = "aten.add.Tensor", shrink = false }

        {noisy}
    ''')
    out = subprocess.run([sys.executable, "-m", "conformance.cli", "campaign", str(path), "-n", "2", "--json",
                          "r.json", "--markdown", "r.md"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), ROOT])})
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-3000:]
    assert "2 runs on 2 workers" in out.stdout
    assert "noisy@0: vacuous, changed 0 of 5 graphs" in out.stdout
    assert "add_to_sub@0: violations" in out.stdout and "report r.json" in out.stdout
    assert "noise from the pass" not in out.stdout + out.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["verdicts"] == {"vacuous": 1, "violations": 1} and (tmp_path / "r.md").exists()


@pytest.mark.parametrize("body, message", [
    ("[campaign]\nname = 'x'\n", "no \\[\\[job\\]\\] tables"),
    ("[[job]]\ntarget = 'a:b'\nsuite = 'torch-passes'\n", "one of them"),
    ("[[job]]\ntarget = 'a:b'\nseeds = 3\n", "seeds = 3, but should be a list of integers"),
    ("[[job]]\ntarget = 'a:b'\nexmples = 3\n", "unknown key 'exmples'"),
    ("[[job]]\nsuite = 'torch-passes'\nrows = ['no.such.row']\n", "'no.such.row' is not a row of torch-passes"),
    ("[[job]]\nsuite = 'mine'\n", "'mine' is no suite .* the suites are torch-passes"),
    ("[[job]]\ntarget = 'a:b'\n[[job]]\ntarget = 'a:b'\n", "listed twice"),
    ("[[job\n", "not TOML"),
])
def test_a_bad_campaign_file_is_one_clear_error(tmp_path, body, message):
    path = tmp_path / "c.toml"
    path.write_text(body)
    with pytest.raises(UsageError, match=message):
        load_campaign(path)


def test_the_command_refuses_a_bad_file_with_exit_2(tmp_path):
    (tmp_path / "c.toml").write_text("[[job]]\nseeds = [0]\n")
    out = subprocess.run([sys.executable, "-m", "conformance.cli", "campaign", "c.toml"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": ROOT})
    assert out.returncode == 2 and "give target =" in out.stderr, out.stderr


def test_one_graph_under_other_node_names_is_one_finding():
    a = "def forward(self, x):\n    add = torch.ops.aten.add.Tensor(x, x);  x = None\n    return (add,)"
    b = "def forward(self, arg0_1):\n    add_1 = torch.ops.aten.add.Tensor(arg0_1, arg0_1);  arg0_1 = None\n    return (add_1,)"
    c = "def forward(self, x):\n    sub = torch.ops.aten.sub.Tensor(x, x);  x = None\n    return (sub,)"
    assert graph_key(a) == graph_key(b) != graph_key(c)

    def rec(run, graph, prop="values"):
        return {"id": run, "verdict": "violations",
                "violations": [{"property": prop, "message": f"{prop} differ", "graph": graph, "graph_key": graph_key(graph)}]}

    found = findings([rec("p@0", a), rec("p@1", b, "aliasing"), rec("q@0", c)])
    assert [(f["runs"], f["properties"]) for f in found] == [(["p@0", "p@1"], ["values", "aliasing"]), (["q@0"], ["values"])]


def test_a_runs_accepted_findings_are_their_first_lines_in_the_record():
    """A run whose only violations are findings its row accepts is ``known``, each finding by its first
    line (the record held each Violation's repr, its graphs included: 2.6 KB an entry); its
    violations keep their graph and the graph's key."""
    from conformance._result import VerifyResult, Violation

    graph = "def forward(self, x):\n    return (x,)"
    known = Violation("validity", "running the transformed graph raised RuntimeError: boom\nmore", graph_before=graph)
    result = VerifyResult(target="p", examples=9, changed=4, known=[known])
    assert outcome(result) == {"verdict": "known", "examples": 9, "changed": 4, "changed_dead_code_only": 0, "rewrites": 4,
                               "violations": [], "known": ["running the transformed graph raised RuntimeError: boom"]}
    result.violations = [Violation("values", "output[0] differs\ndetail", graph_before=graph)]
    assert outcome(result)["verdict"] == "violations" and outcome(result)["violations"] == [
        {"property": "values", "message": "output[0] differs", "graph": graph, "graph_key": graph_key(graph)}]
    assert outcome(VerifyResult(target="p", examples=9, changed=0))["verdict"] == "vacuous"
    # only dead code removed is no verdict either, unless that is the pass's job
    assert outcome(VerifyResult(target="p", examples=9, changed=3, changed_dead_code_only=3))["verdict"] == "vacuous"
    assert outcome(VerifyResult(target="p", examples=9, changed=3, changed_dead_code_only=3,
                                options={"dce_pass": True}))["verdict"] == "ok"


class _FakeRay:
    """Ray as run_on_ray uses it, already initialised, with a GPU: it records each task's options and
    answers each run with a record of its own."""

    class exceptions:  # noqa: N801 - ray.exceptions
        class RayError(Exception):
            pass

        class RayTaskError(RayError):
            pass

    def __init__(self):
        self.options = []

    def is_initialized(self):
        return True

    def cluster_resources(self):
        return {"CPU": 2.0, "GPU": 1.0}

    def remote(self, fn):
        fake = self

        class Task:
            def options(self, **kw):
                fake.options.append(kw)
                return SimpleNamespace(remote=lambda run, db, readonly: run)

        return Task()

    def wait(self, pending, num_returns=1):
        return pending[:num_returns], pending[num_returns:]

    def get(self, run):
        return {"id": run.id, "verdict": "ok"}


def test_each_ray_task_asks_for_one_cpu_a_gpu_where_its_run_is_on_cuda_and_the_retries(monkeypatch):
    from conformance import campaign as C

    fake = _FakeRay()
    monkeypatch.setattr(C, "ray_module", lambda: fake)
    runs = [C.Run("gpu@0", 0, 5, target="m:p", device="cuda"), C.Run("cpu@0", 0, 5, target="m:p", device="cpu"),
            C.Run("auto@0", 0, 5, target="m:p")]
    records = run_campaign(runs, cluster="auto", retries=3)
    assert [r["id"] for r in records] == ["gpu@0", "cpu@0", "auto@0"]
    assert fake.options == [dict(num_cpus=1, num_gpus=g, max_retries=3, retry_exceptions=False, name=n)
                            for g, n in ((1, "gpu@0"), (0, "cpu@0"), (0, "auto@0"))]

