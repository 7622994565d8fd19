"""The search's own parts: trigger discovery, focus resolution, fire accounting and the vacuous verdict."""

from __future__ import annotations

import dataclasses
import functools
import json
import operator
import os
import sys

import pytest
import torch
import torch.fx as fx

from conformance import OriginalFailed, UsageError, verify
from conformance.adapters import load_pass
from conformance.search import triggers
from conformance.search.focus import resolve_focus
from conformance.checker import Checker
from conformance.search.static_triggers import static_triggers
from conformance.search.triggers import discover
from strategies import Focus, graphs, rows_named

aten = torch.ops.aten
SCALE = 0.125
_REWRITES = {aten.maximum.default: aten.fmax.default}


def log_of_exp(gm):
    """log(exp(x)) -> x: wrong for large x, and for integers (log(exp(int)) is a float)."""
    for n in list(gm.graph.nodes):
        if n.target == aten.log.default and getattr(n.args[0], "target", None) == aten.exp.default:
            n.replace_all_uses_with(n.args[0].args[0])
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def swap_by_table(gm):
    """Reads its targets from a module global (a dict of overloads) and a constant from another."""
    for n in gm.graph.nodes:
        if n.target in _REWRITES:
            n.target = _REWRITES[n.target]
        elif n.target == aten.mul.Tensor and n.args[1] == SCALE * 16:
            n.args = (n.args[0], 2.0)
    gm.recompile()
    return gm


def _make_closure():
    wanted = torch.ops.aten.sigmoid.default

    def by_closure(gm):
        for n in gm.graph.nodes:
            if n.target is wanted:
                n.target = aten.sigmoid.default
        return gm

    return by_closure


by_closure = _make_closure()


class _PatternTable:
    """Shaped like Inductor's PatternMatcherPass: a table keyed by (op, target)."""

    def __init__(self):
        self.patterns = {("call_function", aten.hypot.default): [], ("call_function", aten.mm.default): []}

    def __call__(self, graph):
        return 0


pattern_pass = _PatternTable()


def relu_only_on_tensors(gm):
    """Acts on relu though its code names no op directly: only a probe finds it."""
    name = "re" + "lu"
    for n in gm.graph.nodes:
        if n.op == "call_function" and str(n.target).split(".")[1] == name:
            n.target = aten.clamp_min.default
            n.args = (n.args[0], 0)
    gm.recompile()
    return gm


def segfault_on_neg(gm):
    if any(n.target == aten.neg.default for n in gm.graph.nodes):
        os.kill(os.getpid(), 11)
    return gm


def test_static_discovery_follows_code_globals_closures_and_pattern_tables():
    found = static_triggers(log_of_exp)
    assert {"aten.log.default", "aten.exp.default"} <= set(found.ops) and found.ops["aten.log.default"] == "code"
    table = static_triggers(swap_by_table)
    assert "aten.maximum.default" in table.ops and "aten.mul.Tensor" in table.ops
    assert "aten.fmax" in table.missing  # named, but not in the catalog
    assert SCALE in table.constants and 16 in table.constants
    assert "aten.sigmoid.default" in static_triggers(by_closure).ops
    patterns = static_triggers(pattern_pass)
    assert patterns.ops == {"aten.hypot.default": "pattern", "aten.mm.default": "pattern"}


class _Call:
    """Shaped like Inductor's ``CallFunction``: ``fns`` and ``args`` (further patterns among them)."""

    def __init__(self, fn, *args):
        self.fns, self.args, self.kwargs = [fn], args, {}


class _Entry:
    def __init__(self, pattern):
        self.pattern = pattern


class _PatternGraphs:
    """A pattern table whose entries hold pattern graphs: ``add(mm(a, b), c)``, ``add(c, bmm(a, b))`` and
    ``exp(neg(x))``."""

    def __init__(self):
        self.patterns = {("call_function", aten.add.Tensor): [_Entry(_Call(aten.add.Tensor, _Call(aten.mm.default, 0, 1), 2)),
                                                              _Entry(_Call(aten.add.Tensor, 2, _Call(aten.bmm.default, 0, 1)))],
                         ("call_function", aten.exp.default): [_Entry(_Call(aten.exp.default, _Call(aten.neg, 0)))]}

    def __call__(self, graph):
        return 0


def _draws(strategy, n: int) -> list:
    from conformance.search.triggers import _draw_cases

    return _draw_cases(strategy, n, 0)


def test_static_discovery_reads_the_edges_of_a_pattern_tables_pattern_graphs():
    found = static_triggers(_PatternGraphs())
    # each with the consumer's argument the producer stands at in the pattern (its schema name)
    assert found.edges == {("aten.mm.default", "aten.add.Tensor", "self"): "pattern",
                           ("aten.bmm.default", "aten.add.Tensor", "other"): "pattern",
                           ("aten.neg.default", "aten.exp.default", "self"): "pattern"}
    assert static_triggers(pattern_pass).edges == {}  # a table without pattern graphs has no edges


def select_of_unsqueeze(gm):
    """``select(unsqueeze(x, d), d, i) -> x`` (a view of it): acts only on that edge under that
    relation, the same ``d`` (its code names both ops; neither alone makes it act)."""
    for n in list(gm.graph.nodes):
        inner = n.args[0] if n.target == aten.select.int else None
        if getattr(inner, "target", None) == aten.unsqueeze.default:
            rank = inner.meta["val"].dim()
            if n.args[1] % rank == inner.args[1] % rank:
                with gm.graph.inserting_before(n):
                    view = gm.graph.call_function(aten.alias.default, (inner.args[0],))  # a view, as the original
                view.meta["val"] = n.meta["val"]
                n.replace_all_uses_with(view)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def _related_edges(case) -> int:
    return sum(n.target == aten.select.int and getattr(n.args[0], "target", None) == aten.unsqueeze.default
               and n.args[1] % n.args[0].meta["val"].dim() == n.args[0].args[1] % n.args[0].meta["val"].dim()
               for n in case.gm.graph.nodes)


