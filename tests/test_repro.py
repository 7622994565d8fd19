"""Repro scripts rebuild the failing example exactly: graph code, constants, inputs, aliasing, outputs."""

from __future__ import annotations

import math
import operator
import runpy
import subprocess
import sys

import pytest
import torch
import torch.fx as fx
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from torch.utils._pytree import tree_flatten

import strategies
from conformance import HarnessError
from conformance._result import Violation
from conformance.repro import write_repro
from conformance.source import graph_source, inputs_source

aten = torch.ops.aten
# What every generated script defines before build_graph() and make_inputs().
PRELUDE = 'import operator\nimport torch\nimport torch.fx as fx\nnan, inf = float("nan"), float("inf")\n'
_INTS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _run_source(src: str, fn: str):
    namespace: dict = {}
    exec(compile(PRELUDE + src, "<repro>", "exec"), namespace)
    return namespace[fn]()


def _bits(t: torch.Tensor) -> torch.Tensor:
    t = t.detach().contiguous()
    return t.view(_INTS[t.element_size()]) if t.is_floating_point() else t


def _same(a, b) -> bool:
    """Equal bit for bit (NaN payloads, -0.0) with equal dtype, size, stride and storage offset."""
    if not isinstance(a, torch.Tensor):
        return type(a) is type(b) and repr(a) == repr(b)
    return (a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride()
            and a.storage_offset() == b.storage_offset() and a.requires_grad == b.requires_grad
            and torch.equal(_bits(a), _bits(b)))


def _storage(t: torch.Tensor):
    return t.untyped_storage().data_ptr() if t.untyped_storage().nbytes() else None


def _sharing(tensors) -> list:
    """Which pairs share a storage: the aliasing pattern a rebuild must keep."""
    keys = [_storage(t) for t in tensors]
    return [[a is not None and a == b for b in keys] for a in keys]


def _assert_inputs_roundtrip(inputs: tuple) -> tuple:
    rebuilt = _run_source(inputs_source(inputs), "make_inputs")
    assert len(rebuilt) == len(inputs)
    for i, (a, b) in enumerate(zip(rebuilt, inputs)):
        assert _same(a, b), f"input {i}: {a!r} rebuilt, but should be {b!r}"
    assert _sharing(rebuilt) == _sharing(inputs)
    return rebuilt


def _assert_graph_roundtrip(gm: fx.GraphModule) -> fx.GraphModule:
    rebuilt = _run_source(graph_source(gm), "build_graph")
    assert rebuilt.code == gm.code
    before, after = dict(gm.named_buffers()), dict(rebuilt.named_buffers())
    assert after.keys() == before.keys()
    for name, value in before.items():
        assert _same(after[name], value), f"buffer {name}"
    assert _sharing(list(after.values())) == _sharing(list(before.values()))
    return rebuilt


def _assert_same_outputs(a, b) -> None:
    flat_a, flat_b = tree_flatten(a)[0], tree_flatten(b)[0]
    assert len(flat_a) == len(flat_b)
    for i, (x, y) in enumerate(zip(flat_a, flat_b)):
        assert _same(x, y), f"output {i}: {x!r}, but should be {y!r}"


def _check_case(case) -> None:
    gm = _assert_graph_roundtrip(case.gm)
    inputs = _assert_inputs_roundtrip(case.example_inputs)
    originals = case.fresh_inputs()
    _assert_same_outputs(gm(*inputs), case.gm(*originals))
    _assert_same_outputs(inputs, originals)  # in-place writes land the same way too


# --- round-trip over generated graphs ------------------------------------------------------------


@given(strategies.graphs(mutations=True, special_values=True))
def test_generated_graphs_roundtrip(case):
    _check_case(case)


@given(strategies.graphs(dtypes=st.sampled_from([torch.bfloat16, torch.float16, torch.bool, torch.int32]),
                         special_values=True, max_nodes=6))
def test_generated_graphs_roundtrip_small_dtypes(case):
    _check_case(case)


# --- inputs --------------------------------------------------------------------------------------


def test_aliasing_inputs_share_one_storage():
    x = torch.arange(12.0).reshape(3, 4)
    inputs = (x, x.t(), x[1:], x, x[:, ::2], torch.tensor([1.0, 2.0]).expand(3, 2), x[3:],
              x.view(torch.int16))
    src = inputs_source(inputs)
    rebuilt = _assert_inputs_roundtrip(inputs)
    assert "base2" not in src  # x's storage and the expanded one: two literals, no more
    rebuilt[0].add_(1)  # a write through one input shows through its views, as in the original
    assert rebuilt[1][0, 1].item() == 5.0 and rebuilt[2][0, 0].item() == 5.0


