"""Copies the harness works on, and the one way it runs a graph.

The caller's graph, constants and inputs are never touched. A pass gets a ``snapshot`` of the graph
(new nodes, cloned constants); every run gets copies of the inputs made by ``restorage``, the one
way tensors are copied, which keeps sizes, strides, storage offsets and which tensors share a
storage, so the graph's views and in-place writes mean what they meant (``clone_inputs``,
``clone_tensor``; ``to_device`` the same on another device); ``tensor_constants`` are the constants
a run reads and may write. Every run is inside ``graph_run``: torch's generators seeded and
restored, grad mode as it was, random ops in logical order.
"""

from __future__ import annotations

import copy
import operator
from contextlib import contextmanager, nullcontext

import torch
import torch.fx as fx
from torch.fx._lazy_graph_module import _LazyGraphModule

from strategies import current_modes, restore_modes

from ._errors import UsageError


def snapshot(gm: fx.GraphModule) -> fx.GraphModule:
    """An independent copy of ``gm``: new graph and nodes (meta dicts copied), cloned tensors.

    Nodes are created first and wired second, so a graph with use-before-def copies as it is
    (``copy.deepcopy`` and ``Graph.graph_copy`` raise ``KeyError`` on one), and FakeTensors in
    meta are shared, not deep-copied. The copy is a ``_LazyGraphModule`` (as dynamo hands passes):
    its code is generated on first use, so a copy the pass rewrites before anything runs it never
    pays for a compile it discards.
    """
    graph = fx.Graph(tracer_cls=gm.graph._tracer_cls)
    from strategies._ir.convert import no_treespec_warning

    with no_treespec_warning():  # an export-module graph's pytree code generator
        graph._codegen = copy.deepcopy(gm.graph._codegen)
    env = {}
    for node in gm.graph.nodes:
        env[node] = new = graph.create_node(node.op, node.target, (), {}, node.name, node.type)
        new.meta = copy.copy(node.meta)

    def lookup(arg: fx.Node) -> fx.Node:
        if arg not in env:
            raise UsageError(f"node {arg.name} is used by the graph but is not in it (erased or from another graph)")
        return env[arg]

    for node, new in env.items():
        new.args, new.kwargs = fx.map_arg(node.args, lookup), fx.map_arg(node.kwargs, lookup)
    root = torch.nn.Module()
    root.training = gm.training  # the graph's own mode (not its submodules': each keeps its own)
    for node in gm.graph.nodes:
        if node.op in ("get_attr", "call_module"):
            _copy_attr(gm, root, node.target)
    copied = _LazyGraphModule(root, graph, class_name=type(gm).__name__)  # the per-instance class, renamed
    copied.meta = copy.copy(gm.meta)  # e.g. an export graph's "graph_signature"
    return copied


def _copy_attr(src: torch.nn.Module, dst: torch.nn.Module, target: str) -> None:
    *path, leaf = target.split(".")
    for name in path:
        src = getattr(src, name)
        if not hasattr(dst, name):
            dst.add_module(name, torch.nn.Module())
        dst = getattr(dst, name)
    if hasattr(dst, leaf):
        return
    value = getattr(src, leaf)
    if isinstance(value, torch.nn.Parameter):
        dst.register_parameter(leaf, torch.nn.Parameter(clone_tensor(value.detach()), value.requires_grad))
    elif isinstance(value, torch.Tensor):
        dst.register_buffer(leaf, clone_tensor(value))
    elif isinstance(value, torch.nn.Module):
        dst.add_module(leaf, copy.deepcopy(value))
    else:
        setattr(dst, leaf, copy.deepcopy(value))


def clone_tensor(t: torch.Tensor) -> torch.Tensor:
    """A copy with the same values, shape, strides and storage offset (on its own storage)."""
    return restorage((t,))[0]


def clone_inputs(tensors) -> tuple:
    """Fresh copies of ``tensors``: same values, dtypes, sizes, strides and storage offsets, and
    the same sharing: inputs that were views of one storage are views of one (new) storage."""
    return restorage(tensors)


def widened(dtype: torch.dtype, float_dtype: torch.dtype | None) -> torch.dtype | None:
    """What a tensor of ``dtype`` is converted to for ``float_dtype`` (its complex form for a complex
    dtype: complex64 becomes complex128 for float64), or None where it is not a float."""
    if float_dtype is None:
        return None
    if dtype.is_complex:
        return torch.complex128 if float_dtype is torch.float64 else dtype
    return float_dtype if dtype.is_floating_point else None


