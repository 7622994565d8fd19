"""GraphBuilder: grows an FX graph and runs every node in eager as it is added.

Running each node as it is created keeps concrete values beside the graph, so the drawing code can
check domains on real values (log only sees positives), reject nodes that would raise or overflow,
and know which tensors alias which (a write through a view is only drawn when it is well-defined).
The final graph therefore runs in eager by construction.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import torch
import torch.fx as fx

from . import _catalog as C
from ._meta import FakeViews
from ._tensors import Layout

MAX_NUMEL = 2048  # keeps eager, fake propagation and interpreter-run kernels cheap
INPUT, CONSTANT, TEMP = "input", "constant", "temp"
set_grad_enabled = torch._C._set_grad_enabled


class StepRejected(Exception):
    """A drawn node cannot be added (it would raise, overflow, or write somewhere undefined)."""


@dataclass(eq=False)
class Value:
    """A graph value with the tensor it holds right now (in-place writes show up here too)."""

    node: fx.Node
    tensor: torch.Tensor
    origin: str  # INPUT, CONSTANT or TEMP: who owns the storage
    pure: bool = True  # produced by a pure op (a candidate for duplicate-subexpression)
    call: tuple | None = None  # (spec, args, kwargs) with Values as operands, to re-emit the node

    @property
    def operands(self) -> tuple:
        return () if self.call is None else tuple(_flat_values(self.call[1:]))


@dataclass
class GraphBuilder:
    special_values: bool = False
    graph: fx.Graph = field(default_factory=fx.Graph)
    root: torch.nn.Module = field(default_factory=torch.nn.Module)
    values: list = field(default_factory=list)
    recipes: list = field(default_factory=list)  # (base, layout) per placeholder
    fake_mode: object = None  # the shared FakeTensorMode that every meta['val'] belongs to
    n_calls: int = 0
    n_constants: int = 0
    _by_node: dict = field(default_factory=dict)
    _views: FakeViews | None = None

    # --- leaves --------------------------------------------------------------------------------
    def add_input(self, base: torch.Tensor, layout: Layout) -> Value:
        name = f"x{len(self.recipes)}"
        placeholders = [n for n in self.graph.nodes if n.op == "placeholder"]
        anchor = placeholders[-1].next if placeholders else next(iter(self.graph.nodes), None)
        if anchor is None:
            node = self.graph.placeholder(name)
        else:
            with self.graph.inserting_before(anchor):
                node = self.graph.placeholder(name)
        self.recipes.append((base, layout))
        return self._add(Value(node, layout.apply(base.clone()), INPUT))

    def add_constant(self, tensor: torch.Tensor) -> Value:
        name = f"c{self.n_constants}"
        self.n_constants += 1
        self.root.register_buffer(name, tensor)
        node = self.graph.get_attr(name)
        return self._add(Value(node, tensor, CONSTANT))

    def _add(self, value: Value) -> Value:
        value.node.meta["val"] = self.fake_of(value.tensor)
        self.values.append(value)
        self._by_node[value.node] = value
        return value

    def value_of(self, node: fx.Node) -> Value:
        return self._by_node[node]

    def fake_of(self, t: torch.Tensor):
        """A fake tensor with ``t``'s metadata right now (see ``_meta.FakeViews``)."""
        if self._views is None:
            self._views = FakeViews(self.fake_mode)
        return self._views.fake_of(t)

    # --- calls ---------------------------------------------------------------------------------
    def call(self, spec: C.OpSpec | None, target, args: tuple, kwargs: dict) -> Value:
        """Run ``target`` eagerly on the current values and append the node; or raise StepRejected."""
        real_args, real_kwargs = _map_values(args, lambda v: v.tensor), _map_values(kwargs, lambda v: v.tensor)
        inplace = spec is not None and spec.category == C.INPLACE
        if inplace:
            out = self._call_inplace(spec, target, args, real_args, real_kwargs)
        else:
            out = _run(target, real_args, real_kwargs)
            self._check_result(out)
        node = self.graph.call_function(target, _map_values(args, lambda v: v.node),
                                        _map_values(kwargs, lambda v: v.node))
        self.n_calls += 1
        first = next(_flat_values(args), None)
        origin = first.origin if first is not None and _shares_storage(out, first.tensor) else TEMP
        return self._add(Value(node, out, origin, pure=not inplace, call=(spec, args, kwargs)))

    def _call_inplace(self, spec, target, args, real_args, real_kwargs):
        self_value = args[0]
        if not writable(self_value, metadata=spec.mutates_metadata):
            raise StepRejected("target is a constant or has overlapping memory")
        for other in _flat_values(args[1:]):
            if _shares_storage(other.tensor, self_value.tensor) and not _same_geometry(other.tensor, self_value.tensor):
                raise StepRejected("an operand partially overlaps the written tensor")
        # Trial on a private copy first: a failed in-place op must not leave a half-written value.
        trial_self = torch.ops.aten.alias(self_value.tensor) if spec.mutates_metadata else _copy_strided(self_value.tensor)
        trial_args = tuple(trial_self if (i == 0 or a is self_value.tensor) else a for i, a in enumerate(real_args))
        out = _run(target, trial_args, real_kwargs)
        if not spec.mutates_metadata:
            self._check_result(out)
        try:
            return _run(target, real_args, real_kwargs)
        except StepRejected as exc:  # the trial passed, so this is a bug in the preconditions above
            raise AssertionError(f"in-place {target} failed after a successful trial") from exc

    def _check_result(self, out) -> None:
        if not isinstance(out, torch.Tensor):
            raise StepRejected(f"result is {type(out).__name__}, not a tensor")
        if out.numel() > MAX_NUMEL:
            raise StepRejected("result too large")
        if not self.special_values and out.is_floating_point() and out.numel() and not torch.isfinite(out).all():
            raise StepRejected("non-finite result without special values")

    def set_grad(self, enabled: bool) -> fx.Node:
        set_grad_enabled(enabled)
        return self.graph.call_function(set_grad_enabled, (enabled,))

    def output(self, values: list) -> None:
        self.graph.output(tuple(v.node for v in values))

    def graph_module(self) -> fx.GraphModule:
        return fx.GraphModule(self.root, self.graph)


