"""GraphBuilder: grows an FX graph and runs every node in eager as it is added.

Running each node as it is created keeps concrete values beside the graph, so the drawing code can
check domains on real values (log only sees positives), reject nodes that would raise or overflow,
and know which tensors alias which (a write through a view is only drawn when it is well-defined).
The final graph therefore runs in eager by construction.
"""

from __future__ import annotations

import contextlib
import copy
import faulthandler
import logging
import operator
import os
import signal
import time
import warnings
from dataclasses import dataclass, field

import torch
import torch.fx as fx
import torch.utils._pytree as pytree

from .._catalog import vocabulary as C
from .._catalog.custom import note_custom_call
from .._tensors import Layout
from .device import RNG_SEED, placed, rng_state, seeded, set_rng_state
from .eager import (FIRST_RESULT_ONLY, RUN_TWICE, StepRejected, attempt, quiet_fake_log, run_eager, same_bits,
                    crashes_in_trial, kills_eager)
from .meta import FakeViews
from .meta import shared_fake_mode as _shared_fake_mode

MAX_NUMEL = 2048  # keeps eager, fake propagation and interpreter-run kernels cheap
MAX_NUMEL_LARGE = 1 << 18  # sizes="large": tensors of 4096-65536 elements, and what they compute
INPUT, CONSTANT, TEMP = "input", "constant", "temp"
set_grad_enabled = torch._C._set_grad_enabled
enter_autocast, exit_autocast = torch.amp.autocast_mode._enter_autocast, torch.amp.autocast_mode._exit_autocast


