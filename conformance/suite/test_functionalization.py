"""reference_lowering.functionalize, verified like any pass, and torch's functionalization beside it.

- Drawn mutating programs (``strategies.graphs(mutations=True)``: in-place ops, writes through
  views, metadata mutation, input writes, grad regions): the functionalized graph keeps the
  ``functional`` contract, and its outputs and the inputs' post-states (values, shapes, strides)
  equal the original's. With ``input_mutations="outputs"`` the caller applying the signature gets
  the same inputs back.
- Differential: ``torch.func.functionalize(remove="mutations_and_views")`` + ``make_fx`` on the same
  programs. Every way it differs from eager is a row below: a strict xfail on a hand-made graph,
  naming the torch behaviour; a drawn program on which torch differs in a way no row names fails.
"""

from __future__ import annotations

import re

import pytest
import torch
from hypothesis import given, reject, settings
from torch.fx.experimental.proxy_tensor import make_fx

from conformance import check, verify
from conformance.properties import REPAIR_HINT
from reference_lowering import LoweringError
from reference_lowering.functionalize import functionalize
from strategies import graphs

from ._tiers import spread

pytestmark = pytest.mark.conformance

aten = torch.ops.aten
TORCH = f"torch {torch.__version__}"


def functionalize_pass(gm, sample_inputs):
    return functionalize(gm, sample_inputs)


def torch_functionalize(gm, sample_inputs):
    return make_fx(torch.func.functionalize(gm, remove="mutations_and_views"))(*sample_inputs)


def _search(request, run: int) -> dict:
    """verify()'s budget, seed (the profile's, plus ``run``) and focus. make sweep's cases: 4x the
    profile's examples, trigger discovery on. make test's: 2x (50 under ci) and no discovery
    (focus="none"): discovering functionalize's ops took about 10 s of CPU with an empty
    FX_CONFORMANCE_CACHE, torch's 5 s, more than the graphs (2-core AMD EPYC)."""
    profile = settings.default
    sweep = request.node.get_closest_marker("sweep") is not None
    return dict(max_examples=(4 if sweep else 2) * profile.max_examples,
                seed=None if not profile.derandomize else run, focus="auto" if sweep else "none")


def _documented_limit(violation) -> bool:
    """What functionalize refuses by design, with a LoweringError that says so: a storage written
    through one dtype and read through another (``view.dtype`` of written memory). Accepted, so a
    dev-profile run that draws one goes on searching (make conformance found one)."""
    return violation.property == "execution" and "LoweringError" in violation.message and \
        "reinterpretation of written memory is not supported" in violation.message


# make test runs the first case (50 unfocused graphs at seed 0 under ci: functionalize changed 47);
# make sweep the second (100 focused graphs at seed 1), make conformance both.
@pytest.mark.parametrize("run", spread(range(2), 1))
def test_functionalized_programs_are_functional_and_equivalent(request, run):
    result = verify(functionalize_pass, graphs="mutating", **_search(request, run),
                    ensure=["functional"], properties=["validity", "values", "mutations", "aliasing", "determinism"],
                    timeout=30, known=_documented_limit)
    assert result.ok, "\n\n".join(f"{v.property}: {v.message}\n{v.graph_before}\n{v.graph_after}"
                                  for v in result.violations) + f"\n(seed {result.seed})"
    assert not result.vacuous, f"{result.fire_text}: no counterexample, but nothing verified (seed {result.seed})"


