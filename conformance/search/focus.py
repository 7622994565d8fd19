"""``focus=``: what the search draws more of. ``"auto"`` runs trigger discovery (``triggers.py``),
``"none"`` draws the plain generator, a list (or ``"aten.log,aten.exp"``) names the ops."""

from __future__ import annotations

import dataclasses
import inspect

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from strategies import Focus, InvalidArgument, SeedGraph, custom_rows, rows_named
from strategies._draw.edges import tensor_arguments

from .._errors import UsageError
from ..adapters import resolve
from .triggers import discover, user_edges_acting


def _rows_named(names) -> tuple:
    rows, unknown = [], []
    for name in names:
        found = rows_named(name.strip() if isinstance(name, str) else name)
        if not found:
            unknown.append(str(name).strip())
        rows += found
    if unknown:
        raise UsageError(f"focus={','.join(unknown)}: not in the op catalog; name catalog ops as aten.add or "
                         f"aten.add.Tensor (strategies.OPS lists them), or use --focus auto")
    return tuple(dict.fromkeys(rows))


def resolve_focus(focus, put, *, mutations: bool, timeout) -> tuple:
    """``(Focus or None, info dict for reports)``."""
    if focus is None or focus == "none":
        return None, {"mode": "none"}
    if focus == "auto":
        found = discover(put, mutations=mutations, timeout=timeout)
        return found.focus(), {"mode": "auto", **found.to_dict()}
    if not isinstance(focus, str) and not hasattr(focus, "__iter__"):
        raise UsageError(f"focus={focus!r}, but should be auto, none, or ops (aten.log,aten.exp or a list)")
    names = [n for n in focus.split(",") if n.strip()] if isinstance(focus, str) else list(focus)
    if not names:
        raise UsageError(f"focus={focus!r} is empty; give ops (aten.log,aten.exp), auto or none")
    rows = _rows_named(names)
    return Focus(ops=rows), {"mode": "ops", "ops": [{"op": r.name, "how": "given"} for r in rows],
                             "not_in_catalog": [], "constants": []}


_MAX_USER_EDGE_OPS = 4  # pairs of the first this many code-named user ops are focus edges (16 at most)
_MAX_USER_EDGE_ARGUMENTS = 3  # at each of the consumer's first this many tensor arguments


def with_user_ops(focus, info: dict, ops, put, *, ir: str, mutations: bool, device: str, timeout) -> tuple:
    """Discovery's ``(focus, info)`` with the user's own ops of ``ops`` (``verify(ops=)``) added:
    discovery probes catalog rows only, so the user ops the pass's code names (``not_in_catalog``) are
    focus ops, and of the ordered pairs of two of them, those whose own graphs make the pass act
    (``user_edges_acting``: a fusion acts on its producer feeding its consumer) are edges; where the
    code names none, every user op given is a focus op."""
    user = [row for item in ops for row in custom_rows(item)]
    if not user:
        return focus, info
    named = [row for row in user if row.name in info.get("not_in_catalog", ())
             or row.name.rsplit(".", 1)[0] in info.get("not_in_catalog", ())]
    chosen = named or user
    how = "code" if named else "given"
    # each at each of the consumer's tensor arguments: a fusion reads the norm's result as the quant's input
    pairs = [(p.name, c.name, a) for p in named[:_MAX_USER_EDGE_OPS] for c in named[:_MAX_USER_EDGE_OPS] if p is not c
             for a in tensor_arguments(c)[:_MAX_USER_EDGE_ARGUMENTS]]
    edges = user_edges_acting(put, pairs, ir=ir, mutations=mutations, device=device, timeout=timeout) if pairs else []
    base = focus or Focus()
    focus = dataclasses.replace(base, ops=(*base.ops, *chosen), edges=(*base.edges, *edges))
    info = {**info, "ops": [*info.get("ops", []), *({"op": r.name, "how": how} for r in chosen)],
            "edges": [*info.get("edges", []), *({"producer": p, "consumer": c, "how": "probe", "argument": a}
                                                 for p, c, a in edges)]}
    return focus, info


def resolve_dynamic_focus(focus) -> tuple:
    """``(Focus, info)`` for ``dynamic=True``: the ops named (any op a symbolic program's steps make,
    ``aten._assert_scalar.default`` and ``sym_min`` too), or UsageError naming what no step makes."""
    from strategies._dynamic.programs import focus_kinds

    names = [n.strip() for n in focus.split(",") if n.strip()] if isinstance(focus, str) else list(focus)
    if not names:
        raise UsageError(f"focus={focus!r} is empty; give ops (aten.slice.Tensor), auto or none")
    try:
        kinds = focus_kinds(names)
    except InvalidArgument as exc:
        raise UsageError(str(exc)) from None
    return Focus(ops=tuple(names)), {"mode": "ops", "ops": [{"op": str(n), "how": "given"} for n in names],
                                     "not_in_catalog": [], "constants": [], "steps": list(kinds)}


def resolve_seed_graphs(spec) -> tuple:
    """``--seed-graphs``: ``"pkg.mod:attr"`` or the object itself, to a tuple of ``SeedGraph``s.

    The object is a ``SeedGraph``, a ``(program, example_args)`` pair, or a list of those (or a
    function of no arguments returning one). A program that is not already a GraphModule is traced
    with ``make_fx``, so the seeds are ATen graphs like the drawn ones.
    """
    if spec is None:
        return ()
    where = spec if isinstance(spec, str) else "seed_graphs"
    obj = resolve(spec)[0] if isinstance(spec, str) else spec
    if callable(obj) and not isinstance(obj, (torch.nn.Module, SeedGraph)) and _takes_no_arguments(obj):
        try:
            obj = obj()
        except Exception as exc:  # noqa: BLE001 - the user's factory failed: say so, no traceback
            raise UsageError(f"{where}: calling it raised {type(exc).__name__}: {exc}") from None
    if isinstance(obj, SeedGraph) or _is_pair(obj):
        obj = [obj]
    if not isinstance(obj, (list, tuple)) or not obj:
        raise UsageError(f"{where} gave {type(obj).__name__}, but should give SeedGraphs or (program, example_args) "
                         f"pairs (a list, or a function returning one)")
    return tuple(_seed(item, where, i) for i, item in enumerate(obj))


def _is_pair(obj) -> bool:
    """``(program, example_args)``, not a tuple of two seeds (a SeedGraph is no program)."""
    return isinstance(obj, tuple) and len(obj) == 2 and callable(obj[0]) and not isinstance(obj[0], SeedGraph)


def _takes_no_arguments(fn) -> bool:
    try:
        return not any(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                       for p in inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False


def _seed(item, where: str, i: int) -> SeedGraph:
    if isinstance(item, SeedGraph):
        return item
    if not (isinstance(item, (tuple, list)) and len(item) == 2 and callable(item[0])):
        raise UsageError(f"{where}[{i}] is {type(item).__name__}, but should be a SeedGraph or a (program, "
                         f"example_args) pair")
    program, args = item
    args = tuple(args) if isinstance(args, (list, tuple)) else (args,)
    try:
        gm = program if isinstance(program, torch.fx.GraphModule) else make_fx(program)(*args)
    except Exception as exc:  # noqa: BLE001 - tracing the user's program failed: say so, no traceback
        raise UsageError(f"{where}[{i}]: make_fx could not trace it: {type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
    try:
        return SeedGraph(gm, args, program=None if isinstance(program, torch.fx.GraphModule) else program)
    except InvalidArgument as exc:
        raise UsageError(f"{where}[{i}]: {exc}") from None
