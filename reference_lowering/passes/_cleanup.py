"""Small lowering passes that remove or rename nodes without changing what the graph computes or
what aliases what: ``repair_input_as_output``, ``remove_detach``, ``remove_noop_ops``,
``view_to_reshape``. Each is ``(gm, sample_inputs) -> gm``, edits ``gm`` in place and returns it
linted and recompiled (the Torch-TensorRT lowering-pass contract).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.fx as fx

from ._analysis import StorageInfo, UnionFind, analyze, finish, output_node, reshaped_classes
from ._meta import copy_meta, final_val, infer_val

aten = torch.ops.aten

# Views that are no-ops when the result has the input's exact metadata (shape, strides, storage
# offset, dtype): then the result IS the input, seen through a second tensor object. One row per
# op; the comment says when torch produces such a view.
NOOP_VIEWS = {
    aten.alias.default: "always",
    aten.view.default: "to the same shape",
    aten.reshape.default: "to the same shape (reshape returns a view then)",
    aten.expand.default: "to the same shape",
    aten.permute.default: "by the identity permutation",
    aten.transpose.int: "of a dim with itself",
    aten.slice.Tensor: "covering the whole dim with step 1",
    aten.squeeze.dim: "of a dim whose size is not 1",
    aten.flatten.using_ints: "of one dim, or of dims already of size 1",
    aten.as_strided.default: "with the input's own size, stride and offset",
}

# Copies that are no-ops when the result has the input's exact metadata; removing one makes two
# tensors one, so it is done only where nothing can tell (see _removable_copy).
NOOP_COPIES = {
    aten.clone.default: "of a dense tensor (memory_format preserved)",
    aten._to_copy.default: "to the input's own dtype, device and layout",
}

DETACH_OPS = (aten.detach.default, aten.detach_.default)  # detach_ changes autograd state only


def repair_input_as_output(gm: fx.GraphModule, sample_inputs: Sequence[torch.Tensor]) -> fx.GraphModule:
    """No placeholder is a direct graph output: each one returned gets one ``aten.clone`` (shared by
    every output position that returned it, so outputs alias each other as before)."""
    output = output_node(gm.graph)
    clones = {}
    for ph in [n for n in output.all_input_nodes if n.op == "placeholder"]:
        with gm.graph.inserting_before(output):
            clone = gm.graph.call_function(aten.clone.default, (ph,))
        infer_val(clone, {ph: final_val(ph)})
        clones[ph] = clone
    if clones:
        output.args = fx.node.map_arg(output.args, lambda n: clones.get(n, n))
    return finish(gm)


def remove_detach(gm: fx.GraphModule, sample_inputs: Sequence[torch.Tensor]) -> fx.GraphModule:
    """``aten.detach`` / ``detach_`` nodes are replaced by their input (an inference graph has no
    autograd to cut), unless a metadata-mutating op could then reach a tensor it did not before."""
    info = analyze(gm)
    reshaped = reshaped_classes(gm, info)
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target in DETACH_OPS and isinstance(node.args[0], fx.Node):
            if info.cls[node] not in reshaped:
                _replace(node, node.args[0])
    return finish(gm)


def remove_noop_ops(gm: fx.GraphModule, sample_inputs: Sequence[torch.Tensor]) -> fx.GraphModule:
    """Remove views and copies that produce their input unchanged (``NOOP_VIEWS``, ``NOOP_COPIES``).

    Decided from ``meta['val']`` (nodes without it are kept). A view is removed unless a
    metadata-mutating op (``transpose_``, ...) touches its storage; a copy only where the two
    tensors are indistinguishable: an intermediate (not an input or constant), never written
    afterwards through either name, and not both reaching the outputs (that would make two
    outputs alias). So what aliases what never changes.
    """
    info = analyze(gm)
    reshaped = reshaped_classes(gm, info)
    merged = UnionFind()  # classes made one by removed copies
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or not node.args or not isinstance(node.args[0], fx.Node):
            continue
        src = node.args[0]
        if not _same_metadata(src, node):
            continue
        if node.target in NOOP_VIEWS and info.cls[node] not in reshaped:
            _replace(node, src)
        elif node.target in NOOP_COPIES and _removable_copy(info, merged, src, node):
            merged.union(info.cls[src], info.cls[node])
            _replace(node, src)
    return finish(gm)


def view_to_reshape(gm: fx.GraphModule, sample_inputs: Sequence[torch.Tensor]) -> fx.GraphModule:
    """``aten.view`` becomes ``aten.reshape`` (same arguments). Where a view is legal, reshape
    returns that same view, so values, strides and aliasing are unchanged; backends that only
    know reshape (TensorRT) can take the graph."""
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target is aten.view.default:
            with gm.graph.inserting_before(node):
                new = gm.graph.call_function(aten.reshape.default, node.args, node.kwargs)
            copy_meta(node, new)
            _replace(node, new)
    return finish(gm)


def _replace(node: fx.Node, by: fx.Node) -> None:
    node.replace_all_uses_with(by)
    node.graph.erase_node(node)


def _removable_copy(info: StorageInfo, merged: UnionFind, src: fx.Node, copy: fx.Node) -> bool:
    a, b = info.cls[src], info.cls[copy]
    roots = lambda classes: {merged.find(c) for c in classes}  # noqa: E731
    if merged.find(a) in roots(info.external) or roots({a, b}) & roots(info.written):
        return False
    escaping = roots(info.escaping)
    return not (merged.find(a) in escaping and merged.find(b) in escaping)


def _same_metadata(src: fx.Node, node: fx.Node) -> bool:
    a, b = src.meta.get("val"), node.meta.get("val")
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        return False
    try:
        return bool(a.dtype == b.dtype and a.device == b.device and a.layout == b.layout
                    and all(isinstance(v, int) for v in (*a.shape, *a.stride(), *b.shape, *b.stride()))
                    and tuple(a.shape) == tuple(b.shape) and a.stride() == b.stride()
                    and int(a.storage_offset()) == int(b.storage_offset()))
    except Exception:  # noqa: BLE001 - symbolic metadata we cannot compare: not a no-op we can prove
        return False