# --- helpers -------------------------------------------------------------------------------------


def _run(target, args, kwargs):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return target(*args, **kwargs)
    except (RuntimeError, ValueError, TypeError, IndexError, ZeroDivisionError, OverflowError) as exc:
        raise StepRejected(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None


def _map_values(obj, fn):
    if isinstance(obj, Value):
        return fn(obj)
    if isinstance(obj, tuple):
        return tuple(_map_values(o, fn) for o in obj)
    if isinstance(obj, list):
        return [_map_values(o, fn) for o in obj]
    if isinstance(obj, dict):
        return {k: _map_values(v, fn) for k, v in obj.items()}
    return obj


def _flat_values(obj):
    if isinstance(obj, Value):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for o in obj:
            yield from _flat_values(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _flat_values(o)


def storage_key(t: torch.Tensor):
    return t.untyped_storage().data_ptr() if t.untyped_storage().nbytes() else None


def _shares_storage(a, b) -> bool:
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return False
    ka = storage_key(a)
    return ka is not None and ka == storage_key(b)


def _same_geometry(a, b) -> bool:
    return (a.shape == b.shape and a.stride() == b.stride()
            and a.storage_offset() == b.storage_offset())


def no_internal_overlap(t: torch.Tensor) -> bool:
    """True when no two elements of ``t`` share memory (so an in-place write is well-defined)."""
    dims = sorted((st, n) for n, st in zip(t.shape, t.stride()) if n > 1)
    extent = 0
    for stride, size in dims:
        if stride <= extent:
            return False
        extent += (size - 1) * stride
    return True


def writable(value: Value, *, metadata: bool = False) -> bool:
    """Whether a drawn in-place op may write to ``value``: never constants, never overlapping memory."""
    if value.origin == CONSTANT:
        return False
    return metadata or no_internal_overlap(value.tensor)


def _copy_strided(t: torch.Tensor) -> torch.Tensor:
    out = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype)
    return out.copy_(t)
