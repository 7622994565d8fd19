"""``fx-conformance verify`` and ``pytest --fx-pass`` as a user runs them: in subprocesses where the
process is the point (exit codes and one-line errors, a repro script run on its own, Ctrl-C, the
pytest plugin), else the CLI's ``main()`` in-process (``_main``: the same output and exit code,
without a fresh interpreter's import and probe drawing, 2-5 s a call)."""

from __future__ import annotations

import json
import os
import pathlib
import re
import runpy
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from conformance.cli import main

PASSES = textwrap.dedent('''
    import torch
    aten = torch.ops.aten

    NOT_COMMUTATIVE = {aten.sub.Tensor, aten.div.Tensor, aten.lt.Tensor, aten.gt.Tensor, aten.atan2.default,
                       aten.remainder.Tensor, aten.fmod.Tensor, aten.pow.Tensor_Tensor}

    def swap_sub(gm):
        """Swaps the operands of binary ops as if all were commutative (a planted operand swap)."""
        for n in gm.graph.nodes:
            if n.target in NOT_COMMUTATIVE and isinstance(n.args[1], torch.fx.Node):
                n.args = (n.args[1], n.args[0]) + tuple(n.args[2:])
        return gm

    def identity(gm):
        return gm

    def clean_up_only(gm):
        """A matcher whose rewrite never fires on these graphs, then the clean-up every pass ends with:
        all it ever changes is dead code."""
        for n in gm.graph.nodes:
            if n.target == aten.lgamma.default and n.args[0].target == aten.digamma.default:
                raise AssertionError("never drawn")
        gm.graph.eliminate_dead_code()
        gm.recompile()
        return gm

    class Settings:
        def __init__(self):
            self.debug = False

    def make_settings():
        return Settings()

    def trt_style(gm, settings):
        """Torch-TensorRT's current form (needs a settings object from a factory): its input-as-output repair."""
        from reference_lowering.passes import repair_input_as_output

        assert isinstance(settings, Settings)
        return repair_input_as_output(gm, ())

    def reinplace_neg(gm):
        """neg -> neg_ on a fresh pointwise result nothing else reads: values stay right, the
        functional contract breaks. (Without the one-user test, a focused search finds
        atan2(neg(neg(y)), y) where y = neg(x): the write changes what atan2 reads.)"""
        for n in gm.graph.nodes:
            a = n.args[0] if n.target == aten.neg.default else None
            if isinstance(a, torch.fx.Node) and isinstance(a.target, torch._ops.OpOverload) \
                    and torch.Tag.pointwise in a.target.tags and len(a.users) == 1:
                n.target = aten.neg_.default
        gm.recompile()
        return gm

    def plus_one(gm):
        """Adds 1 to every output: wrong on every graph (a plain bug)."""
        out = next(n for n in gm.graph.nodes if n.op == "output")
        with gm.graph.inserting_before(out):
            out.args = (tuple(gm.graph.call_function(aten.add.Tensor, (a, 1)) for a in out.args[0]),)
        gm.recompile()
        return gm

    def scale_outputs(gm, scale):
        """Multiplies every output by ``scale`` (an extra argument): leaves the graph alone for scale=1."""
        if scale == 1:
            return gm
        out = next(n for n in gm.graph.nodes if n.op == "output")
        with gm.graph.inserting_before(out):
            out.args = (tuple(gm.graph.call_function(aten.mul.Tensor, (a, scale)) for a in out.args[0]),)
        gm.recompile()
        return gm

    from contextlib import contextmanager

    _INSIDE = []

    @contextmanager
    def inside(fake_mode):
        """The context scaled_inside needs (as Inductor passes need V.fake_mode)."""
        assert fake_mode is not None
        _INSIDE.append(fake_mode)
        try:
            yield
        finally:
            _INSIDE.pop()

    def scaled_inside(gm, scale):
        if not _INSIDE:
            raise RuntimeError("called outside its context")
        return scale_outputs(gm, scale)
''')


@pytest.fixture(scope="module")
def passes(tmp_path_factory):
    path = tmp_path_factory.mktemp("user") / "user_passes.py"
    path.write_text(PASSES)
    return path


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "conformance.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=600)


def _main(capsys, *args):
    """``main(args)`` in this process, as ``_cli`` reports a process: returncode, stdout, stderr."""
    capsys.readouterr()
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return SimpleNamespace(returncode=code, stdout=out, stderr=err)


@pytest.mark.parametrize("args, code", [(["--help"], 0), (["verify", "--help"], 0), (["run", "--help"], 0),
                                        (["prove", "--help"], 0), (["verify"], 2), (["verify", "x:y", "--seed", "z"], 2)],
                         ids=["help", "verify-help", "run-help", "prove-help", "no-target", "bad-seed"])
