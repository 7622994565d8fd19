"""The device a graph is drawn for: placing its calls there, its generators, and its kernels.

A drawn graph runs in eager on the device it is drawn for: the builder computes every node there
(``GraphBuilder.run_device``), factories carry ``device=`` as traced graphs do (``placed``), and a
graph's random ops draw from the generator of its device (``seeded``). What a device runs, as a table
per catalog row, is the drawing's business (``_draw/support.py``, learned by ``_draw/probe.py``);
here are the facts it is read from: which dispatch keys have a kernel (``has_kernel``), what a call
is (``op_name``, ``signature``), and the hook through which the builder reports every call it runs
(``report_calls``), which the probe listens on.
"""

from __future__ import annotations

import contextlib
import functools
import threading

import torch

from .._catalog.vocabulary import overload_name
from .._errors import InvalidArgument

RNG_SEED = 0  # the global generator's seed before every run of a graph with random ops


_DISPATCH_KEYS = {"cpu": "CPU", "cuda": "CUDA", "meta": "Meta"}
_COMPOSITE = ("CompositeImplicitAutograd", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")


def op_name(target) -> str:
    """``aten.mm.default`` for an OpOverload (the catalog's row names); ``str`` of anything else."""
    if getattr(target, "_schema", None) is None:
        return getattr(target, "__name__", str(target))
    return overload_name(target)


def signature(args, kwargs) -> tuple:
    """The dtypes of a call's tensor operands, in argument order: what a device may refuse."""
    out = []

    def walk(obj):
        if isinstance(obj, torch.Tensor):
            out.append(str(obj.dtype).removeprefix("torch."))
        elif isinstance(obj, (tuple, list)):
            for o in obj:
                walk(o)
        elif isinstance(obj, dict):
            for o in obj.values():
                walk(o)

    walk(args)
    walk(kwargs)
    return tuple(out)


def has_kernel(overload, device_type: str) -> bool:
    """Whether torch's dispatcher has a kernel of ``overload`` for ``device_type`` (or a composite
    one that runs anywhere). A CPU build has no CUDA kernels at all, so this decides CPU rows only
    there; a CUDA build answers for both."""
    key = _DISPATCH_KEYS.get(device_type)
    name = overload.name()  # aten::add.Tensor
    if key is None:
        return True
    return any(torch._C._dispatch_has_kernel_for_dispatch_key(name, k) for k in (key, *_COMPOSITE))


# --- the device a strategy draws for -----------------------------------------------------------------


# (device type, run device or None for the device itself, table): what graphs drawn for that device
# type use instead of the device's own table, while ``simulated`` or the probe runs.
_OVERRIDE = threading.local()


@contextlib.contextmanager
def _overridden(device_type: str, run_device, support):
    outer = getattr(_OVERRIDE, "value", None)
    _OVERRIDE.value = (device_type, run_device, support)
    try:
        yield
    finally:
        _OVERRIDE.value = outer


def _override(device: torch.device):
    value = getattr(_OVERRIDE, "value", None)
    return value if value is not None and value[0] == device.type else None


def simulated(device: str, support):
    """Draw graphs "for ``device``" on the CPU with a recorded ``support`` table (tests on machines
    without that device): every node is computed on the CPU, the graph says ``device`` (factories),
    and the table alone keeps out what the device refuses. Not a way to run anything on it."""
    return _overridden(torch.device(device).type, torch.device("cpu"), support)


def check_device(device) -> torch.device:
    """``device`` as a ``torch.device``; InvalidArgument where it is not a device this machine has."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise InvalidArgument(f"device={device!r} is not a torch device; pass 'cpu', 'cuda' or 'cuda:N'") from None
    if _override(dev) is not None:
        return dev
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise InvalidArgument(f"device={device!r}, but torch.cuda.is_available() is False on this machine "
                                  f"(torch {torch.__version__}); draw for device='cpu'")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise InvalidArgument(f"device={device!r}, but this machine has {torch.cuda.device_count()} CUDA devices")
    elif dev.type != "cpu":
        raise InvalidArgument(f"device={device!r}: graphs are drawn for 'cpu' or 'cuda' devices")
    return dev


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return device.type


def device_error(device: torch.device) -> str | None:
    """The asynchronous error ``device``'s kernels left (a CUDA error poisons the context: every
    later call fails), or None."""
    if device.type != "cuda":
        return None
    try:
        torch.cuda.synchronize(device)
    except Exception as exc:  # noqa: BLE001 - any error of the kernels launched so far
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return None


# --- the calls the builder runs ------------------------------------------------------------------------

_LISTENER = threading.local()


@contextlib.contextmanager
def report_calls(listener):
    """Inside, the builder reports every call it runs to ``listener(target, args, kwargs, error, out)``
    (``error``: why it raised, None where it ran): how the device probe learns what a device runs."""
    outer = getattr(_LISTENER, "value", None)
    _LISTENER.value = listener
    try:
        yield
    finally:
        _LISTENER.value = outer


def record_attempt(target, args, kwargs, error: str | None, out=None) -> None:
    """Called by the builder for every call it runs (a no-op unless ``report_calls`` is listening)."""
    listener = getattr(_LISTENER, "value", None)
    if listener is not None:
        listener(target, args, kwargs, error, out)


# --- factories and generators ------------------------------------------------------------------------


def placed(target, kwargs: dict, device: torch.device) -> dict:
    """``kwargs`` of a call of ``target`` with ``device=`` where a traced graph has it: always on a
    factory (an op with a ``device`` argument and no tensor operand: ``zeros``, ``full``,
    ``arange``, ``empty``), and rewritten where given on any other op (``_to_copy``)."""
    takes = _device_argument(target)
    if takes is None:
        return kwargs
    if takes == "factory" or kwargs.get("device") is not None:
        return {**kwargs, "device": device}
    return kwargs


@functools.lru_cache(maxsize=None)
def _device_argument(target) -> str | None:
    """None (no ``device`` argument), ``"factory"`` (one, and no tensor operand) or ``"op"``."""
    schema = getattr(target, "_schema", None)
    if schema is None or not any(a.name == "device" for a in schema.arguments):
        return None
    return "op" if any("Tensor" in str(a.type) for a in schema.arguments) else "factory"


def relocate(gm, device) -> None:
    """Point ``gm``'s calls at ``device`` in place: factories' ``device=`` (added where missing, as
    traced graphs have it) and any other op's ``device=`` where given. Constants are moved by
    ``gm.to(device)``; this is what ``to`` does not know about."""
    device = torch.device(device)
    changed = False
    for node in gm.graph.nodes:
        if node.op == "call_function":
            kwargs = placed(node.target, dict(node.kwargs), device)
            if kwargs != dict(node.kwargs):
                node.kwargs = kwargs
                changed = True
    if changed:
        gm.recompile()


def device_of(tensors) -> torch.device:
    """The device of the first tensor among ``tensors`` (CPU when there is none)."""
    return next((t.device for t in tensors if isinstance(t, torch.Tensor)), torch.device("cpu"))


def _cuda_indices(device) -> list:
    device = torch.device(device)
    return [device.index if device.index is not None else torch.cuda.current_device()] if device.type == "cuda" else []


def forked_rng(device):
    """The caller's generators (the CPU's and ``device``'s) as they were, whatever runs inside."""
    return torch.random.fork_rng(devices=_cuda_indices(device), device_type="cuda")


@contextlib.contextmanager
def seeded(device, seed: int):
    """Run with ``device``'s generator (and the CPU's) at ``seed``, restoring the caller's after."""
    indices = _cuda_indices(device)
    with torch.random.fork_rng(devices=indices, device_type="cuda"):
        torch.default_generator.manual_seed(seed)  # torch.manual_seed would seed every device, unrestored
        for i in indices:
            torch.cuda.default_generators[i].manual_seed(seed)
        yield


def rng_state(device) -> tuple:
    indices = _cuda_indices(device)
    return (torch.random.get_rng_state(), *(torch.cuda.get_rng_state(i) for i in indices))


def set_rng_state(device, state: tuple) -> None:
    torch.random.set_rng_state(state[0])
    for i, s in zip(_cuda_indices(device), state[1:]):
        torch.cuda.set_rng_state(s, i)


__all__ = ["check_device", "has_kernel", "op_name", "placed", "relocate", "report_calls", "seeded", "signature",
           "simulated"]
