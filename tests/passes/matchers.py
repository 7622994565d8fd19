"""A corpus of matcher passes in the shapes real pipelines write them, each with a correct twin and a
buggy one (issue 56): how often a pass's rewrite fires on the search's graphs, and whether its bug is
caught, on passes the generator was not written against.

Each pass matches a producer -> consumer edge at an argument, under a relation on their arguments
(which dims, which bounds, which scalars), as these do:

- Inductor's post-grad and joint-graph passes (``fx_passes/post_grad.py``: ``addmm`` fusion,
  ``remove_noop_ops``; ``joint_graph.py``: ``remove_no_ops``, redundant views and converts,
  ``pointless_cumsum``), its ``split_cat.py`` (slice of cat, split then cat);
- Torch-TensorRT's ``lowering/passes/`` (``remove_detach``, ``remove_input_alias_fixing_clones``,
  ``repair_input_as_output``, view and permute folding);
- vLLM's ``compilation/`` passes (``NoOpEliminationPass``: slices and reshapes that change nothing;
  the ``rms_norm`` + quant fusions over ``auto_functionalized_v2``, examples/).

``CORPUS`` names each: its correct twin, its buggy twin, what the bug gets wrong, the IR, graph kind
and user ops it is verified with. The correct twins keep what the rewritten node produced (its
values, dtype, shape and strides: a later node's ``meta['val']`` reads them) and never make an
output one with an input or another output; each buggy twin differs from its correct twin in the
one check a matcher of that shape gets wrong.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Callable

import torch
import torch.fx as fx

aten = torch.ops.aten
CONTIGUOUS = torch.contiguous_format


# --- the machinery every pass here shares ------------------------------------------------------------


def _rewrite(gm: fx.GraphModule, match: Callable) -> fx.GraphModule:
    """``match(graph, node)`` on every call node, in order: a node it returns replaces ``node``
    (inserted before it by ``match``) and takes its ``meta['val']`` where it has none (what the
    replaced node produced: a later match reads it); then dead code goes and the module is
    recompiled."""
    g = gm.graph
    for node in list(g.nodes):
        if node.op != "call_function" or node.graph is not g:
            continue
        with g.inserting_before(node):
            new = match(g, node)
        if new is not None and new is not node:
            if "val" in node.meta and "val" not in new.meta:
                new.meta["val"] = node.meta["val"]
            node.replace_all_uses_with(new)
            g.erase_node(node)
    g.eliminate_dead_code()
    gm.recompile()
    _refresh_meta(gm)
    return gm


def _refresh_meta(gm: fx.GraphModule) -> None:
    """Every node's ``meta['val']`` propagated again from the placeholders' (as Inductor's passes keep
    them with a FakeTensorUpdater): a replacement with other strides than the node it replaced leaves
    its readers' meta right."""
    from torch._guards import detect_fake_mode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    vals = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
    mode = detect_fake_mode(vals)
    if mode is None:
        return
    with mode:
        saved, mode.allow_non_fake_inputs = mode.allow_non_fake_inputs, True
        try:
            FakeTensorProp(gm, mode).propagate_dont_convert_inputs(*vals)
        finally:
            mode.allow_non_fake_inputs = saved


def _is(node, *targets) -> bool:
    return isinstance(node, fx.Node) and node.op == "call_function" and node.target in targets


def _val(node):
    return node.meta.get("val") if isinstance(node, fx.Node) else None


def _arg(node, i: int, name: str, default=None):
    """Argument ``i`` (or keyword ``name``) of a call, or ``default``."""
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(name, default)


def _dim(d: int, rank: int) -> int:
    return d % rank if rank else 0


def _copy(g, x):
    """A contiguous copy: a new buffer, never an alias of ``x``."""
    return g.call_function(aten.clone.default, (x,), {"memory_format": CONTIGUOUS})


def _same_layout(a, b) -> bool:
    """Same shape, dtype and strides (what a later node's meta reads)."""
    va, vb = _val(a), _val(b)
    return va is not None and vb is not None and va.shape == vb.shape and va.dtype == vb.dtype \
        and va.stride() == vb.stride()


# --- 1. bmm(a, transpose(b, 1, 2)) -> (b @ a^T)^T (a layout rewrite of a transposed operand) ------------


def _bmm_transposed(check_dims: bool):
    def match(g, n):
        if not _is(n, aten.bmm.default) or not _is(n.args[1], aten.transpose.int):
            return None
        t = n.args[1]
        if check_dims and sorted(_dim(d, 3) for d in t.args[1:3]) != [1, 2]:
            return None
        a, b = n.args[0], t.args[0]
        m = g.call_function(aten.bmm.default, (b, g.call_function(aten.transpose.int, (a, 1, 2))))
        return _copy(g, g.call_function(aten.transpose.int, (m, 1, 2)))
    return match