def test_help_and_usage_errors_do_not_import_torch(args, code):
    """``--help`` and a usage error answer at once (issue 57: ``fx-conformance --help`` took 9.4 s, all
    of it importing torch; 0.14 s now on the 2-core Intel Xeon): the parser is built from torch-free
    tables (``conformance._signatures``, ``_result``, ``profiles``)."""
    probe = ("import sys; from conformance.cli import main; code = main(sys.argv[1:]); "
             "sys.stdout.flush(); print('TORCH' if 'torch' in sys.modules else 'NO-TORCH', code)")
    r = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=120)
    assert r.stdout.split()[-2:] == ["NO-TORCH", str(code)], (r.stdout[-300:], r.stderr[-300:])


def test_bad_target_is_one_line_and_exit_2(passes, capsys):
    r = _cli("verify", "no.such.module:fn")  # as a user runs it: one line, no traceback from the process
    assert r.returncode == 2 and "Traceback" not in r.stdout + r.stderr
    assert r.stderr.strip().startswith("fx-conformance verify: error:") and len(r.stderr.strip().splitlines()) == 1
    for target in (f"{passes}:missing", "no_colon", f"{passes.parent}/nope.py:fn"):  # the same code, in-process
        assert main(["verify", target]) == 2, target
        out, err = capsys.readouterr()
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("fx-conformance verify: error:"), err
        assert "Traceback" not in out + err
    assert main(["verify", f"{passes}:identity", "--graphs", "nope"]) == 2


def test_extra_arguments_and_a_context_from_the_command_line_reach_the_run_and_the_repro(passes, tmp_path, capsys):
    base = ("verify", f"{passes}:scaled_inside", "--max-examples", "15", "--seed", "0", "--focus", "none",
            "--repro-dir", tmp_path)
    r = _main(capsys, *base)  # a pass that cannot be called: one line naming what it lacks
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--pass-arg scale=VALUE" in r.stderr, \
        r.stdout + r.stderr
    r = _main(capsys, *base, "--pass-arg", "scale=1", "--no-shrink")  # callable now, but it needs its context
    assert r.returncode == 1 and "called outside its context" in r.stdout, r.stdout + r.stderr
    r = _main(capsys, *base, "--pass-arg", "scale=1", "--context", f"{passes}:inside")
    assert r.returncode == 4 and "VACUOUS" in r.stdout, r.stdout + r.stderr  # ran, and left every graph alone
    # unshrunk: the repro is what is checked here (shrinking took 6 s of this test: test_repro.py)
    r = _main(capsys, *base, "--pass-arg", "scale=2", "--context", f"{passes}:inside", "--json", tmp_path / "r.json",
              "--no-shrink")
    assert r.returncode == 1 and "values violated" in r.stdout, r.stdout + r.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["options"]["pass_kwargs"] == {"scale": 2} and report["options"]["context"].endswith(":inside")
    script = next(v["repro_path"] for v in report["violations"] if v["property"] == "values")
    # the script's main() here: that a repro runs on its own, in a process, is
    # test_bug_found_reported_and_reproduced's (this one saves that process's 3 s of start-up)
    capsys.readouterr()
    code = runpy.run_path(script, run_name="repro")["main"]()
    out = capsys.readouterr().out
    assert code == 1 and "values: output[0]" in out, out  # the pass got scale=2, inside its context
    r = _main(capsys, *base, "--pass-arg", "scale")
    assert r.returncode == 2 and "should look like NAME=VALUE" in r.stderr


