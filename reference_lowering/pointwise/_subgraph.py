"""``lower_pointwise_subgraph``: one pointwise graph -> one ``PointwiseKernel`` (source and launcher),
strict like Inductor's ``PointwiseSubgraphLowering``: a node it cannot put in the kernel raises.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy
import torch
import torch.fx as fx

from .._errors import LoweringError
from ..functionalize._storage import copies_sharing_storage
from ..symbolic import replace_floor_div
from . import _runtime
from ._kernel import KernelSource, TensorInfo, generate, unsupported_reason


@dataclass(frozen=True, eq=False)
class PointwiseKernel:
    """A generated kernel: ``source`` (a Python module defining the ``@triton.jit`` function ``name``),
    and a launcher: ``kernel(*inputs)`` allocates the outputs and launches it, returning the outputs.

    ``mode`` is "compiled" or "interpreter"; ``grid`` is the launch grid (programs) as a sympy
    expression of the sizes, in ``FloorDiv`` form (``reference_lowering.symbolic.replace_floor_div``).
    """

    code: KernelSource
    fn: object
    mode: str
    device: torch.device
    constants: tuple = ()

    @property
    def name(self) -> str:
        return self.code.name

    @property
    def source(self) -> str:
        return self.code.source

    @property
    def grid(self) -> sympy.Expr:
        return grid_expr(self.code)

    def __call__(self, *inputs):
        tensors = (*inputs, *self.constants)
        if len(tensors) != self.code.n_inputs:
            raise LoweringError(f"{self.name} got {len(inputs)} inputs, but takes "
                                f"{self.code.n_inputs - len(self.constants)}")
        env = self.scalar_args(tensors)
        numel = evaluate(self.code.numel, env)
        outs = [torch.empty_strided([evaluate(s, env) for s in sizes], [evaluate(s, env) for s in strides],
                                    dtype=dtype, device=self.device) for sizes, strides, dtype in self.code.outputs]
        args = [*tensors, *outs, *(env[a.name] for a in self.code.args)] + ([numel] if self.code.dynamic else [])
        grid = (evaluate(self.grid, {**env, "xnumel": numel}), evaluate(grid_y(self.code), env))
        _runtime.launch(self.fn, grid, tuple(args), self.code)
        return tuple(outs)

    def scalar_args(self, tensors) -> dict:
        """The size and stride arguments (``ks0``, ``in0_st1``, ...) a launch on ``tensors`` (the kernel's
        inputs, constants included) passes; with ``xnumel`` for a dynamic kernel."""
        env = {a.name: (tensors[a.tensor].shape if a.kind == "size" else tensors[a.tensor].stride())[a.dim]
               for a in self.code.args}
        if self.code.dynamic:
            env["xnumel"] = evaluate(self.code.numel, env)
        return env

    def __repr__(self) -> str:
        return f"PointwiseKernel({self.name}, {self.mode}, inputs={self.code.n_inputs}, outputs={len(self.code.outputs)})"


def grid_expr(code: KernelSource) -> sympy.Expr:
    """Programs to launch along the grid's x: ``ceil(numel / XBLOCK)`` (a 2-D tile: its x extent),
    written as ``floor`` and rewritten to ``FloorDiv``."""
    numel = sympy.Symbol("xnumel", integer=True, nonnegative=True) if code.dynamic else code.numel
    if code.tile:
        numel = code.tile[0]
    return replace_floor_div(sympy.floor((numel + code.block - 1) / sympy.Integer(code.block)))


def grid_y(code: KernelSource) -> sympy.Expr:
    """Programs along the grid's y: ``ceil(y extent / YBLOCK)`` for a 2-D tile, else 1."""
    if not code.tile:
        return sympy.Integer(1)
    _, y_extent, yblock = code.tile
    return replace_floor_div(sympy.floor((y_extent + yblock - 1) / sympy.Integer(yblock)))


def evaluate(expr, env: dict) -> int:
    if isinstance(expr, int):
        return expr
    return int(expr.xreplace({s: sympy.Integer(env[s.name]) for s in expr.free_symbols}))


def make_kernel(code: KernelSource, device: torch.device, constants: tuple = ()) -> PointwiseKernel:
    fn = _runtime.compile_kernel(code.name, code.source, device)
    return PointwiseKernel(code, fn, _runtime.mode_for(device), device, constants)


