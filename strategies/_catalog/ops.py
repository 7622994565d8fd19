"""OPS: the op catalog, one literal row per ATen overload the strategies draw.

Every row is checked against eager torch by tests/test_catalog.py (each dtype it lists really runs);
the builder reads nothing about an op that is not in its row.
"""

from __future__ import annotations

import torch

from .vocabulary import (
    ANY, ANY_VALUE, ATTENTION, BASE, BATCH_NORM, COMPLEX, CONV, CONVOLUTION, DIAGONAL, DIM, DIM_INSERT, DIMS, DTYPE,
    EMBEDDING, EXPAND_AS, EXPAND_SHAPE, EXPONENT, FACTORY, FILL, FLATTEN, FLOAT, GATHER, GROUP_NORM, GT_NEG1,
    INDEX, INDEX_PUT, INDEXING, INPLACE, INTEGRAL, KEEPDIM, LAYER_NORM, MASK, MATMUL, MM, NONNEG, NONZERO, NORM,
    NUMERIC, OTHER, PAD, PERM, POINTWISE, POOL, POSITIVE, QUANT, RANDOM, REDUCTION, REPEAT, ROLL, SCALAR,
    SCALAR_TENSOR, SCATTER, SDPA, SELECT, SHAPE, SLICE, SLICE_SCATTER, SPLIT, SQUEEZABLE_DIM, STACK, STATS, STRIDED,
    TENSOR, TENSOR_OR_SCALAR, TENSORS, TOPK, UNFOLD, UNIT, VIEW, VIEW_DTYPE, Kwarg, OpSpec, QUANTIZE as QUANTIZE_KIND,
)

aten = torch.ops.aten


def _quantized_decomposed():
    import torch.ao.quantization.fx._decomposed  # noqa: F401 - registers torch.ops.quantized_decomposed

    return torch.ops.quantized_decomposed


QUANTIZE = _quantized_decomposed().quantize_per_tensor.default
DEQUANTIZE = _quantized_decomposed().dequantize_per_tensor.default

T, TS, S = TENSOR, TENSOR_OR_SCALAR, SCALAR
ALPHA = Kwarg("alpha", SCALAR)
BETA = Kwarg("beta", SCALAR)
DTYPE_KW = Kwarg("dtype", DTYPE)
KEEP = Kwarg("keepdim", (False, True))
FLOAT_OUT = ANY  # unary math that promotes integers and bools to the default float dtype

