"""Storage identity, tensor metadata, and copies that keep layout and sharing."""

from __future__ import annotations

import torch
from torch.multiprocessing.reductions import StorageWeakRef


def meta(t: torch.Tensor) -> tuple:
    """(sizes, strides, storage offset): what a view replay must reproduce."""
    return tuple(t.shape), tuple(t.stride()), t.storage_offset()


def key(t: torch.Tensor):
    """The storage ``t`` lives on (tensors with equal keys alias)."""
    return StorageWeakRef(t.untyped_storage())


def copies_sharing_storage(values) -> tuple:
    """Copies of ``values`` with the same sizes, strides, offsets, storage sizes and sharing: two
    that were views of one storage are views of one new storage. Non-tensors pass through."""
    bases, out = {}, []
    for v in values:
        if not isinstance(v, torch.Tensor):
            out.append(v)
            continue
        k = key(v)
        if k not in bases:
            storage = v.untyped_storage()
            base = torch.empty(storage.nbytes() // v.element_size(), dtype=v.dtype, device=v.device)
            if storage.nbytes():
                base.untyped_storage().copy_(storage)
            bases[k] = base
        out.append(bases[k].as_strided(v.shape, v.stride(), v.storage_offset()))
    return tuple(out)


def zeros_like_layout(fakes) -> tuple:
    """Real zero tensors with the layout and storage sharing of ``fakes`` (``meta['val']`` values)."""
    bases, out = {}, []
    for f in fakes:
        k = key(f)
        if k not in bases:
            bases[k] = torch.zeros(f.untyped_storage().nbytes() // f.element_size(), dtype=f.dtype, device=f.device)
        out.append(bases[k].as_strided(f.shape, f.stride(), f.storage_offset()))
    return tuple(out)
