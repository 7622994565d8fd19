"""Campaigns on Ray (issue 37, items 2 and 3; ``conformance/campaign.py``'s ``run_on_ray``): each run a Ray
task on a real local Ray instance (2 CPUs, no GPU), started once for this module and used by every
test here as a caller's own ``ray.init()`` is: a run whose pass kills its worker is tried again, then
reported ``crashed`` while the others go on; a CUDA run on a cluster without a GPU is an error, not a
task that waits for ever; without Ray, ``--cluster`` is exit 2 and one line."""

from __future__ import annotations

import sys
import textwrap

import pytest

from conformance.campaign import findings, load_campaign, report, run_campaign, to_markdown
from conformance.cli import main

ray = pytest.importorskip("ray", reason="the cluster extra (make test installs it)")

# the pass's module ends the process that imports it: every worker that loads it dies
_CRASH = "import os\nos._exit(3)\n\n\ndef p(gm):\n    return gm\n"


@pytest.fixture(scope="module")
def ray_cluster():
    """One Ray for the module: 2 CPUs and no GPU whatever the machine has (the GPU test means the same
    on a CUDA machine), a small object store (runs return small records)."""
    assert not ray.is_initialized()
    ray.init(num_cpus=2, num_gpus=0, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
             object_store_memory=80 * 2**20)
    yield
    ray.shutdown()


def _file(tmp_path, body: str):
    (tmp_path / "crash.py").write_text(_CRASH)
    path = tmp_path / "c.toml"
    path.write_text(textwrap.dedent(body).replace("{crash}", str(tmp_path / "crash.py")))
    return path


def test_a_campaign_of_ray_tasks_reports_the_crash_of_a_worker_and_goes_on(ray_cluster, tmp_path):
    """Four jobs as four Ray tasks on two CPUs: a planted bug (violations), a pass whose import kills its
    worker (tried twice: ``retries=1``; then ``crashed``), a correct pass (vacuous) and a suite row
    (ok); progress comes as each finishes, and the Ray the caller started stays up."""
    path = _file(tmp_path, '''
        [[job]]
        target = "tests.passes.simple:add_to_sub"
        name = "add_to_sub"
        seeds = [1]
        examples = 20
        device = "cpu"
        options = { focus = "aten.add.Tensor", shrink = false }

        [[job]]
        target = "{crash}:p"
        name = "crash"
        examples = 5
        device = "cpu"

        [[job]]
        target = "tests.passes.simple:noisy_identity"
        name = "noisy"
        examples = 5
        device = "cpu"
        options = { focus = "none" }

        [[job]]
        suite = "torch-passes"
        rows = ["fx.Graph.eliminate_dead_code"]
        examples = 10
    ''')
    name, _, runs = load_campaign(path)
    seen = []
    records = run_campaign(runs, cluster="auto", retries=1, on_done=lambda rec, k, n: seen.append((rec["id"], k, n)))
    assert sorted(s[0] for s in seen) == sorted(r.id for r in runs) and [s[1:] for s in seen] == [(k, 4) for k in (1, 2, 3, 4)]
    verdicts = {r["id"]: r["verdict"] for r in records}
    assert verdicts == {"add_to_sub@1": "violations", "crash@0": "crashed", "noisy@0": "vacuous",
                        "fx.Graph.eliminate_dead_code@0": "ok"}, records
    assert "died on each of 2 tries" in records[1]["error"]
    assert "noise from the pass" in records[2]["stderr_tail"]  # a Ray worker's stderr is the run's record too
    assert findings(records) and findings(records)[0]["runs"] == ["add_to_sub@1"]
    doc = report(name, records, workers=2, seconds=1.0, db=None, cluster="auto")
    assert "4 runs on Ray cluster auto" in to_markdown(doc)
    assert ray.is_initialized()


def test_a_cuda_run_on_a_cluster_without_a_gpu_is_an_error_at_once(ray_cluster, tmp_path):
    path = _file(tmp_path, '''
        [[job]]
        target = "tests.passes.simple:add_to_sub"
        device = "cuda"
    ''')
    _, _, runs = load_campaign(path)
    [record] = run_campaign(runs, cluster="auto")
    assert record["verdict"] == "error" and "the Ray cluster has no GPU" in record["error"], record


def test_without_ray_the_cluster_option_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    path = _file(tmp_path, '''
        [[job]]
        target = "tests.passes.simple:add_to_sub"
    ''')
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    assert main(["campaign", str(path), "--cluster", "local", "--json", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["fx-conformance campaign: error: --cluster runs each job as a Ray task, and Ray is not installed: "
                   "pip install 'fx-conformance[cluster]'"]
    assert not (tmp_path / "r.json").exists()


def test_an_address_where_nothing_answers_is_one_line_and_exit_2_at_once(tmp_path, capsys):
    """Ray retries an address with nothing behind it for minutes (over 2 measured); the campaign says so
    at once."""
    path = _file(tmp_path, '''
        [[job]]
        target = "tests.passes.simple:add_to_sub"
    ''')
    assert main(["campaign", str(path), "--cluster", "127.0.0.1:1", "--json", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fx-conformance campaign: error: --cluster 127.0.0.1:1: nothing "
                                               "answers there"), err
