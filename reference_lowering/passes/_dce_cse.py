"""``eliminate_dead_code`` and ``common_subexpression_elimination``, both aware of in-place writes.

torch's ``Graph.eliminate_dead_code`` keeps every mutating op and its CSE passes either ban them or
ignore them; these two reason about storage instead (``_analysis.analyze``): a write matters when
someone can read what it wrote, and two equal expressions are equal only if nothing wrote to what
they read in between.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import torch
import torch.fx as fx

from ._analysis import analyze, finish, has_tag, is_pure, output_node, reshaped_classes, returns_alias, schema_of
from ._infra import value_key

aten = torch.ops.aten

# Explicit copies are never merged: a copy exists to be a distinct buffer (merging two makes them
# share storage, e.g. two outputs, or repair_input_as_output's clone and one already there).
_COPIES = frozenset({aten.clone.default, aten._to_copy.default})

def eliminate_dead_code(gm: fx.GraphModule, sample_inputs: Sequence[torch.Tensor]) -> fx.GraphModule:
    """Remove nodes whose results nobody uses and whose writes nobody can observe.

    Kept: outputs and what they use; every op with an effect this pass does not model (random
    ops, asserts, grad-mode switches, anything not an ATen op); an in-place write to an input, a
    constant or a view of one (the caller sees it), or to storage a kept node reads later or an
    output shares. Unused ``get_attr`` nodes go; the module's attributes stay.
    """
    info = analyze(gm)
    output = output_node(gm.graph)
    observed = set(info.external) | info.escaping  # storage read after this point (or by the caller)
    live = {output}
    for node in reversed(list(gm.graph.nodes)):
        if node.op in ("placeholder", "output"):
            live.add(node)
            continue
        keep = (any(u in live for u in node.users) or not _removable(node)
                or bool(info.writes.get(node, set()) & observed))
        if keep:
            live.add(node)
            observed |= info.classes_of((node.args, node.kwargs))
        else:
            gm.graph.erase_node(node)
    return finish(gm)

def common_subexpression_elimination(gm: fx.GraphModule, sample_inputs: Sequence[torch.Tensor]) -> fx.GraphModule:
    """Compute each pure expression once: a later node equal to an earlier one (same op, same
    arguments, literals compared by type and bits: ``value_key``) is replaced by it.

    Never merged: random ops; explicit copies (``clone``, ``_to_copy``: each is a distinct buffer);
    anything across a write to the storage of any of its arguments (the key includes a per-storage
    write count); a result that is written later (merging would share the write); views whose
    storage has its metadata mutated; anything across a grad-mode switch or an op this pass does
    not model; two results that outputs of the graph share (a view of each, or each itself):
    merged, the outputs would share one storage, and a caller writing into one sees the other
    change (torch's ``fx_graph_cse`` keeps them apart for that reason).
    """
    info = analyze(gm)
    reshaped = reshaped_classes(gm, info)
    writes = defaultdict(int)
    epoch = 0
    seen = {}
    position, alive = {n: i for i, n in enumerate(gm.graph.nodes)}, []
    for node in list(gm.graph.nodes):
        if node.op != "call_function":
            continue
        if (is_pure(node) and node.target not in _COPIES and info.cls[node] not in info.written
                and not (returns_alias(node) and info.cls[node] in reshaped)):
            arg_classes = sorted(info.classes_of((node.args, node.kwargs)), key=str)
            key = (node.target, value_key((node.args, node.kwargs), position, alive),
                   tuple((str(c), writes[c]) for c in arg_classes), epoch)
            kept = seen.get(key)
            if kept is not None and not _would_join_outputs(info, kept, node):
                node.replace_all_uses_with(kept)
                gm.graph.erase_node(node)
            elif kept is None:
                seen[key] = node
            continue
        if node in info.writes:
            for c in info.writes[node]:
                writes[c] += 1
        if not _removable(node):
            epoch += 1  # an effect not modelled (e.g. torch._C._set_grad_enabled): a barrier
    return finish(gm)

def _would_join_outputs(info, kept: fx.Node, node: fx.Node) -> bool:
    """Whether merging ``node`` into ``kept`` makes two outputs that had storages of their own share one."""
    a, b = info.cls[kept], info.cls[node]
    return a != b and a in info.escaping and b in info.escaping


def _removable(node: fx.Node) -> bool:
    """Nodes whose only effects are a result and (for ATen in-place ops) modelled writes."""
    if node.op == "get_attr" or is_pure(node):
        return True
    return (schema_of(node) is not None and node.target._schema.is_mutable
            and not has_tag(node, torch.Tag.nondeterministic_seeded))
