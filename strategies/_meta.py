"""The one FakeTensorMode that every drawn graph's ``meta['val']`` belongs to.

Sharing one mode across draws matters: passes that fake-propagate (Inductor's, Torch-TensorRT's)
expect every ``meta['val']`` of a graph to come from the same mode, and creating a mode costs.
The values themselves are built by the graph builder from the eager values (``_builder.py``).
"""

from __future__ import annotations

import functools

from torch._subclasses.fake_tensor import FakeTensorMode


@functools.lru_cache(maxsize=1)
def shared_fake_mode() -> FakeTensorMode:
    """The FakeTensorMode every drawn graph's ``meta['val']`` belongs to."""
    return FakeTensorMode(allow_non_fake_inputs=True)
