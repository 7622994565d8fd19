"""Meta-tests of the graph strategies: reachability, validity of every draw, shrinking, validation."""

from __future__ import annotations

import pathlib

import pytest
import torch
import torch.fx as fx
from hypothesis import given, settings
from hypothesis import strategies as st

import strategies as S
from strategies._draw import features
from strategies._draw.support import cpu_support
from strategies import FEATURES, OPS, InvalidArgument, dtypes, graphs
from strategies._draw.features import MUTATION_FEATURES
from conformance.suite._tiers import spread
from tests._debug import find_any, minimal

aten = torch.ops.aten


def _calls(case):
    return [n for n in case.gm.graph.nodes if n.op == "call_function"]


def _targets(case):
    return {n.target for n in _calls(case)}


def _bits(t):
    t = t.detach().contiguous()
    if t.is_floating_point():
        return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])
    return t


def _same(a, b):
    return (a.shape == b.shape and a.dtype == b.dtype and a.stride() == b.stride()
            and torch.equal(_bits(a), _bits(b)))


# --- reachability --------------------------------------------------------------------------------


@pytest.mark.parametrize("row", cpu_support().narrow(OPS), ids=lambda r: r.name)
def test_every_catalog_op_is_reachable(row):
    """Every row the CPU runs (the CUDA-only attention overloads: tests/test_device.py)."""
    # a row of complex dtypes alone (view_as_real) reads complex leaves: drawn where the user's dtypes hold them
    strategy = graphs(ops=[row], mutations=row.category == "inplace", random=row.category == "random", max_nodes=4,
                      device="cpu", dtypes=dtypes(complex=True) if row.complex_only else None)
    find_any(strategy, lambda case: row.overload in _targets(case), max_examples=500)


@pytest.mark.parametrize("feature", FEATURES)
def test_every_feature_is_reachable(feature):
    autocast = feature == "autocast-region"  # drawn where asked, in pre-dispatch graphs
    strategy = graphs(mutations=feature in MUTATION_FEATURES, special_values=feature == "special-values",
                      requires_grad=feature == "requires-grad", ir="pre-dispatch" if autocast else "aten",
                      hops=["wrap_with_autocast"] if autocast else ())
    find_any(strategy, lambda case: feature in case.features, max_examples=2000)


# --- every draw is a valid, runnable, deterministic graph ----------------------------------------


_ANY_GRAPH = st.one_of(graphs(mutations=True), graphs(special_values=True), graphs(mutations=True, special_values=True))


# make test draws 100 graphs (3 s of CPU on the 2-core AMD EPYC); make sweep 2000
@settings(max_examples=100)
@given(_ANY_GRAPH)
def test_every_draw_lints_runs_and_is_deterministic(case):
    _lints_runs_and_is_deterministic(case)


@pytest.mark.sweep
@settings(max_examples=2000)
@given(_ANY_GRAPH)
def test_every_draw_lints_runs_and_is_deterministic_over_more_draws(case):
    _lints_runs_and_is_deterministic(case)


def _lints_runs_and_is_deterministic(case):
    case.gm.graph.lint()
    for node in case.gm.graph.nodes:
        if node.op in ("placeholder", "get_attr") or (node.op == "call_function" and node.target is not torch._C._set_grad_enabled):
            val = node.meta.get("val")
            vals = val if isinstance(val, (tuple, list)) and node.op == "call_function" else [val]
            assert vals and all(isinstance(v, torch.Tensor) for v in vals), f"meta['val'] missing on {node.format_node()}"
    first_in, second_in = case.fresh_inputs(), case.fresh_inputs()
    assert len(first_in) == len(second_in) == len(case.example_inputs)
    first, second = case.gm(*first_in), case.gm(*second_in)
    assert len(first) == len(second)
    for a, b in zip(first, second):
        assert _same(a, b), "the graph is not deterministic"
    for a, b in zip(first_in, second_in):
        assert _same(a, b), "input mutation is not deterministic"
    assert torch.is_grad_enabled()


