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
from conformance.adapters import reference_of
from conformance.copies import snapshot
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


def optional_settings_pass(gm, settings=None):
    assert settings == {"precision": "fp32"}, settings
    return gm


def test_a_settings_factory_is_used_or_refused_never_ignored():
    """fn(gm, settings=None) with --settings-factory gets the factory's settings; a pass that takes no
    settings refuses the factory in one line (it was silently ignored: issue 33)."""
    put = load_pass(optional_settings_pass, settings_factory=make_settings)
    assert put.form == "gm-settings" and check(put, _gm(), (torch.randn(2),)).ok
    assert load_pass(optional_settings_pass).form == "gm"
    with pytest.raises(UsageError, match="--settings-factory was given, but .* takes no settings"):
        load_pass(lambda gm: gm, settings_factory=make_settings)


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
    from conformance.copies import to_device

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
    gm, inputs = linear_bias(alpha=0.5)  # the table drops alpha (conformance/suite/test_torch_passes.py)
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


# --- fx.Transformer subclasses, extra arguments, contexts (issue 16: calling forms) --------------------


class AbsToNeg(fx.Transformer):
    """A planted transformer: abs -> neg (wrong wherever an input is negative)."""

    def call_function(self, target, args, kwargs):
        if target is torch.ops.aten.abs.default:
            target = torch.ops.aten.neg.default
        return super().call_function(target, args, kwargs)


class NegToMul(fx.Transformer):
    """A correct transformer: neg(x) -> mul(x, -1)."""

    def __init__(self, module, factor=-1):
        super().__init__(module)
        self.factor = factor

    def call_function(self, target, args, kwargs):
        if target is torch.ops.aten.neg.default:
            return super().call_function(torch.ops.aten.mul.Tensor, (args[0], self.factor), {})
        return super().call_function(target, args, kwargs)


def _unary(op):
    g = fx.Graph()
    x = g.placeholder("x")
    g.output((g.call_function(op, (x,)),))
    return fx.GraphModule(torch.nn.Module(), g), (torch.tensor([-2.0, 3.0]),)


def test_a_transformer_subclass_is_a_pass_and_its_bugs_are_found():
    assert load_pass(AbsToNeg).form == "transformer"
    assert load_pass("torch.fx.experimental.normalize:NormalizeArgs").form == "transformer"
    verdict = check(AbsToNeg, *_unary(torch.ops.aten.abs.default))
    assert [v.property for v in verdict.violations] == ["values"] and "neg" in verdict.graph_after
    verdict = check(NegToMul, *_unary(torch.ops.aten.neg.default))
    assert verdict.ok and verdict.changed and "mul" in verdict.graph_after
    # Its constructor gets the extra arguments: a wrong factor is a wrong pass.
    assert check(NegToMul, *_unary(torch.ops.aten.neg.default), pass_kwargs={"factor": -1}).ok
    wrong = check(NegToMul, *_unary(torch.ops.aten.neg.default), pass_kwargs={"factor": 2})
    assert [v.property for v in wrong.violations] == ["values"]
    with pytest.raises(UsageError, match="no such keyword parameter"):
        load_pass(NegToMul, pass_kwargs={"scale": 2})
    with pytest.raises(UsageError, match="its form is transformer, not gm"):
        load_pass(NegToMul, signature="gm")


def test_a_class_that_is_no_pass_is_a_usage_error_naming_what_it_is():
    class Helper:
        def __init__(self, gm):
            self.gm = gm

    with pytest.raises(UsageError, match="neither a PassBase nor an fx.Transformer subclass"):
        load_pass(Helper)
    with pytest.raises(UsageError, match="needs an fx.Transformer subclass"):
        load_pass(lambda gm: gm, signature="transformer")


def scale_outputs(gm, scale):
    """Multiplies every output by ``scale``: right for scale=1 only."""
    out = next(n for n in gm.graph.nodes if n.op == "output")
    with gm.graph.inserting_before(out):
        out.args = (tuple(gm.graph.call_function(torch.ops.aten.mul.Tensor, (a, scale)) for a in out.args[0]),)
    gm.recompile()
    return gm


