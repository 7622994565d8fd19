"""Graphs holding higher-order ops (issue 35, item 2): a ``cond``'s branches are subgraphs, kept as
attributes of the graph and fetched by ``get_attr``. The harness judges a pass that edits only a
branch (the change detector sees into subgraphs, values are compared as for any graph) and a pass
that breaks one (validity lints every subgraph and names it)."""

from __future__ import annotations

import operator

import torch
import torch.fx as fx
from torch.fx.experimental.proxy_tensor import make_fx

from conformance import check
from conformance.changes import what_changed

aten = torch.ops.aten


def _cond_graph() -> fx.GraphModule:
    def program(x):
        return (torch.cond(x.sum() > 0, lambda x: x * 2, lambda x: x.cos(), (x,)),)
    return make_fx(program)(torch.randn(3))


def _branches(gm: fx.GraphModule) -> list:
    return [m for name, m in gm.named_modules() if isinstance(m, fx.GraphModule) and m is not gm]


def _doubling_as(make):
    """A pass over the branches only: ``x * 2`` becomes ``make(graph, x)``."""
    def rewrite(gm):
        for branch in _branches(gm):
            for node in list(branch.graph.nodes):
                if node.target is aten.mul.Tensor and node.args[1] == 2:
                    with branch.graph.inserting_before(node):
                        node.replace_all_uses_with(make(branch.graph, node.args[0]))
                    branch.graph.erase_node(node)
            branch.recompile()
        return gm
    return rewrite


double_as_a_sum = _doubling_as(lambda g, x: g.call_function(aten.add.Tensor, (x, x)))  # exact
double_as_plus_two = _doubling_as(lambda g, x: g.call_function(aten.add.Tensor, (x, 2)))  # wrong


def test_a_pass_that_edits_only_a_branch_changed_the_graph_and_is_judged_by_its_values():
    gm = _cond_graph()
    taken = (torch.tensor([1.0, 2.0, 3.0]),)  # the sum is positive: the branch that doubles runs
    verdict = check(double_as_a_sum, gm, taken)
    assert verdict.ok and verdict.changed and not verdict.dead_code_only, str(verdict)
    assert "aten.mul" in _branches(gm)[0].code  # the caller's graph is not the one the pass edited
    bad = check(double_as_plus_two, gm, taken)
    assert [v.property for v in bad.violations] == ["values"], str(bad)
    untaken = check(double_as_plus_two, gm, (-torch.tensor([1.0, 2.0, 3.0]),))
    assert untaken.ok and untaken.changed, str(untaken)  # changed, though the other branch ran


def test_the_change_detector_sees_a_branch_edit_and_nothing_where_there_is_none():
    gm = _cond_graph()
    assert what_changed(gm, gm) == (0, False)
    edited = double_as_a_sum(_cond_graph())
    n, dead_code_only = what_changed(gm, edited)
    assert n > 0 and not dead_code_only


def test_a_pass_that_breaks_a_branch_is_invalid_and_the_branch_is_named():
    def leak_an_outer_value(gm):
        outer = next(n for n in gm.graph.nodes if n.op == "placeholder")
        branch = gm.true_graph_0
        out = next(n for n in branch.graph.nodes if n.op == "output")
        with branch.graph.inserting_before(out):
            branch.graph.call_function(aten.neg.default, (outer,))  # a node of another graph as argument
        return gm

    verdict = check(leak_an_outer_value, _cond_graph(), (torch.ones(3),))
    messages = [v.message for v in verdict.violations if v.property == "validity"]
    assert messages and "subgraph true_graph_0" in messages[0], str(verdict)


def test_the_graph_source_writes_each_branch_and_rebuilds_the_graph():
    from conformance.source import graph_source

    gm = _cond_graph()
    namespace: dict = {"torch": torch, "fx": fx, "operator": operator}  # what a repro script imports first
    exec(graph_source(gm), namespace)  # noqa: S102 - the harness's own repro source
    rebuilt = namespace["build_graph"]()
    assert [m.code for m in _branches(rebuilt)] == [m.code for m in _branches(gm)]
    for x in (torch.tensor([1.0, 2.0]), torch.tensor([-1.0, -2.0])):
        assert torch.equal(rebuilt(x)[0], gm(x)[0])


def test_a_repro_script_of_a_branch_edit_rebuilds_the_branches_and_fails_alone(tmp_path):
    import os
    import pathlib
    import subprocess
    import sys

    from conformance.repro import write_repro

    gm, inputs = _cond_graph(), (torch.tensor([1.0, 2.0, 3.0]),)
    verdict = check(double_as_plus_two, gm, inputs)
    script = write_repro(tmp_path, gm=gm, example_inputs=inputs, target="tests.test_higher_order_ops:double_as_plus_two",
                         violation=verdict.violations[0])
    root = str(pathlib.Path(__file__).resolve().parents[1])
    ran = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": root})
    assert ran.returncode == 1 and "values" in ran.stdout, ran.stdout[-2000:] + ran.stderr[-2000:]