@given(graphs(mutations=True, special_values=True))
def test_outputs_mode_with_the_signature_applied_matches_eager(case):
    try:
        gm = functionalize(case.gm, case.example_inputs, input_mutations="outputs")
    except LoweringError as exc:  # its documented refusal (tests/test_functionalize.py): not this test's
        if "reinterpretation of written memory is not supported" not in str(exc):
            raise
        reject()
    sig = gm.meta["functionalization"]
    eager_in, ours_in = case.fresh_inputs(), case.fresh_inputs()
    expected = case.gm(*eager_in)
    results = gm(*ours_in)
    assert len(results) == sig.user_outputs + len(sig.mutated_inputs)
    for a, e in zip(results[:sig.user_outputs], expected):
        torch.testing.assert_close(a, e, equal_nan=True, rtol=0, atol=0)
    for index, label in sig.mutated_inputs.items():  # the caller's part: apply the updates in order
        if not label.startswith("input["):
            continue
        target = ours_in[int(label[6:-1])]
        if label in sig.input_metadata:
            target.as_strided_(*sig.input_metadata[label])
        update = results[index]
        if target.numel() > 1 and 0 in target.stride():
            # an expanded input: its repeats are one memory, which copy_ refuses to write (torch: "more
            # than one element ... refers to a single memory location"). The update must repeat too,
            # and one repeat is written (found by make conformance, seed 3993908723)
            one = tuple(slice(0, 1) if st == 0 else slice(None) for st in target.stride())
            torch.testing.assert_close(update, update[one].expand_as(update), equal_nan=True, rtol=0, atol=0)
            target, update = target[one], update[one]
        target.copy_(update)
    for a, e in zip(ours_in, eager_in):
        assert a.shape == e.shape and a.stride() == e.stride() and a.storage_offset() == e.storage_offset()
        torch.testing.assert_close(a, e, equal_nan=True, rtol=0, atol=0)


# --- torch's functionalization: where it differs from eager -------------------------------------


def _graph(n_inputs, body, constants=None):
    import torch.fx as fx

    g = fx.Graph()
    xs = [g.placeholder(f"x{i}") for i in range(n_inputs)]
    root = torch.nn.Module()
    for name, value in (constants or {}).items():
        root.register_buffer(name, value)
    g.output(tuple(body(g, lambda target, *args: g.call_function(target, args), *xs)))
    return fx.GraphModule(root, g)


def _expand_then_write(g, c, x):
    e = c(aten.expand.default, x, [-1])
    c(aten.pow_.Scalar, x, -1.0)  # 0 -> inf in the base
    return [c(aten.neg_.default, e)]  # then a write through the expand view


# name -> (how the harness reports it, a graph and inputs showing it, the torch behaviour)
def _aliasing_message(pattern: str):
    """A row's matcher: an aliasing violation whose whole message has this form."""
    return lambda v: v.property == "aliasing" and re.fullmatch(pattern, v.message) is not None