def bmm_transposed(gm):
    return _rewrite(gm, _bmm_transposed(True))


def bmm_transposed_any_dims(gm):
    """Buggy: takes any transpose for the last two dims' (a matcher that checks the op, not its dims)."""
    return _rewrite(gm, _bmm_transposed(False))


# --- 2. slice(cat([a, b, ...], d), d, start, end) -> the piece it selects (Inductor split_cat) -----------


def _slice_of_cat(check_dim: bool):
    def match(g, n):
        if not _is(n, aten.slice.Tensor) or not _is(n.args[0], aten.cat.default):
            return None
        cat = n.args[0]
        tensors, out = cat.args[0], _val(cat)
        if out is None or out.dim() == 0 or len(cat.users) != 1:
            return None  # (another reader of the cat, an output or a view of it, shares the slice's storage)
        cdim = _dim(_arg(cat, 1, "dim", 0), out.dim())
        dim, start, end, step = (_arg(n, 1, "dim", 0), _arg(n, 2, "start", None), _arg(n, 3, "end", None),
                                 _arg(n, 4, "step", 1))
        if check_dim and _dim(dim, out.dim()) != cdim:
            return None
        if step != 1 or start is None or end is None:
            return None
        offset = 0
        for piece in tensors:
            size = _val(piece).shape[cdim] if _val(piece).dim() == out.dim() else 0
            if start == offset and (end == offset + size or (end >= out.shape[cdim] and offset + size == out.shape[cdim])) \
                    and size > 0 and _val(piece).dtype == out.dtype:
                return _copy(g, piece)
            offset += size
        return None
    return match


def slice_of_cat(gm):
    return _rewrite(gm, _slice_of_cat(True))


def slice_of_cat_any_dim(gm):
    """Buggy: reads the slice's bounds as the cat's offsets whatever dim it slices."""
    return _rewrite(gm, _slice_of_cat(False))


# --- 3. slice(x, d, 0, end, 1) with end >= x.size(d) -> x (vLLM's NoOpEliminationPass) -----------------


def _noop_slice(slack: int):
    def match(g, n):
        if not _is(n, aten.slice.Tensor):
            return None
        x, v = n.args[0], _val(n.args[0])
        if v is None or v.dim() == 0:
            return None
        dim, start, end, step = (_arg(n, 1, "dim", 0), _arg(n, 2, "start", None), _arg(n, 3, "end", None),
                                 _arg(n, 4, "step", 1))
        if start in (None, 0) and step == 1 and end is not None and end >= v.shape[_dim(dim, v.dim())] - slack:
            return g.call_function(aten.alias.default, (x,))  # a view, as the slice was
        return None
    return match


def noop_slice(gm):
    return _rewrite(gm, _noop_slice(0))


def noop_slice_off_by_one(gm):
    """Buggy: a slice ending one short of the dim's size is taken for the whole dim."""
    return _rewrite(gm, _noop_slice(1))


# --- 4. sub(x, x) -> x * 0 (NaN and inf kept: NaN * 0 and inf * 0 are NaN, as inf - inf is) ---------------


def sub_self_to_mul_by_zero(gm):
    """sub(x, x) -> mul(x, 0): 0 where x is finite, NaN where it is NaN or infinite, as x - x is (the
    sign of a zero aside: -1.0 * 0 is -0.0)."""
    def match(g, n):
        if not _is(n, aten.sub.Tensor) or len(n.args) < 2 or n.args[0] is not n.args[1] or "alpha" in n.kwargs:
            return None
        v = _val(n.args[0])
        if v is None or v.dtype is torch.bool or v.is_complex():
            return None
        return g.call_function(aten.mul.Tensor, (n.args[0], 0))
    return _rewrite(gm, match)


def sub_self_to_zeros(gm):
    """Buggy: sub(x, x) -> zeros_like(x), where x - x is NaN for x = NaN or +-inf."""
    def match(g, n):
        if not _is(n, aten.sub.Tensor) or len(n.args) < 2 or n.args[0] is not n.args[1] or "alpha" in n.kwargs:
            return None
        v = _val(n.args[0])
        if v is None or v.dtype is torch.bool or v.is_complex() or not v.is_contiguous():
            return None
        return g.call_function(aten.zeros_like.default, (n.args[0],), {"memory_format": CONTIGUOUS})
    return _rewrite(gm, match)


# --- 5. add(mm(a, b), bias) -> addmm(bias, a, b) (Inductor post-grad's addmm fusion) --------------------------