@pytest.mark.parametrize("t", [
    torch.tensor(3.5), torch.tensor(True), torch.empty(0, 3), torch.zeros(4)[2:2],
    torch.tensor([2.0 ** -149, torch.finfo(torch.float32).smallest_normal / 4, -0.0, 0.0]),
    torch.tensor([math.nan, math.inf, -math.inf, -0.0, 2.0 ** -130, 3.0e38], dtype=torch.bfloat16),
    torch.tensor([math.nan, -math.inf, 2.0 ** -24, 65504.0, -0.0], dtype=torch.float16),
    torch.tensor([0, 1, 255], dtype=torch.uint8), torch.tensor([-128, 127], dtype=torch.int8),
    torch.tensor([-(2 ** 15), 2 ** 15 - 1], dtype=torch.int16),
    torch.tensor([-(2 ** 31), 2 ** 31 - 1], dtype=torch.int32),
    torch.tensor([-(2 ** 63), 2 ** 63 - 1], dtype=torch.int64),
    torch.tensor([5e-324, -1.7976931348623157e308, 0.1], dtype=torch.float64),
    torch.tensor([True, False, True]), torch.ones(2, requires_grad=True),
], ids=lambda t: f"{t.dtype}{list(t.shape)}")
def test_special_inputs_roundtrip(t):
    assert "bit patterns" not in inputs_source((t,))  # plain literals: +-nan, +-inf and -0.0 included
    _assert_inputs_roundtrip((t,))


def test_nan_sign_and_payload_survive():
    negative = -torch.tensor([math.nan])
    payload = torch.tensor([0x7FC00001, 0x3F800000], dtype=torch.int32).view(torch.float32)
    assert "-nan" in inputs_source((negative,))
    assert "bit patterns" in inputs_source((payload,))
    _assert_inputs_roundtrip((negative, payload))


def test_long_literals_wrap_at_100_columns():
    src = inputs_source((torch.randn(300, dtype=torch.float64, generator=torch.Generator().manual_seed(0)),))
    assert max(map(len, src.splitlines())) <= 100
    _assert_inputs_roundtrip(torch.randn(300, generator=torch.Generator().manual_seed(1)).split(100))


def test_no_inputs():
    assert _run_source(inputs_source(()), "make_inputs") == ()


# --- hand-made graphs ----------------------------------------------------------------------------


def _gm(build, root=None) -> fx.GraphModule:
    g = fx.Graph()
    g.output(build(g, g.placeholder("x")))
    return fx.GraphModule(root if root is not None else torch.nn.Module(), g)


def _canonical(a):
    """Arguments as comparable data: nodes by name, floats by repr (so nan == nan and -0.0 != 0.0)."""
    if isinstance(a, fx.Node):
        return ("node", a.name)
    if isinstance(a, float):
        return ("float", repr(a))
    if isinstance(a, (list, tuple)):
        return (type(a) is tuple, [_canonical(v) for v in a])
    if isinstance(a, dict):
        return sorted((k, _canonical(v)) for k, v in a.items())
    if isinstance(a, slice):
        return ("slice", _canonical((a.start, a.stop, a.step)))
    return (type(a).__name__, repr(a))


