"""Passes over pre-dispatch's regions (``graphs(ir="pre-dispatch", hops=[...])``): each region op
inlined, wrongly (its mode dropped) and rightly (its mode kept as the nodes make_fx traces).

- ``inline_autocast_regions``: planted; each ``wrap_with_autocast``'s body inlined, so it runs at
  full precision;
- ``inline_grad_regions``: planted; each ``wrap_with_set_grad_enabled``'s body inlined, so it
  records autograd history where it should not;
- ``unwrap_autocast_regions``: correct; the body inlined between ``_enter_autocast`` and
  ``_exit_autocast`` nodes (the form make_fx's pre-dispatch trace has before export outlines it);
- ``unwrap_grad_regions``: correct; the body inlined between ``_set_grad_enabled`` nodes that switch
  to the region's mode and back (as make_fx traces a ``no_grad`` block: back to grad enabled);
- ``unwrap_autocast_regions_left_open``: planted; as the correct one, without the ``_exit_autocast``
  node: autocast stays on after the graph returns.
"""

import operator

import torch
import torch.fx as fx

hop = torch.ops.higher_order
enter_autocast, exit_autocast = torch.amp.autocast_mode._enter_autocast, torch.amp.autocast_mode._exit_autocast


def inline_autocast_regions(gm):
    """Planted: each autocast region's body inlined without autocast."""
    return _inline(gm, hop.wrap_with_autocast, lambda g, mode_args: None, lambda g, opened: None)


def inline_grad_regions(gm):
    """Planted: each grad region's body inlined without switching grad mode."""
    return _inline(gm, hop.wrap_with_set_grad_enabled, lambda g, mode_args: None, lambda g, opened: None)


def unwrap_autocast_regions(gm):
    """Correct: each autocast region's body between the enter and exit nodes of its autocast."""
    return _inline(gm, hop.wrap_with_autocast, lambda g, mode_args: g.call_function(enter_autocast, mode_args),
                   lambda g, opened: g.call_function(exit_autocast, (opened,)))


def unwrap_autocast_regions_left_open(gm):
    """Planted: as ``unwrap_autocast_regions``, without the exit node."""
    return _inline(gm, hop.wrap_with_autocast, lambda g, mode_args: g.call_function(enter_autocast, mode_args),
                   lambda g, opened: None)


def unwrap_grad_regions(gm):
    """Correct: each grad region's body between ``_set_grad_enabled`` nodes to its mode and back."""
    return _inline(gm, hop.wrap_with_set_grad_enabled,
                   lambda g, mode_args: g.call_function(torch._C._set_grad_enabled, mode_args),
                   lambda g, opened: g.call_function(torch._C._set_grad_enabled, (not opened.args[0],)))


def _inline(gm, target, open_region, close_region):
    """Each ``target`` node replaced by its body's nodes, after ``open_region(graph, mode_args)`` and
    before ``close_region(graph, what open_region made)``; its getitems read the body's results."""
    for n in list(gm.graph.nodes):
        if n.target is not target:
            continue
        at = next(i for i, a in enumerate(n.args) if isinstance(a, fx.Node) and a.op == "get_attr")
        mode_args, body, operands = n.args[:at], getattr(gm, n.args[at].target), n.args[at + 1:]
        with gm.graph.inserting_before(n):
            opened = open_region(gm.graph, mode_args)
            env = dict(zip([p for p in body.graph.nodes if p.op == "placeholder"], operands))
            results = None
            for inner in body.graph.nodes:
                if inner.op == "output":
                    results = fx.node.map_arg(inner.args[0], lambda a: env[a])
                elif inner.op != "placeholder":
                    env[inner] = gm.graph.node_copy(inner, lambda a: env[a])
            close_region(gm.graph, opened)
        for user in list(n.users):
            assert user.target is operator.getitem
            user.replace_all_uses_with(results[user.args[1]])
            gm.graph.erase_node(user)
        fetch = n.args[at]
        gm.graph.erase_node(n)
        if not fetch.users:
            gm.graph.erase_node(fetch)
    gm.delete_all_unused_submodules()
    gm.graph.lint()
    gm.recompile()
    return gm
