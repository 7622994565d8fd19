"""The torch IR (``torch_graph_cases``): every drawn module traces into a valid torch-level graph that
runs as the module does, the graphs hold every node kind pre-grad passes match, and the harness
judges torch's own module passes on them: ``fuse`` and ``NormalizeArgs`` pass (but for fuse's
known bugs, strict xfails in conformance/suite/test_torch_passes.py), a planted wrong fold is caught
and shrinks to the pair it breaks; ``graphs(ir="torch")`` and ``ir_errors(gm, "torch")`` reach them."""

from __future__ import annotations

import copy
import operator

import pytest
import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import HealthCheck, Phase, given, seed, settings
from torch.fx.experimental.normalize import NormalizeArgs
from torch.fx.experimental.optimization import fuse, matches_module_pattern, replace_node_module
from torch.nn.utils.fusion import fuse_conv_bn_weights

from conformance import check
from strategies import InvalidArgument
from strategies._ir.torch_ir import INVARIANTS, source_module, torch_graph_cases, torch_ir_errors

_QUIET = dict(database=None, deadline=None, suppress_health_check=list(HealthCheck))
_NORMALIZE_WARNINGS = (  # NormalizeArgs matching list and tuple arguments (torch.cat's) to type hints: harmless
    "ignore:We were not able to successfully create type hint:UserWarning",
    "ignore:Does not support nested parametric types:UserWarning",
)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny tensors: with two threads a batch norm's OpenMP region took ~8 ms while the other core was
    busy (measured on the 2-core AMD EPYC; 10 us on one thread)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _draw(n: int, **options) -> list:
    cases = []

    @settings(max_examples=n, derandomize=True, **_QUIET)
    @given(torch_graph_cases(**options))
    def collect(case):
        cases.append(case)

    collect()
    return cases


@pytest.fixture(scope="module")
def drawn():
    return _draw(150)


def _run(module, case):
    with torch.random.fork_rng(devices=[]):  # train-mode dropout draws the same mask in both runs
        torch.default_generator.manual_seed(0)  # torch.manual_seed seeds every device: 2 ms a call
        out = module(*case.fresh_inputs())
    return out if isinstance(out, tuple) else (out,)


def _op_nodes(gm) -> list:
    return [n for n in gm.graph.nodes if n.op not in ("placeholder", "output")]


# --- every draw ----------------------------------------------------------------------------------


def test_every_drawn_graph_is_torch_ir_and_runs_as_its_module(drawn):
    for case in drawn:
        gm = case.gm
        assert gm.meta["ir"] == "torch" and torch_ir_errors(gm) == [], case
        assert 1 <= len(case.example_inputs) <= 3
        assert all(t.dtype in (torch.float32, torch.float64) for t in case.example_inputs)
        assert check(lambda gm: gm, gm, case.fresh_inputs()).ok, case
        for got, want in zip(_run(gm, case), _run(source_module(gm), case), strict=True):
            torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    assert {c.gm.training for c in drawn} == {False, True}
    assert {t.dtype for c in drawn for t in c.example_inputs} == {torch.float32, torch.float64}
    assert any(not t.is_contiguous() for c in drawn for t in c.example_inputs)


def _module(cls):
    return lambda gm, n: n.op == "call_module" and type(gm.get_submodule(n.target)) is cls


def _function(target, scalar=None):
    """A call of ``target``; with ``scalar`` True/False, one with/without a Python number operand."""
    def match(gm, n):
        if n.op != "call_function" or n.target is not target:
            return False
        return scalar is None or any(isinstance(a, (int, float)) for a in n.args) == scalar
    return match


def _method(name):
    return lambda gm, n: n.op == "call_method" and n.target == name


def _size_feeds_view(gm, n):
    return n.op == "call_method" and n.target == "view" and any(
        isinstance(a, fx.Node) and a.op == "call_method" and a.target == "size" for a in n.args)


