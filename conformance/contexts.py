"""Contexts torch's own passes run inside, for ``--context`` / ``verify(context=...)``.

A context factory is called once per pass call, with the names it asks for among ``gm`` (the copy
the pass gets) and ``fake_mode`` (the graph's FakeTensorMode, ``conformance.fake_mode_of``), and
returns a context manager the pass runs inside (the graph runs are outside it).

``inductor``: what Inductor's compile step sets before it runs its graph passes, the graph's fake
mode installed as ``V.fake_mode``, with ``config.fallback_random`` on. ``joint_graph_passes``,
``post_grad_passes`` and the pattern replacements that trace a replacement graph read the fake
mode; ``fallback_random`` keeps eager's random numbers (without it ``replace_random_passes`` swaps
``aten.rand`` for Inductor's own generator by design, which no equivalence check can compare)::

    fx-conformance verify torch._inductor.fx_passes.post_grad:post_grad_passes --ir post-grad \\
        --pass-arg is_inference=True --context conformance.contexts:inductor
"""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def inductor(fake_mode):
    """Inductor's virtualized ``V.fake_mode`` set to the graph's fake mode (a new one when the graph
    has none), as ``compile_fx`` does around its graph passes, and ``config.fallback_random``."""
    from torch._inductor import config
    from torch._inductor.virtualized import V
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = fake_mode if fake_mode is not None else FakeTensorMode(allow_non_fake_inputs=True)
    with V.set_fake_mode(mode), config.patch(fallback_random=True):
        yield


__all__ = ["inductor"]
