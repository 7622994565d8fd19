"""Ops whose schema does not say what they do, always decomposed: one row per op, with the reason.

A functionalizer trusts schemas: ``Tensor(a)`` means "a view of a", ``Tensor(a!)`` "writes a", and
no annotation "a new tensor, nothing written". The ops below break that (most are
CompositeImplicitAutograd, so their schema describes no kernel of their own), and the walk replaces
each with ops that do honour their schemas, choosing by what eager actually did on the example
inputs (a view or a copy; running statistics written or not).
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import getitem as _getitem

import torch

from ._storage import key

aten = torch.ops.aten


@dataclass(frozen=True)
class Liar:
    reason: str
    functionalize: object  # (walk, node, real args, real kwargs) -> None


def _view_or_copy(walk, node, args, kwargs):
    """A view of the input where eager gave one, else ``view(clone(x, contiguous))`` as eager's copy."""
    value = node.target(*args, **kwargs)
    src = walk.read(node.args[0])
    if key(value) != key(args[0]):
        src = walk.emit(aten.clone.default, src, memory_format=torch.contiguous_format)
    walk.tensor_defined(node, value, walk.emit(aten.view.default, src, list(value.shape)))


def _self_or_copy(copy):
    """The input itself where eager returned it, else ``copy(walk, src, value)``."""
    def functionalize(walk, node, args, kwargs):
        value = node.target(*args, **kwargs)
        if value is args[0]:
            walk.tensor_defined(node, value, walk.read(node.args[0]))
        else:
            walk.tensor_defined(node, value, copy(walk, walk.read(node.args[0]), value))
    return functionalize


def _exact_copy(walk, src, value):
    """A copy with eager's result's dtype and strides, whatever memory_format asked for them."""
    dst = walk.emit(aten.empty_strided.default, list(value.shape), list(value.stride()), dtype=value.dtype,
                    layout=value.layout, device=value.device)
    return walk.emit(aten.copy.default, dst, src)


def _batch_norm(single_output: bool):
    """``_native_batch_norm_legit_functional`` returns the new running statistics: written back."""
    def functionalize(walk, node, args, kwargs):
        bound = node.target._schema
        names = [a.name for a in bound.arguments]
        real = dict(zip(names, args)) | kwargs
        emitted_args = dict(zip(names, walk.read(node.args))) | walk.read(node.kwargs)
        running_mean, running_var = real["running_mean"], real["running_var"]
        value = node.target(*args, **kwargs)  # eager writes the running statistics now
        if not real["training"] or running_mean is None:
            walk.tensor_defined(node, value, walk.emit(node.target, *walk.read(node.args), **walk.read(node.kwargs)))
            return
        out = walk.emit(aten._native_batch_norm_legit_functional.default, emitted_args["input"],
                        emitted_args["weight"], emitted_args["bias"], emitted_args["running_mean"],
                        emitted_args["running_var"], True, real["momentum"], real["eps"])
        walk.write(running_mean, walk.emit(_getitem, out, 3))
        walk.write(running_var, walk.emit(_getitem, out, 4))
        walk.tensor_defined(node, value, walk.emit(_getitem, out, 0) if single_output else out)
    return functionalize


def _rrelu_with_noise(walk, node, args, kwargs):
    names = [a.name for a in node.target._schema.arguments]
    real = dict(zip(names, args)) | kwargs
    emitted_args = dict(zip(names, walk.read(node.args))) | walk.read(node.kwargs)
    noise = real["noise"]
    out = walk.emit(aten.rrelu_with_noise_functional.default, emitted_args["self"], emitted_args["noise"],
                    real.get("lower", 0.125), real.get("upper", 1.0 / 3.0), real.get("training", False),
                    generator=real.get("generator"))
    value = node.target(*args, **kwargs)
    walk.write(noise, walk.emit(_getitem, out, 1))
    walk.tensor_defined(node, value, walk.emit(_getitem, out, 0))


SCHEMA_LIARS = {
    # Tensor(a) says "a view", but reshape copies when the strides do not allow a view.
    aten.reshape.default: Liar("view when the strides allow it, otherwise a copy; the schema says alias",
                               _view_or_copy),
    # flatten is reshape over a range of dims: a view or a copy, schema says alias.
    aten.flatten.using_ints: Liar("reshape of a dim range: a view or a copy; the schema says alias", _view_or_copy),
    # reshape_as(x, other) is reshape(x, other.shape).
    aten.reshape_as.default: Liar("reshape to other's shape: a view or a copy; the schema says alias",
                                  _view_or_copy),
    # to returns self itself when dtype/device/layout already match, else a new tensor.
    aten.to.dtype: Liar("returns self when nothing changes, otherwise a copy; the schema says alias",
                        _self_or_copy(_exact_copy)),
    aten.to.dtype_layout: Liar("returns self when nothing changes, otherwise a copy; the schema says alias",
                               _self_or_copy(_exact_copy)),
    aten.to.device: Liar("returns self when nothing changes, otherwise a copy; the schema says alias",
                         _self_or_copy(_exact_copy)),
    aten.to.other: Liar("returns self when nothing changes, otherwise a copy; the schema says alias",
                        _self_or_copy(_exact_copy)),
    # type_as(x, other) is x.to(other.dtype).
    aten.type_as.default: Liar("to(other.dtype): self or a copy; the schema promises a new tensor",
                               _self_or_copy(_exact_copy)),
    # contiguous returns self when already contiguous, else a contiguous copy.
    aten.contiguous.default: Liar("returns self when already contiguous, otherwise a copy; the schema says alias",
                                  _self_or_copy(_exact_copy)),
    # In training mode batch norm updates running_mean/running_var in place; no (a!) on either.
    aten.native_batch_norm.default: Liar("writes running_mean and running_var when training, but its schema "
                                         "marks neither as written", _batch_norm(single_output=False)),
    aten.batch_norm.default: Liar("writes running_mean and running_var when training, but its schema marks "
                                  "neither as written", _batch_norm(single_output=True)),
    # torch 2.13 marks noise (b!), but the write is to an argument other than self: no in-place rule
    # expresses it, and earlier releases did not annotate it at all.
    aten.rrelu_with_noise.default: Liar("writes noise, an argument other than self, when training (earlier "
                                        "releases did not annotate the write at all)", _rrelu_with_noise),
}
