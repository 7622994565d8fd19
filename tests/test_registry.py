"""Lowering-pass registry (reference_lowering.passes.registry): Torch-TensorRT's decorator, dump,
apply and remove, with the checks a user relies on: bad passes are refused at registration, a pass
that returns the wrong thing or breaks the graph is named, and the default registry's order is the
documented DEFAULT_LOWERING_PASSES order."""

from __future__ import annotations

import pytest
import torch
from torch import fx

from reference_lowering import LoweringError
from reference_lowering.passes import (
    DEFAULT_LOWERING_PASSES,
    LoweringPassRegistry,
    registry,
)

from tests.graphs import build

aten = torch.ops.aten


def _gm() -> fx.GraphModule:
    """x -> neg -> add(., 1) -> output."""
    return build(1, lambda g, c, x: c(aten.add.Tensor, c(aten.neg.default, x), 1))


def neg_to_abs(gm, sample_inputs):
    """Edits in place and does NOT recompile: the registry must recompile for the change to show."""
    for node in gm.graph.nodes:
        if node.target is aten.neg.default:
            node.target = aten.abs.default
    return gm


def _make_registry(log: list) -> LoweringPassRegistry:
    reg = LoweringPassRegistry()

    @reg.lowering_pass
    def first_appended(gm, sample_inputs):
        log.append("first_appended")
        return gm

    @reg.lowering_pass
    def second_appended(gm, sample_inputs):
        log.append("second_appended")
        return gm

    return reg


def test_bare_and_indexed_decorator_dump_apply_remove():
    log = []
    reg = _make_registry(log)
    decorated = reg.lowering_pass(index=0)(neg_to_abs)
    assert decorated is neg_to_abs  # returned unchanged, still callable directly
    assert reg.dump_lowering_passes() == "0: neg_to_abs\n1: first_appended\n2: second_appended"
    assert reg.lowering_passes()[0] is neg_to_abs

    x = torch.tensor([-2.0, 3.0])
    out = reg.apply_lowering_passes(_gm(), (x,))
    assert log == ["first_appended", "second_appended"]
    assert torch.equal(out(x), torch.tensor([3.0, 4.0]))  # abs + 1: the edit was recompiled

    assert reg.remove_lowering_pass(0) is neg_to_abs
    assert reg.dump_lowering_passes() == "0: first_appended\n1: second_appended"
    assert torch.equal(reg.apply_lowering_passes(_gm(), (x,))(x), torch.tensor([3.0, -2.0]))


def test_negative_index_inserts_before_the_last():
    reg = _make_registry([])
    reg.lowering_pass(neg_to_abs, index=-1)
    assert [p.__name__ for p in reg.lowering_passes()] == ["first_appended", "neg_to_abs", "second_appended"]


@pytest.mark.parametrize("index", [5, -5, 99])
def test_bad_index_to_remove_or_insert_gives_the_valid_range(index):
    reg = _make_registry([])
    with pytest.raises(LoweringError, match=r"registry has 2 passes, so valid indices are 0\.\.1"):
        reg.remove_lowering_pass(index)
    with pytest.raises(LoweringError, match=r"index should be in -2\.\.2"):
        reg.lowering_pass(neg_to_abs, index=index)
    assert len(reg) == 2


def test_remove_from_empty_registry_says_it_is_empty():
    with pytest.raises(LoweringError, match="registry is empty"):
        LoweringPassRegistry().remove_lowering_pass(0)


@pytest.mark.parametrize("index", ["0", 1.0, True])
def test_bad_index_type_is_rejected(index):
    reg = LoweringPassRegistry()
    with pytest.raises(TypeError, match=r"index should be an int or None"):
        reg.lowering_pass(index=index)
    with pytest.raises(TypeError, match=r"index should be an int"):
        reg.remove_lowering_pass(index)


def test_decorator_with_positional_index_is_rejected_with_a_hint():
    reg = LoweringPassRegistry()
    with pytest.raises(TypeError, match=r"write @lowering_pass\(index=0\)"):
        reg.lowering_pass(0)
    assert len(reg) == 0


def one_arg(gm):
    return gm


