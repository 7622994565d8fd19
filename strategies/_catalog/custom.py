"""A user's own ops as catalog rows: ``torch.ops.<lib>.<op>`` overloads drawn from their schemas.

The catalog (``ops.py``) is a literal table of ATen overloads; a user's op is not in it and needs no
row written by hand. ``custom_rows(item)`` makes one row per overload that ``item`` names (an
OpOverload, an OpOverloadPacket, ``"lib::op"``, ``"lib::op.overload"``, ``"lib.op.overload"`` or a
namespace ``"lib"``, every op registered under it). Such a row is of category ``CUSTOM`` and draws
its whole call (``CUSTOM_CALL``): each argument by the op's ``op_rule`` where one names it, the rest
by the schema (``_draw/custom_calls.py``). Which draws are valid is the op's own business: a call
its kernel or its fake impl raises on is rejected, and counted against the op (``custom_health``).

``op_rule(op)`` registers what the schema cannot say ("weight is the last dim of input", "scale is
one float32"), in the style of the catalog's call rules; it lives here, with the rows, so the
strategies never import the harness (``conformance.op_rule`` is this function).
"""

from __future__ import annotations

import collections
import dataclasses

import torch

from .vocabulary import CUSTOM, CUSTOM_CALL, FLOAT, OpSpec, overload_name

# Namespaces that are torch's own: their ops are the catalog's (aten, quantized_decomposed) or
# what the tracers and compilers emit (prims, inductor, higher_order...), never a user's rows.
_TORCH_NAMESPACES = frozenset({"aten", "prim", "prims", "inductor", "higher_order", "_c10d_functional",
                               "c10d_functional", "_dtensor", "profiler", "debugprims", "rngprims", "_quantized",
                               "quantized", "quantized_decomposed", "onnx", "fbgemm", "mkldnn", "_test"})

_RULES: dict = {}
_ROWS: dict = {}


def op_rule(op):
    """Register ``fn`` as how ``op``'s calls are drawn (a decorator): ``fn(call)`` gets a ``CallDraw``
    and draws the arguments the schema cannot describe; the ones it leaves are drawn by the schema.

    >>> import torch
    >>> @op_rule(torch.ops.aten.add.Tensor)  # any OpOverload; a user's own in practice
    ... def _(call):
    ...     x = call.tensor("self", shape=(2, 3))
    ...     call.tensor("other", shape=x.shape[-1:], dtype=x.dtype)
    >>> rule_of(torch.ops.aten.add.Tensor) is not None
    True
    >>> _ = _RULES.pop(torch.ops.aten.add.Tensor)
    """
    overloads = custom_overloads(op, any_namespace=True)
    if not overloads:
        raise TypeError(f"op_rule({op!r}): not an op (pass torch.ops.<lib>.<op>.<overload> or its packet)")

    def register(fn):
        if not callable(fn):
            raise TypeError(f"op_rule({op!r}) decorates a function of one CallDraw, not {fn!r}")
        for overload in overloads:
            _RULES[overload] = fn
        return fn

    return register


def rule_of(overload):
    """The function ``op_rule`` registered for ``overload``, or None."""
    return _RULES.get(overload)


def custom_overloads(item, *, any_namespace: bool = False) -> tuple:
    """The OpOverloads ``item`` names outside torch's own namespaces (``any_namespace``: anywhere),
    or () when it names none."""
    if isinstance(item, torch._ops.OpOverload):
        found = (item,)
    elif isinstance(item, torch._ops.OpOverloadPacket):
        found = tuple(getattr(item, name) for name in item.overloads())
    elif isinstance(item, str):
        found = _named(item)
    else:
        return ()
    return tuple(o for o in found if any_namespace or _namespace(o) not in _TORCH_NAMESPACES)


def _namespace(overload) -> str:
    return overload._schema.name.split("::", 1)[0]


def _named(name: str) -> tuple:
    name = name.strip()
    if "::" in name:
        namespace, rest = name.split("::", 1)
    elif name.count(".") == 2:
        namespace, rest = name.split(".", 1)
    elif "." not in name:  # a namespace: every op registered under it
        prefix = f"{name}::"
        return tuple(o for qualified in sorted(torch._C._dispatch_get_all_op_names()) if qualified.startswith(prefix)
                     for o in _named(qualified))
    else:
        return ()
    packet_name, _, overload_name = rest.partition(".")
    try:
        packet = getattr(getattr(torch.ops, namespace), packet_name)
    except (AttributeError, RuntimeError):
        return ()
    if not isinstance(packet, torch._ops.OpOverloadPacket):
        return ()
    if overload_name:
        try:
            return (getattr(packet, overload_name),)
        except AttributeError:
            return ()
    return tuple(getattr(packet, o) for o in packet.overloads())


