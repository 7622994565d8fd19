"""Planted bugs: FX graph passes that each look like a plausible optimisation and each hide one flaw.

Every pass models a bug class seen in real FX pass code (Inductor, Torch-TensorRT, hand-written
lowering pipelines). They are written the way their authors would have written them: correct on
the graphs the author tried, wrong on some graph a property-based harness should find. Each
docstring says what the pass tries to do, which real bug class it models, and what the flaw is.

The passes rely on nothing from the harness: they get a ``GraphModule`` (or its ``Graph``) whose
nodes carry ``meta['val']`` fake tensors, and they use only torch. They come in every form the
harness accepts (``fn(gm)`` returning a GraphModule, None or a PassResult, ``fn(graph)``,
``fn(gm, sample_inputs)`` and a ``PassBase`` instance), and leave the graph lint-clean.

``PLANTED`` names them; ``REACHABLE_WITH`` says which ``strategies.graphs`` options make each bug
reachable (``GRAPH_OPTIONS`` spells the options out). ``hang``, ``segfault`` and ``exit`` are
there to test the harness's timeouts and process isolation, not its checks.
"""

from __future__ import annotations

import ctypes
import math
import os

import torch
import torch.fx as fx
from torch.fx.passes.infra.pass_base import PassBase, PassResult
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._pytree import tree_leaves

aten = torch.ops.aten
_LOW_PRECISION = (torch.float16, torch.bfloat16)


# --- helpers a pass author would write ------------------------------------------------------------


def _val(arg):
    """The tensor in ``meta['val']`` of a node argument (None for literals and other nodes)."""
    val = arg.meta.get("val") if isinstance(arg, fx.Node) else None
    return val if isinstance(val, torch.Tensor) else None


def _fake_call(graph, target, args, kwargs=None):
    """``meta['val']`` for a new node: ``target`` run on its operands' fake values (None if it fails)."""
    args, kwargs = fx.node.map_arg((tuple(args), dict(kwargs or {})), _val)
    mode = next((n.meta["val"].fake_mode for n in graph.nodes if hasattr(n.meta.get("val"), "fake_mode")), None)
    if mode is None:
        return None
    try:
        with mode:
            return target(*args, **kwargs)
    except Exception:  # noqa: BLE001 - metadata is best effort, as in most passes
        return None


def _insert_call(graph, target, args, kwargs=None):
    node = graph.call_function(target, tuple(args), dict(kwargs or {}))
    val = _fake_call(graph, target, args, kwargs)
    if val is not None:
        node.meta["val"] = val
    return node


def _in_layout_of(g: fx.Graph, out: fx.Node, like) -> fx.Node:
    """``out`` in the memory layout of ``like`` (the replaced node's ``meta['val']``, what eager gave):
    a decomposition's pointwise ops follow their operand's layout where the fused kernel may not (eager
    ``_softmax`` of a transposed input is contiguous), and a layout is observable downstream
    (``rand_like`` fills memory in order; a user's ``meta['val']`` records strides). ``like`` must
    be dense (a permutation of a contiguous layout), as eager's results here are."""
    if like is None or _val(out) is None:
        return out
    # Always restrided, even where out's fake meta already has like's layout: eager can give the
    # decomposition another layout than its fakes say (a keepdim mean's strides feed a broadcast),
    # and a copy in the layout is that layout in both.
    rank = like.dim()
    order = sorted(range(rank), key=lambda d: (-like.stride(d), d))  # outermost first
    inverse = [order.index(d) for d in range(rank)]
    moved = _insert_call(g, torch.ops.aten.permute.default, (out, order)) if order != list(range(rank)) else out
    dense = _insert_call(g, torch.ops.aten.clone.default, (moved,), {"memory_format": torch.contiguous_format})
    return _insert_call(g, torch.ops.aten.permute.default, (dense, inverse)) if order != list(range(rank)) else dense


def _is_op(target) -> bool:
    return isinstance(target, torch._ops.OpOverload)


def _tensor_params(target) -> list:
    return [a for a in target._schema.arguments if str(a.type) == "Tensor"]


def _value_operands(target):
    """Positions of ``self`` and of the second value operand (``other``, ``exponent``, ``end``) of a
    functional pointwise op, read off its schema: ``(0, 1)`` for ``sub``, ``(1, 2)`` for ``where``."""
    if not _is_op(target) or torch.Tag.pointwise not in target.tags or target._schema.is_mutable:
        return None
    names = [a.name for a in target._schema.arguments]
    tensors = {a.name for a in _tensor_params(target)}
    second = next((n for n in ("other", "exponent", "end") if n in tensors), None)
    if "self" not in tensors or second is None:
        return None
    return names.index("self"), names.index(second)


def _is_view(target) -> bool:
    if not _is_op(target) or target._schema.is_mutable or not target._schema.returns:
        return False
    return target._schema.returns[0].alias_info is not None


def _escaping(graph: fx.Graph) -> set:
    """Nodes whose storage the caller sees: outputs, and what outputs are views of."""
    seen, stack = set(), [a for a in tree_leaves(_output_node(graph).args) if isinstance(a, fx.Node)]
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            if node.op == "call_function" and _is_view(node.target) and isinstance(node.args[0], fx.Node):
                stack.append(node.args[0])
    return seen


