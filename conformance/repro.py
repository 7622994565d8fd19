"""Repro scripts: a failing example as a standalone Python file that rebuilds it and re-checks it.

A counterexample only helps if someone else can run it. ``write_repro`` writes the graph as plain
``torch.fx`` calls (no pickles, no meta), the inputs as exact literals with their strides, storage
offsets and aliasing, and a ``main()`` that calls ``conformance.check`` on them: exit 1 means the
violation reproduced, 0 that it did not, 2 that the script cannot run (no target, no harness).

>>> import torch, torch.fx as fx
>>> g = fx.Graph(); x = g.placeholder("x"); _ = g.output(g.call_function(torch.ops.aten.neg.default, (x,)))
>>> print(graph_source(fx.GraphModule(torch.nn.Module(), g)).splitlines()[4])
    neg = g.call_function(torch.ops.aten.neg.default, (x,))
"""

from __future__ import annotations

import datetime
import keyword
import math
import re
import sys
from importlib import metadata
from pathlib import Path

import torch
import torch.fx as fx

from ._errors import HarnessError

_WIDTH = 100  # longest line of a wrapped literal
_HEADER = ("import operator", "", "import torch", "import torch.fx as fx")
_NONFINITE = 'nan, inf = float("nan"), float("inf")'
_PRELOADED = {"torch", "torch._C", "torch.ops", "operator", "builtins"}  # importable through _HEADER alone
_RESERVED = {"g", "root", "fx", "torch", "operator", "nan", "inf", "complex", "float", "slice"}
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}  # same-size int views
# Where a callable without a usable __module__ may live (C functions, Tensor methods).
_NAMESPACES = ("torch", "torch.Tensor", "torch.nn.functional", "torch.special", "torch.linalg",
               "torch.fft", "math")


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
    if value is None or value is ... or isinstance(value, bool):
        return repr(value)
    if type(value) is int:
        return repr(value)
    if type(value) is float:
        return _float(value)
    if type(value) is complex:
        return f"complex({_float(value.real)}, {_float(value.imag)})"
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
    raise _Unrenderable(f"{type(value).__name__} value {value!r} has no literal spelling")


def _wrap(prefix: str, tokens: list, suffix: str, indent: str) -> list:
    """``prefix[t0, t1, ...]suffix`` on one line, or the tokens wrapped at _WIDTH between them."""
    one = f"{indent}{prefix}[{', '.join(tokens)}]{suffix}"
    if len(one) <= _WIDTH:
        return [one]
    lines, line, inner = [f"{indent}{prefix}["], "", indent + "    "
    for tok in tokens:
        if line and len(inner) + len(line) + len(tok) + 2 > _WIDTH:
            lines.append(inner + line.rstrip())
            line = ""
        line += tok + ", "
    lines.append(inner + line.rstrip().rstrip(","))
    return lines + [f"{indent}]{suffix}"]


# --- tensors -------------------------------------------------------------------------------------


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(_BITS[t.element_size()]) if t.element_size() in _BITS and t.dtype is not torch.bool else t


def _element_tokens(flat: torch.Tensor) -> list:
    if flat.is_complex():
        return [_literal(complex(v), {}) for v in flat.to(torch.complex128).tolist()]
    if flat.is_floating_point():  # widening to float64 is exact for every float dtype
        return [_float(v) for v in flat.to(torch.float32).tolist()]
    return [repr(v) for v in flat.tolist()]


def _spells_exactly(tokens: list, flat: torch.Tensor) -> bool:
    """Whether the literal rebuilds ``flat`` bit for bit (NaN payloads other than +-nan do not)."""
    try:
        values = eval(f"[{', '.join(tokens)}]", {"__builtins__": {}, "nan": math.nan, "inf": math.inf,
                                                  "complex": complex})
        return torch.equal(_bits(torch.tensor(values, dtype=flat.dtype)), _bits(flat))
    except (RuntimeError, TypeError, ValueError, OverflowError):
        return False