def _addmm(check_alpha: bool):
    def match(g, n):
        if not _is(n, aten.add.Tensor) or len(n.args) < 2:
            return None
        for mm, bias in ((n.args[0], n.args[1]), (n.args[1], n.args[0])):
            if not _is(mm, aten.mm.default) or not isinstance(bias, fx.Node):
                continue
            out, vb, vn = _val(mm), _val(bias), _val(n)
            if vb is None or vn is None or vb.dtype != out.dtype or vn.shape != out.shape or vb.dim() > 2:
                continue
            if out.is_complex():  # addmm scales both terms by 1 + 0j: NaN in a part where the other is
                continue          # infinite (the search found this twin wrong once complex mm was drawn)
            alpha = n.kwargs.get("alpha", 1)
            if check_alpha and alpha != 1:
                continue
            if len(mm.users) != 1:
                continue
            return g.call_function(aten.addmm.default, (bias, *mm.args))
        return None
    return match


def addmm_fusion(gm):
    return _rewrite(gm, _addmm(True))


def addmm_fusion_dropping_alpha(gm):
    """Buggy (as torch 2.13's pattern): add(mm, bias, alpha=0.5) fused as if alpha were 1."""
    return _rewrite(gm, _addmm(False))


# --- 6. transpose(transpose(x, a, b), a, b) -> x ------------------------------------------------------------------


def _double_transpose(check_dims: bool):
    def match(g, n):
        if not _is(n, aten.transpose.int) or not _is(n.args[0], aten.transpose.int):
            return None
        inner = n.args[0]
        rank = _val(inner).dim()
        if check_dims and {_dim(d, rank) for d in n.args[1:3]} != {_dim(d, rank) for d in inner.args[1:3]}:
            return None
        return g.call_function(aten.alias.default, (inner.args[0],))
    return match


def double_transpose(gm):
    return _rewrite(gm, _double_transpose(True))


def double_transpose_any_dims(gm):
    """Buggy: two transposes cancel whatever dims each swaps."""
    return _rewrite(gm, _double_transpose(False))


# --- 7. permute(permute(x, p), q) -> permute(x, p[q]) (Torch-TensorRT-style permute folding) ---------------------


def _permute_fold(right_order: bool):
    def match(g, n):
        if not _is(n, aten.permute.default) or not _is(n.args[0], aten.permute.default):
            return None
        inner = n.args[0]
        rank = _val(inner).dim()
        p = [_dim(d, rank) for d in inner.args[1]]
        q = [_dim(d, rank) for d in n.args[1]]
        folded = [p[i] for i in q] if right_order else [q[i] for i in p]
        return g.call_function(aten.permute.default, (inner.args[0], folded))
    return match


def permute_fold(gm):
    return _rewrite(gm, _permute_fold(True))


def permute_fold_composed_backwards(gm):
    """Buggy: composes the two permutations in the wrong order (right for inverses, wrong otherwise)."""
    return _rewrite(gm, _permute_fold(False))


# --- 8. view(view(x, s1), s2) -> view(x, s2) (vLLM's reshape no-op elimination, folding) ------------------------


_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)


def _view_fold(keep_outer: bool):
    def match(g, n):
        if not _is(n, *_VIEWS) or not _is(n.args[0], *_VIEWS):
            return None
        inner = n.args[0]
        if not _val(inner.args[0]).is_contiguous():
            return None
        shape = n.args[1] if keep_outer else list(_val(inner).shape)
        return g.call_function(n.target, (inner.args[0], shape))
    return match


def view_fold(gm):
    return _rewrite(gm, _view_fold(True))


def view_fold_keeping_the_inner_shape(gm):
    """Buggy: the folded view takes the inner view's shape."""
    return _rewrite(gm, _view_fold(False))


# --- 9. expand(x, size) with size == x.shape -> x (no-op expand) -----------------------------------------------


def _noop_expand(check_sizes: bool):
    def match(g, n):
        if not _is(n, aten.expand.default):
            return None
        x, size = n.args[0], list(n.args[1])
        shape = list(_val(x).shape)
        if len(size) != len(shape):
            return None
        if check_sizes and any(s not in (-1, d) for s, d in zip(size, shape)):
            return None
        return g.call_function(aten.alias.default, (x,))
    return match


def noop_expand(gm):
    return _rewrite(gm, _noop_expand(True))


def noop_expand_by_rank(gm):
    """Buggy: an expand to as many dims is taken for a no-op, whatever the sizes."""
    return _rewrite(gm, _noop_expand(False))


# --- 10. cat([x]) -> a copy of x (Torch-TensorRT's single-input cat removal) -------------------------------------


def _single_cat(copy: bool):
    def match(g, n):
        if not _is(n, aten.cat.default) or len(n.args[0]) != 1:
            return None
        x = n.args[0][0]
        if not _val(x).is_contiguous() or _val(x).dim() == 0:
            return None
        return _copy(g, x) if copy else x
    return match