def _inplace_variant(target):
    """``aten.abs_.default`` for ``aten.abs.default`` (None when there is none)."""
    if not _is_op(target) or target._schema.is_mutable:
        return None
    packet = getattr(aten, target.overloadpacket.__name__ + "_", None)
    return getattr(packet, target._overloadname, None) if packet is not None else None


def _no_internal_overlap(t) -> bool:
    return all(stride != 0 or size <= 1 for size, stride in zip(t.shape, t.stride()))


def _same_layout(a, b) -> bool:
    return a is not None and b is not None and (a.shape, a.dtype, a.stride()) == (b.shape, b.dtype, b.stride())


def _output_node(graph: fx.Graph) -> fx.Node:
    return next(n for n in reversed(graph.nodes) if n.op == "output")


def _reinplace_single_use_temporaries(graph: fx.Graph) -> bool:
    """``op(t) -> op_(t)`` where ``t`` is a temporary used only there: not an input, constant or
    view, sharing storage with nothing, and the result fits ``t`` exactly (shape, dtype, strides)."""
    storages: dict = {}
    for node in graph.nodes:
        t = _val(node)
        if t is not None:
            storages.setdefault(StorageWeakRef(t.untyped_storage()), []).append(node)
    modified = False
    for node in list(graph.nodes):
        inplace = _inplace_variant(node.target) if node.op == "call_function" else None
        if inplace is None or not node.args or not isinstance(node.args[0], fx.Node):
            continue
        t = node.args[0]
        vt = _val(t)
        if t.op != "call_function" or len(t.users) != 1 or vt is None:
            continue
        if not _is_op(t.target) or t.target._schema.is_mutable or _is_view(t.target):
            continue  # writing to a view writes to its base
        if storages.get(StorageWeakRef(vt.untyped_storage()), [t]) != [t] or not _no_internal_overlap(vt):
            continue
        if not _same_layout(_val(node), vt):
            continue
        node.target = inplace
        modified = True
    return modified


# --- 1. operand swap under a shape condition -------------------------------------------------------


def canonicalize_broadcast_operands(gm: fx.GraphModule) -> fx.GraphModule:
    """Puts the operand that has the result's full shape first in pointwise ops of two values.

    Tries to: canonicalise broadcasting for a backend whose elementwise kernels iterate over (and
    may write into) their first operand, so ``add(bias, x)`` becomes ``add(x, bias)``; CSE then
    also sees ``mul(x, y)`` and ``mul(y, x)`` as one node more often.
    Models: operand swaps in canonicalisation / broadcasting rewrites that assume commutativity.
    Flaw: which ops qualify is read off ``torch.Tag.pointwise`` and the schema's ``self``/``other``
    names, which say nothing about commutativity, so ``sub``, ``div``, ``pow``, ``fmod``, ``gt``,
    ``where``'s branches... are swapped too (and ``add(a, b, alpha=2)``, which is ``a + 2 * b``).
    And the shape test only asks whether the second operand has the result's shape, not whether
    the first lacks it, so without any broadcasting every such op is swapped.
    """
    changed = False
    for node in gm.graph.nodes:
        pair = _value_operands(node.target) if node.op == "call_function" else None
        if pair is None or len(node.args) <= max(pair) or _val(node) is None:
            continue
        i, j = pair
        a, b = node.args[i], node.args[j]
        if a is b or _val(a) is None or _val(b) is None:
            continue
        if _val(b).shape == _val(node).shape:  # b already has the full shape: it goes first
            args = list(node.args)
            args[i], args[j] = b, a
            node.args = tuple(args)
            changed = True
    if changed:
        gm.recompile()
    return gm


# --- 2. a dropped kwarg ------------------------------------------------------------------------------


def normalize_call_convention(gm: fx.GraphModule) -> None:
    """Re-emits every ATen call in one calling convention: required arguments positional,
    defaulted and keyword-only arguments as keywords.

    Tries to: make ``sum(x, [1], True)`` and ``sum(x, [1], keepdim=True)`` the same node for the
    pattern matcher that runs next (the convention ``make_fx`` graphs mostly follow).
    Models: the dropped-kwarg bug of node re-creation (replacements built from ``node.args`` only,
    losing ``alpha=``, ``keepdim=``, ``approximate=``, ``rounding_mode=``).
    Flaw: the keyword dict is computed and then not passed to ``call_function``, so every
    defaulted or keyword-only argument falls back to its default (``keepdim``, ``alpha``, gelu's
    ``approximate``, ``_to_copy``'s ``dtype``, slice bounds, ``flatten`` dims, ``cat``'s dim...)
    or, where there is none, the call fails (``clamp`` bounds, ``rounding_mode``).
    """
    graph = gm.graph
    for node in list(graph.nodes):
        if node.op != "call_function" or not _is_op(node.target):
            continue
        args, kwargs = [], {}
        for i, param in enumerate(node.target._schema.arguments):
            if not param.kwarg_only and i < len(node.args):
                value = node.args[i]
            elif param.name in node.kwargs:
                value = node.kwargs[param.name]
            else:
                continue  # omitted: already the default
            if param.kwarg_only or param.has_default_value():
                kwargs[param.name] = value
            else:
                args.append(value)
        with graph.inserting_before(node):
            new = graph.call_function(node.target, tuple(args))
        new.meta.update(node.meta)
        node.replace_all_uses_with(new)
        graph.erase_node(node)
    gm.recompile()


# --- 3. wrong dtype promotion -------------------------------------------------------------------------

