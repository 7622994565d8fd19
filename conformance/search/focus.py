"""``focus=``: what the search draws more of. ``"auto"`` runs trigger discovery (``triggers.py``),
``"none"`` draws the plain generator, a list (or ``"aten.log,aten.exp"``) names the ops."""

from __future__ import annotations

from strategies import Focus, rows_named

from .._errors import UsageError
from .triggers import discover


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