def test_a_module_in_the_current_directory_is_a_target_without_pythonpath(tmp_path):
    """``fx-conformance verify mymod:fn`` finds mymod.py where it runs, as ``python -m`` would (the console
    script's path starts at its bin directory)."""
    (tmp_path / "here_passes.py").write_text("def identity(gm):\n    return gm\n")
    script = pathlib.Path(sys.executable).parent / "fx-conformance"
    if not script.exists():
        pytest.skip("no fx-conformance console script beside this Python")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([str(script), "verify", "here_passes:identity", "--max-examples", "3", "--focus", "none",
                        "--allow-vacuous", "--repro-dir", str(tmp_path)], capture_output=True, text=True,
                       cwd=tmp_path, env=env, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def test_a_pass_that_changes_nothing_is_vacuous_exit_4(passes, tmp_path, capsys):
    """No counterexample, but no graph changed: not OK but VACUOUS, exit 4 (--allow-vacuous: 0).
    --focus none: the hint is the same after discovery, which found nothing for identity in 6 s of
    CPU (2-core AMD EPYC); test_bug_found_reported_and_reproduced runs the default, discovery."""
    r = _main(capsys, "verify", f"{passes}:identity", "--max-examples", "30", "--seed", "1", "--focus", "none",
              "--repro-dir", tmp_path)
    assert r.returncode == 4, r.stdout + r.stderr
    assert "the pass changed 0 of 30 graphs (0%)" in r.stdout and "OK:" not in r.stdout
    assert r.stdout.rstrip().splitlines()[-1].startswith("VACUOUS: the pass changed none of the 30 graphs")
    assert "try --focus" in r.stdout
    assert main(["verify", f"{passes}:identity", "--max-examples", "5", "--seed", "1", "--focus", "none",
                 "--repro-dir", str(tmp_path), "--allow-vacuous"]) == 0


def test_a_pass_that_only_removes_dead_code_is_vacuous_unless_that_is_its_job(passes, tmp_path, capsys):
    """Every change dead-code removal: its rewrite never fired, so the run is VACUOUS (exit 4), and the
    fire line, the JSON and the last line say why; torch's own dead-code elimination with --dce-pass
    is a verdict (exit 0), the same graphs counted as acted on."""
    report = tmp_path / "r.json"
    r = _main(capsys, "verify", f"{passes}:clean_up_only", "--max-examples", "30", "--seed", "1", "--focus", "none",
              "--device", "cpu", "--repro-dir", tmp_path, "--json", report)
    assert r.returncode == 4, r.stdout + r.stderr
    doc = json.loads(report.read_text())
    assert doc["vacuous"] and doc["rewrites"] == 0 and doc["changed"] == doc["changed_dead_code_only"] > 0, doc
    assert doc["dce_pass"] is False and doc["options"]["dce_pass"] is False
    k = doc["changed"]
    assert f"the pass changed {k} of 30 graphs ({100 * k / 30:.0f}%): rewrites in 0 (0%), dead code only in {k}" \
        in r.stdout, r.stdout
    last = r.stdout.rstrip().splitlines()[-1]
    assert last.startswith(f"VACUOUS: in each of the {k} graphs it changed (of 30), the pass only removed dead "
                           f"code: its rewrite never fired"), last
    assert "--dce-pass" in last and "OK:" not in r.stdout
    r = _main(capsys, "verify", "torch.fx.graph:Graph.eliminate_dead_code", "--max-examples", "30", "--seed", "1",
              "--focus", "none", "--device", "cpu", "--repro-dir", tmp_path, "--dce-pass", "--json", report)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(report.read_text())
    assert not doc["vacuous"] and doc["dce_pass"] and doc["rewrites"] == 0 and doc["changed"] > 0, doc
    assert r.stdout.rstrip().splitlines()[-1].startswith("OK: no counterexample in 30 graphs"), r.stdout


@pytest.mark.parametrize("isolate", [(), ("--isolate",)], ids=["in-process", "isolated"])
def test_a_fault_of_the_harness_exits_3_in_one_line(passes, tmp_path, capsys, monkeypatch, isolate):
    """The oracle raising (a bug of ours, planted) is no verdict on the pass: exit 3, one line naming the
    harness, not 1 and a violation; in a forked child as in this process."""
    from conformance import oracle

    def broken(self, *args, **kwargs):
        raise RuntimeError("planted fault in the oracle")

    monkeypatch.setattr(oracle.Oracle, "output", broken)
    r = _main(capsys, "verify", f"{passes}:plus_one", "--max-examples", "10", "--seed", "0", "--focus", "none",
              "--repro-dir", tmp_path, *isolate)
    assert r.returncode == 3, r.stdout + r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("fx-conformance verify: harness fault: the harness failed while "
                                                   "checking example 1"), r.stderr
    assert "RuntimeError: planted fault in the oracle" in lines[0] and "Traceback" not in r.stdout + r.stderr
    assert "FAIL" not in r.stdout and not list(tmp_path.glob("*.py"))  # no verdict, no repro


def test_bug_found_reported_and_reproduced(passes, tmp_path, capsys):
    # the search in this process (the README's transcript runs the command, and shows its shrinking:
    # unshrunk here, the reports and the repro are what is checked); the repro in its own
    out = tmp_path / "out"
    # seed 2: values at graph 2 (a swapped broadcast can break validity first, as at seed 1)
    r = _main(capsys, "verify", f"{passes}:swap_sub", "--seed", "2", "--no-shrink", "--repro-dir", out / "repro",
              "--json", out / "r.json", "--junit", out / "r.xml", "--markdown", out / "r.md")
    assert r.returncode == 1, r.stdout + r.stderr
    # values at least (a swapped broadcast can break validity too, as a search under load once found)
    assert "values violated by a graph (not shrunk" in r.stdout and re.search(r"FAIL: \d propert", r.stdout)
    assert "graph before the pass" in r.stdout
    assert re.search(r"aten\.(sub|div|lt|gt|atan2|remainder|fmod|pow)\.", r.stdout)  # the swapped op is shown
    report = json.loads((out / "r.json").read_text())
    assert report["schema_version"] == 1 and report["ok"] is False and report["seed"] == 2
    assert report["properties"]["values"]["violated"] is True
    script = next(v["repro_path"] for v in report["violations"] if v["property"] == "values")
    # how the search drew is in the report, and the script says it too
    focused = [o["op"] for o in report["focus"]["ops"]]
    assert report["focus"]["mode"] == "auto" and focused
    assert f"Found by the search with seed 2, focused (auto) on {focused[0]}" in pathlib.Path(script).read_text()
    root = ET.parse(out / "r.xml").getroot()
    assert root.find("testsuite").get("failures") == str(len(report["violations"]))
    assert "values" in (out / "r.md").read_text()
    # The written script rebuilds the minimal graph and shows the same failure on its own.
    repro = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=300)
    assert repro.returncode == 1, repro.stdout + repro.stderr
    assert "graph before the pass" in repro.stdout and "graph after the pass" in repro.stdout
    assert re.search(r"^values: output\[\d+\]", repro.stdout, re.M), repro.stdout