# Reductions whose result dtype torch promotes (integers and bools sum to int64) and that take
# an explicit ``dtype=``.
_PROMOTING_REDUCTIONS = frozenset({aten.sum.default, aten.sum.dim_IntList, aten.prod.dim_int})


class ExplicitTypePromotion(PassBase):
    """Makes type promotion explicit: operands get one dtype, reductions an explicit ``dtype=``.

    Tries to: spell out every implicit dtype conversion, as TensorRT's elementwise layers and many
    codegen backends require (Torch-TensorRT and Inductor both have such a lowering): mixed-dtype
    operands are cast before the op (``cat`` inputs and ``clamp`` bounds included), and sums and
    products get the accumulation dtype as an argument.
    Models: wrong result dtypes from hand-rolled promotion ("the result has ``self``'s dtype").
    Flaw: the dtype it makes explicit is always the first operand's. That is right in the float32
    models the pass was written for, but not when another operand is wider (``f16 * f32`` computed
    in f16, ``int + float`` truncating the float, ``where(c, int, float)`` returning ints), nor for
    reductions of integers and bools, which torch accumulates and returns in int64 (``sum`` of a
    bool mask becomes a logical or).
    """

    def call(self, graph_module: fx.GraphModule) -> PassResult:
        graph = graph_module.graph
        modified = False
        for node in list(graph.nodes):
            if node.op != "call_function" or not node.args:
                continue
            if node.target in _PROMOTING_REDUCTIONS:
                if "dtype" not in node.kwargs and _val(node.args[0]) is not None:
                    node.kwargs = {**node.kwargs, "dtype": _val(node.args[0]).dtype}
                    modified = True
                continue
            operands = self._operands(node)
            if not operands:
                continue
            dtype = _val(operands[0][1]).dtype
            for path, arg in operands[1:]:
                if _val(arg).dtype != dtype:
                    with graph.inserting_before(node):
                        cast = _insert_call(graph, aten._to_copy.default, (arg,), {"dtype": dtype})
                    node.args = _replace_at(node.args, path, cast)
                    modified = True
        if modified:
            graph_module.recompile()
        return PassResult(graph_module, modified)

    @staticmethod
    def _operands(node):
        """``[(path, node)]`` of the tensor values that take part in promotion, ``self`` first."""
        if node.target is aten.cat.default:
            return [((0, k), t) for k, t in enumerate(node.args[0]) if _val(t) is not None]
        if node.target is aten.clamp.Tensor:
            return [((k,), t) for k, t in enumerate(node.args[:3]) if _val(t) is not None]
        pair = _value_operands(node.target)
        if pair is None or len(node.args) <= max(pair):
            return []
        found = [((k,), node.args[k]) for k in pair]
        return found if all(_val(t) is not None for _, t in found) else []


def _replace_at(args: tuple, path: tuple, value) -> tuple:
    """``args`` with the element at ``path`` (an index, or index then list index) replaced."""
    args = list(args)
    if len(path) == 1:
        args[path[0]] = value
    else:
        inner = list(args[path[0]])
        inner[path[1]] = value
        args[path[0]] = inner
    return tuple(args)


# --- 4. NaN semantics -----------------------------------------------------------------------------------

def _le(graph, x, bound):
    return _insert_call(graph, aten.le.Scalar, (x, bound))


# Ops with a restricted domain, and the lowering's test for "outside it" (given the node's args;
# None: no guard for this call).
_DOMAIN_GUARDS = {
    aten.sqrt.default: lambda g, args: _le(g, args[0], 0),
    aten.rsqrt.default: lambda g, args: _le(g, args[0], 0),
    aten.log.default: lambda g, args: _le(g, args[0], 0),
    aten.log2.default: lambda g, args: _le(g, args[0], 0),
    aten.log1p.default: lambda g, args: _le(g, args[0], -1),
    aten.asin.default: lambda g, args: _insert_call(g, aten.logical_or.default, (
        _le(g, args[0], -1), _insert_call(g, aten.ge.Scalar, (args[0], 1)))),
    aten.reciprocal.default: lambda g, args: _insert_call(g, aten.eq.Scalar, (args[0], 0)),
    aten.div.Tensor: lambda g, args: _insert_call(g, aten.eq.Scalar, (args[1], 0))
    if isinstance(args[1], fx.Node) else None,
    aten.div.Tensor_mode: lambda g, args: _insert_call(g, aten.eq.Scalar, (args[1], 0))
    if isinstance(args[1], fx.Node) else None,
    aten.floor_divide.default: lambda g, args: _insert_call(g, aten.eq.Scalar, (args[1], 0))
    if isinstance(args[1], fx.Node) else None,
    aten.pow.Tensor_Scalar: lambda g, args: _le(g, args[0], 0),
    aten.pow.Tensor_Tensor: lambda g, args: _le(g, args[0], 0),
    aten.atan2.default: lambda g, args: _insert_call(g, aten.logical_and.default, (
        _insert_call(g, aten.eq.Scalar, (args[0], 0)), _insert_call(g, aten.eq.Scalar, (args[1], 0)))),
}