def test_scalar_and_structured_arguments_roundtrip():
    def build(g, x):
        a = g.call_function(aten.add.Scalar, (x, float("nan")))
        b = g.call_function(aten.clamp.default, (x, float("-inf"), float("inf")))
        c = g.call_function(aten.mul.Scalar, (b, -0.0))
        s = g.call_function(aten.sum.dim_IntList, (c, [0, -1], True))
        h = g.call_function(aten._to_copy.default, (s,), {"dtype": torch.bfloat16})
        z = g.call_function(aten.new_zeros.default, (x, [2]), {
            "dtype": torch.float64, "layout": torch.strided, "device": torch.device("cpu")})
        k = g.call_function(aten.clone.default, (x,), {"memory_format": torch.contiguous_format})
        i = g.call_function(operator.getitem, (k, (slice(None, None, 2), None, Ellipsis)))
        r = g.call_function(F.relu, (i,))
        m = g.call_method("mul", (r, 2))
        return (a, h, z, m, g.call_function(operator.getitem, (b, 0)))

    gm = _gm(build)
    src = graph_source(gm)
    for text in ("nan)", "-inf, inf)", "-0.0)", "[0, -1], True", '{"dtype": torch.bfloat16}',
                 "torch.ops.aten._to_copy.default", "torch.ops.aten.sum.dim_IntList",
                 "g.call_function(operator.getitem,",
                 "slice(None, None, 2), None, Ellipsis", "import torch.nn.functional", 'g.call_method("mul"'):
        assert text in src, text
    rebuilt = _assert_graph_roundtrip(gm)
    for old, new in zip(gm.graph.nodes, rebuilt.graph.nodes):
        assert (new.op, new.name, new.target) == (old.op, old.name, old.target)
        assert _canonical((new.args, new.kwargs)) == _canonical((old.args, old.kwargs))
    x = torch.tensor([[1.0, -2.0], [math.nan, 0.5]])
    _assert_same_outputs(rebuilt(x.clone()), gm(x.clone()))


def test_packets_builtins_and_annotations_roundtrip():
    g = fx.Graph()
    x = g.placeholder("x", type_expr=torch.Tensor)
    n = g.call_function(operator.getitem, (g.call_function(getattr, (x, "shape")), 0))
    g.output(g.call_function(aten.mul, (g.call_function(math.floor, (2.5,)), n)))  # aten.mul: a packet
    gm = fx.GraphModule(torch.nn.Module(), g)
    src = graph_source(gm)
    for text in ('type_expr=torch.Tensor', "g.call_function(getattr,", "torch.ops.aten.mul,", "import math"):
        assert text in src, text
    assert _assert_graph_roundtrip(gm)(torch.ones(3)) == gm(torch.ones(3)) == 6


def test_dotted_and_aliased_constants_roundtrip():
    base = torch.arange(6.0).reshape(2, 3)
    root = torch.nn.Module()
    root.register_buffer("top", base.t())
    root.sub = torch.nn.Module()
    root.sub.register_buffer("c0", base[1])
    root.sub.inner = torch.nn.Module()
    root.sub.inner.register_buffer("c1", torch.tensor([math.nan, -0.0], dtype=torch.float16))
    gm = _gm(lambda g, x: (g.call_function(aten.add.Tensor, (x, g.get_attr("sub.c0"))),
                           g.get_attr("top"), g.get_attr("sub.inner.c1"), g.get_attr("sub.c0")), root)
    assert 'root.get_submodule("sub").add_module("inner", torch.nn.Module())' in graph_source(gm)
    rebuilt = _assert_graph_roundtrip(gm)
    assert rebuilt.top.untyped_storage().data_ptr() == rebuilt.sub.c0.untyped_storage().data_ptr()
    _assert_same_outputs(rebuilt(torch.ones(3)), gm(torch.ones(3)))


def test_names_left_by_erased_nodes_are_kept():
    g = fx.Graph()
    x = g.placeholder("x")
    dead = g.call_function(aten.neg.default, (x,))
    live = g.call_function(aten.neg.default, (x,))
    g.erase_node(dead)
    g.output(g.call_function(aten.neg.default, (live,)))  # fx names it neg_default, freed by the erase
    gm = fx.GraphModule(torch.nn.Module(), g)
    assert 'name="neg_default_1"' in graph_source(gm)
    _assert_graph_roundtrip(gm)


def test_node_names_that_clash_with_script_names():
    g = fx.Graph()
    a, b = g.placeholder("g"), g.placeholder("root")
    g.output(g.call_function(aten.add.Tensor, (a, g.call_function(aten.neg.default, (b,))), {"alpha": 2}))
    gm = fx.GraphModule(torch.nn.Module(), g)
    assert 'g_ = g.placeholder("g")' in graph_source(gm)
    rebuilt = _assert_graph_roundtrip(gm)
    _assert_same_outputs(rebuilt(torch.ones(2), torch.ones(2)), gm(torch.ones(2), torch.ones(2)))


def test_unrenderable_target_names_the_node():
    gm = _gm(lambda g, x: g.call_function(lambda t: t + 1, (x,)))
    node = next(n for n in gm.graph.nodes if n.op == "call_function")
    with pytest.raises(HarnessError, match=f"node '{node.name}'.*not importable by name"):
        graph_source(gm)


