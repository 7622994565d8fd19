"""The functionalizing walk: the original graph runs eagerly, node by node, beside the graph it emits.

Running in lockstep is what makes every use exact: at each use of a tensor the walk knows its
current storage, sizes, strides and offset (metadata mutations included) and whether anything
wrote to that storage since the value was defined. The emitted graph then keeps every tensor's
metadata as eager has it, so each op in it produces eager's layout and aliasing.

A storage written at least once lives as a 1-D "flat" value of all its elements: a write through
any alias (a view, a view of a view, one of several aliases of a base) is
``as_strided_scatter(flat, new, size, stride, offset)``, and a read of an alias whose storage was
written after the alias was defined is replayed as ``as_strided(flat, size, stride, offset)``, so
every alias observes every write, in program order. Storages never written keep their nodes.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass, field

import torch
import torch.fx as fx
from .._errors import LoweringError
from ._liars import SCHEMA_LIARS
from ._storage import copies_sharing_storage, key as _key, meta as _meta, reach

aten = torch.ops.aten
_GRAD = torch._C._set_grad_enabled
_HOP = torch.ops.higher_order.wrap_with_set_grad_enabled


@dataclass(frozen=True)
class FunctionalizationSignature:
    """What a functionalized graph promises about inputs and outputs (``gm.meta["functionalization"]``).

    ``mutated_inputs``: with ``input_mutations="outputs"``, output index -> what it updates
    (``"input[i]"`` or ``"constant <target>"``): the caller copies it in (after ``as_strided_`` to
    the same index's ``input_metadata`` when given). ``input_metadata``: input/constant -> (size,
    stride, offset) the caller's tensor has after the call (a metadata mutation). ``output_aliases``:
    output index -> the input (``"input[i]"``/``"constant <target>"``) it is a view of, as in eager.
    """

    input_mutations: str
    user_outputs: int
    mutated_inputs: dict = field(default_factory=dict)
    input_metadata: dict = field(default_factory=dict)
    output_aliases: dict = field(default_factory=dict)


@functools.lru_cache(maxsize=None)
def functional_variant(op) -> object:
    """The out-of-place overload computing what in-place ``op`` writes (``add_.Tensor`` -> ``add.Tensor``,
    ``pow_.Scalar`` -> ``pow.Tensor_Scalar``, ``copy_`` -> ``copy``): same argument types, no write."""
    schema = op._schema
    packet = getattr(aten, schema.name.split("::")[1].rstrip("_"), None)
    want = [(a.name, str(a.type)) for a in schema.arguments]
    for name in (packet.overloads() if packet is not None else ()):
        cand = getattr(packet, name)
        if [(a.name, str(a.type)) for a in cand._schema.arguments] == want and not cand._schema.is_mutable:
            return cand
    raise LoweringError(f"{op}: no out-of-place overload with the same arguments to functionalize it with")


class Walk:
    """One functionalization: ``run()`` returns the emitted graph's root, graph and signature."""

    def __init__(self, gm: fx.GraphModule, inputs: tuple, input_mutations: str):
        self.src, self.inputs, self.mode = gm, inputs, input_mutations
        self.g = fx.Graph()
        self.real = {}  # source node -> its eager value (the same object across in-place ops)
        self.fx = {}  # source node -> emitted node holding its value as defined (None: regenerate)
        self.defined = {}  # source node -> (storage version, metadata) when it was defined
        self.version = {}  # storage key -> writes so far
        self.flat = {}  # storage key -> emitted 1-D node of the whole storage (written storages)
        self.flat_len = {}  # storage key -> its flat's length
        self.flat_dtype = {}  # storage key -> its flat's dtype
        self.witness = {}  # storage key -> {dtype: an emitted node on that storage with current data}
        self.replays = {}  # (key, version, metadata) -> emitted as_strided node
        self.callers = {}  # storage key -> [(source node, metadata before)] of placeholders and constants
        self.n_inputs = 0
        self.module = gm  # where get_attr targets resolve (a region body while inlining one)
        self.inlined = {}  # a wrap_with_set_grad_enabled node -> its body's output nodes
        self.constants = constant_copies(gm)  # get_attr target -> the walk's copy (tied ones stay tied)
        self.extents = reachable_extents(gm, inputs)  # input index -> elements any view of it reaches

    # --- emitting ------------------------------------------------------------------------------
    def emit(self, target, *args, **kwargs) -> fx.Node:
        return self.g.call_function(target, args, kwargs)

    def tensor_defined(self, node: fx.Node, value, emitted) -> None:
        self.real[node], self.fx[node] = value, emitted
        for t in _tensors(value):
            k = _key(t)
            self.version.setdefault(k, 0)
        if isinstance(value, torch.Tensor):
            k = _key(value)
            self.defined[node] = (self.version[k], _meta(value))
            if emitted is not None and k not in self.flat:
                self.witness.setdefault(k, {}).setdefault(value.dtype, emitted)
        elif isinstance(value, (tuple, list)):  # a getitem of it later reads each element as defined now
            self.defined[node] = [(self.version[_key(t)], _meta(t)) if isinstance(t, torch.Tensor) else None
                                  for t in value]

    # --- reading -------------------------------------------------------------------------------
    def read(self, arg):
        """The emitted value of ``arg`` (a node, or a structure of them) as eager sees it now."""
        if isinstance(arg, fx.Node):
            return self.read_node(arg)
        if isinstance(arg, (list, tuple)):
            return type(arg)(self.read(a) for a in arg)
        if isinstance(arg, dict):
            return {k: self.read(v) for k, v in arg.items()}
        return arg

    def read_node(self, node: fx.Node):
        value = self.real[node]
        if not isinstance(value, torch.Tensor):
            return self.fx[node]
        k = _key(value)
        if self.fx[node] is not None and self.defined[node] == (self.version[k], _meta(value)):
            return self.fx[node]
        return self.replay(value)

    def replay(self, value: torch.Tensor) -> fx.Node:
        k, meta = _key(value), _meta(value)
        # the dtype too: a 0-d float32 input and its int32 view.dtype have one storage and one meta
        cache = (k, self.version[k], meta, value.dtype)
        if cache not in self.replays:
            self.replays[cache] = self.emit(aten.as_strided.default, self.flat_of(value), list(meta[0]),
                                            list(meta[1]), meta[2])
        return self.replays[cache]

    def flat_of(self, value: torch.Tensor) -> fx.Node:
        k = _key(value)
        if k in self.flat_dtype and self.flat_dtype[k] != value.dtype:
            raise LoweringError(f"a storage written as {self.flat_dtype[k]} is also used as {value.dtype} "
                                f"(view(dtype) reinterpretation of written memory is not supported)")
        if k not in self.flat:
            if k not in self.witness:
                raise LoweringError(f"no node holds the storage of a {tuple(value.shape)} tensor (internal)")
            n = value.untyped_storage().nbytes() // value.element_size()
            inputs = [i for i, t in enumerate(self.inputs) if isinstance(t, torch.Tensor) and _key(t) == k]
            if inputs:  # a caller's storage: only as far as the graph's views of it reach
                n = max(self.extents.get(i, 0) for i in inputs)
            self.flat[k] = self.emit(aten.as_strided.default, self._witness(k, value.dtype), [n], [1], 0)
            self.flat_len[k], self.flat_dtype[k] = n, value.dtype
        return self.flat[k]

    def _witness(self, k, dtype: torch.dtype) -> fx.Node:
        """A node on storage ``k`` read as ``dtype``: one defined so, or another dtype's of the same
        element size reinterpreted (``view.dtype``: a float32 input read through an int32 view)."""
        held = self.witness[k]
        if dtype in held:
            return held[dtype]
        other, node = next(iter(held.items()))
        if other.itemsize != dtype.itemsize:
            raise LoweringError(f"a storage held as {other} is also used as {dtype} (view(dtype) reinterpretation "
                                f"of written memory is not supported)")
        held[dtype] = self.emit(aten.view.dtype, node, dtype)
        return held[dtype]

    def write(self, target: torch.Tensor, new: fx.Node) -> None:
        """Record that eager wrote ``new``'s value into ``target`` (an alias of some storage)."""
        if target.numel() == 0:  # nothing was written
            return
        size, stride, offset = _meta(target)
        flat = self.flat_of(target)
        k = _key(target)
        self.flat[k] = self.emit(aten.as_strided_scatter.default, flat, new, list(size), list(stride), offset)
        self.version[k] += 1

    # --- the walk ------------------------------------------------------------------------------
    def run(self):
        for node in self.src.graph.nodes:
            try:
                self.step(node)
            except LoweringError:
                raise
            except Exception as exc:  # noqa: BLE001 - name the node, never a bare torch traceback
                raise LoweringError(f"node {node.name} ({node.op} {_target_name(node.target)}): "
                                    f"{type(exc).__name__}: {exc}") from exc
        return self.g

    def step(self, node: fx.Node) -> None:
        if node.op == "placeholder":
            value = self.inputs[self.n_inputs]
            self.n_inputs += 1
            emitted = self.g.placeholder(node.name, type_expr=node.type)
            emitted.meta = dict(node.meta)
            self.tensor_defined(node, value, emitted)
            if isinstance(value, torch.Tensor):
                self.callers.setdefault(_key(value), []).append((node, _meta(value)))
        elif node.op == "get_attr" and not isinstance(operator.attrgetter(node.target)(self.module), torch.Tensor):
            self.tensor_defined(node, operator.attrgetter(node.target)(self.module), None)  # a region body
        elif node.op == "get_attr":
            if self.module is not self.src:
                raise LoweringError(f"node {node.name}: a constant read inside a grad-region body is not supported")
            value = self.constants[node.target]  # a copy: the caller's buffers stay as they are
            self.tensor_defined(node, value, self.g.get_attr(node.target))
            if isinstance(value, torch.Tensor) and all(s.target != node.target for s, _ in
                                                       self.callers.get(_key(value), [])):
                self.callers.setdefault(_key(value), []).append((node, _meta(value)))
        elif node.op == "output":
            self.finish(node)
        elif node.op == "call_function":
            self.call(node)
        else:
            raise LoweringError(f"node {node.name}: {node.op} nodes are not supported (ATen call_function graphs only)")

    def call(self, node: fx.Node) -> None:
        target = node.target
        args, kwargs = _real(self, node.args), _real(self, node.kwargs)
        if target is _GRAD:
            value = target(*args, **kwargs)
            self.tensor_defined(node, value, self.g.call_function(target, self.read(node.args), self.read(node.kwargs)))
            return
        if target is _HOP:
            self.inline_region(node, args)
            return
        if target is operator.getitem and node.args[0] in self.inlined:
            self.alias(node, self.inlined[node.args[0]][node.args[1]])
            return
        if target is operator.getitem:
            value = target(*args)
            self.tensor_defined(node, value, self.emit(operator.getitem, self.read(node.args[0]), node.args[1]))
            states = self.defined.get(node.args[0])
            if isinstance(value, torch.Tensor) and isinstance(states, list):
                self.defined[node] = states[node.args[1]]  # a write since the tuple was made is replayed
            return
        liar = SCHEMA_LIARS.get(target)
        if liar is not None:
            liar.functionalize(self, node, args, kwargs)
            return
        schema = getattr(target, "_schema", None)
        if schema is None:
            raise LoweringError(f"node {node.name}: {_target_name(target)} is not an ATen op")
        if not schema.is_mutable:
            value = target(*args, **kwargs)
            self.tensor_defined(node, value, self.emit(target, *self.read(node.args), **self.read(node.kwargs)))
            return
        if torch.Tag.inplace_view in target.tags:  # transpose_, t_, unsqueeze_, squeeze_, as_strided_
            value = target(*args, **kwargs)  # eager's tensor takes the new metadata; data untouched
            self.tensor_defined(node, value, None)
            return
        written = [i for i, a in enumerate(schema.arguments) if a.alias_info is not None and a.alias_info.is_write]
        if written != [0] or schema.name.endswith("_out") or not schema.name.endswith("_"):
            raise LoweringError(f"node {node.name}: {target} writes arguments {written}; only in-place ops "
                                f"writing self are supported")
        self.in_place(node, target, args, kwargs)

    def inline_region(self, node: fx.Node, args) -> None:
        """A ``wrap_with_set_grad_enabled`` node (torch.export's form of a grad region): its body is
        walked in place between grad markers, so the outliner rebuilds it as a functional region."""
        mode, body = args[0], args[1]
        before = torch.is_grad_enabled()
        self.g.call_function(_GRAD, (bool(mode),))
        torch._C._set_grad_enabled(bool(mode))
        outer, self.module = self.module, body
        try:
            inner = [n for n in body.graph.nodes if n.op == "placeholder"]
            for placeholder, operand in zip(inner, node.args[2:]):
                self.alias(placeholder, operand)
            for inner_node in body.graph.nodes:
                if inner_node.op == "output":
                    self.inlined[node] = list(torch.utils._pytree.tree_leaves(inner_node.args[0]))
                elif inner_node.op != "placeholder":
                    self.step(inner_node)
        finally:
            self.module = outer
            torch._C._set_grad_enabled(before)
        self.g.call_function(_GRAD, (not bool(mode),))
        self.real[node], self.fx[node] = tuple(self.real[n] for n in self.inlined[node]), None

    def alias(self, node: fx.Node, same: fx.Node) -> None:
        """``node`` denotes exactly what ``same`` denotes (a body placeholder, a region output)."""
        self.real[node], self.fx[node] = self.real[same], self.fx[same]
        if same in self.defined:
            self.defined[node] = self.defined[same]

    def in_place(self, node: fx.Node, target, args, kwargs) -> None:
        functional = functional_variant(target)
        self_value = args[0]
        new_value = functional(*args, **kwargs)  # eager's value of what the op writes, for its dtype
        new = self.emit(functional, *self.read(node.args), **self.read(node.kwargs))
        if new_value.dtype != self_value.dtype:  # in-place ops compute in the promoted type, store in self's
            new = self.emit(aten._to_copy.default, new, dtype=self_value.dtype)
        target(*args, **kwargs)  # eager runs on, in lockstep
        self.write(self_value, new)
        self.tensor_defined(node, self_value, None)

    # --- the end: outputs and what the caller sees ---------------------------------------------
    def finish(self, node: fx.Node):
        flat_out, spec = torch.utils._pytree.tree_flatten(node.args[0])
        labels = {src: _label(self, src) for entries in self.callers.values() for src, _ in entries}
        extra, metadata, mutated = [], {}, {}
        for k, entries in self.callers.items():
            written = self.version[k] > 0
            for src, before in entries:
                now = _meta(self.real[src])
                if now != before:
                    metadata[labels[src]] = now
                    if self.mode == "copy_":
                        self.emit(aten.as_strided_.default, self.fx[src], list(now[0]), list(now[1]), now[2])
                if self.mode == "outputs" and (written or now != before):
                    extra.append((labels[src], self.replay(self.real[src]) if written else
                                  self.emit(aten.as_strided.default, self.fx[src], list(now[0]), list(now[1]), now[2])))
            if self.mode == "copy_" and written:
                src = entries[0][0]
                if len(entries) == 1 and _covers(self.real[src], self.flat_len[k]):
                    self.emit(aten.copy_.default, self.fx[src], self.replay(self.real[src]))
                else:  # several inputs on one storage, elements outside the input's view, or an expanded
                    # input (copy_ into it raises): write every element the graph's views reach, once
                    dense = self.emit(aten.as_strided.default, self.fx[src], [self.flat_len[k]], [1], 0)
                    self.emit(aten.copy_.default, dense, self.flat[k])
        outs, aliases = [], {}
        caller_storage = {k: entries[0][0] for k, entries in self.callers.items()}
        for i, a in enumerate(flat_out):
            if not isinstance(a, fx.Node):
                outs.append(a)
                continue
            value = self.real[a]
            k = _key(value) if isinstance(value, torch.Tensor) else None
            if k in caller_storage:  # a view of an input or constant in eager: a view of it here too
                src = caller_storage[k]
                aliases[i] = labels[src]
                if self.mode == "copy_" and self.version[k] > 0:
                    outs.append(self.view_of_caller(src, value))
                    continue
            outs.append(self.read(a))
        result = torch.utils._pytree.tree_unflatten(outs, spec)
        top = tuple(result) if isinstance(result, (tuple, list)) else (result,)
        mutated = {len(top) + j: label for j, (label, _) in enumerate(extra)}
        if extra:
            result = (*top, *(v for _, v in extra))
        self.g.output(result)
        self.signature = FunctionalizationSignature(self.mode, len(top), mutated, metadata, aliases)


    def view_of_caller(self, src: fx.Node, value: torch.Tensor) -> fx.Node:
        """``value`` (an output on a caller's written storage) as a view of the caller's tensor, after
        the epilogue wrote it; a ``view.dtype`` alias keeps its own dtype (same element size only)."""
        size, stride, offset = _meta(value)
        base = self.real[src]
        if value.dtype != base.dtype and value.element_size() != base.element_size():
            raise LoweringError(f"an output viewing a written {base.dtype} input as {value.dtype} (another element "
                                f"size: view(dtype) reinterpretation of written memory is not supported)")
        out = self.emit(aten.as_strided.default, self.fx[src], list(size), list(stride), offset)
        return out if value.dtype == base.dtype else self.emit(aten.view.dtype, out, value.dtype)


