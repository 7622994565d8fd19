"""Static trigger discovery: what the pass's code names, read without running it.

``static_triggers(obj)`` walks the pass object (``_Walker``): its functions' code, closures, defaults
and the globals of its own package, classes and their methods, objects holding passes, and the pattern
table of an Inductor ``PatternMatcherPass``. It collects the ATen ops named there (``code``: by an
``OpOverload`` or packet object, an ``aten.x`` attribute chain or string; ``pattern``: the targets a
pattern table is keyed by), the producer -> consumer pairs of the pattern graphs (``edges``), the ops
the catalog lacks (``missing``) and the numeric constants the code compares values with (not
subscripts, an import's level, or a count compared with ``len(...)``). Ops are named as the catalog
names them (``op_name``, ``packet_name``). ``triggers.py`` confirms and adds to these by running the
pass on probe graphs.
"""

from __future__ import annotations

import dis
import functools
import math
import re
import types

import torch

from strategies import HOPS, custom_rows, rows_named

_MAX_CODE_OBJECTS = 3000
_MAX_CONSTANTS = 12
_ATEN_STRING = re.compile(r"\baten(?:::|\.)([A-Za-z_][A-Za-z0-9_]*)")


def packet_name(op) -> str:
    """``aten.add`` for ``aten.add.Tensor`` or the packet ``aten.add``."""
    name = op._schema.name if isinstance(op, torch._ops.OpOverload) else op._qualified_op_name
    return name.replace("::", ".")


