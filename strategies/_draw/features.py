"""Which features a graph really has, read off the graph and one recorded eager run.

Features are measured, not remembered from the drawing: a case is tagged ``view-mutation`` only if
a write through a view node really hits storage that a later node reads.
"""

from __future__ import annotations

import torch
import torch.fx as fx

from .._catalog import vocabulary as C
from .._build.builder import set_grad_enabled, storage_key
from .._build.device import RNG_SEED, device_of, seeded
from .._build.modes import modes_kept
from .._catalog.ops import OPS

FEATURES = (
    "view", "broadcast", "non-contiguous", "scalar-arg", "kwarg", "constant", "multiple-outputs",
    "input-as-output", "dead-code", "duplicate-subexpression", "reduction", "special-values",
    "inplace", "input-mutation", "view-mutation", "metadata-mutation", "grad-region", "requires-grad",
    "autocast-region",
)
MUTATION_FEATURES = frozenset({"inplace", "input-mutation", "view-mutation", "metadata-mutation", "grad-region"})

_ROW = {row.overload: row for row in OPS}
_GRAD_HOP = torch.ops.higher_order.wrap_with_set_grad_enabled
# an autocast region: as drawn (aten) and as pre-dispatch outlines it
_AUTOCAST = (torch.amp.autocast_mode._enter_autocast, torch.ops.higher_order.wrap_with_autocast)
# In-place ops that change shape/strides rather than values, for targets outside the catalog.
_METADATA_MUTATORS = frozenset({"transpose_", "t_", "unsqueeze_", "squeeze_", "as_strided_", "swapdims_",
                                "swapaxes_", "resize_", "resize_as_", "set_"})


def _packet_name(target) -> str:
    schema = getattr(target, "_schema", None)
    return schema.name.split("::")[-1] if schema is not None else getattr(target, "__name__", "")


def is_mutating(target) -> bool:
    schema = getattr(target, "_schema", None)
    return bool(schema) and any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)


def is_view(target) -> bool:
    schema = getattr(target, "_schema", None)
    if not schema or is_mutating(target) or not schema.returns:
        return False
    info = schema.returns[0].alias_info
    return info is not None and not info.is_write


def _is_pointwise(target) -> bool:
    row = _ROW.get(target)
    if row is not None:
        return row.category in (C.POINTWISE, C.INPLACE) and not row.mutates_metadata
    return torch.Tag.pointwise in getattr(target, "tags", ())


def _has_special(t: torch.Tensor) -> bool:
    """NaN, an infinity, -0.0, a subnormal, or a magnitude near the dtype's maximum."""
    if not t.is_floating_point() or t.numel() == 0:
        return False
    fi = torch.finfo(t.dtype)
    w = t.double()
    return bool((~torch.isfinite(w)).any()
                or ((w == 0) & torch.signbit(w)).any()
                or ((w != 0) & (w.abs() < fi.smallest_normal)).any()
                or (torch.isfinite(w) & (w.abs() >= fi.max / 4)).any())


class _Recorder(fx.Interpreter):
    def __init__(self, gm):
        # every value is kept alive: a freed tensor's storage address could come back for a later one
        super().__init__(gm, garbage_collect_values=False)
        self.record: dict = {}

    def run_node(self, n):
        out = super().run_node(n)
        if isinstance(out, torch.Tensor):
            self.record[n] = (storage_key(out), tuple(out.shape))
        return out


