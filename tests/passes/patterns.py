"""Pattern passes: rewrites that fire only on a particular op chain, constant or dtype, each as a
planted bug and as its correct twin of the same shape.

These are the passes a generator that draws ops uniformly misses: the rewrite needs ``log`` fed by
``exp``, a ``where`` whose mask is a ``lt``, a cast of a cast, ``pow`` by the constant 2, a graph
that returns two of its inputs. Each bug is the classic one of its pattern (an identity that fails
at overflow, a comparison flipped without thinking of equality, a constant compared by value where
its type matters, a loop that stops at the first match). Each twin matches the same shape and
rewrites it correctly, so the harness must stay quiet on it and must not call it vacuous.

``PATTERNS`` maps a name to ``(buggy, correct)``; ``PATTERN_OPTIONS`` gives the ``verify()``
options each pair needs (the repair pair is checked under its contract).
"""

from __future__ import annotations

import torch
import torch.fx as fx

from tests.passes.planted import _in_layout_of, _insert_call, _output_node, _val

aten = torch.ops.aten


def _arg(node: fx.Node, i: int, name: str, default=None):
    """Argument ``i`` of ``node``, positional or by ``name``."""
    return node.args[i] if len(node.args) > i else node.kwargs.get(name, default)


def _is_call(node, *targets) -> bool:
    return isinstance(node, fx.Node) and node.op == "call_function" and node.target in targets


def _replace(gm: fx.GraphModule, node: fx.Node, target, args) -> None:
    """Replace ``node`` by ``target(*args)``, inserted just before it."""
    with gm.graph.inserting_before(node):
        new = _insert_call(gm.graph, target, args)
    node.replace_all_uses_with(new)
    gm.graph.erase_node(node)


def _replace_by_value(gm: fx.GraphModule, node: fx.Node, x: fx.Node) -> None:
    """Replace ``node`` by a copy of the value ``x`` it equals: ``x`` itself would let an output (or a
    view of one) alias an input where the original's did not (the harness found that in the twin)."""
    _replace(gm, node, aten.clone.default, (x,))


def _done(gm: fx.GraphModule) -> fx.GraphModule:
    gm.graph.lint()
    gm.recompile()
    return gm


# --- 1. a chain of two ops folded to its argument -------------------------------------------------------


def fold_log_exp(gm: fx.GraphModule) -> fx.GraphModule:
    """``log(exp(x)) -> x``.

    Flaw: the identity holds in the reals only. ``exp`` overflows to inf above ~88 (f32) or ~11
    (f16) and underflows to 0 below ~-104, where ``log(exp(x))`` is inf or -inf and not ``x``;
    an integer or bool ``x`` gives a float result that the rewrite makes integral.
    """
    for node in list(gm.graph.nodes):
        if _is_call(node, aten.log.default) and _is_call(node.args[0], aten.exp.default):
            _replace_by_value(gm, node, node.args[0].args[0])
    return _done(gm)


def fold_double_negation(gm: fx.GraphModule) -> fx.GraphModule:
    """Twin: ``neg(neg(x)) -> x``, exact in every dtype ``neg`` takes (integers wrap both ways,
    -0.0 and NaN keep their sign bit)."""
    for node in list(gm.graph.nodes):
        if _is_call(node, aten.neg.default) and _is_call(node.args[0], aten.neg.default):
            _replace_by_value(gm, node, node.args[0].args[0])
    return _done(gm)


# --- 2. a round trip of casts dropped --------------------------------------------------------------------

_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
# dtype -> the dtypes that hold every one of its values exactly (besides itself)
_EXACTLY_HELD = {
    torch.bool: frozenset({torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, *_FLOATS}),
    torch.uint8: frozenset({torch.int16, torch.int32, torch.int64, *_FLOATS}),
    torch.int8: frozenset({torch.int16, torch.int32, torch.int64, *_FLOATS}),
    torch.int16: frozenset({torch.int32, torch.int64, torch.float32, torch.float64}),
    torch.int32: frozenset({torch.int64, torch.float64}),
    torch.float16: frozenset({torch.float32, torch.float64}),
    torch.bfloat16: frozenset({torch.float32, torch.float64}),
    torch.float32: frozenset({torch.float64}),
}


def _plain_cast(node) -> torch.dtype | None:
    """The dtype of a ``_to_copy`` that only changes dtype (None for anything else)."""
    if not _is_call(node, aten._to_copy.default) or set(node.kwargs) - {"dtype"}:
        return None
    return node.kwargs.get("dtype")