def single_cat(gm):
    return _rewrite(gm, _single_cat(True))


def single_cat_returning_its_input(gm):
    """Buggy: cat([x]) -> x itself: what was a new buffer is now x (an output aliasing an input)."""
    return _rewrite(gm, _single_cat(False))


# --- 11. where(c, x, x) -> x (joint_graph's remove_no_ops shape) -------------------------------------------------


def _where_same(check_broadcast: bool):
    def match(g, n):
        if not _is(n, aten.where.self) or n.args[1] is not n.args[2] or not isinstance(n.args[1], fx.Node):
            return None
        x = n.args[1]
        if check_broadcast and _val(n).shape != _val(x).shape:
            return None
        return _copy(g, x) if _val(x).is_contiguous() else None
    return match


def where_same_branches(gm):
    return _rewrite(gm, _where_same(True))


def where_same_branches_ignoring_the_condition(gm):
    """Buggy: drops the condition, which may broadcast the result to a bigger shape."""
    return _rewrite(gm, _where_same(False))


# --- 12. mul(x, 1) -> x (remove_no_ops: a scalar 1 of the right type) -----------------------------------------


def _is_one(value, v, exact_type: bool) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != 1:
        return False
    # (not on a complex x: x * 1 multiplies by 1 + 0j, (a + bi)(1 + 0i) = (a - b*0) + (a*0 + b)i, NaN in
    # a part where the other is infinite; the search found this twin wrong once complex x was drawn)
    return not exact_type or (not v.is_complex() and (isinstance(value, int) or v.is_floating_point()))


def _mul_one(exact_type: bool):
    def match(g, n):
        if not _is(n, aten.mul.Tensor, aten.mul.Scalar) or len(n.args) < 2 or isinstance(n.args[1], fx.Node):
            return None
        x = n.args[0]
        if not _is_one(n.args[1], _val(x), exact_type) or not _val(x).is_contiguous() or _val(x).dtype is torch.bool:
            return None
        return _copy(g, x)
    return match


def mul_by_one(gm):
    return _rewrite(gm, _mul_one(True))


def mul_by_one_of_any_type(gm):
    """Buggy: takes 1.0 for 1 on an integer tensor, where int * 1.0 is a float."""
    return _rewrite(gm, _mul_one(False))


# --- 13. add(x, zeros_like(y)) -> x ----------------------------------------------------------------------------


def _add_zeros(check_shape: bool):
    def match(g, n):
        if not _is(n, aten.add.Tensor) or len(n.args) < 2 or not _is(n.args[1], aten.zeros_like.default):
            return None
        x = n.args[0]
        if not isinstance(x, fx.Node) or not _val(x).is_contiguous() or "alpha" in n.kwargs:
            return None
        if check_shape and (_val(n).shape != _val(x).shape or _val(n).dtype != _val(x).dtype):
            return None
        return _copy(g, x)
    return match


def add_zeros(gm):
    return _rewrite(gm, _add_zeros(True))


def add_zeros_ignoring_broadcast(gm):
    """Buggy: the zeros may broadcast x to a bigger shape, or promote it to another dtype."""
    return _rewrite(gm, _add_zeros(False))


# --- 14. pow(x, 2) -> mul(x, x) ------------------------------------------------------------------------------


def _pow_two(exact_type: bool):
    def match(g, n):
        if not _is(n, aten.pow.Tensor_Scalar) or n.args[1] != 2 or isinstance(n.args[1], bool):
            return None
        x = n.args[0]
        if exact_type and isinstance(n.args[1], float) and not _val(x).is_floating_point():
            return None
        return g.call_function(aten.mul.Tensor, (x, x))
    return match


def pow_two_to_mul(gm):
    return _rewrite(gm, _pow_two(True))


def pow_two_point_zero_to_mul(gm):
    """Buggy: pow(int_x, 2.0) is a float; x * x keeps the integer dtype."""
    return _rewrite(gm, _pow_two(False))


# --- 15. neg(neg(x)) -> x --------------------------------------------------------------------------------------


def _neg_neg(copy: bool):
    def match(g, n):
        if not _is(n, aten.neg.default) or not _is(n.args[0], aten.neg.default):
            return None
        x = n.args[0].args[0]
        if not _val(x).is_contiguous():
            return None
        return _copy(g, x) if copy else x
    return match


def neg_neg(gm):
    return _rewrite(gm, _neg_neg(True))


def neg_neg_returning_its_operand(gm):
    """Buggy: neg(neg(x)) -> x itself, where the result was a new buffer."""
    return _rewrite(gm, _neg_neg(False))


# --- 16. relu(relu(x)) -> relu(x) (idempotent activations) --------------------------------------------------------


