"""Torch-TensorRT-style lowering passes, as its ``post_lowering`` calls them: ``fn(gm, settings)``
on ``ExportedProgram.module()`` graphs (``ir="export-module"``), returning the graph.

Each buggy pass models a bug the tool found in Torch-TensorRT's own passes (issue 33); its correct
twin does the same job without the bug, and fires on the same graphs (a twin that never changes a
graph would pass vacuously):

- ``strip_every_clone`` drops every ``clone`` (as ``fold_get_attr_item_calls`` did): ``clone(x)``
  then written, or returned, becomes ``x`` itself. ``strip_redundant_clones`` drops only a clone of
  a fresh tensor nothing else reads.
- ``erase_userless_nodes`` erases every node without users (as ``remove_num_users_is_0_nodes``
  did), write-back ``copy_`` nodes with them. ``erase_userless_pure_nodes`` keeps impure ones.
- ``clone_inputs_dropping_writes`` puts a clone after each input and reads the clone everywhere,
  the write-backs too (as ``repair_input_aliasing`` did): an input's update lands in the clone.
  ``clone_inputs_keeping_writes`` has only computations read the clone (writes, views and outputs
  keep the caller's tensor), of dense inputs only (a clone of a strided one is dense).
"""

from __future__ import annotations

import dataclasses

import torch
import torch.fx as fx

aten = torch.ops.aten


@dataclasses.dataclass
class Settings:
    """A stand-in for Torch-TensorRT's ``CompilationSettings`` (the passes read nothing from it)."""

    debug: bool = False


def make_settings() -> Settings:
    return Settings()


def _done(gm: fx.GraphModule) -> fx.GraphModule:
    gm.graph.lint()
    gm.recompile()
    return gm


def _is_clone(node: fx.Node) -> bool:
    return node.op == "call_function" and node.target is aten.clone.default


def strip_every_clone(gm: fx.GraphModule, settings: Settings) -> fx.GraphModule:
    for node in list(gm.graph.nodes):
        if _is_clone(node):
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)
    return _done(gm)


def strip_redundant_clones(gm: fx.GraphModule, settings: Settings) -> fx.GraphModule:
    for node in list(gm.graph.nodes):
        if not _is_clone(node) or node.kwargs.get("memory_format", torch.preserve_format) != torch.preserve_format:
            continue
        source = node.args[0]
        fresh = source.op == "call_function" and isinstance(source.target, torch._ops.OpOverload) \
            and not source.target.is_view and not source.target._schema.is_mutable
        if fresh and len(source.users) == 1:  # a copy of a new tensor only the clone reads: the same tensor
            node.replace_all_uses_with(source)
            gm.graph.erase_node(node)
    return _done(gm)


def erase_userless_nodes(gm: fx.GraphModule, settings: Settings) -> fx.GraphModule:
    for node in reversed(list(gm.graph.nodes)):
        if node.op not in ("placeholder", "output") and not node.users:
            gm.graph.erase_node(node)
    return _done(gm)


def erase_userless_pure_nodes(gm: fx.GraphModule, settings: Settings) -> fx.GraphModule:
    for node in reversed(list(gm.graph.nodes)):
        if node.op not in ("placeholder", "output") and not node.users and not node.is_impure():
            gm.graph.erase_node(node)
    return _done(gm)


def _clone_inputs(gm: fx.GraphModule, keep_writes: bool) -> fx.GraphModule:
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node in placeholders:
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor) or (keep_writes and not val.is_contiguous()):
            continue  # a clone of a strided input is dense: what reads it would see other strides
        with gm.graph.inserting_after(placeholders[-1]):
            clone = gm.graph.call_function(aten.clone.default, (node,))
        clone.meta["val"] = aten.clone.default(val)  # fake

        def replaced(user: fx.Node, clone=clone) -> bool:
            if user is clone:
                return False
            if keep_writes:  # only computations read the copy: writes, views and outputs keep the caller's tensor
                op = user.target
                return user.op == "call_function" and isinstance(op, torch._ops.OpOverload) and not op.is_view \
                    and not op._schema.is_mutable
            return True

        node.replace_all_uses_with(clone, delete_user_cb=replaced)
    return _done(gm)


def clone_inputs_dropping_writes(gm: fx.GraphModule, settings: Settings) -> fx.GraphModule:
    return _clone_inputs(gm, keep_writes=False)


def clone_inputs_keeping_writes(gm: fx.GraphModule, settings: Settings) -> fx.GraphModule:
    return _clone_inputs(gm, keep_writes=True)


BUGGY = {"strip_every_clone": strip_every_clone, "erase_userless_nodes": erase_userless_nodes,
         "clone_inputs_dropping_writes": clone_inputs_dropping_writes}
TWINS = {"strip_every_clone": strip_redundant_clones, "erase_userless_nodes": erase_userless_pure_nodes,
         "clone_inputs_dropping_writes": clone_inputs_keeping_writes}
