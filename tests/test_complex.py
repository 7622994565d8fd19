"""Complex dtypes (issue 56 item 5): drawn where the catalog's rows take them, judged as (real,
imaginary) pairs against a complex128 reference, and written into repros bit for bit."""

from __future__ import annotations

import collections

import torch
import torch.fx as fx
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from conformance.oracle import bitwise_equal, compare_values
from conformance.reruns import reference_run
from conformance.source import inputs_source
from strategies import OPS, Focus, graphs
from strategies._catalog.vocabulary import COMPLEX

aten = torch.ops.aten
TAKES_COMPLEX = {row.overload for row in OPS if row.dtypes & COMPLEX}


def _cases(strategy, n: int = 200, at: int = 0) -> list:
    cases = []

    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @seed(at)
    @given(strategy)
    def run(case):
        cases.append(case)

    run()
    return cases


def _complex_operand(n: fx.Node) -> bool:
    return any(isinstance(a.meta.get("val"), torch.Tensor) and a.meta["val"].is_complex() for a in n.all_input_nodes)


def _complex_counts(strategy, n: int = 200) -> collections.Counter:
    counts = collections.Counter()
    for case in _cases(strategy, n):
        leaves = [t for t in case.example_inputs if isinstance(t, torch.Tensor) and t.is_complex()]
        leaves += [b for b in case.gm.buffers() if b.is_complex()]
        counts["graphs"] += bool(leaves)
        counts["nonfinite parts"] += any(not torch.isfinite(torch.view_as_real(t)).all() for t in leaves if t.numel())
        for n in case.gm.graph.nodes:
            if n.op == "call_function" and _complex_operand(n):
                counts["calls"] += 1
                assert n.target in TAKES_COMPLEX or n.target.__name__ == "getitem", (n.format_node(), case.gm.code)
    return counts


FOCUS = Focus(ops=["aten.abs.default", "aten.pow.Tensor_Scalar", "aten.mul.Tensor"])


def test_complex_values_are_drawn_in_focused_graphs_where_ops_take_them_and_only_there():
    """Focused on ops that take complex (200 graphs, seed 0): complex values in some (in a focus step a
    new float32/float64 leaf of such an op is complex half the time: 14 graphs, 61 calls reading one,
    measured), their parts holding NaN or inf in some; every call reading one is a row listing complex
    dtypes (a complex leaf is never drawn for an op that would refuse it). Plain graphs (graphs() in a
    user's own tests) keep their real dtypes."""
    counts = _complex_counts(graphs(special_values=True, focus=FOCUS, device="cpu"))
    assert counts["graphs"] >= 7 and counts["nonfinite parts"] >= 1 and counts["calls"] >= 20, counts
    assert _complex_counts(graphs(special_values=True, device="cpu"), 100)["graphs"] == 0


def test_the_users_dtypes_decide_the_leaves():
    """With ``dtypes=`` given no leaf is complex unless the user names a complex dtype, and then the
    ops that take it draw it."""
    for case in _cases(graphs(dtypes=st.just(torch.float32), device="cpu"), 60):
        assert not any(t.is_complex() for t in case.example_inputs if isinstance(t, torch.Tensor))
    drawn = _cases(graphs(ops=["aten.mul.Tensor", "aten.abs.default"], dtypes=st.just(torch.complex64), device="cpu"), 30)
    assert sum(any(t.dtype is torch.complex64 for t in c.example_inputs) for c in drawn) >= 20


def test_complex_values_are_judged_as_real_and_imaginary_pairs():
    x = torch.tensor([1 + 2j, float("nan") + 1j, 3 - 0j], dtype=torch.complex64)
    assert compare_values(x.clone(), x, "out") is None  # NaN where the original has it
    assert compare_values(x.conj().conj(), x, "out") is None  # a conjugate bit resolved first
    # the imaginary part alone differs: caught, where a cast to float64 would drop it
    wrong = x.clone()
    wrong[0] = 1 - 2j
    message = compare_values(wrong, x, "out")
    assert message is not None and "as real, imaginary pairs" in message
    # within complex64's own tolerance (its parts are float32): passes; a float64-sized error does not
    near = x + torch.tensor([1e-7 + 1e-7j, 0, 0], dtype=torch.complex64)
    assert compare_values(near, x, "out", reference=x.to(torch.complex128)) is None
    assert compare_values(x + 1e-2, x, "out", reference=x.to(torch.complex128)) is not None
    assert bitwise_equal(x, x.clone()) and not bitwise_equal(wrong, x)


def test_the_reference_runs_complex64_as_complex128():
    """The fp64 reference widens complex64 inputs to complex128, as float32 to float64."""
    gm = fx.symbolic_trace(lambda a, b: aten.mul.Tensor(a, b).abs())
    a = torch.tensor([1e20 + 1e20j], dtype=torch.complex64)
    outputs = reference_run(gm, (a, a))[0]
    assert outputs[0].dtype is torch.float64
    # |a * a| = 2e40 overflows complex64's parts (inf in eager); complex128 holds it
    assert torch.isinf(gm(a, a)).all() and torch.isfinite(outputs[0]).all()


def test_complex_inputs_are_written_into_repros_bit_for_bit():
    x = torch.tensor([1 + 2j, float("nan") - 0.0j, float("-inf") + 1e-40j], dtype=torch.complex64)
    y = torch.tensor([0.5 - 1j], dtype=torch.complex128).expand(3)
    namespace: dict = {"torch": torch}
    exec(inputs_source((x, y)), namespace)  # noqa: S102 - the repro's own source
    got = namespace["make_inputs"]()
    assert bitwise_equal(got[0], x) and got[1].dtype is torch.complex128 and got[1].stride() == (0,)
