"""Graphs drawn for a device hold only what that device runs (strategies/_build/device.py, strategies/_draw/support.py and probe.py).

Runs on any machine: a CUDA device is simulated on the CPU with the table the H100 census recorded
(tests/data/h100-torch2.11-census.json, eager CUDA's refusals in 2000 drawn graphs), so these
tests check the drawing, not CUDA itself; on a CUDA machine the same graphs are drawn on the GPU.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import pathlib
import subprocess
import sys

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance.copies import to_device
from strategies import OPS, InvalidArgument, OpSpec, graphs
from strategies._draw import probe as _probe
from tests import _probe_faults
from strategies._catalog.vocabulary import ANY, MATMUL, MM, POINTWISE, TENSOR
from strategies._build.device import op_name, relocate, signature, simulated
from strategies._draw.support import DeviceSupport, cpu_support

aten = torch.ops.aten
H100 = pathlib.Path(__file__).parent / "data" / "h100-torch2.11-census.json"
# what the device probe learnt on that H100 the next day (the cuDNN attention killed its process at
# float16 and float64; the CUDA attention overloads' dtypes and head sizes)
H100_PROBE = pathlib.Path(__file__).parent / "data" / "h100-torch2.11-probe.json"


def _h100(path: pathlib.Path = H100) -> DeviceSupport:
    return DeviceSupport.from_json(json.loads(path.read_text()))


def _calls(case_or_gm):
    gm = getattr(case_or_gm, "gm", case_or_gm)
    return [n for n in gm.graph.nodes if n.op == "call_function" and hasattr(n.target, "_schema")]


def _dtypes_of(node) -> tuple:
    vals = []

    def walk(a):
        if isinstance(a, torch.fx.Node):
            v = a.meta.get("val")
            if isinstance(v, torch.Tensor):
                vals.append(v)
        elif isinstance(a, (tuple, list)):
            for x in a:
                walk(x)
    walk(node.args)
    walk(tuple(node.kwargs.values()))
    return signature(tuple(vals), {})


def _census(device: str, support=None, examples: int = 150, **options) -> collections.Counter:
    """Per (op, dtypes of its tensor operands) and per factory device, counts over ``examples`` draws."""
    seen = collections.Counter()

    def run():
        @settings(max_examples=examples, derandomize=True, database=None, deadline=None,
                  suppress_health_check=list(HealthCheck))
        @given(graphs(max_nodes=10, device=device, **options))
        def draw(case):
            assert case.device == device
            for node in _calls(case):
                seen[op_name(node.target), _dtypes_of(node)] += 1
                if "device" in node.kwargs:
                    seen["device", str(node.kwargs["device"])] += 1
            for t in case.example_inputs:
                seen["input on", t.device.type] += 1

        draw()

    if support is None:
        run()
    else:
        with simulated(device, support):
            run()
    return seen


_CATALOG = dict(mutations=True, random=True, special_values=True)
_REFUSED_FAMILIES = dict(ops=["aten.mm", "aten.bmm", "aten.addmm", "aten.baddbmm", "aten.addmv", "aten.dot",
                              "aten.native_layer_norm", "aten.full", "aten.arange", "aten.scalar_tensor", "aten.zeros",
                              "aten._scaled_dot_product_flash_attention_for_cpu", "aten.scaled_dot_product_attention"])


# The refused families, 30 draws each (60 before): they hold 24 float mm calls and 45 factory calls
# with either table, and the same 30 draws for the CPU hold 33 integer mm calls and 16 CPU flash
# attentions (the next test). The whole catalog: make test draws 60 with the census table (one factory
# call among them; 4 in 150), the sweep 150 with each table (the probe table's refusals make test
# checks on the refused families). Measured at fx-ci's derandomized draws, 2-core AMD EPYC.
@pytest.mark.parametrize("table, options, examples", [
    pytest.param(H100, _CATALOG, 60, id="census-catalog"),
    pytest.param(H100, _CATALOG, 150, id="census-catalog-150", marks=pytest.mark.sweep),
    pytest.param(H100_PROBE, _CATALOG, 150, id="probe-catalog", marks=pytest.mark.sweep),
    pytest.param(H100, _REFUSED_FAMILIES, 30, id="census-refused-families"),
    pytest.param(H100_PROBE, _REFUSED_FAMILIES, 30, id="probe-refused-families")])
def test_graphs_drawn_for_cuda_hold_nothing_the_h100_refused(table, options, examples):
    h100 = _h100(table)
    seen = _census("cuda", h100, examples, **options)
    calls = {k: n for k, n in seen.items() if k[0] != "device" and k[0] != "input on"}
    for (op, sig), n in calls.items():
        assert (op, sig) not in h100.refused_calls, (op, sig, n)
        assert not sig or sig[0] not in h100.refused_dtypes.get(op, {}), (op, sig, n)
    assert not any(op == "aten._scaled_dot_product_flash_attention_for_cpu.default" for op, _ in calls)
    factories = sum(n for (op, _), n in calls.items() if op in ("aten.full.default", "aten.zeros.default",
                                                                 "aten.arange.default", "aten.arange.start_step",
                                                                 "aten.scalar_tensor.default", "aten.ones.default"))
    assert factories and seen["device", "cuda"] >= factories and not seen["device", "cpu"]
    if "ops" in options:  # the families the table narrows are still drawn, at the dtypes CUDA runs
        assert sum(n for (op, sig), n in calls.items() if op == "aten.mm.default" and sig[0].startswith("float")) > 3


def test_the_same_draws_for_the_cpu_hold_what_the_h100_refused():
    """The table is what keeps them out: drawn for the CPU, the refused families are there."""
    seen = _census("cpu", examples=30, ops=["aten.mm", "aten.bmm", "aten.addmm", "aten.full", "aten.zeros",
                                            "aten._scaled_dot_product_flash_attention_for_cpu"])
    assert any(op == "aten.mm.default" and sig[0].startswith("int") for op, sig in seen if op != "device")
    assert any(op == "aten._scaled_dot_product_flash_attention_for_cpu.default" for op, _ in seen)
    assert seen["device", "cpu"] and not seen["device", "cuda"]
    assert seen["input on", "cpu"]


def test_cuda_only_overloads_are_never_drawn_for_the_cpu_and_cpu_only_ones_are():
    cpu = cpu_support()
    names = {row.name for row in cpu.narrow(OPS)}
    assert "aten._scaled_dot_product_flash_attention_for_cpu.default" in names
    for op in ("_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
               "_scaled_dot_product_cudnn_attention"):
        assert f"aten.{op}.default" not in names
    with pytest.raises(InvalidArgument, match="runs none of"):
        graphs(ops=["aten._scaled_dot_product_efficient_attention"], device="cpu").example()


def test_a_device_this_machine_lacks_is_a_clear_error():
    lacks = "this machine has" if torch.cuda.is_available() else "torch.cuda.is_available"
    with pytest.raises(InvalidArgument, match=lacks):
        graphs(device="cuda:99").example()
    with pytest.raises(InvalidArgument, match="not a torch device"):
        graphs(device="gpu0").example()
    with simulated("cuda", _h100()), pytest.raises(InvalidArgument, match="drawn on the CPU"):
        graphs(dynamic=True, device="cuda").example()


def test_the_probe_learns_what_the_device_refuses():
    """Probed on the CPU with rows that claim more than the CPU runs: the probe narrows them to
    what ran (bitwise_not is integral only, mm has no bool kernel) and keeps what runs."""
    claims = (OpSpec(aten.bitwise_not.default, POINTWISE, (TENSOR,), ANY),
              OpSpec(aten.mm.default, MATMUL, (MM,), ANY),
              next(r for r in OPS if r.name == "aten.abs.default"))
    found = _probe.probe("cpu", claims, examples=8)
    assert set(found.refused_dtypes["aten.bitwise_not.default"]) == {"float16", "bfloat16", "float32", "float64"}
    assert set(found.refused_dtypes["aten.mm.default"]) == {"bool"}
    assert "aten.abs.default" not in found.refused_dtypes
    narrowed = {r.name: r.dtypes for r in found.narrow(claims)}
    assert narrowed["aten.bitwise_not.default"] == frozenset({torch.int32, torch.int64, torch.bool})
    assert torch.bool not in narrowed["aten.mm.default"] and torch.int64 in narrowed["aten.mm.default"]
    again = DeviceSupport.from_json(json.loads(json.dumps(found.to_json())))
    assert again == found


def _rows(*names, dtypes=None):
    """Catalog rows by name (at ``dtypes`` only, where given)."""
    rows = tuple(r for r in OPS if r.name in names)
    return rows if dtypes is None else tuple(dataclasses.replace(r, dtypes=r.dtypes & dtypes) for r in rows)


def _warmed(fault: str):
    """A prelude for an isolated probe's children: one (row, dtype) probed first, then ``fault`` planted
    (tests/_probe_faults.py). The first item a child probes pays its warm-up (1.0 s of CPU measured on a
    2-core AMD EPYC, over 3 s of wall at load 8, where a 3 s item limit killed it); the next items
    took 0.01-0.02 s each. The prelude runs before the child's first item, inside its start-up time
    (``_START_S``), so a short item limit only ever cuts the planted hang."""
    def prelude():
        _probe.probe_item(torch.device("cpu"), _rows("aten.abs.default")[0], "float32", 4)
        getattr(_probe_faults, fault)()

    return prelude


# children import this module for their prelude (probe(..., prelude="tests.test_device:..."))
_warm_segfault_on_neg = _warmed("segfault_on_neg")
_warm_hang_on_neg = _warmed("hang_on_neg")
_warm_poison_after_neg = _warmed("poison_after_neg")


@pytest.mark.parametrize("neg_dtypes", [pytest.param(frozenset({torch.float32}), id="neg-at-one-dtype"),
                                        pytest.param(frozenset({torch.float32, torch.int64}), id="neg-at-two-dtypes",
                                                     marks=pytest.mark.sweep)])
@pytest.mark.parametrize("fault, how", [("segfault_on_neg", "SIGSEGV"), ("hang_on_neg", "did not finish"),
                                        ("poison_after_neg", "a CUDA error after its calls (an illegal memory")])
def test_an_isolated_probe_survives_a_call_that_kills_or_hangs_its_process(fault, how, neg_dtypes, monkeypatch):
    """A call that kills the probing process (a GPU library's SIGSEGV) or hangs refuses its row's
    dtype, and the probe goes on in a new child: the other rows come out as an in-process probe
    finds them. make test: neg at one dtype; the sweep: at two, so the child started after a death
    dies on its first item too (three children).

    The SIGSEGV at one dtype is also the probe that nothing kills (it had a test and two children of
    its own): two children at once (jobs=2, every other row each), one probing abs (a catalog row at
    fewer dtypes, found by name) and two more rows, the other neg, then a row in a new child (three
    children in all). The poison at one dtype: one child, then a new one after it ended itself.

    The hang at one dtype comes last (one child, killed): a new child after a kill is the SIGSEGV's
    path (the parent stops reading either way and goes on from the next item), which its test runs.
    Only the hang test shortens the item limit (the library's is 120 s): its children are warmed
    before their first item (``_warmed``), so 3 s is over 100 times a warm item's time. A child's
    start-up (a torch import) is most of these tests' CPU: about 4.7 s each, an item 0.01-0.02 s
    (2-core AMD EPYC)."""
    if fault == "hang_on_neg":
        monkeypatch.setattr(_probe, "_ITEM_S", 3.0)
    two = frozenset({torch.float32, torch.int64})
    neg = _rows("aten.neg.default", dtypes=neg_dtypes)
    jobs = 1  # the rows go to children as said above, whatever the machine's default
    if fault == "hang_on_neg" and len(neg_dtypes) == 1:
        rows = (*_rows("aten.abs.default", "aten.mm.default", dtypes=two), *neg)
    elif fault == "segfault_on_neg" and len(neg_dtypes) == 1:
        rows = (*_rows("aten.abs.default", dtypes=frozenset({torch.float16})), *neg,
                *_rows("aten.mm.default", "aten.bitwise_not.default", "aten.where.self"))
        jobs = 2
    else:
        rows = (*_rows("aten.abs.default", dtypes=two), *neg, *_rows("aten.mm.default", dtypes=two))
    found = _probe.probe("cpu", rows, examples=4, isolate=True, prelude=f"tests.test_device:_warm_{fault}", jobs=jobs)
    assert set(found.refused_dtypes["aten.neg.default"]) == {str(d).removeprefix("torch.") for d in neg_dtypes}
    assert all(how in err and "aten.neg.default" in err for err in found.refused_dtypes["aten.neg.default"].values())
    alone = _probe.probe("cpu", tuple(r for r in rows if r.name != "aten.neg.default"), examples=4, isolate=False)
    assert {k: v for k, v in found.refused_dtypes.items() if k != "aten.neg.default"} == alone.refused_dtypes
    assert found.rows == alone.rows | {"aten.neg.default"}
    assert found.refused_calls == alone.refused_calls
    assert jobs == 1 or "aten.abs.default" in found.rows  # the row at fewer dtypes, found by name


def test_an_isolated_probe_takes_catalog_rows_only():
    """It finds its rows by name in the catalog (at any of their dtypes): another row is an error
    before any child starts. That an isolated probe is the in-process one where nothing dies is
    checked on the rows the SIGSEGV leaves (above)."""
    with pytest.raises(ValueError, match="not catalog rows: \\['aten.sinc.default'\\]"):
        _probe.probe("cpu", (OpSpec(aten.sinc.default, POINTWISE, (TENSOR,), ANY),), isolate=True)


def test_the_table_is_cached_per_torch_version_device_name_and_catalog(tmp_path, monkeypatch):
    monkeypatch.setenv("FX_CONFORMANCE_CACHE", str(tmp_path))
    monkeypatch.setattr(_probe, "_MEMORY", {})
    monkeypatch.setattr(_probe, "device_name", lambda device: "Fake GPU 1")
    probes = []
    table = _h100()
    monkeypatch.setattr(_probe, "probe", lambda device: probes.append(device) or table)
    meta = torch.device("meta")
    assert _probe.support_for(meta) is table and len(probes) == 1
    assert _probe.support_for(meta) is table and len(probes) == 1  # memory
    monkeypatch.setattr(_probe, "_MEMORY", {})
    assert _probe.support_for(meta) == table and len(probes) == 1  # the file
    files = list((tmp_path / "devices").glob("*.json"))
    assert len(files) == 1 and "Fake-GPU-1" in files[0].name and torch.__version__.replace("+", "-") in \
        files[0].name.replace("+", "-")
    monkeypatch.setattr(_probe, "_MEMORY", {})
    monkeypatch.setattr(_probe, "device_name", lambda device: "Fake GPU 2")
    _probe.support_for(meta)
    assert len(probes) == 2  # another device name: probed anew
    monkeypatch.setattr(_probe, "_MEMORY", {})
    monkeypatch.setattr(torch, "__version__", "9.9.9")
    _probe.support_for(meta)
    assert len(probes) == 3  # another torch
    assert len(list((tmp_path / "devices").glob("*.json"))) == 3


def test_relocate_and_to_device_move_factories():
    @settings(max_examples=20, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(graphs(ops=["aten.full", "aten.zeros", "aten.arange", "aten.scalar_tensor", "aten.ones"],
                  min_nodes=2, max_nodes=4))
    def check(case):
        factories = [n for n in _calls(case) if n.kwargs.get("device") is not None]
        assert all(n.kwargs["device"] == torch.device("cpu") for n in factories)
        moved, inputs = to_device(case.gm, case.example_inputs, "meta")
        assert all(t.device.type == "meta" for t in inputs)
        assert all(n.kwargs["device"] == torch.device("cpu") for n in factories)  # the caller's graph as it was
        moved_factories = [n for n in _calls(moved) if n.kwargs.get("device") is not None]
        assert len(moved_factories) == len(factories)
        assert all(n.kwargs["device"] == torch.device("meta") for n in moved_factories)
        assert all(n.meta["val"].device.type == "meta" for n in _calls(moved) if isinstance(n.meta.get("val"), torch.Tensor))
        seen.append(len(factories))

    seen = []
    check()
    assert sum(seen) >= 10


def test_relocate_adds_device_to_factories_without_one():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    z = g.call_function(aten.zeros.default, ([2],), {"dtype": torch.float32})
    c = g.call_function(aten._to_copy.default, (x,), {"dtype": torch.float64})
    g.output((g.call_function(aten.add.Tensor, (z, x)), c))
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    relocate(gm, "cuda")
    assert z.kwargs["device"] == torch.device("cuda")
    assert "device" not in c.kwargs  # same device as its operand: nothing to say
    assert "device(type='cuda')" in gm.code


_OPINFO_CHILD = """
import json
from torch.testing._internal.common_methods_invocations import op_db
from strategies import OPS

by_name = {}
for info in op_db:
    if not info.variant_test_name:
        by_name.setdefault(info.name, info)
out = {}
for row in OPS:
    info = by_name.get(row.overload._schema.name.split("::")[1].lstrip("_"))
    if info is not None:
        cuda = info.supported_dtypes("cuda")
        out[row.name] = sorted(str(d).removeprefix("torch.") for d in row.dtypes if d not in cuda)
print(json.dumps(out))
"""


def _opinfo_cuda_refusals() -> dict:
    """Per catalog row with an OpInfo of its packet's name, the listed dtypes torch's OpInfo
    database says CUDA does not run (``supported_dtypes('cuda')``: declared, readable on a CPU).
    In a process of its own: importing torch's test internals loads a Hypothesis profile of theirs
    (common_utils: max_examples and all), which changed every later test's budget in this process."""
    pytest.importorskip("expecttest", reason="torch's OpInfo database imports expecttest (a dependency in pyproject)")
    proc = subprocess.run([sys.executable, "-c", _OPINFO_CHILD], capture_output=True, text=True, timeout=300,
                          cwd=pathlib.Path(__file__).resolve().parents[1])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {row: set(dtypes) for row, dtypes in json.loads(proc.stdout.strip().splitlines()[-1]).items()}


def test_the_recorded_h100_refusals_agree_with_torchs_opinfo_database():
    """Every dtype the H100 refused a row at (the census, and the probe) is one OpInfo declares CUDA
    does not run (integer matmuls); the tables are test data, and this is their cross-check a CPU
    can run. The probe's refusals of the attention overloads (no OpInfo of their own) are the
    kernels' own messages: dtypes they do not take, or a SIGSEGV."""
    opinfo = _opinfo_cuda_refusals()
    for path in (H100, H100_PROBE):
        h100 = _h100(path)
        checked = 0
        for row, refused in h100.refused_dtypes.items():
            if row in opinfo:
                assert set(refused) <= opinfo[row], (path.name, row, set(refused) - opinfo[row])
                checked += 1
            else:
                assert "attention" in row, (path.name, row)
        assert checked >= 6  # mm, bmm, addmm, baddbmm, addmv, dot


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_graphs_are_drawn_and_run_on_the_gpu_with_its_probed_table():
    """On a CUDA machine: the probed table (made once, cached) keeps integer matmuls and the CPU
    flash attention out, the CUDA attention overloads are drawn, and every value lives on the GPU."""
    table = _probe.support_for("cuda")
    assert table.source == "probe" and table.name == torch.cuda.get_device_name()
    assert not table.runs_row(next(r for r in OPS if r.name == "aten._scaled_dot_product_flash_attention_for_cpu.default"))
    seen = _census("cuda", ops=["aten.mm", "aten.addmm", "aten.full", "aten.zeros",
                                "aten._scaled_dot_product_efficient_attention", "aten._scaled_dot_product_flash_attention",
                                "aten.scaled_dot_product_attention"])
    calls = {k: n for k, n in seen.items() if k[0] not in ("device", "input on")}
    assert not any(op == "aten.mm.default" and sig[0].startswith("int") for op, sig in calls)
    assert any(op in ("aten._scaled_dot_product_efficient_attention.default",
                      "aten._scaled_dot_product_flash_attention.default") for op, _ in calls)
    assert seen["device", "cuda:0"] + seen["device", "cuda"] and not seen["device", "cpu"]
    assert seen["input on", "cuda"] and not seen["input on", "cpu"]


@st.composite
def _cuda_attention_args(draw):
    """rule_sdpa's arguments for one of the CUDA fused attention overloads (drawn, never run)."""
    from strategies._draw.operands import DrawContext
    from strategies._build.builder import GraphBuilder, StepRejected
    from strategies._draw.compute_calls import rule_sdpa
    from strategies._build.meta import shared_fake_mode
    from strategies._catalog.ops import rows_named

    name = draw(st.sampled_from(["aten._scaled_dot_product_flash_attention.default",
                                 "aten._scaled_dot_product_efficient_attention.default",
                                 "aten._scaled_dot_product_cudnn_attention.default"]))
    builder = GraphBuilder(fake_mode=shared_fake_mode())
    ctx = DrawContext(builder, st.just(torch.float16), st.just((1, 2, 3, 5)), 4, False, False,
                      large=draw(st.booleans()))
    try:
        return rule_sdpa(draw, ctx, rows_named(name)[0])[0]
    except StepRejected:
        return None


@settings(max_examples=40, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(_cuda_attention_args())
def test_the_cuda_attention_overloads_are_drawn_with_head_sizes_in_multiples_of_8(args):
    """What the H100 refused otherwise (torch 2.11): flash "head_size must be a multiple of 8", cuDNN
    "hidden_dim should be multiple of 8", efficient attention on f16/bf16 "no kernel found"."""
    if args is not None:
        q, k, v = (a.tensor for a in args[:3])
        assert q.shape[-1] % 8 == 0 and k.shape[-1] % 8 == 0 and v.shape[-1] % 8 == 0, (q.shape, k.shape, v.shape)


def test_results_no_node_reads_are_not_held_to_fake_tensors(monkeypatch):
    """torch 2.11's meta kernel of the CPU flash attention gives a float32 logsumexp for float64
    inputs (eager: float64), which made every float64 call of it undrawable there (the H100 run).
    The logsumexp is never read (FIRST_RESULT_ONLY): only the first result is held to the fakes."""
    from strategies._build import builder as _builder
    from strategies._build.meta import shared_fake_mode

    flash = aten._scaled_dot_product_flash_attention_for_cpu.default
    q = torch.randn(1, 1, 3, 8, dtype=torch.float64)
    out = flash(q, q, q, 0.0, False)
    builder = _builder.GraphBuilder(fake_mode=shared_fake_mode())
    run = builder._fake_run

    def like_torch_2_11(target, args, kwargs):
        result = run(target, args, kwargs)
        return (result[0], result[1].to(torch.float32)) if target is flash else result

    monkeypatch.setattr(builder, "_fake_run", like_torch_2_11)
    monkeypatch.setattr(_builder, "_FAKE_VERDICTS", {})
    assert builder._fake_check(flash, (q, q, q, 0.0, False), {}, None, out) is None
    wrong = (out[0].to(torch.float32), out[1])  # the first result is still held to them
    assert "float32" in builder._fake_check(flash, (q, q, q, 0.0, False), {}, None, wrong)
