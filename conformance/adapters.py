"""Pass adapters: whatever form a pass comes in, one ``PassUnderTest.apply(gm, inputs)``.

Accepted forms (``SIGNATURES``), detected by inspection unless ``signature=`` names one:

- ``gm``:          ``fn(gm) -> GraphModule | None | PassResult`` (None: modified in place); also a
                   ``PassBase`` instance and both torch ``PassManager`` classes;
- ``gm-inputs``:   ``fn(gm, sample_inputs) -> GraphModule`` (Torch-TensorRT's documented form);
- ``gm-varargs``:  ``fn(gm, *sample_inputs)`` (``torch.fx.passes.reinplace.reinplace``);
- ``gm-settings``: ``fn(gm, settings)`` (Torch-TensorRT's current form; settings from a factory);
- ``gm-signature``: ``fn(gm, graph_signature)`` (torch.export passes; gets a copy of the export
                   graph's ``gm.meta["graph_signature"]``, so it needs ``ir="export"`` graphs, or
                   None where the graph has none and the pass says it takes None, as export's
                   ``replace_set_grad_with_hop_pass`` does over make_fx's trace);
- ``graph``:       ``fn(graph: fx.Graph) -> None | fx.Graph`` (Inductor custom-pass style);
- ``pattern-table``: an Inductor ``PatternMatcherPass`` (``table.apply(graph)`` returns how many
                   matches it replaced); a table of an Inductor module that fills its tables in a
                   ``lazy_init()`` (post_grad, joint_graph) is filled first, as Inductor does;
- ``transformer``: an ``fx.Transformer`` subclass, ``Cls(gm).transform()`` (``NormalizeArgs``).

A pass may return a count of replacements (an int) where it changes the graph in place.
``pass_kwargs`` are extra keyword arguments to every call (``post_grad_passes(gm, is_inference=True)``;
a transformer's constructor gets them); a parameter they name is not part of the detected form.
``context`` is a factory of a context manager the pass runs inside (``V.set_fake_mode``,
``config.patch``); it may take ``gm`` (the copy the pass gets) and ``fake_mode`` (the graph's).

A target may also be an import path, ``"pkg.mod:attr"`` or ``"path/to/file.py:attr"`` (``attr``
may be dotted, e.g. ``torch.fx:Graph.eliminate_dead_code``, and indexed, e.g.
``torch._inductor.fx_passes.post_grad:pass_patterns[2]``; a PassBase subclass is instantiated).
The pass always gets a fresh copy of the graph (``copies.snapshot``); the caller's graph is never
touched. The copies themselves, and the one way a graph is run (``graph_run``), live in ``copies``.
"""

from __future__ import annotations

import ast
import copy
import importlib
import importlib.util
import inspect
import pathlib
import re
import sys
import types
from contextlib import nullcontext
from dataclasses import dataclass, field

import torch
import torch.fx as fx
from torch.fx.passes.infra.pass_base import PassBase, PassResult
from torch.fx.passes.infra.pass_manager import PassManager
from torch.fx.passes.pass_manager import PassManager as LegacyPassManager

from ._errors import UsageError
from ._signatures import SIGNATURES  # (its own module: the CLI's --help reads it without importing torch)
from .copies import snapshot

_CONTEXT_PARAMS = ("gm", "fake_mode")  # what a --context factory may ask for, by name

# Parameter names that identify the second argument of a two-argument pass.
_INPUT_NAMES = {"sample_inputs", "example_inputs", "inputs", "sample_args", "example_args", "args"}
_SIGNATURE_NAMES = {"graph_signature", "signature", "export_graph_signature", "sig"}
_SETTINGS_NAMES = {"settings", "compilation_settings", "config", "options", "cfg"}
_GRAPH_NAMES = {"graph", "g", "fx_g", "fx_graph"}


class PassReturnError(Exception):
    """The pass returned something that is not a graph (an ``execution`` violation, not a usage error)."""