def three_required(gm, sample_inputs, settings):
    return gm


@pytest.mark.parametrize("bad", [one_arg, three_required, "neg_to_abs"], ids=["one-arg", "three-args", "string"])
def test_pass_that_cannot_take_gm_and_sample_inputs_is_refused_at_registration(bad):
    reg = LoweringPassRegistry()
    with pytest.raises(TypeError, match=r"fn\(gm, sample_inputs\)"):
        reg.lowering_pass(bad)
    assert len(reg) == 0


def test_varargs_and_defaulted_passes_are_accepted():
    reg = LoweringPassRegistry()
    reg.lowering_pass(lambda gm, *rest: gm)
    reg.lowering_pass(lambda gm, sample_inputs, settings=None: gm)
    assert len(reg) == 2


def test_pass_returning_none_is_named():
    def forgets_return(gm, sample_inputs):
        gm.graph.eliminate_dead_code()

    reg = _make_registry([])
    reg.lowering_pass(forgets_return)
    with pytest.raises(LoweringError, match=r"lowering pass 'forgets_return' \(index 2\) returned NoneType"):
        reg.apply_lowering_passes(_gm(), ())


def test_pass_error_names_pass_and_passes_before_and_is_chained():
    def explodes(gm, sample_inputs):
        raise ValueError("bad node")

    reg = _make_registry([])
    reg.lowering_pass(explodes, index=1)
    with pytest.raises(LoweringError) as info:
        reg.apply_lowering_passes(_gm(), ())
    assert "'explodes' (index 1) failed after passes ['first_appended']: ValueError: bad node" in str(info.value)
    assert isinstance(info.value.__cause__, ValueError)


def test_pass_leaving_an_unlinted_graph_is_named():
    def use_before_def(gm, sample_inputs):
        neg = next(n for n in gm.graph.nodes if n.target is aten.neg.default)
        next(n for n in gm.graph.nodes if n.op == "output").append(neg)
        return gm

    reg = _make_registry([])
    reg.lowering_pass(use_before_def, index=0)
    with pytest.raises(LoweringError, match=r"after lowering pass 'use_before_def' \(index 0\) does not lint"):
        reg.apply_lowering_passes(_gm(), ())


# --- the default registry ---------------------------------------------------------------------------


def test_default_registry_holds_default_passes_in_order():
    assert registry.lowering_passes() == tuple(DEFAULT_LOWERING_PASSES)
    expected = "\n".join(f"{i}: {p.__name__}" for i, p in enumerate(DEFAULT_LOWERING_PASSES))
    assert registry.dump_lowering_passes() == expected


def test_module_level_decorator_registers_in_default_registry_and_remove_restores():
    before = registry.lowering_passes()
    try:

        @registry.lowering_pass(index=0)
        def user_first(gm, sample_inputs):
            return neg_to_abs(gm, sample_inputs)

        assert registry.dump_lowering_passes().splitlines()[0] == "0: user_first"
        x = torch.tensor([-2.0, 3.0])
        out = registry.apply_lowering_passes(_gm(), (x,))
        assert torch.equal(out(x), torch.tensor([3.0, 4.0]))
    finally:
        removed = registry.remove_lowering_pass(0)
    assert removed.__name__ == "user_first"
    assert registry.lowering_passes() == before


def test_module_level_bare_decorator_appends_to_the_default_registry():
    before = registry.lowering_passes()
    try:

        @registry.lowering_pass
        def user_last(gm, sample_inputs):
            return gm

        assert user_last.__name__ == "user_last"  # the decorator hands the function back
        assert registry.lowering_passes() == (*before, user_last)
        assert registry.dump_lowering_passes().splitlines()[-1] == f"{len(before)}: user_last"
    finally:
        removed = registry.remove_lowering_pass(len(before))
    assert removed is user_last and registry.lowering_passes() == before


def test_default_passes_keep_values_of_a_small_graph():
    x = torch.tensor([[-1.5, 0.0], [2.0, -0.0]])
    gm = _gm()
    expected = gm(x)
    out = registry.apply_lowering_passes(gm, (x,))
    torch.testing.assert_close(out(x), expected)
