"""The vocabulary of the op catalog: categories, dtype groups, argument kinds, domains, and the row type.

The table itself lives in ``ops.py``; this module only defines what a row can say, so the table
reads as data and the drawing (``strategies/_draw/``) has one rule per argument kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

# --- categories -------------------------------------------------------------------------------
POINTWISE = "pointwise"
VIEW = "view"
REDUCTION = "reduction"
INPLACE = "inplace"
OTHER = "other"  # copies, concat/split, padding, repeats, flips
MATMUL = "matmul"  # mm, bmm, addmm, baddbmm, addmv, dot, and linear's t + addmm + _unsafe_view form
CONV = "conv"  # convolution, pooling
NORM = "norm"  # layer, batch and group norm, the RMS-norm chain
ATTENTION = "attention"  # scaled_dot_product_attention and the CPU overloads it lowers to
INDEXING = "indexing"  # index, index_put, gather, scatter, embedding, slice/select_scatter
FACTORY = "factory"  # full, zeros, arange, empty then a full write, dtype views and conversions
QUANT = "quant"  # quantize_per_tensor / dequantize_per_tensor (quantized_decomposed)
RANDOM = "random"  # rand_like, native_dropout: drawn only with graphs(random=True)
CUSTOM = "custom"  # a user's op (torch.ops.<lib>.<op>), drawn from its schema and its op_rule (custom.py)
CATEGORIES = (POINTWISE, VIEW, REDUCTION, INPLACE, OTHER, MATMUL, CONV, NORM, ATTENTION, INDEXING, FACTORY,
              QUANT, RANDOM, CUSTOM)

# --- dtypes -----------------------------------------------------------------------------------
# Order matters: the first entry is what a failing example shrinks towards.
ALL_DTYPES = (
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int64,
    torch.int32,
    torch.bool,
    torch.complex64,
    torch.complex128,
)
FLOAT = frozenset({torch.float16, torch.bfloat16, torch.float32, torch.float64})
INT = frozenset({torch.int32, torch.int64})
BOOL = frozenset({torch.bool})
NUMERIC = FLOAT | INT
INTEGRAL = INT | BOOL
ANY = NUMERIC | BOOL
# Complex dtypes: drawn where a row lists them (the rows whose CPU kernels take both), as a variant of
# a float32/float64 leaf (operands.complex_variant) or a view.dtype of a float's bits; never in ANY.
COMPLEX = frozenset({torch.complex64, torch.complex128})

# --- argument kinds: each has exactly one drawing rule in _draw/ -------------------------------
TENSOR = "tensor"  # a tensor operand, broadcast against the first one
TENSOR_OR_SCALAR = "tensor_or_scalar"  # a tensor operand, or a Python scalar standing in for one
SCALAR = "scalar"  # a Python int/float/bool matching the first operand's dtype kind
MASK = "mask"  # a bool tensor operand, broadcast against the first one
DIM = "dim"  # an existing dimension of the first operand (negative indices too)
DIM_INSERT = "dim_insert"  # a position for a new dimension (unsqueeze)
SHAPE = "shape"  # a size list with the same element count (view/reshape), -1 allowed
EXPAND_SHAPE = "expand_shape"  # a size list the first operand broadcasts to (-1 keeps a size)
PERM = "perm"  # a permutation of the first operand's dimensions
SLICE = "slice"  # dim, start, end, step
SELECT = "select"  # dim, index (the dim must be non-empty)
FLATTEN = "flatten"  # start_dim, end_dim
STRIDED = "strided"  # size, stride, storage_offset inside the operand's storage
DIAGONAL = "diagonal"  # offset, dim1, dim2
UNFOLD = "unfold"  # dimension, size, step
DIMS = "dims"  # a non-empty list of distinct dimensions (reductions)
KEEPDIM = "keepdim"  # a bool
DTYPE = "dtype"  # a target dtype for casts
TENSORS = "tensors"  # a list of tensors equal in shape but for one dimension (cat), then that dim
SQUEEZABLE_DIM = "squeezable_dim"  # a dimension, preferring size-1 ones
SCALAR_TENSOR = "scalar_tensor"  # a 0-d tensor of the first operand's dtype (masked_fill.Tensor's value)
VIEW_DTYPE = "view_dtype"  # another dtype of the operand's element size (view.dtype)

# A positional literal chosen from a tuple (``(False,)``, ``(0.0, 0.5)``) is written in ``args``
# as that tuple. The kinds below draw a whole call, operands included, because their operands'
# shapes depend on each other (matmul's inner dims, conv's channels, attention's heads); their rules
# are in _draw/calls.py, one per kind.
MM = "mm"  # [m, k] @ [k, n]; bmm's batch; addmm/baddbmm/addmv's bias; dot's vectors
CONVOLUTION = "convolution"  # input, weight, bias, stride, padding, dilation, transposed, output_padding, groups
POOL = "pool"  # an [N,] C, H, W input and kernel/stride/padding(/dilation, ceil_mode)
LAYER_NORM = "layer_norm"  # input, normalized_shape, weight, bias, eps
BATCH_NORM = "batch_norm"  # input [N, C, ...], weight, bias, running stats, training, momentum, eps
GROUP_NORM = "group_norm"  # input, weight, bias, N, C, HxW, group, eps
SDPA = "sdpa"  # query, key, value, mask, causal, scale
INDEX = "index"  # self, a list of index tensors (or None) for its leading dims
INDEX_PUT = "index_put"  # self, indices (unique unless accumulating), values, accumulate
GATHER = "gather"  # self, dim, an index of self's rank (index_select: a 1-d index)
SCATTER = "scatter"  # self, dim, an index (unique per slice unless adding), src or value
SLICE_SCATTER = "slice_scatter"  # self, src shaped as the slice, the slice (select_scatter: the select)
EMBEDDING = "embedding"  # weight [V, D], int64 indices in [0, V)
TOPK = "topk"  # self, k <= the dim's size, dim, largest, sorted
STATS = "stats"  # self, dims, and a correction below the reduced count (var, std, var_mean)
SPLIT = "split"  # split_size / split_sizes / chunks, dim
PAD = "pad"  # a pad list of even length <= 2 * rank (negative entries crop), value
REPEAT = "repeat"  # repeats, one per dim and maybe more
ROLL = "roll"  # shifts and dims of equal length
STACK = "stack"  # tensors of one shape, a dim in [0, rank]
EXPAND_AS = "expand_as"  # self, a tensor whose shape self broadcasts to
FILL = "fill"  # a factory's size (or range) and fill value, and its dtype
QUANTIZE = "quantize"  # input, scale, zero_point, quant_min, quant_max, dtype (and dequantize's int8 input)
CUSTOM_CALL = "custom_call"  # every argument of a user's op, by its op_rule and then its schema
CALL_KINDS = frozenset({MM, CONVOLUTION, POOL, LAYER_NORM, BATCH_NORM, GROUP_NORM, SDPA, INDEX, INDEX_PUT, GATHER,
                        SCATTER, SLICE_SCATTER, EMBEDDING, TOPK, STATS, SPLIT, PAD, REPEAT, ROLL, STACK, EXPAND_AS, FILL,
                        QUANTIZE, CUSTOM_CALL})

ARG_KINDS = frozenset(
    {
        TENSOR, TENSOR_OR_SCALAR, SCALAR, MASK, DIM, DIM_INSERT, SHAPE, EXPAND_SHAPE, PERM, SLICE,
        SELECT, FLATTEN, STRIDED, DIAGONAL, UNFOLD, DIMS, KEEPDIM, DTYPE, TENSORS, SQUEEZABLE_DIM,
        SCALAR_TENSOR, VIEW_DTYPE,
    }
) | CALL_KINDS
TENSOR_KINDS = frozenset({TENSOR, TENSOR_OR_SCALAR, MASK, SCALAR_TENSOR})

# --- input domains: what values an operand must hold so eager stays in the op's domain ----------
# Without special values, float operands are kept inside the domain (log gets positives); integer
# domains always hold, because integer division by zero raises instead of producing inf.
ANY_VALUE = "any"
POSITIVE = "positive"  # > 0                      log, rsqrt
NONNEG = "nonneg"  # >= 0                         sqrt
NONZERO = "nonzero"  # != 0                       divisors, reciprocal
UNIT = "unit"  # in [-1, 1]                       asin
GT_NEG1 = "gt_neg1"  # > -1                       log1p
EXPONENT = "exponent"  # small; non-negative for integers   pow exponents
BASE = "base"  # positive, so fractional exponents stay real   pow bases
DOMAINS = (ANY_VALUE, POSITIVE, NONNEG, NONZERO, UNIT, GT_NEG1, EXPONENT, BASE)


@dataclass(frozen=True)
class Kwarg:
    """A keyword argument worth drawing: a kind from ARG_KINDS or a tuple of literal choices."""

    name: str
    values: str | tuple
    required: bool = False


def overload_name(overload: torch._ops.OpOverload) -> str:
    """``<namespace>.<packet>.<overload>`` of an OpOverload (``aten.add.Tensor``, ``mylib.rms_norm.default``)."""
    namespace, packet = overload._schema.name.split("::")
    return f"{namespace}.{packet}.{overload._overloadname}"


@dataclass(frozen=True)
class OpSpec:
    """One row of the op catalog.

    ``args`` lists positional argument kinds in schema order (a multi-argument kind such as SLICE
    expands to several arguments); ``domain`` gives the value domain of the positional operands
    (missing entries mean ANY_VALUE); ``dtypes`` are the dtypes every tensor operand may have.
    """

    overload: torch._ops.OpOverload
    category: str
    args: tuple[str, ...]
    dtypes: frozenset
    domain: tuple[str, ...] = ()
    kwargs: tuple[Kwarg, ...] = ()
    mutates_metadata: bool = False
    note: str = field(default="", compare=False)

    @property
    def name(self) -> str:
        """``<namespace>.<packet>.<overload>`` (``aten.add.Tensor``), the name users pass in ``ops=``."""
        return overload_name(self.overload)

    @property
    def draws_whole_call(self) -> bool:
        """Its first kind draws every argument (``CALL_KINDS``)."""
        return bool(self.args) and self.args[0] in CALL_KINDS

    @property
    def complex_only(self) -> bool:
        """It takes complex dtypes alone (``view_as_real``): drawn where it is named (``ops=``, a focus),
        its leaves complex, and not among the default rows, whose operands are real outside focus steps."""
        return bool(self.dtypes) and self.dtypes <= COMPLEX

    @property
    def pair_positions(self) -> tuple | None:
        """The two operands an *equal operands* pair makes one value: ``(0, 1)`` (``sub(x, x)``), ``(1, 2)``
        where the first is a mask (``where(c, x, x)``); None where no two tensor operands may be one (a
        list, a whole call drawn by one rule, a single tensor operand)."""
        kinds = self.args
        if not kinds or kinds[0] == TENSORS or self.draws_whole_call:
            return None
        if kinds[0] == MASK:
            return (1, 2) if len(kinds) > 2 and kinds[1] == TENSOR and kinds[2] in (TENSOR, TENSOR_OR_SCALAR) else None
        return (0, 1) if len(kinds) > 1 and kinds[1] in (TENSOR, TENSOR_OR_SCALAR) else None

    def domain_of(self, position: int) -> str:
        return self.domain[position] if position < len(self.domain) else ANY_VALUE

    def __repr__(self) -> str:
        return f"OpSpec({self.name}, {self.category})"