def test_probes_confirm_the_edge_a_pass_matches_and_focus_draws_it_with_its_relation(tmp_path, monkeypatch):
    monkeypatch.setenv("FX_CONFORMANCE_CACHE", str(tmp_path))
    found = discover(load_pass(select_of_unsqueeze), mutations=False)
    assert ("aten.unsqueeze.default", "aten.select.int") in [e[:2] for e in found.edges]
    assert ("aten.select.int", "aten.unsqueeze.default") not in [e[:2] for e in found.edges]  # never made it act
    assert found.focus().edges == (("aten.unsqueeze.default", "aten.select.int", "self"),)
    ops = ["aten.unsqueeze.default", "aten.select.int"]
    # 200 draws each: 181 related edges with the edge's focus, 68 with its rows only (100 gave 69 and 32
    # once issue 56's complex operands moved the draws, 74 and 23 before). Fewer draws are lumpy (one
    # graph can hold several): 30 gave 15 and 9, 60 gave 29 and 9.
    with_edge = _draws(graphs(focus=found.focus()), 200)
    rows_only = _draws(graphs(focus=Focus(ops=ops)), 200)
    assert sum(map(_related_edges, with_edge)) >= 2 * sum(map(_related_edges, rows_only)) + 10
    # the search reads discovery's cached focus and changes every graph it draws: 15 of 15 (50 of 50)
    result = verify(select_of_unsqueeze, seed=0, max_examples=15, repro_dir=None, device="cpu", shrink=False)
    assert result.ok and result.changed >= 10, ([v.message for v in result.violations], result.fire_text)


def index_heavy(gm):
    """Reads node arguments by index and slice (node.args[1], args[:2], args[1:3]) and rewrites
    ``mul(x, 3.0)``: 3.0 is the pass's one number."""
    for n in gm.graph.nodes:
        if n.target == aten.mul.Tensor and n.args[1:] and n.args[1] == 3.0:
            a, b = n.args[:2]
            n.args = (a, *n.args[1:3])
    return gm


def counting_and_importing(gm):
    """Counts a node's arguments and readers (``len(n.args) != 2``, ``len(n.users) == 1``), imports in
    its body (whose level is a 0 Python loads), and rewrites ``mul(x, 5)``: 5 is the pass's one number."""
    import operator  # noqa: F401

    for n in gm.graph.nodes:
        if n.target != aten.mul.Tensor or len(n.args) != 2 or len(n.users) == 1:
            continue
        if n.args[1] == 5:
            n.args = (n.args[0], 5)
    return gm


def test_static_discovery_takes_no_subscript_or_slice_bound_for_a_constant():
    assert static_triggers(index_heavy).constants == [3.0]
    assert 0 in static_triggers(relu_only_on_tensors).constants  # an index elsewhere, a scalar here
    # nor an import's level, nor a count of a node's arguments or readers (2 and 1 would take the
    # draws' share of the pass's own numbers from 5)
    assert static_triggers(counting_and_importing).constants == [5]


def test_probes_find_what_the_code_does_not_name_and_crashes_do_not_kill_the_run(tmp_path, monkeypatch):
    monkeypatch.setenv("FX_CONFORMANCE_CACHE", str(tmp_path))
    found = discover(load_pass(relu_only_on_tensors), mutations=False)
    assert ("aten.relu.default", "probe") in found.ops
    assert found.acting == ["aten.relu.default"] and found.focus().acting == ("aten.relu.default",)
    crashing = discover(load_pass(segfault_on_neg), mutations=False)  # the forked prober dies, this process not
    assert crashing.ops == [("aten.neg.default", "code")]


def div_self_to_ones(gm):
    """div(x, x) -> ones_like(x) for floating x: acts only where the two operands are one value (wrong
    at 0, NaN, inf)."""
    for n in list(gm.graph.nodes):
        if n.target == aten.div.Tensor and len(n.args) == 2 and n.args[0] is n.args[1] and \
                getattr(n.args[0].meta.get("val"), "is_floating_point", lambda: False)():
            with gm.graph.inserting_before(n):
                n.replace_all_uses_with(gm.graph.call_function(aten.ones_like.default, (n.args[0],)))
            gm.graph.erase_node(n)
    gm.recompile()
    return gm


def div_to_mul_by_reciprocal(gm):
    """div(x, y) -> mul(x, reciprocal(y)): acts on any div, so its one-op probes find it."""
    for n in list(gm.graph.nodes):
        if n.target == aten.div.Tensor and len(n.args) == 2 and isinstance(n.args[1], fx.Node):
            with gm.graph.inserting_before(n):
                n.args = (n.args[0], gm.graph.call_function(aten.reciprocal.default, (n.args[1],)))
            n.target = aten.mul.Tensor
    gm.recompile()
    return gm