def test_call_module_is_refused():
    root = torch.nn.Module()
    root.lin = torch.nn.Linear(2, 2)
    gm = _gm(lambda g, x: g.call_module("lin", (x,)), root)
    with pytest.raises(HarnessError, match="node 'lin'.*call_module"):
        graph_source(gm)


# --- write_repro ---------------------------------------------------------------------------------

_OPTIONS = {"properties": ["values", "aliasing"], "ensure": [], "signature": None,
            "settings_factory": None, "device": "cpu"}


def _example():
    g = fx.Graph()
    g.output(g.call_function(aten.mul.Tensor, (g.placeholder("x"), g.placeholder("y"))))
    gm = fx.GraphModule(torch.nn.Module(), g)
    x = torch.tensor([[1.0, math.nan], [-0.0, 2.0 ** -140]])
    return gm, (x, x.t())


def test_write_repro_script_rebuilds_the_example(tmp_path):
    gm, inputs = _example()
    message = 'output 0=nan, but should be 1.0 [p(mul)]\nworst abs error """\\x""" at 0'
    violation = Violation("values", message)
    path = write_repro(tmp_path / "out", gm=gm, example_inputs=inputs, target="mypkg.mod:attr",
                       violation=violation, options=_OPTIONS)
    assert path.name == "repro_mypkg_mod_attr_values.py"
    text = path.read_text()
    assert text.startswith('"""fx-conformance counterexample: values: output 0=nan, but should be 1.0 '
                           '[p(mul)].\n')
    assert "Re-verify: fx-conformance verify mypkg.mod:attr" in text
    assert "# worst abs error" in text.splitlines()[-1]
    compile(text, str(path), "exec")
    script = runpy.run_path(str(path), run_name="repro")
    assert script["TARGET"] == "mypkg.mod:attr" and script["OPTIONS"] == _OPTIONS
    assert script["build_graph"]().code == gm.code
    rebuilt = script["make_inputs"]()
    assert all(_same(a, b) for a, b in zip(rebuilt, inputs)) and _sharing(rebuilt) == _sharing(inputs)


def test_write_repro_never_overwrites_another_file(tmp_path):
    gm, inputs = _example()

    def write(message):
        return write_repro(tmp_path, gm=gm, example_inputs=inputs, target="pkg/my_pass.py:fix",
                           violation=Violation("contracts:no_nan", message), name="case.py")

    first, second, again = write("first"), write("second"), write("first")
    assert (first.name, second.name, again) == ("case.py", "case_2.py", first)
    assert "# contracts:no_nan: first" in first.read_text() and "second" in second.read_text()
    assert "python case_2.py" in second.read_text()
    default = write_repro(tmp_path, gm=gm, example_inputs=inputs, target="pkg/my_pass.py:fix",
                          violation=Violation("contracts:no_nan", "m"))
    assert default.name == "repro_my_pass_fix_contracts_no_nan.py"


def test_write_repro_without_target_exits_2(tmp_path):
    gm, inputs = _example()
    path = write_repro(tmp_path, gm=gm, example_inputs=inputs, target=None,
                       violation=Violation("execution", "the pass raised"))
    assert path.name == "repro_unknown_execution.py"
    assert "TARGET = None  # set this" in path.read_text()
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 2, done.stderr
    assert "TARGET is not set" in done.stdout and "graph before the pass:" in done.stdout


def test_a_repro_of_quantized_decomposed_ops_registers_them_in_a_fresh_process(tmp_path):
    """``torch.ops.quantized_decomposed`` exists only once torch.ao's module for it is imported:
    the script imports it, so the graph rebuilds in a process that never did."""
    from strategies._catalog.ops import DEQUANTIZE, QUANTIZE

    g = fx.Graph()
    params = (0.125, 0, -128, 127, torch.int8)
    q = g.call_function(QUANTIZE, (g.placeholder("x"), *params))
    g.output(g.call_function(DEQUANTIZE, (q, *params)))
    gm = fx.GraphModule(torch.nn.Module(), g)
    path = write_repro(tmp_path, gm=gm, example_inputs=(torch.ones(3),), target=None,
                       violation=Violation("values", "m"))
    assert "import torch.ao.quantization.fx._decomposed" in path.read_text()
    code = (f"import runpy; s = runpy.run_path({str(path)!r}, run_name='repro'); "
            "print(s['build_graph']()(*s['make_inputs']()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "tensor([1., 1., 1.])" in out.stdout, out.stderr[-2000:]