def _relu_relu(keep_one: bool):
    def match(g, n):
        if not _is(n, aten.relu.default) or not _is(n.args[0], aten.relu.default):
            return None
        inner = n.args[0]
        return _copy(g, inner) if keep_one else _copy(g, inner.args[0])
    return match


def relu_relu(gm):
    return _rewrite(gm, _relu_relu(True))


def relu_relu_dropping_both(gm):
    """Buggy: drops both relus of a pair."""
    return _rewrite(gm, _relu_relu(False))


# --- 17. _softmax(x, d) -> exp(x - amax) / sum (a decomposition, as lowering passes write) ------------------------


def _softmax(subtract_max: bool):
    def match(g, n):
        if not _is(n, aten._softmax.default) or n.args[2]:
            return None
        x, d = n.args[0], n.args[1]
        if _val(x).dim() == 0 or _val(x).numel() == 0:
            return None
        shifted = x
        if subtract_max:
            shifted = g.call_function(aten.sub.Tensor, (x, g.call_function(aten.amax.default, (x, [d], True))))
        e = g.call_function(aten.exp.default, (shifted,))
        s = g.call_function(aten.sum.dim_IntList, (e, [d], True))
        return _copy(g, g.call_function(aten.div.Tensor, (e, s)))
    return match


def softmax_decomposed(gm):
    return _rewrite(gm, _softmax(True))


def softmax_decomposed_without_the_max(gm):
    """Buggy: exp(x) / sum(exp(x)) overflows where x is large (inf / inf = NaN)."""
    return _rewrite(gm, _softmax(False))


# --- 18. clamp(clamp(x, a, b), c, d) -> clamp(x, max(a, c), min(b, d)) ------------------------------------------


def _bounds(node):
    return _arg(node, 1, "min", None), _arg(node, 2, "max", None)


def _clamp_fold(intersect: bool):
    def match(g, n):
        if not _is(n, aten.clamp.default) or not _is(n.args[0], aten.clamp.default):
            return None
        (a, b), (c, d) = _bounds(n.args[0]), _bounds(n)
        given = [v for v in (a, b, c, d) if v is not None]
        if any(isinstance(v, (fx.Node, bool)) or not math.isfinite(v) for v in given):
            return None  # (a NaN bound: Python's max and min of it depend on the order)
        # a float bound of an integer tensor promotes it, and the folded bounds may not hold that one
        if not _val(n.args[0].args[0]).is_floating_point() and not all(isinstance(v, int) for v in given):
            return None
        if (a is not None and b is not None and a > b) or (c is not None and d is not None and c > d):
            return None
        lows, highs = [v for v in (a, c) if v is not None], [v for v in (b, d) if v is not None]
        if intersect:
            lo, hi = (max(lows) if lows else None), (min(highs) if highs else None)
        else:  # a bound one of them lacks is no bound of their union
            lo = min(lows) if len(lows) == 2 else None
            hi = max(highs) if len(highs) == 2 else None
        if lo is not None and hi is not None and lo > hi:
            return None
        if lo is None and hi is None:
            return g.call_function(aten.clone.default, (n.args[0].args[0],))
        return g.call_function(aten.clamp.default, (n.args[0].args[0], lo, hi))
    return match


def clamp_fold(gm):
    return _rewrite(gm, _clamp_fold(True))


def clamp_fold_widening(gm):
    """Buggy: takes the union of the two ranges instead of their intersection."""
    return _rewrite(gm, _clamp_fold(False))


# --- 19. squeeze(unsqueeze(x, d), d) -> x ------------------------------------------------------------------------


def _squeeze_unsqueeze(check_dims: bool):
    def match(g, n):
        if not _is(n, aten.squeeze.dim) or not _is(n.args[0], aten.unsqueeze.default):
            return None
        inner = n.args[0]
        rank = _val(inner).dim()
        if check_dims and _dim(n.args[1], rank) != _dim(inner.args[1], rank):
            return None
        return g.call_function(aten.alias.default, (inner.args[0],))
    return match


def squeeze_of_unsqueeze(gm):
    return _rewrite(gm, _squeeze_unsqueeze(True))


def squeeze_of_unsqueeze_any_dims(gm):
    """Buggy: cancels the pair whatever dims they name (squeezing another size-1 dim is not a no-op)."""
    return _rewrite(gm, _squeeze_unsqueeze(False))


# --- 20. select(unsqueeze(x, d), d, 0) -> x ----------------------------------------------------------------------


def _select_unsqueeze(check_dims: bool):
    def match(g, n):
        if not _is(n, aten.select.int) or not _is(n.args[0], aten.unsqueeze.default):
            return None
        inner = n.args[0]
        rank = _val(inner).dim()
        if n.args[2] not in (0, -1) or (check_dims and _dim(n.args[1], rank) != _dim(inner.args[1], rank)):
            return None
        return g.call_function(aten.alias.default, (inner.args[0],))
    return match


