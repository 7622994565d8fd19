"""reference_lowering.pointwise, verified like any pass: lowered graphs equal the originals.

- Drawn graphs (every catalog op: pointwise, views, reductions; all dtypes, broadcasting,
  non-contiguous inputs) lowered with ``lower_pointwise`` keep ``values``, ``mutations``,
  ``aliasing`` and ``determinism``, and satisfy ``pointwise-kernels-only``; so do mutating graphs
  (in-place ops stay, as fences the regions do not cross). With special values (NaN, +-inf, -0.0,
  subnormals, huge and tiny) too, under the relaxed special-values policy (the lowering avoids
  intermediate overflow that some CPUs' eager kernels have).
- Pointwise-only graphs: one lowered graph with ``dynamic=True`` is run at three more sizes (same
  ranks, broadcasting and layouts, new extents) and matches eager at each, with no new kernel.
- Graphs over symbolic sizes (``graphs(dynamic=True)``: SymInt sizes, ``sym_size`` nodes, size
  arithmetic feeding views, factories and slices) lowered with ``dynamic=True`` keep the ``dynamic``
  property: no new guards, the same symbolic sizes, the same values at other sizes (0 and 1 among them).

Kernels run under the Triton interpreter on CPU and compiled on a CUDA device (``--device``).
"""

from __future__ import annotations

import pytest
import torch
import torch.fx as fx
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance import check, verify
from conformance.oracle import compare_outputs
from reference_lowering.pointwise import lower_pointwise
from reference_lowering.pointwise import _runtime
from strategies import OPS, graphs

pytestmark = pytest.mark.conformance

POINTWISE = [row for row in OPS if row.category == "pointwise"]
PROPERTIES = ["validity", "values", "mutations", "aliasing", "determinism"]


def lower(gm, sample_inputs):
    return lower_pointwise(gm, sample_inputs)


def _budget(scale=1):
    profile = settings.default
    return scale * profile.max_examples, (0 if profile.derandomize else None)


def _assert_verified(graph_kind, scale, special_values):
    max_examples, seed = _budget(scale)
    result = verify(lower, max_examples=max_examples, seed=seed, graphs=graph_kind, special_values=special_values,
                    ensure=["pointwise-kernels-only"], properties=PROPERTIES, timeout=60)
    assert result.ok, "\n\n".join(f"{v.property}: {v.message}\n{v.graph_before}\n{v.graph_after}\nrepro: {v.repro_path}"
                                  for v in result.violations) + f"\n(seed {result.seed})"
    assert not result.vacuous, f"{result.fire_text}: no counterexample, but nothing verified (seed {result.seed})"


def test_lowered_graphs_equal_the_originals():
    _assert_verified("functional", 2, special_values=False)


def test_lowered_mutating_graphs_equal_the_originals():
    _assert_verified("mutating", 1, special_values=False)


# The lowering avoids intermediate overflow that some CPUs' eager kernels have (lerp without FMA
# under ATEN_CPU_CAPABILITY=default): judged under the relaxed special-values policy, as
# tests/test_pointwise_table.py explains. Where eager's vectorized and scalar kernels disagree
# (fmod by a subnormal), the oracle accepts either.
SPECIALS = "relaxed"
SPECIAL_ROWS = [row for row in OPS if row.category not in ("inplace", "random")]


@settings(deadline=None)
@given(graphs(ops=SPECIAL_ROWS, special_values=True))
def test_lowered_graphs_equal_the_originals_on_special_values(case):
    verdict = check(lower, case.gm, case.example_inputs, ensure=["pointwise-kernels-only"], properties=PROPERTIES,
                    timeout=60, specials=SPECIALS)
    assert verdict.ok, "\n".join(f"{v.property}: {v.message}" for v in verdict.violations) + \
        f"\noriginal:\n{case.gm.code}\nlowered:\n{verdict.graph_after}"


# --- one dynamic graph, many sizes ----------------------------------------------------------------


