"""Strategies for dtypes, shapes, Python scalars and tensors (values, domains, layouts, special values).

Tensors are drawn as a contiguous *base* plus a ``Layout`` that turns it into the final tensor
(transposed, strided slice, stride-0 expand). Keeping the recipe lets a GraphCase hand out fresh
copies with exactly the same strides and storage offset, which in-place passes need.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import torch
from hypothesis import strategies as st
from hypothesis.extra import numpy as npst

from ._catalog import vocabulary as C
from ._draws import choose, flag, integers
from ._errors import InvalidArgument
from ._validation import check_bool, check_size_pair, check_strategy, check_type

# --- dtypes ------------------------------------------------------------------------------------


def dtypes(*, floating: bool = True, integral: bool = True, boolean: bool = True,
           complex: bool = False) -> st.SearchStrategy:  # noqa: A002 - the kind's own name
    """Draw a torch dtype from f32, f64, f16, bf16, i64, i32 and bool (and c64, c128 with ``complex``).

    ``graphs()`` with its default dtypes draws complex leaves in focus steps, where the focused op
    takes them (a float leaf's complex variant); ``complex=True`` draws them as often as the others,
    everywhere.

    Shrinks towards ``torch.float32``.

    >>> dtypes(integral=False, boolean=False).example() in (torch.float32, torch.float64, torch.float16, torch.bfloat16)
    True
    """
    check_bool(floating, "floating")
    check_bool(integral, "integral")
    check_bool(boolean, "boolean")
    check_bool(complex, "complex")
    chosen = [
        d
        for d in C.ALL_DTYPES
        if (floating and d in C.FLOAT) or (integral and d in C.INT) or (boolean and d is torch.bool)
        or (complex and d in C.COMPLEX)
    ]
    if not chosen:
        raise InvalidArgument(
            "dtypes(floating=False, integral=False, boolean=False, complex=False) has nothing to draw; "
            "enable at least one kind"
        )
    return st.sampled_from(chosen)


# --- shapes ------------------------------------------------------------------------------------


def shapes(*, min_dims: int = 0, max_dims: int = 4, min_side: int = 0, max_side: int = 5) -> st.SearchStrategy:
    """Draw a shape tuple; size-1 sides are common, 0-size sides appear when ``min_side=0``.

    Shrinks towards fewer dimensions and smaller sides.

    >>> len(shapes(min_dims=2, max_dims=2).example())
    2
    """
    check_size_pair(min_dims, max_dims, "min_dims", "max_dims")
    check_size_pair(min_side, max_side, "min_side", "max_side")
    if max_dims > 8:
        raise InvalidArgument(f"max_dims={max_dims!r} must be at most 8 (graphs stay small and fast)")
    side = st.integers(min_side, max_side)
    if min_side <= 1 <= max_side:
        side = st.one_of(side, st.just(1))  # broadcasting and squeezing need many size-1 dims
    return st.lists(side, min_size=min_dims, max_size=max_dims).map(tuple)


def broadcastable_shapes(shape, *, min_dims: int = 0, max_dims: int | None = None,
                         min_side: int = 1, max_side: int | None = None) -> st.SearchStrategy:
    """Draw shapes that broadcast together with ``shape`` (numpy/torch rules).

    Shrinks towards fewer dimensions and size-1 sides.

    >>> import torch
    >>> s = broadcastable_shapes((3, 1, 4)).example()
    >>> len(torch.broadcast_shapes(s, (3, 1, 4))) >= 3
    True
    """
    check_type(shape, (tuple, list, torch.Size), "shape", "a tuple of non-negative ints")
    if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
        raise InvalidArgument(f"shape={shape!r} must contain only non-negative ints")
    max_dims = max(len(shape), min_dims) if max_dims is None else max_dims
    max_side = max([*shape, min_side + 4]) if max_side is None else max_side
    check_size_pair(min_dims, max_dims, "min_dims", "max_dims")
    check_size_pair(min_side, max_side, "min_side", "max_side")
    return npst.broadcastable_shapes(
        tuple(shape), min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side
    )


# --- values ------------------------------------------------------------------------------------

# Inclusive value ranges per domain: (float range, integer range).
_RANGES = {
    C.ANY_VALUE: ((-8.0, 8.0), (-16, 16)),
    C.POSITIVE: ((0.125, 8.0), (1, 16)),
    C.NONNEG: ((0.0, 8.0), (0, 16)),
    C.NONZERO: ((0.125, 8.0), (1, 16)),  # mirrored to negatives below
    C.UNIT: ((-1.0, 1.0), (-1, 1)),
    C.GT_NEG1: ((-0.875, 8.0), (0, 16)),
    C.EXPONENT: ((-2.0, 3.0), (0, 3)),
    C.BASE: ((0.125, 4.0), (-4, 4)),
}
_NP = {
    torch.float16: np.float16, torch.float32: np.float32, torch.float64: np.float64,
    torch.bfloat16: np.float32,  # drawn as f32, rounded to bf16 by the cast
    torch.int32: np.int32, torch.int64: np.int64, torch.bool: np.bool_,
}
_WIDTH = {torch.float16: 16, torch.float32: 32, torch.bfloat16: 32, torch.float64: 64}


def special_floats(dtype: torch.dtype) -> tuple[float, ...]:
    """The values that break naive rewrites: NaN, infinities, -0.0, subnormal, huge and tiny."""
    fi = torch.finfo(dtype)
    subnormal = fi.smallest_normal / 4 if dtype is not torch.bfloat16 else 2.0**-130
    return (math.nan, math.inf, -math.inf, -0.0, subnormal, float(fi.max) / 2, float(fi.smallest_normal))


@functools.lru_cache(maxsize=256)
def element_values(dtype: torch.dtype, domain: str = C.ANY_VALUE, *, special_values: bool = False) -> st.SearchStrategy:
    """Python values for one tensor element of ``dtype`` inside ``domain``.

    Small integers are mixed in for floats: exact arithmetic and ties between operands are common
    in real graphs and are where rewrites of comparisons and rounding go wrong.
    """
    if dtype is torch.bool:
        return st.just(True) if domain in (C.NONZERO, C.POSITIVE) else st.booleans()
    (flo, fhi), (ilo, ihi) = _RANGES[domain]
    if dtype in C.INT:
        ints = st.integers(ilo, ihi)
        return ints.map(lambda v: v if v != 0 else 1) if domain == C.NONZERO else _mirror(ints, domain)
    if special_values:
        flo, fhi = _RANGES[C.ANY_VALUE][0]
    width = _WIDTH[dtype]
    small_ints = st.integers(math.ceil(flo), math.floor(fhi)).map(float)
    floats = st.floats(flo, fhi, width=width, allow_nan=False, allow_infinity=False, allow_subnormal=False)
    if domain == C.NONZERO and not special_values:
        small_ints = small_ints.filter(bool)
    if not special_values:
        floats = floats.map(lambda v: v + 0.0)  # -0.0 is a special value
    values = st.one_of(small_ints, floats)
    if domain == C.NONZERO and not special_values:
        values = _mirror(values, domain)
    if special_values:
        values = st.one_of(values, st.sampled_from(special_floats(dtype)))
    return values


def _mirror(strategy, domain):
    if domain != C.NONZERO:
        return strategy
    return st.tuples(strategy, st.booleans()).map(lambda p: -p[0] if p[1] else p[0])


@functools.lru_cache(maxsize=256)
def scalars(dtype: torch.dtype, domain: str = C.ANY_VALUE, *, special_values: bool = False) -> st.SearchStrategy:
    """A Python scalar operand for a tensor of ``dtype``: int for integer tensors, float for floats.

    Integers sometimes stand in for floats (``x * 2``, as traced graphs write it); bools appear for
    every dtype where the domain allows any value.
    """
    if dtype is torch.bool:
        return st.booleans()
    # A bool scalar is a legal number operand too (``x + True``); only where any value is allowed.
    bools = (st.booleans(),) if domain == C.ANY_VALUE else ()
    if dtype in C.INT:
        return st.one_of(element_values(dtype, domain).map(int), *bools)
    if dtype.is_complex:  # a real number: a complex tensor plus a float, as traced graphs write it
        dtype = dtype.to_real()
    values = element_values(dtype, domain, special_values=special_values)
    ints = element_values(torch.int64, domain).filter(lambda v: in_float_domain(v, domain))
    return st.one_of(values.map(float), ints, *bools)


def in_float_domain(v, domain):
    """A scalar operand ``v`` inside ``domain``'s drawing range (mirrored for NONZERO)."""
    (lo, hi), _ = _RANGES[domain]
    return lo <= v <= hi or (domain == C.NONZERO and -hi <= v <= -lo)


# --- layouts -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """How a contiguous base becomes the drawn tensor; ``apply`` is exact and repeatable."""

    kind: str = "contiguous"  # contiguous | transposed | strided | expanded
    perm: tuple = ()  # transposed: the base is stored in this dim order
    dim: int = 0  # strided: which dim is stepped
    step: int = 1
    offset: int = 0  # strided: leading elements skipped along dim
    shape: tuple = ()  # expanded: the final shape
    requires_grad: bool = False  # the drawn tensor is a leaf that requires grad (graphs(requires_grad=True))

    def apply(self, base: torch.Tensor) -> torch.Tensor:
        t = self._view(base)
        return t.requires_grad_() if self.requires_grad else t

    def _view(self, base: torch.Tensor) -> torch.Tensor:
        if self.kind == "contiguous":
            return base
        if self.kind == "transposed":
            inverse = [self.perm.index(i) for i in range(len(self.perm))]
            return base.permute(inverse)
        if self.kind == "strided":
            return base.narrow(self.dim, self.offset, base.shape[self.dim] - self.offset)[
                (slice(None),) * self.dim + (slice(None, None, self.step),)
            ]
        if self.kind == "expanded":
            return base.expand(self.shape)
        raise AssertionError(f"unknown layout kind {self.kind!r}")

    def base_shape(self, shape: tuple) -> tuple:
        if self.kind == "transposed":
            return tuple(shape[p] for p in self.perm)
        if self.kind == "strided":
            s = list(shape)
            s[self.dim] = s[self.dim] * self.step + self.offset
            return tuple(s)
        if self.kind == "expanded":
            return tuple(1 if i in self.perm else n for i, n in enumerate(shape))
        return tuple(shape)


def draw_layout(draw, shape: tuple) -> Layout:
    """A layout for ``shape``: contiguous most often, else transposed, stepped slice or stride-0 expand."""
    rank = len(shape)
    kinds = ["contiguous"]
    if rank >= 2:
        kinds.append("transposed")
    if rank >= 1:
        kinds.append("strided")
    if any(n > 1 for n in shape):
        kinds.append("expanded")
    kind = choose(draw, kinds)
    if kind == "transposed":
        # Rotating the dim order by 1..rank-1 is never the identity, so no filter is needed.
        k = draw(integers(1, rank - 1))
        return Layout("transposed", perm=tuple(range(k, rank)) + tuple(range(k)))
    if kind == "strided":
        return Layout("strided", dim=draw(integers(0, rank - 1)), step=draw(integers(2, 3)),
                      offset=draw(integers(0, 1)))
    if kind == "expanded":
        # Which dims are broadcast (stored once, stride 0); reuses ``perm`` as the set of dims.
        candidates = [i for i, n in enumerate(shape) if n > 1]
        dims = [i for i in candidates if flag(draw)] or [candidates[0]]
        return Layout("expanded", perm=tuple(dims), shape=tuple(shape))
    return Layout()


# Module-level names for the defaults, so ``tensors(dtypes=..., shapes=...)`` can shadow them.
_dtypes = dtypes
_shapes = shapes

# --- tensors -----------------------------------------------------------------------------------


@functools.lru_cache(maxsize=2048)
def _arrays(dtype, shape, domain, special_values):
    elements = element_values(dtype, domain, special_values=special_values)
    return npst.arrays(_NP[dtype], shape, elements=elements)


def _make_base(dtype: torch.dtype, values: np.ndarray) -> torch.Tensor:
    # ascontiguousarray makes a 0-d array 1-d (numpy's documented minimum of one dim): reshape back.
    t = torch.from_numpy(np.ascontiguousarray(values).reshape(values.shape))
    return t.to(dtype) if t.dtype != dtype else t.clone()


def tensor_with_layout(draw, dtype: torch.dtype, shape: tuple, domain: str = C.ANY_VALUE, *,
                       special_values: bool = False, noncontiguous: bool = True):
    """Draw ``(tensor, base, layout)``; ``layout.apply(base.clone())`` rebuilds an identical tensor.

    With ``special_values``, half the tensors hold them (about half their elements) and half hold
    ordinary values: where every operand holds a NaN or an infinity, a matmul or a reduction turns
    all of its output into NaN, and a changed value is then invisible behind it."""
    layout = draw_layout(draw, shape) if noncontiguous else Layout()
    base_shape = layout.base_shape(tuple(shape))
    special_values = special_values and (dtype.is_floating_point or dtype.is_complex) and flag(draw)
    if dtype.is_complex:  # the real and imaginary parts drawn as floats (specials in either), paired
        parts = dtype.to_real()
        pairs = _make_base(parts, draw(_arrays(parts, (*base_shape, 2), domain, special_values)))
        base = torch.view_as_complex(torch.empty(pairs.shape, dtype=parts).copy_(pairs))  # strides of a new one
    else:
        base = _make_base(dtype, draw(_arrays(dtype, base_shape, domain, special_values)))
    return layout.apply(base.clone()), base, layout


def tensors(*, dtypes: st.SearchStrategy | None = None, shapes: st.SearchStrategy | None = None,
            domain: str = C.ANY_VALUE, special_values: bool = False, noncontiguous: bool = True) -> st.SearchStrategy:
    """Draw a CPU tensor: values in ``domain``, repeated values common, possibly non-contiguous.

    Args:
        dtypes: strategy of torch dtypes (default: ``strategies.dtypes()``).
        shapes: strategy of shape tuples (default: ``strategies.shapes(max_dims=3, max_side=4)``).
        domain: one of ``strategies.DOMAINS`` (e.g. ``"positive"`` for log inputs).
        special_values: also draw NaN, +-inf, -0.0, subnormals, huge and tiny magnitudes (floats).
        noncontiguous: also draw transposed, stepped-slice and stride-0 expanded layouts.

    Shrinks towards contiguous, small, zero-filled float32 tensors.

    >>> import torch
    >>> t = tensors(dtypes=st.just(torch.int32), shapes=st.just((2, 3))).example()
    >>> (t.dtype, tuple(t.shape))
    (torch.int32, (2, 3))
    """
    dtypes = _dtypes() if dtypes is None else dtypes
    shapes = _shapes(max_dims=3, max_side=4) if shapes is None else shapes
    _check_strategy_arg(dtypes, "dtypes", "st.sampled_from([torch.float32, ...])")
    _check_strategy_arg(shapes, "shapes", "st.just((2, 3))")
    if domain not in C.DOMAINS:
        raise InvalidArgument(f"domain={domain!r} must be one of {C.DOMAINS}")
    check_bool(special_values, "special_values")
    check_bool(noncontiguous, "noncontiguous")

    @st.composite
    def _draw(draw):
        dtype = draw(dtypes)
        check_dtype(dtype, "dtypes")
        shape = draw(shapes)
        t, _, _ = tensor_with_layout(draw, dtype, shape, domain, special_values=special_values,
                                     noncontiguous=noncontiguous)
        return t

    return _draw()


def check_dtype(dtype, name: str) -> None:
    if dtype not in C.ALL_DTYPES:
        raise InvalidArgument(
            f"{name} drew {dtype!r}, but should draw one of {', '.join(map(str, C.ALL_DTYPES))}"
        )


def _check_strategy_arg(value, name, example):
    check_strategy(value, name, f"pass a strategy, e.g. {name}={example}")