OPS: tuple[OpSpec, ...] = (
    # ---- pointwise, unary ---------------------------------------------------------------------
    OpSpec(aten.abs.default, POINTWISE, (T,), NUMERIC | COMPLEX),
    OpSpec(aten.neg.default, POINTWISE, (T,), NUMERIC | COMPLEX),  # bool negation raises
    OpSpec(aten.exp.default, POINTWISE, (T,), FLOAT_OUT | COMPLEX),
    OpSpec(aten.exp2.default, POINTWISE, (T,), FLOAT_OUT),
    OpSpec(aten.expm1.default, POINTWISE, (T,), FLOAT_OUT),
    OpSpec(aten.log.default, POINTWISE, (T,), FLOAT_OUT, (POSITIVE,)),
    OpSpec(aten.log2.default, POINTWISE, (T,), FLOAT_OUT, (POSITIVE,)),
    OpSpec(aten.log1p.default, POINTWISE, (T,), FLOAT_OUT, (GT_NEG1,)),
    OpSpec(aten.sqrt.default, POINTWISE, (T,), FLOAT_OUT | COMPLEX, (NONNEG,)),
    OpSpec(aten.rsqrt.default, POINTWISE, (T,), FLOAT_OUT, (POSITIVE,)),
    OpSpec(aten.reciprocal.default, POINTWISE, (T,), FLOAT_OUT, (NONZERO,)),
    OpSpec(aten.sin.default, POINTWISE, (T,), FLOAT_OUT),
    OpSpec(aten.cos.default, POINTWISE, (T,), FLOAT_OUT),
    OpSpec(aten.tanh.default, POINTWISE, (T,), FLOAT_OUT),
    OpSpec(aten.atan.default, POINTWISE, (T,), FLOAT_OUT),
    OpSpec(aten.asin.default, POINTWISE, (T,), FLOAT_OUT, (UNIT,)),
    OpSpec(aten.sigmoid.default, POINTWISE, (T,), FLOAT_OUT),
    OpSpec(aten.erf.default, POINTWISE, (T,), FLOAT_OUT),
    OpSpec(aten.gelu.default, POINTWISE, (T,), FLOAT, kwargs=(Kwarg("approximate", ("none", "tanh")),)),
    OpSpec(aten.silu.default, POINTWISE, (T,), FLOAT),
    OpSpec(aten.relu.default, POINTWISE, (T,), NUMERIC),
    OpSpec(aten.floor.default, POINTWISE, (T,), NUMERIC),  # identity on integers
    OpSpec(aten.ceil.default, POINTWISE, (T,), NUMERIC),
    OpSpec(aten.round.default, POINTWISE, (T,), NUMERIC),  # half to even
    OpSpec(aten.trunc.default, POINTWISE, (T,), NUMERIC),
    OpSpec(aten.frac.default, POINTWISE, (T,), FLOAT),
    OpSpec(aten.sign.default, POINTWISE, (T,), ANY),
    OpSpec(aten.isnan.default, POINTWISE, (T,), ANY),
    OpSpec(aten.logical_not.default, POINTWISE, (T,), ANY),
    OpSpec(aten.bitwise_not.default, POINTWISE, (T,), INTEGRAL),
    # ---- pointwise, binary arithmetic -----------------------------------------------------------
    OpSpec(aten.add.Tensor, POINTWISE, (T, TS), ANY | COMPLEX, kwargs=(ALPHA,)),
    OpSpec(aten.add.Scalar, POINTWISE, (T, S), ANY | COMPLEX, kwargs=(ALPHA,)),
    OpSpec(aten.sub.Tensor, POINTWISE, (T, TS), NUMERIC | COMPLEX, kwargs=(ALPHA,)),  # bool - bool raises
    OpSpec(aten.sub.Scalar, POINTWISE, (T, S), NUMERIC | COMPLEX, kwargs=(ALPHA,)),
    OpSpec(aten.rsub.Scalar, POINTWISE, (T, S), NUMERIC, kwargs=(ALPHA,)),
    OpSpec(aten.mul.Tensor, POINTWISE, (T, TS), ANY | COMPLEX),
    OpSpec(aten.mul.Scalar, POINTWISE, (T, S), ANY | COMPLEX),
    OpSpec(aten.div.Tensor, POINTWISE, (T, TS), ANY | COMPLEX, (NONZERO, NONZERO)),  # true division
    OpSpec(aten.div.Tensor_mode, POINTWISE, (T, TS), NUMERIC, (NONZERO, NONZERO),
           kwargs=(Kwarg("rounding_mode", (None, "trunc", "floor"), required=True),)),
    OpSpec(aten.div.Scalar, POINTWISE, (T, S), ANY | COMPLEX, (ANY_VALUE, NONZERO)),
    OpSpec(aten.floor_divide.default, POINTWISE, (T, TS), NUMERIC, (NONZERO, NONZERO)),
    OpSpec(aten.remainder.Tensor, POINTWISE, (T, TS), NUMERIC, (ANY_VALUE, NONZERO)),
    OpSpec(aten.remainder.Scalar, POINTWISE, (T, S), NUMERIC, (ANY_VALUE, NONZERO)),
    OpSpec(aten.fmod.Tensor, POINTWISE, (T, TS), NUMERIC, (ANY_VALUE, NONZERO)),
    OpSpec(aten.fmod.Scalar, POINTWISE, (T, S), NUMERIC, (ANY_VALUE, NONZERO)),
    OpSpec(aten.pow.Tensor_Tensor, POINTWISE, (T, T), NUMERIC, (BASE, EXPONENT)),
    OpSpec(aten.pow.Tensor_Scalar, POINTWISE, (T, S), NUMERIC | COMPLEX, (BASE, EXPONENT)),
    OpSpec(aten.maximum.default, POINTWISE, (T, T), ANY),  # propagates NaN
    OpSpec(aten.minimum.default, POINTWISE, (T, T), ANY),
    OpSpec(aten.atan2.default, POINTWISE, (T, T), FLOAT),
    OpSpec(aten.hypot.default, POINTWISE, (T, T), FLOAT),
    OpSpec(aten.copysign.Tensor, POINTWISE, (T, T), FLOAT),
    OpSpec(aten.lerp.Scalar, POINTWISE, (T, T, S), FLOAT),
    # ---- pointwise, comparisons and logic (results are bool) ---------------------------------------
    OpSpec(aten.eq.Tensor, POINTWISE, (T, TS), ANY | COMPLEX),
    OpSpec(aten.eq.Scalar, POINTWISE, (T, S), ANY),
    OpSpec(aten.ne.Tensor, POINTWISE, (T, TS), ANY | COMPLEX),
    OpSpec(aten.lt.Tensor, POINTWISE, (T, TS), ANY),
    OpSpec(aten.le.Tensor, POINTWISE, (T, TS), ANY),
    OpSpec(aten.gt.Tensor, POINTWISE, (T, TS), ANY),
    OpSpec(aten.ge.Tensor, POINTWISE, (T, TS), ANY),
    OpSpec(aten.gt.Scalar, POINTWISE, (T, S), ANY),
    OpSpec(aten.logical_and.default, POINTWISE, (T, T), ANY),
    OpSpec(aten.logical_or.default, POINTWISE, (T, T), ANY),
    OpSpec(aten.logical_xor.default, POINTWISE, (T, T), ANY),
    OpSpec(aten.bitwise_and.Tensor, POINTWISE, (T, T), INTEGRAL),
    OpSpec(aten.bitwise_or.Tensor, POINTWISE, (T, T), INTEGRAL),
    OpSpec(aten.bitwise_xor.Tensor, POINTWISE, (T, T), INTEGRAL),
    # ---- pointwise, selection and clamping ------------------------------------------------------
    OpSpec(aten.where.self, POINTWISE, (MASK, T, T), ANY | COMPLEX),
    OpSpec(aten.masked_fill.Scalar, POINTWISE, (T, MASK, S), ANY),
    OpSpec(aten.clamp.default, POINTWISE, (T, S, S), NUMERIC),  # scalar bounds; min > max gives max
    OpSpec(aten.clamp.Tensor, POINTWISE, (T, T, T), NUMERIC),  # tensor bounds
    OpSpec(aten.clamp_min.default, POINTWISE, (T, S), NUMERIC),
    OpSpec(aten.clamp_max.default, POINTWISE, (T, S), NUMERIC),
    OpSpec(aten._to_copy.default, POINTWISE, (T,), ANY | COMPLEX, kwargs=(Kwarg("dtype", DTYPE, required=True),)),
    # ---- views ----------------------------------------------------------------------------------
    OpSpec(aten.view.default, VIEW, (T, SHAPE), ANY | COMPLEX),  # needs view-compatible strides
    OpSpec(aten.reshape.default, VIEW, (T, SHAPE), ANY | COMPLEX),  # a view when it can be, else a copy
    OpSpec(aten.permute.default, VIEW, (T, PERM), ANY | COMPLEX),
    OpSpec(aten.transpose.int, VIEW, (T, DIM, DIM), ANY | COMPLEX),
    OpSpec(aten.t.default, VIEW, (T,), ANY | COMPLEX),  # rank <= 2 only
    OpSpec(aten.expand.default, VIEW, (T, EXPAND_SHAPE), ANY | COMPLEX),  # stride-0 result
    OpSpec(aten.squeeze.dim, VIEW, (T, SQUEEZABLE_DIM), ANY | COMPLEX),
    OpSpec(aten.squeeze.default, VIEW, (T,), ANY),
    OpSpec(aten.unsqueeze.default, VIEW, (T, DIM_INSERT), ANY | COMPLEX),
    OpSpec(aten.slice.Tensor, VIEW, (T, SLICE), ANY | COMPLEX),
    OpSpec(aten.select.int, VIEW, (T, SELECT), ANY | COMPLEX),
    OpSpec(aten.flatten.using_ints, VIEW, (T, FLATTEN), ANY | COMPLEX),
    OpSpec(aten.alias.default, VIEW, (T,), ANY | COMPLEX),
    OpSpec(aten.detach.default, VIEW, (T,), ANY),  # an alias without autograd history (remove_detach's target)
    OpSpec(aten.as_strided.default, VIEW, (T, STRIDED), ANY),
    OpSpec(aten.diagonal.default, VIEW, (T, DIAGONAL), ANY),
    OpSpec(aten.unfold.default, VIEW, (T, UNFOLD), ANY),
    OpSpec(aten.view.dtype, VIEW, (T, VIEW_DTYPE), NUMERIC | COMPLEX),  # the same bits as another dtype of its size
    OpSpec(aten.expand_as.default, VIEW, (EXPAND_AS,), ANY),
    # split-like ops return lists of views, read through getitem
    OpSpec(aten.split.Tensor, VIEW, (SPLIT,), ANY),
    OpSpec(aten.split_with_sizes.default, VIEW, (SPLIT,), ANY),
    OpSpec(aten.chunk.default, VIEW, (SPLIT,), ANY),
    OpSpec(aten.unbind.int, VIEW, (SPLIT,), ANY),
    # ---- reductions -----------------------------------------------------------------------------
    OpSpec(aten.sum.dim_IntList, REDUCTION, (T, DIMS, KEEPDIM), ANY | COMPLEX),
    OpSpec(aten.sum.default, REDUCTION, (T,), ANY),
    OpSpec(aten.mean.dim, REDUCTION, (T, DIMS, KEEPDIM), FLOAT | COMPLEX),
    OpSpec(aten.amax.default, REDUCTION, (T, DIMS, KEEPDIM), ANY),  # empty reduced dim raises
    OpSpec(aten.amin.default, REDUCTION, (T, DIMS, KEEPDIM), ANY),
    OpSpec(aten.prod.dim_int, REDUCTION, (T, DIM, KEEPDIM), ANY),
    OpSpec(aten.argmax.default, REDUCTION, (T, DIM, KEEPDIM), NUMERIC),
    OpSpec(aten.any.dim, REDUCTION, (T, DIM, KEEPDIM), ANY),
    OpSpec(aten._softmax.default, REDUCTION, (T, DIM, (False,)), FLOAT),
    OpSpec(aten._log_softmax.default, REDUCTION, (T, DIM, (False,)), FLOAT),
    OpSpec(aten.logsumexp.default, REDUCTION, (T, DIMS, KEEPDIM), FLOAT),
    OpSpec(aten.var.correction, REDUCTION, (STATS,), FLOAT, kwargs=(KEEP,)),
    OpSpec(aten.var_mean.correction, REDUCTION, (STATS,), FLOAT, kwargs=(KEEP,)),
    OpSpec(aten.std.correction, REDUCTION, (STATS,), FLOAT, kwargs=(KEEP,)),
    OpSpec(aten.cumsum.default, REDUCTION, (T, DIM), ANY),
    OpSpec(aten.cumprod.default, REDUCTION, (T, DIM), NUMERIC),
    OpSpec(aten.sort.default, REDUCTION, (T, DIM, (False, True)), ANY),
    OpSpec(aten.topk.default, REDUCTION, (TOPK,), NUMERIC),
    OpSpec(aten.argmin.default, REDUCTION, (T, DIM, KEEPDIM), NUMERIC),
    OpSpec(aten.max.dim, REDUCTION, (T, DIM, KEEPDIM), ANY),
    OpSpec(aten.min.dim, REDUCTION, (T, DIM, KEEPDIM), ANY),
    # ---- other ----------------------------------------------------------------------------------
    OpSpec(aten.clone.default, OTHER, (T,), ANY | COMPLEX),
    OpSpec(aten.cat.default, OTHER, (TENSORS,), ANY | COMPLEX),
    OpSpec(aten.zeros_like.default, OTHER, (T,), ANY, kwargs=(DTYPE_KW,)),
    OpSpec(aten.full_like.default, OTHER, (T, S), ANY, kwargs=(DTYPE_KW,)),
    OpSpec(aten.ones_like.default, OTHER, (T,), ANY, kwargs=(DTYPE_KW,)),
    # ---- concat/split, padding, repeats (split-like ops are views: their rows are with the views) -----
    OpSpec(aten.stack.default, OTHER, (STACK,), ANY),
    OpSpec(aten.constant_pad_nd.default, OTHER, (PAD,), ANY),  # negative pads crop
    OpSpec(aten.repeat.default, OTHER, (REPEAT,), ANY),
    OpSpec(aten.flip.default, OTHER, (T, DIMS), ANY),
    OpSpec(aten.roll.default, OTHER, (ROLL,), ANY),
    OpSpec(aten.tril.default, OTHER, (T, (0, 1, -1)), ANY),  # rank >= 2
    OpSpec(aten.triu.default, OTHER, (T, (0, 1, -1)), ANY),
    OpSpec(aten._unsafe_view.default, OTHER, (T, SHAPE), ANY),  # linear's reshape back: a copy in name only
    # ---- matmul: inner dims agree; addmm-like ops take beta/alpha ------------------------------------
    OpSpec(aten.mm.default, MATMUL, (MM,), NUMERIC | COMPLEX),
    OpSpec(aten.bmm.default, MATMUL, (MM,), NUMERIC | COMPLEX),
    OpSpec(aten.addmm.default, MATMUL, (MM,), NUMERIC, kwargs=(BETA, ALPHA)),
    OpSpec(aten.baddbmm.default, MATMUL, (MM,), NUMERIC, kwargs=(BETA, ALPHA)),
    OpSpec(aten.addmv.default, MATMUL, (MM,), NUMERIC, kwargs=(BETA, ALPHA)),
    OpSpec(aten.dot.default, MATMUL, (MM,), NUMERIC),
    # ---- convolution (1-3 d, strided, padded, dilated, grouped, transposed) and pooling ---------------
    OpSpec(aten.convolution.default, CONV, (CONVOLUTION,), FLOAT),
    OpSpec(aten.max_pool2d_with_indices.default, CONV, (POOL,), FLOAT),
    OpSpec(aten.avg_pool2d.default, CONV, (POOL,), FLOAT),
    OpSpec(aten._adaptive_avg_pool2d.default, CONV, (POOL,), FLOAT),
    # ---- normalization (tuple results: the output, then saved statistics) ---------------------------
    OpSpec(aten.native_layer_norm.default, NORM, (LAYER_NORM,), FLOAT),
    OpSpec(aten.native_batch_norm.default, NORM, (BATCH_NORM,), FLOAT),  # training (no running stats) or not
    OpSpec(aten._native_batch_norm_legit_no_training.default, NORM, (BATCH_NORM,), FLOAT),
    OpSpec(aten.native_group_norm.default, NORM, (GROUP_NORM,), FLOAT),
    # ---- attention as traced graphs carry it: the composite and the math overload anywhere; the
    # overloads the composite dispatches to per device, each drawn only where the dispatcher has a
    # kernel for it (strategies/_build/device.py): the CPU flash one here, CUDA's at the end of the table ----
    OpSpec(aten.scaled_dot_product_attention.default, ATTENTION, (SDPA,), FLOAT),
    OpSpec(aten._scaled_dot_product_flash_attention_for_cpu.default, ATTENTION, (SDPA,), FLOAT),
    OpSpec(aten._scaled_dot_product_attention_math.default, ATTENTION, (SDPA,), FLOAT),
    # ---- indexing: indices inside their dims; writes that could collide go to unique positions ------
    OpSpec(aten.index.Tensor, INDEXING, (INDEX,), ANY),
    OpSpec(aten.index_put.default, INDEXING, (INDEX_PUT,), ANY),
    OpSpec(aten.index_select.default, INDEXING, (GATHER,), ANY),
    OpSpec(aten.gather.default, INDEXING, (GATHER,), ANY),
    OpSpec(aten.scatter.src, INDEXING, (SCATTER,), ANY),
    OpSpec(aten.scatter.value, INDEXING, (SCATTER,), ANY),
    OpSpec(aten.scatter.reduce, INDEXING, (SCATTER,), NUMERIC),
    OpSpec(aten.scatter_add.default, INDEXING, (SCATTER,), NUMERIC),
    OpSpec(aten.slice_scatter.default, INDEXING, (SLICE_SCATTER,), ANY),
    OpSpec(aten.select_scatter.default, INDEXING, (SLICE_SCATTER,), ANY),
    OpSpec(aten.embedding.default, INDEXING, (EMBEDDING,), NUMERIC),
    OpSpec(aten.masked_fill.Tensor, INDEXING, (T, MASK, SCALAR_TENSOR), ANY),
    # ---- factories: no tensor operand, so ``dtypes`` lists the dtypes they are drawn to produce ------
    OpSpec(aten.full.default, FACTORY, (FILL,), ANY),
    OpSpec(aten.zeros.default, FACTORY, (FILL,), ANY),
    OpSpec(aten.ones.default, FACTORY, (FILL,), ANY),
    OpSpec(aten.scalar_tensor.default, FACTORY, (FILL,), ANY),
    OpSpec(aten.arange.default, FACTORY, (FILL,), NUMERIC),
    OpSpec(aten.arange.start_step, FACTORY, (FILL,), NUMERIC),
    OpSpec(torch.ops.prims.convert_element_type.default, FACTORY, (T, DTYPE), ANY),
    # ---- quantization as quantized models carry it (quantized_decomposed, registered by torch.ao) -----
    OpSpec(QUANTIZE, QUANT, (QUANTIZE_KIND,), frozenset({torch.float32})),
    OpSpec(DEQUANTIZE, QUANT, (QUANTIZE_KIND,), frozenset({torch.int8, torch.uint8})),
    # ---- random: drawn only with graphs(random=True); every run starts from one generator state ----------
    OpSpec(aten.rand_like.default, RANDOM, (T,), FLOAT),
    OpSpec(aten.native_dropout.default, RANDOM, (T, (0.25, 0.5), (True,)), FLOAT),
    # ---- in-place: the result is written into the first operand, which is returned --------------
    OpSpec(aten.add_.Tensor, INPLACE, (T, TS), ANY, kwargs=(ALPHA,)),
    OpSpec(aten.add_.Scalar, INPLACE, (T, S), ANY),
    OpSpec(aten.sub_.Tensor, INPLACE, (T, TS), NUMERIC, kwargs=(ALPHA,)),
    OpSpec(aten.mul_.Tensor, INPLACE, (T, TS), ANY),
    OpSpec(aten.mul_.Scalar, INPLACE, (T, S), ANY),
    OpSpec(aten.div_.Tensor, INPLACE, (T, TS), FLOAT, (NONZERO, NONZERO)),  # ints cannot hold it
    OpSpec(aten.div_.Tensor_mode, INPLACE, (T, TS), NUMERIC, (NONZERO, NONZERO),
           kwargs=(Kwarg("rounding_mode", ("trunc", "floor"), required=True),)),
    OpSpec(aten.neg_.default, INPLACE, (T,), NUMERIC),
    OpSpec(aten.abs_.default, INPLACE, (T,), NUMERIC),
    OpSpec(aten.exp_.default, INPLACE, (T,), FLOAT),
    OpSpec(aten.sqrt_.default, INPLACE, (T,), FLOAT, (NONNEG,)),
    OpSpec(aten.relu_.default, INPLACE, (T,), NUMERIC),
    OpSpec(aten.sigmoid_.default, INPLACE, (T,), FLOAT),
    OpSpec(aten.tanh_.default, INPLACE, (T,), FLOAT),
    OpSpec(aten.clamp_.default, INPLACE, (T, S, S), NUMERIC),
    OpSpec(aten.floor_.default, INPLACE, (T,), NUMERIC),
    OpSpec(aten.ceil_.default, INPLACE, (T,), NUMERIC),
    OpSpec(aten.pow_.Scalar, INPLACE, (T, S), NUMERIC, (BASE, EXPONENT)),
    OpSpec(aten.masked_fill_.Scalar, INPLACE, (T, MASK, S), ANY),
    OpSpec(aten.zero_.default, INPLACE, (T,), ANY),
    OpSpec(aten.copy_.default, INPLACE, (T, T), ANY),  # src broadcasts to dst, any dtype casts
    OpSpec(aten.fill_.Scalar, INPLACE, (T, S), ANY),
    OpSpec(aten.index_put_.default, INPLACE, (INDEX_PUT,), ANY),
    OpSpec(aten.scatter_.src, INPLACE, (SCATTER,), ANY),
    OpSpec(aten.scatter_add_.default, INPLACE, (SCATTER,), NUMERIC),
    # ---- in-place metadata mutation: the first operand's shape and strides change ----------------
    OpSpec(aten.transpose_.default, INPLACE, (T, DIM, DIM), ANY, mutates_metadata=True),
    OpSpec(aten.t_.default, INPLACE, (T,), ANY, mutates_metadata=True),
    OpSpec(aten.unsqueeze_.default, INPLACE, (T, DIM_INSERT), ANY, mutates_metadata=True),
    OpSpec(aten.squeeze_.dim, INPLACE, (T, SQUEEZABLE_DIM), ANY, mutates_metadata=True),
    OpSpec(aten.as_strided_.default, INPLACE, (T, STRIDED), ANY, mutates_metadata=True),
    # ---- attention on CUDA: the efficient, flash and cuDNN overloads, at the dtypes the device's probe
    # finds (flash: half precision only). Last, so the rows before keep their places: trigger
    # discovery seeds each row's probe graphs by its index, and shrinking moves towards earlier rows.
    OpSpec(aten._scaled_dot_product_efficient_attention.default, ATTENTION, (SDPA,), FLOAT),
    OpSpec(aten._scaled_dot_product_flash_attention.default, ATTENTION, (SDPA,), FLOAT),
    OpSpec(aten._scaled_dot_product_cudnn_attention.default, ATTENTION, (SDPA,), FLOAT),
    # ---- complex dtypes alone: last, so the rows before keep their places (the probes' seeds) --------
    OpSpec(aten.view_as_real.default, VIEW, (T,), COMPLEX),  # a complex tensor's (real, imag) float pairs
)