def graph_features(gm: fx.GraphModule, inputs, record: dict | None = None) -> frozenset:
    """The feature names (``strategies.FEATURES``) present in ``gm`` run on ``inputs``.

    ``record``: what a run of ``gm`` on ``inputs`` gave, ``{node: (storage_key, shape)}`` for every
    node with a tensor result, all of them alive together (the builder's, which ran every node as it
    was drawn); ``inputs`` are then only read. Without it ``gm`` is run, and ``inputs`` are consumed
    (the graph may mutate them).
    """
    nodes = list(gm.graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    constants = [n for n in nodes if n.op == "get_attr" and isinstance(getattr(gm, n.target), torch.Tensor)]
    leaf_tensors = list(inputs) + [getattr(gm, n.target) for n in constants]  # not a subgraph's module
    found: set = set()
    if any(not t.is_contiguous() for t in leaf_tensors):
        found.add("non-contiguous")
    if any(_has_special(t) for t in leaf_tensors):
        found.add("special-values")
    if constants:
        found.add("constant")
    if any(isinstance(t, torch.Tensor) and t.requires_grad for t in leaf_tensors):
        found.add("requires-grad")  # an input or a constant (an nn.Parameter) is a leaf that requires grad

    if record is None:
        rec = _Recorder(gm)
        # on exit no_grad restores the caller's grad mode, whatever the graph set; random ops draw
        # what they drew while the graph was built, and the caller's generator is left as it was
        with modes_kept(), torch.no_grad(), seeded(device_of(inputs), RNG_SEED):
            rec.run(*inputs)
        record = rec.record
    stores = {n: record.get(n, (None, None))[0] for n in nodes}
    input_stores = {stores[n] for n in placeholders} - {None}
    const_stores = {stores[n] for n in constants} - {None}

    out_node = nodes[-1]
    outputs = list(_flatten(out_node.args[0])) if out_node.op == "output" else []
    if len(outputs) > 1:
        found.add("multiple-outputs")
    if any(n.op == "placeholder" for n in outputs):
        found.add("input-as-output")

    seen_exprs: set = set()
    position = {n: i for i, n in enumerate(nodes)}
    for n in nodes:
        if n.op != "call_function":
            continue
        t = n.target
        if t is set_grad_enabled or t is _GRAD_HOP:
            if n.args and n.args[0] is False:
                found.add("grad-region")
            continue
        if t in _AUTOCAST:
            found.add("autocast-region")
            continue
        if n.kwargs:
            found.add("kwarg")
        if is_view(t):
            found.add("view")
        row = _ROW.get(t)
        if row is not None and row.category == C.REDUCTION:
            found.add("reduction")
        if _scalar_operand(n):
            found.add("scalar-arg")
        if _is_pointwise(t):
            out_shape = record.get(n, (None, None))[1]
            if any(record.get(a, (None, None))[1] not in (None, out_shape)
                   for a in n.all_input_nodes):
                found.add("broadcast")
        mutating = is_mutating(t)
        if not mutating:
            key = (t, _key(n.args), _key(n.kwargs))
            if key in seen_exprs:
                found.add("duplicate-subexpression")
            seen_exprs.add(key)
            if not n.users:
                found.add("dead-code")
            continue
        written = n.args[0]
        store = stores.get(written)
        metadata = row.mutates_metadata if row is not None else _packet_name(t) in _METADATA_MUTATORS
        if metadata:
            found.add("metadata-mutation")
            if written.op == "placeholder":
                found.add("input-mutation")
            continue
        if store in input_stores:
            found.add("input-mutation")
        elif store is not None and store not in const_stores:
            found.add("inplace")
        if store is not None and written.op == "call_function" and is_view(written.target):
            if _base_read_later(nodes[position[n] + 1:], {written, n}, store, stores):
                found.add("view-mutation")
    return frozenset(found)


def _base_read_later(later_nodes, through_view: set, store, stores) -> bool:
    """Whether a later node reads the written storage other than through the written view
    (or an in-place op's result on it, which is the same view)."""
    for m in later_nodes:
        if m.op == "call_function" and is_mutating(m.target) and m.args and m.args[0] in through_view:
            through_view.add(m)
            continue
        if any(a not in through_view and stores.get(a) == store for a in m.all_input_nodes):
            return True
    return False


def _flatten(obj):
    if isinstance(obj, fx.Node):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for o in obj:
            yield from _flatten(o)


def _key(obj):
    if isinstance(obj, (list, tuple)):
        return tuple(_key(o) for o in obj)
    if isinstance(obj, dict):
        return tuple(sorted((k, _key(v)) for k, v in obj.items()))
    if isinstance(obj, float):
        return (float, repr(obj))  # 0.0 and -0.0 differ, nan equals nan
    return obj


def _scalar_operand(n: fx.Node) -> bool:
    schema = getattr(n.target, "_schema", None)
    if schema is None:
        return False
    for arg, value in zip(schema.arguments, n.args):
        if isinstance(value, (bool, int, float)) and isinstance(arg.type, (torch.NumberType, torch.TensorType)):
            return True
    return False
