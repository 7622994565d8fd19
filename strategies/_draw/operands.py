"""Operands: how a call's tensor operands and scalars are picked or made.

Operands are picked from values already in the graph (so graphs are DAGs with reuse, and equal
operands are common) or, as the last choice, created as a new input or constant. Index choices
shrink towards the earliest value, i.e. towards the graph's first input. ``DrawContext`` is what a
rule sees of the graph being drawn.
"""


from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from .._build.builder import CONSTANT, GraphBuilder, StepRejected, Value, writable
from .._catalog import vocabulary as C
from .._catalog.aims import FINITE, INTEGRAL, SMALL, TIES, aimed, with_nonfinite
from .._draws import choose, flag, integers, neutral_or_index
from .._tensors import Layout, broadcastable_shapes, in_float_domain, scalars, tensor_with_layout


def take_pin(ctx, name: str, fits) -> Value | None:
    """The pinned value (``ctx.pin``) where it is for argument ``name`` and ``fits(value)``, else None."""
    if ctx.pin is None or ctx.pin[0] != name or ctx.pin_taken or not fits(ctx.pin[1]):
        return None
    ctx.pin_taken = True
    return ctx.pin[1]


@dataclass
class DrawContext:
    """What every drawing rule needs: the builder and the user's options."""

    builder: GraphBuilder
    dtypes: st.SearchStrategy
    shapes: st.SearchStrategy
    max_inputs: int
    constants: bool
    special_values: bool
    noncontiguous: bool = True
    focus_rows: object = None  # a Weighted of focus rows while a focused graph is drawn
    prefer: Value | None = None  # the latest focus op's result: the first operand of the next one
    scalar_pool: tuple = ()  # scalars a focused graph draws half the time
    pass_scalars: tuple = ()  # of those, the pass's own numbers (3 in 4 pool draws, where they fit)
    focus_step: bool = False  # a focus op's arguments are being drawn: scalars are more likely
    edges: tuple = ()  # (producer row, consumer row) pairs a focused graph draws chained
    edges_only: bool = False  # the focus is edges and no ops: every step draws one
    duplicates: bool = False  # the focus is repeated expressions (Focus.duplicates): a third of the steps re-emit one
    chained: bool = False  # an edge's consumer is being drawn: its first operand is ctx.prefer where it fits
    # an edge's consumer is being drawn with the producer's result at its argument of this name:
    # (name, value), the rule drawing that argument takes it where it fits (and sets pin_taken)
    pin: tuple | None = None
    pin_taken: bool = False
    in_edge: bool = False  # an edge step is being drawn: its calls are the edge's, no equal-operands pair
    pairs: frozenset = frozenset()  # the overloads a focused graph draws as x op x two times in three (Focus.pairs)
    into_first: bool = False  # the other operands take the first's dtype and broadcast into its shape
    aims: tuple = ()  # in a focus step, the value aims of the op being drawn (strategies/_catalog/aims.py)
    seeds: tuple = ()  # SeedGraphs a focused graph embeds (strategies/_draw/seeds.py)
    max_nodes: int = 64
    large: bool = False  # sizes="large": some leaves of 4096-65536 elements, matmul dims over 64
    mutations: bool = False  # graphs(mutations=True): a user op may write an existing value
    complex_leaves: bool = False  # in a focus step, a float32/float64 leaf of an op taking complex is complex at times

    @property
    def max_numel(self) -> int:
        return self.builder.max_numel


_COMPLEX_OF = {torch.float32: torch.complex64, torch.float64: torch.complex128}


def complex_variant(draw, ctx, dtype, dtypes_ok):
    """``dtype``, or its complex variant a quarter of the time in a focus step of a graph with
    ``ctx.complex_leaves``, where the op takes it (the complex dtypes come in as float leaves'
    variants, so an op that takes no complex costs no rejected leaf and no draw; a matcher's op on a
    complex operand is where a check for complex is forgotten)."""
    variant = _COMPLEX_OF.get(dtype)
    if not (ctx.complex_leaves and ctx.focus_step) or variant not in dtypes_ok or not flag(draw):
        return dtype
    return variant


def complex_input(draw, ctx, dtypes_ok) -> Value | None:
    """A new complex input (contiguous, of a drawn shape) of a dtype in ``dtypes_ok``, where
    ``ctx.complex_leaves`` and there is room for an input; else None."""
    complexes = sorted((d for d in dtypes_ok if d.is_complex), key=str)
    if not (ctx.complex_leaves and ctx.focus_step) or not complexes or len(ctx.builder.recipes) >= ctx.max_inputs:
        return None
    shape = tuple(draw(ctx.shapes))
    if math.prod(shape) > ctx.max_numel:
        return None
    _, base, _ = tensor_with_layout(draw, choose(draw, complexes), shape, special_values=ctx.special_values,
                                    noncontiguous=False)
    return ctx.builder.add_input(base, Layout())


