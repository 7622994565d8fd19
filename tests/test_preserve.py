"""``preserve=`` contracts are judged against the original (a violation the original already had is
not the pass's, and a graph the pass left unchanged is never reported); ``ensure=`` contracts must
hold on the result whatever the original did (the repair passes establish them)."""

from __future__ import annotations

import pytest
import torch
import torch.fx as fx

from conformance import UsageError, check, verify

aten = torch.ops.aten


def _graph(build, n_inputs=2):
    g = fx.Graph()
    xs = [g.placeholder(f"x{i}") for i in range(n_inputs)]
    g.output(build(g, *xs))
    return fx.GraphModule(torch.nn.Module(), g), tuple(torch.randn(3) for _ in range(n_inputs))


def _returns_an_input_and_a_double_neg():
    return _graph(lambda g, x, y: (x, g.call_function(aten.neg.default, (g.call_function(aten.neg.default, (y,)),))))


def fold_double_neg_to_clone(gm):
    """Changes the graph, keeps returning ``x`` as the original did, adds no input output."""
    for node in list(gm.graph.nodes):
        if node.target == aten.neg.default and getattr(node.args[0], "target", None) == aten.neg.default:
            with gm.graph.inserting_before(node):
                copy = gm.graph.call_function(aten.clone.default, (node.args[0].args[0],))
            node.replace_all_uses_with(copy)
            gm.graph.erase_node(node)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def fold_double_neg_to_input(gm):
    """Bug under no-input-as-output: ``neg(neg(y))`` becomes ``y``, so an output becomes an input."""
    for node in list(gm.graph.nodes):
        if node.target == aten.neg.default and getattr(node.args[0], "target", None) == aten.neg.default:
            node.replace_all_uses_with(node.args[0].args[0])
            gm.graph.erase_node(node)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def test_a_violation_the_original_had_is_not_the_passes():
    gm, inputs = _returns_an_input_and_a_double_neg()
    kept = check(fold_double_neg_to_clone, gm, inputs, preserve=["no-input-as-output"])
    assert kept.ok and kept.changed > 0, [v.message for v in kept.violations]
    # under ensure the result must satisfy it, whatever the original did
    ensured = check(fold_double_neg_to_clone, gm, inputs, ensure=["no-input-as-output"])
    assert [v.property for v in ensured.violations] == ["contracts:no-input-as-output"]


def test_an_unchanged_graph_is_never_reported():
    gm, inputs = _returns_an_input_and_a_double_neg()
    verdict = check(lambda gm: gm, gm, inputs, preserve=["no-input-as-output"])
    assert verdict.ok and verdict.changed == 0


def test_a_violation_the_pass_introduced_is_reported():
    gm, inputs = _returns_an_input_and_a_double_neg()
    verdict = check(fold_double_neg_to_input, gm, inputs, preserve=["no-input-as-output"], properties=["validity"])
    assert [v.property for v in verdict.violations] == ["contracts:no-input-as-output"]
    assert "output[1]" in verdict.violations[0].message and "the original kept it" in verdict.violations[0].message


def test_preserve_in_a_search_flags_only_the_breaking_pass():
    ok = verify(fold_double_neg_to_clone, seed=0, max_examples=100, repro_dir=None, shrink=False,
                preserve=["no-input-as-output"], focus="aten.neg")
    assert ok.ok and ok.changed > 0
    bad = verify(fold_double_neg_to_input, seed=0, max_examples=100, repro_dir=None, shrink=False,
                 preserve=["no-input-as-output"], properties=["validity"], focus="aten.neg")
    assert {v.property for v in bad.violations} == {"contracts:no-input-as-output"}


def test_one_contract_cannot_be_both():
    gm, inputs = _returns_an_input_and_a_double_neg()
    with pytest.raises(UsageError, match="both --ensure"):
        check(lambda gm: gm, gm, inputs, ensure=["functional"], preserve=["functional"])


def test_a_violation_the_original_had_is_matched_though_the_pass_moved_its_node():
    """``functional`` kept: the original already writes in place; the pass inserts nodes before the
    write, so the write's label (node index, meta) differs, and it is still the original's."""
    gm, inputs = _graph(lambda g, x, y: (g.call_function(aten.add_.Tensor, (
        g.call_function(aten.clone.default, (x,)), y)),))

    def insert_a_neg_first(gm):
        first = next(n for n in gm.graph.nodes if n.op == "call_function")
        with gm.graph.inserting_before(first):
            gm.graph.call_function(aten.neg.default, (first.args[0],))
        gm.recompile()
        return gm

    verdict = check(insert_a_neg_first, gm, inputs, preserve=["functional"])
    assert verdict.changed > 0 and verdict.ok, [v.message for v in verdict.violations]
    assert not check(insert_a_neg_first, gm, inputs, ensure=["functional"]).ok