def constant_copies(gm: fx.GraphModule) -> dict:
    """``{target: copy}`` for the tensors ``gm``'s get_attr nodes read; targets naming one tensor (or
    views of one storage) get copies on one storage, so a write through one is seen through all."""
    targets = list(dict.fromkeys(n.target for n in gm.graph.nodes if n.op == "get_attr"))
    values = [operator.attrgetter(t)(gm) for t in targets]
    pairs = [(t, v) for t, v in zip(targets, values) if isinstance(v, torch.Tensor)]
    return dict(zip([t for t, _ in pairs], copies_sharing_storage([v for _, v in pairs])))


def reachable_extents(gm: fx.GraphModule, inputs: tuple) -> dict:
    """Input index -> one past the last storage element any value on that input's storage reaches
    (a dry run on copies), so flats of caller storages need no more of the storage than that."""
    copies = copies_sharing_storage(inputs)
    owner = {_key(t): i for i, t in reversed(list(enumerate(copies))) if isinstance(t, torch.Tensor)}
    extents = {}

    constants = constant_copies(gm)

    class Recorder(fx.Interpreter):
        def fetch_attr(self, target):  # the caller's buffers are never run on: copies of them
            return constants.get(target) if target in constants else super().fetch_attr(target)

        def run_node(self, n):
            result = super().run_node(n)  # inputs too: a metadata mutation changes them in place
            for u in _tensors(result) + [t for a in n.all_input_nodes for t in _tensors(self.env[a])]:
                i = owner.get(_key(u))
                if i is not None:
                    extents[i] = max(extents.get(i, 0), reach(u))
            return result

    grad = torch.is_grad_enabled()
    try:
        Recorder(gm).run(*copies)
    finally:
        torch._C._set_grad_enabled(grad)
    return extents


def _covers(t: torch.Tensor, n: int) -> bool:
    """``t``'s elements are exactly storage elements [0, n), each once."""
    return t.storage_offset() == 0 and t.numel() == n == reach(t) and torch._debug_has_internal_overlap(t) == 0


def _label(walk: Walk, src: fx.Node) -> str:
    if src.op == "placeholder":
        return f"input[{[n for n in walk.src.graph.nodes if n.op == 'placeholder'].index(src)}]"
    return f"constant {src.target}"


def _real(walk: Walk, arg):
    if isinstance(arg, fx.Node):
        return walk.real[arg]
    if isinstance(arg, (list, tuple)):
        return type(arg)(_real(walk, a) for a in arg)
    if isinstance(arg, dict):
        return {k: _real(walk, v) for k, v in arg.items()}
    return arg


def _tensors(value):
    return [t for t in torch.utils._pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]


def _target_name(target) -> str:
    return getattr(target, "__name__", str(target)) if not isinstance(target, torch._ops.OpOverload) else str(target)
