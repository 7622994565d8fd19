"""A graph and its example inputs as Python source: the parts a repro script is made of.

``graph_source`` writes a graph as plain ``torch.fx`` calls (``def build_graph()``: no pickles, no
meta; targets by import path, constants as exact literals), ``inputs_source`` the inputs (``def
make_inputs()``: bit-exact values with their sizes, strides, storage offsets and aliasing), and
``literal`` one value. What has no source spelling (a lambda target, a quantized tensor) is a
HarnessError that names it.

>>> import torch, torch.fx as fx
>>> g = fx.Graph(); x = g.placeholder("x"); _ = g.output(g.call_function(torch.ops.aten.neg.default, (x,)))
>>> print(graph_source(fx.GraphModule(torch.nn.Module(), g)).splitlines()[5])
    neg_default = g.call_function(torch.ops.aten.neg.default, (x,))
"""

from __future__ import annotations

import keyword
import math
import re
import sys

import torch
import torch.fx as fx

from strategies._catalog.custom import defining_function

from ._errors import HarnessError
from .copies import attr_or_none

WIDTH = 100  # longest line of a wrapped literal
_PRELOADED = {"torch", "torch._C", "torch.ops", "operator", "builtins"}  # the script imports these
_RESERVED = {"g", "root", "fx", "torch", "operator", "nan", "inf", "slice"}  # names node variables avoid
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}  # same-size int views
# Where a callable is looked up by name when its __module__ does not lead to it (C functions).
_NAMESPACES = ("operator", "builtins", "torch", "torch.Tensor", "torch.nn.functional", "torch.special",
               "torch.linalg", "torch.fft", "math")
# Op namespaces a fresh process has only after importing the module that registers them.
_REGISTERED_BY = {"quantized_decomposed": "torch.ao.quantization.fx._decomposed"}


class _Unrenderable(Exception):
    """A value has no source spelling; the caller adds which node or input it belongs to."""


# --- literals ------------------------------------------------------------------------------------


def _float(x: float) -> str:
    if math.isnan(x):
        return "-nan" if math.copysign(1.0, x) < 0 else "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(x)  # shortest repr round-trips exactly, -0.0 included


def _str(s: str) -> str:
    r = repr(s)
    return f'"{r[1:-1]}"' if r[0] == "'" and '"' not in s else r


def _torch_constant(value) -> str:
    text = str(value)  # "torch.float16", "torch.contiguous_format", "torch.strided"
    if getattr(torch, text.removeprefix("torch."), None) is not value:
        raise _Unrenderable(f"{type(value).__name__} {value!r} is not an attribute of torch")
    return text


def _literal(value, names: dict) -> str:
    """Source that evaluates to ``value``; fx Nodes become the variables in ``names``."""
    if isinstance(value, fx.Node):
        return names[value]
    if value is None or value is ... or isinstance(value, bool) or type(value) is int:
        return repr(value)
    if type(value) is float:
        return _float(value)
    if type(value) is str:
        return _str(value)
    if isinstance(value, (torch.dtype, torch.memory_format, torch.layout)):
        return _torch_constant(value)
    if isinstance(value, torch.device):
        return f"torch.device({_str(str(value))})"
    if isinstance(value, slice):
        return f"slice({', '.join(_literal(v, names) for v in (value.start, value.stop, value.step))})"
    if isinstance(value, list):  # fx's immutable_list included: the graph stores it as a list
        return f"[{', '.join(_literal(v, names) for v in value)}]"
    if type(value) is tuple:
        items = [_literal(v, names) for v in value]
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_literal(k, names)}: {_literal(v, names)}" for k, v in value.items()) + "}"
    if isinstance(value, torch._ops.OpOverload):  # a higher-order op's wrapped op (auto_functionalized_v2's)
        return _overload_path(value)
    raise _Unrenderable(f"{type(value).__name__} value {value!r} has no literal spelling")