def _round_trips(gm: fx.GraphModule):
    """``(outer, x, via)`` for every ``_to_copy(_to_copy(x, via), x.dtype)``."""
    for node in list(gm.graph.nodes):
        back, inner = _plain_cast(node), node.args[0] if node.op == "call_function" and node.args else None
        via = _plain_cast(inner)
        if back is None or via is None or _val(inner.args[0]) is None or _val(inner.args[0]).dtype != back:
            continue
        yield node, inner.args[0], via


def drop_cast_round_trip(gm: fx.GraphModule) -> fx.GraphModule:
    """``x.to(a).to(x.dtype) -> x``: a cast there and back is a no-op.

    Flaw: only when ``a`` holds every value of ``x``'s dtype. Through f16 an f32 value is rounded
    (and overflows above 65504), through an integer dtype a float is truncated, through bool every
    nonzero becomes 1.
    """
    for node, x, _ in _round_trips(gm):
        _replace_by_value(gm, node, x)
    return _done(gm)


def drop_widening_round_trip(gm: fx.GraphModule) -> fx.GraphModule:
    """Twin: drops the round trip only through a dtype that holds every value of ``x``'s
    (f32 -> f64 -> f32, int8 -> f16 -> int8, bool -> anything -> bool)."""
    for node, x, via in _round_trips(gm):
        if via == _val(x).dtype or via in _EXACTLY_HELD.get(_val(x).dtype, ()):
            _replace_by_value(gm, node, x)
    return _done(gm)


# --- 3. a comparison flipped -----------------------------------------------------------------------------


def _where_of_lt(gm: fx.GraphModule):
    for node in list(gm.graph.nodes):
        if _is_call(node, aten.where.self) and _is_call(node.args[0], aten.lt.Tensor):
            yield node, node.args[0]


def invert_where_condition(gm: fx.GraphModule) -> fx.GraphModule:
    """``where(a < b, x, y) -> where(a > b, y, x)``, so that every select tests ``gt``.

    Flaw: the negation of ``a < b`` is ``a >= b`` (and not even that where a NaN is compared):
    where ``a == b`` the rewrite picks ``x`` instead of ``y``.
    """
    for node, cond in _where_of_lt(gm):
        a, b = cond.args[0], cond.args[1]
        with gm.graph.inserting_before(node):
            gt = _insert_call(gm.graph, aten.gt.Tensor, (a, b))
        _replace(gm, node, aten.where.self, (gt, node.args[2], node.args[1]))
    return _done(gm)


def canonicalize_where_condition(gm: fx.GraphModule) -> fx.GraphModule:
    """Twin: ``where(a < b, x, y) -> where(b > a, x, y)`` (the same predicate, NaN included), for a
    tensor ``b`` (a scalar cannot come first). The result keeps the select's layout: with ``b``
    first, the comparison's (and so the select's) strides follow ``b``'s, not ``a``'s."""
    for node, cond in _where_of_lt(gm):
        a, b = cond.args[0], cond.args[1]
        if not isinstance(b, fx.Node):
            continue
        with gm.graph.inserting_before(node):
            gt = _insert_call(gm.graph, aten.gt.Tensor, (b, a))
            new = _in_layout_of(gm.graph, _insert_call(gm.graph, aten.where.self, (gt, node.args[1], node.args[2])),
                                _val(node))
        node.replace_all_uses_with(new)
        gm.graph.erase_node(node)
    return _done(gm)


# --- 4. a constant compared by value where its type matters ------------------------------------------------


def _squares(gm: fx.GraphModule):
    for node in list(gm.graph.nodes):
        if _is_call(node, aten.pow.Tensor_Scalar) and _val(node.args[0]) is not None and node.args[1] == 2:
            yield node, node.args[0], node.args[1]


def square_to_mul(gm: fx.GraphModule) -> fx.GraphModule:
    """``pow(x, 2) -> mul(x, x)``.

    Flaw: ``2.0 == 2``, but ``pow(int_tensor, 2.0)`` is a float tensor and ``x * x`` stays integral;
    and ``pow(bool_tensor, 2)`` is int64 where ``x * x`` is bool.
    """
    for node, x, _ in _squares(gm):
        _replace(gm, node, aten.mul.Tensor, (x, x))
    return _done(gm)


def square_to_mul_typed(gm: fx.GraphModule) -> fx.GraphModule:
    """Twin: the same rewrite where the result dtype cannot change: a float ``x``, or an integer
    (not bool) ``x`` raised to the int 2."""
    for node, x, exponent in _squares(gm):
        dtype = _val(x).dtype
        if dtype.is_floating_point or (dtype != torch.bool and isinstance(exponent, int)):
            _replace(gm, node, aten.mul.Tensor, (x, x))
    return _done(gm)