def _base_lines(name: str, t: torch.Tensor, indent: str) -> list:
    """``name = torch.tensor([...])``: every element of ``t``'s storage, flat, exactly."""
    n = t.untyped_storage().nbytes() // t.element_size()
    flat = t.detach().as_strided((n,), (1,), 0).cpu()
    device = "" if t.device.type == "cpu" else f", device={_str(str(t.device))}"
    tokens = _element_tokens(flat)
    if _spells_exactly(tokens, flat):
        return _wrap(f"{name} = torch.tensor(", tokens, f", dtype={_torch_constant(t.dtype)}{device})", indent)
    # A NaN payload (or a dtype torch.tensor cannot fill from Python numbers): write the bits.
    ints = _BITS.get(t.element_size(), torch.int64)
    tokens = [repr(v) for v in flat.view(ints).tolist()]
    suffix = f", dtype={_torch_constant(ints)}{device}).view({_torch_constant(t.dtype)})"
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
            kw = f"dtype={_torch_constant(v.dtype)}" + ("" if v.device.type == "cpu" else f", device={_str(str(v.device))}")
            expr = f"torch.empty(0, {kw}).as_strided({geometry})"
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
    out = ["def make_inputs() -> tuple:",
           '    """Fresh copies of the example inputs: exact values, strides, offsets and aliasing."""']
    out += lines
    if not exprs:
        return "\n".join(out + ["    return ()"]) + "\n"
    return "\n".join(out + ["    return ("] + [f"        {e}," for e in exprs] + ["    )"]) + "\n"


# --- graphs --------------------------------------------------------------------------------------


def _resolve(path: str):
    """The object at dotted ``path`` through modules already imported, and the module: or Nones."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        module = sys.modules.get(".".join(parts[:i]))
        if module is not None:
            obj = module
            try:
                for attr in parts[i:]:
                    obj = getattr(obj, attr)
            except AttributeError:
                return None, None
            return ".".join(parts[:i]), obj
    return None, None


def _candidate_paths(fn):
    if isinstance(fn, torch._ops.OpOverload):
        yield f"torch.ops.{fn.namespace}.{fn.overloadpacket.__name__}.{fn._overloadname}"
    elif isinstance(fn, torch._ops.OpOverloadPacket):
        yield "torch.ops." + fn._qualified_op_name.replace("::", ".")
    elif isinstance(fn, torch._ops.HigherOrderOperator):
        yield f"torch.ops.{fn.namespace}.{fn.__name__}"
    name = getattr(fn, "__name__", None)
    if isinstance(name, str):
        yield f"operator.{name}"
        yield f"builtins.{name}"
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str) and module != "__main__":
        yield f"{module}.{qualname}"
    if isinstance(name, str):
        yield from (f"{ns}.{name}" for ns in _NAMESPACES)


def _callable(fn, imports: set, reserved: set) -> str:
    """``torch.ops.aten.add.Tensor``, ``operator.getitem``, ``mypkg.mod.fn`` (import noted)."""
    for path in _candidate_paths(fn):
        module, obj = _resolve(path)
        if obj is not fn:
            continue
        if module == "builtins":
            reserved.add(path.removeprefix("builtins."))
            return path.removeprefix("builtins.")
        if module not in _PRELOADED:
            imports.add(module)
            reserved.add(module.split(".")[0])
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
    """Nodes whose name differs from the one fx would give them when rebuilt in order.

    Replays the rebuild on a scratch graph, restarting after each mismatch, so only the nodes that
    need it get ``name=`` (after a pass erased nodes, names such as ``add_3`` need it).
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


def _graph_parts(gm: fx.GraphModule) -> tuple:
    """(modules to import, source of ``build_graph``) for ``gm``."""
    nodes = list(gm.graph.nodes)
    imports, reserved, targets = set(), set(_RESERVED), {}
    buffers = list(dict.fromkeys(n.target for n in nodes if n.op == "get_attr"))
    for node in nodes:
        try:
            if node.op == "call_module":
                raise _Unrenderable("call_module nodes are not supported; inline submodules "
                                    "(e.g. make_fx or torch.export) before checking")
            if node.op == "call_function":
                targets[node] = _callable(node.target, imports, reserved)
            if node.type is not None:
                targets[(node, "type")] = _callable(node.type, imports, reserved)
        except _Unrenderable as exc:
            raise HarnessError(f"cannot write node {node.name!r} ({node.op} {node.target!r}) "
                               f"as source: {exc}") from None
    reserved |= {f"const{i}" for i in range(len(buffers))}
    names, explicit = _variables(nodes, reserved), _explicit_names(nodes)
    out = ["def build_graph() -> fx.GraphModule:",
           '    """The graph the pass was given, node for node (meta is re-attached by the harness)."""',
           "    root = torch.nn.Module()"]
    out += _buffer_lines(gm, buffers, nodes)
    out.append("    g = fx.Graph()")
    for node in nodes:
        try:
            out.append("    " + _node_line(node, names, targets, node in explicit))
        except _Unrenderable as exc:
            raise HarnessError(f"cannot write node {node.name!r} ({node.op} {node.target!r}) "
                               f"as source: {exc}") from None
    out.append("    return fx.GraphModule(root, g)")
    return sorted(imports), "\n".join(out) + "\n"