def lower_for_select_only_backend(graph: torch.fx.Graph) -> None:
    """Lowers min/max-like ops to compare-and-select, and guards domain-restricted math with an
    explicit NaN select (an Inductor custom pass, style of several ONNX/TensorRT converters).

    Tries to: target a backend whose min/max instructions are not NaN-aware and whose math units
    return garbage outside their domain. ``maximum``/``minimum``/``clamp*``/``relu`` are written
    the way one says them (``a > b ? a : b``, ``x < lo ? lo : x``, ``x > 0 ? x : 0``); float
    ``sqrt``/``rsqrt``/``log``/``log2``/``log1p``/``asin``/``reciprocal``/``div``/``pow``/``atan2`` become
    ``outside ? nan : op(...)``, so that out-of-domain inputs give NaN, as the author believes
    torch does.
    Models: NaN semantics lost or invented in lowering (IEEE comparisons with NaN are false; IEEE
    results at the edge of a domain are not NaN).
    Flaws: torch's ``maximum``, ``minimum``, ``clamp`` and ``relu`` propagate NaN from any operand,
    bounds included; each select picks the other side when its comparison meets a NaN, so a NaN
    in ``a`` (max/min/relu) or in a bound (clamp) becomes a number. And the domain guards are too
    wide: ``sqrt(0) = 0``, ``log(0) = -inf``, ``rsqrt(0) = inf``, ``log1p(-1) = -inf``,
    ``asin(1)``, ``1 / 0 = inf``, ``x / 0 = +-inf``, ``0 ** 2 = 0``, ``(-2) ** 2 = 4`` and
    ``atan2(0, 0) = 0`` all come out NaN (a non-positive base is not outside ``pow``'s domain for
    integral exponents).
    """

    def where(cond, then, other):
        if isinstance(then, fx.Node) and isinstance(other, fx.Node):
            return _insert_call(graph, aten.where.self, (cond, then, other))
        if isinstance(then, fx.Node):
            return _insert_call(graph, aten.where.ScalarOther, (cond, then, other))
        return _insert_call(graph, aten.where.ScalarSelf, (cond, then, other))

    def compare(packet, a, b):
        return _insert_call(graph, packet.Tensor if isinstance(b, fx.Node) else packet.Scalar, (a, b))

    def at_least(x, lo):  # x < lo ? lo : x
        return where(compare(aten.lt, x, lo), lo, x)

    def at_most(x, hi):  # x > hi ? hi : x
        return where(compare(aten.gt, x, hi), hi, x)

    for node in list(graph.nodes):
        if node.op != "call_function" or _val(node) is None:
            continue
        args = node.args
        with graph.inserting_before(node):
            if node.target is aten.maximum.default:  # a > b ? a : b
                new = where(compare(aten.gt, args[0], args[1]), args[0], args[1])
            elif node.target is aten.minimum.default:  # a < b ? a : b
                new = where(compare(aten.lt, args[0], args[1]), args[0], args[1])
            elif node.target is aten.relu.default:  # x > 0 ? x : 0
                new = where(compare(aten.gt, args[0], 0), args[0], 0)
            elif node.target is aten.clamp_min.default:
                new = at_least(args[0], args[1])
            elif node.target is aten.clamp_max.default:
                new = at_most(args[0], args[1])
            elif node.target in (aten.clamp.default, aten.clamp.Tensor):
                lo = args[1] if len(args) > 1 else node.kwargs.get("min")
                hi = args[2] if len(args) > 2 else node.kwargs.get("max")
                new = args[0]
                if lo is not None:
                    new = at_least(new, lo)
                if hi is not None:
                    new = at_most(new, hi)
            elif node.target in _DOMAIN_GUARDS and _val(node).is_floating_point():
                outside = _DOMAIN_GUARDS[node.target](graph, args)
                if outside is None:
                    continue
                new = where(outside, float("nan"), _insert_call(graph, node.target, args, node.kwargs))
            else:
                continue
            if new is args[0] or _val(new) is None or _val(new).dtype != _val(node).dtype:
                new = _insert_call(graph, aten._to_copy.default, (new,), {"dtype": _val(node).dtype})
        node.replace_all_uses_with(new)
        graph.erase_node(node)


# --- 5. CSE across an in-place write -------------------------------------------------------------------


def _hashable(obj):
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, *(_hashable(o) for o in obj))
    if isinstance(obj, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in obj.items()))
    if isinstance(obj, float) and math.isnan(obj):
        return ("nan",)
    if isinstance(obj, (float, int, bool)):
        return (type(obj).__name__, obj)  # 1, 1.0 and True are different arguments
    return obj


