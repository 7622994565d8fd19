"""One call of a catalog row: its arguments, by the rule of its call kind or of each argument's kind.

A row whose operands depend on each other is drawn whole by its call kind's rule (``calls.py``);
any other row operand by operand (``operands.py``) and argument by argument (``args.py``); then the
row's keyword arguments (``draw_kwargs``).
"""


from __future__ import annotations

import torch

from .._build.builder import Value
from .._catalog import vocabulary as C
from .._draws import choose, flag, integers
from . import calls, compute_calls, custom_calls
from .args import INDEX_KINDS, SHAPE_RULES, own_indices, rule_cat, whole_or_nearly
from .operands import DrawContext, broadcasts_into, broadcasts_with, in_domain, operand, rule_scalar, take_pin


def call_args(draw, ctx: DrawContext, spec: C.OpSpec):
    """Draw ``(args, kwargs)`` for ``spec``: Values for operands, literals for everything else."""
    inplace = spec.category == C.INPLACE
    first_kind = spec.args[0]
    if first_kind == C.TENSORS:
        return rule_cat(draw, ctx, spec)
    if spec.draws_whole_call:
        args, kwargs = CALL_RULES[first_kind](draw, ctx, spec)
        first = next((a for a in args if isinstance(a, Value)), None)
        return tuple(args), draw_kwargs(draw, ctx, spec, first, kwargs)
    first_dtypes = frozenset({torch.bool}) if first_kind == C.MASK else spec.dtypes
    # An *equal operands* pair (x op x) a sixth of a focus step's binary calls, where rewrites go
    # wrong: sub(x, x) -> 0, div(x, x) -> 1, eq(x, x) -> True are wrong only where x holds NaN or an
    # infinity, so with special values on the value holds them (aims.py: aims add to
    # special values); lt(x, x) flipped to gt(x, x) is wrong anywhere, and integer x - x is exact.
    # Not in an edge step: an edge's consumer reads its producer, and a pair there would make a pass
    # that acts on x op x alone act on every edge into that op (discovery took them for edges).
    # An op the pass acts on as x op x (Focus.pairs) is drawn so two times in three, x not chained to
    # the latest focus op's result (which seldom holds NaN or inf).
    # (Of an op whose first operand is a mask, the pair is its two others: where(c, x, x).)
    aimed_pair = getattr(spec, "overload", None) in ctx.pairs
    at = spec.pair_positions
    pair = (ctx.focus_step and not ctx.in_edge and not inplace and at is not None
            and draw(integers(0, 5)) >= (2 if aimed_pair else 5))
    first = operand(draw, ctx, dtypes_ok=first_dtypes, domain=spec.domain_of(0), target=inplace,
                    metadata=spec.mutates_metadata, nonfinite=pair and at[0] == 0, chain=not (pair and aimed_pair))
    # Ops whose first operand is a mask (where) broadcast the rest against the first real operand.
    args: list = [first]
    like = first
    floats_ok = bool(spec.dtypes & C.FLOAT)  # bitwise ops take no float scalar
    names = [a.name for a in spec.overload._schema.arguments]
    for position, kind in enumerate(spec.args[1:], start=1):
        domain = spec.domain_of(position)
        if pair and position == at[1] and spec.dtypes >= {args[at[0]].tensor.dtype} and \
                in_domain(args[at[0]].tensor, domain, ctx.special_values):
            args.append(args[at[0]])
            continue
        pinned = take_pin(ctx, names[position], lambda v: _fits_at(v, spec, kind, like, inplace, ctx)) \
            if position < len(names) and kind in (C.TENSOR, C.TENSOR_OR_SCALAR) else None
        if pinned is not None:  # an edge's producer, at this argument
            args.append(pinned)
            continue
        # A tensor-or-scalar operand is a scalar one time in four, one in two in a focus step (one in
        # four again for an edge's consumer: the edge's pattern, add(mm(a, b), bias), has a tensor there).
        if kind in (C.TENSOR, C.MASK) or (kind == C.TENSOR_OR_SCALAR
                                          and draw(integers(0, 3)) < (2 if ctx.focus_step and not ctx.chained else 3)):
            ok = frozenset({torch.bool}) if kind == C.MASK else spec.dtypes
            if ctx.into_first and kind != C.MASK and first.tensor.dtype in ok:
                ok = frozenset({first.tensor.dtype})  # as an in-place form takes it: the first's dtype and shape
            v = operand(draw, ctx, dtypes_ok=ok, domain=domain, like=like, into=inplace or ctx.into_first,
                        nonfinite=pair and position == at[0])
            args.append(v)
            if like.tensor.dtype is torch.bool and kind != C.MASK and first_kind == C.MASK:
                like = v
        elif kind in (C.SCALAR, C.TENSOR_OR_SCALAR):
            args.append(rule_scalar(draw, ctx, first, domain, inplace=inplace, floats_ok=floats_ok))
        elif kind == C.SCALAR_TENSOR:
            args.append(operand(draw, ctx, dtypes_ok={first.tensor.dtype}, domain=domain, chain=False,
                                shape_fits=lambda s: s == (), make_shape=lambda d: ()))
        elif isinstance(kind, tuple):
            args.append(choose(draw, kind))  # a literal
        elif kind == C.DTYPE:
            args.append(draw(ctx.dtypes))
        else:
            # (view.dtype's target is complex only where complex leaves are drawn: focus steps)
            drawn = SHAPE_RULES[kind](draw, first.tensor, **({"complex_ok": True} if kind == C.VIEW_DTYPE
                                                             and ctx.complex_leaves and ctx.focus_step else {}))
            if ctx.focus_step and ctx.pass_scalars and kind in INDEX_KINDS:
                drawn = own_indices(draw, ctx, kind, drawn, first.tensor)
            if ctx.focus_step and kind == C.SLICE:
                drawn = whole_or_nearly(draw, drawn, first.tensor)
            args.extend(drawn)
    if ctx.focus_step and spec.overload in _BOUNDED:
        args = _in_order(draw, args)
    return tuple(args), draw_kwargs(draw, ctx, spec, first, {})


