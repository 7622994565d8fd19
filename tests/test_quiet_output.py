"""Quiet output (issue 34, item 3): torch's warnings while the harness draws and runs graphs are
counted, never printed; a warning the pass raises is shown with its example. The warnings here are
planted: torch's C++ ``TORCH_WARN`` of ``var_mean``/``std`` with no degrees of freedom, which an
op called through ``torch.ops`` (as FX graphs call them) writes straight to file descriptor 2, and
which torch raises on every call (``scatter``'s ``reduce=`` warning, which the generator really
draws, is raised once per process, so no test could count on seeing it)."""

from __future__ import annotations

import json
import re
import textwrap
import warnings
from types import SimpleNamespace

import pytest
import torch

from conformance import verify
from conformance._warning_log import WarningLog, quietly, recording
from conformance.cli import main
from conformance.search import driver
from conformance import checker as checker_module
from conformance.search.isolate import run_forked

IDENTITY = "tests/passes/correct.py:identity"
DRAWN = "var_mean(): degrees of freedom is <= 0"  # planted in the generator's draws
RUN = "std(): degrees of freedom is <= 0"  # planted in the checker's runs of the graphs


def _torch_warns(op) -> None:
    """A C++ warning, as a graph's op raises it (through torch.ops: no Python warning handler)."""
    op(torch.ones(1), correction=1)


@pytest.fixture
def planted(monkeypatch):
    """Every draw of the search warns (DRAWN), and so does every run of a graph by the checker (RUN)."""
    graphs, call = driver.graphs, checker_module._call

    def drawing(**kwargs):
        return graphs(**kwargs).map(lambda case: (_torch_warns(torch.ops.aten.var_mean.correction), case)[1])

    def running(gm, inputs):
        _torch_warns(torch.ops.aten.std.correction)
        return call(gm, inputs)

    monkeypatch.setattr(driver, "graphs", drawing)
    monkeypatch.setattr(checker_module, "_call", running)


def _main(capfd, *args):
    """``main(args)`` in this process; what reached file descriptors 1 and 2 (torch's C++ warnings
    are written to fd 2 directly, and forked children share it)."""
    capfd.readouterr()
    code = main([str(a) for a in args])
    out, err = capfd.readouterr()
    return SimpleNamespace(returncode=code, stdout=out, stderr=err)


def _count_line(text: str):
    return re.search(r"^(\d+) warnings? from torch while drawing and running graphs: (\d+) kinds?", text, re.M)


def test_verify_prints_its_header_first_and_counts_torch_warnings_without_printing_them(planted, capfd):
    r = _main(capfd, "verify", IDENTITY, "--max-examples", 8, "--seed", 0, "--device", "cpu", "--focus", "none")
    assert r.returncode == 4  # the identity changes no graph
    assert r.stdout.splitlines()[0].startswith(f"fx-conformance verify {IDENTITY}: up to 8 examples")
    assert r.stderr == ""
    for text in (DRAWN, RUN, "degrees of freedom", "Warning"):
        assert text not in r.stdout, text
    line = _count_line(r.stdout)
    assert line, r.stdout
    # each of 8 graphs drawn (and more, rejected while drawing) and run twice by the checker
    assert int(line.group(1)) >= 8 + 2 * 8 and line.group(2) == "3"  # var_mean drawing; std original, result
    assert r.stdout[line.end():].startswith(" (-v lists them)\n")


def test_verbose_lists_each_kind_with_its_count_and_where(planted, capfd):
    r = _main(capfd, "verify", IDENTITY, "--max-examples", 8, "--seed", 0, "--device", "cpu", "--focus", "none", "-v")
    assert r.stderr == ""
    kinds = {m.group(2): int(m.group(1)) for m in re.finditer(r"^  (\d+) x UserWarning \((\w+)\): (.*)$", r.stdout, re.M)
             if "degrees of freedom" in m.group(3)}
    assert set(kinds) == {"generator", "original", "result"}, r.stdout
    assert kinds["original"] == kinds["result"] == 8  # one run each of the original and the result per graph
    assert kinds["generator"] >= 8
    assert re.search(rf"^  \d+ x UserWarning \(generator\): {re.escape(DRAWN)}", r.stdout, re.M)


