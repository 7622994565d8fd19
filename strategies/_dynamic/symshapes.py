"""``SymbolicShapes``: which input sizes of a graph are symbols, and the graph traced over them.

A dynamic graph (``graphs(dynamic=True)``, or one a user hands ``check(symbolic=...)``) is plain
data plus this description: per input, each dimension is a symbol name (``"s0"``) or a static int
(a size-1 dim broadcasting needs). From it come

- ``propagate``: the graph's ``meta['val']`` re-derived over those symbols in a fresh ``ShapeEnv``
  (torch's own fake propagation, ``FakeTensorProp``), with the guards that propagation records,
  as sympy over the names given here, not the hash-like names torch picks (``s75``);
- ``inputs_at``: the example inputs at other sizes, their values the example's repeated (so every
  value stays in the domains the draw kept it in), same dtypes, stride order and static dims.

>>> import torch
>>> shapes = SymbolicShapes(dims=(("s0", 1), ("s0", "s1")))
>>> shapes.symbols
('s0', 's1')
>>> [tuple(t.shape) for t in shapes.inputs_at((torch.ones(3, 1), torch.ones(3, 4)), {"s0": 5, "s1": 2})]
[(5, 1), (5, 2)]
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy
import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import FakeTensorMode

from .._errors import InvalidArgument
from .._build.eager import quiet_fake_log


INT64_MAX = 2**63 - 1  # the largest size a tensor can have


def size_symbol(name: str) -> sympy.Symbol:
    """The sympy symbol a size named ``name`` stands for (a non-negative integer)."""
    return sympy.Symbol(name, integer=True, nonnegative=True)


@dataclass(frozen=True)
class SymbolicShapes:
    """Per input, its dims: a symbol name (str) or a static size (int).

    Dims that share a name share a size at every size assignment; the example inputs hold one
    assignment (``example_sizes``).
    """

    dims: tuple

    def __post_init__(self):
        dims = self.dims
        if not isinstance(dims, (tuple, list)) or not all(isinstance(d, (tuple, list)) for d in dims):
            raise InvalidArgument(f"dims={dims!r}, but should be one tuple of dims per input, e.g. (('s0', 1),)")
        for i, shape in enumerate(dims):
            for d in shape:
                ok = (isinstance(d, str) and d.isidentifier()) or (type(d) is int and d >= 0)
                if not ok:
                    raise InvalidArgument(f"dims[{i}]={tuple(shape)!r}: {d!r} is neither a symbol name (an "
                                          f"identifier such as 's0') nor a static size (an int >= 0)")
        object.__setattr__(self, "dims", tuple(tuple(shape) for shape in dims))

    @property
    def symbols(self) -> tuple:
        """The symbol names, in order of first appearance."""
        return tuple(dict.fromkeys(d for shape in self.dims for d in shape if isinstance(d, str)))

    def example_sizes(self, inputs) -> dict:
        """The size of each symbol in ``inputs``; InvalidArgument where they do not fit ``dims``."""
        self._check_count(inputs)
        sizes = {}
        for i, (shape, t) in enumerate(zip(self.dims, inputs)):
            if not isinstance(t, torch.Tensor) or t.dim() != len(shape):
                got = f"{type(t).__name__}" if not isinstance(t, torch.Tensor) else f"rank {t.dim()}"
                raise InvalidArgument(f"input[{i}] is a {got}, but dims[{i}]={shape!r} needs a tensor of rank "
                                      f"{len(shape)}")
            for j, (d, n) in enumerate(zip(shape, t.shape)):
                if isinstance(d, int):
                    if d != n:
                        raise InvalidArgument(f"input[{i}] size[{j}]={n}, but dims[{i}] makes it static {d}")
                elif sizes.setdefault(d, n) != n:
                    raise InvalidArgument(f"input[{i}] size[{j}]={n}, but {d}={sizes[d]} in an earlier dim")
        return sizes

    def shape_at(self, i: int, sizes: dict) -> tuple:
        """Input ``i``'s shape when the symbols take ``sizes``."""
        return tuple(sizes[d] if isinstance(d, str) else d for d in self.dims[i])

    def inputs_at(self, inputs, sizes: dict) -> tuple:
        """``inputs`` at ``sizes``: same dtypes, devices and stride order, the example's values repeated."""
        self.example_sizes(inputs)
        missing = [s for s in self.symbols if s not in sizes]
        if missing:
            raise InvalidArgument(f"sizes={sizes!r} has no value for {', '.join(missing)}")
        return tuple(_resized(t, self.shape_at(i, sizes)) for i, t in enumerate(inputs))

    def propagate(self, gm: fx.GraphModule, inputs) -> "SymbolicRun":
        """A copy of ``gm`` whose ``meta['val']`` torch's fake propagation derives over fresh symbols
        (one new ``ShapeEnv``), and the guards it records. Raises what propagation raises."""
        from torch._dispatch.python import enable_python_dispatcher
        from torch.fx.passes.fake_tensor_prop import FakeTensorProp

        run = self.fake_inputs(inputs)
        copy = fx.GraphModule(gm, _graph_copy(gm.graph), class_name=type(gm).__name__)
        # The Python dispatcher, as make_fx runs it: without it ops whose C++ fake kernels read
        # sizes as ints (constant_pad_nd) specialise the symbols they touch.
        with enable_python_dispatcher(), quiet_fake_log():  # what raises is the caller's to report
            FakeTensorProp(copy, run.fake_mode).propagate_dont_convert_inputs(*run.fakes)
        run.gm = copy
        return run

    def fake_inputs(self, inputs) -> "SymbolicRun":
        """Fake tensors for ``inputs`` with a symbol per name, in a fresh ``FakeTensorMode``."""
        from torch._dynamo.source import ConstantSource
        from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

        examples = self.example_sizes(inputs)
        env = ShapeEnv(duck_shape=False)
        mode = FakeTensorMode(shape_env=env, allow_non_fake_inputs=True)  # a graph's real constants
        ints, created = {}, {}
        for name in self.symbols:
            source = ConstantSource(name)
            sym = env.create_symbol(examples[name], source, dynamic_dim=DimDynamic.DYNAMIC)
            created[sym] = size_symbol(name)
            ints[name] = env.create_symintnode(sym, hint=examples[name], source=source)
        fakes = []
        for i, t in enumerate(inputs):
            sizes = [ints[d] if isinstance(d, str) else d for d in self.dims[i]]
            order = sorted(range(t.dim()), key=lambda d: (t.stride(d), -d))  # innermost first
            strides, running = [0] * t.dim(), 1
            for d in order:
                strides[d] = running
                running = running * sizes[d]
            with mode:
                fake = torch.empty_strided(sizes, strides, dtype=t.dtype, device=t.device,
                                           requires_grad=t.requires_grad)
            fakes.append(fake)
        return SymbolicRun(None, tuple(fakes), mode, env, created, examples)

    def _check_count(self, inputs) -> None:
        if len(inputs) != len(self.dims):
            raise InvalidArgument(f"dims describes {len(self.dims)} inputs, but the graph takes {len(inputs)}")

    def __repr__(self) -> str:
        return f"SymbolicShapes(dims={self.dims!r})"