@given(graphs(mutations=True))
def test_example_inputs_are_pristine_and_fresh_inputs_are_identical_copies(case):
    assert len(case.fresh_inputs()) == len(case.example_inputs) == len(
        [n for n in case.gm.graph.nodes if n.op == "placeholder"])
    for given_, fresh in zip(case.example_inputs, case.fresh_inputs()):
        assert _same(given_, fresh)
        assert given_.storage_offset() == fresh.storage_offset()
        assert given_.untyped_storage().nbytes() == fresh.untyped_storage().nbytes()
        if given_.numel():
            assert given_.untyped_storage().data_ptr() != fresh.untyped_storage().data_ptr()


@given(graphs(views=False, mutations=False))
def test_disabled_kinds_never_appear(case):
    assert not (case.features & (MUTATION_FEATURES | {"view"}))
    for n in _calls(case):
        assert not features.is_mutating(n.target)
        assert not features.is_view(n.target)


@given(graphs(ops=["aten.sub.Tensor", aten.mul.Tensor], mutations=False))
def test_ops_argument_restricts_the_graph(case):
    assert _targets(case) <= {aten.sub.Tensor, aten.mul.Tensor}


@given(graphs(constants=False, max_inputs=2, min_inputs=2))
def test_input_bounds_and_constants_flag(case):
    assert len(case.example_inputs) == 2
    assert "constant" not in case.features


@given(graphs(min_nodes=5, max_nodes=5))
def test_node_count_bounds(case):
    assert len(_calls(case)) == 5


# --- shrinking ------------------------------------------------------------------------------------


# make test shrinks the functional graph (4 s on the 2-core AMD EPYC); the mutating one, whose shrink
# takes 20 s there, is make sweep's: the same property on the graphs that add in-place ops
@pytest.mark.parametrize("mutations", spread([False, True], 1))
def test_graph_containing_sub_shrinks_to_at_most_three_call_nodes(mutations):
    def has_sub(case):
        return any(getattr(n.target, "overloadpacket", None) is aten.sub for n in _calls(case))

    case = minimal(graphs(mutations=mutations), has_sub)
    assert len(_calls(case)) <= 3, case


# --- the features are measured, not guessed -------------------------------------------------------


def _graph(build, inputs):
    g = fx.Graph()
    build(g)
    return S.graph_features(fx.GraphModule(torch.nn.Module(), g), inputs)


@settings(max_examples=60)
@given(graphs(mutations=True, special_values=True))
def test_features_read_off_the_builders_run_are_those_a_fresh_run_measures(case):
    # the drawn case's features come from the builder's record (every node ran as it was drawn)
    assert case.features == S.graph_features(case.gm, case.fresh_inputs())


def test_view_mutation_feature_detects_a_write_through_a_view_read_later():
    def build(g):
        x = g.placeholder("x")
        c = g.call_function(aten.clone.default, (x,))
        v = g.call_function(aten.select.int, (c, 0, 0))
        g.call_function(aten.add_.Tensor, (v, 1.0))
        g.output((g.call_function(aten.mul.Tensor, (c, 2.0)),))

    found = _graph(build, [torch.ones(2, 3)])
    assert {"view-mutation", "inplace", "view", "scalar-arg"} <= found
    assert "input-mutation" not in found


def test_view_mutation_feature_needs_a_later_read_of_the_base():
    def build(g):
        x = g.placeholder("x")
        c = g.call_function(aten.clone.default, (x,))
        v = g.call_function(aten.select.int, (c, 0, 0))
        g.output((g.call_function(aten.add_.Tensor, (v, 1.0)),))

    assert "view-mutation" not in _graph(build, [torch.ones(2, 3)])


def test_input_mutation_and_duplicate_features():
    def build(g):
        x = g.placeholder("x")
        a = g.call_function(aten.exp.default, (x,))
        b = g.call_function(aten.exp.default, (x,))
        g.call_function(aten.mul_.Tensor, (x, 2.0))
        g.output((a, b))

    found = _graph(build, [torch.ones(3)])
    assert {"input-mutation", "duplicate-subexpression", "multiple-outputs"} <= found
    assert "inplace" not in found and "dead-code" not in found