def div_by_rank(gm):
    """Swaps div's operands where the second has more dims: acts on two values only, never on x / x
    (a probe graph holding both x / x and another div must not make it look like a pair pass)."""
    for n in gm.graph.nodes:
        if n.target == aten.div.Tensor and isinstance(n.args[1], fx.Node) and \
                n.args[1].meta["val"].dim() > n.args[0].meta["val"].dim():
            n.args = (n.args[1], n.args[0])
    gm.recompile()
    return gm


def _pair_calls(case, op) -> tuple:
    """``(calls of op on x op x, those whose x holds NaN or an infinity)`` as ``case`` runs."""
    values = {}

    class Recording(fx.Interpreter):
        def run_node(self, n):
            values[n] = super().run_node(n)
            return values[n]
    Recording(case.gm).run(*[t.clone() for t in case.example_inputs])
    pairs = [n for n in case.gm.graph.nodes if n.target == op and len(n.args) > 1 and n.args[0] is n.args[1]]
    return len(pairs), sum(bool(values[n.args[0]].is_floating_point() and not values[n.args[0]].isfinite().all())
                           for n in pairs)


def test_a_pass_acting_on_x_op_x_is_found_by_probes_and_its_pair_drawn_holding_nan_and_inf(tmp_path, monkeypatch):
    """Issue 56 item 3: sub(x, x) -> 0 and the like act only on an equal-operands pair, which plain
    focus draws in one of a focus op's calls in six, its x seldom NaN or inf (4 of 200 graphs rewrote
    sub(x, x), none caught at seed 0, before ``pairs``)."""
    monkeypatch.setenv("FX_CONFORMANCE_CACHE", str(tmp_path))
    found = discover(load_pass(div_self_to_ones), mutations=False)
    assert found.pairs == ["aten.div.Tensor"] and "aten.div.Tensor" in found.acting
    assert found.focus().pairs == ("aten.div.Tensor",) and found.to_dict()["pairs"] == ["aten.div.Tensor"]
    assert discover(load_pass(div_to_mul_by_reciprocal), mutations=False).pairs == []  # acts on div alone
    assert discover(load_pass(div_by_rank), mutations=False).pairs == []
    # 100 graphs each at seed 0: 149 div(x, x) calls, 134 of them on NaN or inf, in 51 graphs with the
    # pair; 28 and 18, in 14 graphs, without it (measured on the 2-core AMD EPYC; counts, not times)
    div = aten.div.Tensor
    counts = [[_pair_calls(c, div) for c in _draws(graphs(focus=focus, special_values=True), 100)]
              for focus in (found.focus(), dataclasses.replace(found.focus(), pairs=()))]
    held = [sum(1 for _, f in c if f) for c in counts]
    assert held[0] >= held[1] + 10, held
    assert sum(f for _, f in counts[0]) >= 0.8 * sum(p for p, _ in counts[0])  # x holds NaN or inf
    # and the search catches it: ones where x / x is NaN
    result = verify(div_self_to_ones, seed=0, max_examples=50, repro_dir=None, device="cpu", shrink=False)
    assert [v.property for v in result.violations] == ["values"], result.fire_text


def test_discovery_reads_where_c_x_x_as_a_pair_of_its_two_branches():
    """A pair is the two operands ``OpSpec.pair_positions`` names: ``where``'s after its mask, so a
    pass matching ``n.args[1] is n.args[2]`` is probed on where(c, x, x) (a candidate), and the graph
    it acted on is read as holding the pair (not ``where(x, x, y)``, which a mask cannot be)."""
    from types import SimpleNamespace

    where = next(r for r in rows_named("aten.where.self"))
    g = fx.Graph()
    c, x, y = g.placeholder("c"), g.placeholder("x"), g.placeholder("y")
    paired = g.call_function(aten.where.self, (c, x, x))
    g.output((paired,))
    case = SimpleNamespace(gm=fx.GraphModule(torch.nn.Module(), g))
    assert triggers._holds_pair(where, case) and not triggers._holds_unpaired(where, case)
    paired.args = (c, x, y)
    assert not triggers._holds_pair(where, case) and triggers._holds_unpaired(where, case)
    assert where in triggers._pair_candidates({where})


def first_output_recomputed(gm):
    """Returns a copy of the call that makes the first output (the same target and arguments): acts
    on every graph whose first output is a call, repeated calls or not, and names no op (no CSE)."""
    out = next(n for n in gm.graph.nodes if n.op == "output")
    first = out.args[0][0]
    if isinstance(first, fx.Node) and first.op == "call_function":
        with gm.graph.inserting_before(out):
            again = gm.graph.node_copy(first)
        out.args = ((again, *out.args[0][1:]),)
        gm.recompile()
    return gm


def test_a_pass_acting_on_repeated_expressions_alone_is_focused_on_duplicates(tmp_path, monkeypatch):
    """A CSE names no op it acts on (this one names _unsafe_view, which it guards against): discovery
    finds it merging a repeated call in small graphs and acting on none without one, and its focus
    is duplicates, not the op it names (0 of 24 graphs focused on that changed, 14 with duplicates).
    A pass acting on every graph, by adding a repeated call, is not taken for one."""
    monkeypatch.setenv("FX_CONFORMANCE_CACHE", str(tmp_path))
    found = discover(load_pass("tests.passes.structures:cse"), mutations=False)
    assert found.structures == ["duplicates"] and found.to_dict()["structures"] == ["duplicates"]
    focus = found.focus()
    assert focus.duplicates and focus.ops == () and found.share == Focus.share, found.to_dict()
    assert triggers.Triggers.from_dict(found.to_dict()).focus() == focus
    from conformance._console import focus_line
    assert "acts on an expression computed twice" in focus_line({**found.to_dict(), "mode": "auto"})
    # the probe itself: a CSE merges a repeated call; a pass acting on every graph, by adding one, does not
    def acts_of(fn):
        put = load_pass(fn)
        return lambda case, judge=None: triggers._acts(put, case, 10.0, judge)
    assert triggers._duplicates_act(acts_of("tests.passes.structures:cse"))
    assert not triggers._duplicates_act(acts_of(first_output_recomputed))


