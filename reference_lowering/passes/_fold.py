"""``constant_fold``: subgraphs that depend only on constants are evaluated once, into new buffers."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.fx as fx

from .._errors import LoweringError
from ._analysis import analyze, attr_of, finish, is_pure
from ._meta import copy_meta


def constant_fold(gm: fx.GraphModule, sample_inputs: Sequence[torch.Tensor]) -> fx.GraphModule:
    """Evaluate every maximal constant-only computation and read its result from a new buffer.

    A node is constant-only when it is a pure op (no writes, no random numbers) whose tensor
    arguments are all constant-only or ``get_attr`` constants. Never folded: anything reading a
    constant the graph writes (its value depends on when it is read), anything whose result is
    written later (the write would land in the buffer and persist across calls), and anything an
    output shares storage with (the caller would get the module's own buffer). Views of constants
    are left as views; the computations reading them are folded. Folded attributes no longer
    read by the graph are deleted.
    """
    info = analyze(gm)
    written = info.written
    constant = set()
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            ok = isinstance(attr_of(gm, node.target), torch.Tensor)
        else:
            ok = is_pure(node) and all(a in constant for a in node.all_input_nodes)
        if ok and info.cls[node] not in written and info.cls[node] not in info.escaping:
            constant.add(node)
    targets = [n for n in gm.graph.nodes  # graph order: buffer names must not depend on set order
               if n in constant and n.op == "call_function" and info.cls[n] not in info.external
               and any(u not in constant for u in n.users)]
    if not targets:
        return finish(gm)
    values = _evaluate(gm, constant, targets)
    for node in targets:
        value = values[node]
        if not isinstance(value, torch.Tensor):
            continue
        name = _fresh_name(gm)
        gm.register_buffer(name, value)
        with gm.graph.inserting_before(node):
            attr = gm.graph.get_attr(name)
        copy_meta(node, attr)
        node.replace_all_uses_with(attr, delete_user_cb=lambda user: user not in constant)
    _erase_dead(gm, constant)
    return finish(gm)


def _evaluate(gm: fx.GraphModule, constant: set, targets: list) -> dict:
    """Run the constant-only nodes the targets depend on, in graph order, on the real constants."""
    needed, stack = set(), list(targets)
    while stack:
        node = stack.pop()
        if node not in needed:
            needed.add(node)
            stack.extend(node.all_input_nodes)
    env = {}
    with torch.no_grad():
        for node in gm.graph.nodes:
            if node not in needed:
                continue
            if node.op == "get_attr":
                env[node] = attr_of(gm, node.target)
                continue
            args, kwargs = fx.node.map_arg((node.args, node.kwargs), env.__getitem__)
            try:
                env[node] = node.target(*args, **kwargs)
            except Exception as exc:
                raise LoweringError(f"constant_fold: evaluating %{node.name} ({node.target}) on the module's "
                                    f"constants raised {type(exc).__name__}: {exc}; the graph cannot run as "
                                    f"given") from exc
    return env


def _fresh_name(gm: fx.GraphModule) -> str:
    i = 0
    while hasattr(gm, f"_folded_constant_{i}"):
        i += 1
    return f"_folded_constant_{i}"


def _erase_dead(gm: fx.GraphModule, constant: set) -> None:
    """Erase constant-only nodes left without users, and attributes nothing reads any more."""
    before = {n.target for n in gm.graph.nodes if n.op == "get_attr"}
    for node in reversed(list(gm.graph.nodes)):
        if node in constant and not node.users:
            gm.graph.erase_node(node)
    after = {n.target for n in gm.graph.nodes if n.op == "get_attr"}
    for target in before - after:
        owner_path, _, leaf = target.rpartition(".")
        owner = gm.get_submodule(owner_path) if owner_path else gm
        if isinstance(getattr(owner, leaf, None), torch.Tensor):
            delattr(owner, leaf)
