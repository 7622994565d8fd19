"""Tests of dtypes(), shapes(), broadcastable_shapes(), tensors() and scalars()."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from strategies import DOMAINS, InvalidArgument, broadcastable_shapes, dtypes, scalars, shapes, tensors
from tests._debug import find_any

F32 = st.just(torch.float32)


@given(tensors(dtypes=F32, shapes=st.just((2, 3)), domain="positive"))
def test_domain_is_respected(t):
    assert t.dtype is torch.float32 and tuple(t.shape) == (2, 3)
    assert bool((t > 0).all())


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.int32, torch.int64])
def test_every_domain_draws_finite_values_of_the_dtype(domain, dtype):
    t = find_any(tensors(dtypes=st.just(dtype), shapes=st.just((4,)), domain=domain), lambda t: t.numel() == 4)
    assert t.dtype is dtype
    if t.is_floating_point():
        assert bool(torch.isfinite(t).all()) and not bool(((t == 0) & torch.signbit(t)).any())


@pytest.mark.parametrize("layout", ["transposed", "strided", "expanded"])
def test_non_contiguous_layouts_are_reachable(layout):
    checks = {
        "transposed": lambda t: t.dim() >= 2 and not t.is_contiguous() and 0 not in t.stride(),
        "strided": lambda t: t.dim() >= 1 and any(s >= 2 * math.prod(t.shape[i + 1:]) for i, s in enumerate(t.stride()) if t.shape[i] > 1),
        "expanded": lambda t: 0 in t.stride() and t.numel() > 1,
    }
    find_any(tensors(dtypes=F32), checks[layout])


@pytest.mark.parametrize("special", ["nan", "inf", "-inf", "-0.0", "subnormal"])
def test_special_values_are_reachable(special):
    checks = {
        "nan": lambda t: bool(t.isnan().any()),
        "inf": lambda t: bool((t == math.inf).any()),
        "-inf": lambda t: bool((t == -math.inf).any()),
        "-0.0": lambda t: bool(((t == 0) & torch.signbit(t)).any()),
        "subnormal": lambda t: bool(((t != 0) & (t.abs() < torch.finfo(t.dtype).smallest_normal)).any()),
    }
    find_any(tensors(dtypes=dtypes(integral=False, boolean=False), special_values=True), checks[special])


def test_ties_are_common():
    find_any(tensors(dtypes=F32, shapes=st.just((8,))), lambda t: len(set(t.tolist())) < 8)


@given(shapes(min_dims=1, max_dims=3, min_side=0, max_side=4).flatmap(lambda s: st.tuples(st.just(s), broadcastable_shapes(s))))
def test_broadcastable_shapes_broadcast(pair):
    a, b = pair
    torch.broadcast_shapes(a, b)


def test_zero_size_and_zero_dim_shapes_are_reachable():
    find_any(shapes(), lambda s: 0 in s)
    find_any(shapes(), lambda s: s == ())


@given(dtypes(), st.sampled_from(DOMAINS), st.data())
def test_scalars_match_the_tensor_kind(dtype, domain, data):
    value = data.draw(scalars(dtype, domain))
    if dtype is torch.bool:
        assert isinstance(value, bool)
    elif not dtype.is_floating_point:
        assert isinstance(value, int)  # bools are ints too, and allowed where the domain is "any"
        assert domain == "any" or not isinstance(value, bool)


@pytest.mark.parametrize(
    "call, quoted",
    [
        (lambda: shapes(min_dims=3, max_dims=1), "min_dims=3"),
        (lambda: shapes(max_dims=20), "max_dims=20"),
        (lambda: dtypes(floating=False, integral=False, boolean=False), "nothing to draw"),
        (lambda: tensors(dtypes=torch.float32), "dtypes=torch.float32 must be a Hypothesis strategy"),
        (lambda: tensors(domain="negative"), "domain='negative'"),
        (lambda: broadcastable_shapes((2, -1)), "shape=(2, -1)"),
    ],
)
def test_bad_arguments(call, quoted):
    with pytest.raises(InvalidArgument) as info:
        call()
    assert quoted in str(info.value)
