"""What a pass changed: a structural comparison of two graphs, independent of node names.

``changed_nodes(before, after)`` counts the nodes one graph has and the other lacks, where a node
is identified by what it computes: its op, its target, its literal arguments, and (recursively)
the nodes it reads. Renaming nodes, or recompiling, changes nothing; replacing ``log(exp(x))`` by
``x`` counts four (exp, log and the output removed, a new output added); reordering nodes that computes the same DAG counts the nodes that moved.
``PassResult.modified`` is not used: passes misreport it (in both directions).

>>> import torch, torch.fx as fx
>>> g = fx.Graph(); x = g.placeholder("x"); _ = g.output(g.call_function(torch.ops.aten.neg.default, (x,)))
>>> before = fx.GraphModule(torch.nn.Module(), g)
>>> changed_nodes(before, fx.GraphModule(torch.nn.Module(), g)), changed_nodes(before, fx.GraphModule(torch.nn.Module(), fx.Graph()))
(0, 3)
"""

from __future__ import annotations

import collections
import copy
import hashlib

import torch
import torch.fx as fx

from .copies import attr_or_none


def _literal(value, key) -> str:
    if isinstance(value, fx.Node):
        return f"%{key(value)}"
    if isinstance(value, (list, tuple)):
        inner = ",".join(_literal(v, key) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_literal(v, key)}" for k, v in value.items()) + "}"
    if isinstance(value, float) and value != value:
        return "nan"
    if isinstance(value, torch.Tensor):  # a tensor literal in args: by identity of its contents
        return f"tensor({value.dtype},{tuple(value.shape)},{id(value)})"
    return f"{type(value).__name__}:{value!r}"


def _target(node: fx.Node) -> str:
    t = node.target
    if isinstance(t, str):
        return t
    if isinstance(t, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return str(t)
    return f"{getattr(t, '__module__', '')}.{getattr(t, '__qualname__', repr(t))}"


def node_keys(gm, _depth: int = 0, root=None) -> list:
    """One key per node of ``gm`` (a GraphModule or a Graph), in graph order: equal keys compute the
    same thing from the same inputs. A ``get_attr`` of a subgraph (a higher-order op's branch or
    body) is keyed by the subgraph's nodes too: a pass that edits only a subgraph changed the graph.
    ``root``: the module a Graph's ``get_attr`` nodes read (default: the graph's owner)."""
    graph = gm.graph if isinstance(gm, fx.GraphModule) else gm
    root = gm if isinstance(gm, fx.GraphModule) else (root if root is not None else graph.owning_module)
    keys: dict = {}
    out = []
    position = 0
    for node in graph.nodes:
        if node.op == "placeholder":
            text = f"placeholder#{position}"
            position += 1
        else:
            args = _literal(node.args, keys.__getitem__)
            kwargs = _literal(node.kwargs, keys.__getitem__)
            text = f"{node.op}|{_target(node)}|{args}|{kwargs}"
            sub = _subgraph(root, node) if _depth < 8 else None
            if sub is not None:
                text += "|" + ",".join(node_keys(sub, _depth + 1))
        key = hashlib.blake2b(text.encode(), digest_size=10).hexdigest()
        keys[node] = key
        out.append(key)
    return out


def _subgraph(root, node: fx.Node):
    """The GraphModule a ``get_attr`` node fetches (a higher-order op's subgraph), or None."""
    if node.op != "get_attr" or root is None:
        return None
    value = attr_or_none(root, str(node.target))
    return value if isinstance(value, fx.GraphModule) else None


def _differ(a: list, b: list) -> int:
    ca, cb = collections.Counter(a), collections.Counter(b)
    differ = sum((ca - cb).values()) + sum((cb - ca).values())
    if differ:
        return differ
    return sum(x != y for x, y in zip(a, b))  # the same nodes in another order


def changed_nodes(before, after) -> int:
    """How many nodes ``after`` differs from ``before`` by (0: the same graph, up to names)."""
    return _differ(node_keys(before), node_keys(after))


def _dead_code_removed_keys(before) -> list:
    """The keys of ``before`` less its dead code (what ``Graph.eliminate_dead_code`` removes)."""
    from strategies._ir.convert import no_treespec_warning

    with no_treespec_warning():  # an export-module graph's pytree code generator
        graph = copy.deepcopy(before.graph if isinstance(before, fx.GraphModule) else before)
        if isinstance(before, fx.GraphModule) and any(n.op == "call_module" for n in graph.nodes):
            fx.GraphModule(before, graph)  # owns the copy: a call_module's purity is its module's (_guards_fn)
    graph.eliminate_dead_code()
    # keyed with before's subgraphs, as before's own keys are (a copied Graph has no owner)
    return node_keys(graph, root=before if isinstance(before, fx.GraphModule) else None)


def _less_dead_code(before_keys: list, after_keys: list, live_keys: list) -> bool:
    """``after`` is ``before`` with some of its dead nodes (those not in ``live_keys``, what
    ``eliminate_dead_code`` keeps) removed and nothing else changed: no node added, none moved."""
    before, after = collections.Counter(before_keys), collections.Counter(after_keys)
    if after - before:
        return False
    if (before - after) - (before - collections.Counter(live_keys)):
        return False  # a node removed that eliminate_dead_code keeps
    rest = iter(before_keys)
    return all(key in rest for key in after_keys)  # the order kept (a subsequence)


def _all_dead_code_removed_keys(before) -> list | None:
    """The keys of ``before`` with ``eliminate_dead_code`` run as a pass runs it on a GraphModule that
    holds subgraphs (it clears theirs too), or None where ``before`` holds none."""
    if not isinstance(before, fx.GraphModule) or not any(isinstance(m, fx.GraphModule) for m in before.children()):
        return None
    copied = copy.deepcopy(before)
    copied.graph.eliminate_dead_code()
    return node_keys(copied)


def _only_dead_code(before, before_keys: list, after_keys: list) -> bool:
    if _less_dead_code(before_keys, after_keys, _dead_code_removed_keys(before)):
        return True
    cleared = _all_dead_code_removed_keys(before)  # the subgraphs' dead code removed too, all of it
    return cleared is not None and collections.Counter(after_keys) == collections.Counter(cleared)


def only_dead_code_removed(before: fx.GraphModule, after: fx.GraphModule) -> bool:
    """``after`` is ``before`` less some or all of its dead code (or, in a graph holding subgraphs,
    less all of it, theirs included, as ``eliminate_dead_code`` clears it): a pass whose rewrite
    never matched, but which cleans up at the end (or drops an unused ``get_attr``), changes graphs
    only so."""
    return _only_dead_code(before, node_keys(before), node_keys(after))


def what_changed(before: fx.GraphModule, after) -> tuple:
    """``(nodes changed, whether that was only dead-code removal)``; a result too broken to compare
    (no graph, nodes that cannot be keyed) changed all its nodes."""
    try:
        before_keys, after_keys = node_keys(before), node_keys(after)
        n = _differ(before_keys, after_keys)
    except Exception:  # noqa: BLE001 - whatever the pass returned, it is not the graph it was given
        return max(1, len(getattr(getattr(after, "graph", None), "nodes", ()))), False
    try:
        return n, n > 0 and _only_dead_code(before, before_keys, after_keys)
    except Exception:  # noqa: BLE001 - a graph that cannot be compared changed more than its dead code
        return n, False