def reinplace_then_cse(gm: fx.GraphModule) -> PassResult:
    """A memory pipeline: reuse single-use temporaries in place, then merge repeated computations.

    Tries to: cut allocations twice over. Step one writes ``op(t)`` as ``op_(t)`` where ``t`` is a
    temporary nobody else reads (exactly as ``reinplace_temporaries``: correct on its own). Step
    two is the textbook CSE of ``torch.fx.passes.dialect.common.cse_pass``: call nodes with the
    same target, arguments and keyword arguments are merged; impure nodes (in-place ops, grad-mode
    switches) are never merged, and when both nodes reach the caller (as outputs, or what outputs
    view) the second becomes a ``clone`` of the first, so two outputs never become one tensor.
    Models: CSE across a mutation (the key sees the same ``%x`` before and after ``x.add_(1)``).
    Flaw: the key is ``(target, args, kwargs)`` over node *names*, and nothing invalidates it when
    an in-place op writes to an operand between two equal nodes, or later writes to one of them,
    as step one just arranged: ``a = exp(x); b = exp(x); neg_(a); sin_(b)`` merges ``b`` into
    ``a``, and the two writes now land in one buffer (the output guard follows views, not the
    in-place ops that return ``a`` itself).
    """
    graph = gm.graph
    modified = _reinplace_single_use_temporaries(graph)
    escaping = _escaping(graph)
    seen: dict = {}
    for node in list(graph.nodes):
        if node.op != "call_function" or node.is_impure():
            continue
        key = (node.target, _hashable(node.args), _hashable(node.kwargs))
        earlier = seen.get(key)
        if earlier is None:
            seen[key] = node
            continue
        replacement = earlier
        if node in escaping and earlier in escaping:  # two outputs must not become one tensor
            with graph.inserting_before(node):
                replacement = _insert_call(graph, aten.clone.default, (earlier,))
        elif node in escaping:
            escaping.add(earlier)
        node.replace_all_uses_with(replacement)
        graph.erase_node(node)
        modified = True
    if modified:
        gm.recompile()
    return PassResult(gm, modified)


# --- 6. DCE of a side effect -----------------------------------------------------------------------------


def _has_side_effects(node: fx.Node) -> bool:
    # PyTorch's convention: a trailing underscore marks an in-place method (``x.add_(y)``).
    name = getattr(node.target, "__name__", str(node.target))
    return name.endswith("_") and not name.startswith("_")


def eliminate_dead_code(gm: fx.GraphModule) -> None:
    """Removes call nodes whose results nobody uses, last to first (so chains of dead nodes go).

    Tries to: clean up after other passes without ``graph.eliminate_dead_code``'s schema lookups.
    Models: DCE that deletes side effects (in-place updates of inputs, ``copy_`` back into a
    buffer, ``_set_grad_enabled`` regions).
    Flaw: side effects are recognised by the in-place *method* naming convention, a trailing
    underscore. An OpOverload's ``__name__`` is ``add_.Tensor``, which ends in the overload name,
    so unused in-place ATen calls (and ``_set_grad_enabled``) count as dead and are removed.
    """
    graph = gm.graph
    for node in reversed(list(graph.nodes)):
        if node.op == "call_function" and not node.users and not _has_side_effects(node):
            graph.erase_node(node)
    gm.recompile()


# --- 7. aliasing introduced -----------------------------------------------------------------------------------


def _is_scalar(value, number) -> bool:
    return isinstance(value, (int, float)) and value == number  # True and False count as 1 and 0


_IDENTITY_ELEMENT = {
    aten.add.Tensor: 0, aten.add.Scalar: 0, aten.sub.Tensor: 0, aten.sub.Scalar: 0, aten.mul.Tensor: 1,
    aten.mul.Scalar: 1, aten.div.Tensor: 1, aten.div.Scalar: 1, aten.pow.Tensor_Scalar: 1,
}
_IDEMPOTENT_BINARY = frozenset({  # op(x, x) == x
    aten.maximum.default, aten.minimum.default, aten.logical_and.default, aten.logical_or.default,
    aten.bitwise_and.Tensor, aten.bitwise_or.Tensor,
})
_KEEPDIM_REDUCTIONS = frozenset({  # reducing size-1 dims with keepdim=True changes nothing
    aten.sum.dim_IntList, aten.mean.dim, aten.amax.default, aten.amin.default, aten.prod.dim_int,
    aten.any.dim,
})
_INVOLUTIONS = frozenset({aten.neg.default, aten.logical_not.default, aten.bitwise_not.default})  # f(f(x)) == x


def _unbounded_clamp(target, args) -> bool:
    def is_inf(bound, sign):
        return bound is None or (isinstance(bound, float) and bound == sign * math.inf)

    if target is aten.clamp_min.default:
        return is_inf(args[1], -1)
    if target is aten.clamp_max.default:
        return is_inf(args[1], 1)
    return target is aten.clamp.default and is_inf(args[1], -1) and (len(args) < 3 or is_inf(args[2], 1))


def _noop_candidate(node: fx.Node):
    """The value ``node`` would return unchanged, judging by the op and its arguments alone."""
    target, args = node.target, node.args
    if target in (aten.clone.default, aten._to_copy.default):
        ok = target is aten.clone.default or set(node.kwargs) <= {"dtype", "memory_format"}
        return args[0] if ok else None
    if target is aten.cat.default:
        return args[0][0] if len(args[0]) == 1 else None
    if target is aten.where.self:
        return args[1] if args[1] is args[2] else None
    if target in (aten.floor.default, aten.ceil.default, aten.round.default, aten.trunc.default):
        return args[0] if _val(args[0]) is not None and not _val(args[0]).is_floating_point() else None
    if target in _IDENTITY_ELEMENT:
        return args[0] if len(args) > 1 and _is_scalar(args[1], _IDENTITY_ELEMENT[target]) else None
    if target in _IDEMPOTENT_BINARY:
        return args[0] if args[0] is args[1] else None
    if target in (aten.clamp_min.default, aten.clamp_max.default, aten.clamp.default):
        return args[0] if _unbounded_clamp(target, args) else None
    if target in _INVOLUTIONS:
        inner = args[0]
        return inner.args[0] if isinstance(inner, fx.Node) and inner.target is target else None
    if target in _KEEPDIM_REDUCTIONS and len(args) > 2 and args[2] is True and _val(args[0]) is not None:
        shape = _val(args[0]).shape
        dims = args[1] if isinstance(args[1], (list, tuple)) else [args[1]]
        return args[0] if shape and dims and all(shape[d % len(shape)] == 1 for d in dims) else None
    return None