@dataclass(frozen=True)
class Fresh:
    """An argument of a user's op that is a buffer made for the call (``GraphBuilder.call_custom``):
    ``empty`` of ``shape`` and ``dtype`` (an out buffer the op must write whole), or a ``clone`` of
    ``source`` (a written argument that also holds values), as serving code allocates them."""

    shape: tuple = ()
    dtype: torch.dtype = torch.float32
    source: object = None  # a Value: a clone of it; None: an empty


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
    n_subgraphs: int = 0
    max_nodes: int = 64
    max_numel: int = MAX_NUMEL
    device: torch.device = torch.device("cpu")  # what the graph says (factories' device=)
    run_device: torch.device = torch.device("cpu")  # where every node is computed as it is drawn
    support: object = None  # the device's DeviceSupport: what it refuses is never run
    _by_node: dict = field(default_factory=dict)
    # {node: (storage_key, shape)} as each node ran, every tensor alive: graph_features' record
    record: dict = field(default_factory=dict)
    _views: FakeViews | None = None
    focus_results: list = field(default_factory=list)  # Values of focus ops: outputs more often
    custom_writes: list = field(default_factory=list)  # Values a user's op wrote (call_custom)
    # Values returned three times in four: computed before a write to what they read, the second of an
    # integral pair (draw.py's _around, _integral_pair)
    often_returned: list = field(default_factory=list)
    _rng: torch.Tensor | None = None  # the generator state a run reaches here (random ops drawn so far)
    _pending_rng: torch.Tensor | None = None  # the state after the random op being added, until it is

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
        base = base.to(self.run_device)
        self.recipes.append((base, layout))
        return self._add(Value(node, layout.apply(base.clone()), INPUT))

    def add_constant(self, tensor: torch.Tensor) -> Value:
        name = f"c{self.n_constants}"
        self.n_constants += 1
        tensor = tensor.to(self.run_device)
        self.root.register_buffer(name, tensor)
        node = self.graph.get_attr(name)
        return self._add(Value(node, tensor, CONSTANT))

    def add_operand(self, tensor: torch.Tensor) -> Value:
        """A subgraph's placeholder holding ``tensor`` (a copy of what the outer call hands it): no
        recipe, since the outer graph's call supplies it (``_draw/hops.py``)."""
        node = self.graph.placeholder(f"arg{sum(1 for n in self.graph.nodes if n.op == 'placeholder')}")
        return self._add(Value(node, tensor, INPUT))

    def add_subgraph(self, module: fx.GraphModule, name: str | None = None, *, copy_it: bool = True) -> Value:
        """A higher-order op's subgraph (a ``cond`` branch, an ``invoke_subgraph`` body), held by the
        graph's root as ``name`` (default ``subgraph<n>``) and fetched by a ``get_attr`` node: a Value
        whose ``tensor`` is the module (an argument of the call, never an operand drawn for another
        op). The module is a copy, unless ``copy_it=False`` (a module made for this graph alone)."""
        name = name or f"subgraph{self.n_subgraphs}"
        self.n_subgraphs += 1
        self.root.add_module(name, copy.deepcopy(module) if copy_it else module)
        node = self.graph.get_attr(name)
        return Value(node, getattr(self.root, name), CONSTANT, pure=False)

    def _add(self, value: Value) -> Value:
        value.node.meta["val"] = self.fake_of(value.tensor)
        self.record[value.node] = (storage_key(value.tensor), tuple(value.tensor.shape))
        self.values.append(value)
        self._by_node[value.node] = value
        return value

    def value_of(self, node: fx.Node) -> Value:
        return self._by_node[node]

    def fake_of(self, t: torch.Tensor):
        """A fake tensor with ``t``'s metadata right now (see ``meta.FakeViews``)."""
        if self._views is None:
            self._views = FakeViews(self.fake_mode)
        return self._views.fake_of(t)

    # --- calls ---------------------------------------------------------------------------------
    def call(self, spec: C.OpSpec | None, target, args: tuple, kwargs: dict, *, check: bool = True,
             pure: bool = True, keep=None) -> Value:
        """Run ``target`` eagerly on the current values and append the node; or raise StepRejected.

        An op with several results (a tuple or list: ``native_layer_norm``, ``split``) is followed
        by ``operator.getitem`` nodes, as traced graphs have them: the first result always, each
        other one where ``keep(i)`` says so (default: all; an unused result has no getitem in real
        graphs either) and the node budget allows; the first getitem's Value is returned. ``check=False``: the result is not checked (``empty``,
        whose garbage the caller overwrites at once); ``pure=False``: never re-emitted as a duplicate.
        """
        if spec is not None and spec.category == C.CUSTOM:
            return self.call_custom(spec, args, kwargs)
        # factories carry device= as traced graphs do: the graph's device in the node, the device
        # the values live on (the same, but where a device is simulated) in the run
        real_args = _map_values(args, lambda v: v.tensor)
        real_kwargs = placed(target, _map_values(kwargs, lambda v: v.tensor), self.run_device)
        kwargs = placed(target, kwargs, self.device)
        if self.support is not None:
            refused = self.support.refusal(target, real_args, real_kwargs)
            if refused:
                raise StepRejected(refused)
        crash = kills_eager(target, real_args, real_kwargs) or crashes_in_trial(target, real_args, real_kwargs)
        if crash:
            raise StepRejected(crash)
        inplace = spec is not None and spec.category == C.INPLACE
        random = spec is not None and spec.category == C.RANDOM
        fakes = _map_tensors((real_args, real_kwargs), self.fake_of) if inplace else None  # before it writes
        if inplace:
            out = self._call_inplace(spec, target, args, real_args, real_kwargs)
        else:
            out = self._run_seeded(target, real_args, real_kwargs) if random else attempt(target, real_args, real_kwargs)
            if target in RUN_TWICE and not same_bits(out, run_eager(target, real_args, real_kwargs)):
                raise StepRejected(f"{target} gave two results on these values")
            if isinstance(out, (tuple, list)):
                if self.n_calls + 2 > self.max_nodes:
                    raise StepRejected("no room for the op and its getitem")
                for o in (out[:1] if target in FIRST_RESULT_ONLY else out):
                    self._check_result(o)
            elif check:
                self._check_result(out)
        disagreement = self._fake_check(target, real_args, real_kwargs, fakes, out)
        if disagreement:
            raise StepRejected(note_disagreement(target, disagreement))
        node = self.graph.call_function(target, _map_values(args, lambda v: v.node),
                                        _map_values(kwargs, lambda v: v.node))
        self.n_calls += 1
        if random:
            self._rng = self._pending_rng
        first = next(_flat_values(args), None)
        if isinstance(out, (tuple, list)):
            return self._results(node, out, first, (lambda i: False) if target in FIRST_RESULT_ONLY else keep)
        origin = first.origin if first is not None and _shares_storage(out, first.tensor) else TEMP
        # A random op is pure in the sense that matters here: a duplicate draws anew (what CSE must
        # not merge), and its result may be an output.
        pure = pure and not inplace
        return self._add(Value(node, out, origin, pure=pure, call=(spec, args, kwargs)))

    def call_custom(self, spec: C.OpSpec, args: tuple, kwargs: dict) -> Value | None:
        """A user's op (``C.CUSTOM``): its ``Fresh`` buffers made (``empty``/``clone`` nodes before it),
        the call tried twice on private copies of what it writes (for an ``empty`` buffer, once
        zero-filled and once filled with ones: an op that leaves part of it unwritten differs), then
        run for real and fake-checked. A call that raises, differs between its tries or disagrees
        with its fake impl is rejected (the nodes made for it taken back) and counted against the op
        (``custom_health``). Returns the first written buffer or the first result, for chaining."""
        target = spec.overload
        made: list = []
        tried = [False]  # whether the op itself ran: rejections before it (no room) are the builder's
        try:
            value = self._call_custom(spec, target, args, kwargs, made, tried)
        except StepRejected as exc:
            for v in reversed(made):
                self.remove_last(v)
            if tried[0]:
                note_custom_call(target, str(exc))
            raise
        note_custom_call(target, None)
        return value

    def _call_custom(self, spec, target, args, kwargs, made, tried) -> Value | None:
        def materialise(obj):
            if isinstance(obj, Fresh):
                if self.n_calls + 2 > self.max_nodes:
                    raise StepRejected("no room for the op's buffers")
                if obj.source is None:
                    v = self.call(None, torch.ops.aten.empty.memory_format, (list(obj.shape),), {"dtype": obj.dtype},
                                  check=False, pure=False)
                else:
                    v = self.call(None, torch.ops.aten.clone.default, (obj.source,), {})
                made.append(v)
                return v
            if isinstance(obj, (tuple, list)):
                return type(obj)(materialise(o) for o in obj)
            return obj

        names = [a.name for a in target._schema.arguments]
        empties = [name for name, a in (dict(zip(names, args)) | kwargs).items() if isinstance(a, Fresh) and a.source is None]
        args, kwargs = materialise(tuple(args)), {k: materialise(v) for k, v in kwargs.items()}
        named = dict(zip(names, args)) | kwargs
        written = {a.name: named[a.name] for a in target._schema.arguments
                   if writes(a) and isinstance(named.get(a.name), Value)}
        for name, v in written.items():
            if not writable(v):
                raise StepRejected(f"'{name}' is a constant or has overlapping memory")
            for other_name, other in named.items():
                if other_name != name and any(_shares_storage(o.tensor, v.tensor) for o in _flat_values(other)):
                    raise StepRejected(f"'{other_name}' overlaps '{name}', which the op writes")
        real_args = _map_values(args, lambda v: v.tensor)
        real_kwargs = _map_values(kwargs, lambda v: v.tensor)
        fakes = _map_tensors((real_args, real_kwargs), self.fake_of)  # before it writes
        tries = []
        tried[0] = True
        for fill in (0, 1):  # two tries on private copies: a failed call leaves nothing half-written
            copies = {name: _copy_strided(v.tensor) for name, v in written.items()}
            for name in empties:
                copies[name].fill_(fill)
            swap = {id(v.tensor): copies[name] for name, v in written.items()}
            out = _run_custom(target, _map_tensors(real_args, lambda t: swap.get(id(t), t)),
                              _map_tensors(real_kwargs, lambda t: swap.get(id(t), t)))
            tries.append((out, copies))
        (out, first), (again, second) = tries
        if not same_bits(out, again) or any(not same_bits(first[n], second[n]) for n in written):
            unwritten = [n for n in empties if not same_bits(first[n], second[n])]
            raise StepRejected(f"'{unwritten[0]}' is not written whole by the op" if unwritten
                               else "gave two results on these values")
        for t in (*(o for o in (out if isinstance(out, (tuple, list)) else [out]) if isinstance(o, torch.Tensor)),
                  *first.values()):
            self._check_result(t)
        out = _run_custom(target, real_args, real_kwargs)
        disagreement = self._fake_check(target, real_args, real_kwargs, fakes, out)
        if disagreement:
            raise StepRejected(note_disagreement(target, disagreement))
        node = self.graph.call_function(target, _map_values(args, lambda v: v.node), _map_values(kwargs, lambda v: v.node))
        self.n_calls += 1
        self.custom_writes.extend(written.values())
        first_value = next(iter(written.values()), None)
        if isinstance(out, (tuple, list)):
            return self._results(node, out, next(_flat_values(args), None), None) or first_value
        if isinstance(out, torch.Tensor):
            return self._add(Value(node, out, TEMP, pure=False, call=(spec, args, kwargs)))
        node.meta["val"] = None
        return first_value

    def _fake_check(self, target, args, kwargs, fakes, out) -> str | None:
        """``fake_disagrees`` for this call, remembered per op and operand metadata (what a fake
        result depends on): most calls repeat one seen before, and a fake run costs ~0.8 ms."""
        storages: dict = {}
        key = (target, _signature((args, kwargs), storages), _signature(out, storages))
        try:
            return _FAKE_VERDICTS[key]
        except KeyError:
            pass
        except TypeError:  # an unhashable argument
            key = None
        if fakes is None:
            fakes = _map_tensors((args, kwargs), self.fake_of)
        fake = self._fake_run(target, *fakes)
        if target in FIRST_RESULT_ONLY and isinstance(fake, (tuple, list)) and isinstance(out, (tuple, list)):
            # results no node reads are not the graph's (torch 2.11's meta kernel of the CPU flash
            # attention gives a float32 logsumexp for float64 inputs, eager a float64 one)
            fake, out = fake[:1], out[:1]
        verdict = fake_disagrees(fake, out)
        if key is not None:
            if len(_FAKE_VERDICTS) > 50_000:
                _FAKE_VERDICTS.clear()
            _FAKE_VERDICTS[key] = verdict
        return verdict

    def _fake_run(self, target, args, kwargs):
        """The call as torch's fake-tensor propagation runs it, on fakes of the operands (fresh fake
        views, so a metadata-mutating op changes no ``meta['val']``); an exception is returned."""
        try:
            with self.fake_mode, warnings.catch_warnings(), quiet_fake_log():
                warnings.simplefilter("ignore")
                return target(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - any refusal is a disagreement with eager, which ran
            return exc

    def remove_last(self, value: Value) -> None:
        """Take back ``value``, the last node added (a chain that could not finish)."""
        assert self.values[-1] is value and not value.node.users
        self.values.pop()
        del self._by_node[value.node]
        del self.record[value.node]
        self.graph.erase_node(value.node)
        self.n_calls -= 1

    def _results(self, node, outs, first, keep) -> Value:
        # the CUDA attention overloads return SymInts (max_q) and RNG state beside their tensors
        node.meta["val"] = type(outs)(self.fake_of(o) if isinstance(o, torch.Tensor) else o for o in outs)
        got = None
        for i, o in enumerate(outs):
            if i and (self.n_calls >= self.max_nodes or (keep is not None and not keep(i))):
                continue
            item = self.graph.call_function(operator.getitem, (node, i))
            self.n_calls += 1
            origin = first.origin if first is not None and _shares_storage(o, first.tensor) else TEMP
            v = self._add(Value(item, o, origin))
            got = got or v
        return got

    def _run_seeded(self, target, args, kwargs):
        """A random op draws from the generator state the graph's run reaches at this node: the
        builder's own state (RNG_SEED's, advanced by the random ops drawn so far), never the
        caller's; committed by ``call`` once the node is added."""
        with seeded(self.run_device, RNG_SEED):
            if self._rng is not None:
                set_rng_state(self.run_device, self._rng)
            out = attempt(target, args, kwargs)
            self._pending_rng = rng_state(self.run_device)
            return out

    def _call_inplace(self, spec, target, args, real_args, real_kwargs):
        self_value = args[0]
        if not writable(self_value, metadata=spec.mutates_metadata):
            raise StepRejected("target is a constant or has overlapping memory")
        if spec.draws_whole_call and self_value.tensor.numel() == 0:
            # eager's overlap check refuses scatter_(x, ..., x) on an empty x but not through a
            # view of x, so removing a no-op view would look like a bug of the pass
            raise StepRejected("an empty write target")
        for other in _flat_values(args[1:]):
            if _shares_storage(other.tensor, self_value.tensor) and (
                    spec.draws_whole_call or not _same_geometry(other.tensor, self_value.tensor)):
                # index_put_ / scatter_ read their operands at other positions than they write
                raise StepRejected("an operand overlaps the written tensor")
        # Trial on a private copy first: a failed in-place op must not leave a half-written value.
        trial_self = torch.ops.aten.alias(self_value.tensor) if spec.mutates_metadata else _copy_strided(self_value.tensor)
        trial_args = tuple(trial_self if (i == 0 or a is self_value.tensor) else a for i, a in enumerate(real_args))
        out = attempt(target, trial_args, real_kwargs)
        if not spec.mutates_metadata:
            self._check_result(out)
        try:
            return run_eager(target, real_args, real_kwargs)
        except StepRejected as exc:  # the trial passed, so this is a bug in the preconditions above
            raise AssertionError(f"in-place {target} failed after a successful trial") from exc

    def _check_result(self, out) -> None:
        if not isinstance(out, torch.Tensor):
            raise StepRejected(f"result is {type(out).__name__}, not a tensor")
        if out.numel() > self.max_numel:
            raise StepRejected("result too large")
        if not self.special_values and out.is_floating_point() and out.numel() and not torch.isfinite(
                out if out.element_size() > 1 else out.float()).all():  # float8: isfinite has no kernel
            raise StepRejected("non-finite result without special values")

    def set_grad(self, enabled: bool) -> fx.Node:
        set_grad_enabled(enabled)
        return self.graph.call_function(set_grad_enabled, (enabled,))

    @contextlib.contextmanager
    def autocast(self, dtype: torch.dtype):
        """An autocast region on the graph's device (``dtype``: its lower precision): the calls made in
        the body run under autocast here and sit between ``_enter_autocast`` and ``_exit_autocast``
        nodes, as a traced ``with torch.autocast(...)`` block leaves them; a body that made no call
        leaves no node. The body raising closes autocast here without the exit node (the graph is
        abandoned). Not on a simulated device: its autocast rules are not the CPU's."""
        if self.device != self.run_device:
            raise StepRejected(f"autocast on a simulated {self.device.type} device")
        args = (self.device.type, dtype, True, None)
        mode = enter_autocast(*args)
        node, calls = self.graph.call_function(enter_autocast, args), self.n_calls
        try:
            yield
        except BaseException:
            exit_autocast(mode)
            raise
        exit_autocast(mode)
        if self.n_calls == calls:
            self.graph.erase_node(node)
        else:
            self.graph.call_function(exit_autocast, (node,))

    def output(self, values: list) -> None:
        self.graph.output(tuple(v.node for v in values))

    def graph_module(self) -> fx.GraphModule:
        return fx.GraphModule(self.root, self.graph)


# --- helpers -------------------------------------------------------------------------------------


def fake_disagrees(fake, out) -> str | None:
    """How torch's fake-tensor result ``fake`` (or the exception it raised) disagrees with eager's
    ``out`` in shape, dtype or significant strides (those of dims longer than one, in a non-empty
    tensor), or None: a pass that re-propagates fakes would see another graph than the one that ran."""
    if isinstance(fake, Exception):
        return f"fake tensors refuse it ({type(fake).__name__}: {str(fake).splitlines()[0] if str(fake) else ''})"
    if isinstance(out, (tuple, list)):
        if not isinstance(fake, (tuple, list)) or len(fake) != len(out):
            return "fake tensors give another number of results"
        return next((d for f, o in zip(fake, out) if (d := fake_disagrees(f, o))), None)
    if not isinstance(out, torch.Tensor) or not isinstance(fake, torch.Tensor):
        return None
    if fake.shape != out.shape or fake.dtype != out.dtype:
        return f"fake tensors give {tuple(fake.shape)} {fake.dtype}, eager {tuple(out.shape)} {out.dtype}"
    if out.numel() and any(n > 1 and a != b for n, a, b in zip(out.shape, fake.stride(), out.stride())):
        return f"fake tensors give strides {fake.stride()}, eager {out.stride()}"
    return None


_DISAGREEMENTS: dict = {}
_FAKE_VERDICTS: dict = {}


def _signature(obj, storages: dict):
    """What a fake result depends on: each tensor's metadata and which storage it shares with an
    earlier operand; other values as they are (with their type: 2 and 2.0 promote differently)."""
    if isinstance(obj, torch.Tensor):
        where = storages.setdefault(storage_key(obj) or id(obj), len(storages))
        return ("T", tuple(obj.shape), obj.stride(), obj.storage_offset(), obj.dtype, obj.device.type, where)
    if isinstance(obj, fx.GraphModule):  # a higher-order op's subgraph: by its code (each draw copies it)
        return ("G", obj.code)
    if isinstance(obj, (tuple, list)):
        return (type(obj).__name__, *(_signature(o, storages) for o in obj))
    if isinstance(obj, dict):
        return ("d", *((k, _signature(v, storages)) for k, v in obj.items()))
    return (type(obj).__name__, obj)


def note_disagreement(target, why: str) -> str:
    """Record (once per op) that eager and fake tensors disagree on a call of ``target``."""
    _DISAGREEMENTS.setdefault(str(target), why)
    return f"eager and fake tensors disagree on {target}: {why}"


def eager_fake_disagreement(target, args: tuple = (), kwargs: dict | None = None) -> str | None:
    """How eager and torch's fake-tensor propagation disagree on ``target(*args, **kwargs)`` (real
    tensors in, as eager runs it), or None where they agree; the check every drawn call passes.

    >>> import torch
    >>> eager_fake_disagreement(torch.ops.aten.arange.start_step, (-4, -4.0, 0.5), {"dtype": torch.int32})
    'fake tensors refuse it (RuntimeError: step must be nonzero)'
    >>> eager_fake_disagreement(torch.ops.aten.sin.default, (torch.ones(2),)) is None
    True
    """
    kwargs = kwargs or {}
    views = FakeViews(_shared_fake_mode())
    fakes = _map_tensors((args, kwargs), views.fake_of)
    out = target(*args, **kwargs)
    return fake_disagrees(GraphBuilder(fake_mode=views.fake_mode, _views=views)._fake_run(target, *fakes), out)


def fake_disagreements() -> dict:
    """``{op: how}``: the ops eager and fake-tensor propagation disagreed on while drawing in this
    process (each such call was left out of the graph), the first disagreement of each."""
    return dict(_DISAGREEMENTS)


def _map_tensors(obj, fn):
    return pytree.tree_map_only(torch.Tensor, fn, obj)


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


def writes(argument) -> bool:
    """Whether a schema argument is one the op writes (``Tensor(a!)``)."""
    return argument.alias_info is not None and argument.alias_info.is_write


def _run_custom(target, args, kwargs):
    """A user's op in eager: whatever it raises is a rejected draw (its kernel says the call is
    invalid), not only the errors torch's own kernels raise."""
    try:
        return run_eager(target, args, kwargs)  # (which silences the warnings eager raises)
    except StepRejected:
        raise
    except Exception as exc:  # noqa: BLE001 - a user kernel's refusal, whatever its type
        raise StepRejected(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None


def _copy_strided(t: torch.Tensor) -> torch.Tensor:
    out = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
    return out.copy_(t)


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