def defining_function(overload):
    """The Python function a ``torch.library.custom_op`` was defined from (its module registers the
    op), or None (an op registered another way: from C++, ``torch.library.Library``)."""
    opdef = getattr(torch._library.custom_ops, "OPDEFS", {}).get(overload._schema.name)
    return getattr(opdef, "_init_fn", None)


def custom_rows(item) -> tuple:
    """One catalog row per user op ``item`` names (the same row object each time), or ()."""
    out = []
    for overload in custom_overloads(item):
        row = _ROWS.get(overload)
        if row is None:
            row = _ROWS[overload] = OpSpec(overload, CUSTOM, (CUSTOM_CALL,), FLOAT,
                                           note="a user's op, drawn from its schema and its op_rule")
        out.append(row)
    return tuple(out)


# --- health: how often each user op's drawn calls ran, and what failed --------------------------


@dataclasses.dataclass
class CustomHealth:
    """Counts for one user op over this process's draws: calls tried, calls that ran (and became
    nodes), and per argument the calls rejected with a message naming it (``""``: none named)."""

    tried: int = 0
    ran: int = 0
    failed: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    example: dict = dataclasses.field(default_factory=dict)  # argument -> one message
    fake: int = 0  # of the rejections, calls whose fake impl disagreed with the kernel (the op's fault)
    fake_example: str = ""

    def merged(self, other: CustomHealth) -> CustomHealth:
        """Both counts added (drivers in several processes drew calls of one op)."""
        return CustomHealth(self.tried + other.tried, self.ran + other.ran, self.failed + other.failed,
                            {**other.example, **self.example}, self.fake + other.fake,
                            self.fake_example or other.fake_example)

    def fault(self, name: str) -> str | None:
        """One line saying the op is at fault, where its fake impl disagreed with its kernel."""
        if not self.fake:
            return None
        return (f"{name}: its fake impl disagrees with its kernel on {self.fake} of {self.tried} drawn calls "
                f"({self.fake_example}): the op's fault, not the pass's; those calls were left out of the graphs")

    def line(self, name: str) -> str:
        """One line for a report, naming the argument most rejections named."""
        head = f"{name}: {self.ran} of {self.tried} drawn calls ran"
        if not self.failed:
            return head
        arg, n = self.failed.most_common(1)[0]
        where = f"argument {arg!r}" if arg else "no argument by name"
        return f"{head}; {sum(self.failed.values())} rejected, {n} naming {where} (e.g. {self.example[arg]})"


_HEALTH: dict = collections.defaultdict(CustomHealth)


def note_custom_call(overload, error: str | None) -> None:
    """Count one drawn call of a user op: ran (``error`` None) or rejected with ``error``."""
    health = _HEALTH[overload]
    health.tried += 1
    if error is None:
        health.ran += 1
        return
    if error.startswith("eager and fake tensors disagree"):
        health.fake += 1
        health.fake_example = health.fake_example or error.split(": ", 1)[-1][:200]
    names = [a.name for a in overload._schema.arguments]
    arg = next((n for n in names if f"'{n}'" in error or f"{n}" in error.split()), "")
    health.failed[arg] += 1
    health.example.setdefault(arg, error.splitlines()[0][:200] if error else "")


def custom_health() -> dict:
    """``{op name: CustomHealth}`` of every user op drawn in this process (a copy)."""
    return {overload_name(overload): dataclasses.replace(health, failed=collections.Counter(health.failed),
                                                        example=dict(health.example))
            for overload, health in _HEALTH.items()}


def custom_health_since(before: dict) -> dict:
    """``custom_health()`` less the counts in ``before`` (an earlier ``custom_health()``): what was
    drawn in between."""
    out = {}
    for name, now in custom_health().items():
        then = before.get(name, CustomHealth())
        diff = CustomHealth(now.tried - then.tried, now.ran - then.ran, now.failed - then.failed, dict(now.example),
                            now.fake - then.fake, now.fake_example)
        if diff.tried:
            out[name] = diff
    return out