def select_of_unsqueeze(gm):
    return _rewrite(gm, _select_unsqueeze(True))


def select_of_unsqueeze_any_dims(gm):
    """Buggy: drops the pair whatever dim the select takes."""
    return _rewrite(gm, _select_unsqueeze(False))


# --- 21. _to_copy(_to_copy(x, A), x.dtype) -> x (joint_graph's pointless converts) ------------------------------


_WIDER = {torch.float16: (torch.float32, torch.float64), torch.bfloat16: (torch.float32, torch.float64),
          torch.float32: (torch.float64,), torch.int8: (torch.int16, torch.int32, torch.int64),
          torch.int16: (torch.int32, torch.int64), torch.int32: (torch.int64,), torch.uint8: (torch.int16, torch.int32,
                                                                                             torch.int64)}


def _convert_roundtrip(check_lossless: bool):
    def match(g, n):
        if not _is(n, aten._to_copy.default) or not _is(n.args[0], aten._to_copy.default):
            return None
        inner, x = n.args[0], n.args[0].args[0]
        if set(n.kwargs) - {"dtype"} or set(inner.kwargs) - {"dtype"}:
            return None
        if _val(n).dtype != _val(x).dtype or not _val(x).is_contiguous():
            return None
        if check_lossless and _val(inner).dtype not in (_val(x).dtype, *_WIDER.get(_val(x).dtype, ())):
            return None
        return _copy(g, x)
    return match


def convert_roundtrip(gm):
    return _rewrite(gm, _convert_roundtrip(True))


def convert_roundtrip_through_a_narrower_dtype(gm):
    """Buggy: drops a round trip through a dtype that cannot hold x's values."""
    return _rewrite(gm, _convert_roundtrip(False))


# --- 22. clone(clone(x)) -> clone(x) (Torch-TensorRT's remove_input_alias_fixing_clones shape) -----------------


def _clone_clone(keep_one: bool):
    def match(g, n):
        if not _is(n, aten.clone.default) or not _is(n.args[0], aten.clone.default) or n.kwargs or n.args[0].kwargs:
            return None
        inner = n.args[0]
        return g.call_function(aten.clone.default, (inner.args[0],)) if keep_one else inner.args[0]
    return match


def clone_of_clone(gm):
    return _rewrite(gm, _clone_clone(True))


def clone_of_clone_dropping_both(gm):
    """Buggy: drops both clones: the result is what the first copied (an input, or a value written later)."""
    return _rewrite(gm, _clone_clone(False))


# --- 23. permute(x, identity) -> x (no-op permute) -------------------------------------------------------------


def _noop_permute(whole: bool):
    def match(g, n):
        if not _is(n, aten.permute.default):
            return None
        rank = _val(n.args[0]).dim()
        dims = [_dim(d, rank) for d in n.args[1]]
        if (dims != list(range(rank))) if whole else (dims[:1] != [0] and rank > 0):
            return None
        return g.call_function(aten.alias.default, (n.args[0],))
    return match


def noop_permute(gm):
    return _rewrite(gm, _noop_permute(True))


def noop_permute_by_its_first_dim(gm):
    """Buggy: a permutation that keeps dim 0 first is taken for the identity."""
    return _rewrite(gm, _noop_permute(False))


# --- 24. bmm(a, b) with a batch of one -> mm (a lowering to a kernel without batches) ------------------------------


def _bmm_batch_one(check_batch: bool):
    def match(g, n):
        if not _is(n, aten.bmm.default):
            return None
        a, b = n.args
        if check_batch and _val(a).shape[0] != 1:
            return None
        if _val(a).shape[0] == 0:
            return None
        mm = g.call_function(aten.mm.default, (g.call_function(aten.select.int, (a, 0, 0)),
                                               g.call_function(aten.select.int, (b, 0, 0))))
        return _copy(g, g.call_function(aten.expand.default, (g.call_function(aten.unsqueeze.default, (mm, 0)),
                                                              list(_val(n).shape))))
    return match


def bmm_batch_one_to_mm(gm):
    return _rewrite(gm, _bmm_batch_one(True))


def bmm_to_mm_of_the_first_batch(gm):
    """Buggy: lowers every bmm to an mm of its first batch entry."""
    return _rewrite(gm, _bmm_batch_one(False))


# --- 25. mean(x, dims) -> sum(x, dims) / count ----------------------------------------------------------------


