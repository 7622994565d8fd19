"""One call of a user's op (``CUSTOM_CALL``): its ``op_rule`` first, then its schema for the rest.

The schema says each argument's type and whether the op writes it (``Tensor(a!)``); an ``op_rule``
says what it cannot (shapes that depend on each other, a one-element scale, an out buffer the op
fills). Without a rule, tensors are drawn as the catalog's pointwise operands are: the first any
operand, the others broadcasting with it; a written tensor is a ``clone`` of an operand shaped as the
first (a buffer that also holds values: serving code writes its own temporaries), or, in mutating
graphs one time in three, an existing value itself. Whether a draw is valid is the op's to say: the
builder runs it (``GraphBuilder.call_custom``) and rejects what its kernel or fake impl refuses.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from .._build.builder import CONSTANT, Fresh, StepRejected, Value, writes
from .._catalog import vocabulary as C
from .._catalog.custom import note_custom_call, rule_of
from .._draws import choose, flag, integers
from .._tensors import scalars
from .operands import DrawContext, operand, take_pin


class RuleError(StepRejected):
    """An op_rule's own mistake (an argument its schema lacks, an out buffer it does not write):
    counted against the op, so its health line says it."""


_FLOATS = (1e-6, 1e-5, 0.5, 1.0, 2.0, 0.1)  # what float arguments of serving ops hold: epsilons, scales


class CallDraw:
    """What an ``op_rule`` draws one call with. Each method draws one argument by name and returns
    its value (a real tensor for tensors, so the rule can read its shape and dtype); arguments the
    rule does not draw are drawn from the schema afterwards.

    - ``tensor(name, shape=, dtype=, dtypes=, like=, fits=, domain=)``: an operand (an existing value
      that fits, or a new input or constant); ``like`` another argument's tensor: its shape and dtype;
      ``fits`` a predicate on shapes; ``domain`` a catalog value domain ("positive", "nonzero"...).
    - ``out(name, shape=, dtype=, like=)``: a fresh ``empty`` buffer the op writes whole (an
      out-variant's ``result``).
    - ``value(name, values)``: a literal, one of ``values`` (a tuple or list) or drawn from it (a
      Hypothesis strategy).
    - ``call[name]``: an argument drawn so far.
    """

    def __init__(self, draw, ctx: DrawContext, spec: C.OpSpec):
        self._draw, self._ctx, self.spec = draw, ctx, spec
        self.schema = spec.overload._schema
        self._args = {a.name: a for a in self.schema.arguments}
        self.drawn: dict = {}  # name -> a Value, a Fresh, a list of them, or a literal
        self._first: Value | None = None

    def __getitem__(self, name: str):
        got = self.drawn[name]
        if isinstance(got, Value):
            return got.tensor
        if isinstance(got, Fresh):
            return torch.empty(got.shape, dtype=got.dtype)
        return got

    def _arg(self, name: str):
        if name not in self._args:
            raise RuleError(f"the op_rule of {self.spec.name} draws {name!r}, which its schema lacks "
                            f"({', '.join(self._args)})")
        return self._args[name]

    def tensor(self, name: str, *, shape=None, dtype=None, dtypes=None, like=None, fits=None,
               domain: str = C.ANY_VALUE) -> torch.Tensor:
        arg = self._arg(name)
        if like is not None:
            shape, dtype = tuple(like.shape), like.dtype
        ok = frozenset({dtype}) if dtype is not None else frozenset(dtypes or self.spec.dtypes)
        pinned = take_pin(self._ctx, name, lambda v: v.tensor.dtype in ok and (
            tuple(v.tensor.shape) == tuple(int(n) for n in shape) if shape is not None
            else fits(tuple(v.tensor.shape)) if fits is not None else True))
        if pinned is not None:  # an edge's producer, at this argument
            v = pinned
        elif shape is not None:
            shape = tuple(int(n) for n in shape)
            v = operand(self._draw, self._ctx, dtypes_ok=ok, domain=domain, chain=self._first is None,
                        shape_fits=lambda s: s == shape, make_shape=lambda d: shape)
        elif fits is not None:
            v = operand(self._draw, self._ctx, dtypes_ok=ok, domain=domain, shape_fits=fits,
                        make_shape=lambda d: self._leaf_shape(d, fits))
        else:
            v = operand(self._draw, self._ctx, dtypes_ok=ok, domain=domain, like=self._first)
        if writes(arg):
            self.drawn[name] = self._written(v)
        else:
            self.drawn[name] = v
        self._first = self._first or v
        return v.tensor

    def _leaf_shape(self, draw, fits) -> tuple:
        for _ in range(8):
            shape = tuple(draw(self._ctx.shapes))
            if fits(shape):
                return shape
        raise StepRejected(f"no drawn shape fits the op_rule of {self.spec.name}")

    def out(self, name: str, *, shape=None, dtype=None, like=None) -> torch.Tensor:
        arg = self._arg(name)
        if not writes(arg):
            raise RuleError(f"the op_rule of {self.spec.name} makes {name!r} an out buffer, but the schema "
                            f"does not mark it written (Tensor(a!))")
        if like is not None:
            shape, dtype = tuple(like.shape), dtype or like.dtype
        if shape is None:
            if self._first is None:
                raise StepRejected(f"out({name!r}) needs shape= or like= before any tensor is drawn")
            shape = tuple(self._first.tensor.shape)
        self.drawn[name] = Fresh(tuple(int(n) for n in shape), dtype or (self._first.tensor.dtype if self._first is not None
                                                                           else torch.float32))
        return self[name]

    def value(self, name: str, values):
        self._arg(name)
        if isinstance(values, st.SearchStrategy):
            self.drawn[name] = self._draw(values)
        else:
            self.drawn[name] = choose(self._draw, tuple(values))
        return self.drawn[name]

    # --- the schema's own rules ------------------------------------------------------------------
    def _written(self, v: Value):
        """A written argument: the value itself (mutating graphs, one time in three), else a clone."""
        if self._ctx.mutations and v.origin != CONSTANT and self._draw(integers(0, 2)) == 2:
            return v
        return Fresh(tuple(v.tensor.shape), v.tensor.dtype, source=v)

    def by_schema(self, arg) -> None:
        """Draw ``arg`` from its type (an optional one may be left to its default)."""
        draw, ctx = self._draw, self._ctx
        kind = str(arg.type)
        if arg.has_default_value() and not flag(draw):
            return  # left out: its default
        if kind == "Tensor":
            if writes(arg) and self._first is not None:
                self.tensor(arg.name, shape=self._first.tensor.shape, dtype=self._first.tensor.dtype)
            else:
                self.tensor(arg.name)
        elif kind == "Optional[Tensor]":
            if flag(draw):
                self.tensor(arg.name)
            else:
                self.drawn[arg.name] = None
        elif kind == "List[Tensor]":
            first = self._first
            self.drawn[arg.name] = [operand(draw, ctx, dtypes_ok=self.spec.dtypes, like=first)
                                    for _ in range(draw(integers(1, 3)))]
        elif kind in ("int", "SymInt"):
            self.drawn[arg.name] = draw(integers(0, 4))
        elif kind in ("float", "Scalar"):
            self.drawn[arg.name] = choose(draw, _FLOATS) if flag(draw) else draw(scalars(torch.float32))
        elif kind == "bool":
            self.drawn[arg.name] = bool(flag(draw))
        elif kind in ("List[int]", "List[SymInt]"):
            shape = list(self._first.tensor.shape) if self._first is not None and flag(draw) else None
            self.drawn[arg.name] = shape if shape is not None else [draw(integers(1, 4)) for _ in range(draw(integers(1, 3)))]
        elif kind == "ScalarType":
            self.drawn[arg.name] = draw(ctx.dtypes)
        elif kind.startswith("Optional["):
            self.drawn[arg.name] = None
        elif arg.has_default_value():
            return
        else:
            raise StepRejected(f"{self.spec.name}: no drawing rule for argument {arg.name!r} of type {kind}; "
                               f"give the op an op_rule")

    def arguments(self) -> tuple:
        """``(args, kwargs)`` in schema order: positional up to the first argument left out."""
        args, kwargs, gap = [], {}, False
        for arg in self.schema.arguments:
            if arg.name not in self.drawn:
                gap = True
                continue
            if arg.kwarg_only or gap:
                kwargs[arg.name] = self.drawn[arg.name]
            else:
                args.append(self.drawn[arg.name])
        return tuple(args), kwargs


def rule_custom(draw, ctx: DrawContext, spec: C.OpSpec):
    """``(args, kwargs)`` of one call of a user's op: its op_rule, then the schema."""
    call = CallDraw(draw, ctx, spec)
    rule = rule_of(spec.overload)
    if rule is not None:
        try:
            rule(call)
        except RuleError as exc:  # the rule's own mistake (an argument the schema lacks): the op's line says it
            note_custom_call(spec.overload, f"op_rule: {exc}")
            raise
    for arg in call.schema.arguments:
        if arg.name not in call.drawn:
            call.by_schema(arg)
    return call.arguments()