def neg_to_mul_logging_its_prober(gm):
    """Rewrites neg into mul(x, -1); each call appends the pid of the process that forked its prober
    (discovery probes in a forked child) to the file named by PROBER_LOG."""
    with open(os.environ["PROBER_LOG"], "a") as f:
        f.write(f"{os.getppid()}\n")
    for n in gm.graph.nodes:
        if n.target == aten.neg.default:
            n.target, n.args = aten.mul.Tensor, (n.args[0], -1)
    gm.recompile()
    return gm


def test_processes_discovering_one_pass_at_once_probe_it_once(tmp_path, monkeypatch):
    """pytest-xdist's workers each set up the plugin's fixture: the first discovers, the others wait
    for its cached result instead of probing the same pass again."""
    monkeypatch.setenv("FX_CONFORMANCE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PROBER_LOG", str(tmp_path / "probers"))
    triggers.probe_cases(False), triggers.plain_cases(False)  # drawn before the fork, as a worker would have
    put = load_pass(neg_to_mul_logging_its_prober)
    children = []
    for i in range(2):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                found = discover(put, mutations=False)
                (tmp_path / f"out{i}").write_text(json.dumps([found.cached, found.ops]))
                code = 0
            finally:
                os._exit(code)
        children.append(pid)
    assert all(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0 for pid in children)
    outs = [json.loads((tmp_path / f"out{i}").read_text()) for i in range(2)]
    assert sorted(cached for cached, _ in outs) == [False, True] and outs[0][1] == outs[1][1]
    assert ["aten.neg.default", "code"] in outs[0][1]
    probers = set((tmp_path / "probers").read_text().split())
    assert len(probers) == 1 and probers <= {str(pid) for pid in children}


NEG_FOLDER_RUNS = None  # a file: probes run in a forked child


def counted_neg_folder(gm: fx.GraphModule) -> fx.GraphModule:
    """Names aten.neg in its code; counts its runs in ``NEG_FOLDER_RUNS``."""
    with open(NEG_FOLDER_RUNS, "a") as f:
        f.write("x")
    assert torch.ops.aten.neg.default is not None
    return gm


def test_probing_stops_at_its_budget_of_runs_and_says_so(tmp_path, monkeypatch):
    """The budget is a count of the pass's runs, not a time: the same probes on a loaded machine."""
    monkeypatch.setenv("FX_CONFORMANCE_CACHE", str(tmp_path))
    monkeypatch.setattr(triggers, "PROBE_BUDGET", 7)
    monkeypatch.setattr(sys.modules[__name__], "NEG_FOLDER_RUNS", str(tmp_path / "runs"))
    found = discover(load_pass(counted_neg_folder), mutations=False)
    assert found.probes_cut and (tmp_path / "runs").read_text() == "x" * 7
    assert ("aten.neg", "code") in found.ops  # what the code names stands
    from conformance._console import focus_line

    assert "probing stopped at its budget of runs of the pass" in focus_line({"mode": "auto", **found.to_dict()})
    monkeypatch.setattr(triggers, "PROBE_BUDGET", 1000)  # the default: a pass's 410-500 probes fit
    assert not discover(load_pass(relu_only_on_tensors), mutations=False).probes_cut


def test_the_discovery_cache_is_keyed_on_content_and_options(tmp_path):
    """A touched file keeps the key, an edited one changes it; so do --pass-arg and --context."""
    import importlib
    import textwrap

    package = tmp_path / "userpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "helpers.py").write_text("SCALE = 2\n")
    (package / "passes.py").write_text(textwrap.dedent('''
        from .helpers import SCALE


        def scale(gm, factor=1):
            return gm
    '''))
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.invalidate_caches()
        key = triggers._cache_key(load_pass("userpkg.passes:scale"), False)
        os.utime(package / "passes.py", (1, 1))  # a checkout: new times, the same code
        assert triggers._cache_key(load_pass("userpkg.passes:scale"), False) == key
        (package / "helpers.py").write_text("SCALE = 3\n")  # a helper the pass calls, edited
        edited = triggers._cache_key(load_pass("userpkg.passes:scale"), False)
        assert edited != key
        assert triggers._cache_key(load_pass("userpkg.passes:scale", pass_kwargs={"factor": 2}), False) != edited
        assert triggers._cache_key(load_pass("userpkg.passes:scale", context="contextlib:nullcontext"), False) \
            != edited
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m == "userpkg" or m.startswith("userpkg.")]:
            del sys.modules[name]


def test_discovery_is_cached_on_disk_per_pass(tmp_path, monkeypatch):
    monkeypatch.setenv("FX_CONFORMANCE_CACHE", str(tmp_path))
    monkeypatch.setattr(triggers, "_MEMORY", {})
    first = discover(load_pass("tests.test_search:log_of_exp"), mutations=False)
    assert not first.cached and list(tmp_path.glob("triggers/*.json"))
    monkeypatch.setattr(triggers, "_MEMORY", {})  # as a new process would
    again = discover(load_pass("tests.test_search:log_of_exp"), mutations=False)
    assert again.cached and again.ops == first.ops and again.rows == first.rows
    stored = json.loads(next(tmp_path.glob("triggers/*.json")).read_text())
    assert {"op": "aten.log.default", "how": "code"} in stored["ops"]