def in_domain(t: torch.Tensor, domain: str, special_values: bool) -> bool:
    if domain == C.ANY_VALUE or t.numel() == 0:
        return True
    if special_values and (t.is_floating_point() or t.is_complex()):
        return True
    if t.is_complex():  # a domain bounds both parts
        return in_domain(torch.view_as_real(t.resolve_conj()), domain, special_values)
    if t.dtype is torch.bool:
        return domain not in (C.NONZERO, C.POSITIVE) or bool(t.all())
    integral = not t.is_floating_point()
    checks = {
        C.POSITIVE: lambda: (t > 0).all(),
        C.NONNEG: lambda: (t >= 0).all(),
        C.NONZERO: lambda: (t != 0).all(),
        C.UNIT: lambda: (t.abs() <= 1).all(),
        C.GT_NEG1: lambda: (t > -1).all(),
        C.EXPONENT: lambda: ((t >= 0) & (t <= 3)).all() if integral else (t.abs() <= 3).all(),
        C.BASE: lambda: (t.abs() <= 4).all() if integral else ((t > 0) & (t <= 4)).all(),
    }
    return bool(checks[domain]())


def broadcasts_with(shape, other, limit: int = 2048) -> bool:
    try:
        out = torch.broadcast_shapes(tuple(shape), tuple(other))
    except RuntimeError:
        return False
    return math.prod(out) <= limit


def broadcasts_into(shape, target) -> bool:
    try:
        return tuple(torch.broadcast_shapes(tuple(shape), tuple(target))) == tuple(target)
    except RuntimeError:
        return False


def operand(draw, ctx: DrawContext, *, dtypes_ok, domain=C.ANY_VALUE, like: Value | None = None,
            into: bool = False, target: bool = False, metadata: bool = False, shape_fits=None,
            make_shape=None, chain: bool = True, nonfinite: bool = False) -> Value:
    """Pick an operand: an existing value that fits, or (last choice) a new input or constant.

    ``like``: the first operand, which this one must broadcast with (``into``: broadcast *into*
    its shape, as in-place ops require). ``target``: the operand an in-place op writes to.
    ``shape_fits(shape)``: what shapes fit (matmul's inner dim, conv's channels), and
    ``make_shape(draw)`` the shape of a new leaf; ``chain``: may be the latest focus op's result.
    ``nonfinite``: a floating value holding NaN or an infinity (the operand of an *equal operands*
    pair, ``x op x``): an existing one half the time where one fits, else a new leaf holding them;
    where no floating value fits, picked as any other.
    """
    b = ctx.builder

    def fits(v: Value) -> bool:
        t = v.tensor
        if t.dtype not in dtypes_ok or not in_domain(t, domain, ctx.special_values):
            return False
        if target and not writable(v, metadata=metadata):
            return False
        if shape_fits is not None and not shape_fits(tuple(t.shape)):
            return False
        if like is not None:
            if into:
                return broadcasts_into(t.shape, like.tensor.shape)
            return broadcasts_with(t.shape, like.tensor.shape, ctx.max_numel)
        return True

    chained = ctx.prefer is not None and like is None and chain and fits(ctx.prefer)
    if chained and (ctx.chained or flag(draw)):
        return ctx.prefer  # chain focus ops: producer -> consumer
    if nonfinite and ctx.special_values:
        holding = [v for v in b.values if v.tensor.is_floating_point() and fits(v) and _holds_nonfinite(v.tensor)]
        if holding and flag(draw):
            return choose(draw, holding)
        v = _nonfinite_leaf(draw, ctx, dtypes_ok, domain)
        if v is not None:
            return v
    # In a focus step, an operand is a new leaf holding values aimed at the op half the time (ties
    # with the first operand, values a narrower dtype cannot hold, overflowing magnitudes, zeros).
    if ctx.aims and not target and (shape_fits is None or make_shape is not None) and flag(draw):
        v = _aimed_leaf(draw, ctx, dtypes_ok, domain, like, into, make_shape)
        if v is not None:
            return v
    # In a focus step a second operand is shaped like a bias half the time: the first operand's
    # dtype, and a shape that broadcasts *into* the first's (a matmul plus a bias row, a norm times
    # a weight: what fusion patterns match and where their operand checks go wrong).
    if ctx.focus_step and like is not None and not target and not into and like.tensor.dtype in dtypes_ok \
            and flag(draw):
        dtypes_ok, into = {like.tensor.dtype}, True
    candidates = [v for v in b.values if fits(v)]
    # A second operand is a fresh leaf half the time (False, what it shrinks to, reuses a value):
    # fresh leaves bring the other shapes, ranks and dtypes that broadcasting bugs need.
    fresh = like is not None and not target and flag(draw)
    # Uniform over the candidates and a new leaf; the neutral draw (what Hypothesis favours, and
    # what an operand shrinks to) is the latest candidate, so chains of ops are common.
    choice = len(candidates) if fresh else neutral_or_index(draw, len(candidates) + 1)
    if choice is None:
        choice = max(len(candidates) - 1, 0)
    if choice < len(candidates):
        return candidates[choice]
    return new_leaf(draw, ctx, dtypes_ok=dtypes_ok, domain=domain, like=like, into=into, target=target,
                    make_shape=make_shape)


