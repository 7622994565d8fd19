"""Higher-order ops the generator draws itself (issue 35, item 2; ``graphs(hops=...)``): ``torch.cond``
with drawn branches and ``invoke_subgraph`` (one drawn block called more than once), in aten and
post-grad graphs, judged like any graph: a pass that swaps a cond's branches or merges a block's calls
on different operands is caught, the correct merge holds and is seen to fire."""

from __future__ import annotations

import copy
import operator

import pytest
import torch
import torch.fx as fx

from conformance import UsageError, verify
from conformance.changes import what_changed
from conformance.search.triggers import _draw_cases
from strategies import HOPS, InvalidArgument, graphs, ir_errors
from tests.passes.hops import merge_identical_subgraph_calls, merge_subgraph_calls_by_identifier, swap_cond_branches

hop = torch.ops.higher_order


def _hops_in(gm: fx.GraphModule) -> set:
    return {n.target.name() for n in gm.graph.nodes if isinstance(n.target, torch._ops.HigherOrderOperator)}


@pytest.mark.parametrize("ir", ["aten", "post-grad"])
@pytest.mark.parametrize("kind", ["cond", "invoke_subgraph"])
def test_drawn_higher_order_ops_run_keep_their_irs_invariants_and_have_functional_subgraphs(kind, ir):
    """Seed 0: of 40 graphs, cond 15 and 10 aten and post-grad graphs hold one, invoke_subgraph 24 and
    15 (Hypothesis's draws come in runs: of the first 24, aten cond holds 3, of the first 12 post-grad 2)."""
    drawn = _draw_cases(graphs(hops=[kind], ir=ir, device="cpu"), 40, 0)
    holding = [case for case in drawn if kind in _hops_in(case.gm)]
    assert len(holding) >= 6, [case.gm.code for case in drawn]
    for case in holding:
        assert ir_errors(case.gm, ir) == [], (ir_errors(case.gm, ir), case.gm.code)
        subgraphs = [m for m in case.gm.children() if isinstance(m, fx.GraphModule)]
        assert subgraphs and all(not n.target._schema.is_mutable for m in subgraphs for n in m.graph.nodes
                                 if isinstance(n.target, torch._ops.OpOverload))
        case.gm(*case.fresh_inputs())  # runs, as it ran when drawn
    if kind == "invoke_subgraph":  # one block, called more than once
        assert any(sum(n.target is hop.invoke_subgraph for n in c.gm.graph.nodes) >= 2 for c in holding)


def test_the_step_table_holds_higher_order_ops_only_when_asked():
    """Without hops the step table is the one drawn before they existed (every seed draws the graphs it
    drew), and no drawn graph holds one; asked for, each is one more kind after all the others."""
    from strategies import OPS
    from strategies._draw.draw import _STEP_WEIGHTS, _step_kinds

    plain = _step_kinds(OPS, (), False, False)
    assert list(plain.items) == [k for k, _ in _STEP_WEIGHTS if k in plain.items] and not set(HOPS) & set(plain.items)
    assert "grad-region" not in plain.items and "autocast-region" not in plain.items
    asked = _step_kinds(OPS, (), False, False, HOPS)  # a region's op is drawn as its region
    assert list(asked.items) == [*plain.items, "cond", "invoke_subgraph", "grad-region", "autocast-region"]
    mutating = _step_kinds(OPS, (), True, False, HOPS)  # grad regions drawn anyway are not doubled
    assert mutating.items.count("grad-region") == 1 and mutating.items[-1] == "autocast-region"
    assert not any(_hops_in(c.gm) for c in _draw_cases(graphs(device="cpu"), 8, 3))


