"""``meta['val']`` for drawn graphs: fake tensors read off eager values, in one shared mode.

Sharing one mode across draws matters: passes that fake-propagate (Inductor's, Torch-TensorRT's)
expect every ``meta['val']`` of a graph to come from the same mode, and creating a mode costs.
Fakes are read off the eager value instead of re-running each op under the fake mode (that costs
~80-300 us a node), and fakes of aliasing tensors share one fake storage, so aliasing shows in
``meta['val']`` the way passes look for it (``StorageWeakRef`` of the untyped storage).
"""

from __future__ import annotations

import functools

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from .device import RNG_SEED, device_of, seeded
from .modes import modes_kept


@functools.lru_cache(maxsize=1)
def shared_fake_mode() -> FakeTensorMode:
    """The FakeTensorMode every drawn graph's ``meta['val']`` belongs to."""
    return FakeTensorMode(allow_non_fake_inputs=True)


class FakeViews:
    """Makes fake tensors with a real tensor's metadata; one fake storage per real storage."""

    def __init__(self, fake_mode: FakeTensorMode | None = None):
        self.fake_mode = fake_mode or shared_fake_mode()
        self._storage = {}

    def fake_of(self, t: torch.Tensor) -> FakeTensor:
        st = t.untyped_storage()
        key = (st.data_ptr(), t.dtype) if st.nbytes() else None
        base = self._storage.get(key) if key is not None else None
        if base is None:
            base = torch.empty(st.nbytes() // t.element_size(), dtype=t.dtype, device="meta")
            if key is not None:
                self._storage[key] = base
        view = base.as_strided(t.shape, t.stride(), t.storage_offset())
        return FakeTensor(self.fake_mode, view, t.device)


def attach_meta(gm: fx.GraphModule, example_inputs) -> fx.GraphModule:
    """Set ``meta['val']`` on every tensor-valued node of ``gm`` (a tuple of them where a node has
    several results) from one eager run on ``example_inputs`` (which it may mutate: pass copies).
    Returns ``gm``.

    >>> import torch, torch.fx as fx
    >>> gm = fx.symbolic_trace(lambda x: torch.ops.aten.sin.default(x))
    >>> attach_meta(gm, (torch.ones(2),)).graph.find_nodes(op="placeholder")[0].meta["val"].shape
    torch.Size([2])
    """
    views = FakeViews()

    class _Record(fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            if isinstance(out, torch.Tensor):
                n.meta["val"] = views.fake_of(out)
            elif isinstance(out, (tuple, list)) and any(isinstance(o, torch.Tensor) for o in out):
                # a call with several results (``native_layer_norm``, ``max.dim``): a tuple of fakes,
                # as tracers leave it (passes read ``node.meta["val"][i]``)
                n.meta["val"] = type(out)(views.fake_of(o) if isinstance(o, torch.Tensor) else o for o in out)
            return out

    # the graph may switch grad mode or autocast: they are put back; random ops draw from
    # RNG_SEED's state, not the caller's
    with modes_kept(), seeded(device_of(example_inputs), RNG_SEED):
        _Record(gm).run(*example_inputs)
    return gm
