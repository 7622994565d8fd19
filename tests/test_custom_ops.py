"""A user's own ops in drawn graphs (issue 35, item 1): ``graphs(ops=[...])`` with ops outside the
catalog, drawn from their schemas and ``op_rule``s, the op deciding which draws are valid.

The ops are the example library's (examples/mylib_ops.py, its rules in examples/mylib_rules.py) and
a few planted here under ``fxc_test`` (an op that leaves its out buffer half-written, one whose kernel
refuses a weight of the wrong rank). Graphs are drawn on the CPU: the example kernels are CPU kernels.
"""

from __future__ import annotations

import operator
import os
import re
import sys

import pytest
import torch
import torch.fx as fx

import strategies
from conformance.search.triggers import _draw_cases
from strategies import InvalidArgument, custom_health, graphs, op_rule

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
import mylib_rules  # noqa: E402,F401 - registers torch.ops.mylib and its rules

mylib = torch.ops.mylib
aten = torch.ops.aten
AF = torch.ops.higher_order.auto_functionalized_v2


@torch.library.custom_op("fxc_test::half_write", mutates_args=("result",))
def _half_write(result: torch.Tensor, input: torch.Tensor) -> None:
    flat = result.view(-1)
    flat[: flat.numel() // 2 + 1].copy_(input.reshape(-1)[: flat.numel() // 2 + 1])


@_half_write.register_fake
def _(result, input) -> None:
    return None


@op_rule(torch.ops.fxc_test.half_write)
def _(call):
    x = call.tensor("input", fits=lambda s: len(s) == 1 and s[0] >= 2)
    call.out("result", like=x)


@torch.library.custom_op("fxc_test::scale_rows", mutates_args=())
def _scale_rows(input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    if weight.dim() != 1:
        raise ValueError(f"weight must be 1-D, got {weight.dim()}-D")
    return input * weight


@_scale_rows.register_fake
def _(input, weight):
    if weight.dim() != 1:
        raise ValueError(f"weight must be 1-D, got {weight.dim()}-D")
    return torch.empty_like(input * weight)


def _draw(strategy, n: int) -> list:
    return _draw_cases(strategy, n, 0)  # the first n graphs at seed 0, as discovery draws them


def _calls_of(case, namespace: str) -> list:
    return [n for n in case.gm.graph.nodes if n.op == "call_function" and str(n.target).startswith(f"{namespace}.")]


def test_drawn_graphs_hold_the_users_ops_among_the_catalogs_and_run_as_drawn():
    """Every op of the namespace is drawn, mixed with catalog ops, and each graph runs to the same
    bits twice (an out buffer is written whole, so its empty's garbage never shows)."""
    cases = _draw(graphs(ops=["mylib"], max_nodes=6, device="cpu"), 80)
    holding = [c for c in cases if _calls_of(c, "mylib")]
    assert len(holding) >= 20, len(holding)
    drawn = {str(n.target) for c in holding for n in _calls_of(c, "mylib")}
    assert len(drawn) >= 4, drawn  # of the six (at seed 0 all six are drawn in 80 graphs)
    assert any(n.op == "call_function" and n.target.namespace == "aten"  # mixed with the catalog's ops
               for c in holding for n in c.gm.graph.nodes if isinstance(n.target, torch._ops.OpOverload))
    for case in holding:
        first, second = case.gm(*case.fresh_inputs()), case.gm(*case.fresh_inputs())
        assert all(strategies._build.eager.same_bits(a, b) for a, b in zip(first, second)), case.gm.code
    # the rules hold: rms_norm's weight is the input's last dim, its result an empty of the input's shape
    for case in holding:
        for node in _calls_of(case, "mylib"):
            if node.target in (mylib.rms_norm.default, mylib.rms_norm_static_fp8_quant.default):
                result, x, weight = (a.meta["val"] for a in node.args[:3])
                assert node.args[0].target is torch.ops.aten.empty.memory_format
                assert tuple(weight.shape) == tuple(x.shape[-1:]) and result.shape == x.shape
            if node.target is mylib.static_scaled_fp8_quant.default:
                assert node.args[0].meta["val"].dtype == torch.float8_e4m3fn
    health = custom_health()
    assert all(health[name].ran > 0 for name in drawn)


def test_ops_are_named_as_the_catalogs_are_and_an_unknown_one_is_a_clear_error():
    rows = strategies._catalog.custom.custom_rows
    assert rows("mylib::rms_norm") == rows(mylib.rms_norm) == rows("mylib.rms_norm.default") \
        == rows(mylib.rms_norm.default)
    assert {r.name for r in rows("mylib")} >= {"mylib.rms_norm.default", "mylib.fused_add_rms_norm.default"}
    assert rows("aten.add.Tensor") == () and rows(torch.ops.aten.add.Tensor) == ()  # the catalog's, not a user's
    with pytest.raises(InvalidArgument, match="neither in the op catalog nor a registered op.*mylib::rms_norm"):
        graphs(ops=["mylib::no_such_op"]).example()
    # only user ops: drawn among the whole catalog; with catalog ops: among those
    only = strategies._draw.draw._resolve_ops([mylib.rms_norm.default], views=True, mutations=False)
    assert len(only) > 100 and only[-1].overload is mylib.rms_norm.default
    some = strategies._draw.draw._resolve_ops(["aten.relu.default", mylib.rms_norm.default], views=True, mutations=False)
    assert [r.name for r in some] == ["aten.relu.default", "mylib.rms_norm.default"]


def test_an_out_buffer_the_op_leaves_partly_unwritten_is_never_drawn():
    """The op's two tries fill its empty buffer with zeros and with ones: what it did not write
    differs, so the call is rejected and counted against the op, naming the buffer."""
    cases = _draw(graphs(ops=[torch.ops.fxc_test.half_write.default], max_nodes=4, device="cpu"), 40)
    assert not any(_calls_of(c, "fxc_test") for c in cases)
    health = custom_health()["fxc_test.half_write.default"]
    assert health.tried > 0 and health.ran == 0
    assert health.failed.most_common(1)[0][0] == "result"
    assert "'result' is not written whole" in health.line("fxc_test.half_write.default")


def test_a_call_the_kernel_refuses_is_rejected_and_the_health_line_names_the_argument():
    """Without a rule the schema draws ``weight`` broadcasting with ``input``, of any rank: the op
    refuses the 2-D ones, the 1-D ones run."""
    cases = _draw(graphs(ops=[torch.ops.fxc_test.scale_rows.default], max_nodes=4, device="cpu"), 60)
    ran = [n for c in cases for n in _calls_of(c, "fxc_test")]
    assert ran and all(n.args[1].meta["val"].dim() == 1 for n in ran)
    health = custom_health()["fxc_test.scale_rows.default"]
    assert health.failed["weight"] > 0 and "weight must be 1-D" in health.example["weight"]
    assert health.line("fxc_test.scale_rows.default").startswith(
        f"fxc_test.scale_rows.default: {health.ran} of {health.tried} drawn calls ran; ")


def test_post_grad_graphs_hold_the_users_mutating_ops_as_auto_functionalized_v2():
    """AOTAutograd functionalizes an out-variant call as vLLM's passes see it: an
    ``auto_functionalized_v2`` node over the op, its written buffer among ``_all_bases``."""
    cases = _draw(graphs(ops=["mylib"], max_nodes=6, ir="post-grad", device="cpu"), 40)
    hops = [n for c in cases for n in c.gm.graph.nodes
            if n.target is torch.ops.higher_order.auto_functionalized_v2]
    assert hops, "no auto_functionalized_v2 node in 40 post-grad graphs"
    assert all(str(n.args[0]).startswith("mylib.") and "_all_bases" in n.kwargs for n in hops)
    assert not any(_calls_of(c, "mylib") for c in cases)  # no mutating call is left bare


def test_under_the_config_vllm_sets_post_grad_graphs_hold_auto_functionalized_v1_and_are_judged():
    """vLLM turns ``torch._inductor.config.enable_auto_functionalized_v2`` off (its patterns are
    written over v1): AOTAutograd then emits ``auto_functionalized`` nodes, and so do the drawn
    post-grad graphs, which a pass over them (Inductor's own decomposition of them) is judged on."""
    from torch._inductor import config

    from conformance import verify

    with config.patch(enable_auto_functionalized_v2=False):
        cases = _draw(graphs(ops=["mylib"], max_nodes=6, ir="post-grad", device="cpu"), 15)
        result = verify("torch._inductor.fx_passes.post_grad:decompose_auto_functionalized", ops="mylib",
                        ir="post-grad", graphs="mutating", max_examples=12, seed=0, device="cpu", shrink=False,
                        repro_dir=None)
    targets = [n.target for c in cases for n in c.gm.graph.nodes]
    assert torch.ops.higher_order.auto_functionalized in targets
    assert torch.ops.higher_order.auto_functionalized_v2 not in targets
    assert result.ok and result.changed >= 3, (result.fire_text, result.violations)


def test_an_op_rule_that_names_an_argument_the_schema_lacks_is_reported_against_the_op():
    @torch.library.custom_op("fxc_test::plain", mutates_args=())
    def plain(input: torch.Tensor) -> torch.Tensor:
        return input + 1

    plain.register_fake(lambda input: torch.empty_like(input))

    @op_rule(torch.ops.fxc_test.plain)
    def _(call):
        call.tensor("x")

    cases = _draw(graphs(ops=[torch.ops.fxc_test.plain.default], max_nodes=3, device="cpu"), 10)
    assert not any(_calls_of(c, "fxc_test") for c in cases)
    health = custom_health()["fxc_test.plain.default"]
    assert health.ran == 0 and "draws 'x', which its schema lacks (input)" in health.line("fxc_test.plain.default")
    with pytest.raises(TypeError, match="not an op"):
        op_rule("no.such.op")


# --- a vLLM-style fusion pass over post-grad graphs (examples/mylib_fusion.py) ----------------------
# Its correct form fused 66 of 200 graphs at seed 0 on the 2-core AMD EPYC (post-grad graphs: each
# drawn graph is traced by AOTAutograd, about 0.1 s); since issue 56's structures, 15 of 80 at seed 0;
# since its argument relations (split and transpose edges, where pairs, edge probes drawing the edge
# at every step), 14, 9, 5, 9, 13 of the first 30 at seeds 0-4 (8, 11, 5, 9 at 0-3 before them). The epsilon it drops was caught at graphs 44, 7 and 12
# of seeds 1-3 (not within 50 at seed 0; within 200 at seeds 0-2: the sweep). make test checks the
# verdicts on fewer graphs, at a seed where they come early. (The counts move whenever
# examples/mylib_ops.py gains an op, or the generator draws in another order: --ops mylib draws every
# op of the namespace.)
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def test_verify_with_ops_focuses_on_the_users_ops_the_pass_names_and_confirms_the_edge_it_fuses(tmp_path):
    from conformance import verify

    result = verify("mylib_fusion:fuse_rms_norm_quant", ops="mylib", ir="post-grad", max_examples=30, seed=0,
                    device="cpu", repro_dir=str(tmp_path))
    assert result.ok and result.changed >= 6, (result.changed, result.violations)  # >= 20%
    focus = result.focus
    assert {o["op"] for o in focus["ops"]} >= {"mylib.rms_norm.default", "mylib.static_scaled_fp8_quant.default"}
    # of the six ordered pairs of the three ops its code names, at each of the consumer's tensor
    # arguments, the one it fuses is what its graphs confirm: the norm's result as the quant's input
    assert [(e["producer"], e["consumer"], e["argument"]) for e in focus["edges"]] == [
        ("mylib.rms_norm.default", "mylib.static_scaled_fp8_quant.default", "input")]
    assert focus["graphs_holding"] > 0  # counted through the auto_functionalized_v2 nodes


def test_a_fusion_that_drops_the_norms_epsilon_is_caught_and_its_repro_rebuilds_the_hop_graph(tmp_path):
    import subprocess

    from conformance import verify

    # caught at graphs 44 and 12 of seeds 1 and 3, not in 50 at seeds 0 and 2 (at graph 7 of seed 2 before
    # focus slices spanned their dim: the draws move with any change to the draw order)
    result = verify("mylib_fusion:fuse_ignoring_epsilon", ops="mylib", ir="post-grad", max_examples=50, seed=3,
                    device="cpu", shrink=False, repro_dir=str(tmp_path))
    assert [v.property for v in result.violations] == ["values"], result.violations
    violation = result.violations[0]
    assert "auto_functionalized_v2(torch.ops.mylib.rms_norm.default" in violation.graph_before
    assert "rms_norm_static_fp8_quant" in violation.graph_after
    script = violation.repro_path
    assert script and "import mylib_ops" in open(script).read()  # the module that registers the ops
    ran = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": EXAMPLES + os.pathsep + os.environ.get("PYTHONPATH", "")})
    assert ran.returncode == 1 and "values" in ran.stdout, ran.stdout[-2000:] + ran.stderr[-2000:]


def test_a_fusion_that_loses_the_residual_write_is_caught_and_its_correct_twin_fires(tmp_path):
    """fused_add_rms_norm writes its input and its residual; a fusion with the quant after it must
    hand the residual's readers the fused op's write. Caught at graph 4 of seed 0; the correct twin
    changed 47, 44 and 43 of 200 at seeds 0-2 (the sweep, before issue 56's structures)."""
    from conformance import verify

    bad = verify("mylib_fusion:fuse_dropping_the_residual_write", ops="mylib", ir="post-grad", max_examples=20,
                 seed=0, device="cpu", shrink=False, repro_dir=str(tmp_path))
    assert "values" in {v.property for v in bad.violations}, bad.violations
    # seed 0: 6 of its first 20 graphs (seeds 1-3: 3, 2, 2; 18 of 80 at seed 1)
    good = verify("mylib_fusion:fuse_add_rms_norm_quant", ops="mylib", ir="post-grad", max_examples=20, seed=0,
                  device="cpu", repro_dir=str(tmp_path))
    assert good.ok and good.changed >= 4, (good.changed, good.violations)


def _fused_add_norm_graph(later_read: bool):
    """A post-grad graph by hand: ``fused_add_rms_norm`` writing a clone of ``sin(x)`` and a clone of
    the input ``r``; ``cos(sin(x))`` after the call where ``later_read``."""
    g = fx.Graph()
    x, r, w = g.placeholder("x"), g.placeholder("r"), g.placeholder("w")
    s = g.call_function(aten.sin.default, (x,))
    early = g.call_function(aten.neg.default, (s,))  # a read before the call: the write may come after it
    bases = [g.call_function(aten.clone.default, (s,)), g.call_function(aten.clone.default, (r,))]
    af = g.call_function(AF, (torch.ops.mylib.fused_add_rms_norm.default,), {
        "weight": w, "epsilon": 1e-6, "_input_base_index": 0, "_residual_base_index": 1, "_all_bases": bases})
    normed, residual = (g.call_function(operator.getitem, (af, i)) for i in (1, 2))
    outputs = [normed, residual, early] + ([g.call_function(aten.cos.default, (s,))] if later_read else [])
    g.output(tuple(outputs))
    gm = fx.GraphModule(torch.nn.Module(), g)
    return gm, (torch.randn(2, 4), torch.randn(2, 4), torch.rand(4) + 0.5)


@pytest.mark.parametrize("later_read", [False, True], ids=["source-read-before", "source-read-after"])
def test_the_de_functionalization_writes_a_clones_source_only_where_nothing_reads_it_later(later_read):
    """Shown on hand-written graphs, without the generator: the correct pass turns the node into the
    in-place call and drops the clone of ``sin(x)`` where its only other reader comes first, never the
    clone of an input; its twin drops both, and the checker says what that broke."""
    from conformance import check
    from mylib_defunctionalize import fix_functionalization, fix_functionalization_ignoring_later_reads

    gm, inputs = _fused_add_norm_graph(later_read)
    verdict = check(fix_functionalization, gm, inputs)
    assert verdict.ok and verdict.changed, str(verdict)
    after = verdict.graph_after
    assert "auto_functionalized" not in after and "mylib.fused_add_rms_norm.default(" in after
    assert after.count("aten.clone.default(") == (2 if later_read else 1), after
    bad = check(fix_functionalization_ignoring_later_reads, gm, inputs)
    broken = {v.property for v in bad.violations}
    assert "mutations" in broken and ("values" in broken) is later_read, str(bad)


def test_a_de_functionalization_that_writes_a_buffer_still_read_later_is_caught_and_its_correct_twin_fires():
    """The twin writes a clone's source whoever reads it later: caught at graph 4 of seed 0 (an expanded
    input written in place, which raises: validity) and at graph 1 of seed 1 (an input written:
    mutations and aliasing). The correct pass changed 27 of 50 graphs (the sweep: 200 at seeds 0-2)."""
    from conformance import verify

    bad = verify("mylib_defunctionalize:fix_functionalization_ignoring_later_reads", ops="mylib", ir="post-grad",
                 max_examples=20, seed=0, device="cpu", shrink=False, repro_dir=None)
    assert {v.property for v in bad.violations} & {"values", "mutations", "validity"}, bad.violations
    written = [v for v in bad.violations if v.property == "validity"]
    assert all("more than one element of the written-to tensor" in v.message for v in written), written
    good = verify("mylib_defunctionalize:fix_functionalization", ops="mylib", ir="post-grad", max_examples=20,
                  seed=0, device="cpu", shrink=False, repro_dir=None)
    assert good.ok and good.changed >= 5, (good.changed, good.violations)


def test_a_pattern_table_over_the_users_ops_is_a_pass_form_whose_pair_discovery_finds():
    """vLLM's fusions are mostly ``PatternMatcherPass``es whose patterns are traced over the
    ``auto_functionalized_v2`` form of its ops: the table is the pattern-table form, its patterns name
    the ops they wrap (so discovery probes their pair and the search chains them), and its planted
    twin, a replacement that keeps the epsilon it was traced with, is caught (at graph 6 of seed 0;
    3 of seed 2 before issue 56's argument relations moved the draws). The correct table changed 8 of 50 graphs at seed 0 (the sweep: 200 at
    seeds 0-2)."""
    from conformance import load_pass, verify
    from conformance.search.static_triggers import static_triggers
    from mylib_patterns import fuse_with_patterns

    assert load_pass("mylib_patterns:fuse_with_patterns").form == "pattern-table"
    assert {"mylib.rms_norm.default", "mylib.static_scaled_fp8_quant.default"} <= set(
        static_triggers(fuse_with_patterns).missing)
    bad = verify("mylib_patterns:fuse_with_patterns_ignoring_epsilon", ops="mylib", ir="post-grad", max_examples=10,
                 seed=0, device="cpu", shrink=False, repro_dir=None)
    assert [v.property for v in bad.violations] == ["values"], bad.violations
    good = verify("mylib_patterns:fuse_with_patterns", ops="mylib", ir="post-grad", max_examples=20, seed=0,
                  device="cpu", shrink=False, repro_dir=None)
    assert good.ok and good.changed >= 3, (good.changed, good.violations)
    assert [(e["producer"], e["consumer"], e["argument"]) for e in good.focus["edges"]] == [
        ("mylib.rms_norm.default", "mylib.static_scaled_fp8_quant.default", "input")]


def test_the_cached_edges_of_a_users_ops_are_keyed_by_their_code_and_the_auto_functionalized_form(tmp_path):
    """Confirmed user-op edges are cached beside discovery's entry: an edit of the library that
    defines the ops (their kernels, fake impls) or of their rules, or the v1/v2 config, is another key."""
    import importlib.util

    from torch._inductor import config

    from conformance.search.triggers import _user_ops_fingerprint

    edges = [("mylib.rms_norm.default", "mylib.static_scaled_fp8_quant.default")]
    first = _user_ops_fingerprint(edges)
    assert _user_ops_fingerprint(edges) == first
    with config.patch(enable_auto_functionalized_v2=False):
        assert _user_ops_fingerprint(edges) != first
    library = tmp_path / "fxc_fingerprint_ops.py"
    library.write_text("import torch\n\n\n@torch.library.custom_op('fxc_fingerprint::twice', mutates_args=())\n"
                       "def twice(x: torch.Tensor) -> torch.Tensor:\n    return x * 2\n")
    spec = importlib.util.spec_from_file_location("fxc_fingerprint_ops", library)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    own = [("fxc_fingerprint.twice.default", "mylib.rms_norm.default")]
    before = _user_ops_fingerprint(own)
    library.write_text(library.read_text() + "# an edit of the kernel's module\n")
    assert _user_ops_fingerprint(own) != before


def test_verify_ops_names_what_it_cannot_find_in_one_line():
    from conformance import UsageError, verify

    with pytest.raises(UsageError, match=r"ops=mylib::nope: neither a catalog op .* nor a registered op"):
        verify(lambda gm: gm, ops="mylib::nope", max_examples=1, repro_dir=None)
    with pytest.raises(UsageError, match="ops= shapes drawn aten graphs"):
        verify(lambda gm: gm, ops="mylib", dynamic=True, max_examples=1, repro_dir=None)


@pytest.mark.sweep
@pytest.mark.parametrize("seed_value", [0, 1, 2])
def test_the_fusion_and_its_planted_bug_over_200_graphs(seed_value, tmp_path):
    from conformance import verify

    good = verify("mylib_fusion:fuse_rms_norm_quant", ops="mylib", ir="post-grad", max_examples=200, seed=seed_value,
                  device="cpu", repro_dir=str(tmp_path))
    # issue 56's bar, a tenth of the graphs (measured after its complex operands: 39-45 at seeds 0-2 for the
    # fused-add fusion, which had 40 as its bar before)
    assert good.ok and good.changed >= 20, (good.changed, good.violations)
    bad = verify("mylib_fusion:fuse_ignoring_epsilon", ops="mylib", ir="post-grad", max_examples=200, seed=seed_value,
                 device="cpu", shrink=False, repro_dir=str(tmp_path))
    assert "values" in {v.property for v in bad.violations}
    good = verify("mylib_fusion:fuse_add_rms_norm_quant", ops="mylib", ir="post-grad", max_examples=200,
                  seed=seed_value, device="cpu", repro_dir=str(tmp_path))
    assert good.ok and good.changed >= 20, (good.changed, good.violations)
    bad = verify("mylib_fusion:fuse_dropping_the_residual_write", ops="mylib", ir="post-grad", max_examples=200,
                 seed=seed_value, device="cpu", shrink=False, repro_dir=str(tmp_path))
    assert "values" in {v.property for v in bad.violations}
    good = verify("mylib_defunctionalize:fix_functionalization", ops="mylib", ir="post-grad", max_examples=200,
                  seed=seed_value, device="cpu", repro_dir=str(tmp_path))
    assert good.ok and good.changed >= 60, (good.changed, good.violations)
    bad = verify("mylib_defunctionalize:fix_functionalization_ignoring_later_reads", ops="mylib", ir="post-grad",
                 max_examples=200, seed=seed_value, device="cpu", shrink=False, repro_dir=str(tmp_path))
    # (an expanded input written in place raises: validity, as at seed 0)
    assert {v.property for v in bad.violations} & {"values", "mutations", "validity"}
    good = verify("mylib_patterns:fuse_with_patterns", ops="mylib", ir="post-grad", max_examples=200,
                  seed=seed_value, device="cpu", repro_dir=str(tmp_path))
    assert good.ok and good.changed >= 25, (good.changed, good.violations)  # 67, 80 and 37 at seeds 0-2
    bad = verify("mylib_patterns:fuse_with_patterns_ignoring_epsilon", ops="mylib", ir="post-grad",
                 max_examples=200, seed=seed_value, device="cpu", shrink=False, repro_dir=str(tmp_path))
    assert "values" in {v.property for v in bad.violations}


def test_the_pytest_plugin_draws_the_users_ops_with_fx_ops():
    """--fx-ops, as the plugin registers it and the third-party suite reads it, reaches the suite's
    graphs: they hold mylib's ops in post-grad form, and the fusion is judged (and fires) on them. In
    this process: a pytest run of its own (the plugin's wiring from a command line) is
    tests/test_cli_verify.py's, 4-5 s of start-up each."""
    from types import SimpleNamespace

    from conformance import pytest_plugin
    from conformance.checker import Checker
    from conformance.suite import test_third_party_pass as suite

    added = {}
    group = SimpleNamespace(addoption=lambda *names, **kw: added.update({n: kw for n in names}))
    pytest_plugin.pytest_addoption(SimpleNamespace(getgroup=lambda *a, **k: group, addini=lambda *a, **k: None))
    options = {kw.get("dest", name.lstrip("-").replace("-", "_")): kw.get("default") for name, kw in added.items()}
    assert "fx_ops" in options, sorted(added)
    options.update(fx_pass="mylib_fusion:fuse_rms_norm_quant", fx_ops="mylib", fx_ir="post-grad", fx_device="cpu")
    config = SimpleNamespace(getoption=lambda name, default=None: options.get(name, default))
    put, ensure, strategy, specials, dynamic, device = suite.options_from(config)
    cases = _draw(strategy, 12)
    assert any(str(n.args[0]).startswith("mylib.") for case in cases for n in case.gm.graph.nodes
               if n.target is torch.ops.higher_order.auto_functionalized_v2)
    checker = Checker(put, properties=["values"], ensure=ensure, specials=specials, device=device)
    verdicts = [checker.check(case.gm, case.example_inputs) for case in cases]
    assert all(v.ok for v in verdicts), [str(v) for v in verdicts if not v.ok]
    assert sum(bool(v.changed) and not v.dead_code_only for v in verdicts) >= 1


@torch.library.custom_op("fxc_test::bad_fake", mutates_args=())
def _bad_fake(input: torch.Tensor) -> torch.Tensor:
    return input.sum(-1) if input.dim() else input * 2


@_bad_fake.register_fake
def _(input):
    return torch.empty_like(input)  # wrong wherever the kernel reduces the last dim


def test_a_user_op_whose_fake_impl_disagrees_with_its_kernel_is_the_ops_fault_in_one_line(tmp_path):
    """The calls are left out of the graphs (a pass re-propagating fakes would see another graph), the
    verdict on the pass stands, and the run names the op once."""
    from conformance import verify
    from conformance._console import ConsoleReporter

    lines = []
    reporter = ConsoleReporter()
    reporter._line = lines.append
    result = verify(lambda gm: gm, ops=[torch.ops.fxc_test.bad_fake.default], max_examples=10, seed=0, focus="none",
                    device="cpu", repro_dir=None, reporter=reporter)
    assert result.ok and not result.violations
    health = result.user_ops["fxc_test.bad_fake.default"]
    assert health["fake_disagreements"] > 0 and health["fault"].startswith(
        "fxc_test.bad_fake.default: its fake impl disagrees with its kernel on ")
    assert "the op's fault, not the pass's" in health["fault"]
    assert [line for line in lines if "fxc_test.bad_fake" in line] == [health["fault"]]


def test_the_forms_serving_passes_come_in_are_detected_and_see_the_users_ops():
    """A VllmInductorPass-style callable (``__call__(self, graph)``) and an Inductor CustomGraphPass
    are the graph form; the code their methods run (a base class's too) names the user ops."""
    from conformance import load_pass
    from conformance.search.static_triggers import static_triggers

    for target in ("mylib_fusion:fuse_rms_norm_quant", "mylib_fusion:fuse_as_custom_graph_pass",
                   "mylib_fusion:fuse_ignoring_epsilon"):
        put = load_pass(target)
        assert put.form == "graph", (target, put.form)
        named = static_triggers(put.fn).missing
        assert {"mylib.rms_norm.default", "mylib.static_scaled_fp8_quant.default"} <= set(named), (target, named)
