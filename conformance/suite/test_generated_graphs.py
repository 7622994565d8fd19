"""Conformance of the generated IR itself: what every other suite module relies on.

A pass is judged by running generated graphs, so the graphs must mean what they say under the
installed torch: ``meta['val']`` agrees with what eager produces (shape, dtype, strides) and with
what torch's own fake-tensor propagation derives (which shape-aware passes re-run), the compiled
``forward`` agrees with ``fx.Interpreter``, and a graph run twice on identical inputs is bitwise
identical, input mutations included. A failure here is a torch (or strategies) regression, and it
would make every other verdict unreliable.
"""

from __future__ import annotations

import torch
import torch.fx as fx
from hypothesis import given
from torch._subclasses.fake_tensor import FakeTensorMode

from strategies import graphs


def _significant_strides(shape, stride):
    """Strides that can change what a tensor means: none for an empty tensor, and none of size-1 dims
    (torch is free to pick those; eager and fake tensors do differ there)."""
    if 0 in shape:
        return ()
    return tuple(st if n > 1 else None for n, st in zip(shape, stride))


class _Eager(fx.Interpreter):
    """Records each node's (shape, dtype, significant strides) as it runs, eagerly or under a fake mode."""

    def __init__(self, gm):
        super().__init__(gm)
        self.seen = {}

    def run_node(self, n):
        out = super().run_node(n)
        if isinstance(out, torch.Tensor):
            self.seen[n] = (tuple(out.shape), out.dtype, _significant_strides(out.shape, out.stride()))
        return out


def _bits(t: torch.Tensor) -> torch.Tensor:
    t = t.detach().contiguous()
    if t.is_floating_point():
        return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])
    return t


def _assert_same(a, b, what):
    assert (a.shape, a.dtype, a.stride()) == (b.shape, b.dtype, b.stride()), \
        f"{what}={(tuple(a.shape), a.dtype, a.stride())}, but should be {(tuple(b.shape), b.dtype, b.stride())}"
    assert torch.equal(_bits(a), _bits(b)), f"{what} differs bitwise between two identical runs"


@given(graphs(mutations=True, special_values=True))
def test_meta_val_matches_eager(case):
    """meta['val'] of every node has the shape, dtype and strides eager produced at that node."""
    rec = _Eager(case.gm)
    rec.run(*case.fresh_inputs())
    _assert_meta_matches(rec.seen)


def _assert_meta_matches(seen):
    for node, (shape, dtype, stride) in seen.items():
        val = node.meta.get("val")
        assert isinstance(val, torch.Tensor), f"meta['val']={val!r}, but should be a tensor [{node.format_node()}]"
        got = (tuple(val.shape), val.dtype, _significant_strides(val.shape, val.stride()))
        assert got == (shape, dtype, stride), f"meta['val']={got}, but should be {(shape, dtype, stride)} [{node.format_node()}]"


@given(graphs(mutations=True, special_values=True))
def test_fake_tensor_propagation_matches_meta_val(case):
    """torch's FakeTensorMode, re-running the graph, derives the same metadata as meta['val']."""
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    rec = _Eager(case.gm)
    fakes = [mode.from_tensor(t) for t in case.fresh_inputs()]
    grad = torch.is_grad_enabled()
    try:
        with mode:
            rec.run(*fakes)
    finally:
        torch._C._set_grad_enabled(grad)
    _assert_meta_matches(rec.seen)


@given(graphs(mutations=True, special_values=True))
def test_forward_is_deterministic_and_matches_interpreter(case):
    """Two runs of forward and one fx.Interpreter run agree bitwise, outputs and inputs after."""
    runs = []
    for run in (case.gm, fx.Interpreter(case.gm).run, case.gm):
        inputs = case.fresh_inputs()
        outputs = run(*inputs)
        runs.append((outputs, inputs))
    (out0, in0), *rest = runs
    for outs, ins in rest:
        assert (len(outs), len(ins)) == (len(out0), len(in0)), "runs returned different numbers of tensors"
        for i, (a, b) in enumerate(zip(outs, out0)):
            _assert_same(a, b, f"output[{i}]")
        for i, (a, b) in enumerate(zip(ins, in0)):
            _assert_same(a, b, f"input[{i}] after the run")
