"""What the reference passes need to know about a graph before they touch it: which nodes may share
storage, which nodes write to storage (values or metadata), and which nodes are pure.

Storage classes are a union-find over nodes, from op schemas: an op whose return carries alias
info (``Tensor(a)``) shares the class of its aliased arguments; an argument marked ``(a!)`` is
written. Every approximation errs the same way, towards bigger classes and more writes, which only
makes a pass do less: all placeholders form one class (a caller may pass views of one tensor),
constants are grouped by real storage, an op this module does not understand (not an ATen
OpOverload) is assumed to alias and write every tensor it is given.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

import torch
import torch.fx as fx
from torch._ops import OpOverload

_INPUTS = "inputs"  # the one class all placeholders share


def schema_of(node: fx.Node):
    """The ATen schema of a call_function node, or None for anything else."""
    if node.op == "call_function" and isinstance(node.target, OpOverload):
        return node.target._schema
    return None


def has_tag(node: fx.Node, tag) -> bool:
    return isinstance(node.target, OpOverload) and tag in node.target.tags


def is_pure(node: fx.Node) -> bool:
    """An ATen op (or getitem) that writes nothing, draws no random numbers and has no side effect,
    so it may be removed when unused or computed once for equal arguments."""
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return True
    schema = schema_of(node)
    if schema is None or schema.is_mutable or has_tag(node, torch.Tag.nondeterministic_seeded):
        return False
    try:
        return not node.is_impure()
    except Exception:  # noqa: BLE001 - torch's purity check needs an owning module; unknown = impure
        return False


def returns_alias(node: fx.Node) -> bool:
    """The node's result may share storage with one of its arguments (a view, or an in-place op)."""
    schema = schema_of(node)
    if schema is None:
        return node.op != "placeholder" and node.op != "get_attr"
    return any(r.alias_info is not None for r in schema.returns)


def tensor_nodes(obj) -> list:
    """The fx.Nodes inside an argument (lists and tuples flattened)."""
    if isinstance(obj, fx.Node):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [n for item in obj for n in tensor_nodes(item)]
    if isinstance(obj, dict):
        return [n for item in obj.values() for n in tensor_nodes(item)]
    return []


def _schema_args(node: fx.Node, schema):
    """(argument schema, value) pairs for a call's positional and keyword arguments."""
    for i, arg in enumerate(schema.arguments):
        if arg.kwarg_only or i >= len(node.args):
            if arg.name in node.kwargs:
                yield arg, node.kwargs[arg.name]
        else:
            yield arg, node.args[i]


@dataclass
class StorageInfo:
    """Storage classes of a graph. ``cls[node]`` is the class id of the node's result."""

    cls: dict = field(default_factory=dict)
    external: set = field(default_factory=set)  # classes holding graph inputs or constants
    writes: dict = field(default_factory=dict)  # node -> classes it writes (values or metadata)
    escaping: set = field(default_factory=set)  # classes an output shares

    def classes_of(self, obj) -> set:
        return {self.cls[n] for n in tensor_nodes(obj) if n in self.cls}

    @property
    def written(self) -> set:
        return set().union(*self.writes.values()) if self.writes else set()


class UnionFind:
    def __init__(self):
        self.parent = {}

    def find(self, x):
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def attr_of(module: torch.nn.Module, target: str):
    """The attribute a ``get_attr``/``call_module`` target names (dotted paths too), or None."""
    try:
        return operator.attrgetter(target)(module)
    except AttributeError:
        return None


def _constant_key(gm: fx.GraphModule, target: str):
    value = attr_of(gm, target)
    if value is None:
        return ("missing", target)
    if isinstance(value, torch.Tensor):
        storage = value.untyped_storage()
        return ("storage", storage.device.type, storage.data_ptr()) if storage.nbytes() else ("empty", target)
    return ("attr", target)


# Ops whose result shares ``self``'s storage though their schema promises a new tensor: eager's
# ``_unsafe_view`` is always a view, ``type_as`` returns ``self`` itself when the dtype matches. A
# write through such a result is a write to ``self``'s storage (a DCE that missed it dropped one).
ALIAS_DESPITE_SCHEMA = frozenset({torch.ops.aten._unsafe_view.default, torch.ops.aten.type_as.default})


def analyze(gm: fx.GraphModule) -> StorageInfo:
    """Storage classes, writes and escaping classes of ``gm``'s graph (see the module docstring)."""
    uf = UnionFind()
    raw_writes = {}
    external_keys = set()
    output = None
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            uf.union(_INPUTS, node)
            external_keys.add(_INPUTS)
        elif node.op == "get_attr":
            key = _constant_key(gm, node.target)
            uf.union(key, node)
            external_keys.add(key)
        elif node.op == "output":
            output = node
        elif node.target is operator.getitem and isinstance(node.args[0], fx.Node):
            uf.union(node.args[0], node)
        else:
            schema = schema_of(node)
            if schema is None:  # not understood: may alias and write all it is given
                args = tensor_nodes((node.args, node.kwargs))
                for a in args:
                    uf.union(a, node)
                raw_writes[node] = args
                continue
            aliasing = any(r.alias_info is not None for r in schema.returns) or node.target in ALIAS_DESPITE_SCHEMA
            written = []
            for arg, value in _schema_args(node, schema):
                if arg.alias_info is None and not (node.target in ALIAS_DESPITE_SCHEMA and arg.name == "self"):
                    continue
                for a in tensor_nodes(value):
                    if aliasing:
                        uf.union(a, node)
                    if arg.alias_info is not None and arg.alias_info.is_write:
                        written.append(a)
            if written:
                raw_writes[node] = written
    info = StorageInfo()
    for node in gm.graph.nodes:
        if node.op != "output":
            info.cls[node] = uf.find(node)
    info.external = {uf.find(k) for k in external_keys}
    info.writes = {n: {uf.find(a) for a in args} for n, args in raw_writes.items()}
    if output is not None:
        info.escaping = info.classes_of(output.args)
    return info


def reshaped_classes(gm: fx.GraphModule, info: StorageInfo) -> set:
    """Storage classes whose tensors may have their metadata changed in place (``transpose_``,
    ``as_strided_``, ...): there, two tensor objects of one storage are not interchangeable."""
    found = set()
    for node in gm.graph.nodes:
        # detach_ is tagged inplace_view but changes only autograd state, never size/stride/offset.
        if (node.op == "call_function" and has_tag(node, torch.Tag.inplace_view)
                and node.target is not torch.ops.aten.detach_.default):
            found |= info.classes_of(node.args[:1])
        elif node in info.writes and schema_of(node) is None:
            found |= info.writes[node]  # an op not understood may do anything to what it is given
    return found


def output_node(graph: fx.Graph) -> fx.Node:
    return next(n for n in reversed(graph.nodes) if n.op == "output")


def finish(gm: fx.GraphModule) -> fx.GraphModule:
    """Every reference pass ends here: the graph linted, the code regenerated."""
    gm.graph.lint()
    gm.recompile()
    return gm