def _parameter_used_directly(gm, n):
    return n.op == "get_attr" and isinstance(operator.attrgetter(n.target)(gm), nn.Parameter) and \
        any(u.op == "call_function" for u in n.users)


# The node kinds torch IR graphs must hold (what pre-grad and module passes match): label -> test.
NODE_KINDS = {
    **{cls.__name__: _module(cls) for cls in (
        nn.Linear, nn.Conv1d, nn.Conv2d, nn.BatchNorm1d, nn.BatchNorm2d, nn.LayerNorm, nn.Dropout, nn.ReLU,
        nn.GELU, nn.Sigmoid, nn.Tanh, nn.Flatten, nn.MaxPool2d, nn.AvgPool2d, nn.Identity)},
    **{f"F.{f.__name__}": _function(f) for f in (F.relu, F.gelu, F.linear, F.layer_norm, F.softmax, F.dropout)},
    **{f"torch.{f.__name__}": _function(f) for f in (
        torch.add, torch.mul, torch.cat, torch.flatten, torch.matmul, torch.relu, torch.sum)},
    **{f"tensor {sym} {kind}": _function(op, scalar=kind == "scalar")
       for op, sym in ((operator.add, "+"), (operator.mul, "*"), (operator.sub, "-")) for kind in ("tensor", "scalar")},
    **{f".{m}": _method(m) for m in ("view", "reshape", "permute", "transpose", "contiguous", "sum", "mean", "relu")},
    ".size feeding .view": _size_feeds_view,
    "get_attr of a Parameter used directly": _parameter_used_directly,
}


def test_drawn_graphs_hold_every_node_kind_and_no_aten_overload(drawn):
    counts = dict.fromkeys(NODE_KINDS, 0)
    for case in drawn:
        for n in _op_nodes(case.gm):
            assert not isinstance(n.target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)), case
            for label, matches in NODE_KINDS.items():
                counts[label] += matches(case.gm, n)
    missing = [label for label, count in counts.items() if count == 0]
    assert not missing, f"never drawn in {len(drawn)} graphs: {missing}"


# --- torch's passes ------------------------------------------------------------------------------


def _has_fold_pair(gm) -> bool:
    modules = dict(gm.named_modules())
    return any(matches_module_pattern(p, n, modules) for n in gm.graph.nodes for p in _FOLDS + _LINEAR_FOLD)


_FOLDS = ((nn.Conv1d, nn.BatchNorm1d), (nn.Conv2d, nn.BatchNorm2d))
_LINEAR_FOLD = ((nn.Linear, nn.BatchNorm1d),)