DIVERGENCES = {
    "views-become-copies": (
        lambda v: v.property == "aliasing" and "aliases nothing" in v.message,
        lambda: (_graph(1, lambda g, c, x: [c(aten.view.default, x, [-1])]), (torch.randn(2, 3),)),
        "remove='mutations_and_views' turns views into *_copy ops: an output that is a view of an input in "
        "eager is a separate tensor (a caller writing into it no longer updates the input)"),
    "a-written-input-returned-twice-is-a-copy": (
        _aliasing_message(r"output\[\d+\] aliases output\[\d+\](, output\[\d+\])*, but should alias input\[\d+\]"
                          r"(, output\[\d+\])* too \(as the original's does\)" + re.escape(REPAIR_HINT)),
        lambda: (_graph(1, lambda g, c, x: [c(aten.neg_.default, x), x]), (torch.randn(3),)),
        "an input written in place and returned twice (the in-place op's result and the input) comes back as "
        "one new tensor, not the input: the two outputs alias each other only (found by make conformance, "
        "through scatter_add_; through a view of the input written in place and returned with the input "
        "itself, the outputs that should alias it name the input too: seed 921218855)"),
    "a-written-empty-input-returned-is-a-new-object": (
        _aliasing_message(r"output\[\d+\] is a new tensor object \(empty\) but should be input\[\d+\] itself "
                          r"\(the original returns the input object\)"),
        lambda: (_graph(1, lambda g, c, x: [c(aten.neg_.default, x)]), (torch.randn(1, 0, 1),)),
        "an empty input written in place and returned comes back as a new tensor object, not the input "
        "(a non-empty one as a copy: views-become-copies) (found by make conformance, through ceil_)"),
    "views-of-an-intermediate-become-copies": (
        _aliasing_message(r"output\[\d+\] aliases output\[\d+\](, output\[\d+\])*, but should alias output\[\d+\] "
                          r"too \(as the original's does\)"),
        lambda: (_graph(1, lambda g, c, x: [(y := c(aten.clone.default, x)), c(aten.transpose.int, y, 0, -1),
                                            c(aten.flatten.using_ints, y, 0, -1)]), (torch.randn(1),)),
        "views-become-copies for a view of a value computed in the graph: of outputs that all alias one "
        "tensor in eager, a transpose comes back as a separate copy while a flatten of a 1-d tensor (the "
        "tensor itself) still aliases it (found by make conformance, seed 477176225)"),
    "write-to-a-constant-derived-tensor": (
        lambda v: v.property == "execution" and "mutating a non-functional tensor" in v.message,
        lambda: (_graph(1, lambda g, c, x: [c(aten.add_.Tensor, c(aten.mul.Tensor, g.get_attr("k"), 2), x)],
                        {"k": torch.ones(3)}), (torch.randn(3),)),
        "a tensor computed from a module constant is not wrapped, and writing an input-derived value into it "
        "raises an INTERNAL ASSERT ('mutating a non-functional tensor with a functional tensor')"),
    "returned-input-loses-its-strides": (
        lambda v: v.property == "values" and " stride=" in v.message,
        lambda: (_graph(1, lambda g, c, x: [c(aten.neg_.default, x)]), (torch.randn(4)[::2],)),
        "an in-place op's result returned as an output comes back contiguous, not with the (non-contiguous) "
        "input's strides that eager returns"),
    "as_strided_-write-back-drops-the-offset": (
        lambda v: "storage_offset=0, but should be" in v.message,
        lambda: (_graph(1, lambda g, c, x: [c(aten.as_strided_.default, x, [], [], 1)]), (torch.randn(2),)),
        "the write-back of an input's as_strided_ loses its storage offset (the input ends at offset 0)"),
    "write-through-expand-as-a-difference": (
        lambda v: "NaN and +-inf at the same positions" in v.message,
        lambda: (_graph(1, _expand_then_write), (torch.zeros(1),)),
        "a write through an expand view goes back to the base as base + (new - base), which is NaN "
        "wherever the base holds +-inf"),
    "write-through-expand-of-a-bool-tensor-raises": (
        lambda v: v.property == "execution" and "Subtraction, the `-` operator, with two bool tensors" in v.message,
        lambda: (_graph(1, lambda g, c, x: [c(aten.add_.Scalar, c(aten.expand.default, c(aten.eq.Tensor, x, x), [-1]),
                                              False)]), (torch.randn(1),)),
        "the same base + (new - base) write-back, on a bool tensor (a comparison's result written through an "
        "expand view), raises: bool tensors do not subtract (found by the focused search)"),
    "write-through-as_strided-of-a-view-is-banned": (
        lambda v: v.property == "execution" and "view chain of length" in v.message and "as_strided()" in v.message,
        lambda: (_graph(1, lambda g, c, x: [c(aten.neg_.default, c(aten.as_strided.default,
                                                                     c(aten.view.default, c(aten.sub.Scalar, x, 0.0), [1]),
                                                                     [], [], 0))]), (torch.randn(1),)),
        "a write through as_strided of a view raises ('as_strided() is non-compositional ... banned'): eager "
        "runs it (found by the focused search)"),
    "input-strides-after-a-metadata-mutation": (
        lambda v: v.property == "mutations" and " stride=" in v.message,
        lambda: (_graph(1, lambda g, c, x: [c(aten.t_.default, x)]), (torch.randn(2, 3),)),
        "after an input's metadata mutation (t_, transpose_) the epilogue restores its shape with "
        "as_strided_ to contiguous strides: a (2, 3) input after t_ has strides (1, 3) in eager, (2, 1) here"),
    "metadata-mutation-of-an-expanded-input-raises": (
        lambda v: v.property == "execution" and "setStorage" in v.message and "out of bounds" in v.message,
        lambda: (_graph(1, lambda g, c, x: [c(aten.t_.default, x)]), (torch.randn(1, 1).expand(2, 1),)),
        "the same as_strided_ to contiguous strides, on an input whose storage is smaller than a contiguous "
        "one (an expanded input), reaches past the storage and raises"),
    "write-back-into-an-expanded-input": (
        lambda v: v.property == "execution" and "more than one element of the written-to tensor" in v.message,
        lambda: (_graph(1, lambda g, c, x: [c(aten.transpose_.default, x, 0, 0)]), (torch.randn(1).expand(3),)),
        "a metadata mutation of an input with overlapping memory (stride 0), even a no-op transpose_(0, 0), "
        "makes the epilogue copy_ into it, which raises"),
}


