"""``GraphCase``: a drawn graph, its example inputs and how to rebuild them, and its features."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.fx as fx


@dataclass(frozen=True, eq=False, repr=False)
class GraphCase:
    """A drawn graph: ``gm`` over ``torch.ops.aten`` overloads, its inputs, and its measured features.

    ``example_inputs`` are never run by the strategy; ``fresh_inputs()`` gives identical copies
    (same values, strides and storage offset) for every further run, since a graph may mutate them.
    """

    gm: fx.GraphModule
    example_inputs: tuple
    features: frozenset
    recipes: tuple = field(default=())
    symbolic: object = None  # dynamic graphs: the ``SymbolicShapes`` of the inputs (``_dynamic/symshapes.py``)
    device: str = "cpu"  # the device it was drawn for: where its inputs and constants live

    def fresh_inputs(self) -> tuple:
        """New tensors equal to ``example_inputs`` in values, shape, strides and storage layout."""
        return _rebuild(self.recipes)

    def __repr__(self) -> str:
        ins = ", ".join(f"{_describe(t)}" for t in self.example_inputs)
        code = self.gm.code.strip()
        dims = f", {self.symbolic!r}" if self.symbolic is not None else ""
        return f"GraphCase(features={sorted(self.features)}, inputs=[{ins}]{dims})\n{code}"


def _rebuild(recipes) -> tuple:
    return tuple(layout.apply(base.clone()) for base, layout in recipes)


def _describe(t: torch.Tensor) -> str:
    dt = str(t.dtype).replace("torch.", "")
    extra = "" if t.is_contiguous() else f" stride={t.stride()}"
    return f"{dt}{list(t.shape)}{extra}"
