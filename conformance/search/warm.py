"""Warming this process before it forks search drivers.

A forked driver starts from this process's memory, and what its first graph sets up is lost with it:
the first ``FakeTensorMode`` imports ``torch._dynamo``, Hypothesis', the generator's and the IR
tracer's caches fill. In a process that had never drawn a graph (a test run of many ``verify()``
calls, each with ``focus="none"`` or discovery read from the cache), every search paid that again in
its driver: 2.2-2.5 s of CPU on the 2-core AMD EPYC for a search that finds its bug in the first
graph, 0.2-0.4 s once this process had drawn one graph itself.

So before its first fork for an IR, this process draws one small graph in that IR, of ops that run
anywhere without harm (``add``, ``mul``, ``relu`` on ordinary values): no pass is called here, and
nothing a drawn graph could crash torch with runs outside a driver.
"""

from __future__ import annotations

import functools

import torch

from strategies import graphs

from .triggers import _draw_cases

aten = torch.ops.aten

_SAFE_OPS = (aten.add.Tensor, aten.mul.Tensor, aten.relu.default)


@functools.cache
def warm_for_drivers(ir: str) -> None:
    """Draw one graph of ``_SAFE_OPS`` in ``ir`` here, once per process and IR (on the CPU)."""
    _draw_cases(graphs(ops=list(_SAFE_OPS), ir=ir, special_values=False, constants=False, max_nodes=3), 1, 0)
