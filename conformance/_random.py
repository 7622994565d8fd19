"""Random ops in a harness run draw in their results' logical order, whatever the memory layout.

Eager fills a random op's result in memory order (``rand_like`` of a transposed tensor, the mask of
``native_dropout`` of a view), so a pass that changes the layout of a random op's operand (a view
made a contiguous ``*_copy``: torch's ``ReplaceViewOpsWithViewCopyOpsPass``) moves every drawn number
to another element: the same distribution, other values. Such a pass keeps the program's meaning;
one that drops, duplicates, merges, reorders or transposes a draw does not. Within ``logical_order``
a random op with a non-contiguous tensor operand draws on contiguous copies of its operands, and its
results take the layout eager gives them: the number at each logical index is then the same for any
layout, and the drawn numbers and the generator's state after the op are eager's count.
"""

from __future__ import annotations

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode


def draws_random(target) -> bool:
    """An op that draws from the generator (``rand_like``, ``native_dropout``); attention ops carry
    the same tag for their dropout, and draw nothing at ``dropout_p=0``, as drawn graphs call them."""
    return (isinstance(target, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in target.tags
            and "scaled_dot_product" not in target.__name__)


def has_random_ops(gm) -> bool:
    """Whether ``gm`` or a subgraph it holds (a region's body) calls a random op."""
    return any(n.op == "call_function" and draws_random(n.target)
               for m in gm.modules() if isinstance(m, torch.fx.GraphModule) for n in m.graph.nodes)


# a region's higher-order op: (its body's position, the context its body runs in)
_REGIONS = {"wrap_with_set_grad_enabled": (1, torch.set_grad_enabled), "wrap_with_autocast": (4, torch.autocast)}


def _contiguous(obj):
    return pytree.tree_map_only(torch.Tensor, lambda t: t.contiguous(), obj)


class logical_order(TorchDispatchMode):  # noqa: N801 - used as a context manager, like torch's modes
    """The mode of the module docstring (entered only around graphs that hold random ops). A region's
    higher-order op (``wrap_with_set_grad_enabled``, ``wrap_with_autocast``: its body may draw) runs
    its body within the mode, under the region's mode, as the op itself would; other higher-order
    ops (a lowered graph's ``triton_kernel_wrapper_mutation``) run as they would without it."""

    supports_higher_order_operators = True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        region = _REGIONS.get(getattr(func, "__name__", None)) if isinstance(func, torch._ops.HigherOrderOperator) \
            else None
        if region is not None:
            at = region[0]  # the body's position: the region's mode arguments come first
            with region[1](*args[:at]), self:
                return args[at](*args[at + 1:])
        if not draws_random(func):
            return func(*args, **kwargs)
        tensors = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        if all(t.is_contiguous() for t in tensors):
            return func(*args, **kwargs)
        if func._schema.is_mutable:  # bernoulli_, uniform_, normal_...: the first operand is written
            target = args[0]
            drawn = target.contiguous()
            func(drawn, *_contiguous(tuple(args[1:])), **_contiguous(kwargs))
            return target.copy_(drawn)
        cuda = sorted({t.device.index or 0 for t in tensors if t.device.type == "cuda"})
        with torch.random.fork_rng(devices=cuda, device_type="cuda"):  # eager's layouts; its draws undone
            shaped = func(*args, **kwargs)
        drawn = func(*_contiguous(args), **_contiguous(kwargs))
        flat_shaped, spec = pytree.tree_flatten(shaped)
        placed = [s.copy_(d) if isinstance(s, torch.Tensor) and isinstance(d, torch.Tensor) and s.shape == d.shape
                  and s.dtype == d.dtype else d for s, d in zip(flat_shaped, pytree.tree_leaves(drawn))]
        return pytree.tree_unflatten(placed, spec)
