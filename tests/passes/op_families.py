"""Rewrites of the ops real passes target (matmul, softmax, normalization), each as a planted bug
and as its correct twin of the same shape (issue 15's acceptance), plus the two matmul passes the
``sizes="large"`` meta-test needs.

- ``mm + add -> addmm``: Inductor and Torch-TensorRT fuse a matmul and the add after it. The bug
  drops ``add``'s ``alpha`` (``x + alpha * y`` is ``addmm(y, a, b, beta=alpha)``); the twin keeps it,
  and leaves ``alpha == 0`` alone (``addmm`` skips a term scaled by 0, NaN included, where
  ``x + 0 * y`` does not).
- softmax decomposed: the bug computes ``exp(x) / sum(exp(x))``, which overflows where the max
  subtraction would not; the twin subtracts the max (in float32 for half inputs, as eager does).
- ``native_layer_norm`` decomposed: the bug takes the sample variance (``correction=1``, what
  ``torch.var`` defaults to); the twin the population variance layer norm is defined with.

Every pass relies only on torch and on ``meta['val']``, and leaves the graph lint-clean.
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx

from tests.passes.patterns import _done, _is_call
from tests.passes.planted import _in_layout_of, _insert_call, _val

aten = torch.ops.aten
_HALF = (torch.float16, torch.bfloat16)


def _broadcasts_into(shape, target) -> bool:
    try:
        return tuple(torch.broadcast_shapes(tuple(shape), tuple(target))) == tuple(target)
    except RuntimeError:
        return False


# --- mm + add -> addmm --------------------------------------------------------------------------------


def _mm_adds(gm: fx.GraphModule):
    """``(add node, mm node, the other operand, alpha, the mm is add's first operand)`` for each
    ``add.Tensor`` of an ``mm`` (either side) and a tensor that broadcasts into its shape, found as
    the caller fuses them: a fused add can be the next add's other operand (a diamond: the fused
    add feeding an mm and the add after it), so a list made first would hold the erased node."""
    for node in list(gm.graph.nodes):
        if not _is_call(node, aten.add.Tensor):
            continue
        x, y = node.args[0], node.args[1]
        alpha = node.kwargs.get("alpha", 1)
        for mm, other, first in ((x, y, True), (y, x, False)):
            if not _is_call(mm, aten.mm.default) or len(mm.users) != 1 or not isinstance(other, fx.Node) \
                    or other is mm:
                continue
            out, bias = _val(mm), _val(other)
            if bias is None or out is None or bias.dtype != out.dtype or not _broadcasts_into(bias.shape, out.shape):
                continue
            yield node, mm, other, alpha, first
            break


def _fuse(gm, node, mm, bias, kwargs) -> None:
    with gm.graph.inserting_before(node):
        new = _insert_call(gm.graph, aten.addmm.default, (bias, *mm.args), kwargs)
    node.replace_all_uses_with(new)
    gm.graph.erase_node(node)
    gm.graph.erase_node(mm)


def fuse_mm_add_ignoring_alpha(gm: fx.GraphModule) -> fx.GraphModule:
    """``add(mm(a, b), y, alpha=k) -> addmm(y, a, b)`` (and ``add(y, mm(a, b))``).

    Flaw: ``alpha`` scales add's second operand; the rewrite drops it, so any ``alpha != 1``
    computes another value (``add(mm, y, alpha=2)`` is ``mm + 2y``, not ``mm + y``).
    """
    for node, mm, bias, _alpha, _first in _mm_adds(gm):  # lazily: a fused add may be the next one's bias
        _fuse(gm, node, mm, bias, {})
    return _done(gm)


def fuse_mm_add(gm: fx.GraphModule) -> fx.GraphModule:
    """Twin: ``add(mm, y, alpha=k) -> addmm(y, a, b, beta=k)``, ``add(y, mm, alpha=k) ->
    addmm(y, a, b, alpha=k)``; ``alpha == 0`` is left alone (``beta=0`` / ``alpha=0`` make ``addmm``
    skip that term, NaN and inf included, where ``x + 0 * y`` does not)."""
    for node, mm, bias, alpha, first in _mm_adds(gm):
        if alpha == 0:
            continue
        kwargs = {} if alpha == 1 else ({"beta": alpha} if first else {"alpha": alpha})
        _fuse(gm, node, mm, bias, kwargs)
    return _done(gm)


# --- softmax decomposed -------------------------------------------------------------------------------


def _decompose_softmax(gm: fx.GraphModule, subtract_max: bool) -> fx.GraphModule:
    g = gm.graph
    for node in list(g.nodes):
        if not _is_call(node, aten._softmax.default) or node.args[2]:
            continue
        x, dim = node.args[0], node.args[1]
        if _val(x) is None or (subtract_max and _val(x).dim() and _val(x).shape[dim] == 0):
            continue  # amax has no identity for an empty dim (the buggy form does not need one)
        dtype = _val(x).dtype
        with g.inserting_before(node):
            h = _insert_call(g, aten._to_copy.default, (x,), {"dtype": torch.float32}) if dtype in _HALF else x
            if subtract_max:
                top = _insert_call(g, aten.amax.default, (h, [dim], True))
                h = _insert_call(g, aten.sub.Tensor, (h, top))
            e = _insert_call(g, aten.exp.default, (h,))
            total = _insert_call(g, aten.sum.dim_IntList, (e, [dim], True))
            out = _insert_call(g, aten.div.Tensor, (e, total))
            if dtype in _HALF:
                out = _insert_call(g, aten._to_copy.default, (out,), {"dtype": dtype})
            out = _in_layout_of(g, out, _val(node))
        node.replace_all_uses_with(out)
        g.erase_node(node)
    return _done(gm)


def softmax_without_max(gm: fx.GraphModule) -> fx.GraphModule:
    """``_softmax(x, dim) -> exp(x) / sum(exp(x), dim)``.

    Flaw: without subtracting the max first, ``exp`` overflows for inputs above ~88 (float32):
    the result is inf / inf = NaN where softmax is 1 (or 0), even along a dim of size 1.
    """
    return _decompose_softmax(gm, subtract_max=False)


def softmax_decomposed(gm: fx.GraphModule) -> fx.GraphModule:
    """Twin: ``exp(x - amax(x)) / sum(...)``, in float32 for half inputs."""
    return _decompose_softmax(gm, subtract_max=True)


# --- native_layer_norm decomposed --------------------------------------------------------------------------


def _decompose_layer_norm(gm: fx.GraphModule, correction: int) -> fx.GraphModule:
    g = gm.graph
    for node in list(g.nodes):
        if not _is_call(node, aten.native_layer_norm.default) or _val(node.args[0]) is None:
            continue
        x, shape, weight, bias, eps = node.args
        rank, dtype = _val(x).dim(), _val(x).dtype
        dims = list(range(rank - len(shape), rank))
        with g.inserting_before(node):
            h = _insert_call(g, aten._to_copy.default, (x,), {"dtype": torch.float32}) if dtype in _HALF else x
            var = _insert_call(g, aten.var.correction, (h, dims), {"correction": correction, "keepdim": True})
            mean = _insert_call(g, aten.mean.dim, (h, dims, True))
            # one correction step (the corrected two-pass mean): for equal elements the rounded mean can
            # be an ulp off, and rstd (up to 1/sqrt(eps)) multiplies that into an error eager's Welford
            # mean does not make (a row of three equal floats gave 3e-5 where eager gives 0)
            mean = _insert_call(g, aten.add.Tensor, (mean, _insert_call(g, aten.mean.dim, (
                _insert_call(g, aten.sub.Tensor, (h, mean)), dims, True))))
            rstd = _insert_call(g, aten.rsqrt.default, (_insert_call(g, aten.add.Tensor, (var, eps)),))
            out = _insert_call(g, aten.mul.Tensor, (_insert_call(g, aten.sub.Tensor, (h, mean)), rstd))
            if weight is not None:
                out = _insert_call(g, aten.mul.Tensor, (out, weight))
            if bias is not None:
                out = _insert_call(g, aten.add.Tensor, (out, bias))
            results = [out, mean, rstd]
            if dtype in _HALF:
                results = [_insert_call(g, aten._to_copy.default, (r,), {"dtype": dtype}) for r in results]
            eager = node.meta.get("val")  # the (out, mean, rstd) fakes: _val() takes a tensor only
            results = [_in_layout_of(g, r, v if isinstance(v, torch.Tensor) else None)
                       for r, v in zip(results, eager if isinstance(eager, (tuple, list)) else (None,) * 3)]
        for user in list(node.users):
            if user.target is not operator.getitem:
                raise NotImplementedError(f"a user of native_layer_norm that is not a getitem: {user}")
            user.replace_all_uses_with(results[user.args[1]])
            g.erase_node(user)
        g.erase_node(node)
    return _done(gm)


def layer_norm_unbiased(gm: fx.GraphModule) -> fx.GraphModule:
    """``native_layer_norm -> (x - mean) * rsqrt(var + eps) * w + b`` with ``var(correction=1)``.

    Flaw: layer norm divides by N (the population variance); ``correction=1`` divides by N - 1,
    ``torch.var``'s default, so every output is off by sqrt((N-1)/N), and N == 1 gives NaN.
    """
    return _decompose_layer_norm(gm, correction=1)


def layer_norm_decomposed(gm: fx.GraphModule) -> fx.GraphModule:
    """Twin: the same decomposition with the population variance (``correction=0``)."""
    return _decompose_layer_norm(gm, correction=0)


# --- matmul under sizes="large" ------------------------------------------------------------------------------


def split_mm_reduction(gm: fx.GraphModule) -> fx.GraphModule:
    """``mm(a, b) -> mm(a[:, :h], b[:h]) + mm(a[:, h:], b[h:])``: the k-sum reassociated in two
    halves, as split-k kernels compute it. Correct: only rounding moves."""
    g = gm.graph
    for node in list(g.nodes):
        if not _is_call(node, aten.mm.default) or _val(node.args[0]) is None:
            continue
        a, b = node.args
        k = _val(a).shape[1]
        if k < 2:
            continue
        h = k // 2
        with g.inserting_before(node):
            lo = _insert_call(g, aten.mm.default, (_insert_call(g, aten.slice.Tensor, (a, 1, 0, h)),
                                                   _insert_call(g, aten.slice.Tensor, (b, 0, 0, h))))
            hi = _insert_call(g, aten.mm.default, (_insert_call(g, aten.slice.Tensor, (a, 1, h, k)),
                                                   _insert_call(g, aten.slice.Tensor, (b, 0, h, k))))
            out = _insert_call(g, aten.add.Tensor, (lo, hi))
        node.replace_all_uses_with(out)
        g.erase_node(node)
    return _done(gm)


def addmm_dropping_beta(gm: fx.GraphModule) -> fx.GraphModule:
    """``addmm(bias, a, b, beta=k, alpha=j) -> addmm(bias, a, b, alpha=j)``: "beta is always 1".

    Flaw: ``beta`` scales the bias; dropping it changes every result where ``beta != 1``."""
    for node in gm.graph.nodes:
        if _is_call(node, aten.addmm.default) and node.kwargs.get("beta", 1) != 1:  # beta is keyword-only
            node.kwargs = {k: v for k, v in node.kwargs.items() if k != "beta"}
    return _done(gm)


OP_FAMILY_BUGS = {
    "mm_add_alpha": (fuse_mm_add_ignoring_alpha, fuse_mm_add),
    "softmax_no_max": (softmax_without_max, softmax_decomposed),
    "layer_norm_unbiased": (layer_norm_unbiased, layer_norm_decomposed),
}