def test_features_of_ops_outside_the_catalog_are_read_from_their_schema():
    def build(g):
        x = g.placeholder("x")
        c = g.call_function(aten.clone.default, (x,))
        g.call_function(aten.sin_.default, (c,))  # not a catalog row; a data write
        g.call_function(aten.swapdims_.default, (c, 0, 1))  # not a catalog row; a metadata write
        g.output((c,))

    found = _graph(build, [torch.ones(2, 3)])
    assert {"inplace", "metadata-mutation"} <= found


def test_data_writes_outside_the_catalog_are_not_metadata_mutations():
    def build(g):
        x = g.placeholder("x")
        c = g.call_function(aten.clone.default, (x,))
        g.output((g.call_function(aten.rsqrt_.default, (g.call_function(aten.exp_.default, (c,)),)),))

    assert "metadata-mutation" not in _graph(build, [torch.ones(2, 3)])


# --- argument validation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, quoted",
    [
        (dict(min_nodes=-1), "min_nodes=-1"),
        (dict(min_nodes=5, max_nodes=2), "min_nodes=5"),
        (dict(max_nodes=1000), "max_nodes=1000"),
        (dict(max_inputs=0, min_inputs=0), "max_inputs=0"),
        (dict(ops=["aten.not_an_op.default"]), "'aten.not_an_op.default' is neither in the op catalog nor a registered op"),
        (dict(ops=[]), "ops=[] is empty"),
        (dict(ops="aten.add.Tensor"), "ops='aten.add.Tensor' must be a list"),
        (dict(ops=["aten.add_.Tensor"]), "needs mutations=True"),
        (dict(ops=["aten.view.default"], views=False), "views=False"),
        (dict(dtypes=[torch.float32]), "dtypes=[torch.float32] must be a Hypothesis strategy"),
        (dict(mutations="yes"), "mutations='yes' must be True or False"),
    ],
)
def test_bad_arguments_raise_invalid_argument_quoting_them(kwargs, quoted):
    with pytest.raises(InvalidArgument, match=None) as info:
        graphs(**kwargs)
    assert quoted in str(info.value)


def test_unsupported_dtype_is_reported_at_draw_time():
    with pytest.raises(InvalidArgument, match="dtypes drew torch.int16"):
        find_any(graphs(dtypes=st.just(torch.int16)), max_examples=5)


@pytest.mark.parametrize("kind", [int, float, bool])
def test_python_scalar_operands_of_each_type_are_reachable(kind):
    def has_scalar(case):
        return any(type(a) is kind and n.target in _POINTWISE_TARGETS
                   for n in _calls(case) for a in n.args[1:])

    find_any(graphs(dtypes=st.sampled_from([torch.float32, torch.int64])), has_scalar)


_POINTWISE_TARGETS = {row.overload for row in OPS if row.category == "pointwise"}


def test_a_seed_draws_the_same_graphs_whatever_else_is_imported(tmp_path):
    """Hypothesis mines literals from imported local modules; strategies pins that pool empty, so an
    unrelated import (here the nightly report module) cannot change what a fixed seed draws.

    One fresh process draws, imports, and draws again: Hypothesis mines the pool anew whenever
    ``sys.modules`` grew, so without the pin the two draws differ (measured: unpinning in the script
    gives two hashes). Not this process: pytest has imported those modules already. Ten graphs a draw:
    unpinned, 5, 10 and 20 graphs each gave two hashes (measured on the 2-core AMD EPYC; the process
    spends about 4 s of its 4.5 importing torch and warming up, 40 graphs a draw took 5.5 s)."""
    import subprocess
    import sys

    script = (
        "import hashlib\n"
        "from hypothesis import given, settings, seed, Phase, HealthCheck\n"
        "from strategies import graphs\n"
        "def draw():\n"
        "    codes = []\n"
        "    @settings(max_examples=10, database=None, phases=[Phase.generate], deadline=None,\n"
        "              suppress_health_check=list(HealthCheck))\n"
        "    @seed(0)\n"
        "    @given(graphs(special_values=True))\n"
        "    def t(case):\n"
        "        codes.append(case.gm.code)\n"
        "    t()\n"
        "    return hashlib.md5(''.join(codes).encode()).hexdigest()\n"
        "first = draw()\n"
        "import conformance.nightly, reference_lowering.pointwise._helpers\n"
        "print(first, draw())\n")
    root = pathlib.Path(__file__).resolve().parents[1]
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=root, timeout=300)
    assert run.returncode == 0, run.stderr
    first, second = run.stdout.strip().splitlines()[-1].split()
    assert first == second, "importing conformance.nightly changed the graphs seed 0 draws"


