"""Storage identity, tensor metadata, and copies that keep layout and sharing."""

from __future__ import annotations

import torch
from torch.multiprocessing.reductions import StorageWeakRef


def meta(t: torch.Tensor) -> tuple:
    """(sizes, strides, storage offset): what a view replay must reproduce."""
    return tuple(t.shape), tuple(t.stride()), t.storage_offset()


def reach(t: torch.Tensor) -> int:
    """One past the last storage element ``t`` reads (0 when it reads none)."""
    if not t.numel():
        return 0
    return t.storage_offset() + sum((s - 1) * st for s, st in zip(t.shape, t.stride())) + 1


def key(t: torch.Tensor):
    """The storage ``t`` lives on (tensors with equal keys alias)."""
    return StorageWeakRef(t.untyped_storage())


def copies_sharing_storage(values) -> tuple:
    """Copies of ``values`` with the same sizes, strides, offsets, storage sizes and sharing: two
    that were views of one storage are views of one new storage (whatever their dtypes). Non-tensors
    pass through."""
    storages, out = {}, []
    for v in values:
        if not isinstance(v, torch.Tensor):
            out.append(v)
            continue
        k = key(v)
        if k not in storages:
            storages[k] = v.untyped_storage().clone()
        out.append(_on(storages[k], v))
    return tuple(out)


def zeros_like_layout(fakes) -> tuple:
    """Real zero tensors with the layout and storage sharing of ``fakes`` (``meta['val']`` values)."""
    storages, out = {}, []
    for f in fakes:
        k = key(f)
        if k not in storages:
            storages[k] = torch.zeros(f.untyped_storage().nbytes(), dtype=torch.uint8, device=f.device).untyped_storage()
        out.append(_on(storages[k], f))
    return tuple(out)


def _on(storage, like: torch.Tensor) -> torch.Tensor:
    return torch.empty(0, dtype=like.dtype, device=like.device).set_(storage, like.storage_offset(), like.shape,
                                                                      like.stride())