def test_bad_hops_are_one_clear_error():
    with pytest.raises(InvalidArgument, match="list of higher-order op names"):
        graphs(hops="cond")
    with pytest.raises(InvalidArgument, match="'while_loop' is not a higher-order op the generator draws"):
        graphs(hops=["while_loop"])
    with pytest.raises(InvalidArgument, match="ir='export'"):
        graphs(hops=["cond"], ir="export")
    with pytest.raises(InvalidArgument, match="wrap_with_autocast is drawn in 'pre-dispatch' and 'aten' graphs, "
                                              "not ir='post-grad'"):
        graphs(hops=["wrap_with_autocast"], ir="post-grad")
    with pytest.raises(UsageError, match="'map' is not a higher-order op"):
        verify(lambda gm: gm, hops="cond,map", repro_dir=None)
    with pytest.raises(UsageError, match="not dynamic ones"):
        verify(lambda gm: gm, hops=["cond"], dynamic=True, repro_dir=None)


_BUGS = {"swap_cond_branches": (swap_cond_branches, "cond", 0),
         "merge_subgraph_calls_by_identifier": (merge_subgraph_calls_by_identifier, "invoke_subgraph", 1)}


@pytest.mark.parametrize("name", sorted(_BUGS))
def test_a_planted_bug_over_drawn_higher_order_ops_is_caught(name):
    """Caught by values (focus none, hops given) at graphs 4, 35 and 6 of seeds 0-2 (cond) and 143, 8
    and 73 (invoke_subgraph); make test runs the first seed of each at 200 graphs, the sweep all three."""
    bug, kind, seed = _BUGS[name]
    result = verify(bug, hops=kind, seed=seed, max_examples=200, device="cpu", shrink=False, repro_dir=None,
                    focus="none")
    assert [v.property for v in result.violations] == ["values"], result.violations


def test_merging_a_blocks_calls_on_the_same_operands_holds_and_fires():
    """The correct twin changed 46, 55 and 70 of 200 graphs at seeds 0-2 (20, 27 and 44 of them more than
    dead code); make test: 60 graphs of seed 2, 17 changed, 12 of them more than dead code (the sweep: 200
    of seeds 0-2)."""
    result = verify(merge_identical_subgraph_calls, hops="invoke_subgraph", seed=2, max_examples=60, device="cpu",
                    shrink=False, repro_dir=None, focus="none")
    assert result.ok and result.changed - result.changed_dead_code_only >= 8, (result.fire_text, result.violations)


@pytest.mark.sweep
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sweep_planted_hop_bugs_are_caught_and_the_twin_holds_at_every_seed(seed):
    for bug, kind, _ in _BUGS.values():
        result = verify(bug, hops=kind, seed=seed, max_examples=200, device="cpu", shrink=False, repro_dir=None,
                        focus="none")
        assert not result.ok, (bug.__name__, seed)
    twin = verify(merge_identical_subgraph_calls, hops="invoke_subgraph", seed=seed, max_examples=200, device="cpu",
                  shrink=False, repro_dir=None, focus="none")
    assert twin.ok and twin.changed >= 40, twin.fire_text
    # with focus auto, discovery names the hop from the pass's code (no hops=): caught as well
    found = verify(swap_cond_branches, seed=seed, max_examples=200, device="cpu", shrink=False, repro_dir=None)
    assert found.focus["hops"] == ["cond"] and not found.ok


def _block() -> fx.GraphModule:
    g = fx.Graph()
    g.output((g.call_function(torch.ops.aten.sin.default, (g.placeholder("a"),)),))
    return fx.GraphModule(torch.nn.Module(), g)


def test_merging_two_live_calls_of_a_block_is_more_than_removing_dead_code():
    """Both results read: merging the calls is a rewrite. (The dead-code test keyed the graph without
    its subgraphs, so every such merge read as dead code removed.)"""
    root = torch.nn.Module()
    root.block = _block()
    g = fx.Graph()
    x = g.placeholder("x")
    block = g.get_attr("block")
    reads = [g.call_function(operator.getitem,
                             (g.call_function(hop.invoke_subgraph, (block, "b", x)), 0)) for _ in range(2)]
    g.output((g.call_function(torch.ops.aten.add.Tensor, tuple(reads)),))
    before = fx.GraphModule(root, g)
    after = merge_identical_subgraph_calls(copy.deepcopy(before))
    n, dead_code_only = what_changed(before, after)  # the second call gone, its getitem now a clone of the first's
    assert n > 0 and not dead_code_only
    assert [node.target for node in after.graph.nodes if node.op == "call_function"].count(hop.invoke_subgraph) == 1


