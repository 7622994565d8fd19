"""An ordered registry of ATen lowering passes ``(gm, sample_inputs) -> gm``, Torch-TensorRT style.

Mirrors Torch-TensorRT's ``_aten_lowering_pass`` decorator (bare or with ``index=``),
``dump_lowering_passes``, ``_remove_lowering_pass`` and ``post_lowering`` over ATEN_LOWERING_PASSES,
and enforces their unwritten rule that a pass leaves its graph linted and recompiled: the registry
lints and recompiles after every pass, so a pass that breaks the graph is named at once instead of
failing later in someone else's pass.

Example:
    >>> from reference_lowering.passes import registry
    >>> print(registry.dump_lowering_passes().splitlines()[0])  # doctest: +SKIP
    0: remove_detach
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from typing import Any, overload

from torch import fx

from .._errors import LoweringError
from ._infra import pass_name, type_name
from ._reference import DEFAULT_LOWERING_PASSES

__all__ = [
    "DEFAULT_REGISTRY",
    "LoweringPass",
    "LoweringPassRegistry",
    "apply_lowering_passes",
    "dump_lowering_passes",
    "lowering_pass",
    "lowering_passes",
    "remove_lowering_pass",
]

LoweringPass = Callable[[fx.GraphModule, Sequence[Any]], fx.GraphModule]


class LoweringPassRegistry:
    """An ordered list of lowering passes, each ``(gm, sample_inputs) -> gm``, applied in order.

    Example:
        >>> reg = LoweringPassRegistry()
        >>> @reg.lowering_pass
        ... def drop_nothing(gm, sample_inputs):
        ...     return gm
        >>> reg.dump_lowering_passes()
        '0: drop_nothing'
    """

    def __init__(self, passes: Iterable[LoweringPass] = ()) -> None:
        self._passes: list[LoweringPass] = []
        for p in passes:
            self._passes.append(_checked_pass(p))

    @overload
    def lowering_pass(self, fn: LoweringPass, *, index: int | None = None) -> LoweringPass: ...

    @overload
    def lowering_pass(self, fn: None = None, *, index: int | None = None) -> Callable[[LoweringPass], LoweringPass]: ...

    def lowering_pass(self, fn: LoweringPass | None = None, *, index: int | None = None) -> Any:
        """Registers ``fn``; use bare (``@reg.lowering_pass``) to append or ``@reg.lowering_pass(index=0)``.

        ``index`` is where the pass is inserted (Python list positions, negatives count from the end);
        None appends. Returns ``fn`` unchanged, so the decorated function stays directly callable.
        """
        _check_index_type(index, "lowering_pass")
        if fn is None:
            return lambda f: self._register(f, index)
        return self._register(fn, index)

    def _register(self, fn: Any, index: int | None) -> LoweringPass:
        fn = _checked_pass(fn)
        if index is None:
            self._passes.append(fn)
        else:
            n = len(self._passes)
            if not -n <= index <= n:
                raise LoweringError(
                    f"lowering_pass(index={index}) for {pass_name(fn)}, but the registry has {n} passes, "
                    f"so index should be in {-n}..{n}; see dump_lowering_passes() for the current order"
                )
            self._passes.insert(index, fn)
        return fn

    def remove_lowering_pass(self, index: int) -> LoweringPass:
        """Removes and returns the pass at ``index``; a bad index raises LoweringError with the range."""
        _check_index_type(index, "remove_lowering_pass", allow_none=False)
        n = len(self._passes)
        if not -n <= index < n:
            valid = f"0..{n - 1} (or {-n}..-1 from the end)" if n else "none: the registry is empty"
            raise LoweringError(
                f"remove_lowering_pass(index={index}), but the registry has {n} passes, so valid indices "
                f"are {valid}; see dump_lowering_passes()"
            )
        return self._passes.pop(index)

    def lowering_passes(self) -> tuple[LoweringPass, ...]:
        """The registered passes in the order ``apply_lowering_passes`` runs them."""
        return tuple(self._passes)

    def dump_lowering_passes(self) -> str:
        """One line per pass, in order: ``"<index>: <name>"`` (empty string for an empty registry)."""
        return "\n".join(f"{i}: {pass_name(p)}" for i, p in enumerate(self._passes))

    def apply_lowering_passes(self, gm: fx.GraphModule, sample_inputs: Sequence[Any]) -> fx.GraphModule:
        """Runs every pass in order on ``gm``; after each, lints the graph and recompiles.

        Raises LoweringError naming the pass and those before it when a pass raises (chained), does
        not return a GraphModule, or leaves a graph that does not lint.
        """
        passes = tuple(self._passes)  # a pass that registers another must not change this run
        for index, p in enumerate(passes):
            name = pass_name(p)
            where = f"lowering pass {name!r} (index {index})"
            before = [pass_name(q) for q in passes[:index]]
            try:
                out = p(gm, sample_inputs)
            except Exception as exc:
                raise LoweringError(
                    f"{where} failed after passes {before}: {type(exc).__name__}: {exc}"
                ) from exc
            if not isinstance(out, fx.GraphModule):
                raise LoweringError(
                    f"{where} returned {type_name(out)}, but should return a torch.fx.GraphModule; "
                    "a pass that edits gm in place must still `return gm`"
                )
            try:
                out.graph.lint()
            except Exception as exc:
                raise LoweringError(
                    f"graph after {where} does not lint (passes before it: {before}): "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            try:
                out.recompile()
            except Exception as exc:
                raise LoweringError(
                    f"graph after {where} does not recompile (passes before it: {before}): "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            gm = out
        return gm

    def __len__(self) -> int:
        return len(self._passes)

    def __repr__(self) -> str:
        return f"LoweringPassRegistry([{', '.join(pass_name(p) for p in self._passes)}])"


def _check_index_type(index: Any, where: str, allow_none: bool = True) -> None:
    if (index is None and allow_none) or (isinstance(index, int) and not isinstance(index, bool)):
        return
    expected = "an int or None (append)" if allow_none else "an int"
    raise TypeError(f"{where}(index={index!r}), but index should be {expected}")


def _checked_pass(fn: Any) -> LoweringPass:
    """Rejects at registration what could never run as ``fn(gm, sample_inputs)``."""
    if not callable(fn):
        hint = (
            f"; to give an index write @lowering_pass(index={fn})"
            if isinstance(fn, int) and not isinstance(fn, bool)
            else ""
        )
        raise TypeError(
            f"lowering pass is {type(fn).__name__} ({fn!r}), but should be a callable "
            f"fn(gm, sample_inputs) -> gm{hint}"
        )
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn  # no introspectable signature (some builtins): it can only be judged by running it
    try:
        sig.bind(None, None)
    except TypeError as exc:
        raise TypeError(
            f"lowering pass {pass_name(fn)}{sig} cannot be called as fn(gm, sample_inputs) ({exc}); "
            "lowering passes take the graph module and the sample inputs: def my_pass(gm, sample_inputs)"
        ) from None
    return fn


DEFAULT_REGISTRY = LoweringPassRegistry(DEFAULT_LOWERING_PASSES)
"""The registry the module-level functions use, holding the reference passes in default order."""


def lowering_pass(fn: LoweringPass | None = None, *, index: int | None = None) -> Any:
    """Registers a pass in ``DEFAULT_REGISTRY``: ``@lowering_pass`` or ``@lowering_pass(index=0)``."""
    return DEFAULT_REGISTRY.lowering_pass(fn, index=index)


def dump_lowering_passes() -> str:
    """``DEFAULT_REGISTRY``'s passes, one ``"<index>: <name>"`` line each, in order."""
    return DEFAULT_REGISTRY.dump_lowering_passes()


def apply_lowering_passes(gm: fx.GraphModule, sample_inputs: Sequence[Any]) -> fx.GraphModule:
    """Runs ``DEFAULT_REGISTRY``'s passes on ``gm`` in order (linted and recompiled after each)."""
    return DEFAULT_REGISTRY.apply_lowering_passes(gm, sample_inputs)


def remove_lowering_pass(index: int) -> LoweringPass:
    """Removes and returns the pass at ``index`` of ``DEFAULT_REGISTRY``."""
    return DEFAULT_REGISTRY.remove_lowering_pass(index)


def lowering_passes() -> tuple[LoweringPass, ...]:
    """``DEFAULT_REGISTRY``'s passes in order."""
    return DEFAULT_REGISTRY.lowering_passes()