class _Walker:
    """Follows a pass object through code, closures and globals local to its package."""

    def __init__(self, root):
        self.local = _local_prefix(root)
        self.ops: dict = {}  # packet/overload name -> how
        self.edges: dict = {}  # (producer name, consumer name, consumer's argument or None) -> how
        self.missing: dict = {}
        self.constants: list = []
        self.hops: dict = {}  # higher-order ops the generator draws (strategies.HOPS) -> how
        self.seen: set = set()
        self.codes = 0

    def op(self, op, how: str) -> None:
        """Record an OpOverload or packet: the catalog row's name, its packet's, or a missing one."""
        if not isinstance(op, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
            return
        rows = rows_named(op)
        if len(rows) == 1 and isinstance(op, torch._ops.OpOverload):
            self.ops.setdefault(rows[0].name, how)
        elif not rows and custom_rows(op):  # a user's op: not the catalog's, named for verify(ops=)'s focus
            for row in custom_rows(op):
                self.missing.setdefault(row.name, how)
        else:
            self.packet(packet_name(op).removeprefix("aten."), how, aten=packet_name(op).startswith("aten."))

    def packet(self, name: str, how: str, aten: bool = True) -> None:
        if rows_named(f"aten.{name}"):
            self.ops.setdefault(f"aten.{name}", how)
        elif aten and not name.startswith("_") and hasattr(torch.ops.aten, name):
            self.missing.setdefault(f"aten.{name}", how)

    def hop(self, name: str) -> None:
        if name in HOPS:
            self.hops.setdefault(name, "code")

    def constant(self, value) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return
        if abs(value) <= 1e6 and value not in self.constants and len(self.constants) < _MAX_CONSTANTS:
            self.constants.append(value)

    def walk(self, obj, depth: int = 0) -> None:
        if depth > 12 or id(obj) in self.seen or self.codes > _MAX_CODE_OBJECTS:
            return
        self.seen.add(id(obj))
        if isinstance(obj, (int, float)):  # a number in a table the pass reads ({aten.add.Tensor: 0})
            self.constant(obj)
        elif isinstance(obj, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
            self.op(obj, "code")
        elif isinstance(obj, torch._ops.HigherOrderOperator):
            self.hop(obj.name())
        elif isinstance(obj, (list, tuple)):
            for item in obj[:512]:
                self.walk(item, depth + 1)
        elif isinstance(obj, (set, frozenset)):  # sorted: set order varies between processes
            for item in sorted(obj, key=repr)[:512]:
                self.walk(item, depth + 1)
        elif isinstance(obj, dict):
            for k, v in list(obj.items())[:512]:
                self.walk(k, depth + 1)
                self.walk(v, depth + 1)
        elif isinstance(obj, types.CodeType):
            self.code(obj, {}, depth)
        elif isinstance(obj, types.FunctionType):
            self.function(obj, depth)
        elif isinstance(obj, types.MethodType):
            self.walk(obj.__func__, depth + 1)
            self.walk(obj.__self__, depth + 1)
        elif isinstance(obj, functools.partial):
            self.walk(obj.func, depth + 1)
            self.walk(obj.args, depth + 1)
            self.walk(obj.keywords, depth + 1)
        elif isinstance(obj, type):
            for cls in obj.__mro__:  # a subclass's pass code may be its base's (a planted variant)
                if self.is_local(cls):
                    for value in vars(cls).values():
                        self.walk(getattr(value, "__func__", value), depth + 1)
        elif _is_pattern_pass(obj):
            for key, entries in obj.patterns.items():
                self.op(key[1], "pattern")
                for entry in (entries if isinstance(entries, (list, tuple)) else ())[:256]:
                    self.pattern_edges(getattr(entry, "pattern", None), 0)
        elif not isinstance(obj, (str, bytes, int, float, complex, bool, type(None), torch.Tensor, types.ModuleType)):
            if self.is_local(type(obj)) or _is_pass_container(obj):
                self.walk(type(obj), depth + 1)
                for value in list(getattr(obj, "__dict__", {}).values())[:256]:
                    self.walk(value, depth + 1)

    def pattern_edges(self, expr, depth: int) -> None:
        """The producer -> consumer edges of an Inductor pattern graph (``CallFunction(fn, *args)``
        whose args hold further ``CallFunction``s): catalog names, and the consumer's argument the
        producer feeds (its schema name, from the position or keyword it stands at)."""
        if depth > 16 or not hasattr(expr, "fns") or not hasattr(expr, "args"):
            return
        if expr.args and any(isinstance(fn, torch._ops.HigherOrderOperator) for fn in expr.fns):
            self.op(expr.args[0], "pattern")  # auto_functionalized(_v2) over a user's op: the op it wraps
        places = [*((i, arg) for i, arg in enumerate(expr.args)), *getattr(expr, "kwargs", {}).items()]
        for place, arg in places:
            for child in _flat([arg]):
                if not hasattr(child, "fns"):
                    continue
                for fn in expr.fns:
                    consumer = op_name(fn)
                    argument = _argument_name(fn, place)
                    for producer in map(op_name, child.fns):
                        if producer and consumer:
                            self.edges.setdefault((producer, consumer, argument), "pattern")
                self.pattern_edges(child, depth + 1)

    def is_local(self, obj) -> bool:
        module = getattr(obj, "__module__", None) or ""
        return module == self.local or module.startswith(self.local + ".")

    def function(self, fn, depth) -> None:
        if not self.is_local(fn) and depth > 0:
            return
        self.walk(fn.__defaults__ or (), depth + 1)
        self.walk(fn.__kwdefaults__ or {}, depth + 1)
        for cell in fn.__closure__ or ():
            try:
                self.walk(cell.cell_contents, depth + 1)
            except ValueError:  # an empty cell
                pass
        self.code(fn.__code__, fn.__globals__, depth)

    def code(self, code, globals_, depth) -> None:
        self.codes += 1
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                self.code(const, globals_, depth + 1)
            elif isinstance(const, str):
                for name in _ATEN_STRING.findall(const):
                    self.packet(name, "code")
        instructions = list(dis.get_instructions(code))
        for i, ins in enumerate(instructions):  # numbers by their uses: node.args[2] names no scalar
            if ins.opname in _LOAD_CONST and not _is_index(instructions, i) and not _is_count(instructions, i):
                for c in ins.argval if isinstance(ins.argval, (tuple, frozenset)) else (ins.argval,):
                    self.constant(c)
        chain: list = []
        for ins in instructions:
            if ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and chain:
                chain.append(ins.argval)
                continue
            self.chain(chain, globals_)
            chain = [ins.argval] if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_FAST") else []
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and ins.argval in globals_:
                value = globals_[ins.argval]
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    self.constant(value)
                elif not isinstance(value, types.ModuleType):
                    self.walk(value, depth + 1)
        self.chain(chain, globals_)

    def chain(self, chain: list, globals_) -> None:
        """``torch.ops.aten.mm.default``, ``aten.mm``, ``ops.aten.add``: the name after ``aten``."""
        if len(chain) < 2:
            return
        names = [str(n) for n in chain]
        head = globals_.get(names[0])
        if "higher_order" in names[:-1]:  # torch.ops.higher_order.cond
            self.hop(names[names.index("higher_order") + 1])
        elif isinstance(head, torch._ops._HigherOrderNamespace):  # hop = torch.ops.higher_order; hop.cond
            self.hop(names[1])
        elif "aten" in names[:-1]:
            self.dotted(names[names.index("aten") + 1:])
        elif isinstance(head, torch._ops._OpNamespace) and head.name == "aten":
            self.dotted(names[1:])
        elif isinstance(head, torch._ops.OpOverloadPacket):
            self.op(head, "code")
        else:  # a user's op: torch.ops.mylib.rms_norm.default, mylib.rms_norm (mylib = torch.ops.mylib)
            self.user_op(head, names)

    def user_op(self, head, names: list) -> None:
        """The op an attribute chain from ``torch``, ``torch.ops`` or an op namespace reaches, where it
        is a user's (``custom_rows``); attributes are read only on those objects."""
        namespaces = (torch._ops._Ops, torch._ops._OpNamespace, torch._ops.OpOverloadPacket)
        obj = head
        for name in names[1:5]:
            if obj is torch and name == "ops":
                obj = torch.ops
                continue
            if not isinstance(obj, namespaces):
                break
            try:
                obj = getattr(obj, name)
            except (AttributeError, RuntimeError):
                return
        if isinstance(obj, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)) and custom_rows(obj):
            self.op(obj, "code")

    def dotted(self, names: list) -> None:
        """``[packet, overload?, ...]`` after ``aten``: the overload's row where the catalog has it."""
        overload = f"aten.{names[0]}.{names[1]}" if len(names) > 1 else None
        if overload and len(rows_named(overload)) == 1:
            self.ops.setdefault(overload, "code")
        else:
            self.packet(names[0], "code")


_LOAD_CONST = ("LOAD_CONST", "LOAD_SMALL_INT", "RETURN_CONST")
_INDEXING = ("BINARY_SUBSCR", "STORE_SUBSCR", "DELETE_SUBSCR", "BUILD_SLICE", "BINARY_SLICE", "STORE_SLICE")


def _is_index(instructions: list, i: int) -> bool:
    """Whether the constant loaded at ``instructions[i]`` is a subscript or slice bound
    (``node.args[1]``, ``args[:2]``): the loads of one subscript run straight into the indexing op."""
    j = i + 1
    while j < len(instructions) and instructions[j].opname in _LOAD_CONST:
        j += 1
    if j == len(instructions):
        return False
    nxt = instructions[j]
    return (nxt.opname in _INDEXING or (nxt.opname == "BINARY_OP" and nxt.argrepr == "[]")  # 3.14: subscript
            or nxt.opname == "IMPORT_NAME")  # a function's ``import x``: its level (0), no number of the pass


# What may stand between ``len`` and its call in ``len(node.args)`` / ``len(n.users)``: names and attributes
_OPERAND_LOADS = ("LOAD_FAST", "LOAD_DEREF", "LOAD_GLOBAL", "LOAD_NAME", "LOAD_ATTR", "LOAD_METHOD",
                  "LOAD_FAST_BORROW", "LOAD_FAST_LOAD_FAST", "PRECALL", "PUSH_NULL")


def _is_count(instructions: list, i: int) -> bool:
    """Whether the constant loaded at ``instructions[i]`` is compared with a ``len(...)`` of names and
    attributes (``len(node.args) < 2``, ``len(n.users) == 1``): how many arguments or readers a node
    has, no scalar a graph's call could hold."""
    if not 0 < i < len(instructions) - 1 or instructions[i + 1].opname != "COMPARE_OP" \
            or instructions[i - 1].opname != "CALL":
        return False
    j = i - 2
    while j >= 0 and instructions[j].opname in _OPERAND_LOADS and instructions[j].argval != "len":
        j -= 1
    return j >= 0 and instructions[j].opname in ("LOAD_GLOBAL", "LOAD_NAME") and instructions[j].argval == "len"


def _flat(items) -> list:
    out = []
    for item in items:
        out.extend(_flat(item) if isinstance(item, (list, tuple)) else [item])
    return out


def _argument_name(fn, place) -> str | None:
    """The schema name of ``fn``'s argument at ``place`` (a position, or a keyword as given)."""
    if isinstance(place, str):
        return place
    schema = getattr(fn, "_schema", None)
    if schema is None and isinstance(fn, torch._ops.OpOverloadPacket):
        schema = fn.default._schema if hasattr(fn, "default") else None
    names = [a.name for a in schema.arguments] if schema is not None else []
    return names[place] if place < len(names) else None


def op_name(op) -> str | None:
    """The catalog name of an op: its row's where one row has it, else its packet's (None where the
    catalog has neither)."""
    if not isinstance(op, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return None
    rows = rows_named(op)
    if len(rows) == 1:
        return rows[0].name
    return packet_name(op) if rows else None


def _local_prefix(obj) -> str:
    target = obj
    if not isinstance(obj, (types.FunctionType, type, types.MethodType, functools.partial)):
        target = type(obj)
    module = getattr(target, "__module__", None) or getattr(getattr(target, "func", None), "__module__", "") or ""
    return module.rsplit(".", 1)[0] if "." in module else module


def _is_pattern_pass(obj) -> bool:
    patterns = getattr(obj, "patterns", None)
    return isinstance(patterns, dict) and all(isinstance(k, tuple) and len(k) == 2 for k in list(patterns)[:8])


def _is_pass_container(obj) -> bool:
    """torch's PassManagers and the like: objects holding a list of passes."""
    return isinstance(getattr(obj, "passes", None), (list, tuple))


def static_triggers(obj) -> _Walker:
    walker = _Walker(obj)
    walker.walk(obj)
    return walker


__all__ = ["op_name", "packet_name", "static_triggers"]