def _mean(count_reduced: bool):
    def match(g, n):
        if not _is(n, aten.mean.dim) or n.kwargs.get("dtype") is not None or not _val(n).is_floating_point():
            return None
        x, dims = n.args[0], n.args[1]
        keepdim = _arg(n, 2, "keepdim", False)
        v = _val(x)
        if v.dim() == 0 or not dims:
            return None
        reduced = 1
        for d in dims:
            reduced *= v.shape[_dim(d, v.dim())]
        count = reduced if count_reduced else v.numel()
        if count == 0:
            return None
        s = g.call_function(aten.sum.dim_IntList, (x, dims, keepdim))
        return g.call_function(aten.div.Tensor, (s, count))
    return match


def mean_as_sum_over_count(gm):
    return _rewrite(gm, _mean(True))


def mean_as_sum_over_numel(gm):
    """Buggy: divides by every element's count, not the reduced dims'."""
    return _rewrite(gm, _mean(False))


# --- 26. split then cat back along the same dim -> x (Inductor split_cat's split-cat elimination) ---------------


def _split_cat(check_dim: bool):
    def match(g, n):
        if not _is(n, aten.cat.default) or len(n.args[0]) < 2:
            return None
        items = n.args[0]
        if not all(i.target is operator.getitem for i in items):
            return None
        split = items[0].args[0]
        if not _is(split, aten.split.Tensor, aten.split_with_sizes.default) or any(i.args[0] is not split for i in items):
            return None
        if [i.args[1] for i in items] != list(range(len(items))) or len(items) != len(_val(split)):
            return None
        x = split.args[0]
        rank = _val(x).dim()
        if check_dim and (_dim(_arg(n, 1, "dim", 0), rank) != _dim(_arg(split, 2, "dim", 0), rank)
                          or _val(n).shape != _val(x).shape):
            return None
        return _copy(g, x)
    return match


def split_then_cat(gm):
    return _rewrite(gm, _split_cat(True))


def split_then_cat_along_any_dim(gm):
    """Buggy: a cat of every piece of a split undoes it whatever dim the cat joins along (its shape
    unchecked as well: the matcher took the dims for equal)."""
    return _rewrite(gm, _split_cat(False))


# --- the corpus ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Matcher:
    """A matcher pass and its twins: ``correct`` keeps every property, ``buggy`` gets ``bug`` wrong;
    ``shape``: the real passes it is written after. Verified in ``ir`` on ``graphs`` graphs, drawn with
    the user ops ``ops`` (registered by ``ops_file``, as verify(ops=) needs them imported)."""

    correct: str  # "module:attr"
    buggy: str
    bug: str
    shape: str
    ir: str = "aten"
    graphs: str = "functional"
    ops: str | None = None
    ops_file: str | None = None


_HERE = "tests.passes.matchers:"
_MYLIB = dict(ir="post-grad", ops="mylib", ops_file="examples/mylib_rules.py")

