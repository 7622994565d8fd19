"""De-functionalization over mylib's ops, as vLLM's ``FixFunctionalizationPass`` ends its pipeline.

In a post-grad graph each out-variant call is an ``auto_functionalized_v2`` node: the op, its
arguments by name, ``_all_bases`` the buffers it writes, and a ``getitem`` per buffer's new value.
The pass turns such a node back into the in-place call where the buffers are the call's own (a
fresh ``empty``, or a ``clone`` made for it): the op writes them, and readers of their new values
read the buffers. A clone is dropped too, the op writing its source in place, where that is safe:
the source is an op's own result (no view, no input), and everything else that reads it comes
before the call and is no view of it.

``fix_functionalization_ignoring_later_reads`` drops the clone whoever reads the source after the
call, a later node or the graph's caller (the source an input): they then see the op's write
instead of the value they read in the original, the slip a de-functionalization makes when it
forgets that the functional graph let two values live in one buffer's place.
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx

import mylib_rules  # noqa: F401 - registers torch.ops.mylib and how fx-conformance draws its calls

AF = torch.ops.higher_order.auto_functionalized_v2
aten = torch.ops.aten


def _whole_bases(af: fx.Node) -> dict | None:
    """``{argument name: base index}`` where every written argument is its base itself (no view of
    it: v2 then records its size, stride or slice beside the index), else None."""
    written = {k[1:-len("_base_index")]: v for k, v in af.kwargs.items() if k.endswith("_base_index")}
    described = {f"_{name}_base_index" for name in written} | {"_all_bases"}
    if any(k.startswith("_") and k not in described for k in af.kwargs) or None in written.values():
        return None
    return written


def _own_buffer(node: fx.Node) -> bool:
    """A buffer made for the call: a fresh ``empty`` or a ``clone``."""
    return node.op == "call_function" and node.target in (aten.empty.memory_format, aten.clone.default) \
        and len(node.users) == 1


def _makes_a_view(node: fx.Node) -> bool:
    if node.op != "call_function":
        return True
    if node.target is operator.getitem:
        return _makes_a_view(node.args[0]) if isinstance(node.args[0], fx.Node) else True
    schema = getattr(node.target, "_schema", None)
    return schema is None or any(r.alias_info is not None for r in schema.returns)


class FixFunctionalizationPass:
    """``auto_functionalized_v2`` over mylib's ops back to in-place calls (a ``VllmInductorPass``-style
    callable: ``FixFunctionalizationPass()(graph)``)."""

    mind_later_reads = True

    def __call__(self, graph: fx.Graph) -> None:
        order = {n: i for i, n in enumerate(graph.nodes)}  # positions; an in-place call takes its node's
        for af in list(graph.nodes):
            if af.op != "call_function" or af.target is not AF or not str(af.args[0]).startswith("mylib."):
                continue
            written, bases = _whole_bases(af), af.kwargs["_all_bases"]
            if written is None or not all(map(_own_buffer, bases)) or len(set(bases)) != len(bases):
                continue
            buffers = []
            for base in bases:  # two clones of one source: the op writes the source through one of them only
                source = self._source_to_write(base, af, order)
                buffers.append(source if source is not None and source not in buffers else base)
            arguments = {k: v for k, v in af.kwargs.items() if not k.startswith("_")}
            arguments.update({name: buffers[i] for name, i in written.items()})
            with graph.inserting_before(af):
                call = graph.call_function(af.args[0], (), arguments)
            call.meta["val"] = None  # an out-variant op returns nothing
            order[call] = order[af]
            for item in list(af.users):  # [0]: the op's result (None); [1 + i]: base i's new value
                if item.args[1] >= 1:
                    item.replace_all_uses_with(buffers[item.args[1] - 1])
                graph.erase_node(item)
            graph.erase_node(af)
            for base, buffer in zip(bases, buffers):
                if base is not buffer:
                    graph.erase_node(base)

    def _source_to_write(self, base: fx.Node, af: fx.Node, order: dict) -> fx.Node | None:
        """The clone's source, where the op may write it in place of the clone."""
        if base.target is not aten.clone.default or base.kwargs:
            return None
        source = base.args[0]
        if not isinstance(source, fx.Node):
            return None
        if not self.mind_later_reads:  # any buffer of its own: an input too, which the caller reads later
            return source if source.op == "placeholder" or not _makes_a_view(source) else None
        others = [u for u in source.users if u is not base]
        if _makes_a_view(source) or any(order[u] > order[af] or _makes_a_view(u) for u in others):
            return None
        return source


class _IgnoringLaterReads(FixFunctionalizationPass):
    mind_later_reads = False


fix_functionalization = FixFunctionalizationPass()
fix_functionalization_ignoring_later_reads = _IgnoringLaterReads()