def _buffer_lines(gm: fx.GraphModule, targets: list, nodes: list) -> list:
    values = []
    for target in targets:
        obj = gm
        try:
            for attr in target.split("."):
                obj = getattr(obj, attr)
        except AttributeError:
            raise HarnessError(f"get_attr target {target!r} does not exist on the GraphModule") from None
        if not isinstance(obj, torch.Tensor):
            node = next(n for n in nodes if n.op == "get_attr" and n.target == target)
            raise HarnessError(f"cannot write node {node.name!r} (get_attr {target!r}) as source: it "
                               f"reads a {type(obj).__name__}, and only tensor constants are supported")
        values.append(obj)
    try:
        lines, exprs = _values_source(values, "const", "    ")
    except _Unrenderable as exc:
        raise HarnessError(f"cannot write the graph's constants as source: {exc}") from None
    made = set()
    for target, value, expr in zip(targets, values, exprs):
        *path, attr = target.split(".")
        for i in range(len(path)):  # submodules of dotted targets, outermost first
            if ".".join(path[:i + 1]) not in made:
                made.add(".".join(path[:i + 1]))
                owner = f'root.get_submodule({_str(".".join(path[:i]))})' if i else "root"
                lines.append(f"    {owner}.add_module({_str(path[i])}, torch.nn.Module())")
        owner = f"root.get_submodule({_str('.'.join(path))})" if path else "root"
        if isinstance(value, torch.nn.Parameter):
            expr = f"torch.nn.Parameter({expr.removesuffix('.requires_grad_()')}, requires_grad={value.requires_grad})"
            lines.append(f"    {owner}.register_parameter({_str(attr)}, {expr})")
        else:
            lines.append(f"    {owner}.register_buffer({_str(attr)}, {expr})")
    return lines


def _node_line(node: fx.Node, names: dict, targets: dict, explicit: bool) -> str:
    var = names[node]
    args, kwargs = _literal(tuple(node.args), names), _literal(dict(node.kwargs), names)
    extra = f", type_expr={targets[(node, 'type')]}" if (node, "type") in targets else ""
    if node.op == "output":
        return f"g.output({_literal(node.args[0], names)}{extra})"
    if explicit and node.op != "call_function":
        return (f"{var} = g.create_node({_str(node.op)}, {_str(node.target)}, {args}, {kwargs}, "
                f"name={_str(node.name)}{extra})")
    if node.op == "placeholder":
        default = f", default_value={_literal(node.args[0], names)}" if node.args else ""
        return f"{var} = g.placeholder({_str(node.target)}{extra}{default})"
    if node.op == "get_attr":
        return f"{var} = g.get_attr({_str(node.target)}{extra})"
    call = targets[node] if node.op == "call_function" else _str(node.target)
    rest = f", {kwargs}" if node.kwargs else ""
    name = f", name={_str(node.name)}" if explicit else ""
    return f"{var} = g.{node.op}({call}, {args}{rest}{extra}{name})"


def graph_source(gm: fx.GraphModule) -> str:
    """Source of ``def build_graph() -> fx.GraphModule:`` re-creating ``gm`` with plain fx calls.

    Preceded by ``import`` lines for any module a target needs beyond torch and operator. Raises
    HarnessError naming the node when a target, argument or constant has no source spelling.
    """
    imports, body = _graph_parts(gm)
    return "".join(f"import {m}\n" for m in imports) + ("\n\n" if imports else "") + body


# --- the script ----------------------------------------------------------------------------------


def _doc(text: str) -> str:
    return " ".join(text.split()).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


def _default_name(target: str | None, prop: str) -> str:
    where = "unknown"
    if target:
        module, _, attr = target.rpartition(":") if ":" in target else (target, "", "")
        if module.endswith(".py") or "/" in module or "\\" in module:
            module = Path(module.replace("\\", "/")).stem
        where = f"{module}_{attr}" if attr else module
    return f"repro_{where}_{prop}"


def _filename(name: str) -> str:
    stem = re.sub(r"_+", "_", re.sub(r"\W", "_", name.removesuffix(".py"), flags=re.ASCII)).strip("_")
    return (stem or "repro")[:80]


