"""The structural diff behind fire accounting: names and recompiles are not changes; rewrites are."""

import torch
import torch.fx as fx

from conformance.changes import changed_nodes, only_dead_code_removed, what_changed

aten = torch.ops.aten


def _gm(build):
    g = fx.Graph()
    x = g.placeholder("x")
    g.output(build(g, x))
    return fx.GraphModule(torch.nn.Module(), g)


def _log_exp(g, x):
    return g.call_function(aten.log.default, (g.call_function(aten.exp.default, (x,)),))


def test_renamed_and_recompiled_graph_is_unchanged():
    before = _gm(_log_exp)
    after = _gm(_log_exp)
    for node in after.graph.nodes:
        if node.op == "call_function":
            node.name = node.name + "_renamed"
    after.recompile()
    assert changed_nodes(before, after) == 0


def test_rewrite_counts_the_nodes_it_removed_and_added():
    before = _gm(_log_exp)
    after = _gm(lambda g, x: x)
    assert changed_nodes(before, after) == 4  # removed: exp, log, the output of log; added: the output of x
    swapped = _gm(lambda g, x: g.call_function(aten.exp.default, (g.call_function(aten.log.default, (x,)),)))
    assert changed_nodes(before, swapped) > 0


def test_a_changed_literal_argument_is_a_change():
    a = _gm(lambda g, x: g.call_function(aten.mul.Tensor, (x, 2)))
    b = _gm(lambda g, x: g.call_function(aten.mul.Tensor, (x, 3)))
    assert changed_nodes(a, b) == 4 and changed_nodes(a, a) == 0  # mul and the output, each removed and added


def test_dead_code_removal_alone_is_recognised():
    def with_dead(g, x):
        g.call_function(aten.neg.default, (x,))  # no users
        return g.call_function(aten.abs.default, (x,))

    before = _gm(with_dead)
    after = _gm(lambda g, x: g.call_function(aten.abs.default, (x,)))
    assert changed_nodes(before, after) == 1
    assert only_dead_code_removed(before, after)
    assert not only_dead_code_removed(before, _gm(lambda g, x: g.call_function(aten.relu.default, (x,))))


def test_removing_part_of_the_dead_code_is_dead_code_removal_too():
    """Inductor's decompose_auto_functionalized drops an unused get_attr and leaves the other dead
    nodes: that counted as firing (2 of 40 graphs) though it rewrote nothing."""
    def with_dead(g, x):
        g.call_function(aten.neg.default, (x,))  # no users
        g.call_function(aten.sin.default, (x,))  # no users
        return g.call_function(aten.abs.default, (x,))

    def one_dead(g, x):
        g.call_function(aten.sin.default, (x,))
        return g.call_function(aten.abs.default, (x,))

    def reordered(g, x):
        out = g.call_function(aten.abs.default, (x,))
        g.call_function(aten.sin.default, (x,))
        return out

    before = _gm(with_dead)
    assert what_changed(before, _gm(one_dead)) == (1, True)
    assert only_dead_code_removed(before, _gm(one_dead)) and only_dead_code_removed(before, before)
    assert what_changed(before, _gm(reordered))[1] is False  # neg removed, but sin moved after abs
    assert not what_changed(before, _gm(lambda g, x: g.call_function(aten.neg.default, (x,))))[1]  # a live node gone
