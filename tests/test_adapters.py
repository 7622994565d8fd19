"""Pass adapters: every real calling form is detected and called right; bad targets are one clear
UsageError; the caller's graph is never touched."""

from __future__ import annotations

import pytest
import torch
import torch.fx as fx
from torch.fx.passes.infra.pass_base import PassBase, PassResult
from torch.fx.passes.infra.pass_manager import PassManager, pass_result_wrapper
from torch.fx.passes.pass_manager import PassManager as LegacyPassManager

from conformance import UsageError, check, load_pass
from conformance.adapters import reference_of, snapshot
from tests.graphs import linear_bias

aten = torch.ops.aten


def _gm():
    g = fx.Graph()
    x = g.placeholder("x")
    g.output((g.call_function(aten.neg.default, (g.call_function(aten.neg.default, (x,)),)),))
    return fx.GraphModule(torch.nn.Module(), g)


def gm_pass(gm):
    return gm


def inplace_pass(gm: fx.GraphModule) -> None:
    gm.graph.eliminate_dead_code()


def graph_pass(graph: fx.Graph) -> None:
    graph.eliminate_dead_code()


def graph_pass_string_annotation(graph: "torch.fx.Graph"):
    return None


def lowering_pass(gm: fx.GraphModule, sample_inputs):
    assert all(isinstance(t, torch.Tensor) for t in sample_inputs)
    return gm


def settings_pass(gm, settings):
    assert settings == {"precision": "fp32"}
    return gm


def make_settings():
    return {"precision": "fp32"}


def varargs_pass(gm, *sample_args):
    assert len(sample_args) == 1
    return gm


class CountingPass(PassBase):
    def call(self, graph_module):
        return PassResult(graph_module, False)


@pytest.mark.parametrize("fn, form", [
    (gm_pass, "gm"), (inplace_pass, "gm"), (graph_pass, "graph"), (graph_pass_string_annotation, "graph"),
    (lowering_pass, "gm-inputs"), (varargs_pass, "gm-varargs"), (CountingPass(), "gm"),
    (PassManager([pass_result_wrapper(gm_pass)]), "gm"), (LegacyPassManager([gm_pass]), "gm"),
    (lambda g: None, "graph"), (lambda gm, example_inputs: gm, "gm-inputs"),
])
def test_forms_are_detected_and_run(fn, form):
    put = load_pass(fn)
    assert put.form == form
    x = torch.randn(3)
    assert check(put, _gm(), (x,)).ok


def test_settings_form_needs_a_factory():
    with pytest.raises(UsageError, match="--settings-factory"):
        load_pass(settings_pass)
    put = load_pass(settings_pass, settings_factory=make_settings)
    assert put.form == "gm-settings" and check(put, _gm(), (torch.randn(2),)).ok
    path_put = load_pass("tests.test_adapters:settings_pass", settings_factory="tests.test_adapters:make_settings")
    assert check(path_put, _gm(), (torch.randn(2),)).ok


@pytest.mark.parametrize("target, form", [
    ("torch._inductor.fx_passes.post_grad:remove_noop_ops", "graph"),
    ("torch._inductor.fx_passes.post_grad:view_to_reshape", "gm"),
    ("torch.fx:Graph.eliminate_dead_code", "graph"),
    ("torch._functorch.compile_utils:fx_graph_cse", "graph"),
    ("torch.fx.passes.reinplace:reinplace", "gm-varargs"),
    ("torch._inductor.constant_folding:constant_fold", "gm"),
    ("torch.fx.passes.dialect.common.cse_pass:CSEPass", "gm"),  # a PassBase class, instantiated
    ("tests/test_adapters.py:lowering_pass", "gm-inputs"),
])
def test_import_paths(target, form):
    assert load_pass(target).form == form


def test_signature_override():
    assert load_pass(gm_pass, signature="graph").form == "graph"
    with pytest.raises(UsageError, match="signature='nope'"):
        load_pass(gm_pass, signature="nope")


@pytest.mark.parametrize("target, message", [
    ("no.such.module:fn", "cannot import module 'no.such.module'"),
    ("torch.fx:no_such_attr", "cannot find 'no_such_attr'"),
    ("torch.fx.Graph", "should look like pkg.module:attr"),
    ("missing/file.py:fn", "no such file"),
    ("torch:__version__", "not callable"),
    ("torch.fx.passes.infra.pass_base:PassBase", "cannot be built without arguments"),
])
def test_bad_targets_are_usage_errors(target, message):
    with pytest.raises(UsageError, match=message):
        load_pass(target)


def test_two_unknown_parameters_is_a_usage_error():
    with pytest.raises(UsageError, match="--signature"):
        load_pass(lambda gm, frobnicate: gm)


def test_reference_of_finds_importable_objects_only():
    assert reference_of(gm_pass) == "tests.test_adapters:gm_pass"
    assert reference_of(lambda gm: gm) is None
    assert reference_of(CountingPass()) is None