def _noop_source(node: fx.Node):
    """What ``node`` returns unchanged, if it is a no-op copy (else None): ``clone(x)``,
    ``_to_copy(x)`` to x's dtype, ``x + 0``, ``x * 1``, ``x / 1``, ``x ** 1``, ``maximum(x, x)``,
    ``where(c, x, x)``, unbounded clamps, ``neg(neg(x))``, rounding of integers, ``cat([x])``,
    reductions over size-1 dims with ``keepdim=True``. Only with exactly the input's shape, dtype
    and strides, so the values are identical."""
    if node.op != "call_function" or not node.args:
        return None
    src = _noop_candidate(node)
    return src if isinstance(src, fx.Node) and _same_layout(_val(node), _val(src)) else None


def remove_noop_ops(gm: fx.GraphModule) -> fx.GraphModule:
    """Removes ops that return their input unchanged: copies, ``x + 0``, ``x * 1``, ``max(x, x)``...

    Tries to: save a kernel and a buffer per no-op; decompositions and functionalization leave
    many (``remove_noop_ops`` in Inductor). Values cannot change: the no-op must have exactly its
    input's shape, dtype and strides, and nobody may write to it.
    Models: aliasing introduced by copy elision (Inductor's version had to learn not to do this
    for graph inputs and outputs).
    Flaw: it never asks whether the input is a graph input or escapes as an output. ``clone(x)``
    returned from the graph becomes ``x`` itself (an output aliasing an input, or two outputs
    aliasing each other); with mutations, a later write to ``x`` shows through the removed copy.
    """
    graph = gm.graph
    for node in list(graph.nodes):
        src = _noop_source(node)
        if src is None:
            continue
        if any(user.op == "call_function" and _is_op(user.target) and user.target._schema.is_mutable
               and user.args and user.args[0] is node for user in node.users):
            continue  # somebody writes to the copy: it is needed
        node.replace_all_uses_with(src)
        graph.erase_node(node)
    gm.recompile()
    return gm


# --- 8. a graph input overwritten -----------------------------------------------------------------------------


def reinplace_last_use(gm: fx.GraphModule, sample_inputs) -> fx.GraphModule:
    """Turns ``op(x, ...)`` into ``op_(x, ...)`` when this is the last use of ``x``.

    Tries to: save an allocation per op (a Torch-TensorRT-style lowering pass; it takes the sample
    inputs to check they can be written in place: no stride-0 broadcast dims).
    Models: a reinplacing pass that overwrites a graph input (``functorch``'s reinplace had to
    special-case inputs for exactly this reason).
    Flaw: "no later use in the graph" is taken to mean "dead". A placeholder is the caller's
    tensor; writing to it changes the caller's input.
    """
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    writable = {p for p, t in zip(placeholders, sample_inputs)
                if isinstance(t, torch.Tensor) and _no_internal_overlap(t)}
    for node in list(graph.nodes):
        if node.op != "call_function" or not node.args:
            continue
        inplace, x = _inplace_variant(node.target), node.args[0]
        if inplace is None or x not in writable or len(x.users) != 1:
            continue
        if not _same_layout(_val(node), _val(x)):
            continue  # the result must fit into x
        node.target = inplace
    gm.recompile()
    return gm


# --- 9. output shape changed ----------------------------------------------------------------------------------------

_RESHAPES = frozenset({
    aten.view.default, aten.reshape.default, aten._unsafe_view.default, aten.flatten.using_ints,
    aten.unsqueeze.default, aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.expand.default,
})


def remove_noop_reshapes(graph: torch.fx.Graph) -> None:
    """Removes reshape-like nodes that do not move data (Inductor custom-pass style).

    Tries to: drop ``view``/``reshape``/``flatten``/``(un)squeeze``/``expand`` nodes that are
    no-ops, which decompositions leave behind in large numbers.
    Models: a "no-op view" removal whose no-op test is too weak, changing an output's shape.
    Flaw: "no-op" is tested as "same number of elements" instead of "same shape"; that is true of
    every view, reshape and squeeze, so ``[2, 3] -> [6]`` or ``[3] -> [1, 3]`` is removed too and
    the shape change is lost (outputs change shape, later broadcasts change or fail).
    """
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in _RESHAPES:
            continue
        src = node.args[0]
        if _val(src) is not None and _val(node) is not None and _val(src).numel() == _val(node).numel():
            node.replace_all_uses_with(src)
            graph.erase_node(node)


# --- 10. a rounding cast removed ------------------------------------------------------------------------------


def _is_low_precision_pointwise(node: fx.Node) -> bool:
    """A functional pointwise op computing in float16/bfloat16 (every tensor operand in that dtype)."""
    if node.op != "call_function" or not _is_op(node.target) or node.target._schema.is_mutable:
        return False
    if torch.Tag.pointwise not in node.target.tags or node.target is aten._to_copy.default:
        return False
    out = _val(node)
    tensors = [_val(a) for a in tree_leaves((node.args, node.kwargs)) if isinstance(a, fx.Node)]
    return (out is not None and out.dtype in _LOW_PRECISION and bool(tensors)
            and all(t is not None and t.dtype == out.dtype for t in tensors))