PASSES = textwrap.dedent('''
    import warnings
    import torch

    def warns_on_odd(gm):
        """Warns on graphs with an odd number of call_function nodes; changes nothing."""
        calls = sum(n.op == "call_function" for n in gm.graph.nodes)
        if calls % 2:
            warnings.warn(f"odd graph: this pass assumes pairs")
        return gm

    def runs_a_warning_op(gm):
        """Torch warns inside the pass's own call: that warning is the pass's too."""
        torch.ops.aten.std.correction(torch.ones(1), correction=1)
        return gm
''')


@pytest.fixture
def passes(tmp_path):
    path = tmp_path / "warning_passes.py"
    path.write_text(PASSES)
    return path


def test_a_warning_the_pass_raises_is_shown_once_with_its_example_and_both_kinds_are_in_the_json(
        planted, passes, tmp_path, capfd):
    out = tmp_path / "r.json"
    r = _main(capfd, "verify", f"{passes}:warns_on_odd", "--max-examples", 12, "--seed", 0, "--device", "cpu",
              "--focus", "none", "--json", out)
    shown = re.findall(r"^  example (\d+): the pass warned: UserWarning: odd graph: this pass assumes pairs$",
                       r.stdout, re.M)
    assert len(shown) == 1, r.stdout  # once per distinct warning, however many graphs raised it
    assert "odd graph" not in r.stderr and "Warning" not in r.stderr
    report = json.loads(out.read_text())
    (warned,) = report["pass_warnings"]
    assert warned["category"] == "UserWarning" and warned["message"] == "odd graph: this pass assumes pairs"
    assert warned["example"] == int(shown[0]) and 1 <= warned["count"] <= 12
    assert re.search(rf"^the pass warned {warned['count']} times? \(1 kind", r.stdout, re.M)
    # the run's own warnings: counted by kind and where; the pass's warning is not among them
    kinds = {(k["where"], k["message"].split("(")[0]): k["count"] for k in report["warnings"]}
    assert all(set(k) == {"category", "message", "where", "count"} for k in report["warnings"])
    assert kinds[("generator", "var_mean")] >= 12 and kinds[("original", "std")] == 12
    assert not any("odd graph" in k["message"] for k in report["warnings"])
    assert report["warnings"] and sum(kinds.values()) == int(_count_line(r.stdout).group(1))


def test_torch_warning_inside_the_pass_call_is_the_passs(passes, capfd):
    result = verify(f"{passes}:runs_a_warning_op", max_examples=4, seed=0, device="cpu", focus="none",
                    repro_dir=None)
    (warned,) = result.pass_warnings
    assert warned["message"].startswith(RUN) and warned["example"] == 1 and warned["count"] == 4
    assert not any(k["message"].startswith(RUN) for k in result.warnings)
    assert "degrees of freedom" not in "".join(capfd.readouterr())


def test_isolated_examples_in_parallel_drivers_send_their_warnings_to_the_parent(planted, capfd):
    """--workers 2 --isolate: two forked drivers, each forking a child per example: every count
    crosses one or two process boundaries, and no child prints."""
    result = verify(IDENTITY, max_examples=6, seed=0, device="cpu", focus="none", workers=2, isolate=True,
                    repro_dir=None)
    counts = {(k["where"], k["message"].split("(")[0]): k["count"] for k in result.warnings}
    assert counts[("original", "std")] == counts[("result", "std")] == 6
    assert counts[("generator", "var_mean")] >= 6
    out, err = capfd.readouterr()
    assert "degrees of freedom" not in out + err


def _warns_here(put):
    """Called in a spawned worker (``Worker.call``): a C++ and a Python warning, then an answer."""
    _torch_warns(torch.ops.aten.var_mean.correction)
    warnings.warn("from the worker", RuntimeWarning)
    return 7