def test_a_call_that_kills_eager_is_never_run_while_drawing():
    """INT_MIN // -1 in trunc mode dies of SIGFPE in eager CPU (torch 2.13); special values cast to
    int32 give INT_MIN, so the builder must refuse the call rather than run it (and die)."""
    from strategies._build.builder import GraphBuilder, StepRejected
    from strategies._build.eager import kills_eager
    from strategies._tensors import Layout

    low = torch.iinfo(torch.int32).min
    x, minus_one = torch.tensor([low, 3], dtype=torch.int32), torch.tensor([-1, -1], dtype=torch.int32)
    for op, d in ((aten.div.Tensor_mode, minus_one), (aten.div.Scalar_mode, -1), (aten.div_.Tensor_mode, minus_one)):
        assert kills_eager(op, (x, d), {"rounding_mode": "trunc"})
        assert not kills_eager(op, (x, d), {"rounding_mode": "floor"})  # eager handles it there
        assert not kills_eager(op, (x + 1, d), {"rounding_mode": "trunc"})
    b = GraphBuilder()
    v, m = b.add_input(x, Layout()), b.add_input(minus_one, Layout())
    with pytest.raises(StepRejected, match="SIGFPE"):
        b.call(None, aten.div.Tensor_mode, (v, m), {"rounding_mode": "trunc"})


def test_an_integer_arange_never_has_a_fractional_step():
    """arange(-4, -4.0, 0.5, dtype=int32) runs in eager (the step truncates to 0) but torch's fake
    propagation refuses it ("step must be nonzero"): a graph no pipeline hands over (issue 31)."""
    from hypothesis import HealthCheck, given, settings
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp
    from torch._subclasses.fake_tensor import FakeTensorMode

    steps = []

    @settings(max_examples=60, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(graphs(ops=["aten.arange.start_step"], dtypes=st.sampled_from([torch.int32, torch.int64]), max_nodes=3,
                  device="cpu"))
    def draw(case):
        for n in case.gm.graph.nodes:
            if n.target is aten.arange.start_step:
                steps.append((n.args[2], n.kwargs.get("dtype")))
        FakeTensorProp(case.gm, FakeTensorMode(allow_non_fake_inputs=True)).propagate(*case.example_inputs)

    draw()
    assert steps and not [s for s, dt in steps if s != int(s) and dt in (torch.int32, torch.int64)]
    assert any(s == 0.5 for s, _ in steps)  # fractional steps are still drawn, for float results


def test_an_empty_tensor_is_never_viewed_as_a_wider_dtype():
    """view.dtype to a wider dtype needs stride(0) divisible by the ratio, and an empty tensor's strides
    are not one thing: eager views int64[1, 0, 0] as [0, 0], then as float32 with strides (2, 1), where
    the fake view gives (1, 1), so FakeTensorProp refuses the float64 view eager took (the matcher
    corpus's view-dtype-reorder: a correct pass's meta refresh raised on such a drawn graph). Narrower
    dtypes, and wider ones of tensors holding elements, are still drawn."""
    from strategies._draw.args import _bits_fit

    empty = torch.zeros(1, 0, 0, dtype=torch.int64).view(0, 0).view(torch.float32)
    assert empty.stride() == (2, 1)  # eager's: the rule eager applies would let it widen
    assert not _bits_fit(empty, 8)
    assert _bits_fit(empty, 2)
    assert _bits_fit(torch.zeros(2, 4), 8) and not _bits_fit(torch.zeros(2, 3), 8)