def restorage(tensors, *, device=None, float_dtype: torch.dtype | None = None) -> tuple:
    """The one way tensors are copied: new storages holding the old bytes (on ``device``), each
    tensor re-viewed with its size, stride and offset, so sharing and layout survive.

    ``float_dtype``: floating tensors are instead re-viewed on a converted copy of their storage
    (the fp64 reference run; complex ones as complex128 for float64); one copy per (storage, dtype).
    """
    storages, out = {}, []
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            out.append(copy.deepcopy(t))
            continue
        st = t.untyped_storage()
        target = widened(t.dtype, float_dtype)
        convert = target is not None and target != t.dtype
        key = ((st.data_ptr(), t.dtype if convert else None) if st.nbytes() else id(t))
        if key not in storages:
            if convert:
                flat = torch.empty(0, dtype=t.dtype, device=t.device).set_(st, 0, (st.nbytes() // t.element_size(),))
                storages[key] = flat.to(target)
            else:
                storages[key] = torch.UntypedStorage(st.nbytes(), device=device or t.device)
                storages[key].copy_(st)
        if convert:
            new = storages[key].as_strided(t.shape, t.stride(), t.storage_offset())
        else:
            new = torch.empty(0, dtype=t.dtype, device=storages[key].device).set_(
                storages[key], t.storage_offset(), t.shape, t.stride())
        out.append(new.requires_grad_() if t.requires_grad and not convert else new)
    return tuple(out)


def to_device(gm: fx.GraphModule, inputs: tuple, device: str) -> tuple:
    """Copies of ``gm`` (constants moved, factories' ``device=`` pointed at ``device``,
    ``meta['val']`` re-read) and ``inputs`` on ``device``, with the inputs' sizes, strides, offsets
    and storage sharing kept."""
    from strategies import attach_meta
    from strategies._build.device import relocate

    moved = restorage(inputs, device=device)
    gm = snapshot(gm).to(device)
    relocate(gm, device)
    return attach_meta(gm, clone_inputs(moved)), moved


@contextmanager
def graph_run(gm: fx.GraphModule | None = None):
    """Runs a graph (or a pass, which may run one): grad mode and autocast are as they were afterwards
    (a graph's ``_set_grad_enabled`` and ``_enter_autocast`` nodes may change them), and torch's generators are seeded with
    ``strategies.RNG_SEED`` first and restored afterwards, so random ops draw the same values on
    every run: what a pass must keep. Where ``gm`` (the graph about to run) holds random ops, they
    draw in their results' logical order (``_random.logical_order``): a pass that only changes
    the layout of a random op's operand keeps its values."""
    from strategies import RNG_SEED

    from ._random import has_random_ops, logical_order

    modes = current_modes()
    with torch.random.fork_rng():
        # Not torch.manual_seed: on a build without CUDA, XPU or MTIA it still queues a lazy seed call
        # for each, with a formatted stack (2 ms a call, 12% of a CPU search's time)
        torch.default_generator.manual_seed(RNG_SEED)
        if torch.cuda.is_available():
            torch.cuda.manual_seed_all(RNG_SEED)  # queued until CUDA initialises, if it has not yet
        try:
            with logical_order() if gm is not None and has_random_ops(gm) else nullcontext():
                yield
        finally:
            restore_modes(modes)


def tensor_constants(gm: fx.GraphModule) -> dict:
    """``{target: tensor}`` for the tensors the graph's ``get_attr`` nodes read and the buffers of the
    modules its ``call_module`` nodes run (module state a run may write: a train-mode batch norm's
    running statistics)."""
    found = {}
    for node in gm.graph.nodes:
        if node.op == "get_attr" and node.target not in found:
            value = attr_or_none(gm, node.target)
            if isinstance(value, torch.Tensor):
                found[node.target] = value
        elif node.op == "call_module":
            module = attr_or_none(gm, node.target)
            if isinstance(module, torch.nn.Module):
                for name, buf in module.named_buffers():
                    found.setdefault(f"{node.target}.{name}", buf)
    return found


def attr_or_none(gm: torch.nn.Module, target: str):
    """The attribute at dotted ``target``, or None where the module has none."""
    try:
        return operator.attrgetter(target)(gm)
    except AttributeError:
        return None