def test_a_spawned_workers_warnings_reach_the_parents_count(capfd):
    from conformance.adapters import load_pass
    from conformance.checker import Checker
    from conformance.search._spawn import Worker

    put = load_pass(IDENTITY)
    worker = Worker(put, Checker(put, device="cpu"), method="forkserver")
    log = WarningLog()
    try:
        with recording(log):
            assert quietly("discovery", worker.call, "tests.test_quiet_output:_warns_here", ()) == 7
    finally:
        worker.close()
    assert sorted((k["where"], k["category"], k["message"][:len(DRAWN)], k["count"]) for k in log.kinds()) == [
        ("discovery", "RuntimeWarning", "from the worker", 1), ("discovery", "UserWarning", DRAWN, 1)]
    out, err = capfd.readouterr()
    assert "degrees of freedom" not in out + err and "from the worker" not in out + err


def test_a_forked_child_counts_for_its_parent_only_when_the_parent_counts(capfd):
    def child():
        _torch_warns(torch.ops.aten.var_mean.correction)
        return "done"

    log = WarningLog()
    with recording(log):
        assert quietly("discovery", run_forked, child, None) == "done"
    assert [(k["where"], k["count"]) for k in log.kinds()] == [("discovery", 1)]
    assert "degrees of freedom" not in "".join(capfd.readouterr())
    assert run_forked(child, None) == "done"  # nobody counting: torch prints as it always does
    assert "degrees of freedom" in capfd.readouterr().err


def test_quietly_restores_the_warning_state_and_keeps_the_exception():
    class Boom(Exception):
        pass

    boom = Boom("x")

    def fails():
        _torch_warns(torch.ops.aten.var_mean.correction)
        raise boom

    def rude():
        warnings.simplefilter("ignore")  # a global change inside the scope is undone with it
        warnings.showwarning = print

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the host's: inside the scope warnings are counted, not raised
        before, shown = list(warnings.filters), warnings.showwarning
        log = WarningLog()
        with recording(log):
            with pytest.raises(Boom) as raised:
                quietly("oracle", fails)
            assert raised.value is boom
            assert warnings.filters == before and warnings.showwarning is shown
            quietly("oracle", rude)
        assert warnings.filters == before and warnings.showwarning is shown
    assert log.total == 1  # counted though the call raised (torch's handler flushes on the way out)


def test_verify_leaves_the_hosts_warning_state_as_it_was(tmp_path):
    """A user's pytest with warnings as errors: the pass's warning is recorded (not an execution
    failure), nothing leaks, and the host's filters and showwarning are the same objects after."""
    (tmp_path / "rude.py").write_text(textwrap.dedent('''
        import warnings

        def silences_everything(gm):
            warnings.warn("pay attention")
            warnings.simplefilter("ignore")  # changes the process's filters and leaves them changed
            return gm
    '''))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        filters, shown = warnings.filters, warnings.showwarning
        before = list(filters)
        result = verify(f"{tmp_path / 'rude.py'}:silences_everything", max_examples=4, seed=0, device="cpu",
                        focus="none", repro_dir=None)
        assert warnings.filters is filters and warnings.filters == before and warnings.showwarning is shown
    assert not result.violations and [w["message"] for w in result.pass_warnings] == ["pay attention"]


def test_where_torch_will_not_hand_the_call_over_it_still_runs_once_and_python_warnings_are_counted():
    """Under ``DisableTorchFunction`` torch.neg refuses the object: the call runs anyway (once), and
    what fails is never blamed on it."""
    calls = []

    def fn():
        calls.append(1)
        warnings.warn("python's own")
        return "value"

    log = WarningLog()
    with recording(log), torch._C.DisableTorchFunction():
        assert quietly("result", fn) == "value"
    assert calls == [1] and [(k["where"], k["message"]) for k in log.kinds()] == [("result", "python's own")]