class SymbolicRun:
    """What ``propagate`` made: ``gm`` (a copy, its ``meta['val']`` symbolic), the fake inputs, the
    mode and ``ShapeEnv`` they belong to, and torch's symbols -> ours."""

    def __init__(self, gm, fakes, fake_mode, shape_env, created, examples):
        self.gm, self.fakes, self.fake_mode, self.shape_env = gm, fakes, fake_mode, shape_env
        self.created, self.examples = created, examples

    def ours(self, expr, replace: bool = True):
        """A sympy expression (or SymInt, or int) over torch's symbols, in our names, simplified by
        what the ShapeEnv has learnt (its replacements: a specialised symbol becomes its value)."""
        if isinstance(expr, torch.SymInt):
            expr = expr.node.expr
        if isinstance(expr, int):
            return sympy.Integer(expr)
        return (self.shape_env.replace(expr) if replace else expr).xreplace(self.created)

    def guards(self) -> list:
        """The guards recorded so far, over our names (in recording order), as recorded: a guard
        that specialised a symbol (``Eq(s0, 4)``) stays what it says, not ``True``."""
        return [self.ours(g.expr, replace=False) for g in self.shape_env.guards]

    def ranges(self) -> list:
        """The ranges torch's ShapeEnv keeps for our symbols, as relations (``s0 >= 2``: a symbol it
        did not specialise, as its 0/1 specialisation assumes while tracing; narrowed by guards). A
        size is an int64: where torch keeps no upper bound (``int_oo``), ``s0 <= 2**63 - 1`` (without
        it ``sym_min(s0, INT64_MAX)`` is not ``s0``, and a correct fold of it was refuted)."""
        out = []
        for sym, ours in self.created.items():
            vr = self.shape_env.var_to_range.get(sym)
            if vr is None:
                continue
            if getattr(vr.lower, "is_Integer", False):
                out.append(sympy.Ge(ours, int(vr.lower)))
            upper = int(vr.upper) if getattr(vr.upper, "is_Integer", False) else INT64_MAX
            out.append(sympy.Le(ours, min(upper, INT64_MAX)))
        return out

    def value(self, node: fx.Node):
        """``node``'s symbolic value: a tuple of size expressions (a tensor), an expression (a SymInt),
        a list of those (several results), or None."""
        return symbolic_value(node.meta.get("val"), self.ours)


