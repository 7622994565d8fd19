"""Conformance of the generated IR itself: what every other suite module relies on.

A pass is judged by running generated graphs, so the graphs must mean what they say under the
installed torch: ``meta['val']`` agrees with what eager produces (shape, dtype, strides) and with
what torch's own fake-tensor propagation derives (which shape-aware passes re-run), the compiled
``forward`` agrees with ``fx.Interpreter``, and a graph run twice on identical inputs is bitwise
identical, input mutations included. A failure here is a torch (or strategies) regression, and it
would make every other verdict unreliable.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
import torch.fx as fx
from hypothesis import given
from torch._subclasses.fake_tensor import FakeTensorMode

from strategies import eager_fake_disagreement, fake_disagreements, graphs, shared_fake_mode
from strategies._build.builder import GraphBuilder, StepRejected

TORCH = f"torch {torch.__version__.split('+')[0]}"


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


# --- where eager and fake tensors disagree: torch findings the generator leaves out ------------------

aten = torch.ops.aten


@dataclass(frozen=True)
class EagerFakeFinding:
    """A call eager runs and torch's fake-tensor propagation refuses or describes otherwise (shape,
    dtype, strides): a pass that re-propagates fakes (Inductor's, Torch-TensorRT's) would see another
    graph than the one that ran, so the generator never draws such a call (``eager_fake_disagreement``
    is checked on every drawn node). ``call`` makes the minimal call; ``shows`` is the disagreement
    as ``eager_fake_disagreement`` words it (a regex: this bug, not any disagreement)."""

    call: Callable
    shows: str
    why: str


FAKE_FINDINGS = {
    "arange-int-step-truncated": EagerFakeFinding(
        lambda: (aten.arange.start_step, (-4, -4.0, 0.5), {"dtype": torch.int32}),
        r"fake tensors refuse it \(RuntimeError: step must be nonzero\)",
        f"{TORCH}: eager casts the step after computing the (empty) length; the meta kernel casts 0.5 "
        f"to int32 first and refuses a step of 0 (issue 31: make conformance drew it at a random seed)"),
    "native-dropout-empty-mask-dtype": EagerFakeFinding(
        lambda: (aten.native_dropout.default, (torch.randn(3, 0, 2), 0.5, True), {}),
        r"fake tensors give \(3, 0, 2\) torch\.bool, eager \(3, 0, 2\) torch\.float32",
        f"{TORCH}: eager's native_dropout returns a float mask for an empty input (bool otherwise)"),
    "batch-norm-no-training-strides": EagerFakeFinding(
        lambda: (aten._native_batch_norm_legit_no_training.default,
                 (torch.randn(2, 3, 1).permute(2, 1, 0), None, torch.randn(3), torch.randn(3), torch.rand(3) + 1,
                  0.1, 1e-5), {}),
        r"fake tensors give strides \(1, 1, 3\), eager \(6, 2, 1\)",
        f"{TORCH}: the eager kernel returns a contiguous result for a permuted input; the meta kernel "
        f"keeps the input's strides"),
}


@pytest.mark.parametrize("name", sorted(FAKE_FINDINGS))
def test_eager_fake_finding_shows(name):
    """The finding's minimal call still shows exactly that disagreement."""
    target, args, kwargs = FAKE_FINDINGS[name].call()
    why = eager_fake_disagreement(target, args, kwargs)
    assert why is not None and re.fullmatch(FAKE_FINDINGS[name].shows, why), why


@pytest.mark.parametrize("name", sorted(FAKE_FINDINGS))
@pytest.mark.xfail(strict=True, reason="a torch finding: see FAKE_FINDINGS")
def test_eager_fake_finding_fixed(name):
    """Strict: the day torch agrees with itself here, this passes and the row must go."""
    target, args, kwargs = FAKE_FINDINGS[name].call()
    assert eager_fake_disagreement(target, args, kwargs) is None


@pytest.mark.parametrize("name", sorted(FAKE_FINDINGS))
def test_the_generator_never_draws_a_finding(name):
    """The builder refuses the call (so no drawn graph holds it), and says why."""
    target, args, kwargs = FAKE_FINDINGS[name].call()
    builder = GraphBuilder(fake_mode=shared_fake_mode(), special_values=True)
    values = tuple(builder.add_constant(a) if isinstance(a, torch.Tensor) else a for a in args)
    with pytest.raises(StepRejected, match="eager and fake tensors disagree"):
        builder.call(None, target, values, kwargs)
    assert str(target) in fake_disagreements()


def test_a_call_that_kills_eager_is_refused_not_run(monkeypatch):
    """A call of a crash-prone op is tried in a forked process and refused where it dies there:
    drawing never kills the process that draws (the search would die with it). Planted: an op that
    always segfaults. Real: a bfloat16 3-d convolution that segfaults eager CPU on some CPUs (torch
    2.13's oneDNN path; not on an AVX-512-BF16 EPYC), refused exactly where it kills the trial."""
    import os
    import signal

    from strategies._build import eager as _eager_calls

    def segfaults(x):
        os.kill(os.getpid(), signal.SIGSEGV)

    monkeypatch.setitem(_eager_calls._CRASH_PRONE, segfaults, (torch.bfloat16,))
    assert "killed a trial process (SIGSEGV)" in _eager_calls.crashes_in_trial(
        segfaults, (torch.zeros(2, dtype=torch.bfloat16),), {})
    x = torch.randn(30, dtype=torch.bfloat16).as_strided((1, 1, 3, 1, 2), (15, 15, 5, 5, 2), 1)
    w, b = torch.randn(2, 1, 2, 3, 3, dtype=torch.bfloat16), torch.randn(2, dtype=torch.bfloat16)
    builder = GraphBuilder(fake_mode=shared_fake_mode(), special_values=True)
    values = tuple(builder.add_constant(t) for t in (x.contiguous(), w, b))
    conv = (aten.convolution.default, (*values, [2, 2, 2], [2, 3, 4], [2, 2, 2], False, [0, 0, 0], 1))
    real = tuple(v.tensor for v in values) + conv[1][3:]
    if _eager_calls.crashes_in_trial(conv[0], real, {}):  # this CPU's kernel dies: refused, never run here
        with pytest.raises(StepRejected, match="killed a trial process"):
            builder.call(None, *conv, {})
    else:  # it runs here: drawn like any call
        builder.call(None, *conv, {})
    ok = tuple(builder.add_constant(t.float()) for t in (x.contiguous(), w, b))  # float32 runs: drawn
    builder.call(None, aten.convolution.default, (*ok, [2, 2, 2], [2, 3, 4], [2, 2, 2], False, [0, 0, 0], 1), {})