def literal(value, what: str) -> str:
    """Source that evaluates to ``value`` (numbers exactly, NaN and infinities, strings, torch dtypes
    and devices, slices, and lists, tuples and dicts of them); a HarnessError naming ``what`` where
    it has none.

    >>> literal({"specials": "relaxed", "atol": float("inf")}, "the options")
    '{"specials": "relaxed", "atol": inf}'
    """
    try:
        return _literal(value, {})
    except _Unrenderable as exc:
        raise HarnessError(f"cannot write {what} as source: {exc}") from None


def _wrap(prefix: str, tokens: list, suffix: str, indent: str) -> list:
    """``prefix[t0, t1, ...]suffix`` on one line, or the tokens wrapped at WIDTH between them."""
    one = f"{indent}{prefix}[{', '.join(tokens)}]{suffix}"
    if len(one) <= WIDTH:
        return [one]
    lines, line, inner = [f"{indent}{prefix}["], "", indent + "    "
    for tok in tokens:
        if line and len(inner) + len(line) + len(tok) + 2 > WIDTH:
            lines.append(inner + line.rstrip())
            line = ""
        line += tok + ", "
    lines.append(inner + line.rstrip().rstrip(","))
    return lines + [f"{indent}]{suffix}"]


# --- tensors -------------------------------------------------------------------------------------


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(_BITS[t.element_size()]) if t.element_size() in _BITS and t.dtype is not torch.bool else t


def _device(t: torch.Tensor) -> str:
    return "" if t.device.type == "cpu" else f", device={_str(str(t.device))}"


def _spells_exactly(values: list, flat: torch.Tensor) -> bool:
    """Whether ``torch.tensor(values)`` is ``flat`` bit for bit (NaN payloads other than +-nan are not)."""
    try:
        return torch.equal(_bits(torch.tensor(values, dtype=flat.dtype)), _bits(flat))
    except (RuntimeError, TypeError, ValueError, OverflowError):
        return False