@dataclass(frozen=True)
class Applied:
    """What a pass produced: the resulting module, and ``modified`` when it reported one."""

    gm: fx.GraphModule
    modified: bool | None = None


@dataclass(frozen=True, eq=False)
class PassUnderTest:
    """A pass normalised to ``apply(gm, example_inputs) -> Applied``.

    ``reference`` is an import path that finds this pass again (for repro scripts and worker
    processes), or None when the object is not importable (a lambda, a local function).
    """

    fn: object
    form: str
    name: str
    reference: str | None = None
    settings_factory: object = None
    kwargs: dict = field(default_factory=dict)
    context: object = None

    def apply(self, gm: fx.GraphModule, example_inputs: tuple) -> Applied:
        work = snapshot(gm)
        with self._context(work):
            return self._call(work, example_inputs)

    def _context(self, work: fx.GraphModule):
        if self.context is None:
            return nullcontext()
        wanted = inspect.signature(self.context).parameters
        given = {"gm": work, "fake_mode": fake_mode_of(work)}
        manager = self.context(**{k: v for k, v in given.items() if k in wanted})
        if not (hasattr(manager, "__enter__") and hasattr(manager, "__exit__")):
            raise UsageError(f"context {_display(self.context)} returned {_type_name(manager)}, but should return a "
                             f"context manager (decorate it with @contextlib.contextmanager)")
        return manager

    def _call(self, work: fx.GraphModule, example_inputs: tuple) -> Applied:
        kw = self.kwargs
        if self.form == "pattern-table":
            count = self.fn.apply(work.graph)
            work.recompile()
            return Applied(work, bool(count))
        if self.form == "transformer":
            ret = self.fn(work, **kw).transform()
            if not isinstance(ret, fx.GraphModule):
                raise PassReturnError(f"{self.name}(gm).transform() returned {_type_name(ret)}, but should return "
                                      f"a GraphModule")
            return Applied(ret)
        if self.form == "graph":
            ret = self.fn(work.graph, **kw)
            if ret is None or ret is work.graph:
                return Applied(work)
            if isinstance(ret, int):  # a bool: "changed", as Graph.eliminate_dead_code returns; an int: a count
                return Applied(work, bool(ret))
            if isinstance(ret, fx.Graph):
                return Applied(fx.GraphModule(work, ret))
            raise PassReturnError(f"returned {_type_name(ret)}, but should be None, a bool (changed), an int "
                                  f"(replacements made) or a torch.fx.Graph (signature 'graph')")
        if self.form == "gm-inputs":
            ret = self.fn(work, list(example_inputs), **kw)
        elif self.form == "gm-varargs":
            ret = self.fn(work, *example_inputs, **kw)
        elif self.form == "gm-settings":
            ret = self.fn(work, self.settings_factory(), **kw)
        elif self.form == "gm-signature":
            signature = work.meta.get("graph_signature")
            if signature is None and _second_takes_none(self.fn):  # export's passes over make_fx's trace
                ret = self.fn(work, None, **kw)
                return _normalise(ret, work)
            if signature is None:
                raise UsageError(f"{self.name} takes (gm, graph_signature), but this graph has no export signature; "
                                 f"verify it on export graphs (--ir export)")
            ret = self.fn(work, copy.deepcopy(signature), **kw)
        else:
            ret = self.fn(work, **kw)
        return _normalise(ret, work)

    def __repr__(self) -> str:
        return f"<pass {self.name} ({self.form})>"