def lower_pointwise_subgraph(gm: fx.GraphModule, example_inputs=None, *, dynamic: bool = False) -> PointwiseKernel:
    """One kernel computing every output of ``gm``, a graph of pointwise ops only.

    Args:
        gm: placeholders (tensors), optionally ``get_attr`` tensor constants, pointwise ATen calls with
            a row in ``TRITON``, and outputs of one shape. Not modified.
        example_inputs: tensors giving the inputs' shapes, strides, dtypes and device; ``None`` reads
            them from the placeholders' ``meta['val']``.
        dynamic: sizes and strides are kernel arguments read from the inputs at each call.

    Raises ``LoweringError`` naming the node, its target and the reason for any node that cannot be
    put in the kernel (a reduction, a mutation, a view, an op without a row); nothing is allocated
    inside the kernel, so every intermediate stays in registers.

    >>> import torch, torch.fx as fx
    >>> g = fx.Graph(); x = g.placeholder("x")
    >>> _ = g.output((g.call_function(torch.ops.aten.relu.default, (g.call_function(torch.ops.aten.neg.default, (x,)),)),))
    >>> k = lower_pointwise_subgraph(fx.GraphModule(torch.nn.Module(), g), (torch.zeros(3),))
    >>> k(torch.tensor([1.0, -2.0, 3.0]))[0].tolist()
    [0.0, 2.0, 0.0]
    """
    if not isinstance(gm, fx.GraphModule):
        raise LoweringError(f"gm is a {type(gm).__name__}, but should be a torch.fx.GraphModule")
    info = node_info(gm, example_inputs)
    nodes, inputs, constants = [], [], []
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            inputs.append(node)
        elif node.op == "get_attr":
            value = _attr(gm, node.target)
            if not isinstance(value, torch.Tensor):
                raise LoweringError(f"node %{node.name} (get_attr {node.target}) is not a tensor constant")
            inputs.append(node)
            constants.append(value)
        elif node.op == "call_function":
            reason = unsupported_reason(node)
            if reason is None and not isinstance(info.get(node), TensorInfo):
                reason = "it does not produce one tensor"
            if reason:
                raise LoweringError(f"node %{node.name} (target {node.target}) cannot be lowered into a pointwise "
                                    f"kernel: {reason}")
            nodes.append(node)
        elif node.op != "output":
            raise LoweringError(f"node %{node.name} (op {node.op}, target {node.target}) cannot be lowered into a "
                                f"pointwise kernel: only placeholders, get_attr constants and call_function nodes")
    output = next(n for n in gm.graph.nodes if n.op == "output")
    outs = torch.utils._pytree.tree_leaves(output.args[0])
    if not outs or not all(isinstance(o, fx.Node) and isinstance(info.get(o), TensorInfo) for o in outs):
        raise LoweringError(f"outputs={output.args[0]!r}, but should be one or more tensor nodes")
    devices = {info[n].device for n in [*inputs, *nodes]}
    if len(devices) > 1:
        raise LoweringError(f"tensors on devices {sorted(map(str, devices))}, but a kernel runs on one")
    code = generate(nodes, inputs, list(dict.fromkeys(outs)), info, dynamic=dynamic,
                    interpreter=devices.pop().type == "cpu" if devices else True)
    device = info[outs[0]].device
    kernel = make_kernel(code, device, tuple(constants))
    if len(set(outs)) != len(outs):  # the same node returned twice: one store, the buffer returned twice
        return _Repeated(kernel, [list(dict.fromkeys(outs)).index(o) for o in outs])
    return kernel


class _Repeated:
    """A kernel whose graph returns one node more than once."""

    def __init__(self, kernel: PointwiseKernel, picks: list):
        self.kernel, self.picks = kernel, picks

    def __getattr__(self, name):
        return getattr(self.kernel, name)

    def __call__(self, *inputs):
        outs = self.kernel(*inputs)
        return tuple(outs[i] for i in self.picks)


def _attr(gm, target: str):
    obj = gm
    for part in target.split("."):
        if not hasattr(obj, part):
            raise LoweringError(f"get_attr {target}: the module has no attribute {part!r}")
        obj = getattr(obj, part)
    return obj


def node_info(gm: fx.GraphModule, example_inputs) -> dict:
    """TensorInfo of every node that produces one tensor: from a run on copies of ``example_inputs``,
    or from ``meta['val']`` when there are none."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if example_inputs is None:
        info = {}
        for node in gm.graph.nodes:
            val = node.meta.get("val")
            if isinstance(val, torch.Tensor):
                if any(not isinstance(s, int) for s in (*val.shape, *val.stride())):
                    raise LoweringError(f"node %{node.name} has symbolic sizes in meta['val']: pass example_inputs "
                                        f"(and dynamic=True for a kernel that takes sizes as arguments)")
                info[node] = TensorInfo.of(val)
            elif node.op == "placeholder":
                raise LoweringError(f"placeholder {node.name} has no meta['val']: pass example_inputs")
        return info
    example_inputs = tuple(example_inputs)
    if len(example_inputs) != len(placeholders):
        raise LoweringError(f"example_inputs has {len(example_inputs)} values, but the graph has "
                            f"{len(placeholders)} placeholders")
    return run_for_info(gm, example_inputs)


def run_for_info(gm: fx.GraphModule, example_inputs: tuple, at_use: dict | None = None) -> dict:
    """TensorInfo of each tensor-valued node when it is made; with ``at_use``, also of each tensor
    operand when a node reads it (``at_use[(operand, reader)]``): a metadata mutation (``t_``,
    ``squeeze_``, ...) in between changes what the reader sees."""
    info = {}

    class Recorder(fx.Interpreter):
        def run_node(self, n):
            if at_use is not None:
                for a in n.all_input_nodes:
                    value = self.env.get(a)
                    if isinstance(value, torch.Tensor):
                        at_use[(a, n)] = TensorInfo.of(value)
            out = super().run_node(n)
            if isinstance(out, torch.Tensor):
                info[n] = TensorInfo.of(out)
            return out

    grad = torch.is_grad_enabled()
    try:
        with torch.no_grad():
            # copies with the same layout and storage sharing, so eager picks the same output layouts
            Recorder(gm).run(*copies_sharing_storage(example_inputs))
    except Exception as exc:
        raise LoweringError(f"the graph does not run on example_inputs: {type(exc).__name__}: "
                            f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
    finally:
        torch._C._set_grad_enabled(grad)
    return info
