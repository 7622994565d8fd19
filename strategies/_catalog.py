"""The vocabulary of the op catalog: categories, dtype groups, argument kinds, domains, and the row type.

The table itself lives in ``_ops.py``; this module only defines what a row can say, so the table
reads as data and the graph builder (``_builder.py``) has one drawing rule per argument kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

# --- categories -------------------------------------------------------------------------------
POINTWISE = "pointwise"
VIEW = "view"
REDUCTION = "reduction"
INPLACE = "inplace"
OTHER = "other"
CATEGORIES = (POINTWISE, VIEW, REDUCTION, INPLACE, OTHER)

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
)
FLOAT = frozenset({torch.float16, torch.bfloat16, torch.float32, torch.float64})
INT = frozenset({torch.int32, torch.int64})
BOOL = frozenset({torch.bool})
NUMERIC = FLOAT | INT
INTEGRAL = INT | BOOL
ANY = NUMERIC | BOOL

# --- argument kinds: each has exactly one drawing rule in _builder.py ---------------------------
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

ARG_KINDS = frozenset(
    {
        TENSOR, TENSOR_OR_SCALAR, SCALAR, MASK, DIM, DIM_INSERT, SHAPE, EXPAND_SHAPE, PERM, SLICE,
        SELECT, FLATTEN, STRIDED, DIAGONAL, UNFOLD, DIMS, KEEPDIM, DTYPE, TENSORS, SQUEEZABLE_DIM,
    }
)
TENSOR_KINDS = frozenset({TENSOR, TENSOR_OR_SCALAR, MASK})

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
        """``aten.<packet>.<overload>``, the name users pass in ``ops=``."""
        packet = self.overload._schema.name.split("::")[-1]
        return f"aten.{packet}.{self.overload._overloadname}"

    @property
    def arity(self) -> int:
        """How many tensor operands the op takes (a list operand counts as one)."""
        return sum(k in TENSOR_KINDS or k == TENSORS for k in self.args)

    def domain_of(self, position: int) -> str:
        return self.domain[position] if position < len(self.domain) else ANY_VALUE

    def __repr__(self) -> str:
        return f"OpSpec({self.name}, {self.category})"