def test_focus_option_resolves_names_and_refuses_unknown_ones():
    put = load_pass(log_of_exp)
    focus, info = resolve_focus("aten.log, exp.default", put, mutations=False, timeout=None)
    assert [r.name for r in focus.ops] == ["aten.log.default", "aten.exp.default"] and info["mode"] == "ops"
    assert resolve_focus("none", put, mutations=False, timeout=None) == (None, {"mode": "none"})
    with pytest.raises(UsageError, match="aten.erfinv: not in the op catalog"):
        resolve_focus("aten.erfinv", put, mutations=False, timeout=None)
    with pytest.raises(UsageError, match="should be auto, none, or ops"):
        resolve_focus(3, put, mutations=False, timeout=None)


def test_a_focused_search_catches_log_of_exp_where_the_plain_one_does_not():
    """On the same 50 graphs' budget: the focused search catches it at example 4."""
    plain = verify(log_of_exp, seed=0, max_examples=50, focus="none", repro_dir=None, device="cpu", shrink=False)
    focused = verify(log_of_exp, seed=0, max_examples=50, repro_dir=None, device="cpu", shrink=False)
    assert plain.ok and plain.changed_dead_code_only == plain.changed  # it only ever removed dead code
    assert not focused.ok and focused.focus["mode"] == "auto"
    assert {"op": "aten.log.default", "how": "code"} in focused.focus["ops"]


def test_fire_accounting_counts_changed_graphs_and_a_no_op_is_vacuous():
    # unfocused: a discovered focus that leaves a pass idle has its own test (below)
    noop = verify(lambda gm: gm, seed=0, max_examples=10, repro_dir=None, focus="none")
    assert noop.ok and noop.vacuous and (noop.examples, noop.changed) == (10, 0)

    def rename(gm):  # new names and a recompile change nothing
        for n in gm.graph.nodes:
            if n.op == "call_function":
                n.name = n.name + "_x"
        gm.recompile()
        return gm

    assert verify(rename, seed=0, max_examples=10, repro_dir=None, focus="none").vacuous

    def add_unused_clone(gm: fx.GraphModule):  # changes every graph, harmlessly
        first = next(n for n in gm.graph.nodes if n.op == "placeholder")
        with gm.graph.inserting_after(first):
            gm.graph.call_function(aten.clone.default, (first,))
        gm.recompile()
        return gm

    changed = verify(add_unused_clone, seed=0, max_examples=10, repro_dir=None, focus="none")
    assert changed.ok and not changed.vacuous and changed.changed == changed.examples == 10
    assert changed.changed_dead_code_only == 0


def test_examples_are_the_generated_graphs_and_shrinking_runs_are_counted_apart(tmp_path):
    """A failing search shrinks: the graphs it runs then are variations of one counterexample, so
    they count neither as examples nor towards the share the pass changed."""
    log = tmp_path / "calls"  # the search runs in a forked driver: count in a file

    def negate_every_output(gm):
        with open(log, "a") as f:
            f.write("x")
        out = next(n for n in gm.graph.nodes if n.op == "output")
        value = out.args[0][0]
        if value.meta["val"].dtype.is_floating_point:
            with gm.graph.inserting_before(out):
                out.args = ((gm.graph.call_function(aten.neg.default, (value,)), *out.args[0][1:]),)
        gm.recompile()
        return gm

    # seed 5: its two counterexamples (values, aliasing; first at example 8) shrink in 69 runs, 1.5 s of
    # CPU (seed 1's in 160, 3.3 s; seed 0's in 579, 18 s; 2-core AMD EPYC)
    result = verify(negate_every_output, seed=5, max_examples=40, focus="none", repro_dir=None)
    assert not result.ok and result.shrink_runs > 0
    # minimal failures are replayed once more at the end, as neither example nor shrinking run: one
    # replay per violation before issue 15; since then seed 0 gave two violations (values,
    # aliasing) and one replay (why: not yet examined, noted in the issue 15 note)
    assert result.examples <= 40
    replays = len(log.read_text()) - result.examples - result.shrink_runs
    assert 1 <= replays <= len(result.violations)
    assert all(c.checked <= result.examples for c in result.properties.values())
    assert result.changed <= result.examples and "while shrinking" in result.graphs_text


def test_generated_examples_counts_the_calls_before_shrinking_and_chains_to_an_outer_collector():
    from hypothesis import Phase, given, seed, settings, strategies as st
    from hypothesis.statistics import collector

    from conformance.search.fire import generated_examples

    calls, outer = [], []

    @settings(max_examples=60, database=None, phases=(Phase.generate, Phase.shrink))
    @seed(0)
    @given(st.integers(0, 10_000))
    def fails_above_5000(x):
        calls.append(x)
        assert x <= 5000

    with collector.with_value(outer.append), generated_examples() as box:
        with pytest.raises(AssertionError):
            fails_above_5000()
    n = box["examples"]
    assert 0 < n <= 60 and n < len(calls) and outer  # the outer collector still got the statistics
    assert any(x > 5000 for x in calls[:n])  # the failure was generated; shrinking came after
    assert calls[-1] == 5001  # the final replay of the minimal example comes last