def _aimed_leaf(draw, ctx: DrawContext, dtypes_ok, domain, like: Value | None, into: bool,
                make_shape=None) -> Value | None:
    """A new contiguous leaf whose values ``aimed`` one of ``ctx.aims`` (as drawn where the aim does
    not apply to its dtype or domain; None where no leaf fits)."""
    b = ctx.builder
    room = len(b.recipes) < ctx.max_inputs
    if not room and not ctx.constants:
        return None
    aim = choose(draw, ctx.aims)
    if make_shape is not None:  # a whole call's operand (matmul, conv): its shape is the rule's
        dtype = like.tensor.dtype if like is not None and like.tensor.dtype in dtypes_ok else draw(ctx.dtypes)
        if dtype not in dtypes_ok:
            dtype = choose(draw, sorted(dtypes_ok, key=str))
        shape = tuple(make_shape(draw))
    elif like is not None and (aim == TIES or flag(draw)):
        dtype, shape = like.tensor.dtype, tuple(like.tensor.shape)  # ties need the first operand's shape
    else:
        dtype = complex_variant(draw, ctx, draw(ctx.dtypes), dtypes_ok)
        integral = sorted((d for d in dtypes_ok if not d.is_floating_point and not d.is_complex), key=str)
        if aim == INTEGRAL and integral:
            dtype = choose(draw, integral)
        elif dtype not in dtypes_ok:  # one the op takes (softmax: a float), not a wasted aim
            dtype = choose(draw, sorted(dtypes_ok, key=str))
        shape = tuple(draw(ctx.shapes)) if like is None else \
            (_shapes_broadcasting_into(draw, tuple(like.tensor.shape)) if into else draw(_broadcastable(tuple(like.tensor.shape))))
    if dtype not in dtypes_ok or math.prod(shape) > ctx.max_numel:
        return None
    _, base, _ = tensor_with_layout(draw, dtype, shape, domain,
                                    special_values=ctx.special_values and aim not in (FINITE, SMALL), noncontiguous=False)
    values = aimed(draw, aim, base, like.tensor if like is not None else None)
    if values is None or not in_domain(values, domain, ctx.special_values) or \
            (values.is_floating_point() and not ctx.special_values and not torch.isfinite(values).all()):
        values = base  # still a fresh leaf of a drawn dtype: existing values are mostly floats where specials fit
    if not in_domain(values, domain, ctx.special_values):
        return None
    return _add_leaf(draw, ctx, values, room)


def _add_leaf(draw, ctx: DrawContext, values: torch.Tensor, room: bool) -> Value:
    """``values`` as a new contiguous input (where there is room) or constant."""
    if room and (not ctx.constants or flag(draw) is False):
        return ctx.builder.add_input(values.cpu(), Layout())
    return ctx.builder.add_constant(values)


def _holds_nonfinite(t: torch.Tensor) -> bool:
    return t.numel() > 0 and not bool(torch.isfinite(t).all())


def _nonfinite_leaf(draw, ctx: DrawContext, dtypes_ok, domain) -> Value | None:
    """A new contiguous floating leaf, its values drawn with special values and then NaN or an
    infinity at a drawn quarter of its positions (``aims.with_nonfinite``); None where the op takes
    no floating dtype, or no leaf fits."""
    room = len(ctx.builder.recipes) < ctx.max_inputs
    floats = sorted((d for d in dtypes_ok if d.is_floating_point), key=str)
    if (not room and not ctx.constants) or not floats:
        return None
    dtype = draw(ctx.dtypes)
    if dtype not in floats:
        dtype = choose(draw, floats)
    shape = tuple(draw(ctx.shapes))
    if math.prod(shape) == 0 or math.prod(shape) > ctx.max_numel:
        return None
    _, base, _ = tensor_with_layout(draw, dtype, shape, domain, special_values=True, noncontiguous=False)
    values = with_nonfinite(draw, base)
    if not in_domain(values, domain, ctx.special_values):
        return None
    return _add_leaf(draw, ctx, values, room)


