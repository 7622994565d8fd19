"""Functionalization of ATen FX graphs (pre-dispatch style): mutations and views rewritten so the
graph computes the same thing with functional ops, input mutations written back at the end.

>>> import torch, torch.fx as fx
>>> aten = torch.ops.aten
>>> g = fx.Graph(); x = g.placeholder("x")
>>> v = g.call_function(aten.select.int, (x, 0, 0))
>>> _ = g.call_function(aten.mul_.Tensor, (v, 2))
>>> _ = g.output((g.call_function(aten.sum.default, (x,)),))
>>> gm = functionalize(fx.GraphModule(torch.nn.Module(), g), (torch.ones(2, 3),))
>>> x = torch.ones(2, 3); gm(x)[0].item(), x[0].tolist()
(9.0, [2.0, 2.0, 2.0])
>>> sorted({str(n.target) for n in gm.graph.nodes if n.op == "call_function"})[:3]
['aten.as_strided.default', 'aten.as_strided_scatter.default', 'aten.copy_.default']
"""

from __future__ import annotations

import torch
import torch.fx as fx

from .._errors import LoweringError
from ._core import FunctionalizationSignature, Walk, functional_variant
from ._liars import SCHEMA_LIARS, Liar
from ._regions import outline_grad_regions
from ._storage import copies_sharing_storage, zeros_like_layout

INPUT_MUTATIONS = ("copy_", "outputs")


def functionalize(gm: fx.GraphModule, example_inputs=None, *, input_mutations: str = "copy_") -> fx.GraphModule:
    """A functional GraphModule computing what ``gm`` computes, specialised to the inputs' layouts.

    Args:
        gm: an ATen-level graph (e.g. from ``make_fx(fn, pre_dispatch=True)``): in-place ops, views,
            metadata mutations, ``_set_grad_enabled`` regions. Not modified.
        example_inputs: tensors with the layouts (sizes, strides, offsets, storage sharing) the
            result will be called with; ``None`` takes them from the placeholders' ``meta['val']``.
        input_mutations: ``"copy_"`` writes mutated inputs and constants back with an epilogue of
            ``as_strided_``/``copy_`` on the placeholders; ``"outputs"`` returns their new values as
            extra outputs instead (export style), listed in the signature.

    Returns:
        A new GraphModule sharing ``gm``'s parameters and buffers (its epilogue writes buffers as
        ``gm`` does); ``result.meta["functionalization"]`` is its ``FunctionalizationSignature``.
        Grad-mode regions are ``wrap_with_set_grad_enabled`` nodes, which restore the caller's mode.
        Raises ``LoweringError`` naming the node it cannot functionalize.
    """
    if input_mutations not in INPUT_MUTATIONS:
        raise LoweringError(f"input_mutations={input_mutations!r}, but should be one of {', '.join(INPUT_MUTATIONS)}")
    if not isinstance(gm, fx.GraphModule):
        raise LoweringError(f"gm is a {type(gm).__name__}, but should be a torch.fx.GraphModule")
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if example_inputs is None:
        missing = [n.name for n in placeholders if not isinstance(n.meta.get("val"), torch.Tensor)]
        if missing:
            raise LoweringError(f"placeholder {missing[0]} has no meta['val']: pass example_inputs")
        inputs = zeros_like_layout([n.meta["val"] for n in placeholders])
    else:
        inputs = copies_sharing_storage(tuple(example_inputs))
    if len(inputs) != len(placeholders):
        raise LoweringError(f"example_inputs has {len(inputs)} values, but the graph has {len(placeholders)} inputs")
    grad = torch.is_grad_enabled()
    try:
        with torch.random.fork_rng(devices=[]):  # the eager runs draw random numbers: not the caller's
            walk = Walk(gm, inputs, input_mutations)
            graph = walk.run()
    finally:
        torch._C._set_grad_enabled(grad)
    result = fx.GraphModule(gm, graph, class_name="FunctionalGraphModule")
    outline_grad_regions(result)
    result.meta["functionalization"] = walk.signature
    result.meta["declared_output_aliases"] = dict(walk.signature.output_aliases)
    return result


__all__ = ["FunctionalizationSignature", "INPUT_MUTATIONS", "Liar", "SCHEMA_LIARS", "functional_variant",
           "functionalize"]
