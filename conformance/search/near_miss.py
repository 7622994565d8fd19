"""Near misses of a rewrite: variants of a graph the pass rewrote, one scalar argument of a node the
rewrite removed moved.

A matcher's bug lives beside what it matches: the dim it forgets to compare (``select(unsqueeze(x, d),
d', 0)`` with ``d' != d``), the alpha it drops (``add(mm, b, alpha=2)``), the ``1.0`` it takes for ``1``.
Drawn graphs reach those by chance; a graph the pass *did* rewrite shows where its matcher looks. So,
with ``verify(near_misses=K)`` (2 by default), each graph the pass rewrote (not dead code alone) is followed by up to
``K`` variants of it, checked as the graph was: in a call node the rewrite removed, one scalar argument
moved (an integer one up or down; a ``dim`` to another dim of its operand; an integral number to its
other type where the schema takes a number), or ``alpha=2`` given to a call that takes an alpha and
has none. A variant eager refuses, or whose values meta propagation does not reproduce, is no graph
and is skipped. Which variants, of all the moves, is fixed by the graph's code (a shuffle seeded by
its hash), so a failing variant is met again while Hypothesis shrinks the graph it came from, and the
minimal failure is a variant of a minimal graph, reported and written as a repro like any other.

Measured on the matcher corpus (``scripts/matcher_corpus.py --near-misses 2``, docs/fire-rates.md): 4
of the 7 cells whose buggy twin fired uncaught in 200 graphs are caught, and every correct twin holds.
"""

from __future__ import annotations

import copy
import dataclasses
import random
import re
import zlib

import torch

from strategies import attach_meta

# The schema types whose argument takes an int or a float alike (``add(x, 1)`` and ``add(x, 1.0)``; a
# Tensor argument given a Python number, ``mul.Tensor(x, 2)``, wraps it)
_NUMBER_TYPES = ("Scalar", "number", "Tensor")


def near_misses(case, graph_after: str, limit: int) -> list:
    """Up to ``limit`` variants of ``case`` (``GraphCase``s on the same inputs), moved in the call nodes
    of ``case.gm`` that ``graph_after`` (the rewritten graph's code) no longer holds. ``case.gm`` is
    never changed."""
    if limit <= 0:
        return []
    kept = set(re.findall(r"^\s*(\w+) = ", graph_after or "", re.M))
    removed = [n for n in case.gm.graph.nodes if n.op == "call_function" and n.name not in kept]
    moves = [move for node in removed for move in _moves(node)]
    random.Random(zlib.crc32(case.gm.code.encode())).shuffle(moves)
    out = []
    for move in moves:
        if len(out) >= limit:
            break
        gm = _moved(case, *move)
        if gm is not None:
            out.append(dataclasses.replace(case, gm=gm))
    return out


def _moves(node) -> list:
    """``(node name, where, value)`` for each move of ``node``'s scalar arguments (``where``: a position,
    or a keyword's name); none for a node that is not an ATen or prims call."""
    schema = getattr(node.target, "_schema", None)
    if schema is None or not schema.name.startswith(("aten::", "prims::")):
        return []
    arguments = {a.name: a for a in schema.arguments}
    places = [(i, a, schema.arguments[i] if i < len(schema.arguments) else None) for i, a in enumerate(node.args)]
    places += [(name, a, arguments.get(name)) for name, a in node.kwargs.items()]
    moves = []
    for where, value, arg in places:
        if arg is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        number = str(arg.type) in _NUMBER_TYPES
        moved: list = []
        if isinstance(value, int):
            moved = [value + 1, value - 1] + ([float(value)] if number else [])
            if "dim" in arg.name:
                rank = _rank(node)
                moved += [d for d in range(-rank, rank) if d not in (value, value + 1, value - 1)]
        elif number and float(value).is_integer():
            moved = [int(value)]
        moves += [(node.name, where, v) for v in moved]
    # (alpha is positional in some schemas, add.Scalar's: where given there it was moved above)
    if "alpha" in arguments and "alpha" not in node.kwargs and len(node.args) <= list(arguments).index("alpha"):
        moves.append((node.name, "alpha", 2))
    return moves


def _rank(node) -> int:
    first = next((a for a in node.args if isinstance(a, torch.fx.Node)), None)
    val = first.meta.get("val") if first is not None else None
    return val.dim() if isinstance(val, torch.Tensor) else 0


def _moved(case, name: str, where, value):
    """``case.gm`` with the move made, its meta propagated again (attach_meta's eager run, which is also
    the check that eager takes it); None where eager refuses it (no graph, so nothing to check)."""
    gm = copy.deepcopy(case.gm)
    node = next(n for n in gm.graph.nodes if n.name == name)
    if isinstance(where, int):
        node.args = tuple(value if i == where else a for i, a in enumerate(node.args))
    else:
        node.kwargs = {**node.kwargs, where: value}
    try:
        gm.graph.lint()
        gm.recompile()
        attach_meta(gm, case.fresh_inputs())
    except Exception:  # noqa: BLE001 - a move eager (or meta propagation) refuses makes no graph
        return None
    return gm


__all__ = ["near_misses"]
