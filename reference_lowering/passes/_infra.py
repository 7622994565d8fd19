"""Pass building blocks, drop-in for ``torch.fx.passes.infra.pass_base`` and ``pass_result_wrapper``.

Two of torch 2.13's behaviours are fixed here (docs/torch-facts.md, section 3):
``PassBase.ensures`` saw the module the pass was GIVEN instead of the one it returned, and
``pass_result_wrapper`` claimed ``modified=True`` for every call, so ``PassManager(steps=N)`` re-ran a
no-op pass N times. The wrapper here compares a structural fingerprint of the graph before and after.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import torch
from torch import fx
from torch.fx.passes.infra import pass_base as _torch_pass_base

from ._analysis import attr_of

__all__ = ["PassBase", "PassResult", "graph_fingerprint", "pass_name", "pass_result_wrapper", "type_name", "value_key"]

# torch's own PassResult, re-exported rather than redefined: it has no flaw, and one class means a
# pass written against torch and a pass written against us return interchangeable results, and the
# harness's (and torch's PassManager's) isinstance checks accept both.
PassResult = _torch_pass_base.PassResult


def pass_name(p: Any) -> str:
    """The name a message uses for a pass: ``__name__``, else its class name for PassBase, else repr."""
    name = getattr(p, "__name__", None)
    if isinstance(name, str) and name:
        return name
    if isinstance(p, _torch_pass_base.PassBase):
        return type(p).__name__
    return repr(p)


def type_name(obj: Any) -> str:
    """The type of ``obj`` for a message; traced GraphModules have generated class names like '<lambda>'."""
    if isinstance(obj, fx.GraphModule):
        return "GraphModule"
    return type(obj).__name__


def is_pass_result_like(res: Any) -> bool:
    """True for a PassResult or any object with ``.graph_module`` and ``.modified`` (duck typing)."""
    return isinstance(res, PassResult) or (hasattr(res, "graph_module") and hasattr(res, "modified"))


class PassBase(_torch_pass_base.PassBase):
    """A pass as a class: ``requires(gm)``, then ``call(gm)``, then ``ensures`` on the RESULT.

    Subclasses torch's PassBase so that tools checking ``isinstance(p, torch...PassBase)`` accept it.
    torch's ``__call__`` hands ``ensures`` the input module, so a pass that returns a new module had
    its postconditions checked against the stale one; here ``ensures`` sees ``res.graph_module``.

    Example:
        >>> class Nothing(PassBase):
        ...     def call(self, gm):
        ...         return PassResult(gm, False)
        >>> Nothing()(fx.symbolic_trace(lambda x: x + 1)).modified
        False
    """

    def __call__(self, graph_module: fx.GraphModule) -> PassResult:
        self.requires(graph_module)
        res = self.call(graph_module)
        if not is_pass_result_like(res):
            raise TypeError(
                f"{type(self).__name__}.call returned {type_name(res)} ({_short_repr(res)}), but "
                "should return a PassResult(graph_module, modified); return PassResult(gm, modified) "
                "from call()"
            )
        self.ensures(res.graph_module)
        return res


def pass_result_wrapper(fn: Callable[..., Any]) -> Callable[[torch.nn.Module], PassResult]:
    """Adapts ``fn(gm) -> GraphModule | None | PassResult | fx.Graph`` to return a PassResult.

    ``modified`` is honest: it says whether the graph's structure (see ``graph_fingerprint``) differs
    after ``fn`` from before, so a no-op pass under ``PassManager(steps=N)`` runs once, not N times.
    A PassResult returned by ``fn`` is passed through as the pass's own claim. ``None`` means "changed
    in place"; a returned ``fx.Graph`` other than ``gm.graph`` becomes ``fx.GraphModule(gm, graph)``.

    Example:
        >>> noop = pass_result_wrapper(lambda gm: gm)
        >>> noop(fx.symbolic_trace(lambda x: x + 1)).modified
        False
    """
    if not callable(fn):
        raise TypeError(
            f"pass_result_wrapper was given {type(fn).__name__} ({_short_repr(fn)}), but should be given "
            "a callable fn(gm); pass the pass function itself"
        )
    name = pass_name(fn)

    @functools.wraps(fn)
    def wrapped(gm: torch.nn.Module) -> PassResult:
        before = graph_fingerprint(gm)
        res = fn(gm)
        if isinstance(res, PassResult):
            return res
        if res is None:
            out = gm
        elif isinstance(res, fx.Graph):
            out = gm if isinstance(gm, fx.GraphModule) and res is gm.graph else fx.GraphModule(gm, res)
        elif isinstance(res, torch.nn.Module):
            # torch's wrapper accepts any nn.Module; a drop-in must too.
            out = res
        else:
            raise TypeError(
                f"pass {name!r} returned {type_name(res)} ({_short_repr(res)}), but should return a "
                "GraphModule, an fx.Graph, a PassResult or None (modified in place); fix the pass's "
                "return value"
            )
        return PassResult(out, graph_fingerprint(out) != before)

    # functools.wraps copies nothing from an instance without __name__ (a PassBase object).
    wrapped.__name__ = name
    return wrapped


class Fingerprint:
    """A comparable summary of a graph's structure (what a pass can change), node names excluded.

    Objects compared by identity (tensors, submodules, unhashable literals) are kept alive for the
    fingerprint's lifetime, so a freed object's id cannot be reused by a new one and compare equal.
    """

    __slots__ = ("_alive", "key")

    def __init__(self, key: tuple, alive: list) -> None:
        self.key = key
        self._alive = alive

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Fingerprint) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"Fingerprint({len(self.key)} entries)"


def graph_fingerprint(module_or_graph: Any) -> Fingerprint:
    """Fingerprint of a GraphModule (or fx.Graph): per node its op, target and args/kwargs.

    Node arguments are mapped to node positions; literals are keyed by type, so ``1``, ``1.0`` and
    ``True`` differ, as do ``0.0`` and ``-0.0``. ``get_attr`` nodes add the fetched tensor's identity
    and ``_version`` (an in-place update of a constant is a change); attributes and submodules that are
    GraphModules (higher-order-op bodies) are fingerprinted recursively. A module that is not a
    GraphModule is keyed by identity. ``node.meta`` is not part of the fingerprint.
    """
    alive: list = []
    return Fingerprint(_module_key(module_or_graph, alive, depth=0), alive)


_MAX_DEPTH = 32  # nested GraphModule bodies deeper than this are keyed by identity only


def _module_key(obj: Any, alive: list, depth: int) -> tuple:
    if isinstance(obj, fx.Graph):
        return ("graph", _graph_key(obj, obj.owning_module, alive, depth))
    if isinstance(obj, fx.GraphModule) and depth < _MAX_DEPTH:
        return ("graph_module", _graph_key(obj.graph, obj, alive, depth))
    alive.append(obj)
    return ("object", type(obj).__qualname__, id(obj))


def _graph_key(graph: fx.Graph, owner: torch.nn.Module | None, alive: list, depth: int) -> tuple:
    position = {node: i for i, node in enumerate(graph.nodes)}
    entries = []
    for node in graph.nodes:
        entry = (
            node.op,
            _target_key(node.target),
            value_key(node.args, position, alive),
            value_key(node.kwargs, position, alive),
        )
        if node.op in ("get_attr", "call_module") and isinstance(node.target, str):
            entry += (_attr_key(owner, node.target, alive, depth),)
        entries.append(entry)
    return tuple(entries)


def _target_key(target: Any) -> tuple:
    if isinstance(target, str):
        return ("str", target)
    try:
        hash(target)
    except TypeError:
        return ("id", id(target))
    # Targets (OpOverloads, builtins, functions) compare by identity or by a well-defined __eq__.
    return (type(target).__qualname__, target)


def _attr_key(owner: torch.nn.Module | None, path: str, alive: list, depth: int) -> tuple:
    obj = None if owner is None else attr_of(owner, path)
    if obj is None:
        return ("missing",)
    if isinstance(obj, torch.Tensor):
        alive.append(obj)
        return ("tensor", id(obj), obj._version, obj.dtype, tuple(obj.shape))
    if isinstance(obj, torch.nn.Module):
        return _module_key(obj, alive, depth + 1)
    return value_key(obj, {}, alive)


def value_key(value: Any, position: dict, alive: list) -> Any:
    """Typed key of an argument, equal only for arguments that mean the same: nodes by position;
    ``1``, ``1.0`` and ``True`` differ (they promote differently), floats by bit pattern (so -0.0 !=
    0.0; every NaN is one NaN); objects compared by identity are appended to ``alive``."""
    if isinstance(value, fx.Node):
        return ("node", position.get(value, ("foreign", id(value))))
    if isinstance(value, (tuple, list)):
        return (type(value).__qualname__, tuple(value_key(v, position, alive) for v in value))
    if isinstance(value, dict):
        return (
            type(value).__qualname__,
            tuple((value_key(k, position, alive), value_key(v, position, alive)) for k, v in value.items()),
        )
    if isinstance(value, slice):
        return ("slice",) + tuple(value_key(v, position, alive) for v in (value.start, value.stop, value.step))
    if isinstance(value, float):
        return ("float", value.hex() if not math.isnan(value) else "nan")
    if isinstance(value, complex):
        return ("complex", value_key(value.real, position, alive), value_key(value.imag, position, alive))
    if value is None or isinstance(value, (bool, int, str, torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return (type(value).__qualname__, value)
    if isinstance(value, torch.Tensor):
        alive.append(value)
        return ("tensor", id(value), value._version)
    try:
        hash(value)
    except TypeError:
        alive.append(value)
        return (type(value).__qualname__, "id", id(value))
    return (type(value).__qualname__, value)


def _short_repr(obj: Any, limit: int = 80) -> str:
    text = repr(obj)
    return text if len(text) <= limit else text[: limit - 3] + "..."
