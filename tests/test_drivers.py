"""Forked search drivers: Ctrl-C anywhere in the parent's event loop ends the run cleanly, and torch
killing the generator's own eager call is a torch finding, never the pass's verdict.

The CI failure this guards against: SIGINT arrived while the parent was inside ``on_example``
(rewriting the streamed JSON report), outside the ``select`` that alone caught it, and the run
died with a traceback instead of finishing with what the drivers had found.
"""

from __future__ import annotations

import json
import os
import signal
import time
from types import SimpleNamespace

import pytest
import torch
from hypothesis import HealthCheck, given, settings

from conformance.cli import HARNESS_FAULT_EXIT, main
from conformance.search.workers import run_drivers
from strategies import graphs
from strategies._build import eager as _eager_calls

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="drivers fork")


def _search(i, budget, make_events):
    found = SimpleNamespace(examples=0, interrupted=False)
    events = make_events(found)
    try:
        for _ in range(budget):
            found.examples += 1
            events.example(SimpleNamespace(ok=True), [])
            time.sleep(0.01)
    except KeyboardInterrupt:
        found.interrupted = True
    return found


def test_sigint_inside_the_example_callback_interrupts_cleanly():
    seen = []

    def on_example(ok):
        seen.append(ok)
        if len(seen) == 3:
            os.kill(os.getpid(), signal.SIGINT)  # delivered here, in the callback, not in select()
            time.sleep(0.05)

    before = signal.getsignal(signal.SIGINT)
    founds, crashed, interrupted = run_drivers(1, [10_000], _search, on_example, lambda v: None)
    assert interrupted and crashed is None
    assert len(founds) == 1 and founds[0].interrupted and 3 <= founds[0].examples < 10_000
    assert signal.getsignal(signal.SIGINT) is before  # the caller's handler is back


def _search_interrupted_twice(i, budget, make_events):
    """A terminal's Ctrl-C reaches the driver, and the parent forwards it too: the second SIGINT
    lands after the search has caught the first, while the driver writes up what it found."""
    found = SimpleNamespace(examples=1, interrupted=False)
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    except KeyboardInterrupt:
        found.interrupted = True
    os.kill(os.getpid(), signal.SIGINT)  # the second, during the write-up (repro scripts, the report)
    time.sleep(0.05)
    return found


def test_a_second_sigint_during_a_drivers_write_up_is_not_an_error():
    """make test's interrupted-run test failed now and then with a traceback instead of exit 130: the
    second SIGINT raised KeyboardInterrupt in the driver's write-up, which travelled to the parent as
    the driver's error."""
    founds, crashed, interrupted = run_drivers(1, [1], _search_interrupted_twice, lambda ok: None, lambda v: None)
    assert interrupted and crashed is None
    assert len(founds) == 1 and founds[0].interrupted


def test_uninterrupted_drivers_finish_their_budgets():
    founds, crashed, interrupted = run_drivers(2, [5, 7], _search, lambda ok: None, lambda v: None)
    assert not interrupted and crashed is None
    assert sorted(f.examples for f in founds) == [5, 7]


FORK_AFTER_OPENMP = """
import torch
from types import SimpleNamespace
from conformance.search.workers import run_drivers
from conformance.search.isolate import run_forked

torch.set_num_threads(2)
torch.nn.functional.gelu(torch.randn(1 << 20))  # the parent now holds an OpenMP thread team

def search(i, budget, make_events):
    found = SimpleNamespace(examples=0, interrupted=False)
    torch.nn.functional.gelu(torch.randn(1 << 20))  # a parallel kernel in the forked driver
    found.examples = 1
    return found

founds, crashed, _ = run_drivers(1, [1], search, lambda ok: None, lambda v: None)
assert crashed is None and founds[0].examples == 1
print(run_forked(lambda: float(torch.nn.functional.gelu(torch.ones(1 << 20)).sum()), timeout=60))
"""