def _main_lines(has_target: bool) -> list:
    lines = ["def main() -> int:",
             "    gm, inputs = build_graph(), make_inputs()",
             '    print("graph before the pass:")',
             "    print(gm.code)"]
    if not has_target:
        lines += ["    if TARGET is None:",
                  '        print("TARGET is not set: the pass was not importable when this script was "',
                  '              "written; set TARGET to its import path, e.g. \\"mypkg.passes:my_pass\\"")',
                  "        return 2"]
    return lines + [
        "    try:",
        "        from conformance import check",
        "    except ImportError:",
        '        print("fx-conformance is not installed: pip install fx-conformance")',
        "        return 2",
        "    verdict = check(TARGET, gm, inputs, **OPTIONS)",
        '    print("graph after the pass:")',
        '    print(verdict.graph_after or "<no graph: the pass did not return one>")',
        "    print(verdict)",
        "    return 0 if verdict.ok else 1"]


def _script(filename: str, *, gm, example_inputs, target, violation, options) -> str:
    imports, graph = _graph_parts(gm)
    inputs = inputs_source(example_inputs)
    try:
        items = [f"{_str(str(k))}: {_literal(v, {})}" for k, v in (options or {}).items()]
    except _Unrenderable as exc:
        raise HarnessError(f"cannot write the checker options as source: {exc}") from None
    one_line = "OPTIONS = {" + ", ".join(items) + "}"
    options_src = one_line if len(one_line) <= _WIDTH else "\n".join(
        ["OPTIONS = {"] + [f"    {item}," for item in items] + ["}"])
    try:
        version = metadata.version("fx-conformance")
    except metadata.PackageNotFoundError:
        version = "(unknown version)"
    today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    headline = _doc(f"{violation.property}: {violation.headline}").rstrip(".")
    where = _doc(target) if target else "a pass that was not importable"
    doc = [f'"""fx-conformance counterexample: {headline}.', "",
           f"Generated by fx-conformance {version} on {today} (UTC) for {where}.",
           f"Run:  python {filename}   (exit 1 = reproduced, 0 = not reproduced, 2 = cannot run)",
           f"Re-verify: fx-conformance verify {_doc(target)}" if target
           else "Re-verify: set TARGET below, then fx-conformance verify <that import path>", '"""']
    target_src = (f"TARGET = {_str(target)}" if target else
                  'TARGET = None  # set this to the pass\'s import path, e.g. "mypkg.passes:my_pass"')
    found = [f"# {line}".rstrip() for line in f"{violation.property}: {violation.message}".splitlines()]
    header = "\n".join([*_HEADER, *(f"import {m}" for m in imports)])
    defs = [graph.rstrip(), inputs.rstrip(), "\n".join(_main_lines(bool(target))),
            'if __name__ == "__main__":\n    raise SystemExit(main())']
    return ("\n\n".join(["\n".join(doc), header, _NONFINITE, f"{target_src}\n{options_src}"]) + "\n\n\n"
            + "\n\n\n".join(defs) + "\n\n"
            + "# What fx-conformance reported when it found this example:\n" + "\n".join(found) + "\n")


def write_repro(directory, *, gm: fx.GraphModule, example_inputs: tuple, target: str | None,
                violation, options: dict | None = None, name: str | None = None) -> Path:
    """Write ``<directory>/<name>.py``, a standalone script reproducing ``violation``.

    Args:
        target: the pass's import path ("pkg.mod:attr" or "path/to/file.py:attr"), or None when
            it was not importable (the script then asks for it and exits 2).
        violation: a ``conformance.Violation``; its message ends the script as a comment.
        options: keyword options for ``conformance.check`` (properties, ensure, signature, ...).
        name: the file name (default ``repro_<target>_<property>``). An existing file with other
            content is never overwritten: ``_2``, ``_3``, ... are appended instead.

    Returns:
        The path written (or the existing identical file).

    >>> import tempfile; from conformance._result import Violation
    >>> g = fx.Graph(); _ = g.output(g.placeholder("x"))
    >>> write_repro(tempfile.mkdtemp(), gm=fx.GraphModule(torch.nn.Module(), g), target="m:p",
    ...             example_inputs=(torch.ones(1),), violation=Violation("values", "bad")).name
    'repro_m_p_values.py'
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    stem = _filename(name or _default_name(target, violation.property))
    # Rendered once; "\0" (never in Python source) stands for the file name until it is known.
    script = _script("\0", gm=gm, example_inputs=example_inputs, target=target, violation=violation,
                     options=options)
    for n in range(1, 10_000):
        path = directory / (f"{stem}.py" if n == 1 else f"{stem}_{n}.py")
        text = script.replace("\0", path.name)
        try:
            with open(path, "x", encoding="utf-8") as f:
                f.write(text)
            return path
        except FileExistsError:
            if path.read_text(encoding="utf-8") == text:
                return path
    raise HarnessError(f"{directory} already holds 9999 repro scripts named {stem}_N.py; clean it up")