def _second_takes_none(fn) -> bool:
    """Whether ``fn``'s second parameter says it may be None (a default of None, or an annotation
    ``X | None`` / ``Optional[X]``), as torch.export's passes that also run before a signature exists."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    if len(params) < 2:
        return False
    second = params[1]
    text = second.annotation if isinstance(second.annotation, str) else repr(second.annotation)
    return second.default is None or bool(re.search(r"\|\s*None\b|\bNone\s*\||Optional\[", text))


def _normalise(ret, work: fx.GraphModule) -> Applied:
    if isinstance(ret, fx.GraphModule):
        return Applied(ret)
    if ret is None:
        return Applied(work)
    if isinstance(ret, int):  # a bool: "changed"; an int: a count of replacements; modified in place
        return Applied(work, bool(ret))
    if isinstance(ret, PassResult):
        if not isinstance(ret.graph_module, fx.GraphModule):
            raise PassReturnError(f"PassResult.graph_module={_type_name(ret.graph_module)}, but should be a GraphModule")
        return Applied(ret.graph_module, bool(ret.modified))
    if isinstance(ret, fx.Graph):
        return Applied(fx.GraphModule(work, ret))
    if isinstance(ret, (tuple, list)) and ret and isinstance(ret[0], fx.GraphModule):
        return Applied(ret[0])  # e.g. replace_set_grad_with_hop_pass returns (gm, signature)
    raise PassReturnError(f"returned {_type_name(ret)}, but should be a GraphModule, None or a bool or an "
                          f"int (modified in place), a PassResult or a torch.fx.Graph")


def _type_name(obj) -> str:
    return type(obj).__qualname__ if obj is not None else "None"


# --- resolution ----------------------------------------------------------------------------------


def load_pass(target, *, signature: str | None = None, settings_factory=None, pass_kwargs=None,
              context=None) -> PassUnderTest:
    """Normalise ``target`` (a callable, PassBase, PassManager, PatternMatcherPass, fx.Transformer
    subclass, or import path) into a PassUnderTest.

    Args:
        signature: force one of ``SIGNATURES`` instead of detecting it.
        settings_factory: a zero-argument callable (or import path to one) making the ``settings``
            object for the ``gm-settings`` form.
        pass_kwargs: extra keyword arguments for every call of the pass (``{"is_inference": True}``).
        context: a callable (or import path to one) returning a context manager the pass runs
            inside; it may take ``gm`` and ``fake_mode`` (the graph's FakeTensorMode) by name.

    Raises:
        UsageError: the target cannot be imported, is not callable, or its form cannot be used.

    >>> load_pass("torch._inductor.fx_passes.post_grad:remove_noop_ops").form
    'graph'
    """
    if signature is not None and signature not in SIGNATURES:
        raise UsageError(f"signature={signature!r}, but should be one of {', '.join(SIGNATURES)}")
    if isinstance(target, PassUnderTest):
        return target
    kwargs = _check_kwargs(pass_kwargs)
    context = _load_context(context)
    reference = None
    owner = None
    if isinstance(target, str):
        reference = target
        target, owner = resolve(target)
        if inspect.isclass(target) and issubclass(target, PassBase):
            target = _instantiate(target, reference)
    else:
        reference = reference_of(target)
    name = reference or _display(target)
    if _is_pattern_table(target):
        if signature not in (None, "pattern-table"):
            raise UsageError(f"{name} is an Inductor PatternMatcherPass: its form is pattern-table, not {signature}")
        if kwargs:
            raise UsageError(f"{name} is an Inductor PatternMatcherPass (table.apply(graph)), which takes no "
                             f"extra arguments, but --pass-arg gave {', '.join(kwargs)}")
        _fill_lazy_tables(reference)
        return PassUnderTest(target, "pattern-table", name, reference, context=context)
    if signature == "pattern-table":
        raise UsageError(f"signature='pattern-table' needs an Inductor PatternMatcherPass, but {name} is a "
                         f"{_type_name(target)}")
    if inspect.isclass(target) and issubclass(target, fx.Transformer):
        if signature not in (None, "transformer"):
            raise UsageError(f"{name} is an fx.Transformer subclass: its form is transformer, not {signature}")
        _check_accepts(target.__init__, kwargs, name, skip=2)  # (self, module, ...)
        return PassUnderTest(target, "transformer", name, reference, kwargs=kwargs, context=context)
    if signature == "transformer":
        raise UsageError(f"signature='transformer' needs an fx.Transformer subclass, but {name} is a "
                         f"{_type_name(target) if not inspect.isclass(target) else 'class ' + target.__qualname__}")
    if inspect.isclass(target):
        raise UsageError(f"{name} is a class that is neither a PassBase nor an fx.Transformer subclass; point at "
                         f"an instance or a function that takes the GraphModule")
    if not callable(target):
        raise UsageError(f"target {name!r} is a {_type_name(target)}, which is not callable; "
                         f"pass a function, a PassBase instance or a PassManager")
    if isinstance(settings_factory, str):
        settings_factory, _ = resolve(settings_factory)
        if not callable(settings_factory):
            raise UsageError("settings_factory must name a callable that returns the settings object")
    if kwargs and isinstance(target, (PassBase, PassManager, LegacyPassManager)):
        raise UsageError(f"{name} is a {_type_name(target)}, called with the GraphModule alone, but --pass-arg "
                         f"gave {', '.join(kwargs)}")
    form = signature or detect_signature(target, owner, given=kwargs)
    if form == "gm" and signature is None and settings_factory is not None and _optional_settings(target):
        form = "gm-settings"  # fn(gm, settings=None): the factory is what it is for
    _check_accepts(target, kwargs, name, skip=0)
    if settings_factory is not None and form != "gm-settings":
        raise UsageError(f"--settings-factory was given, but {name} is called as {form} "
                         f"({SIGNATURES[form].split(' -> ')[0]}) and takes no settings: drop it, or use "
                         f"--signature gm-settings")
    if form == "gm-settings" and settings_factory is None:
        raise UsageError(f"{name} takes (gm, settings); give --settings-factory "
                         f"pkg.mod:make_settings (a callable returning the settings object)")
    return PassUnderTest(target, form, name, reference, settings_factory, kwargs=kwargs, context=context)


def parse_pass_args(items) -> dict:
    """``["is_inference=True", "name=x"]`` -> ``{"is_inference": True, "name": "x"}``: a value is a
    Python literal (True, 2, 0.5, None, "text", (1, 2)) where it parses as one, else the text."""
    out = {}
    for item in items or ():
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise UsageError(f"--pass-arg {item!r} should look like NAME=VALUE (e.g. is_inference=True)")
        if name in out:
            raise UsageError(f"--pass-arg {name} is given twice")
        try:
            out[name] = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError):
            out[name] = text.strip()
    return out


def _check_kwargs(pass_kwargs) -> dict:
    if pass_kwargs is None:
        return {}
    if not isinstance(pass_kwargs, dict) or not all(isinstance(k, str) and k.isidentifier() for k in pass_kwargs):
        raise UsageError(f"pass_kwargs={pass_kwargs!r}, but should be a dict of keyword-argument names to values")
    return dict(pass_kwargs)


def _check_accepts(fn, kwargs: dict, name: str, *, skip: int) -> None:
    """Every name in ``kwargs`` must be a keyword parameter of ``fn`` (past the first ``skip``)."""
    if not kwargs:
        return
    try:
        params = list(inspect.signature(fn).parameters.values())[skip:]
    except (TypeError, ValueError):
        return  # a builtin without a signature: let the call say
    if any(p.kind == p.VAR_KEYWORD for p in params):
        return
    names = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    unknown = [k for k in kwargs if k not in names]
    if unknown:
        raise UsageError(f"--pass-arg {unknown[0]}: {name} has no such keyword parameter (it has "
                         f"{', '.join(names) or 'none'})")


def _load_context(context):
    if context is None:
        return None
    if isinstance(context, str):
        context, _ = resolve(context)
    if not callable(context):
        raise UsageError(f"context {context!r} is not callable; give a function returning a context manager")
    try:
        params = inspect.signature(context).parameters.values()
    except (TypeError, ValueError):
        return context
    for p in params:
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name not in _CONTEXT_PARAMS:
            raise UsageError(f"context {_display(context)} takes {p.name!r}, but a context factory may only ask for "
                             f"{' and '.join(_CONTEXT_PARAMS)} (by name)")
    return context


def fake_mode_of(gm: fx.GraphModule):
    """The FakeTensorMode of ``gm``'s ``meta['val']`` fake tensors, or None (no fake values)."""
    from torch._subclasses.fake_tensor import FakeTensor

    for node in gm.graph.nodes:
        val = node.meta.get("val")
        if isinstance(val, FakeTensor):
            return val.fake_mode
    return None


def _is_pattern_table(obj) -> bool:
    matcher = sys.modules.get("torch._inductor.pattern_matcher")  # imported by whoever made the table
    return matcher is not None and isinstance(obj, matcher.PatternMatcherPass)


def _fill_lazy_tables(reference: str | None) -> None:
    """Inductor's post_grad and joint_graph modules register most of their patterns in a
    ``lazy_init()`` their passes call first (it runs once): a table read off the module is
    incomplete until then."""
    if not reference or ":" not in reference or reference.split(":")[0].endswith(".py"):
        return
    init = getattr(sys.modules.get(reference.split(":")[0]), "lazy_init", None)
    if callable(init):
        try:
            init()
        except Exception as exc:  # noqa: BLE001 - torch's own initialisation
            raise UsageError(f"{reference}: its module's lazy_init() raised {type(exc).__name__}: {exc}") from None


def _instantiate(cls, reference: str):
    try:
        return cls()
    except TypeError as exc:
        raise UsageError(f"{reference} is a PassBase subclass that cannot be built without arguments "
                         f"({exc}); point at an instance instead") from None


def _display(fn) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__qualname__


def _optional_settings(fn) -> bool:
    """Whether ``fn``'s second positional parameter is an optional settings object
    (``fn(gm, settings=None)``)."""
    try:
        positional = [p for p in inspect.signature(fn).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return False
    return len(positional) >= 2 and positional[1].default is not positional[1].empty and \
        (positional[1].name.lower() in _SETTINGS_NAMES or "settings" in _annotation(positional[1]))


def detect_signature(fn, owner: type | None = None, given=()) -> str:
    """The form of ``fn`` (a key of SIGNATURES), from its type, parameters and annotations;
    parameters named in ``given`` (extra keyword arguments) are not part of the form."""
    if isinstance(fn, (PassBase, PassManager, LegacyPassManager)):
        return "gm"
    if owner is not None and issubclass(owner, fx.Graph) and not isinstance(fn, types.MethodType):
        return "graph"  # e.g. torch.fx:Graph.eliminate_dead_code, an unbound Graph method
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return "gm"
    params = [p for p in sig.parameters.values() if p.name not in given or p.kind == p.POSITIONAL_ONLY]
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
    if not positional:
        if varargs:
            return "gm"
        raise UsageError(f"{_display(fn)}{sig} takes no positional argument; a pass takes the graph first")
    first = positional[0]
    if len(required) >= 2:
        second = required[1]
        if len(required) > 2:
            extra = ", ".join(p.name for p in required[1:])
            raise UsageError(f"{_display(fn)}{sig} needs {len(required)} arguments; the forms are "
                             f"{', '.join(SIGNATURES)}: give the others as --pass-arg NAME=VALUE ({extra})")
        name, ann = second.name.lower(), _annotation(second)
        if name in _SIGNATURE_NAMES or "graphsignature" in ann:
            return "gm-signature"
        if name in _SETTINGS_NAMES or "settings" in ann:
            return "gm-settings"
        if name in _INPUT_NAMES or "sequence" in ann or "list" in ann or "tensor" in ann:
            return "gm-inputs"
        raise UsageError(f"cannot tell what the second parameter {second.name!r} of {_display(fn)}{sig} is; "
                         f"give its value as --pass-arg {second.name}=VALUE, or use --signature gm-inputs or "
                         f"--signature gm-settings")
    if varargs and len(required) == 1 and _annotation(first) != "graph":
        return "gm-varargs"
    ann = _annotation(first)
    if ann == "graph" or (ann == "" and first.name in _GRAPH_NAMES):
        return "graph"
    return "gm"


def _annotation(param) -> str:
    """'graph', 'graphmodule' or the lower-cased annotation text ('' when there is none)."""
    ann = param.annotation
    if ann is param.empty:
        return ""
    if isinstance(ann, type):
        if issubclass(ann, fx.GraphModule):
            return "graphmodule"
        if issubclass(ann, fx.Graph):
            return "graph"
        return ann.__name__.lower()
    text = str(ann).replace("'", "").replace('"', "")
    last = text.split("|")[0].strip().split(".")[-1]
    if last == "Graph":
        return "graph"
    if last == "GraphModule":
        return "graphmodule"
    return text.lower()


def resolve(path: str):
    """Import ``pkg.mod:attr`` or ``path/to/file.py:attr``; returns (object, class it was found on)."""
    if ":" not in path:
        raise UsageError(f"target {path!r} should look like pkg.module:attr or path/to/file.py:attr")
    module_part, attr_part = path.rsplit(":", 1)
    if not module_part or not attr_part:
        raise UsageError(f"target {path!r} should look like pkg.module:attr or path/to/file.py:attr")
    module = _import_file(module_part) if module_part.endswith(".py") else _import_module(module_part)
    obj, owner = module, None
    for part in attr_part.split("."):
        match = re.fullmatch(r"([A-Za-z_]\w*)((?:\[-?\d+\])*)", part)
        if match is None:
            raise UsageError(f"{part!r} in target {path!r} should be a name, or a name indexed as name[2]")
        name, indices = match.group(1), [int(i) for i in re.findall(r"-?\d+", match.group(2))]
        if not hasattr(obj, name):
            where = getattr(obj, "__name__", type(obj).__name__)
            raise UsageError(f"cannot find {name!r} in {where} (target {path!r})")
        owner = obj if inspect.isclass(obj) else None
        obj = getattr(obj, name)
        for i in indices:
            try:
                obj, owner = obj[i], None
            except (TypeError, IndexError, KeyError) as exc:
                raise UsageError(f"cannot index {name}[{i}] in target {path!r}: {type(exc).__name__}: {exc}") from None
    return obj, owner


def _import_module(name: str):
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        raise UsageError(f"cannot import module {name!r}: {exc}") from None
    except Exception as exc:  # the module's own code failed
        raise UsageError(f"importing {name!r} raised {type(exc).__name__}: {exc}") from None


def _import_file(file: str):
    path = pathlib.Path(file).resolve()
    if not path.is_file():
        raise UsageError(f"cannot import {file!r}: no such file")
    name = f"_fx_conformance_target_{path.stem}_{abs(hash(str(path))) % 10**8}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # so worker processes and pickling find it
    sys.path.insert(0, str(path.parent))  # the file may import its neighbours
    module.__fx_conformance_path__ = file  # before running it: reference_of() may be called meanwhile
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise UsageError(f"importing {file!r} raised {type(exc).__name__}: {exc}") from None
    return module


def reference_of(obj) -> str | None:
    """An import path that resolves back to ``obj`` (for repro scripts), or None."""
    target = obj
    if isinstance(obj, (PassBase, PassManager, LegacyPassManager)) or not hasattr(obj, "__qualname__"):
        return None
    module_name, qualname = getattr(target, "__module__", None), target.__qualname__
    if not module_name or "<" in qualname:
        return None
    module = sys.modules.get(module_name)
    if module_name == "__main__":  # importing the script again would re-run it: trust the name
        file = getattr(module, "__file__", None)
        return f"{file}:{qualname}" if file else None
    prefix = getattr(module, "__fx_conformance_path__", None) or module_name
    try:
        found, _ = resolve(f"{prefix}:{qualname}")
    except UsageError:
        return None
    return f"{prefix}:{qualname}" if found is obj or getattr(found, "__func__", None) is obj else None
