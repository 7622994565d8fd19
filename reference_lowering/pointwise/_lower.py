"""``lower_pointwise``: every maximal pointwise region of a graph becomes one kernel, and the graph is
rewritten to allocate the region's outputs and launch the kernel (the FX wrapper codegen seed).

Regions: a pointwise node joins the regions of its pointwise operands, and of the other readers of
its operands, of the same shape (its iteration space) when the graph of kernels and nodes stays
acyclic (no path leaves the merged region and comes back, through single nodes or other regions),
and never across a node with side effects (a write, a grad-mode switch, an unknown call), which keeps every
read on the same side of every write. The rewritten graph is ordered by a topological sort of
regions and single nodes, in the original order where dependencies allow.

The wrapper node is torch's ``triton_kernel_wrapper_mutation`` with its kernel side table, what
Inductor's FX wrapper emits; its eager implementation launches ``kernel[grid](**kwargs)``, which the
Triton interpreter also serves, so one wrapper works on CPU and GPU (no custom op is needed).
"""

from __future__ import annotations

import heapq
import operator

import sympy
import torch
import torch.fx as fx
from torch.fx.experimental.symbolic_shapes import is_concrete_int

from .._errors import LoweringError
from ._kernel import TensorInfo, generate, unsupported_reason
from ._fast import bind_launches
from ._runtime import side_table_indices
from ._subgraph import grid_expr, grid_y, make_kernel, run_for_info
from ._types import TL

aten = torch.ops.aten


def lower_pointwise(gm: fx.GraphModule, example_inputs, *, dynamic: bool = False) -> fx.GraphModule:
    """A new GraphModule in which every maximal region of pointwise ops over one iteration space is one
    Triton kernel launch; other nodes (reductions, views, writes, ops without a row) stay ATen calls.

    Args:
        gm: an ATen-level graph; not modified.
        example_inputs: tensors with the sizes, strides, dtypes and devices the result is called with.
        dynamic: kernels take sizes and strides as arguments, which the graph reads from its inputs
            (``sym_size``/``sym_stride``), so one lowered graph serves every size (size-1 dims and the
            inputs' stride order stay as in the examples). Otherwise kernels are specialised.

    Returns:
        The lowered GraphModule; ``result.meta["pointwise_kernels"]`` lists its ``PointwiseKernel``s.
        CPU inputs run the kernels under the Triton interpreter. Calling it launches each kernel
        directly, bound once here (``_fast.py``), not through the wrapper op's dispatch.
    """
    if not isinstance(gm, fx.GraphModule):
        raise LoweringError(f"gm is a {type(gm).__name__}, but should be a torch.fx.GraphModule")
    if example_inputs is None:
        raise LoweringError("example_inputs=None, but lower_pointwise needs the inputs' layouts: pass tensors")
    example_inputs = tuple(example_inputs)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(example_inputs) != len(placeholders):
        raise LoweringError(f"example_inputs has {len(example_inputs)} values, but the graph has "
                            f"{len(placeholders)} placeholders")
    at_use: dict = {}
    info = run_for_info(gm, example_inputs, at_use)
    regions = _regions(gm, info, at_use, dynamic)
    return bind_launches(_Rewriter(gm, info, at_use, regions, dynamic).run())


# --- regions ------------------------------------------------------------------------------------


def _lowerable(node: fx.Node, info: dict, at_use: dict, dynamic: bool = False) -> bool:
    if unsupported_reason(node) is not None or not isinstance(info.get(node), TensorInfo):
        return False
    # A dtype no Triton type holds (complex) stays an ATen call: the lowering falls back, as Inductor
    # does, rather than refuse the graph
    if any(isinstance(info.get(a), TensorInfo) and info[a].dtype not in TL for a in (node, *node.all_input_nodes)):
        return False
    # A dynamic kernel takes each symbolic dim's size as an argument, but a dim of size 1 is static (a
    # broadcast). A dim whose size is a symbol that is 1 in the example (s // 2 at s = 2) would be
    # baked as 1: the op stays an ATen call, right at every size.
    if dynamic and any(_symbolic_one(a, info) for a in (node, *node.all_input_nodes)):
        return False
    # A size computed at run time (a SymInt node: ``x * x.size(0)`` in a dynamic graph) is no kernel
    # operand here: kernels take tensors, and their scalars as constants; the op stays an ATen call.
    if any(not isinstance(info.get(a), TensorInfo) for a in node.all_input_nodes):
        return False
    return all(at_use[(a, node)].device == info[node].device for a in node.all_input_nodes if (a, node) in at_use)


def _symbolic_one(node: fx.Node, info: dict) -> bool:
    """Whether a dim of ``node`` is 1 in the example but symbolic in its ``meta['val']``."""
    val, t = node.meta.get("val"), info.get(node)
    if not isinstance(val, torch.Tensor) or not isinstance(t, TensorInfo) or val.dim() != len(t.shape):
        return False
    return any(n == 1 and not is_concrete_int(s) for n, s in zip(t.shape, val.shape))