def _named_through_torch_ops(gm):
    """Names the op by its full attribute chain (the planted passes name it through a module global)."""
    return [n for n in gm.graph.nodes if n.target is torch.ops.higher_order.invoke_subgraph]


def test_discovery_names_the_higher_order_ops_a_pass_names_and_its_focus_draws_them():
    """A pass whose code names cond (``hop.cond``, ``torch.ops.higher_order.invoke_subgraph``) gets them
    drawn without ``hops=``: discovery's ``Triggers.hops`` make a focus (with no catalog op found) whose
    graphs hold them, focused or not, and the focus line says so. End to end (verify with focus auto
    catches the branch swap, at graph 2 of seed 0): the sweep, as discovery probes every catalog row
    for this pass (7-11 s of CPU on the 2-core AMD EPYC, its probe graphs drawn first)."""
    from conformance._console import focus_line
    from conformance.search.static_triggers import static_triggers
    from conformance.search.triggers import Triggers

    assert static_triggers(swap_cond_branches).hops == {"cond": "code"}
    assert static_triggers(_named_through_torch_ops).hops == {"invoke_subgraph": "code"}
    assert static_triggers(lambda gm: gm).hops == {}
    found = Triggers(hops=["cond"])
    assert Triggers.from_dict(found.to_dict()).hops == ["cond"]  # the disk cache keeps them
    focus = found.focus()
    assert focus is not None and focus.hops == ("cond",) and focus.ops == ()
    assert "higher_order.cond (code" in focus_line({"mode": "auto", **found.to_dict()})
    drawn = _draw_cases(graphs(focus=focus, device="cpu"), 12, 0)
    assert sum("cond" in _hops_in(case.gm) for case in drawn) >= 3
    assert not any(_hops_in(c.gm) for c in _draw_cases(graphs(focus=focus, ir="export", device="cpu"), 4, 0))


def test_eliminate_dead_code_on_graphs_holding_subgraphs_only_removes_dead_code():
    """``Graph.eliminate_dead_code`` clears the subgraphs' dead code too (torch 2.13): that is still
    dead code removed, never a rewrite (it read as one in 8 of 100 cond graphs at seed 0). Of these 40
    graphs of seed 0, 5 have dead code in a branch (2-core AMD EPYC: 1.4 s)."""
    cleared_in_a_branch = 0
    for case in _draw_cases(graphs(hops=["cond"], device="cpu"), 40, 0):
        after = copy.deepcopy(case.gm)
        after.graph.eliminate_dead_code()
        after.recompile()
        changed, dead_code_only = what_changed(case.gm, after)
        assert not changed or dead_code_only, case.gm.code
        branches = [m for m in case.gm.children() if isinstance(m, fx.GraphModule)]
        cleared_in_a_branch += any(len(m.graph.nodes) != len(a.graph.nodes)
                                   for m, a in zip(branches, [m for m in after.children() if isinstance(m, fx.GraphModule)]))
    assert cleared_in_a_branch >= 2


def test_a_subgraph_two_calls_fetch_is_checked_once_and_named():
    """A block that writes in place, called twice: one error naming the block's node (the IR rules hold
    inside subgraphs), not one per call."""
    g = fx.Graph()
    a = g.placeholder("a")
    g.output((g.call_function(torch.ops.aten.add_.Tensor, (a, 1)),))
    root = torch.nn.Module()
    root.block = fx.GraphModule(torch.nn.Module(), g)
    outer = fx.Graph()
    x = outer.placeholder("x")
    block = outer.get_attr("block")
    calls = [outer.call_function(hop.invoke_subgraph, (block, "b", x)) for _ in range(2)]
    outer.output(tuple(outer.call_function(operator.getitem, (c, 0)) for c in calls))
    errors = ir_errors(fx.GraphModule(root, outer), "post-grad")
    assert errors == ["block.add__tensor: aten.add_.Tensor mutates inside a subgraph"], errors