def test_the_plugin_keeps_the_generated_graphs_of_a_test(monkeypatch):
    from types import SimpleNamespace

    from hypothesis import Phase, given, seed, settings, strategies as st

    from conformance.pytest_plugin import FIRE, _Fire

    @settings(max_examples=30, database=None, phases=(Phase.generate, Phase.shrink))
    @seed(0)
    @given(st.integers(0, 10_000))
    def fails_above_5000(x):
        FIRE["t.py::x"].append((True, False))
        assert x <= 5000

    wrapper = _Fire(allow_vacuous=False).pytest_runtest_call(SimpleNamespace(nodeid="t.py::x"))
    next(wrapper)
    with pytest.raises(AssertionError):
        fails_above_5000()
    calls = len(FIRE["t.py::x"])
    with pytest.raises(StopIteration):
        next(wrapper)
    assert 0 < len(FIRE.pop("t.py::x")) < calls


def test_focus_rows_do_not_depend_on_the_order_discovery_found_them():
    """A pass's ops often sit in a set, whose order changes from process to process; the focus
    table's order decides the draws, so the same seed drew other graphs (and another verdict) in
    another process. Rows come in catalog order, and sets are walked sorted."""
    from conformance.search.triggers import Triggers

    names = ["aten.sub.Tensor", "aten.gt.Tensor", "aten.atan2.default", "aten.lt.Tensor"]
    forward = Triggers(ops=[(n, "code") for n in names]).rows
    assert forward == Triggers(ops=[(n, "code") for n in reversed(names)]).rows and len(forward) == 4
    ops = {aten.sub.Tensor, aten.gt.Tensor, aten.atan2.default, aten.lt.Tensor}

    def by_set(gm):  # the set is what discovery walks (through the closure)
        for n in gm.graph.nodes:
            if n.target in ops:
                n.meta["matched"] = True
        return gm

    assert list(static_triggers(by_set).ops) == sorted(static_triggers(by_set).ops)


@pytest.mark.parametrize("plain, focused, weak", [(3, 0, True), (1, 0, True), (0, 0, False), (5, 1, True),
                                                   (4, 1, True), (1, 1, True), (4, 2, False), (6, 6, False),
                                                   (0, 4, False), (0, 1, False), (8, 4, True), (6, 3, True),
                                                   (5, 3, False)])
def test_plain_did_better(plain, focused, weak):
    assert triggers._plain_did_better(plain, focused) is weak


def test_a_focus_on_random_ops_is_weighed_and_weak_where_it_never_made_the_pass_act(tmp_path, monkeypatch):
    """functorch's CSE names the random ops it must not merge: discovery focuses on them, and its
    payoff draws had no random ops allowed (so discovery failed and silently kept the focus whole).
    Now they are weighed: focused graphs made it act on none, plain ones on some."""
    from tests.real_passes import REAL_PASSES

    monkeypatch.setenv("FX_CONFORMANCE_CACHE", str(tmp_path))
    found = discover(load_pass(REAL_PASSES["functorch.fx_graph_cse"]), mutations=False)
    assert {"aten.rand_like", "aten.native_dropout"} <= {name for name, _ in found.ops}
    plain, focused, n = found.payoff
    assert focused == 0 < plain and found.share == triggers.WEAK_SHARE


def test_a_failure_of_discovery_itself_is_an_error_not_a_silent_empty_result(tmp_path, monkeypatch):
    from conformance import HarnessError

    monkeypatch.setenv("FX_CONFORMANCE_CACHE", str(tmp_path))

    def broken_graphs(**kwargs):
        raise RuntimeError("planted: the generator refused")

    monkeypatch.setattr(triggers, "_MEMORY", {})  # no result of an earlier test in this process
    monkeypatch.setattr(triggers, "graphs", broken_graphs)  # probe graphs are drawn first, in the parent
    monkeypatch.setattr(triggers, "probe_cases", lambda mutations: ())
    monkeypatch.setattr(triggers, "plain_cases", lambda mutations: ())
    with pytest.raises(HarnessError, match="trigger discovery failed: .*planted: the generator refused"):
        discover(load_pass(log_of_exp), mutations=False)


def test_a_cse_naming_ops_it_never_merges_is_focused_on_duplicates_not_on_them(tmp_path, monkeypatch):
    """The reference CSE names clone and _to_copy in its code (what it never merges): graphs focused on
    them made it act on fewer graphs than plain ones (2 of 24 against 12: a weak focus, a quarter of the
    graphs). Its focus is duplicates now, which make it act more than plain graphs do, at the usual
    share. (The weak share itself: test_plain_did_better, and the random-ops focus below.) A pattern
    pass that focused graphs make act keeps the usual share."""
    from reference_lowering.passes import common_subexpression_elimination

    monkeypatch.setenv("FX_CONFORMANCE_CACHE", str(tmp_path))
    cse = discover(load_pass(common_subexpression_elimination), mutations=False)
    plain, focused, n = cse.payoff
    assert cse.structures == ["duplicates"] and focused > plain and cse.share == Focus.share, cse.to_dict()
    assert cse.focus().duplicates and cse.focus().ops == ()
    fold = discover(load_pass(log_of_exp), mutations=False)
    assert fold.payoff[1] > fold.payoff[0] and fold.share == 0.75 and not fold.to_dict()["weak"]


@pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "isolated"])
def test_a_graph_that_does_not_run_as_given_is_drawn_again_never_the_passs_verdict(monkeypatch, isolate):
    """A drawn graph whose original run fails at check time (on a GPU: a device fault, a kernel
    that fails now and then) is no verdict on the pass: the search draws another and counts it."""
    import importlib

    module = importlib.import_module("conformance.checker")
    real_pristine, real_call = module._pristine, module._call
    originals = set()

    def pristine(gm):
        out = real_pristine(gm)
        originals.add(id(out))
        return out

    def call(gm, inputs):  # the originals of even size fail (the same in a forked child)
        if id(gm) in originals and len(gm.graph.nodes) % 2 == 0:
            raise RuntimeError("CUDA error: invalid argument")
        return real_call(gm, inputs)

    monkeypatch.setattr(module, "_pristine", pristine)
    monkeypatch.setattr(module, "_call", call)
    result = verify(lambda gm: gm, seed=0, max_examples=15, focus="none", repro_dir=None, device="cpu",
                    isolate=isolate, shrink=False)
    assert result.ok and result.examples == 15, result.violations
    assert result.unrunnable >= 3
    with pytest.raises(OriginalFailed, match="does not run on cpu: RuntimeError: CUDA error"):
        g = next(c for c in _some_cases() if len(c.gm.graph.nodes) % 2 == 0)
        Checker(load_pass(lambda gm: gm)).check(g.gm, g.example_inputs)  # check() says UsageError: a user's graph


