"""Passes over drawn higher-order ops (``graphs(hops=...)``): two planted bugs and a correct twin.

- ``swap_cond_branches``: swaps each ``cond``'s branches without negating its predicate;
- ``merge_subgraph_calls_by_identifier``: merges the ``invoke_subgraph`` calls of one block whatever
  operands they get (a CSE keyed by the block alone);
- ``merge_identical_subgraph_calls``: the correct twin, merging calls of one block on the same operands
  (each result of the removed call read as a clone: two outputs never one tensor).
"""

import torch

hop = torch.ops.higher_order


def swap_cond_branches(gm):
    """Planted: swaps each cond's branches without negating its predicate."""
    for n in gm.graph.nodes:
        if n.target is hop.cond:
            pred, t, f, ops = n.args
            n.args = (pred, f, t, ops)
    gm.recompile()
    return gm


def merge_subgraph_calls_by_identifier(gm):
    """Planted: merges invoke_subgraph calls of one block, whatever operands they get."""
    return _merge_block_calls(gm, lambda n: n.args[1])


def merge_identical_subgraph_calls(gm):
    """Correct twin: merges invoke_subgraph calls of one block on the same operands."""
    return _merge_block_calls(gm, lambda n: (n.args[1], *n.args[2:]))


def _merge_block_calls(gm, key):
    """Each invoke_subgraph call whose ``key`` an earlier call has is replaced by that call, each result
    of it read as a clone of the kept call's (merged without, two outputs, or views of them, would be
    one tensor: a caller writing into one sees the other change)."""
    seen = {}
    for n in list(gm.graph.nodes):
        if n.target is hop.invoke_subgraph:
            first = seen.setdefault(key(n), n)
            if first is not n:
                items = list(n.users)
                n.replace_all_uses_with(first)
                gm.graph.erase_node(n)
                for item in items:
                    with gm.graph.inserting_after(item):
                        copy = gm.graph.call_function(torch.ops.aten.clone.default, (item,))
                    item.replace_all_uses_with(copy, delete_user_cb=lambda user: user is not copy)
    gm.graph.lint()
    gm.recompile()
    return gm