def _divergence_params():
    for name, (_, _, behaviour) in DIVERGENCES.items():
        yield pytest.param(name, id=name, marks=pytest.mark.xfail(strict=True, reason=f"{TORCH}: {behaviour}"))


@pytest.mark.parametrize("name", list(_divergence_params()))
def test_torch_functionalize_matches_eager(name):
    matches, make, _ = DIVERGENCES[name]
    gm, inputs = make()
    verdict = check(torch_functionalize, gm, inputs)
    assert verdict.ok, "\n".join(f"{v.property}: {v.message}" for v in verdict.violations)


@pytest.mark.parametrize("name", list(DIVERGENCES))
def test_our_functionalize_on_each_divergence_graph(name):
    """Where torch differs from eager, ours must not."""
    gm, inputs = DIVERGENCES[name][1]()
    verdict = check(functionalize_pass, gm, inputs, ensure=["functional"])
    assert verdict.ok, verdict


def test_each_divergence_row_matches_its_own_graph():
    for name, (matches, make, _) in DIVERGENCES.items():
        gm, inputs = make()
        violations = check(torch_functionalize, gm, inputs).violations
        assert any(matches(v) for v in violations), f"{name}: {[v.message for v in violations]}"


def test_a_written_view_returned_with_its_input_is_the_known_copy():
    """make conformance (seed 921218855): sub_ through view(x, [-1]), returned with the view and x itself:
    the copies alias each other only, and what they should alias lists the input and an output."""
    gm = _graph(1, lambda g, c, x: [(v := c(aten.view.default, x, [-1])) and c(aten.sub_.Tensor, v, 2), v, x])
    violations = check(torch_functionalize, gm, (torch.randn(3),)).violations
    assert violations and all(any(m(v) for m, _, _ in DIVERGENCES.values()) for v in violations), violations
    matches = DIVERGENCES["a-written-input-returned-twice-is-a-copy"][0]
    assert any(matches(v) for v in violations)


# A search stops at the first counterexample per property: search more than once, each search a
# case (make test runs the first; make sweep and make conformance all three).
@pytest.mark.parametrize("run", spread(range(3), 1))
def test_torch_functionalize_differs_from_eager_only_in_known_ways(request, run):
    # Unshrunk: the divergences are matched by message, and shrinking each one took minutes.
    result = verify(torch_functionalize, graphs="mutating", **_search(request, run), repro_dir=None, shrink=False,
                    properties=["validity", "values", "mutations", "aliasing"])
    unknown = [v for v in result.violations if not any(m(v) for m, _, _ in DIVERGENCES.values())]
    assert not unknown, "a divergence no row names:\n" + "\n\n".join(
        f"{v.property}: {v.message}\n{v.graph_before}" for v in unknown)