def test_forked_children_run_parallel_kernels_after_the_parent_did():
    """A forked child entering an OpenMP region its parent had started waits forever (libgomp);
    the drivers and isolated examples run single-threaded, so it never happens (this hung CI)."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", FORK_AFTER_OPENMP], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert float(proc.stdout.strip()) > 0


def _segfault_on_float64_sin(monkeypatch):
    """A planted torch crash: the generator's eager ``sin`` of a float32 tensor (the dtype drawn most) kills the process."""
    eager = _eager_calls._eager

    def planted(target, args, kwargs):
        if target is torch.ops.aten.sin.default and args[0].dtype == torch.float32:
            os.kill(os.getpid(), signal.SIGSEGV)
        return eager(target, args, kwargs)

    monkeypatch.setattr(_eager_calls, "_eager", planted)


def test_a_crash_in_the_generators_eager_call_is_a_torch_finding_not_the_passs(tmp_path, monkeypatch, capsys):
    _segfault_on_float64_sin(monkeypatch)
    report = tmp_path / "r.json"
    code = main(["verify", "tests.passes.correct:identity", "--focus", "aten.sin.default", "--max-examples", "15",
                 "--seed", "0", "--device", "cpu", "--repro-dir", str(tmp_path), "--json", str(report)])
    out, err = capsys.readouterr()
    assert code == HARNESS_FAULT_EXIT, out + err
    result = json.loads(report.read_text())
    assert result["violations"] == [] and not result["isolated"]  # never blamed on the pass, nor rerun for it
    crashes = result["generator_crashes"]
    assert crashes and all(c["op"] == "aten.sin.default" and c["call"].startswith("aten.sin.default(float32")
                           and "SIGSEGV" in c["death"] for c in crashes), crashes
    assert result["examples"] == 15  # the search went on without the call (then the op), to its budget
    assert "torch finding (not the pass's)" in out and "crashed the interpreter" not in out + err


def test_a_call_to_avoid_is_never_made_and_its_draw_goes_elsewhere():
    seen = []

    @settings(max_examples=15, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(graphs(ops=[torch.ops.aten.sin.default, torch.ops.aten.cos.default], max_nodes=4, device="cpu"))
    def drawn(case):
        seen.extend(n.target for n in case.gm.graph.nodes if n.op == "call_function")

    with _eager_calls.watch_eager_calls(avoid=[_eager_calls.op_key(torch.ops.aten.sin.default)]):
        drawn()
    assert torch.ops.aten.cos.default in seen and torch.ops.aten.sin.default not in seen
    announced = []
    with _eager_calls.watch_eager_calls(announced.append):
        _eager_calls.run_eager(torch.ops.aten.sin.default, (torch.zeros(2, 3).t(),), {})
    assert announced == ["aten.sin.default(float32[3, 2] stride=(1, 3))", None]  # before the call, then done


def test_the_parent_draws_a_graph_in_the_runs_ir_before_it_forks_drivers(monkeypatch):
    """What a driver's first graph sets up (torch._dynamo's import by the first FakeTensorMode, the
    generator's and the tracer's caches) is lost with the driver unless the parent did it first: a
    search that found its bug in the first graph cost 2.2-2.5 s in a parent that had never drawn, 0.2-0.4 s
    after (2-core AMD EPYC). The warm-up draws safe ops only and calls no pass."""
    from conformance import verify
    from conformance.search import driver, warm

    order = []
    monkeypatch.setattr(driver, "warm_for_drivers", lambda ir: order.append(("warm", ir)))
    real = driver.run_drivers
    monkeypatch.setattr(driver, "run_drivers", lambda *a, **k: (order.append(("fork",)), real(*a, **k))[1])
    verify(lambda gm: gm, max_examples=2, seed=0, focus="none", repro_dir=None, device="cpu",
           ir="export")
    assert order == [("warm", "export"), ("fork",)], order
    assert set(warm._SAFE_OPS) == {torch.ops.aten.add.Tensor, torch.ops.aten.mul.Tensor, torch.ops.aten.relu.default}
    warm.warm_for_drivers("aten")  # draws here, once per process and IR
    assert warm.warm_for_drivers.cache_info().currsize >= 1 and "torch._dynamo" in __import__("sys").modules
