"""Eager argument checks shared by every public strategy (Hypothesis' validation style)."""

from __future__ import annotations

from hypothesis.strategies import SearchStrategy

from ._errors import InvalidArgument


def check_type(value, types, name: str, expected: str) -> None:
    if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise InvalidArgument(f"{name}={value!r} must be {expected}, not a bool")
    if not isinstance(value, types):
        raise InvalidArgument(f"{name}={value!r} must be {expected}, got {type(value).__name__}")


def check_int_range(value, name: str, *, min_value: int = 0) -> None:
    check_type(value, int, name, "an int")
    if value < min_value:
        raise InvalidArgument(f"{name}={value!r} must be at least {min_value}")


def check_size_pair(lo, hi, lo_name: str, hi_name: str, *, min_value: int = 0) -> None:
    check_int_range(lo, lo_name, min_value=min_value)
    check_int_range(hi, hi_name, min_value=min_value)
    if lo > hi:
        raise InvalidArgument(f"{lo_name}={lo!r} must not exceed {hi_name}={hi!r}")


def check_strategy(value, name: str, hint: str = "") -> None:
    if not isinstance(value, SearchStrategy):
        extra = f" ({hint})" if hint else ""
        raise InvalidArgument(
            f"{name}={value!r} must be a Hypothesis strategy, got {type(value).__name__}{extra}"
        )


def check_bool(value, name: str) -> None:
    if not isinstance(value, bool):
        raise InvalidArgument(f"{name}={value!r} must be True or False")