# How often to draw an op relative to the rest of its category (default 1). Real ATen graphs, and
# the rewrites that target them, are dominated by a few ops; drawing those more often makes a bug
# that only fires on, say, ``sub.Tensor`` with operands of different rank show up within a couple of
# hundred graphs instead of a couple of thousand. Every other row stays reachable.
WEIGHTS: dict = {
    aten.add.Tensor: 5,  # the most common op of all; alpha and broadcasting included
    aten.sub.Tensor: 4,
    aten.mul.Tensor: 5,
    aten.div.Tensor: 4,
    aten.where.self: 3,
    aten._to_copy.default: 4,  # dtype casts: promotion and rounding bugs live here
    aten.neg.default: 2,
    aten.exp.default: 2,
    aten.relu.default: 3,
    aten.sigmoid.default: 2,
    aten.tanh.default: 2,
    aten.rsqrt.default: 2,
    aten.maximum.default: 3,  # NaN propagation
    aten.minimum.default: 3,
    aten.clamp.default: 2,
    aten.clamp_min.default: 2,
    aten.pow.Tensor_Scalar: 2,
    aten.gt.Tensor: 2,
    aten.eq.Tensor: 2,
    aten.gelu.default: 2,
    aten.view.default: 4,
    aten.reshape.default: 3,
    aten.permute.default: 3,
    aten.expand.default: 3,
    aten.unsqueeze.default: 3,
    aten.squeeze.dim: 2,
    aten.slice.Tensor: 3,
    aten.select.int: 2,
    aten.transpose.int: 2,
    aten.sum.dim_IntList: 3,
    aten.mean.dim: 3,
    aten.amax.default: 2,
    aten.clone.default: 8,  # decompositions and functionalization leave many copies (what no-op removal targets)
    aten.cat.default: 2,
    aten.add_.Tensor: 3,
    aten.mul_.Tensor: 3,
    aten.copy_.default: 3,
    aten.mm.default: 3,
    aten.addmm.default: 3,
    aten.bmm.default: 2,
    aten._softmax.default: 2,
    aten.convolution.default: 3,
    aten.native_layer_norm.default: 2,
    aten.index.Tensor: 2,
    aten.split.Tensor: 2,
    aten.split_with_sizes.default: 2,
    aten.full.default: 2,
    aten.scaled_dot_product_attention.default: 2,
}


_INDEX: dict = {}


def rows_named(item) -> tuple:
    """The catalog rows ``item`` names, or () when none: a row, an OpOverload or OpOverloadPacket, or
    a name (``aten.add.Tensor``, ``add.Tensor``; a packet ``aten.add`` or ``add`` names every row of it).

    >>> [r.name for r in rows_named("aten.clamp")]
    ['aten.clamp.default', 'aten.clamp.Tensor']
    """
    if isinstance(item, OpSpec):
        return (item,)
    if not _INDEX:
        for row in OPS:
            packet = row.name.rsplit(".", 1)[0]
            for key in (row.overload, row.name, row.name.removeprefix("aten."), packet, packet.removeprefix("aten."),
                        row.overload.overloadpacket):
                _INDEX.setdefault(key, []).append(row)
    try:
        return tuple(dict.fromkeys(_INDEX.get(item, ())))
    except TypeError:  # unhashable: not an op
        return ()