def test_extra_arguments_are_given_by_name_and_leave_the_form():
    with pytest.raises(UsageError, match="--pass-arg scale=VALUE"):
        load_pass(scale_outputs)
    assert load_pass(scale_outputs, pass_kwargs={"scale": 1}).form == "gm"
    gm, inputs = _unary(torch.ops.aten.abs.default)
    assert check(scale_outputs, gm, inputs, pass_kwargs={"scale": 1}).ok
    assert [v.property for v in check(scale_outputs, gm, inputs, pass_kwargs={"scale": 3}).violations] == ["values"]
    with pytest.raises(UsageError, match="--pass-arg factor: .* no such keyword parameter .* gm, scale"):
        load_pass(scale_outputs, pass_kwargs={"scale": 1, "factor": 2})
    with pytest.raises(UsageError, match="takes no extra arguments"):
        load_pass("torch._inductor.fx_passes.post_grad:pass_patterns[2]", pass_kwargs={"x": 1})
    with pytest.raises(UsageError, match="should be a dict"):
        load_pass(scale_outputs, pass_kwargs=[("scale", 1)])
    # torch's own: post_grad_passes(gm, is_inference) is a gm pass once is_inference is given.
    assert load_pass("torch._inductor.fx_passes.post_grad:post_grad_passes", pass_kwargs={"is_inference": True}).form == "gm"


@pytest.mark.parametrize("items, expected", [
    (["is_inference=True"], {"is_inference": True}),
    (["n=2", "x=0.5", "t=(1, 2)", "none=None"], {"n": 2, "x": 0.5, "t": (1, 2), "none": None}),
    (["name=some text", "q='quoted'"], {"name": "some text", "q": "quoted"}),
])
def test_pass_args_are_literals_or_text(items, expected):
    from conformance.adapters import parse_pass_args

    assert parse_pass_args(items) == expected


@pytest.mark.parametrize("items, message", [
    (["novalue"], "should look like NAME=VALUE"), (["2x=1"], "should look like NAME=VALUE"),
    (["a=1", "a=2"], "given twice"),
])
def test_bad_pass_args_are_usage_errors(items, message):
    from conformance.adapters import parse_pass_args

    with pytest.raises(UsageError, match=message):
        parse_pass_args(items)


_INSIDE = []


def needs_context(gm):
    """A pass that only works inside its context (as Inductor passes need V.fake_mode)."""
    if not _INSIDE:
        raise RuntimeError("no context")
    return gm


def test_a_pass_runs_inside_its_context_with_the_graphs_fake_mode():
    from contextlib import contextmanager

    from torch._subclasses.fake_tensor import FakeTensorMode

    seen = []

    @contextmanager
    def ctx(gm, fake_mode):
        seen.append((gm, fake_mode))
        _INSIDE.append(1)
        try:
            yield
        finally:
            _INSIDE.pop()

    gm, inputs = linear_bias()
    without = check(needs_context, gm, inputs)
    assert [v.property for v in without.violations] == ["execution"] and "no context" in without.violations[0].message
    assert check(needs_context, gm, inputs, context=ctx).ok
    copy, fake_mode = seen[0]
    assert isinstance(fake_mode, FakeTensorMode) and copy is not gm
    placeholder = next(n for n in copy.graph.nodes if n.op == "placeholder")
    assert placeholder.meta["val"].fake_mode is fake_mode
    assert not _INSIDE  # left on return


def test_a_bad_context_is_a_usage_error():
    gm, inputs = linear_bias()
    with pytest.raises(UsageError, match="but a context factory may only ask for gm and fake_mode"):
        load_pass(needs_context, context=lambda settings: None)
    with pytest.raises(UsageError, match="should return a context manager"):
        check(needs_context, gm, inputs, context=lambda: 3)
    with pytest.raises(UsageError, match="is not callable"):
        load_pass(needs_context, context=3)


def test_the_shipped_inductor_context_sets_the_fake_mode_and_eager_random_numbers():
    """conformance.contexts:inductor: joint_graph_passes raises without V.fake_mode, and with it but
    without fallback_random swaps aten.rand for Inductor's own generator (by design, not comparable)."""
    from contextlib import contextmanager

    from torch._inductor import config
    from torch._inductor.virtualized import V
    from torch.fx.experimental.proxy_tensor import make_fx

    from strategies import to_ir

    x = (torch.zeros(3),)
    gm, inputs = to_ir(make_fx(lambda x: (torch.ops.aten.add.Tensor(torch.ops.aten.rand.default([3]), x),))(*x),
                       x, "post-grad")
    target = "torch._inductor.fx_passes.joint_graph:joint_graph_passes"
    bare = check(target, gm, inputs)
    assert [v.property for v in bare.violations] == ["execution"]

    @contextmanager
    def fake_mode_only(fake_mode):
        with V.set_fake_mode(fake_mode):
            yield

    assert [v.property for v in check(target, gm, inputs, context=fake_mode_only).violations] == ["values"]
    assert check(target, gm, inputs, context="conformance.contexts:inductor").ok
    assert config.fallback_random is False  # restored
