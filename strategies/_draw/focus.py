"""``Focus``: what a focused ``graphs()`` draws more of (the ops a pass rewrites, its constants).

A focused graph draws a focus op at about every other step, feeds it the latest focus op's result
when that fits (so producer -> consumer pairs such as ``log(exp(x))`` occur), and draws scalar
operands from the focus scalars and 0, 1, -1, 2, 0.5 half the time. A share of graphs
(``1 - share``) is drawn unfocused, for breadth.

``edges`` name producer -> consumer pairs a pass matches (``mm`` feeding ``add``), and where a third
item says so the consumer's argument the producer feeds (``("aten.transpose.int", "aten.bmm.default",
"mat2")``: ``edges.py``): half the focus steps of a graph draw one of them whole, the consumer on the
producer's result, with the arguments the two share by name (``dim``, ``dim0``) equal a third of the
time and one apart a sixth (the relation a matcher checks, holding and just failing: where its bugs
live).
"""

from __future__ import annotations

from dataclasses import dataclass

from .._errors import InvalidArgument
from .hops import check_hops
from .seeds import SeedGraph

BASIC_SCALARS = (0, 1, -1, 2, 0.5)


@dataclass(frozen=True)
class Focus:
    """``ops``: catalog rows, overloads or names; ``scalars``: numbers; ``share``: focused graphs;
    ``seeds``: ``SeedGraph``s (example programs) a focused graph embeds, about one step in four;
    ``edges``: ``(producer, consumer)`` pairs of ops (rows, overloads or names) drawn chained, or
    ``(producer, consumer, argument)``: at the consumer's argument of that schema name;
    ``acting``: those of ``ops`` the pass acts on by themselves (what it matches, not what it emits),
    drawn three times as often as the others; ``pairs``: those the pass acts on as ``x op x`` (its code
    compares the two operands: ``sub(x, x) -> 0``), whose focus calls take one value as both operands
    two times in three (else one in six), that value not the latest focus op's result but one holding
    NaN or an infinity where special values are on; ``hops``: higher-order ops drawn in every graph,
    focused or not (``graphs(hops=)``); ``duplicates``: the pass acts on an expression computed twice
    (a CSE, which names no op): a focused graph's step re-emits an earlier pure call one time in three,
    where it is a call on an integer operand with an integral scalar three times in four with the
    scalar of the other type (``add(x, 1)`` beside ``add(x, 1.0)``), and in mutating graphs a third of
    them after a write in place to what it read; half its functional graphs end with such a pair on an
    integer operand (and the first call again), the pair's second result mostly returned."""

    ops: tuple = ()
    scalars: tuple = ()
    share: float = 0.75
    seeds: tuple = ()
    edges: tuple = ()
    acting: tuple = ()
    hops: tuple = ()
    pairs: tuple = ()
    duplicates: bool = False

    def __post_init__(self):
        if isinstance(self.ops, (str, bytes)) or not hasattr(self.ops, "__iter__"):
            raise InvalidArgument(f"Focus(ops={self.ops!r}) must be a list of catalog rows, overloads or names")
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in self.scalars):
            raise InvalidArgument(f"Focus(scalars={self.scalars!r}) must be numbers")
        if not 0.0 < self.share <= 1.0:
            raise InvalidArgument(f"Focus(share={self.share!r}) must be in (0, 1]")
        if not all(isinstance(g, SeedGraph) for g in self.seeds):
            raise InvalidArgument(f"Focus(seeds=...) must be SeedGraphs, got {[type(g).__name__ for g in self.seeds]}")
        if not all(isinstance(e, (tuple, list)) and (len(e) == 2 or (len(e) == 3 and isinstance(e[2], (str, type(None)))))
                   for e in self.edges):
            raise InvalidArgument(f"Focus(edges={self.edges!r}) must be (producer, consumer) pairs of ops, or "
                                  f"(producer, consumer, argument) triples: the consumer's argument the producer "
                                  f"feeds, by its schema name (\"mat2\")")
        if not isinstance(self.duplicates, bool):
            raise InvalidArgument(f"Focus(duplicates={self.duplicates!r}) must be True or False")
        object.__setattr__(self, "edges", tuple(tuple(e) for e in self.edges))
        object.__setattr__(self, "hops", check_hops(self.hops, ir=None))
        object.__setattr__(self, "acting", tuple(self.acting))
        object.__setattr__(self, "pairs", tuple(self.pairs))
        object.__setattr__(self, "seeds", tuple(self.seeds))
        object.__setattr__(self, "ops", tuple(self.ops))
        object.__setattr__(self, "scalars", tuple(self.scalars))

    def op_names(self) -> frozenset:
        """``ops`` as names (``"aten.slice.Tensor"``): a catalog row's name, an overload's, a name as given."""
        import torch

        return frozenset(op if isinstance(op, str) else str(op) if isinstance(op, torch._ops.OpOverload)
                         else getattr(op, "name", str(op)) for op in self.ops)

    def pool(self) -> tuple:
        """The scalars a focused graph draws from: the pass's own, then the basic ones."""
        return tuple(dict.fromkeys((*self.scalars, *BASIC_SCALARS)))