# Ops whose two scalars after the tensor are a lower and an upper bound: in a focus step they are in
# order three times in four (drawn apart, min > max half the time: a clamp that gives max everywhere,
# which a clamp-folding pass leaves alone, and two clamps in a row were foldable one time in four).
_BOUNDED = frozenset({torch.ops.aten.clamp.default, torch.ops.aten.clamp_.default})


def _in_order(draw, args: list) -> list:
    lo, hi = args[1], args[2]
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and not isinstance(lo, bool) \
            and not isinstance(hi, bool) and lo > hi and draw(integers(0, 3)) != 0:
        return [args[0], hi, lo, *args[3:]]
    return args



def _fits_at(v: Value, spec, kind, like: Value, inplace: bool, ctx) -> bool:
    """Whether ``v`` may be a second operand of ``spec`` beside the first, ``like``."""
    if v.tensor.dtype not in spec.dtypes:
        return False
    if inplace:
        return broadcasts_into(v.tensor.shape, like.tensor.shape)
    return broadcasts_with(v.tensor.shape, like.tensor.shape, ctx.max_numel)


def draw_kwargs(draw, ctx, spec, first, kwargs) -> dict:
    """The row's keyword arguments not already drawn, each optional one half the time, and then
    never its schema default (``alpha=1`` is what leaving it out means: a draw of it would be one
    fewer graph with a real ``alpha``, and a pass that drops ``alpha`` goes unseen there)."""
    inplace = spec.category == C.INPLACE
    floats_ok = bool(spec.dtypes & C.FLOAT)  # bitwise ops take no float scalar
    for kw in spec.kwargs:
        if kw.name in kwargs or (not kw.required and flag(draw) is False):
            continue
        default = None if kw.required else _schema_default(spec.overload, kw.name)
        for _ in range(3):
            if kw.values == C.SCALAR:
                value = rule_scalar(draw, ctx, first, C.ANY_VALUE, inplace=inplace, floats_ok=floats_ok)
            elif kw.values == C.DTYPE:
                value = draw(ctx.dtypes)
                # a focus step's cast goes to a dtype of its operand's kind (float to float, int to int)
                # mostly, as real graphs' up- and down-casts do: drawn up to twice more where it was not
                for _ in range(2 if ctx.focus_step and first is not None else 0):
                    if _kind(value) == _kind(first.tensor.dtype):
                        break
                    value = draw(ctx.dtypes)
            else:
                value = choose(draw, kw.values)
            if default is None or not _equals(value, default):
                kwargs[kw.name] = value
                break
    return kwargs


def _kind(dtype) -> str:
    return "complex" if dtype.is_complex else "float" if dtype.is_floating_point else "bool" \
        if dtype is torch.bool else "int"


def _schema_default(overload, name):
    for arg in overload._schema.arguments:
        if arg.name == name and arg.has_default_value() and arg.default_value is not None:
            return arg.default_value
    return None


def _equals(value, default) -> bool:
    try:
        return type(value) is not bool and value == default  # a bool is a form of its own (alpha=True)
    except Exception:  # noqa: BLE001 - a dtype against a number, say
        return False


# The rule of each call kind (``OpSpec.draws_whole_call``): the whole call, operands first.
CALL_RULES = {
    C.MM: compute_calls.rule_mm,
    C.CONVOLUTION: compute_calls.rule_convolution,
    C.POOL: compute_calls.rule_pool,
    C.LAYER_NORM: compute_calls.rule_layer_norm,
    C.BATCH_NORM: compute_calls.rule_batch_norm,
    C.GROUP_NORM: compute_calls.rule_group_norm,
    C.SDPA: compute_calls.rule_sdpa,
    C.INDEX: calls.rule_index,
    C.INDEX_PUT: calls.rule_index_put,
    C.GATHER: calls.rule_gather,
    C.SCATTER: calls.rule_scatter,
    C.SLICE_SCATTER: calls.rule_slice_scatter,
    C.EMBEDDING: calls.rule_embedding,
    C.TOPK: calls.rule_topk,
    C.STATS: calls.rule_stats,
    C.SPLIT: calls.rule_split,
    C.PAD: calls.rule_pad,
    C.REPEAT: calls.rule_repeat,
    C.ROLL: calls.rule_roll,
    C.STACK: calls.rule_stack,
    C.EXPAND_AS: calls.rule_expand_as,
    C.FILL: calls.rule_fill,
    C.QUANTIZE: calls.rule_quantize,
    C.CUSTOM_CALL: custom_calls.rule_custom,
}

