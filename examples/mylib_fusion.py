"""A vLLM-style fusion pass over post-grad graphs: ``rms_norm`` feeding ``static_scaled_fp8_quant``
becomes one ``rms_norm_static_fp8_quant`` (examples/mylib_ops.py).

In a post-grad graph each out-variant call is an ``auto_functionalized_v2`` node (the op, its
arguments by name, ``_all_bases`` the buffers it writes) and a ``getitem`` of it is each written
buffer's new value. The pass matches the norm's written result read by the quant (and by nothing
else), and replaces the pair by one node writing the quant's buffer; callable as vLLM calls its
passes, ``RMSNormQuantFusionPass()(graph)``, or as an Inductor ``CustomGraphPass``
(``fuse_as_custom_graph_pass``).

``fuse_ignoring_epsilon`` is the same pass with a planted bug (the fused op gets the default
epsilon, not the norm's), the kind of slip a fusion makes when it rebuilds a call.
``fuse_add_rms_norm_quant`` fuses ``fused_add_rms_norm`` (which writes its input and its residual)
with the quant; its twin ``fuse_dropping_the_residual_write`` hands the residual's later readers the
old residual, so the fused op's write is lost.
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx
from torch._inductor.custom_graph_pass import CustomGraphPass, get_hash_for_files

import mylib_rules  # noqa: F401 - registers torch.ops.mylib and how fx-conformance draws its calls

mylib = torch.ops.mylib
AF = torch.ops.higher_order.auto_functionalized_v2
DEFAULT_EPSILON = 1e-6


def _af(node, op) -> bool:
    return node.op == "call_function" and node.target is AF and node.args and node.args[0] is op


def _written(af_node: fx.Node) -> fx.Node | None:
    """The getitem of the first written buffer's new value (``af[1]``), or None."""
    return next((u for u in af_node.users if u.target is operator.getitem and u.args[1] == 1), None)


def _quants_of(graph: fx.Graph, norm_op):
    """``(quant, norm)`` pairs: a static quant whose input is the first write of a ``norm_op`` call,
    which nothing else reads, and whose other arguments are none of the norm's writes (its new
    residual as the scale, say: fusing would leave the fused node reading its own output)."""
    for quant in list(graph.nodes):
        if not _af(quant, mylib.static_scaled_fp8_quant.default):
            continue
        normed = quant.kwargs.get("input")
        if normed is None or normed.target is not operator.getitem or normed.args[1] != 1:
            continue
        norm = normed.args[0]
        if not _af(norm, norm_op) or len(normed.users) != 1 or any(
                isinstance(v, fx.Node) and v.target is operator.getitem and v.args[0] is norm
                for k, v in quant.kwargs.items() if k != "input"):
            continue
        yield quant, norm


class RMSNormQuantFusionPass:
    """``rms_norm`` -> ``static_scaled_fp8_quant`` fused (a ``VllmInductorPass``-style callable)."""

    keep_epsilon = True

    def __call__(self, graph: fx.Graph) -> None:
        for quant, norm in _quants_of(graph, mylib.rms_norm.default):
            epsilon = norm.kwargs["epsilon"] if self.keep_epsilon else DEFAULT_EPSILON
            with graph.inserting_before(quant):
                fused = graph.call_function(AF, (mylib.rms_norm_static_fp8_quant.default,), {
                    "input": norm.kwargs["input"], "weight": norm.kwargs["weight"], "scale": quant.kwargs["scale"],
                    "epsilon": epsilon, "_result_base_index": quant.kwargs["_result_base_index"],
                    "_all_bases": quant.kwargs["_all_bases"]})
                fused.meta = dict(quant.meta)
            for use in list(quant.users):
                use.args = (fused, *use.args[1:])
            graph.erase_node(quant)
            for use in list(norm.users):
                graph.erase_node(use)
            graph.erase_node(norm)


def _item(node: fx.Node, i: int) -> fx.Node | None:
    return next((u for u in node.users if u.target is operator.getitem and u.args[1] == i), None)


class FusedAddRMSNormQuantFusionPass:
    """``fused_add_rms_norm`` (writing its input and its residual) feeding the quant becomes one
    ``fused_add_rms_norm_static_fp8_quant`` writing the quant's buffer and the residual. The norm's
    new input (``[1]``) must be read by the quant alone; readers of the new residual (``[2]``) read
    the fused node's."""

    rewire_residual = True

    def __call__(self, graph: fx.Graph) -> None:
        for quant, norm in _quants_of(graph, mylib.fused_add_rms_norm.default):
            bases = norm.kwargs["_all_bases"]
            if set(norm.kwargs) - {"weight", "epsilon", "_input_base_index", "_residual_base_index", "_all_bases"}:
                continue  # a written argument that is a view of its base: not this pattern
            x, r = bases[norm.kwargs["_input_base_index"]], bases[norm.kwargs["_residual_base_index"]]
            if x is r:
                continue
            new_residual = _item(norm, 1 + norm.kwargs["_residual_base_index"])
            with graph.inserting_before(quant):
                fused = graph.call_function(AF, (mylib.fused_add_rms_norm_static_fp8_quant.default,), {
                    "input": x, "weight": norm.kwargs["weight"], "scale": quant.kwargs["scale"],
                    "epsilon": norm.kwargs["epsilon"], "_result_base_index": 0, "_residual_base_index": 1,
                    "_all_bases": [quant.kwargs["_all_bases"][quant.kwargs["_result_base_index"]], r]})
                result = graph.call_function(operator.getitem, (fused, 1))
                residual = graph.call_function(operator.getitem, (fused, 2))
            for use in list(quant.users):
                use.replace_all_uses_with(result)
                graph.erase_node(use)
            graph.erase_node(quant)
            if new_residual is not None:
                new_residual.replace_all_uses_with(residual if self.rewire_residual else r)
            for use in list(norm.users):
                graph.erase_node(use)
            graph.erase_node(norm)
            if not residual.users:
                graph.erase_node(residual)


class _DroppingTheResidualWrite(FusedAddRMSNormQuantFusionPass):
    rewire_residual = False  # readers of the new residual get the old one: the write is lost


class _IgnoringEpsilon(RMSNormQuantFusionPass):
    keep_epsilon = False


class RMSNormQuantCustomGraphPass(CustomGraphPass, RMSNormQuantFusionPass):
    """The same fusion as Inductor runs a user's pass (``post_grad_custom_post_pass``): a
    ``CustomGraphPass``, whose ``uuid()`` keys Inductor's FX graph cache."""

    def __call__(self, graph: fx.Graph) -> None:
        RMSNormQuantFusionPass.__call__(self, graph)

    def uuid(self):
        return get_hash_for_files((__file__,))


fuse_rms_norm_quant = RMSNormQuantFusionPass()
fuse_ignoring_epsilon = _IgnoringEpsilon()
fuse_as_custom_graph_pass = RMSNormQuantCustomGraphPass()
fuse_add_rms_norm_quant = FusedAddRMSNormQuantFusionPass()
fuse_dropping_the_residual_write = _DroppingTheResidualWrite()