def _side_effect(node: fx.Node) -> bool:
    if node.op in ("placeholder", "get_attr", "output"):
        return False
    if node.op == "call_function" and node.target is operator.getitem:
        return False
    if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
        return node.target._schema.is_mutable
    return True


def _regions(gm: fx.GraphModule, info: dict, at_use: dict, dynamic: bool = False) -> list:
    """Lists of nodes, one per kernel, each in graph order."""
    nodes = list(gm.graph.nodes)
    pos = {n: i for i, n in enumerate(nodes)}
    region_of, members, segment, segment_of = {}, {}, 0, {}
    for node in nodes:
        if _side_effect(node):
            segment += 1
        segment_of[node] = segment
        if not _lowerable(node, info, at_use, dynamic):
            continue
        # producers (vertical fusion) and other readers of the same operands (horizontal: one load)
        near = [*node.all_input_nodes, *(u for a in node.all_input_nodes for u in a.users if u in region_of)]
        candidates = sorted({region_of[a] for a in near
                             if a in region_of and info[a].shape == info[node].shape
                             and info[a].device == info[node].device and segment_of[a] == segment})
        chosen = None
        for attempt in ([candidates] if len(candidates) > 1 else []) + [[c] for c in sorted(
                candidates, key=lambda c: -len(members[c]))]:
            merged = {m for c in attempt for m in members[c]} | {node}
            if _acyclic_after_merge(merged, region_of, members):
                chosen = attempt
                break
        if chosen:
            target = chosen[0]
            for c in chosen[1:]:
                for m in members.pop(c):
                    region_of[m] = target
                    members[target].append(m)
        else:
            target = pos[node]  # a new region, named by its first node
            members[target] = []
        members[target].append(node)
        region_of[node] = target
    return [sorted(ms, key=pos.get) for _, ms in sorted(members.items(), key=lambda kv: min(map(pos.get, kv[1])))]


def _acyclic_after_merge(merged: set, region_of: dict, members: dict) -> bool:
    """Whether contracting ``merged`` into one kernel keeps the graph of kernels and nodes acyclic: no
    path leaves it and comes back, through single nodes or through other (contracted) regions."""
    seen, todo = set(), [u for m in merged for u in m.users if u not in merged]
    while todo:
        n = todo.pop()
        unit = ("region", region_of[n]) if n in region_of else n
        if unit in seen:
            continue
        seen.add(unit)
        for m in (members[region_of[n]] if n in region_of else [n]):
            for u in m.users:
                if u in merged:
                    return False
                todo.append(u)
    return True


# --- the rewritten graph --------------------------------------------------------------------------