def integral_scalars(gm: fx.GraphModule) -> fx.GraphModule:
    """``mul(x, 2.0) -> mul(x, 2)``: integral float scalars written as ints (a smaller literal for the
    backend, one node where CSE saw two).

    Flaw: a float scalar promotes an integer tensor to float (``int_tensor * 2.0`` is float32);
    written as an int, the product stays integral: wrong dtype, and it can overflow.
    """
    for node in gm.graph.nodes:
        if _is_call(node, aten.mul.Tensor, aten.mul.Scalar) and isinstance(node.args[1], float):
            if node.args[1].is_integer() and abs(node.args[1]) < 2**31:
                node.args = (node.args[0], int(node.args[1]), *node.args[2:])
    return _done(gm)


def integral_scalars_on_floats(gm: fx.GraphModule) -> fx.GraphModule:
    """Twin: the same, only where ``x`` is a float tensor (its dtype wins over any scalar's)."""
    for node in gm.graph.nodes:
        if _is_call(node, aten.mul.Tensor, aten.mul.Scalar) and isinstance(node.args[1], float):
            x = _val(node.args[0])
            if x is not None and x.is_floating_point() and node.args[1].is_integer() and abs(node.args[1]) < 2**31:
                node.args = (node.args[0], int(node.args[1]), *node.args[2:])
    return _done(gm)


# --- 5. an op swapped for its look-alike -----------------------------------------------------------------


def maximum_to_fmax(gm: fx.GraphModule) -> fx.GraphModule:
    """``maximum(a, b) -> fmax(a, b)`` (the backend's max instruction).

    Flaw: ``maximum`` propagates NaN, ``fmax`` returns the other operand.
    """
    for node in list(gm.graph.nodes):
        if _is_call(node, aten.maximum.default):
            _replace(gm, node, aten.fmax.default, node.args)
    return _done(gm)


def maximum_to_fmax_integral(gm: fx.GraphModule) -> fx.GraphModule:
    """Twin: the same, only where neither operand is a float tensor (no NaN to propagate)."""
    for node in list(gm.graph.nodes):
        if _is_call(node, aten.maximum.default):
            vals = [_val(a) for a in node.args]
            if all(v is not None and not v.is_floating_point() for v in vals):
                _replace(gm, node, aten.fmax.default, node.args)
    return _done(gm)


# --- 6. a loop that stops at the first match ----------------------------------------------------------------


def _returned_inputs(gm: fx.GraphModule):
    output = _output_node(gm.graph)
    return output, [(i, a) for i, a in enumerate(output.args[0]) if isinstance(a, fx.Node) and a.op == "placeholder"]


def repair_first_input_output(gm: fx.GraphModule) -> fx.GraphModule:
    """Returns a copy where the graph returns an input directly (Torch-TensorRT's
    ``repair_input_as_output``: an engine's outputs must be its own buffers).

    Flaw: it repairs the first returned input and stops, so a graph returning two inputs still
    returns the second.
    """
    output, returned = _returned_inputs(gm)
    for i, x in returned[:1]:
        with gm.graph.inserting_before(output):
            copy = _insert_call(gm.graph, aten.clone.default, (x,))
        output.args = (tuple(copy if j == i else a for j, a in enumerate(output.args[0])),)
    return _done(gm)


def repair_input_outputs(gm: fx.GraphModule) -> fx.GraphModule:
    """Twin: a copy for every returned input (one per output position)."""
    output, returned = _returned_inputs(gm)
    outs = list(output.args[0])
    for i, x in returned:
        with gm.graph.inserting_before(output):
            outs[i] = _insert_call(gm.graph, aten.clone.default, (x,))
    output.args = (tuple(outs),)
    return _done(gm)


PATTERNS = {
    "log_exp": (fold_log_exp, fold_double_negation),
    "cast_round_trip": (drop_cast_round_trip, drop_widening_round_trip),
    "where_compare": (invert_where_condition, canonicalize_where_condition),
    "square": (square_to_mul, square_to_mul_typed),
    "integral_scalar": (integral_scalars, integral_scalars_on_floats),
    "fmax": (maximum_to_fmax, maximum_to_fmax_integral),
    "repair_first": (repair_first_input_output, repair_input_outputs),
}
"""name -> (the planted bug, its correct twin)."""

PATTERN_OPTIONS = {name: {} for name in PATTERNS} | {"repair_first": {"ensure": ["no-input-as-output"]}}
"""name -> the ``verify()`` options both passes of the pair are checked with."""

__all__ = ["PATTERNS", "PATTERN_OPTIONS"]
