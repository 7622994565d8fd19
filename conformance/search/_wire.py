"""What crosses into a spawned worker process (``_spawn.py``): the pass, and each example.

A forked child inherits both; a spawned one gets bytes. Plain pickling is not enough:

- a ``GraphModule`` pickles as its generated code and is traced again on load, which drops every
  node's ``meta`` (``meta['val']`` is what many passes read), renames nodes and runs what the code
  calls (``_set_grad_enabled``). The graph travels node by node instead: op, name, target, args,
  type and each ``meta`` entry that pickles, under the sender's names;
- ``meta['val']`` fake tensors do not pickle (their mode holds weak references): each travels as
  its metadata (dtype, sizes, strides, offset, device, which fake storage, which mode) and is made
  again in one mode per sending mode, fakes that shared a storage sharing one again; a fake over
  symbolic sizes does not travel (a dynamic check propagates its own);
- ``OpOverload`` targets do not pickle: they travel by name (``aten::add.Tensor``);
- pickled tensors each get a storage of their own: inputs that were views of one storage, with
  their NaN payloads, offsets and strides, travel as one storage's bytes and a view per tensor.

The pass travels as its import path where it has one (``pkg.mod:attr``, ``file.py:attr``), so
the worker loads it as the user named it (a file target is imported again there; its module
name differs between processes), else pickled by reference (a module-level object). A lambda or
a closure cannot travel: ``pass_recipe`` says so as a UsageError.
"""

from __future__ import annotations

import copy
import io
import pickle

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from strategies._ir.convert import no_treespec_warning

from .._errors import HarnessError, UsageError
from ..adapters import load_pass, reference_of


class _Unportable(Exception):
    """A value that cannot cross a process boundary (a fake over symbolic sizes, a SymInt)."""


class _NodeRef:
    """An argument that is a node: the node's index in the graph."""

    def __init__(self, index: int):
        self.index = index


def _load_op(namespace: str, name: str, overload: str | None):
    packet = getattr(getattr(torch.ops, namespace), name)
    return packet if overload is None else getattr(packet, overload)


def _load_hop(name: str):
    return getattr(torch.ops.higher_order, name)


class _Sent:
    """The sender's tables: storages (bytes, one per real storage) and fake storages and modes."""

    def __init__(self):
        self.storages, self.storage_index = [], {}
        self.modes, self.fake_storages = [], {}


