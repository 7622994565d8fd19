"""``meta['val']`` for nodes a pass creates, so the graph stays as described as it was given."""

from __future__ import annotations

import torch.fx as fx
from torch._guards import detect_fake_mode


def infer_val(node: fx.Node, vals: dict | None = None) -> None:
    """Set ``node.meta['val']`` by running its op on its arguments' fake values.

    Left unset when an argument has no ``meta['val']`` (the graph carried no metadata to keep) or
    the op cannot run on fake tensors; a missing ``val`` is honest, a wrong one is not. ``vals``
    overrides an argument's ``val`` (e.g. with its ``final_val``).
    """
    vals = {a: a.meta.get("val") for a in node.all_input_nodes} | (vals or {})
    if not vals or any(v is None for v in vals.values()):
        return
    fake_mode = detect_fake_mode(list(vals.values()))
    if fake_mode is None:
        return
    fargs, fkwargs = fx.node.map_arg((node.args, node.kwargs), vals.__getitem__)
    try:
        with fake_mode:
            node.meta["val"] = node.target(*fargs, **fkwargs)
    except Exception:  # noqa: BLE001 - an op fake tensors cannot run keeps no val, see above
        node.meta.pop("val", None)


def final_val(node: fx.Node):
    """``meta['val']`` of ``node``'s tensor as the graph leaves it: an in-place op returns its own
    ``self``, so the last in-place op applied to this very tensor describes it after, for example,
    an ``unsqueeze_`` (the node's own ``val`` describes it before)."""
    same = {node}
    val = node.meta.get("val")
    for user in node.graph.nodes:
        schema = getattr(user.target, "_schema", None)
        if (user.op == "call_function" and schema is not None and user.args and user.args[0] in same
                and schema.arguments and schema.arguments[0].alias_info is not None
                and schema.arguments[0].alias_info.is_write and "val" in user.meta):
            same.add(user)
            val = user.meta["val"]
    return val


def copy_meta(src: fx.Node, dst: fx.Node) -> None:
    """``dst`` computes exactly what ``src`` did: it takes over ``src``'s metadata."""
    for key, value in src.meta.items():
        dst.meta.setdefault(key, value)
