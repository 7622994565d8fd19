"""A lowered graph's call without the higher-order op's dispatch: its kernels bound once, launched directly.

The lowered GraphModule keeps its ``triton_kernel_wrapper_mutation`` nodes (kernels visible as nodes,
as Inductor's FX wrapper emits them), but calling the op costs its generic eager dispatch on every
launch: its arguments flattened as a pytree, its dispatch keys walked, the kernel and the launch
options looked up in torch's side table (77% of a one-kernel graph's host time on an H100 machine,
issue 36). ``bind_launches`` makes, once per lowering, a shadow of the graph in which each wrapper
node is a call of a ``Launch``: the node's kernel, launch options and grid resolved already (a
static grid: the kernel's ``fn[grid]`` itself), its tensors and sizes passed by keyword as the
node has them; each output's allocation of constant sizes (``empty_strided``) an ``Alloc`` bound
to ``torch.empty_strided``. Calling the lowered graph runs the shadow's code.

The shadow's code is the module's ``forward``, set where ``recompile()`` sets the graph's own (each
GraphModule has a class of its own): a pass that edits the graph and recompiles replaces it, and a
copy (``copy.deepcopy``) is made from the graph, so it calls through the op. It serves a
call only where it means what the graph means: no ``TorchDispatchMode`` is active (a mode sees the
higher-order op, as the graph's own code gives it) and every argument is a plain ``torch.Tensor``
(fake and functional tensors go through the op's own implementations); other calls run the graph's
own code. ``host_only(gm)`` stubs the launches themselves out: what a call then costs is the host's
share, ours (``benchmarks/test_host.py`` holds it to a budget).
"""

from __future__ import annotations

import contextlib

import torch
import torch.fx as fx


class Launch:
    """One wrapper node, bound: ``launch(**kwargs)`` (a static grid) or ``launch(grid, **kwargs)``."""

    __slots__ = ("fn", "options", "grid", "run", "__name__")

    def __init__(self, fn, options: dict, grid):
        self.fn, self.options, self.grid = fn, dict(options), grid
        self.__name__ = f"launch_{getattr(fn, '__name__', 'kernel')}"  # how the shadow's code names it
        # a static grid with no zero dim: Triton's own launch callable, bound once; else None (sized per call)
        self.run = fn[grid] if grid is not None and all(g > 0 for g in grid) else None

    def __call__(self, *grid, **kwargs):
        if self.grid is None:  # a grid computed from the graph's sizes (dynamic=True)
            if all(g > 0 for g in grid[0]):
                self.fn[tuple(grid[0])](**kwargs, **self.options)
        elif self.run is not None:
            self.run(**kwargs, **self.options)

    def __repr__(self) -> str:
        return f"<launch {getattr(self.fn, '__name__', self.fn)} grid={self.grid}>"


class Alloc:
    """An ``empty_strided`` node of constant sizes, strides, dtype and device, bound: ``torch.empty_strided``
    itself (through the ``aten.empty_strided.default`` overload a call costs about ten times more:
    9 us against 0.8 us on the 2-core AMD EPYC)."""

    __slots__ = ("size", "stride", "dtype", "device", "__name__")

    def __init__(self, size, stride, dtype, device):
        self.size, self.stride, self.dtype, self.device = tuple(size), tuple(stride), dtype, device
        self.__name__ = "alloc"

    def __call__(self):
        return torch.empty_strided(self.size, self.stride, dtype=self.dtype, device=self.device)


def _alloc_of(node: fx.Node):
    """The node's ``Alloc`` where it is an ``empty_strided`` of constants only, else None."""
    if node.op != "call_function" or node.target is not torch.ops.aten.empty_strided.default:
        return None
    size, stride = node.args
    if set(node.kwargs) - {"dtype", "device"} or not all(isinstance(s, int) for s in (*size, *stride)):
        return None
    return Alloc(size, stride, node.kwargs.get("dtype"), node.kwargs.get("device"))


def _is_wrapper(node: fx.Node) -> bool:
    return node.op == "call_function" and getattr(node.target, "__name__", None) == "triton_kernel_wrapper_mutation"


def _launch_of(node: fx.Node) -> tuple:
    """The node's ``Launch`` and the grid argument it is called with (() for a static grid)."""
    from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table

    kw = node.kwargs
    fn = kernel_side_table.get_kernel(kw["kernel_idx"])
    options = kernel_side_table.get_constant_args(kw["constant_args_idx"])
    (grid,) = kw["grid"]  # the lowering emits one grid (no autotuning configs)
    static = all(isinstance(g, int) for g in grid)
    return Launch(fn, options, tuple(grid) if static else None), (() if static else (tuple(grid),))


def bind_launches(gm: fx.GraphModule) -> fx.GraphModule:
    """Give ``gm`` (a lowered graph, changed in place, returned) the direct launch path of the module
    docstring. A graph without wrapper nodes is left as it is."""
    if not any(_is_wrapper(n) for n in gm.graph.nodes):
        return gm
    graph = fx.Graph()
    env: dict = {}
    for node in gm.graph.nodes:
        if _is_wrapper(node):
            launch, grid = _launch_of(node)
            args = fx.node.map_arg(grid, lambda a: env[a])
            kwargs = fx.node.map_arg(dict(node.kwargs["kwargs"]), lambda a: env[a])
            env[node] = graph.create_node("call_function", launch, args, kwargs, name=node.name)
        elif (alloc := _alloc_of(node)) is not None:
            env[node] = graph.create_node("call_function", alloc, (), {}, name=node.name)
            env[node].meta = dict(node.meta)
        else:
            env[node] = graph.node_copy(node, lambda a: env[a])
    shadow = fx.GraphModule(gm, graph).forward
    own = type(gm).forward

    def forward(self, *args):
        if not torch._C._len_torch_dispatch_stack() and all(type(a) is torch.Tensor for a in args):
            return shadow(*args)
        return own(self, *args)

    forward.launches = tuple(n.target for n in graph.nodes if isinstance(n.target, Launch))
    forward.allocs = tuple(n.target for n in graph.nodes if isinstance(n.target, Alloc))
    type(gm).forward = forward
    return gm


def bound_launches(gm: fx.GraphModule) -> tuple:
    """The ``Launch``es a call of ``gm`` makes directly (empty where it goes through the op)."""
    return getattr(type(gm).forward, "launches", ())


@contextlib.contextmanager
def host_only(gm: fx.GraphModule):
    """Within it, ``gm``'s direct launches do nothing: a call costs what the host spends around them
    (allocating outputs, the graph's code, binding the arguments), ours, and no kernel runs (the
    outputs hold whatever their allocation held)."""
    launches = bound_launches(gm)
    if not launches:
        raise ValueError("host_only: this graph has no bound launches (lower it with lower_pointwise, and "
                         "leave it unedited)")
    saved = [(launch, launch.run, launch.fn) for launch in launches]
    stub = _Stub()
    try:
        for launch in launches:
            launch.run, launch.fn = (stub if launch.run is not None else None), stub
        yield
    finally:
        for launch, run, fn in saved:
            launch.run, launch.fn = run, fn


class _Stub:
    """A launch that does nothing: called, or indexed by a grid then called."""

    def __call__(self, *args, **kwargs):
        return None

    def __getitem__(self, grid):
        return self