class _Pickler(pickle.Pickler):
    def __init__(self, file, sent: _Sent):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.sent = sent

    def reducer_override(self, obj):
        if isinstance(obj, torch._ops.OpOverload):
            return _load_op, (obj.namespace, obj._schema.name.split("::", 1)[1], obj._overloadname)
        if isinstance(obj, torch._ops.OpOverloadPacket):
            namespace, name = obj._qualified_op_name.split("::", 1)
            return _load_op, (namespace, name, None)
        if isinstance(obj, torch._ops.HigherOrderOperator):
            return _load_hop, (obj.name(),)
        if isinstance(obj, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            raise _Unportable(type(obj).__name__)
        return NotImplemented

    def persistent_id(self, obj):
        if isinstance(obj, FakeTensor):
            return self._fake(obj)
        if type(obj) is torch.Tensor or type(obj) is torch.nn.Parameter:
            return self._tensor(obj)
        return None

    def _tensor(self, t: torch.Tensor) -> tuple:
        st = t.untyped_storage()
        key = (st.data_ptr(), st.device) if st.nbytes() else ("empty", id(t))
        index = self.sent.storage_index.get(key)
        if index is None:
            flat = torch.empty(0, dtype=torch.uint8, device=st.device).set_(st).cpu().clone()
            index = self.sent.storage_index[key] = len(self.sent.storages)
            self.sent.storages.append(flat)  # the storage's bytes, NaN payloads and all
        return ("tensor", index, str(st.device), t.dtype, tuple(t.shape), t.stride(), t.storage_offset(),
                t.requires_grad, isinstance(t, torch.nn.Parameter))

    def _fake(self, t: FakeTensor) -> tuple:
        if any(isinstance(s, torch.SymInt) for s in (*t.shape, *t.stride(), t.storage_offset())):
            raise _Unportable("a fake tensor over symbolic sizes")
        mode = t.fake_mode
        if not any(m is mode for m in self.sent.modes):
            self.sent.modes.append(mode)
        mode_index = next(i for i, m in enumerate(self.sent.modes) if m is mode)
        st = t.untyped_storage()
        storage = self.sent.fake_storages.setdefault((mode_index, st._cdata), len(self.sent.fake_storages))
        return ("fake", mode_index, storage, st.nbytes(), t.dtype, tuple(t.shape), t.stride(), t.storage_offset(),
                t.device, t.requires_grad)


class _Received:
    """The receiver's tables: storages rebuilt, one fake mode per sending mode, fake bases."""

    def __init__(self, storages: list, shared_modes: list):
        self.storages = storages
        self.shared_modes = shared_modes  # per sending mode: was it strategies' shared mode
        self.on_device, self.modes, self.fake_bases = {}, {}, {}


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, received: _Received):
        super().__init__(file)
        self.received = received

    def persistent_load(self, pid):
        r = self.received
        if pid[0] == "tensor":
            _, index, device, dtype, shape, stride, offset, requires_grad, is_param = pid
            if (index, device) not in r.on_device:
                r.on_device[(index, device)] = r.storages[index].to(device).untyped_storage()
            t = torch.empty(0, dtype=dtype, device=device).set_(r.on_device[(index, device)], offset, shape, stride)
            if is_param:
                return torch.nn.Parameter(t, requires_grad)
            return t.requires_grad_() if requires_grad else t
        _, mode_index, storage, nbytes, dtype, shape, stride, offset, device, requires_grad = pid
        if mode_index not in r.modes:
            from strategies._build.meta import shared_fake_mode

            r.modes[mode_index] = (shared_fake_mode() if r.shared_modes[mode_index]
                                   else FakeTensorMode(allow_non_fake_inputs=True))
        itemsize = torch.empty(0, dtype=dtype).element_size()
        key = (mode_index, storage, dtype)
        if key not in r.fake_bases:
            r.fake_bases[key] = torch.empty(nbytes // itemsize, dtype=dtype, device="meta")
        fake = FakeTensor(r.modes[mode_index], r.fake_bases[key].as_strided(shape, stride, offset), device)
        return fake.requires_grad_() if requires_grad else fake


def _dumps(obj, sent: _Sent) -> bytes:
    buf = io.BytesIO()
    _Pickler(buf, sent).dump(obj)
    return buf.getvalue()


def _portable_entries(meta: dict, sent: _Sent) -> list:
    """``meta`` as ``(key, bytes)`` pairs, leaving out what cannot travel (it is not the pass's input)."""
    out = []
    for key, value in meta.items():
        try:
            out.append((key, _dumps(value, sent)))
        except Exception:  # noqa: BLE001 - symbolic fakes, tracer-internal objects: re-derived or unused
            continue
    return out


def dumps_case(gm: fx.GraphModule, inputs: tuple, symbolic=None) -> bytes:
    """One example as bytes for ``loads_case`` in another process (see the module docstring)."""
    from strategies._build.meta import shared_fake_mode

    sent = _Sent()
    index = {node: i for i, node in enumerate(gm.graph.nodes)}
    try:
        nodes = [(n.op, n.name, _dumps((n.target, n.type), sent),
                  _dumps((fx.map_arg(n.args, lambda a: _NodeRef(index[a])),
                          fx.map_arg(n.kwargs, lambda a: _NodeRef(index[a]))), sent),
                  _portable_entries(n.meta, sent)) for n in gm.graph.nodes]
        root = torch.nn.Module()
        root.training = gm.training
        attrs = []
        for n in gm.graph.nodes:
            if n.op in ("get_attr", "call_module") and n.target not in attrs:
                attrs.append(n.target)
        values = [(t, _dumps(_attr(gm, t), sent)) for t in attrs]
        with no_treespec_warning():  # an export-module graph's pytree code generator
            codegen = copy.deepcopy(gm.graph._codegen)
        body = {"nodes": nodes, "attrs": values, "training": gm.training, "class_name": type(gm).__name__,
                "codegen": _dumps(codegen, sent),
                "tracer_cls": _dumps(gm.graph._tracer_cls, sent), "meta": _portable_entries(gm.meta, sent),
                "inputs": _dumps(tuple(inputs), sent), "symbolic": _dumps(symbolic, sent)}
    except Exception as exc:  # noqa: BLE001 - pybind objects raise RuntimeError, others TypeError or PicklingError
        raise HarnessError(f"the example cannot be sent to the isolated worker process: {type(exc).__name__}: "
                           f"{exc}") from None
    shared = shared_fake_mode()
    return pickle.dumps((body, sent.storages, [m is shared for m in sent.modes]), protocol=pickle.HIGHEST_PROTOCOL)


def _attr(gm, target: str):
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def loads_case(data: bytes) -> tuple:
    """``(gm, inputs, symbolic)`` from ``dumps_case``'s bytes."""
    body, storages, shared_modes = pickle.loads(data)
    received = _Received(storages, shared_modes)

    def load(blob: bytes):
        return _Unpickler(io.BytesIO(blob), received).load()

    graph = fx.Graph(tracer_cls=load(body["tracer_cls"]))
    graph._codegen = load(body["codegen"])
    env = []
    for op, name, target_type, _, meta in body["nodes"]:
        target, type_ = load(target_type)
        node = graph.create_node(op, target, (), {}, name, type_)
        node.meta.update((k, load(v)) for k, v in meta)
        env.append(node)

    def wire(a):
        return env[a.index] if isinstance(a, _NodeRef) else a

    for node, (_, _, _, args, _) in zip(env, body["nodes"]):
        a, kw = load(args)
        node.args, node.kwargs = fx.node.map_aggregate(a, wire), fx.node.map_aggregate(kw, wire)
    root = torch.nn.Module()
    root.training = body["training"]
    for target, blob in body["attrs"]:
        *path, leaf = target.split(".")
        owner = root
        for part in path:
            if not hasattr(owner, part):
                owner.add_module(part, torch.nn.Module())
            owner = getattr(owner, part)
        value = load(blob)
        if isinstance(value, torch.nn.Parameter):
            owner.register_parameter(leaf, value)
        elif isinstance(value, torch.Tensor):
            owner.register_buffer(leaf, value)
        elif isinstance(value, torch.nn.Module):
            owner.add_module(leaf, value)
        else:
            setattr(owner, leaf, value)
    gm = fx.GraphModule(root, graph, class_name=body["class_name"])
    gm.meta.update((k, load(v)) for k, v in body["meta"])
    return gm, load(body["inputs"]), load(body["symbolic"])


# --- the pass --------------------------------------------------------------------------------------


def _portable(obj, what: str, name: str):
    """``("ref", "pkg.mod:attr")`` or ``("pickle", bytes)`` for a callable; UsageError when neither."""
    if obj is None:
        return None
    ref = reference_of(obj)
    if ref is not None:
        return ("ref", ref)
    try:  # by reference, and the ops or tensors it holds (CSEPass(banned_ops=...)) as an example's travel
        sent = _Sent()
        blob = _dumps(obj, sent)
        return ("pickle", pickle.dumps((blob, sent.storages, [False] * len(sent.modes))))
    except Exception:  # noqa: BLE001 - lambdas, closures, local classes: say what to do instead
        raise UsageError(f"{what} {name} cannot reach the isolated worker process (with CUDA, examples are not "
                         f"isolated in a fork, and a lambda or local function does not pickle); give it as an import "
                         f"path (pkg.mod:attr or path/to/file.py:attr) or define it at module level, or use --device "
                         f"cpu in a process that has not initialised CUDA") from None


def pass_recipe(put, checker) -> bytes:
    """What a worker needs to build the same ``Checker`` around the same pass (``load_recipe``)."""
    fn = ("ref", put.reference) if put.reference else _portable(put.fn, "the pass", put.name)
    settings = _portable(put.settings_factory, "the settings factory of", put.name)
    context = _portable(put.context, "the --context factory of", put.name)
    options = copy.copy(checker)
    options.pass_ = None
    try:
        options = pickle.dumps(options)
    except Exception as exc:  # noqa: BLE001 - a contract registered as a local function
        raise UsageError(f"the checker's options cannot reach the isolated worker process ({type(exc).__name__}: "
                         f"{exc}); register contracts as module-level functions, or use --device cpu") from None
    return pickle.dumps({"fn": fn, "form": put.form, "settings_factory": settings, "context": context,
                         "kwargs": dict(put.kwargs), "checker": options})


def _unport(spec):
    if spec is None:
        return None
    kind, value = spec
    if kind == "ref":
        return value
    blob, storages, shared_modes = pickle.loads(value)
    return _Unpickler(io.BytesIO(blob), _Received(storages, shared_modes)).load()


def load_recipe(data: bytes) -> tuple:
    """``(put, checker)`` in the worker, from ``pass_recipe``'s bytes."""
    recipe = pickle.loads(data)
    checker = pickle.loads(recipe["checker"])
    from ..contracts import CONTRACTS

    for contract in (*checker.contracts, *checker.preserved):  # registered by a module the worker never imported
        CONTRACTS.setdefault(contract.name, contract)
    put = load_pass(_unport(recipe["fn"]), signature=recipe["form"],
                    settings_factory=_unport(recipe["settings_factory"]), pass_kwargs=recipe["kwargs"] or None,
                    context=_unport(recipe["context"]))
    checker.pass_ = put
    return put, checker


__all__ = ["dumps_case", "loads_case", "pass_recipe", "load_recipe"]