def test_snapshot_is_independent_and_keeps_meta():
    gm = _gm()
    gm.register_buffer("c", torch.ones(2, 3).t())
    with gm.graph.inserting_before(next(n for n in gm.graph.nodes if n.op == "output")):
        gm.graph.get_attr("c")
    gm.recompile()
    for n in gm.graph.nodes:
        n.meta["val"] = "marker"
    copy = snapshot(gm)
    assert copy.code == gm.code and copy.c.stride() == gm.c.stride()
    assert all(n.meta.get("val") == "marker" for n in copy.graph.nodes if n.op != "output")
    copy.c.fill_(5)
    next(iter(copy.graph.nodes)).meta["val"] = "changed"
    assert torch.equal(gm.c, torch.ones(2, 3).t()) and next(iter(gm.graph.nodes)).meta["val"] == "marker"


def test_snapshot_copies_a_use_before_def_graph_as_it_is():
    """deepcopy and Graph.graph_copy raise KeyError on such a graph; a pass's broken result must
    still be copyable (idempotence, determinism, repro scripts) and judged, not crash the harness."""
    import copy as copymod

    gm = _gm()
    ops = [n for n in gm.graph.nodes if n.op == "call_function"]
    assert len(ops) >= 2
    ops[0].prepend(ops[-1])  # the last op now comes first: it uses values defined after it
    with pytest.raises(KeyError):
        copymod.deepcopy(gm)
    copy = snapshot(gm)
    assert [(n.name, str(n.args)) for n in copy.graph.nodes] == [(n.name, str(n.args)) for n in gm.graph.nodes]
    with pytest.raises(RuntimeError, match="used before it has been defined"):
        copy.graph.lint()


def test_to_device_keeps_layout_sharing_and_meta():
    from conformance.adapters import to_device

    base = torch.arange(12.0)
    inputs = (base.view(3, 4).t(), base[2:6])
    gm = _gm()
    moved_gm, moved = to_device(gm, (inputs[0],), "cpu")
    assert moved[0].stride() == (1, 4) and moved[0].untyped_storage().data_ptr() != base.untyped_storage().data_ptr()
    _, both = to_device(gm, inputs, "cpu")
    assert both[0].untyped_storage().data_ptr() == both[1].untyped_storage().data_ptr()
    assert both[1].storage_offset() == 2 and torch.equal(both[1], inputs[1])
    assert all("val" in n.meta for n in moved_gm.graph.nodes if n.op != "output")


# --- Inductor pattern tables and counts of replacements (issue 16: calling forms) ----------------------


def test_an_inductor_pattern_table_is_a_pass_named_by_an_indexed_import_path():
    target = "torch._inductor.fx_passes.post_grad:pass_patterns[2]"
    assert load_pass(target).form == "pattern-table"
    gm, inputs = linear_bias()
    verdict = check(target, gm, inputs)
    assert verdict.ok and "addmm" in verdict.graph_after and verdict.changed
    gm, inputs = linear_bias(alpha=0.5)  # the table drops alpha (tests/test_real_pass_fire.py)
    assert [v.property for v in check(target, gm, inputs).violations] == ["values"]


def test_a_pattern_table_is_filled_by_its_modules_lazy_init_first():
    code = ("import torch._inductor.fx_passes.joint_graph as j\n"
            "before = sum(len(v) for v in j.patterns.patterns.values())\n"
            "from conformance import load_pass\n"
            "put = load_pass('torch._inductor.fx_passes.joint_graph:patterns')\n"
            "print(before, sum(len(v) for v in put.fn.patterns.values()))\n")
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    before, after = int(out[-2]), int(out[-1])
    assert after > before


@pytest.mark.parametrize("target, message", [
    ("torch._inductor.fx_passes.post_grad:pass_patterns[9]", "cannot index pass_patterns[9]"),
    ("torch._inductor.fx_passes.post_grad:pass_patterns[x]", "should be a name, or a name indexed"),
    ("torch._inductor.fx_passes.post_grad:remove_noop_ops[0]", "cannot index remove_noop_ops[0]"),
])
def test_a_bad_index_in_an_import_path_is_a_usage_error(target, message):
    with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_pass(target)


def test_a_pattern_table_has_no_other_form_and_nothing_else_is_one():
    with pytest.raises(UsageError, match="its form is pattern-table, not gm"):
        load_pass("torch._inductor.fx_passes.post_grad:pass_patterns[2]", signature="gm")
    with pytest.raises(UsageError, match="needs an Inductor PatternMatcherPass"):
        load_pass(lambda gm: gm, signature="pattern-table")


def test_a_pass_may_return_its_count_of_replacements():
    def negate_abs(gm):  # in place, returns how many it replaced (as Inductor's passes do)
        count = 0
        for n in gm.graph.nodes:
            if n.target is torch.ops.aten.abs.default:
                n.target, count = torch.ops.aten.neg.default, count + 1
        gm.recompile()
        return count

    gm, inputs = linear_bias()
    assert check(negate_abs, gm, inputs).ok  # 0 replacements: no "returned int" execution violation
    g = fx.Graph()
    x = g.placeholder("x")
    g.output((g.call_function(torch.ops.aten.abs.default, (x,)),))
    verdict = check(negate_abs, fx.GraphModule(torch.nn.Module(), g), (torch.ones(2),))
    assert [v.property for v in verdict.violations] == ["values"] and verdict.changed