def _base_lines(name: str, t: torch.Tensor, indent: str) -> list:
    """``name = torch.tensor([...])``: every element of ``t``'s storage, flat, exactly."""
    flat = t.detach().as_strided((t.untyped_storage().nbytes() // t.element_size(),), (1,), 0).cpu()
    if flat.is_floating_point():  # widening to float64 is exact, and float(_float(x)) is x
        tokens = [_float(v) for v in flat.to(torch.float64).tolist()]
        values = [float(tok) for tok in tokens]
    else:
        values = flat.tolist()
        tokens = [repr(v) for v in values]
    if not flat.is_complex() and _spells_exactly(values, flat):
        suffix = f", dtype={_torch_constant(t.dtype)}{_device(t)})"
        return _wrap(f"{name} = torch.tensor(", tokens, suffix, indent)
    # A NaN payload, a complex dtype, or one torch.tensor cannot fill from Python numbers: bits.
    ints = _BITS.get(t.element_size(), torch.int64)
    tokens = [repr(v) for v in flat.view(ints).tolist()]
    suffix = f", dtype={_torch_constant(ints)}{_device(t)}).view({_torch_constant(t.dtype)})"
    return [f"{indent}# bit patterns: these values have no exact float literal"] + _wrap(
        f"{name} = torch.tensor(", tokens, suffix, indent)


def _values_source(values, prefix: str, indent: str) -> tuple:
    """(lines defining one flat base per storage, one expression per value) for ``values``.

    Tensors that share a storage are views of one base, so aliasing survives the round-trip.
    """
    lines, exprs, bases = [], [], {}
    for v in values:
        if not isinstance(v, torch.Tensor):
            exprs.append(_literal(v, {}))
            continue
        if type(v) not in (torch.Tensor, torch.nn.Parameter) or v.layout is not torch.strided \
                or v.is_quantized or v.device.type == "meta":
            raise _Unrenderable(f"{type(v).__name__} ({v.layout}, {v.device}) has no readable values; "
                                "pass real strided tensors")
        geometry = f"{tuple(v.shape)!r}, {v.stride()!r}, {v.storage_offset()}"
        storage = v.untyped_storage()
        if storage.nbytes() == 0:
            expr = f"torch.empty(0, dtype={_torch_constant(v.dtype)}{_device(v)}).as_strided({geometry})"
        else:
            if storage.nbytes() % v.element_size():
                raise _Unrenderable(f"a {v.dtype} view of a {storage.nbytes()}-byte storage")
            key = (v.device, storage.data_ptr())
            if key not in bases:
                bases[key] = (f"{prefix}{len(bases)}", v.dtype)
                lines += _base_lines(bases[key][0], v, indent)
            name, dtype = bases[key]
            view = name if v.dtype == dtype else f"{name}.view({_torch_constant(v.dtype)})"
            expr = f"{view}.as_strided({geometry})"
        exprs.append(expr + (".requires_grad_()" if v.requires_grad else ""))
    return lines, exprs


def inputs_source(inputs: tuple) -> str:
    """Source of ``def make_inputs() -> tuple:`` returning fresh copies of ``inputs``.

    Copies are bit-exact (NaN, +-inf, -0.0, subnormals, every dtype) with the same sizes, strides
    and storage offsets, and inputs that share a storage share one in the copies too.

    >>> print(inputs_source((torch.tensor([1.5, -0.0]),)).splitlines()[2])
        base0 = torch.tensor([1.5, -0.0], dtype=torch.float32)
    """
    try:
        lines, exprs = _values_source(tuple(inputs), "base", "    ")
    except _Unrenderable as exc:
        raise HarnessError(f"cannot write the example inputs as source: {exc}") from None
    returned = ["    return (", *(f"        {e}," for e in exprs), "    )"] if exprs else ["    return ()"]
    doc = '    """Fresh copies of the example inputs: exact values, strides, offsets and aliasing."""'
    return "\n".join(["def make_inputs() -> tuple:", doc, *lines, *returned]) + "\n"


# --- graphs --------------------------------------------------------------------------------------


def _resolve(path: str):
    """(module, object) at dotted ``path``, through modules already imported; (None, None) if none."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        obj = sys.modules.get(".".join(parts[:i]))
        if obj is not None:
            for attr in parts[i:]:
                obj = getattr(obj, attr, None)
            return ".".join(parts[:i]), obj
    return None, None


def _registering_module(op) -> str | None:
    """The module a fresh process must import for ``op`` to exist: torch's own for its registered
    namespaces, the defining module of a user's ``torch.library.custom_op``; None where unknown (an
    op registered from C++ or ``__main__``: the script then runs only where something registers it)."""
    if op.namespace in _REGISTERED_BY:
        return _REGISTERED_BY[op.namespace]
    module = getattr(defining_function(op), "__module__", None)
    return module if module and module != "__main__" and not module.startswith("torch") else None


def _overload_path(op) -> str:
    return f"torch.ops.{op.namespace}.{op.overloadpacket.__name__}.{op._overloadname}"


def _candidate_paths(fn):
    name, module, qualname = (getattr(fn, a, None) for a in ("__name__", "__module__", "__qualname__"))
    if isinstance(fn, torch._ops.OpOverload):
        yield _overload_path(fn)
    elif isinstance(fn, torch._ops.OpOverloadPacket):
        yield "torch.ops." + fn._qualified_op_name.replace("::", ".")
    elif isinstance(fn, torch._ops.HigherOrderOperator):
        yield f"torch.ops.{fn.namespace}.{name}"
    if isinstance(name, str):
        yield from (f"{ns}.{name}" for ns in _NAMESPACES)
    if isinstance(module, str) and isinstance(qualname, str) and module != "__main__":
        yield f"{module}.{qualname}"


def _callable(fn, imports: set, reserved: set) -> str:
    """``torch.ops.aten.add.Tensor``, ``operator.getitem``, ``len``, ``mypkg.mod.fn`` (import noted)."""
    for path in _candidate_paths(fn):
        module, obj = _resolve(path)
        if obj is fn and module == "builtins":
            reserved.add(fn.__name__)
            return fn.__name__
        if obj is fn:
            if module not in _PRELOADED:
                imports.add(module)
                reserved.add(module.split(".")[0])
            registering = _registering_module(fn) if isinstance(fn, torch._ops.OpOverload) else None
            if registering:
                imports.add(registering)
            return path
    raise _Unrenderable(f"the target {fn!r} is not importable by name (a lambda, a local or __main__ "
                        "function?); use a module-level function or a torch.ops overload")


def _variables(nodes: list, reserved: set) -> dict:
    names, used = {}, set(reserved)
    for node in nodes:
        var = re.sub(r"\W", "_", node.name, flags=re.ASCII) or "_"
        var = f"_{var}" if var[0].isdigit() else var
        while var in used or keyword.iskeyword(var):
            var += "_"
        used.add(var)
        names[node] = var
    return names


def _explicit_names(nodes: list) -> set:
    """Nodes whose name is not the one fx gives them when rebuilt in order (they get ``name=``).

    Replays the rebuild on a scratch graph, restarting after each mismatch: after a pass erased
    nodes, names such as ``add_3`` need it, and the other nodes stay uncluttered.
    """
    explicit: set = set()
    while True:
        scratch = fx.Graph()
        for node in nodes:
            made = scratch.create_node(node.op, node.target, name=node.name if node in explicit else None)
            if made.name != node.name:
                if node in explicit:  # fx will not hand out this name at all: keep its choice
                    return explicit
                explicit.add(node)
                break
        else:
            return explicit


def _node_error(node: fx.Node, reason) -> HarnessError:
    return HarnessError(f"cannot write node {node.name!r} ({node.op} {node.target!r}) as source: {reason}")


def graph_parts(gm: fx.GraphModule, function: str = "build_graph") -> tuple:
    """(modules to import, source of ``function``, a ``def`` building ``gm``) for ``gm``. A
    higher-order op's subgraphs (``cond``'s branches, fetched by ``get_attr``) get a ``def`` each,
    written first, whose modules the graph's root holds under their names."""
    nodes, imports, reserved, rendered = list(gm.graph.nodes), set(), set(_RESERVED), {}
    for node in nodes:  # targets first: the modules they import are names node variables avoid
        try:
            if node.op == "call_module" and not _is_export_guard(gm, node):
                raise _Unrenderable("call_module is not supported; inline submodules first "
                                    "(make_fx or torch.export give call_function graphs)")
            if node.op == "call_function":
                rendered[node] = _callable(node.target, imports, reserved)
                for arg in (*node.args, *node.kwargs.values()):  # a higher-order op's wrapped op
                    if isinstance(arg, torch._ops.OpOverload):
                        _callable(arg, imports, reserved)
            if node.type is not None:
                rendered[node, "type"] = _callable(node.type, imports, reserved)
        except _Unrenderable as exc:
            raise _node_error(node, exc) from None
    fetched = list(dict.fromkeys(n.target for n in nodes if n.op == "get_attr"))
    subgraphs = [t for t in fetched if isinstance(attr_or_none(gm, t), fx.GraphModule)]
    for target in subgraphs:
        if "." in target:
            raise _node_error(next(n for n in nodes if n.target == target), "a subgraph held by a submodule "
                                                                             "is not supported")
    buffers = [t for t in fetched if t not in subgraphs]
    names = _variables(nodes, reserved | {f"const{i}" for i in range(len(buffers))})
    explicit = _explicit_names(nodes)
    guards = list(dict.fromkeys(n.target for n in nodes if n.op == "call_module"))
    defs, builders = [], {}
    for target in subgraphs:
        builders[target] = f"{function}__{re.sub(r'[^0-9a-zA-Z_]', '_', target)}"
        sub_imports, sub_source = graph_parts(attr_or_none(gm, target), builders[target])
        imports.update(sub_imports)
        defs.append(sub_source + "\n\n")
    doc = "The graph the pass was given" if function == "build_graph" else "A subgraph of it"
    out = [f"def {function}() -> fx.GraphModule:",
           f'    """{doc}, node for node (meta is re-attached by the harness)."""',
           "    root = torch.nn.Module()", *_buffer_lines(gm, buffers, nodes),
           *(f"    root.add_module({_str(t)}, ExportGuards())" for t in guards),
           *(f"    root.add_module({_str(t)}, {builders[t]}())" for t in subgraphs), "    g = fx.Graph()"]
    for node in nodes:
        try:
            out.append("    " + _node_line(node, names, rendered, node in explicit))
        except _Unrenderable as exc:
            raise _node_error(node, exc) from None
    prelude = (_GUARDS if guards and function == "build_graph" else "") + "".join(defs)
    return sorted(imports), prelude + "\n".join([*out, "    return fx.GraphModule(root, g)"]) + "\n"


