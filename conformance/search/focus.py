"""``focus=``: what the search draws more of. ``"auto"`` runs trigger discovery (``triggers.py``),
``"none"`` draws the plain generator, a list (or ``"aten.log,aten.exp"``) names the ops."""

from __future__ import annotations

from strategies import OPS, Focus

from .._errors import UsageError
from .triggers import discover

FOCUS_MODES = ("auto", "none")


def _rows_named(names) -> tuple:
    by_name = {}
    for row in OPS:
        by_name.setdefault(row.name, []).append(row)
        by_name.setdefault(row.name.removeprefix("aten."), []).append(row)
        packet = row.name.rsplit(".", 1)[0]
        by_name.setdefault(packet, []).append(row)
        by_name.setdefault(packet.removeprefix("aten."), []).append(row)
    rows, unknown = [], []
    for name in names:
        key = str(name).strip()
        found = by_name.get(key) or by_name.get(str(getattr(name, "__name__", "")))
        if found is None and hasattr(name, "_schema"):
            found = [r for r in OPS if r.overload is name]
        if not found:
            unknown.append(key)
        rows += found or []
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
    names = [n for n in focus.split(",") if n.strip()] if isinstance(focus, str) else list(focus)
    if not names:
        raise UsageError(f"focus={focus!r} is empty; give ops (aten.log,aten.exp), auto or none")
    rows = _rows_named(names)
    return Focus(ops=rows), {"mode": "ops", "ops": [{"op": r.name, "how": "given"} for r in rows],
                             "not_in_catalog": [], "constants": []}