def _known_fuse_bugs(case) -> set:
    """The torch 2.13 fuse bugs a graph holds (strict xfails in conformance/suite/test_torch_passes.py):
    a Linear -> BatchNorm1d pair
    fuse folds whose norm has no affine weight, or whose input is (N, C, L)."""
    gm, ranks = case.gm, {}

    class Ranks(fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            ranks[n.name] = getattr(out, "ndim", None)
            return out

    Ranks(copy.deepcopy(gm)).run(*case.fresh_inputs())
    modules, found = dict(gm.named_modules()), set()
    for n in gm.graph.nodes:
        if matches_module_pattern(_LINEAR_FOLD[0], n, modules) and len(n.args[0].users) == 1 \
                and modules[n.target].track_running_stats:
            if not modules[n.target].affine:
                found.add("affine=False")
            if ranks[n.args[0].name] == 3:
                found.add("(N, C, L)")
    return found


def test_fuse_passes_check_and_folds_a_third_of_eval_graphs(drawn):
    eval_cases = [c for c in drawn if not c.gm.training]
    changed = 0
    for case in eval_cases:
        verdict = check(fuse, case.gm, case.fresh_inputs())
        changed += bool(verdict.changed)
        # Not ok only on a known fuse bug (conformance/suite/test_torch_passes.py keeps them)
        assert verdict.ok or _known_fuse_bugs(case), (case, verdict.violations)
    assert changed >= 0.3 * len(eval_cases), f"fuse changed {changed} of {len(eval_cases)} eval-mode graphs"


def test_fuse_on_a_train_mode_graph_is_an_execution_violation(drawn):
    """fuse is for inference: on a train-mode module with a pair it raises, and check says so."""
    case = next(c for c in drawn if c.gm.training and _has_fold_pair(c.gm))
    verdict = check(fuse, case.gm, case.fresh_inputs())
    assert [v.property for v in verdict.violations] == ["execution"]
    assert "Fusion only for eval!" in verdict.violations[0].message


@pytest.mark.filterwarnings(*_NORMALIZE_WARNINGS)
def test_normalize_args_passes_check(drawn):
    changed = 0
    for case in drawn[:60]:
        verdict = check(NormalizeArgs, case.gm, case.fresh_inputs())
        assert verdict.ok, (case, verdict.violations)
        changed += bool(verdict.changed)
    assert changed >= 10  # it rewrote graphs: positional arguments became keywords


def fuse_ignoring_running_mean(gm: fx.GraphModule) -> fx.GraphModule:
    """A planted bug: fuse's conv -> batch norm fold, as if every running_mean were zero. Like fuse it
    reads the mode off the modules it folds."""
    gm = copy.deepcopy(gm)
    modules = dict(gm.named_modules())
    for node in list(gm.graph.nodes):
        if not any(matches_module_pattern(p, node, modules) for p in _FOLDS) or len(node.args[0].users) > 1:
            continue
        conv, bn = modules[node.args[0].target], modules[node.target]
        if conv.training or bn.training or not bn.track_running_stats:
            continue
        folded = copy.deepcopy(conv)
        folded.weight, folded.bias = fuse_conv_bn_weights(conv.weight, conv.bias, torch.zeros_like(bn.running_mean),
                                                          bn.running_var, bn.eps, bn.weight, bn.bias)
        replace_node_module(node.args[0], modules, folded)
        node.replace_all_uses_with(node.args[0])
        gm.graph.erase_node(node)
    gm.recompile()
    return gm


def test_a_fold_that_ignores_running_mean_is_caught_and_shrinks_to_the_pair():
    def wrong_values(case):
        if case.gm.training or not _has_fold_pair(case.gm):  # the pass changes nothing: skip check's runs
            return False
        verdict = check(fuse_ignoring_running_mean, case.gm, case.fresh_inputs(), properties=["values"])
        return any(v.property == "values" for v in verdict.violations)

    # Generate and shrink only: the explain phase would rerun check a few hundred times more. A fixed
    # seed, not find()'s derandomized one (the same for every find(): the bug at call 38, 221 calls in
    # all, 10 s of CPU on the 2-core AMD EPYC): seed 12 meets it in the first graph and shrinks it to
    # the pair in 113 calls (4 s); of seeds 0-70, those that meet it by the 2nd graph took 113-720 calls.
    # Hypothesis replays the minimal failing graph last, so the last graph caught is the shrunk one.
    caught = []

    @seed(12)
    @settings(max_examples=100, phases=[Phase.generate, Phase.shrink], **_QUIET)
    @given(torch_graph_cases())
    def search(case):
        if wrong_values(case):
            caught.append(case)
            raise AssertionError("values differ")

    with pytest.raises(AssertionError, match="values differ"):
        search()
    case = caught[-1]
    kinds = [type(case.gm.get_submodule(n.target)) for n in _op_nodes(case.gm) if n.op == "call_module"]
    assert len(_op_nodes(case.gm)) <= 3 and any(k in (nn.Conv1d, nn.Conv2d) for k in kinds), case


# --- the invariants ------------------------------------------------------------------------------


def _plain(module: nn.Module | None = None) -> fx.GraphModule:
    return fx.symbolic_trace(module or nn.Sequential(nn.Linear(2, 2), nn.ReLU()).eval())


def _root(**children) -> nn.Module:
    root = nn.Module()
    for name, child in children.items():
        root.add_module(name, child)
    return root


def _with_node(op: str, target, root: nn.Module | None = None) -> fx.GraphModule:
    g = fx.Graph()
    x = g.placeholder("x")
    g.output(g.create_node(op, target, (x,)))
    return fx.GraphModule(root or nn.Module(), g)


def _used_before_defined():
    gm = _plain()
    first, second = _op_nodes(gm)[:2]
    first.prepend(second)
    return gm


def _one_submodule_in_train_mode():
    gm = _plain()
    gm.get_submodule("1").train()
    return gm


# One planted break per invariant, and the words its message must hold.
BREAKS = {
    "lint": (_used_before_defined, "graph.lint() raised"),
    "above-dispatch": (lambda: _with_node("call_function", torch.ops.aten.relu.default), "ATen overloads"),
    "module-targets": (lambda: _with_node("call_module", "seq", _root(seq=nn.Sequential())), "should be a leaf module"),
    "attr-targets": (lambda: _with_node("get_attr", "sub", _root(sub=nn.ReLU())), "should be a Parameter or buffer"),
    "method-targets": (lambda: _with_node("call_method", "not_a_method"), "should name a torch.Tensor method"),
    "one-mode": (_one_submodule_in_train_mode, "training=True, but should be False"),
}


def test_every_invariant_has_a_planted_break():
    assert sorted(BREAKS) == sorted(name for name, _, _ in INVARIANTS)


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_each_invariant_catches_its_planted_break(name):
    build, words = BREAKS[name]
    checker = next(c for n, _, c in INVARIANTS if n == name)
    assert torch_ir_errors(_plain()) == []
    errors = list(checker(build()))
    assert errors and words in errors[0], errors


def test_a_call_module_naming_a_missing_submodule_is_caught():
    g = fx.Graph()
    g.output(g.call_module("gone", (g.placeholder("x"),)))
    gm = fx.GraphModule(_root(gone=nn.ReLU()), g)
    delattr(gm, "gone")
    assert any("call_module target='gone', but should name a submodule" in e for e in torch_ir_errors(gm))


# --- determinism and arguments -------------------------------------------------------------------


def test_the_same_seed_draws_the_same_module_twice():
    def draws():
        out = []

        @seed(20261124)
        @settings(max_examples=15, **_QUIET)
        @given(torch_graph_cases())
        def collect(case):
            out.append((case.gm.code, case.gm.state_dict(), case.fresh_inputs()))

        collect()
        return out

    first, second = draws(), draws()
    assert [code for code, _, _ in first] == [code for code, _, _ in second]
    for (_, state_a, in_a), (_, state_b, in_b) in zip(first, second, strict=True):
        torch.testing.assert_close(state_a, state_b, rtol=0, atol=0, equal_nan=True)
        torch.testing.assert_close(in_a, in_b, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("options, words", [
    (dict(max_layers=0), "max_layers=0 must be at least 1"),
    (dict(max_layers=33), "max_layers=33 must be at most 32"),
    (dict(special_values="yes"), "special_values='yes' must be True or False"),
])
def test_bad_arguments_are_invalid_arguments(options, words):
    with pytest.raises(InvalidArgument, match=words.replace("(", r"\(").replace(")", r"\)")):
        torch_graph_cases(**options)


def test_graphs_ir_torch_draws_these_graphs_and_refuses_aten_options():
    from strategies import graphs, ir_errors

    @settings(max_examples=10, derandomize=True, **_QUIET)
    @given(graphs(ir="torch", max_nodes=4))
    def drawn_through_graphs(case):
        assert case.gm.meta["ir"] == "torch" and ir_errors(case.gm, "torch") == []

    drawn_through_graphs()
    for bad in (dict(mutations=True), dict(requires_grad=True), dict(sizes="large"), dict(ops=["aten.add"])):
        with pytest.raises(InvalidArgument, match="ir='torch' draws nn.Modules"):
            graphs(ir="torch", **bad)