# Hypothesis profiles for plugin runs, which test the wiring (options reach the checkers, results
# reach pytest): a run that must pass draws 6 graphs per property; one that must fail draws up to 10
# and stops at the first failure, unshrunk (its planted bugs are caught at graph 1, the contract
# drawn rich in neg, and 4, dynamic; 10, not `ci`'s 25: the values test beside dynamic checked 25
# dynamic graphs, 3.5 s of CPU on a 2-core AMD EPYC). Each run is a fresh interpreter (4-5 s of CPU before
# the first graph), so a run selects (-k) the tests its assertions read.
SMOKE_PROFILE = textwrap.dedent('''
    from hypothesis import Phase, settings
    settings.register_profile("smoke", max_examples=6, derandomize=True, database=None, deadline=None)
    settings.register_profile("find", max_examples=10, derandomize=True, database=None, deadline=None,
                              phases=(Phase.explicit, Phase.generate))
''')


def _pytest(*args, cwd, profile):
    (cwd / "smoke_profile.py").write_text(SMOKE_PROFILE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(cwd), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "smoke_profile",
                           f"--hypothesis-profile={profile}", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=600)


def test_a_pytest_run_that_asks_nothing_of_the_plugin_imports_no_torch(tmp_path):
    """The plugin loads in every pytest run where fx-conformance is installed: it leaves torch (and
    its 3-5 s import) to runs that ask for fx-conformance."""
    (tmp_path / "test_host.py").write_text("import sys\n\n\ndef test_no_torch():\n"
                                           "    assert 'torch' not in sys.modules, 'imported at start-up'\n")
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_host.py"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:]
    assert re.search(r"^fx-conformance: torch \S+, triton \S+, hypothesis \S+, profile default$", r.stdout, re.M), \
        r.stdout[:2000]


def test_a_plain_hypothesis_test_keeps_its_settings_on_ci(tmp_path):
    """The plugin registers profiles of its own names only: with CI set, Hypothesis loads its own
    ``ci`` profile (100 examples), not ours (25), and no private Hypothesis function is patched."""
    (tmp_path / "test_host.py").write_text(textwrap.dedent('''
        from hypothesis import given, settings, strategies as st
        from hypothesis.internal.conjecture import providers

        ORIGINAL = providers._get_local_constants
        RUNS = []


        @given(st.integers())
        def test_plain(x):
            RUNS.append(x)


        def test_its_settings():
            assert settings.default.max_examples == 100 and settings.default.derandomize
            assert len(RUNS) == 100
            assert providers._get_local_constants is ORIGINAL
    '''))
    env = {k: v for k, v in os.environ.items() if k != "HYPOTHESIS_PROFILE"}
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "test_host.py"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120, env=dict(env, CI="true"))
    assert r.returncode == 0, r.stdout[-3000:]
    assert "2 passed" in r.stdout