_GUARDS = '''class ExportGuards(torch.nn.Module):
    """``ExportedProgram.module()``'s ``_guards_fn``: it asserts the input sizes the export saw, which
    these inputs have; here it checks nothing."""

    def forward(self, *args):
        return None


'''


def _is_export_guard(gm: fx.GraphModule, node: fx.Node) -> bool:
    """The ``_guards_fn`` call of an ``ExportedProgram.module()`` graph (``ir="export-module"``)."""
    try:
        module = gm.get_submodule(node.target)
    except AttributeError:
        return False
    return type(module).__name__ in ("GuardsFn", "ExportGuards") and not node.users


def _buffer_lines(gm: fx.GraphModule, targets: list, nodes: list) -> list:
    """Each get_attr constant registered on ``root`` (and the submodules of dotted targets)."""
    values = []
    for target in targets:
        value = attr_or_none(gm, target)
        if not isinstance(value, torch.Tensor):
            node = next(n for n in nodes if n.op == "get_attr" and n.target == target)
            raise _node_error(node, f"it reads a {type(value).__name__}, but only tensor constants "
                                    "are supported")
        values.append(value)
    try:
        lines, exprs = _values_source(values, "const", "    ")
    except _Unrenderable as exc:
        raise HarnessError(f"cannot write the graph's constants as source: {exc}") from None
    made = {""}
    for target, value, expr in zip(targets, values, exprs):
        path = target.split(".")
        for i in range(1, len(path)):  # submodules, outermost first
            if ".".join(path[:i]) not in made:
                made.add(".".join(path[:i]))
                owner = f"root.get_submodule({_str('.'.join(path[:i - 1]))})" if i > 1 else "root"
                lines.append(f"    {owner}.add_module({_str(path[i - 1])}, torch.nn.Module())")
        owner = f"root.get_submodule({_str('.'.join(path[:-1]))})" if len(path) > 1 else "root"
        if isinstance(value, torch.nn.Parameter):
            expr = f"torch.nn.Parameter({expr.removesuffix('.requires_grad_()')}, {value.requires_grad})"
            lines.append(f"    {owner}.register_parameter({_str(path[-1])}, {expr})")
        else:
            lines.append(f"    {owner}.register_buffer({_str(path[-1])}, {expr})")
    return lines