def _is_narrowing_cast(node: fx.Node) -> bool:
    if node.op != "call_function" or node.target is not aten._to_copy.default or set(node.kwargs) != {"dtype"}:
        return False
    src, out = _val(node.args[0]), _val(node)
    return (src is not None and out is not None and src.dtype != out.dtype
            and torch.promote_types(src.dtype, out.dtype) == src.dtype)


def upcast_low_precision(gm: fx.GraphModule, sample_inputs) -> fx.GraphModule:
    """Computes float16/bfloat16 pointwise ops in float32, then removes the casts it made redundant.

    Tries to: compute half-precision ops the way fused kernels do (upcast, compute in float32,
    round on store): each op becomes ``to(f32) -> op -> to(f16)``, which matches eager exactly.
    Then it deletes the narrowing casts whose users promote the value straight back to the wider
    dtype (judged by ``meta['val']`` dtypes), so chains stay in float32.
    Models: the removed rounding cast (``x.to(float16).to(float32)`` folded away as a no-op, as
    Inductor's no-op removal once did; a Torch-TensorRT-style lowering pass).
    Flaw: a narrowing cast rounds, and promoting back does not undo it. Worse, a user without
    ``meta['val']`` counts as "promotes back", and the output node has none: the final rounding
    of every half-precision output is dropped, so outputs come back in float32 and unrounded.
    Explicit narrowing casts already in the graph are removed by the same rule.
    """
    graph = gm.graph
    for node in list(graph.nodes):
        if not _is_low_precision_pointwise(node):
            continue
        dtype = _val(node).dtype
        with graph.inserting_before(node):
            wide_args = fx.node.map_arg(node.args, lambda a: _insert_call(
                graph, aten._to_copy.default, (a,), {"dtype": torch.float32}))
            wide = _insert_call(graph, node.target, wide_args, node.kwargs)
            narrow = _insert_call(graph, aten._to_copy.default, (wide,), {"dtype": dtype})
        node.replace_all_uses_with(narrow)
        graph.erase_node(node)
    for node in list(graph.nodes):
        if not _is_narrowing_cast(node):
            continue
        wide = _val(node.args[0]).dtype
        if all(_val(user) is None or _val(user).dtype == wide for user in node.users):
            node.replace_all_uses_with(node.args[0])
            graph.erase_node(node)
    gm.recompile()
    return gm


# --- 11. a contract violation with correct numerics -----------------------------------------------------------


def reinplace_temporaries(gm: fx.GraphModule) -> PassResult:
    """Reuses the buffer of a temporary for the op that consumes it last: ``neg(t) -> neg_(t)``.

    Tries to: save allocations, like ``torch.fx.passes.reinplace``, but only on temporaries (never
    inputs, constants, views or anything aliased), and only when the result has exactly the
    temporary's shape, dtype and strides. The numbers are right.
    Models: a contract violation: the caller asked for a functional graph (Inductor's post-grad
    passes, torch.export and Torch-TensorRT lowering all expect one) and gets in-place ops.
    Flaw: none in the values; the graph it returns contains mutating ops, which the ``functional``
    contract forbids.
    """
    modified = _reinplace_single_use_temporaries(gm.graph)
    if modified:
        gm.recompile()
    return PassResult(gm, modified)


# --- 12. a crash ----------------------------------------------------------------------------------------------

_BYTES_PER_ELEMENT = {
    torch.float64: 8, torch.float32: 4, torch.float16: 2, torch.bfloat16: 2,
    torch.int64: 8, torch.int32: 4, torch.int16: 2, torch.int8: 1, torch.uint8: 1,
}


def annotate_memory_footprint(gm: fx.GraphModule) -> fx.GraphModule:
    """Records each node's output size in bytes in ``meta['bytes']`` for a memory planner.

    Tries to: annotate only; the graph itself is not changed.
    Models: a crash on an unanticipated dtype (a lookup table written for the dtypes the author's
    models use).
    Flaw: the table has no ``torch.bool``, so any graph with a boolean tensor (masks, comparisons,
    bool inputs) raises ``KeyError: torch.bool``; ``dtype.itemsize`` was the way.
    """
    for node in gm.graph.nodes:
        t = _val(node)
        if isinstance(t, torch.Tensor):
            node.meta["bytes"] = t.numel() * _BYTES_PER_ELEMENT[t.dtype]
    return gm


# --- 13. a hang -------------------------------------------------------------------------------------------------


def _neg_to_mul(node) -> bool:
    """Backend canonical form: no unary minus, ``neg(x) -> mul(x, -1)``."""
    if node.target is aten.neg.default:
        node.target, node.args = aten.mul.Scalar, (node.args[0], -1)
        return True
    return False


def _mul_minus_one_to_neg(node) -> bool:
    """Strength reduction: ``mul(x, -1) -> neg(x)``."""
    if node.target is aten.mul.Scalar and len(node.args) == 2 and node.args[1] == -1 and type(node.args[1]) is int:
        node.target, node.args = aten.neg.default, (node.args[0],)
        return True
    return False


_SIMPLIFY_RULES = (_mul_minus_one_to_neg, _neg_to_mul)