def new_leaf(draw, ctx: DrawContext, *, dtypes_ok, domain, like, into, target, make_shape=None) -> Value:
    b = ctx.builder
    kinds = []
    if len(b.recipes) < ctx.max_inputs:
        kinds.append("input")
    if ctx.constants and not target:
        kinds.append(CONSTANT)
    if not kinds:
        raise StepRejected("no room for another input and constants are off")
    kind = choose(draw, kinds)
    if len(dtypes_ok) == 1:
        dtype = next(iter(dtypes_ok))  # a mask is bool, a matmul's second operand the first's dtype, ...
    elif like is not None and flag(draw) is False:
        dtype = like.tensor.dtype  # same dtype first: mixing is the exception
    else:
        dtype = complex_variant(draw, ctx, draw(ctx.dtypes), dtypes_ok)
    if dtype not in dtypes_ok:
        raise StepRejected(f"{dtype} not supported here")
    if make_shape is not None:
        shape = tuple(make_shape(draw))
    elif like is None:
        shape = draw(ctx.shapes)
    elif into:
        shape = _shapes_broadcasting_into(draw, tuple(like.tensor.shape))
    else:
        shape = draw(_broadcastable(tuple(like.tensor.shape)))
    if math.prod(shape) > ctx.max_numel:
        raise StepRejected("leaf too large")
    tensor, base, layout = tensor_with_layout(
        draw, dtype, shape, domain, special_values=ctx.special_values,
        noncontiguous=ctx.noncontiguous and kind == "input")
    if kind == "input":
        return b.add_input(base, layout)
    return b.add_constant(tensor)


def _shapes_broadcasting_into(draw, shape):
    dropped = draw(integers(0, len(shape)))
    return tuple(1 if flag(draw) else n for n in shape[dropped:])


def rule_scalar(draw, ctx, like, domain, *, inplace=False, floats_ok=True):
    """A scalar operand for ``like``'s dtype. An integer tensor gets a float scalar half the time
    where the op allows (``int_tensor * 0.5`` is float: type promotion lives there), never when
    written into in place. ``floats_ok``: the op takes float scalars with integer tensors."""
    dtype = like.tensor.dtype
    floats_ok = floats_ok and not inplace and dtype is not torch.bool
    value = _pool_scalar(draw, ctx, dtype, domain, floats_ok) if ctx.scalar_pool else None
    if value is None:
        if floats_ok and not dtype.is_floating_point and draw(integers(0, 3)) >= 2:
            value = draw(scalars(torch.float32, domain, special_values=ctx.special_values))
        else:
            value = draw(scalars(dtype, domain, special_values=ctx.special_values))
    return value  # never a float for an integer tensor written in place: floats_ok is False there


def _pool_scalar(draw, ctx, dtype, domain, floats_ok):
    """A scalar from the focus pool that suits ``dtype`` and ``domain`` (else None): half the time,
    three times in four in a focus step; the pass's own numbers three times in four of those (a
    pass compares against its constants: the basic ones would dilute them). An integral value comes as
    an int or as a float (``2`` and ``2.0`` promote differently); a fractional one reaches an
    integer tensor only where ``floats_ok``."""
    if dtype is torch.bool or draw(integers(0, 3)) < (1 if ctx.focus_step else 2):
        return None
    integral = not dtype.is_floating_point

    def fits(v) -> bool:
        return ((floats_ok or not integral or float(v).is_integer())
                and (domain == C.ANY_VALUE or in_float_domain(v, domain)))

    own = [v for v in ctx.pass_scalars if fits(v)]
    fit = own if own and draw(integers(0, 3)) != 0 else [v for v in ctx.scalar_pool if fits(v)]
    if not fit:
        return None
    v = choose(draw, fit)
    if not float(v).is_integer():
        return float(v)
    return int(v) if (integral and not floats_ok) or flag(draw) else float(v)


@functools.lru_cache(maxsize=1024)
def _broadcastable(shape):
    # Up to rank 3 whatever ``shape``'s rank: a second operand of higher rank than the first
    # (x[4] - y[3, 4]) is where operand-order rewrites break.
    return broadcastable_shapes(shape, max_side=4, max_dims=max(len(shape), 3))