def _node_line(node: fx.Node, names: dict, rendered: dict, explicit: bool) -> str:
    var, op, target = names[node], node.op, _str(node.target) if isinstance(node.target, str) else ""
    args, kwargs = _literal(tuple(node.args), names), _literal(dict(node.kwargs), names)
    extra = f", type_expr={rendered[node, 'type']}" if (node, "type") in rendered else ""
    if op == "output":
        return f"g.output({_literal(node.args[0], names)}{extra})"
    if explicit and op != "call_function":  # only call_function takes name=
        return f"{var} = g.create_node({_str(op)}, {target}, {args}, {kwargs}, name={_str(node.name)}{extra})"
    if op == "placeholder":
        default = f", default_value={_literal(node.args[0], names)}" if node.args else ""
        return f"{var} = g.placeholder({target}{extra}{default})"
    if op == "get_attr":
        return f"{var} = g.get_attr({target}{extra})"
    if op == "call_module":
        return f"{var} = g.call_module({target}, {args}{extra})"
    rest = (f", {kwargs}" if node.kwargs else "") + extra + (f", name={_str(node.name)}" if explicit else "")
    return f"{var} = g.{op}({rendered.get(node, target)}, {args}{rest})"


def graph_source(gm: fx.GraphModule) -> str:
    """Source of ``def build_graph() -> fx.GraphModule:`` re-creating ``gm`` with plain fx calls.

    Preceded by ``import`` lines for any module a target needs beyond torch and operator. Raises
    HarnessError naming the node when a target, argument or constant has no source spelling.
    """
    imports, body = graph_parts(gm)
    return "".join(f"import {m}\n" for m in imports) + ("\n\n" if imports else "") + body