def symbolic_value(val, ours):
    if isinstance(val, torch.Tensor):
        return tuple(ours(s) for s in val.shape)
    if isinstance(val, (torch.SymInt, int)) and not isinstance(val, bool):
        return ours(val)
    if isinstance(val, (tuple, list)):
        return tuple(symbolic_value(v, ours) for v in val)
    return None


def _graph_copy(graph: fx.Graph) -> fx.Graph:
    new = fx.Graph(tracer_cls=graph._tracer_cls)
    out = new.graph_copy(graph, {})
    new.output(out)
    for src, dst in zip(graph.nodes, new.nodes):  # meta is re-derived; keep what else passes read
        dst.meta = {k: v for k, v in src.meta.items() if k not in ("val", "tensor_meta")}
    return new


def _resized(t: torch.Tensor, shape: tuple) -> torch.Tensor:
    """``t`` at ``shape``: its stride order, its values repeated (cyclically, in memory order)."""
    order = sorted(range(t.dim()), key=lambda d: (t.stride(d), -d))
    strides, running = [0] * t.dim(), 1
    for d in order:
        strides[d] = running
        running *= shape[d]
    flat = t.detach().permute(*reversed(order)).flatten() if t.dim() else t.detach().reshape(1)
    if flat.numel() == 0:
        flat = torch.zeros(1, dtype=t.dtype, device=t.device)
    values = flat[torch.arange(running, device=t.device) % flat.numel()] if running else flat[:0]
    out = torch.empty_strided(shape, strides, dtype=t.dtype, device=t.device)
    out.permute(*reversed(order)).reshape(-1).copy_(values) if running else None
    if t.requires_grad:
        out.requires_grad_()
    return out


def graph_symbolic_shapes(gm: fx.GraphModule) -> SymbolicShapes:
    """The ``SymbolicShapes`` of a graph traced symbolically (``make_fx(tracing_mode="symbolic")``,
    export): its placeholders' ``meta['val']`` sizes, torch's symbols renamed s0, s1, ... in order."""
    names, dims = {}, []
    for node in gm.graph.find_nodes(op="placeholder"):
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise InvalidArgument(f"placeholder {node.name} has meta['val']={type(val).__name__}, but should be a "
                                  f"(fake) tensor with symbolic sizes")
        shape = []
        for s in val.shape:
            expr = s.node.expr if isinstance(s, torch.SymInt) else sympy.Integer(s)
            if isinstance(s, torch.SymInt):
                expr = s.node.shape_env.replace(expr)
            if expr.is_Integer:
                shape.append(int(expr))
            elif isinstance(expr, sympy.Symbol):
                shape.append(names.setdefault(expr, f"s{len(names)}"))
            else:
                raise InvalidArgument(f"placeholder {node.name} has size {expr}, but input sizes should be symbols "
                                      f"or ints")
        dims.append(tuple(shape))
    return SymbolicShapes(dims=tuple(dims))


__all__ = ["SymbolicRun", "SymbolicShapes", "graph_symbolic_shapes", "size_symbol", "symbolic_value"]