CORPUS = {
    "bmm-transposed-operand": Matcher(_HERE + "bmm_transposed", _HERE + "bmm_transposed_any_dims",
                                      "any transpose taken for the last two dims'",
                                      "Inductor's bmm layout rewrites; TRT's matmul lowering (transposed operand)"),
    "slice-of-cat": Matcher(_HERE + "slice_of_cat", _HERE + "slice_of_cat_any_dim",
                            "the slice's dim not checked against the cat's", "Inductor split_cat.py (slice of cat)"),
    "noop-slice": Matcher(_HERE + "noop_slice", _HERE + "noop_slice_off_by_one", "end one short of the size taken as the end",
                          "vLLM NoOpEliminationPass (slice)"),
    "sub-self": Matcher(_HERE + "sub_self_to_mul_by_zero", _HERE + "sub_self_to_zeros", "x - x taken for 0 at NaN or inf",
                        "joint_graph.py remove_no_ops-style algebra"),
    "addmm-fusion": Matcher(_HERE + "addmm_fusion", _HERE + "addmm_fusion_dropping_alpha", "add's alpha dropped",
                            "Inductor post_grad.py addmm pattern (pytorch finding: alpha)"),
    "double-transpose": Matcher(_HERE + "double_transpose", _HERE + "double_transpose_any_dims",
                                "the two transposes' dims not compared", "TRT/vLLM view folding"),
    "permute-fold": Matcher(_HERE + "permute_fold", _HERE + "permute_fold_composed_backwards",
                            "permutations composed in the wrong order", "TRT lowering permute folding"),
    "view-fold": Matcher(_HERE + "view_fold", _HERE + "view_fold_keeping_the_inner_shape", "the inner shape kept",
                         "vLLM NoOpEliminationPass (reshape)"),
    "noop-expand": Matcher(_HERE + "noop_expand", _HERE + "noop_expand_by_rank", "sizes not compared, only the rank",
                           "Inductor remove_noop_ops-style no-op views"),
    "single-cat": Matcher(_HERE + "single_cat", _HERE + "single_cat_returning_its_input",
                          "the copy dropped: the result is its input", "TRT lowering (cat of one)"),
    "where-same-branches": Matcher(_HERE + "where_same_branches", _HERE + "where_same_branches_ignoring_the_condition",
                                   "the condition's broadcast ignored", "joint_graph.py remove_no_ops (where)"),
    "mul-by-one": Matcher(_HERE + "mul_by_one", _HERE + "mul_by_one_of_any_type", "1.0 taken for 1 on integers",
                          "joint_graph.py remove_no_ops (mul by one)"),
    "add-zeros": Matcher(_HERE + "add_zeros", _HERE + "add_zeros_ignoring_broadcast", "broadcast and promotion ignored",
                         "joint_graph.py remove_no_ops (add of zeros; pytorch/pytorch#197893's shape)"),
    "pow-two": Matcher(_HERE + "pow_two_to_mul", _HERE + "pow_two_point_zero_to_mul", "2.0 taken for 2 on integers",
                       "Inductor's pow decompositions"),
    "neg-neg": Matcher(_HERE + "neg_neg", _HERE + "neg_neg_returning_its_operand",
                       "the result made its operand itself", "algebraic simplifications"),
    "relu-relu": Matcher(_HERE + "relu_relu", _HERE + "relu_relu_dropping_both", "both relus dropped",
                         "idempotent activation folding"),
    "softmax-decomposition": Matcher(_HERE + "softmax_decomposed", _HERE + "softmax_decomposed_without_the_max",
                                     "the max not subtracted (overflow)", "lowering passes' softmax decomposition"),
    "clamp-fold": Matcher(_HERE + "clamp_fold", _HERE + "clamp_fold_widening", "the ranges' union, not intersection",
                          "clamp folding"),
    "squeeze-of-unsqueeze": Matcher(_HERE + "squeeze_of_unsqueeze", _HERE + "squeeze_of_unsqueeze_any_dims",
                                    "the dims not compared", "view no-op elimination"),
    "select-of-unsqueeze": Matcher(_HERE + "select_of_unsqueeze", _HERE + "select_of_unsqueeze_any_dims",
                                   "the dims not compared", "view no-op elimination"),
    "convert-roundtrip": Matcher(_HERE + "convert_roundtrip", _HERE + "convert_roundtrip_through_a_narrower_dtype",
                                 "a lossy round trip dropped", "joint_graph.py pointless_convert"),
    "clone-of-clone": Matcher(_HERE + "clone_of_clone", _HERE + "clone_of_clone_dropping_both", "both copies dropped",
                              "TRT remove_input_alias_fixing_clones"),
    "noop-permute": Matcher(_HERE + "noop_permute", _HERE + "noop_permute_by_its_first_dim",
                            "a permutation keeping dim 0 taken for the identity", "vLLM/Inductor no-op elimination"),
    "bmm-batch-one": Matcher(_HERE + "bmm_batch_one_to_mm", _HERE + "bmm_to_mm_of_the_first_batch",
                             "the batch size not checked", "lowerings to batchless kernels"),
    "mean-as-sum": Matcher(_HERE + "mean_as_sum_over_count", _HERE + "mean_as_sum_over_numel",
                           "divided by numel, not the reduced count", "reduction decompositions"),
    "split-then-cat": Matcher(_HERE + "split_then_cat", _HERE + "split_then_cat_along_any_dim",
                              "the cat's dim (and so its shape) not compared with the split's", "Inductor split_cat.py"),
    # vLLM-style fusions over a user's out-variant ops in post-grad graphs (examples/)
    "rms-norm-quant-fusion": Matcher("mylib_fusion:fuse_rms_norm_quant", "mylib_fusion:fuse_ignoring_epsilon",
                                     "the norm's epsilon dropped", "vLLM compilation/fusion.py (RMSNormQuantFusionPass)",
                                     **_MYLIB),
    "fused-add-rms-norm-quant-fusion": Matcher("mylib_fusion:fuse_add_rms_norm_quant",
                                               "mylib_fusion:fuse_dropping_the_residual_write",
                                               "the residual's write lost", "vLLM compilation/fusion.py (fused add)",
                                               **_MYLIB),
    "rms-norm-quant-pattern-table": Matcher("mylib_patterns:fuse_with_patterns",
                                            "mylib_patterns:fuse_with_patterns_ignoring_epsilon",
                                            "the replacement keeps its traced epsilon",
                                            "vLLM's PatternMatcherPass fusions", **_MYLIB),
    "defunctionalize": Matcher("mylib_defunctionalize:fix_functionalization",
                               "mylib_defunctionalize:fix_functionalization_ignoring_later_reads",
                               "a buffer still read later written in place",
                               "vLLM compilation/fix_functionalization.py", graphs="mutating", **_MYLIB),
}

__all__ = ["CORPUS", "Matcher"]