def test_our_profiles_mean_the_same_with_ci_set():
    """With CI set, Hypothesis loads its ``ci`` profile (derandomized, no database) before ours are
    registered; ``fx-dev`` and ``fx-nightly`` stay random and keep their database (they inherited
    ``ci``'s, so a CI machine's nightly kept nothing and drew the same graphs at every seed), and
    ``fx-ci`` is derandomized because it says so."""
    script = textwrap.dedent('''
        import runpy
        from hypothesis import settings
        runpy.run_path("conformance/profiles.py")
        assert settings.default.derandomize  # Hypothesis's ci profile: the case under test
        for name in ("fx-dev", "fx-ci", "fx-nightly"):
            p = settings.get_profile(name)
            print(name, p.derandomize, p.database is not None, p.max_examples)
    ''')
    env = {k: v for k, v in os.environ.items() if k != "HYPOTHESIS_PROFILE"}
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                       cwd=Path(__file__).parent.parent, env=dict(env, CI="true"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines() == ["fx-dev False True 50", "fx-ci True False 25", "fx-nightly False True 1000"]


def test_pytest_plugin_runs_the_suite_against_a_pass(passes, tmp_path):
    # Identity changes no graph, focused or not: --fx-focus none (the default focus, discovery, is the
    # fixture's: test_the_plugin_discovers_focus_for_aten_graphs_and_none_where_it_draws_no_static_aten_graph).
    # A failing run is the next test's (a contract) and test_pytest_plugin_checks_dynamic_with_fx_dynamic's.
    # One process: the whole suite passes, and without --fx-allow-vacuous the exit is 4 (a second run
    # with it, 5 s of start-up, is test_fx_allow_vacuous_makes_a_vacuous_run_exit_0's, in-process).
    run = _pytest(f"--fx-pass={passes}:identity", "--fx-specials", "relaxed", "--fx-focus", "none", cwd=tmp_path,
                  profile="smoke")
    assert run.returncode == 4, run.stdout[-3000:]
    assert "4 passed, 2 skipped" in run.stdout and "specials: relaxed" in run.stdout  # contracts, dynamic skipped
    # identity changes nothing: the fire line says so
    assert "the pass changed 0 of 24 graphs (0%)" in run.stdout
    assert "VACUOUS: the pass changed none of the 24 graphs" in run.stdout
    assert "(allowed: --fx-allow-vacuous)" not in run.stdout


def test_fx_allow_vacuous_makes_a_vacuous_run_exit_0(monkeypatch):
    """--fx-allow-vacuous as pytest_configure reads it: the VACUOUS line says it was allowed and the
    exit status stays 0 (without it: 4, as the run above shows from a process)."""
    from conformance import pytest_plugin

    registered = {}
    for allow in (True, False):
        options = {"fx_pass": "m:p", "fx_allow_vacuous": allow}
        config = SimpleNamespace(getoption=lambda name, default=None: options.get(name, default),
                                 addinivalue_line=lambda *a: None, args_source=pytest.Config.ArgsSource.ARGS,
                                 pluginmanager=SimpleNamespace(register=lambda p, name: registered.update({allow: p})))
        pytest_plugin.pytest_configure(config)
    for allow, fire in registered.items():
        fire.pytest_runtest_logreport(SimpleNamespace(user_properties=[("fx_examples", 6), ("fx_changed", 0)]))
        lines = []
        fire.pytest_terminal_summary(SimpleNamespace(write_line=lines.append))
        assert lines[0] == "the pass changed 0 of 6 graphs (0%)", lines
        assert lines[1].startswith("VACUOUS: the pass changed none of the 6 graphs")
        assert lines[1].endswith(" (allowed: --fx-allow-vacuous)") is allow
        session = SimpleNamespace(exitstatus=0)
        fire.pytest_sessionfinish(session, 0)
        assert session.exitstatus == (0 if allow else 4)
    failed = SimpleNamespace(exitstatus=1)  # a failure is never turned into a vacuous run
    registered[False].pytest_sessionfinish(failed, 1)
    assert failed.exitstatus == 1



@pytest.mark.parametrize("dce_pass", [False, True])
def test_the_plugin_counts_dead_code_only_apart_and_a_run_of_it_alone_is_vacuous(dce_pass):
    """--fx-pass's fire line gives rewrites and dead-code-only graphs apart (as verify's does); a run
    whose every change removed dead code is VACUOUS (exit 4) unless --fx-dce-pass says that is the
    pass's job; one rewrite among them is a verdict either way."""
    from conformance import pytest_plugin

    for rewrites in (0, 1):
        registered = {}
        options = {"fx_pass": "m:p", "fx_dce_pass": dce_pass}
        config = SimpleNamespace(getoption=lambda name, default=None: options.get(name, default),
                                 addinivalue_line=lambda *a: None, args_source=pytest.Config.ArgsSource.ARGS,
                                 pluginmanager=SimpleNamespace(register=lambda p, name: registered.update({name: p})))
        pytest_plugin.pytest_configure(config)
        fire = registered["fx-conformance-fire"]
        fire.pytest_runtest_logreport(SimpleNamespace(user_properties=[
            ("fx_examples", 10), ("fx_changed", 4 + rewrites), ("fx_dead_code_only", 4)]))
        lines = []
        fire.pytest_terminal_summary(SimpleNamespace(write_line=lines.append))
        assert lines[0] == (f"the pass changed {4 + rewrites} of 10 graphs ({40 + 10 * rewrites}%): rewrites in "
                            f"{rewrites} ({10 * rewrites}%), dead code only in 4"), lines
        vacuous = not rewrites and not dce_pass
        assert len(lines) == 1 + vacuous and (not vacuous or "only removed dead code" in lines[1]), lines
        session = SimpleNamespace(exitstatus=0)
        fire.pytest_sessionfinish(session, 0)
        assert session.exitstatus == (4 if vacuous else 0)


def test_the_plugin_records_whether_a_change_was_dead_code_alone(monkeypatch):
    """record_fire logs (changed, dead code only) per graph, and the report's user properties carry
    both counts to the controller."""
    from conformance import pytest_plugin
    from conformance._result import Verdict

    monkeypatch.setenv("PYTEST_CURRENT_TEST", "t.py::x (call)")
    for changed, dead in ((0, False), (3, False), (2, True), (1, True)):
        pytest_plugin.record_fire(Verdict(changed=changed, dead_code_only=dead))
    assert pytest_plugin.FIRE.pop("t.py::x") == [(False, False), (True, False), (True, True), (True, True)]

def test_every_verify_option_reaches_the_run(passes, tmp_path, capsys):
    """The options a user types land in the run: the JSON report records each, the property table
    holds exactly the selected properties, the settings factory reaches an fn(gm, settings) pass."""
    report = tmp_path / "r.json"
    r = _main(capsys, "verify", f"{passes}:trt_style", "--max-examples", "12", "--seed", "2", "--graphs", "mutating",
              "--no-special-values", "--no-constants", "--ensure", "no-input-as-output",
              "--properties", "values,mutations", "--signature", "gm-settings",
              "--settings-factory", f"{passes}:make_settings", "--device", "cpu", "--timeout", "5", "--isolate",
              "-n", "2", "--no-shrink", "--focus", "none", "--json", report, "--repro-dir", tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads(report.read_text())
    opts = data["options"]
    assert opts["shrink"] is False and data["focus"]["mode"] == "none"  # no discovery (5 s on mutating graphs)
    assert (opts["graphs"], opts["special_values"], opts["constants"]) == ("mutating", False, False)
    assert (opts["ensure"], opts["signature"], opts["device"]) == (["no-input-as-output"], "gm-settings", "cpu")
    assert (opts["timeout"], opts["isolate"], opts["workers"]) == (5.0, True, 2)
    assert sorted(data["properties"]) == ["contracts:no-input-as-output", "mutations", "values"]
    assert data["examples"] == 12 and data["isolated"] is True


def test_selected_properties_and_contracts_decide_the_verdict(passes, tmp_path, capsys):
    """A pass with right values that breaks `functional`: passes on values alone, fails the contract.
    (The CLI's main() in-process: the other tests here run it as a process.) Drawn rich in neg, the
    op it rewrites (no discovery: 7 s of CPU on a 2-core AMD EPYC, and not what is tested here): it
    changes 25 of the 60 graphs at seed 0, and breaks the contract at graph 2 (unshrunk: the verdict
    is what is checked)."""
    common = ["--max-examples", "60", "--seed", "0", "--repro-dir", str(tmp_path)]
    neg = [f"{passes}:reinplace_neg", "--focus", "aten.neg.default"]
    assert main(["verify", *neg, "--properties", "values", *common]) == 0
    assert re.search(r"the pass changed [1-9]\d* of 60 graphs", capsys.readouterr().out)  # it ran, and rewrote
    assert main(["verify", *neg, "--properties", "values", "--ensure", "functional", "--no-shrink", *common]) == 1
    assert "contracts:functional violated by a graph (not shrunk" in capsys.readouterr().out
    # wrong values (on every graph: 20 show it), but values were not asked for
    assert main(["verify", f"{passes}:plus_one", "--properties", "mutations", "--focus", "none",
                 *common, "--max-examples", "20"]) == 0
    # the form needs a factory: a usage error
    assert main(["verify", f"{passes}:trt_style", "--signature", "gm-settings", *common]) == 2
    assert "settings" in capsys.readouterr().err


def test_pytest_plugin_with_xdist_and_a_contract(passes, tmp_path):
    # The fixture is set up in the worker; the failure, and the fire counts, reach the controller with
    # the reports. One worker: a second doubled the run's CPU (each worker imports torch and warms the
    # generator up) and shows nothing more. Drawn rich in neg (an explicit focus: no discovery, which is
    # test_search.py's: workers discovering one pass wait for the first), the contract test fails at
    # the first graph; validity, run beside it, passes (each test judges its own property).
    # One run: a correct pass on mutating graphs in a second run (repair_input_as_output, 10 s of CPU
    # on a 2-core AMD EPYC) showed nothing more from a process: that --fx-graphs mutating and
    # --fx-ensure reach the fixture is test_the_plugin_discovers_focus_for_aten_graphs_and_none_..._graph's,
    # and the correct pass keeps the contract on mutating graphs in test_every_verify_option_reaches_the_run.
    bad = _pytest(f"--fx-pass={passes}:reinplace_neg", "--fx-graphs", "functional", "--fx-ensure", "functional",
                  "--fx-focus", "aten.neg.default", "-k", "contracts or validity", "-n", "1", cwd=tmp_path,
                  profile="find")
    assert bad.returncode == 1, bad.stdout[-3000:]
    assert "created: 1/1 worker" in bad.stdout
    device = r"cuda \(.+\)" if torch.cuda.is_available() else r"cpu \(no CUDA device\)"
    assert re.search(rf"fx-conformance: torch \S+, triton \S+, hypothesis \S+, profile find, device {device}", bad.stdout)
    assert "on functional graphs, contracts: functional" in bad.stdout
    assert "violates contracts" in bad.stdout and "contracts:functional:" in bad.stdout, bad.stdout[-3000:]
    assert re.search(r"FAILED \S*test_contracts", bad.stdout) and re.search(r"1 failed, 1 passed", bad.stdout), \
        bad.stdout[-3000:]
    # the controller's fire line counts the worker's graphs: validity's 10 and the contract test's one
    assert re.search(r"the pass changed [1-9]\d* of 11 graphs", bad.stdout), bad.stdout[-2000:]


SLOW = textwrap.dedent('''
    import time

    def slow_identity(gm):
        time.sleep(0.2)
        return gm
''')


def _streamed(report) -> bool:
    """The report has been written with at least one example checked."""
    try:
        return json.loads(report.read_text()).get("examples", 0) >= 1
    except (OSError, ValueError):
        return False


def test_interrupted_run_keeps_its_report(tmp_path):
    import signal
    import time

    (tmp_path / "slow.py").write_text(SLOW)
    report = tmp_path / "r.json"
    # Its own process group, signalled as a terminal's Ctrl-C signals one (the search and its forked
    # driver both get SIGINT); the driver also forwards a SIGINT sent to the search alone
    # (tests/test_drivers.py).
    proc = subprocess.Popen([sys.executable, "-m", "conformance.cli", "verify", f"{tmp_path / 'slow.py'}:slow_identity",
                             "--focus", "none", "--json", report, "--repro-dir", tmp_path], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while not _streamed(report) and time.monotonic() < deadline:  # the first examples have been streamed
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    data = json.loads(report.read_text())
    assert data["interrupted"] is True and 0 < data["examples"] < 200
    assert "INTERRUPTED: 0 properties violated" in out


def test_run_passes_pytest_arguments_and_reports_xfails_in_their_own_column(tmp_path):
    """The table, and the same counts as JSON with each xfail's reason (--fx-summary-json, as make
    nightly passes it for the report)."""
    counts = tmp_path / "conformance.json"
    r = _cli("run", "--profile", "ci", "--", "-k", "test_pass_manager and torch_flaw", "--fx-summary-json", counts)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    header = next(line for line in r.stdout.splitlines() if line.startswith("module"))
    module = "conformance/suite/test_pass_manager.py"
    row = next(line for line in r.stdout.splitlines() if line.startswith(module))
    assert header.split()[1:] == ["passed", "failed", "skipped", "xfailed"]
    passed, failed, skipped, xfailed = map(int, row.split()[1:])
    assert (passed, failed, skipped) == (0, 0, 0) and xfailed >= 8  # the torch divergences, each listed
    doc = json.loads(counts.read_text())
    want = {"passed": 0, "failed": 0, "skipped": 0, "xfailed": xfailed}
    assert doc["profile"] == "fx-ci" and doc["modules"] == {module: want} and doc["total"] == want
    assert len(doc["known"]) == xfailed, doc["known"]  # each with the reason its mark gives
    assert all(k["test"].startswith(f"{module}::test_torch_flaw[") and k["reason"].startswith("torch ")
               for k in doc["known"]), doc["known"]


def test_specials_and_signed_zeros_reach_the_run_and_its_reports(passes, tmp_path, capsys):
    report, md, junit = tmp_path / "r.json", tmp_path / "r.md", tmp_path / "r.xml"
    r = _main(capsys, "verify", f"{passes}:identity", "--max-examples", "3", "--seed", "0", "--specials", "relaxed",
              "--signed-zeros", "--json", report, "--markdown", md, "--junit", junit, "--repro-dir", tmp_path,
              "--allow-vacuous")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "special values on (relaxed)" in r.stdout
    opts = json.loads(report.read_text())["options"]
    assert (opts["specials"], opts["signed_zeros"]) == ("relaxed", True)
    assert "specials relaxed" in md.read_text()
    assert 'name="specials" value="relaxed"' in junit.read_text()
    bad = _main(capsys, "verify", f"{passes}:identity", "--specials", "loose")
    assert bad.returncode == 2 and "invalid choice: 'loose'" in bad.stderr


def test_the_torch_ir_and_grad_options_from_the_command_line(tmp_path, capsys):
    """--ir torch draws modules (NormalizeArgs, an fx.Transformer, rewrites every one of them);
    options that cannot shape a module, and --requires-grad outside aten/pre-dispatch, are exit 2."""
    r = _main(capsys, "verify", "torch.fx.experimental.normalize:NormalizeArgs", "--ir", "torch",
              "--max-examples", "12", "--seed", "0", "--repro-dir", tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ir=torch" in r.stdout and "OK: no counterexample in 12 torch graphs" in r.stdout
    for extra in (["--ir", "torch", "--graphs", "mutating"], ["--ir", "export", "--requires-grad"]):
        r = _main(capsys, "verify", "torch.fx.experimental.normalize:NormalizeArgs", *extra, "--max-examples", "2")
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stdout + r.stderr
    r = _main(capsys, "verify", "torch.fx.passes.tools_common:legalize_graph", "--requires-grad",
              "--max-examples", "20", "--seed", "0", "--repro-dir", tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_plugin_discovers_focus_for_aten_graphs_and_none_where_it_draws_no_static_aten_graph(passes, monkeypatch):
    """By default (--fx-focus auto) the plugin's fixture discovers what the pass acts on and draws its
    graphs rich in it, as verify() does (the plugin runs above give --fx-focus none or an op); the
    other options reach what the fixture returns.
    --fx-dynamic and --fx-ir torch draw graphs that focus does not shape (as in verify()): the
    fixture discovers nothing for them, and a focus given for them is a usage error."""
    from conformance.suite import test_third_party_pass as suite

    def options(**given):
        values = dict(fx_pass=f"{passes}:identity", fx_signature=None, fx_settings_factory=None, fx_pass_arg=[],
                      fx_context=None, fx_graphs="functional", fx_focus="auto", fx_dynamic=False, fx_device="cpu",
                      fx_ir="aten", fx_requires_grad=False, fx_ensure=[], fx_specials="strict", fx_ops=None)
        values.update(given)
        config = SimpleNamespace(getoption=lambda name, default=None: values[name])
        return suite.fx_options._get_wrapped_function()(SimpleNamespace(config=config))

    discovered, drawn = [], []
    resolve_focus, graphs = suite.resolve_focus, suite.graphs

    def resolving(focus, *args, **kwargs):
        discovered.append((focus, resolve_focus(focus, *args, **kwargs)))
        return discovered[-1][1]

    monkeypatch.setattr(suite, "resolve_focus", resolving)
    monkeypatch.setattr(suite, "graphs", lambda **kwargs: (drawn.append(kwargs), graphs(**kwargs))[1])
    options(fx_pass=f"{passes}:plus_one")
    [(mode, (focus, info))] = discovered
    assert mode == "auto" and info["mode"] == "auto" and ("aten.add.Tensor", "code") in [(o["op"], o["how"])
                                                                                       for o in info["ops"]]
    assert focus is not None and drawn[-1]["focus"] is focus  # the graphs are drawn with what was discovered
    discovered.clear()
    options(fx_dynamic=True)
    options(fx_ir="torch")
    assert [mode for mode, _ in discovered] == ["none", "none"]
    with pytest.raises(pytest.UsageError, match="--fx-focus none"):
        options(fx_dynamic=True, fx_focus="aten.neg.default")
    # --fx-graphs, --fx-ensure and --fx-specials reach the checkers' options and the graphs drawn
    _, ensure, _, specials, _, _ = options(fx_pass="reference_lowering.passes:repair_input_as_output",
                                           fx_graphs="mutating", fx_focus="none", fx_ensure=["no-input-as-output"],
                                           fx_specials="relaxed")
    assert drawn[-1]["mutations"] is True and drawn[-1]["focus"] is None
    assert ensure == ("no-input-as-output",) and specials == "relaxed"


def test_pytest_plugin_checks_dynamic_with_fx_dynamic(tmp_path):
    """--fx-dynamic: graphs over symbolic sizes, and the dynamic test judges them (a pass that bakes
    the example's sizes in fails it; values holds, the sizes being right at the example)."""
    planted = Path(__file__).resolve().parent / "passes" / "dynamic.py"
    # the "find" profile does not shrink: each shrink step would trace a graph (26 ms) and check it at five sizes
    # values beside dynamic: right at the example, wrong at other sizes (each test judges its own property)
    bad = _pytest(f"--fx-pass={planted}:bake_sizes", "--fx-dynamic", "-q", "-k", "test_dynamic or values",
                  cwd=tmp_path, profile="find")
    assert bad.returncode == 1, bad.stdout[-3000:]
    assert "violates dynamic" in bad.stdout and "[specialised]" in bad.stdout, bad.stdout[-3000:]
    assert re.search(r"FAILED \S*test_dynamic", bad.stdout) and re.search(r"1 failed, 1 passed", bad.stdout), \
        bad.stdout[-1500:]
