"""Pointwise-to-Triton lowering: pointwise regions of an ATen graph become fused Triton kernels, and
the graph is rewritten to launch them, so the result is again an FX graph any harness can run.

- ``lower_pointwise(gm, example_inputs, dynamic=False)``: the whole graph; every maximal region of
  pointwise ops over one iteration space is one kernel, other nodes stay ATen calls.
- ``host_only(gm)``: a lowered graph's kernels launched directly (bound once at lowering, not through
  the wrapper op's dispatch: ``bound_launches(gm)``) stubbed out, so a call costs the host's share.
- ``lower_pointwise_subgraph(gm)``: strict, one graph -> one ``PointwiseKernel`` (source text and a
  launcher); a node that cannot be in the kernel raises ``LoweringError`` naming it.
- ``TRITON``: the op table (ATen overload -> Triton expression), one commented row per op.
- ``compile_for_target(kernel, "sm_90" | "sm_80" | "gfx942")``: a kernel lowered for a GPU-path
  device (``meta`` works without a GPU) compiled by Triton with no driver, and its ``StaticFigures``
  (registers, spills, stack, shared memory, instructions, global access widths per pointer); also
  after CPU lowerings in the same process (not where the user set ``TRITON_INTERPRET=1``).

Each kernel's mode follows its device: CPU tensors run under the Triton interpreter, a GPU's are
compiled, side by side in one process (nothing sets ``TRITON_INTERPRET``); f16/bf16 are computed
in fp32 and rounded after every op, as eager rounds.

>>> import torch, torch.fx as fx
>>> aten = torch.ops.aten
>>> g = fx.Graph(); x = g.placeholder("x")
>>> y = g.call_function(aten.mul.Tensor, (g.call_function(aten.sigmoid.default, (x,)), x))
>>> _ = g.output((g.call_function(aten.sum.default, (y,)),))
>>> lowered = lower_pointwise(fx.GraphModule(torch.nn.Module(), g), (torch.randn(8),))
>>> [n.target.__name__ for n in lowered.graph.nodes if n.op == "call_function"]
['empty_strided.default', 'triton_kernel_wrapper_mutation', 'sum.default']
>>> x = torch.randn(8); torch.allclose(lowered(x)[0], (x.sigmoid() * x).sum())
True
"""

from ._fast import bound_launches, host_only
from ._kernel import TensorInfo, unsupported_reason
from ._lower import lower_pointwise
from ._subgraph import PointwiseKernel, lower_pointwise_subgraph
from ._table import TRITON, Row
from ._targets import TARGETS, StaticFigures, compile_for_target

__all__ = ["TARGETS", "TRITON", "PointwiseKernel", "Row", "StaticFigures", "TensorInfo", "bound_launches",
           "compile_for_target", "host_only", "lower_pointwise", "lower_pointwise_subgraph", "unsupported_reason"]