def _some_cases():
    from hypothesis import HealthCheck, given, settings

    out = []

    @settings(max_examples=10, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(graphs(max_nodes=6))
    def draw(case):
        out.append(case)

    draw()
    return out


def _negs_to_muls(gm: fx.GraphModule) -> fx.GraphModule:
    """``neg(x) -> mul(x, -1)`` and ``sub(x, y) -> add(x, y, alpha=-1)``, correct, in graphs without an
    ``mm``: a focus on ``mm`` leaves it idle by construction (half a focused graph's steps are plain
    ones, and those drew a live ``neg`` in 4 of 40 graphs at seed 0)."""
    if any(node.target is aten.mm.default for node in gm.graph.nodes):
        return gm
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is aten.neg.default:
            node.target, node.args = aten.mul.Tensor, (node.args[0], -1)
        elif node.op == "call_function" and node.target is aten.sub.Tensor and not node.kwargs \
                and len(node.args) == 2:
            node.target, node.kwargs = aten.add.Tensor, {"alpha": -1}
    gm.recompile()
    return gm


def _negs_to_muls_then_clean_up(gm: fx.GraphModule) -> fx.GraphModule:
    """``_negs_to_muls``, then the dead-code elimination a pass ends with."""
    _negs_to_muls(gm).graph.eliminate_dead_code()
    gm.recompile()
    return gm


def _focused_on_mm(mode):
    """A focus that leaves the pass idle (every graph draws an ``mm``), as discovery
    (``auto``) or the user (``ops``) gave it."""
    def resolve(focus, put, *, mutations, timeout):
        return Focus(ops=tuple(rows_named("aten.mm.default")), share=1.0), \
            {"mode": mode, "ops": [{"op": "aten.mm.default", "how": "code"}], "not_in_catalog": [], "constants": []}
    return resolve


def test_a_discovered_focus_that_left_the_pass_idle_is_searched_again_on_plain_graphs(monkeypatch):
    """A vacuous run is no verdict: where discovery's focus made the pass change none of the graphs,
    the same budget goes to plain graphs (the reference constant folding focused on _unsafe_view
    changed 0 of 200 graphs at one seed, 3-11% plain). A focus the user named is searched as given."""
    import conformance.search.driver as driver

    monkeypatch.setattr(driver, "resolve_focus", _focused_on_mm("auto"))
    # 40 plain graphs: at seed 0 the pass rewrote 2 (in 1 more than dead code, once it cleans up)
    result = verify(_negs_to_muls, seed=0, max_examples=40, repro_dir=None, device="cpu", shrink=False)
    assert result.ok and not result.vacuous and result.examples == 40
    assert result.focus["unfocused_after"] == {"examples": 40, "changed": 0, "dead_code_only": 0}
    # the same where the focused graphs' only changes were dead code: its rewrite never fired there
    cleaned = verify(_negs_to_muls_then_clean_up, seed=0, max_examples=40, repro_dir=None, device="cpu", shrink=False)
    assert cleaned.ok and cleaned.rewrites > 0, cleaned.fire_text
    after = cleaned.focus["unfocused_after"]
    assert after["examples"] == 40 and after["changed"] == after["dead_code_only"] > 0, after
    monkeypatch.setattr(driver, "resolve_focus", _focused_on_mm("ops"))
    # 20 graphs: a named focus is searched as given, whatever the budget (all 20 hold an mm)
    named = verify(_negs_to_muls, seed=0, max_examples=20, repro_dir=None, device="cpu", shrink=False)
    assert named.vacuous and named.examples == 20 and "unfocused_after" not in named.focus


def test_every_row_the_cpu_runs_gets_its_probe_graphs():
    """A list-returning op (split, chunk, unbind) needs its getitem and dequantize its quantize: with
    no room for them they were never drawn (every draw rejected), so a pass acting on them alone was
    never seen to."""
    for row, cases in triggers.probe_cases(False):
        assert len(cases) == triggers._PROBES_PER_OP, row.name
        assert all(triggers._holds(row.overload, c) for c in cases), row.name
    assert {"aten.split.Tensor", "aten.unbind.int", "quantized_decomposed.dequantize_per_tensor.default"} \
        <= {row.name for row, _ in triggers.probe_cases(False)}


def test_an_edge_is_confirmed_on_graphs_drawn_at_its_size(monkeypatch):
    """Each candidate edge's graphs are drawn with room for its two calls (and a multi-result
    producer's getitems) and no more: with room for a third call 60% of them held three, none of
    which can confirm the edge, and a third of the 16 drawn were tried."""
    drawn, held = [], []
    draw = triggers._draw_cases

    def counting(strategy, n, seed_value, until=None):
        def seen(case):
            drawn.append(case)
            return until(case)
        return draw(strategy, n, seed_value, seen)

    monkeypatch.setattr(triggers, "_draw_cases", counting)
    assert not triggers._edge_acts(("aten.add.Tensor", "aten.mul.Tensor"), ["self", "other"], False,
                                   lambda c: held.append(c) and False)
    assert held and all(triggers._calls(c.gm) <= 2 for c in drawn), [triggers._calls(c.gm) for c in drawn]
    held.clear()  # a producer of two results: room for its getitems, so the consumer can read either
    assert not triggers._edge_acts(("aten.var_mean.correction", "aten.sub.Tensor"), ["self"], False,
                                   lambda c: held.append(c) and False)
    assert held and any(n.target is operator.getitem and n.args[1] == 1 for c in held for n in c.gm.graph.nodes)


def test_discovery_with_and_without_mutations_shares_the_probe_graphs_of_the_rows_both_probe():
    plain, mutating = (dict(triggers.probe_cases(m)) for m in (False, True))
    assert {r.category for r in mutating.keys() - plain.keys()} == {"inplace"}
    assert all(mutating[row] is cases for row, cases in plain.items())  # drawn once, for both


def test_probe_graphs_are_stored_once_drawn_and_loaded_as_drawn(tmp_path, monkeypatch):
    """The probe graphs do not depend on the pass: a process stores what it drew (issue 57: a cold
    discovery drew them all again, 4 s on the 2-core Intel Xeon, loading takes 0.3), and the next
    loads the same graphs and inputs without drawing; a file it cannot read is drawn again, and
    another generator (or machine) has a file of its own."""
    from conformance.search import trigger_cache

    monkeypatch.setenv("FX_CONFORMANCE_CACHE", str(tmp_path))
    monkeypatch.setattr(triggers, "_STORE", triggers._ProbeStore())
    strategy = graphs(max_nodes=3, device="cpu")

    def seen(cases):
        return [(c.gm.code, c.features, c.device, [(t.dtype, t.shape, t.stride(), t.tolist()) for t in c.example_inputs],
                 [t.tolist() for t in c.fresh_inputs()]) for c in cases]

    first = triggers._stored_draw(("test",), strategy, 3)
    triggers._STORE.flush()
    assert trigger_cache.probe_graphs_path().is_file() and len(first) == 3

    def refused(*args, **kwargs):
        raise AssertionError("drawn again")
    monkeypatch.setattr(triggers, "_STORE", triggers._ProbeStore())  # as a new process: read from the file
    with monkeypatch.context() as m:
        m.setattr(triggers, "_draw_cases", refused)
        assert seen(triggers._stored_draw(("test",), strategy, 3)) == seen(first)
    trigger_cache.probe_graphs_path().write_bytes(b"not a pickle")
    monkeypatch.setattr(triggers, "_STORE", triggers._ProbeStore())
    assert seen(triggers._stored_draw(("test",), strategy, 3)) == seen(first)
    path = trigger_cache.probe_graphs_path()
    monkeypatch.setattr(trigger_cache, "_machine", lambda: "another CPU|avx2")
    assert trigger_cache.probe_graphs_path() != path


def test_stored_draws_serve_a_prefix_and_draw_on_from_the_start(tmp_path, monkeypatch):
    """An edge probe's graphs (a fusion's, drawn post-grad) do not depend on the pass either; the draw
    stops at the first graph the pass acts on, so what is stored is a prefix (5.8 of a fusion's 5.9 s
    of edge probes were drawing them; a second pass over the same ops: 0.4 s, 2-core Intel Xeon). A
    later draw tries the stored graphs first, then draws again from the start where it asks for more,
    trying only the graphs it had not seen; one that ran to its end is served whole."""
    monkeypatch.setenv("FX_CONFORMANCE_CACHE", str(tmp_path))
    monkeypatch.setattr(triggers, "_STORE", triggers._ProbeStore())
    strategy = graphs(max_nodes=3, device="cpu")
    whole = [c.gm.code for c in triggers._draw_cases(strategy, 5, 0)]
    draws = []
    real = triggers._draw_cases

    def counting(*args, **kwargs):
        draws.append(args[1])
        return real(*args, **kwargs)
    monkeypatch.setattr(triggers, "_draw_cases", counting)

    def trying(stop_at):
        seen = []

        def until(case):
            seen.append(case.gm.code)
            return len(seen) == stop_at
        shown = triggers._stored_draw(("test-prefix",), strategy, 5, until=until)
        assert [c.gm.code for c in shown] == seen
        triggers._STORE.flush()  # (discovery stores what its probes drew when it is done)
        return seen
    assert trying(2) == whole[:2] and draws == [5]
    monkeypatch.setattr(triggers, "_STORE", triggers._ProbeStore())  # a new process
    assert trying(None) == whole and draws == [5, 5]  # the two stored, then three more of a new draw
    monkeypatch.setattr(triggers, "_STORE", triggers._ProbeStore())
    assert trying(None) == whole and draws == [5, 5]  # stored whole: no draw
    assert trying(1) == whole[:1] and draws == [5, 5]