class _Rewriter:
    def __init__(self, gm, info, at_use, regions, dynamic):
        self.gm, self.info, self.at_use, self.regions, self.dynamic = gm, info, at_use, regions, dynamic
        self.graph = fx.Graph()
        self.env: dict = {}
        self.kernels: list = []

    def run(self) -> fx.GraphModule:
        for unit in self._order():
            if isinstance(unit, list):
                self._kernel(unit)
            else:
                self.env[unit] = self.graph.node_copy(unit, lambda n: self.env[n])
        result = fx.GraphModule(self.gm, self.graph)
        result.meta.update(self.gm.meta)
        result.meta["pointwise_kernels"] = list(self.kernels)
        return result

    def _order(self) -> list:
        """Regions (lists) and single nodes, topologically sorted, original order first; nodes with side
        effects keep their place relative to everything before and after them."""
        nodes = list(self.gm.graph.nodes)
        pos = {n: i for i, n in enumerate(nodes)}
        unit_of = {}
        units = []
        for region in self.regions:
            for m in region:
                unit_of[m] = len(units)
            units.append(region)
        for n in nodes:
            if n not in unit_of:
                unit_of[n] = len(units)
                units.append(n)
        members = [u if isinstance(u, list) else [u] for u in units]
        deps = [set() for _ in units]
        for i, ms in enumerate(members):
            for m in ms:
                deps[i] |= {unit_of[a] for a in m.all_input_nodes} - {i}
        last_effect = None
        for n in nodes:  # side effects are fences
            u = unit_of[n]
            if _side_effect(n) or n.op == "output":
                deps[u] |= {unit_of[p] for p in nodes[:pos[n]]} - {u}
                last_effect = u
            elif last_effect is not None:
                deps[u].add(last_effect)
        users = [set() for _ in units]
        for i, ds in enumerate(deps):
            for d in ds:
                users[d].add(i)
        waiting = [len(ds) for ds in deps]
        key = [min(pos[m] for m in ms) for ms in members]
        ready = [(key[i], i) for i in range(len(units)) if waiting[i] == 0]
        heapq.heapify(ready)
        out = []
        while ready:
            _, i = heapq.heappop(ready)
            out.append(units[i])
            for u in users[i]:
                waiting[u] -= 1
                if waiting[u] == 0:
                    heapq.heappush(ready, (key[u], u))
        if len(out) != len(units):
            raise LoweringError("the regions of the graph form a cycle (a bug in reference_lowering.pointwise)")
        return out

    def _kernel(self, region: list) -> None:
        inside = set(region)
        reads = {}  # each operand from outside, as the region's first reader sees it
        for m in region:
            for a in m.all_input_nodes:
                if a not in inside and (a, m) in self.at_use:
                    reads.setdefault(a, self.at_use[(a, m)])
        inputs = list(reads)
        outputs = [m for m in region if any(u not in inside for u in m.users)]
        if not outputs:  # a dead region: pure, so nothing to launch
            return
        device = self.info[region[0]].device
        if not self.dynamic and self.info[outputs[0]].shape.count(0):  # nothing to compute: buffers only
            for node in outputs:
                t = self.info[node]
                self.env[node] = self.graph.call_function(aten.empty_strided.default, (list(t.shape), list(t.stride)),
                                                          {"dtype": t.dtype, "device": device})
            return
        code = generate(region, inputs, outputs, {**self.info, **reads}, dynamic=self.dynamic,
                        interpreter=device.type == "cpu")
        kernel = make_kernel(code, device)
        self.kernels.append(kernel)
        g = self.graph
        syms: dict = {}

        def scalar(expr):
            return _fx_expr(g, expr, syms)

        for arg in code.args:
            src = self.env[inputs[arg.tensor]]
            target = aten.sym_size.int if arg.kind == "size" else aten.sym_stride.int
            syms[arg.name] = g.call_function(target, (src, arg.dim))
        buffers = []
        for node, (sizes, strides, dtype) in zip(outputs, code.outputs):
            buf = g.call_function(aten.empty_strided.default, ([scalar(s) for s in sizes], [scalar(s) for s in strides]),
                                  {"dtype": dtype, "device": device})
            if "val" in node.meta:
                buf.meta["val"] = node.meta["val"]
            buffers.append(buf)
        numel = scalar(code.numel)
        if not isinstance(numel, int) or numel > 0:  # a 0-size output needs no launch
            syms["xnumel"] = numel
            kernel_idx, constant_args_idx = side_table_indices(kernel.fn, code)
            kwargs = {f"in_ptr{i}": self.env[a] for i, a in enumerate(inputs)}
            kwargs.update({f"out_ptr{j}": b for j, b in enumerate(buffers)})
            kwargs.update({a.name: syms[a.name] for a in code.args})
            if code.dynamic:
                kwargs["xnumel"] = numel
            launch = g.call_function(_wrapper(), (), {
                "kernel_idx": kernel_idx, "constant_args_idx": constant_args_idx,
                "grid": [(scalar(grid_expr(code)), scalar(grid_y(code)), 1)], "tma_descriptor_metadata": {}, "kwargs": kwargs})
            launch.meta["pointwise_kernel"] = kernel.name
        for node, buf in zip(outputs, buffers):
            self.env[node] = buf


def _wrapper():
    from torch._higher_order_ops.triton_kernel_wrap import triton_kernel_wrapper_mutation

    return triton_kernel_wrapper_mutation


_FX_OPS = {sympy.Add: operator.add, sympy.Mul: operator.mul}


def _fx_expr(g: fx.Graph, expr, syms: dict):
    """An int, or FX nodes computing a sympy expression of the kernel's size symbols (Add, Mul,
    FloorDiv; the forms replace_floor_div leaves)."""
    from torch.utils._sympy.functions import FloorDiv

    expr = sympy.sympify(expr)
    if expr.is_Integer:
        return int(expr)
    if expr.is_Symbol:
        return syms[expr.name]
    key = ("expr", sympy.srepr(expr))
    if key in syms:
        return syms[key]
    if isinstance(expr, FloorDiv):
        node = g.call_function(operator.floordiv, (_fx_expr(g, expr.args[0], syms), _fx_expr(g, expr.args[1], syms)))
    elif type(expr) in _FX_OPS:
        args = sorted(expr.args, key=sympy.default_sort_key)
        node = _fx_expr(g, args[0], syms)
        for a in args[1:]:
            node = g.call_function(_FX_OPS[type(expr)], (node, _fx_expr(g, a, syms)))
    elif isinstance(expr, sympy.Pow) and expr.exp.is_Integer and expr.exp > 0:
        base = _fx_expr(g, expr.base, syms)
        node = base
        for _ in range(int(expr.exp) - 1):
            node = g.call_function(operator.mul, (node, base))
    else:
        raise LoweringError(f"cannot turn the size expression {expr} into FX nodes")
    syms[key] = node
    return node


__all__ = ["lower_pointwise"]