def _resized(t: torch.Tensor, sizes: dict) -> torch.Tensor:
    """``t`` at new extents (each size s != 1 becomes sizes[s]), same stride order and broadcast
    dims, its values repeated (so every value stays in the op's domain)."""
    shape = [sizes.get(s, s) if s != 1 else 1 for s in t.shape]
    expanded = [d for d in range(t.dim()) if t.stride(d) == 0 and t.shape[d] > 1]
    base_shape = [1 if d in expanded else s for d, s in enumerate(shape)]
    order = sorted(range(t.dim()), key=lambda d: (t.stride(d), -d))
    strides, running = [0] * t.dim(), 1
    for d in order:
        strides[d] = running
        running *= base_shape[d]
    flat = t.flatten() if t.numel() else torch.zeros(1, dtype=t.dtype)
    values = flat[torch.arange(running) % flat.numel()]
    base = torch.empty_strided(base_shape, strides, dtype=t.dtype)
    base.view(-1).copy_(values) if base.is_contiguous() else base.copy_(values.reshape(base_shape))
    return base.expand(shape) if expanded else base


@settings(deadline=None)
@given(case=graphs(ops=POINTWISE, special_values=True, constants=False,
                   min_inputs=1, max_inputs=3),
       factors=st.lists(st.integers(2, 5), min_size=3, max_size=3))
def test_one_dynamic_lowering_serves_every_size(case, factors):
    lowered = lower_pointwise(case.gm, case.example_inputs, dynamic=True)
    kernels = len(_runtime._FUNCTIONS)
    # Empty dims stay empty: grown, they would hold values no draw put in the ops' domains (0 as a divisor).
    extents = sorted({s for t in case.example_inputs for s in t.shape if s not in (0, 1)})
    for factor in factors:
        sizes = {s: s * factor + 1 for s in extents}
        inputs = tuple(_resized(t, sizes) for t in case.example_inputs)
        message = compare_outputs(case.gm, inputs, lowered(*inputs), f"at sizes {sizes}: output", specials=SPECIALS)
        assert message is None, f"{message}\noriginal:\n{case.gm.code}\nlowered:\n{lowered.code}"
    assert len(_runtime._FUNCTIONS) == kernels, "a new size made a new kernel"


# --- graphs over symbolic sizes -------------------------------------------------------------------


def lower_dynamic(gm, sample_inputs):
    return lower_pointwise(gm, sample_inputs, dynamic=True)


def test_dynamic_lowering_holds_at_every_size_of_symbolic_graphs():
    max_examples, seed = _budget()
    max_examples = max(10, max_examples // 2)  # each graph is run at four more sizes
    result = verify(lower_dynamic, max_examples=max_examples, seed=seed, dynamic=True, timeout=60,
                    properties=PROPERTIES + ["dynamic"])
    assert result.ok, "\n\n".join(f"{v.property}: {v.message}\n{v.graph_before}\n{v.graph_after}\nrepro: {v.repro_path}"
                                  for v in result.violations) + f"\n(seed {result.seed})"
    assert not result.vacuous and result.dynamic["sizes_run"] >= result.examples


def test_a_symbolic_size_that_is_1_in_the_example_is_not_baked():
    """slice(relu(x), 0, 0, x.size(0) // 2) at x.size(0) = 2: the slice's length is s // 2, which is 1
    in the example. A dynamic kernel treats a size-1 dim as static (a broadcast), so it would bake 1
    (found by this module's search on a fresh clone, seed 0); that region stays ATen instead."""
    import operator

    g = fx.Graph()
    x = g.placeholder("x")
    relu = g.call_function(torch.ops.aten.relu.default, (x,))
    half = g.call_function(operator.floordiv, (g.call_function(torch.ops.aten.sym_size.int, (x, 0)), 2))
    g.output((g.call_function(torch.ops.aten.neg.default, (g.call_function(torch.ops.aten.slice.Tensor,
                                                                            (relu, 0, 0, half)),)),))
    gm = fx.GraphModule(torch.nn.Module(), g)
    verdict = check(lower_dynamic, gm, (torch.arange(2.0) - 1,), symbolic=(("s0",),), sizes=[{"s0": 4}, {"s0": 6}],
                    properties=PROPERTIES + ["dynamic"], device="cpu")
    assert verdict.ok, [v.message for v in verdict.violations]