def simplify_to_fixpoint(graph: torch.fx.Graph) -> None:
    """Applies local rewrite rules until none applies (Inductor custom-pass style).

    Tries to: run the strength reductions of two rule sets (one from a backend's canonical-form
    pass, one from a generic simplifier) together until the graph stops changing.
    Models: a non-terminating rewrite system (a fixpoint loop without an iteration limit).
    Flaw: ``neg(x) -> mul(x, -1)`` and ``mul(x, -1) -> neg(x)`` undo each other, so a graph with
    a ``neg`` (or ``mul`` by ``-1``) loops forever. Pure Python, so a SIGALRM handler stops it.
    """
    changed = True
    while changed:
        changed = False
        for node in graph.nodes:
            if node.op == "call_function":
                for rule in _SIMPLIFY_RULES:
                    changed |= rule(node)


# --- process killers: for the harness's subprocess isolation --------------------------------------------------


def fingerprint_tensors(gm: fx.GraphModule, sample_inputs) -> fx.GraphModule:
    """Fingerprints sample inputs and constant buffers (shape, dtype, first byte of their data).

    Tries to: key a compile cache cheaply, peeking at memory through ``ctypes`` without a copy.
    Models: a native-code crash (segfault) inside a pass, which kills the interpreter.
    Flaw: a tensor with no elements has no first byte, and its ``data_ptr()`` is 0 (NULL):
    reading through it segfaults. Triggered by any empty sample input or ``get_attr`` constant.
    """
    constants = [getattr(gm, n.target) for n in gm.graph.nodes if n.op == "get_attr"]
    prints = []
    for t in [*sample_inputs, *constants]:
        if isinstance(t, torch.Tensor):
            prints.append((tuple(t.shape), t.dtype, ctypes.c_uint8.from_address(t.data_ptr()).value))
    gm.meta["tensor_fingerprints"] = prints
    return gm


_UNSUPPORTED = frozenset({aten.expand.default, aten.expand_as.default, aten.unfold.default, aten.as_strided.default,
                          aten.diagonal.default})


def reject_unsupported_views(gm: fx.GraphModule) -> fx.GraphModule:
    """Checks the graph against a backend's supported-op list before lowering.

    Tries to: refuse graphs with views the backend cannot express (stride-0 broadcasts,
    overlapping windows, arbitrary strides).
    Models: a pass (or the native library under it) that exits the process instead of raising.
    Flaw: ``os._exit(3)`` on an ``expand``(``_as``)/``unfold``/``as_strided``/``diagonal`` node, so the
    caller gets no exception, no cleanup and exit status 3.
    """
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in _UNSUPPORTED:
            os._exit(3)
    return gm


# --- the table ------------------------------------------------------------------------------------------------

GRAPH_OPTIONS = {
    "functional": {"special_values": True},
    "mutating": {"mutations": True, "special_values": True},
}

PLANTED = {
    # functional; wrong values (sub/div/pow/compare operands swapped, alpha on the wrong operand)
    "operand_swap": canonicalize_broadcast_operands,
    # functional; wrong values, output shape or dtype (keepdim, alpha, slice bounds...), or a raise
    "dropped_kwarg": normalize_call_convention,
    # functional; output dtype (f16 instead of f32, int instead of float, int32 sums) and values
    "dtype_promotion": ExplicitTypePromotion(),
    # functional; wrong values: NaN lost by maximum/minimum/clamp/relu, or made by sqrt(0), x / 0, (-2) ** 2...
    "nan_semantics": lower_for_select_only_backend,
    # mutating (functional too: it reinplaces first); wrong values: two buffers merged across a write
    "cse_across_mutation": reinplace_then_cse,
    # mutating; wrong input state (an input's in-place update is gone) or wrong values
    "dce_side_effect": eliminate_dead_code,
    # functional; aliasing: an output is an input (or another output); with mutations also values
    "aliasing": remove_noop_ops,
    # functional; wrong input state: a graph input is overwritten in place
    "input_overwrite": reinplace_last_use,
    # functional; output shape (view/reshape/squeeze dropped), or later broadcasts raise
    "output_shape": remove_noop_reshapes,
    # functional; output dtype (float32 instead of float16/bfloat16) and unrounded values
    "rounding_cast": upcast_low_precision,
    # functional; contract `functional` broken (in-place ops in the graph), values correct
    "contract_violation": reinplace_temporaries,
    # functional; exception (KeyError: torch.bool) from the pass
    "crash": annotate_memory_footprint,
    # functional; hang (never returns) on any graph with neg or mul by -1
    "hang": simplify_to_fixpoint,
    # functional; the process dies with SIGSEGV on a graph with an empty input or get_attr constant
    "segfault": fingerprint_tensors,
    # functional; the process exits with status 3 on a graph with expand/unfold/as_strided/diagonal
    "exit": reject_unsupported_views,
}

REACHABLE_WITH = {
    "operand_swap": "functional",
    "dropped_kwarg": "functional",
    "dtype_promotion": "functional",
    "nan_semantics": "functional",
    "cse_across_mutation": "mutating",
    "dce_side_effect": "mutating",
    "aliasing": "functional",
    "input_overwrite": "functional",
    "output_shape": "functional",
    "rounding_cast": "functional",
    "contract_violation": "functional",
    "crash": "functional",
    "hang": "functional",
    "segfault": "functional",
    "exit": "functional",
}
"""Which ``GRAPH_OPTIONS`` entry makes each planted bug reachable."""

__all__ = ["GRAPH_OPTIONS", "PLANTED", "REACHABLE_WITH"]
