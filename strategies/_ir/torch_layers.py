"""The layers a drawn ``nn.Module`` is made of (``LAYERS``), and the module they make up (``DrawnNet``).

Each row of ``LAYERS`` is a kind of layer as models write them: a leaf ``torch.nn`` module (Conv,
BatchNorm, Linear, Dropout...), a ``torch.nn.functional`` call, a Tensor method or an ``operator``
on the values so far, with its weight, the ranks of the value it takes, and how it is drawn
(``ModuleBuilder`` adds its submodules and parameters and runs it on stand-ins of the inputs, so the
next layer fits its result). ``torch_ir.py`` draws modules from these rows and traces them.
"""

from __future__ import annotations

import math
import operator

import torch
import torch.nn as nn
import torch.nn.functional as F

from .._draws import Weighted, choose, flag, integers

MAX_NUMEL = 1024  # elements a drawn value may hold: graphs stay fast, and what failures shrink to


class DrawnNet(nn.Module):
    """A drawn module: ``forward`` runs ``self.layers`` (``(fn, operand indices)``) in order over the
    inputs and the results so far, and returns the values ``self.outputs`` names."""

    def __init__(self, training: bool):
        super().__init__()
        self.layers, self.outputs = [], ()
        self.train(training)

    def run(self, *inputs):
        values = list(inputs)
        for fn, operands in self.layers:
            values.append(fn(self, *(values[i] for i in operands)))
        outs = tuple(values[i] for i in self.outputs)
        return outs[0] if len(outs) == 1 else outs


# One class per arity: symbolic_trace makes one placeholder per named argument (not a ``*args``).
class _Net1(DrawnNet):
    def forward(self, x0):
        return self.run(x0)


class _Net2(DrawnNet):
    def forward(self, x0, x1):
        return self.run(x0, x1)


class _Net3(DrawnNet):
    def forward(self, x0, x1, x2):
        return self.run(x0, x1, x2)


NETS = {1: _Net1, 2: _Net2, 3: _Net3}


class ModuleBuilder:
    """The module being drawn: its submodules and parameters, and the values run so far."""

    def __init__(self, net: DrawnNet, dtype: torch.dtype, values: list):
        self.net, self.dtype, self.values = net, dtype, values  # values: the inputs, then one per layer
        self.n_layers = 0
        self.fills: list = []  # (name, scale): what ``fill`` sets, in order (scale None: a module)
        self._added: list = []  # the names this layer added

    def _name(self, kind: str) -> str:
        name = f"{kind}{len(self.net._modules) + len(self.net._parameters)}"
        self._added.append(name)
        return name

    def module(self, kind: str, module: nn.Module) -> str:
        name = self._name(kind)
        self.net.add_module(name, module.to(self.dtype).train(self.net.training))
        self.fills.append((name, None))
        return name

    def param(self, kind: str, shape: tuple, scale: float = 1.0) -> str:
        name = self._name(kind)
        self.net.register_parameter(name, nn.Parameter(torch.empty(shape, dtype=self.dtype)))
        self.fills.append((name, scale))
        return name

    def add(self, fn, operands: tuple) -> None:
        """Run ``fn`` on the operands; keep it as a layer if its result is a value a graph can hold,
        else take back what the layer added."""
        added, self._added = self._added, []
        try:
            with torch.no_grad():
                out = fn(self.net, *(self.values[i] for i in operands))
            fits = isinstance(out, torch.Tensor) and out.ndim > 0 and 0 < out.numel() <= MAX_NUMEL
        except (RuntimeError, ValueError, IndexError):  # what torch raises on a layer that does not fit
            fits = False
        if not fits:
            for name in added:
                delattr(self.net, name)
            self.fills = [f for f in self.fills if f[0] not in added]
            return
        self.values.append(out)
        self.net.layers.append((fn, operands))
        self.n_layers += 1

    def fill(self, seed: int) -> None:
        """Set every parameter and buffer from a generator seeded with ``seed``, layer by layer."""
        gen = torch.Generator().manual_seed(seed)

        def randn(t, scale=1.0):
            return torch.randn(t.shape, generator=gen, dtype=t.dtype) * scale

        def rand(t, lo, hi):
            return lo + (hi - lo) * torch.rand(t.shape, generator=gen, dtype=t.dtype)

        with torch.no_grad():
            for name, scale in self.fills:
                target = getattr(self.net, name)
                if scale is not None:
                    target.copy_(randn(target, scale))
                    continue
                norm = isinstance(target, (nn.modules.batchnorm._BatchNorm, nn.LayerNorm))
                for pname, p in target.named_parameters():
                    fan_in = max(1, p[0].numel()) if p.ndim else 1
                    p.copy_(rand(p, 0.5, 1.5) if norm and pname == "weight"
                            else randn(p, 1 / math.sqrt(fan_in)) if pname == "weight" else randn(p, 0.5))
                if getattr(target, "running_mean", None) is not None:
                    target.running_mean.copy_(randn(target.running_mean))
                    target.running_var.copy_(rand(target.running_var, 0.25, 2.25))


# --- layers --------------------------------------------------------------------------------------
# A drawer takes (draw, builder, operand index) and adds its layer with ``b.add(fn, operands)``;
# ``fn(net, *operands)`` is what ``forward`` runs and symbolic_trace records. Shapes and other
# Python values are read at drawing time, so the traced code holds them as literals.


def _module_layer(kind: str, make):
    """The drawer of a layer that is one module, ``make(draw, x)`` for the operand's value ``x``."""
    def drawer(draw, b, i):
        name = b.module(kind, make(draw, b.values[i]))
        b.add(lambda net, x: getattr(net, name)(x), (i,))
    return drawer


def _one_tensor(b, t):
    """The layer function of ``t``: a module class (a new submodule), ``torch.Tensor.relu`` (the
    method ``x.relu()``), ``F.dropout`` (``training=self.training``), or a function of one tensor."""
    if isinstance(t, type):
        name = b.module("drop" if t is nn.Dropout else "act", t())
        return lambda net, x: getattr(net, name)(x)
    if t is torch.Tensor.relu:
        return lambda net, x: x.relu()
    if t is F.dropout:
        return lambda net, x: F.dropout(x, 0.5, training=net.training)
    return lambda net, x: t(x)


_ACTIVATIONS = (nn.ReLU, nn.GELU, nn.Sigmoid, nn.Tanh)
_FUNCTIONAL_ACTIVATIONS = (F.relu, F.gelu, torch.relu, torch.Tensor.relu)
_TAILS = (*_ACTIVATIONS, nn.Dropout, *_FUNCTIONAL_ACTIVATIONS, F.dropout)


def _functional_activation(draw, b, i):
    b.add(_one_tensor(b, choose(draw, _FUNCTIONAL_ACTIVATIONS)), (i,))


def _conv_module(draw, x) -> nn.Module:
    c = x.shape[1]
    groups = choose(draw, [g for g in range(1, c + 1) if c % g == 0])
    out = groups * draw(integers(1, max(1, 8 // groups)))
    cls = nn.Conv1d if x.ndim == 3 else nn.Conv2d
    return cls(c, out, draw(integers(1, 3)), stride=draw(integers(1, 2)), padding=draw(integers(0, 1)),
               groups=groups, bias=flag(draw))


def _bn_module(draw, rank: int, c: int) -> nn.Module:
    # affine=False and track_running_stats=False (a norm fuse must leave) one time in eight each
    return (nn.BatchNorm2d if rank == 4 else nn.BatchNorm1d)(
        c, eps=choose(draw, (1e-5, 1e-3, 0.1)), affine=draw(integers(0, 7)) != 7,
        track_running_stats=draw(integers(0, 7)) != 7)


def _pair(draw, b, first: tuple, second: tuple, i: int) -> None:
    """``tail(second(first(x)))``, one layer (the first's result has no other user); the tail, in
    one draw in two, an activation or dropout as conv-bn-act and linear-bn-act-dropout blocks have."""
    f, s = b.module(*first), b.module(*second)
    tail = _one_tensor(b, choose(draw, _TAILS)) if flag(draw) else (lambda net, x: x)
    b.add(lambda net, x: tail(net, getattr(net, s)(getattr(net, f)(x))), (i,))


def _conv_bn(draw, b, i):
    conv = _conv_module(draw, b.values[i])
    _pair(draw, b, ("conv", conv), ("bn", _bn_module(draw, b.values[i].ndim, conv.out_channels)), i)


def _linear_bn(draw, b, i):
    x = b.values[i]
    if x.ndim == 3:  # BatchNorm1d normalises dim 1 of (N, C, L), the Linear the last: C == out half the time
        lin, c = nn.Linear(x.shape[-1], x.shape[1] if flag(draw) else draw(integers(1, 8)), bias=flag(draw)), x.shape[1]
    else:
        lin = nn.Linear(x.shape[-1], draw(integers(1, 8)), bias=flag(draw))
        c = lin.out_features
    _pair(draw, b, ("linear", lin), ("bn", _bn_module(draw, x.ndim, c)), i)


# The layers that are one module: (draw, x) -> the module, x the operand's value.
_conv = _module_layer("conv", _conv_module)
_activation = _module_layer("act", lambda draw, x: choose(draw, _ACTIVATIONS)())
_linear = _module_layer("linear", lambda draw, x: nn.Linear(x.shape[-1], draw(integers(1, 8)), bias=flag(draw)))
_batch_norm = _module_layer("bn", lambda draw, x: _bn_module(draw, x.ndim, x.shape[1]))
_layer_norm = _module_layer("norm", lambda draw, x: nn.LayerNorm(tuple(x.shape[-draw(integers(1, min(2, x.ndim))):]),
                                                                 elementwise_affine=draw(integers(0, 3)) != 3))
_dropout = _module_layer("drop", lambda draw, x: nn.Dropout(choose(draw, (0.5, 0.1, 0.0))))
_identity = _module_layer("id", lambda draw, x: nn.Identity())
_flatten_module = _module_layer("flat", lambda draw, x: nn.Flatten())
_pool = _module_layer("pool", lambda draw, x: choose(draw, (nn.MaxPool2d, nn.AvgPool2d))(
    draw(integers(1, 2)), stride=choose(draw, (None, 1, 2))))


def _f_linear(draw, b, i):
    d = b.values[i].shape[-1]
    w = b.param("weight", (draw(integers(1, 8)), d), 1 / math.sqrt(d))
    bias = b.param("bias", (getattr(b.net, w).shape[0],), 0.5) if flag(draw) else None
    b.add(lambda net, x: F.linear(x, getattr(net, w), bias and getattr(net, bias)), (i,))


def _f_layer_norm(draw, b, i):
    shape = (b.values[i].shape[-1],)
    w, bias = (b.param("weight", shape), b.param("bias", shape, 0.5)) if flag(draw) else (None, None)
    eps = choose(draw, (1e-5, 0.1))
    b.add(lambda net, x: F.layer_norm(x, shape, w and getattr(net, w), bias and getattr(net, bias), eps), (i,))


def _softmax(draw, b, i):
    dim = draw(integers(-1, b.values[i].ndim - 1))
    b.add(lambda net, x: F.softmax(x, dim=dim), (i,))


def _attention(draw, b, i):
    """``softmax(q @ k.transpose(-1, -2) * s, dim=-1)``, then ``@ k`` in one draw in two."""
    x = b.values[i]
    j, s = choose(draw, [j for j, v in enumerate(b.values) if v.shape == x.shape]), 1 / math.sqrt(x.shape[-1])
    if flag(draw):
        b.add(lambda net, q, k: torch.matmul(F.softmax(torch.matmul(q, k.transpose(-1, -2)) * s, dim=-1), k), (i, j))
    else:
        b.add(lambda net, q, k: F.softmax(torch.matmul(q, k.transpose(-1, -2)) * s, dim=-1), (i, j))


def _f_dropout(draw, b, i):
    p = choose(draw, (0.5, 0.2))
    b.add(lambda net, x: F.dropout(x, p, training=net.training), (i,))


def _tensor_op(draw, b, i):
    """``op(x, y)``, y a value that broadcasts to x's shape (x itself, an input, an earlier result)."""
    x, op = b.values[i], choose(draw, (torch.add, torch.mul, operator.add, operator.mul, operator.sub))
    j = choose(draw, [j for j, v in enumerate(b.values)
                      if v.ndim <= x.ndim and all(s in (1, t) for s, t in zip(reversed(v.shape), reversed(x.shape)))])
    b.add(lambda net, x, y: op(x, y), (i, j))


def _scalar_op(draw, b, i):
    """``x op s`` or ``s op x`` (the reflected operator), s a Python int or float."""
    op, s = choose(draw, (operator.add, operator.mul, operator.sub)), choose(draw, (2, 0.5, -1, 3.0, 1e-3))
    b.add((lambda net, x: op(s, x)) if flag(draw) else (lambda net, x: op(x, s)), (i,))


def _scale(draw, b, i):
    """``x * self.scale`` (or ``+``; operator or torch function), the Parameter a row or a 0-d tensor."""
    p = b.param("scale", (b.values[i].shape[-1],) if flag(draw) else ())
    op = choose(draw, (operator.mul, torch.mul, operator.add, torch.add))
    b.add(lambda net, x: op(x, getattr(net, p)), (i,))


def _cat(draw, b, i):
    x = b.values[i]
    dim = draw(integers(0, x.ndim - 1))
    j = choose(draw, [j for j, v in enumerate(b.values) if v.ndim == x.ndim
                      and all(a == c for d, (a, c) in enumerate(zip(v.shape, x.shape)) if d != dim)])
    b.add(lambda net, x, y: torch.cat([x, y], dim=dim), (i, j))


def _flatten(draw, b, i):
    start = draw(integers(0, b.values[i].ndim - 1))
    b.add((lambda net, x: torch.flatten(x, start)) if start else (lambda net, x: torch.flatten(x)), (i,))


def _matmul(draw, b, i):
    d = b.values[i].shape[-1]
    w = b.param("weight", (d, draw(integers(1, 8))), 1 / math.sqrt(d))
    b.add(lambda net, x: torch.matmul(x, getattr(net, w)), (i,))


def _reduce(draw, b, i):
    dim, keep = draw(integers(0, b.values[i].ndim - 1)), flag(draw)
    b.add(choose(draw, (
        lambda net, x: torch.sum(x, dim=dim, keepdim=keep),
        lambda net, x: x.sum(dim),
        lambda net, x: x.mean(dim, keepdim=keep),
        lambda net, x: x - x.mean(dim, keepdim=True),  # centring, as normalisations write it
    )), (i,))


def _view(draw, b, i):
    """``x.view(x.size(0), -1)`` (``.reshape`` where x is not contiguous), or a view or reshape to a
    literal shape (two dims merged, or one split)."""
    x = b.values[i]
    how = choose(draw, ("size-view", "reshape", "view", "contiguous-view"))
    shape, d = list(x.shape), draw(integers(0, x.ndim - 1))
    if d < x.ndim - 1 and flag(draw):
        shape[d:d + 2] = [shape[d] * shape[d + 1]]
    elif shape[d] % 2 == 0:
        shape[d:d + 1] = [2, shape[d] // 2]
    shape = tuple(shape)
    if how == "size-view" and not x.is_contiguous():  # as modules write it where view would raise
        b.add(lambda net, x: x.reshape(x.size(0), -1), (i,))
        return
    b.add({"size-view": lambda net, x: x.view(x.size(0), -1), "reshape": lambda net, x: x.reshape(shape),
           "view": lambda net, x: x.view(shape), "contiguous-view": lambda net, x: x.contiguous().view(shape)}[how],
          (i,))


def _permute(draw, b, i):
    rank = b.values[i].ndim
    if flag(draw):
        k = draw(integers(1, rank - 1))  # a rotation by 1..rank-1 is never the identity
        perm = tuple(range(k, rank)) + tuple(range(k))
        b.add(lambda net, x: x.permute(perm), (i,))
    else:
        d0 = draw(integers(0, rank - 2))
        d1 = draw(integers(d0 + 1, rank - 1))
        b.add(lambda net, x: x.transpose(d0, d1), (i,))


ANY, SEQ_OR_IMAGE, BATCHED = (1, 2, 3, 4), (3, 4), (2, 3, 4)

# The layer kinds: (name, weight, ranks of the operand it takes, drawer); a layer shrinks to none,
# then towards the first row. The pairs fuse folds (conv -> batch norm, linear -> batch norm) weigh most, then
# what pre-grad passes remove (dropout, identity): fuse folds a pair in 40-75% of eval-mode graphs
# (150-200 draws; measured with tests/test_torch_ir.py's fuse test).
LAYERS = (
    ("activation", 4, ANY, _activation),                        # nn.ReLU / GELU / Sigmoid / Tanh
    ("conv-bn", 16, SEQ_OR_IMAGE, _conv_bn),                    # ConvNd -> BatchNormNd [-> activation/dropout]
    ("linear-bn", 10, (2, 3), _linear_bn),                      # Linear -> BatchNorm1d [-> ...], also over (N, C, L)
    ("conv", 1, SEQ_OR_IMAGE, _conv),                           # Conv1d / 2d: groups, stride, padding, bias drawn
    ("linear", 2, ANY, _linear),                                # nn.Linear on the last dim
    ("batch-norm", 1, BATCHED, _batch_norm),                    # BatchNorm1d / 2d on its own
    ("layer-norm", 2, ANY, _layer_norm),                        # nn.LayerNorm over the last 1-2 dims
    ("dropout", 3, ANY, _dropout),                              # nn.Dropout: what eval-mode passes remove
    ("identity", 3, ANY, _identity),                            # nn.Identity: what pre-grad passes remove
    ("flatten-module", 3, BATCHED, _flatten_module),            # nn.Flatten (start_dim=1)
    ("pool", 5, (4,), _pool),                                   # nn.MaxPool2d / AvgPool2d
    ("functional-activation", 3, ANY, _functional_activation),  # F.relu, F.gelu, torch.relu, x.relu()
    ("f.linear", 2, ANY, _f_linear),                            # F.linear(x, self.weight, self.bias or None)
    ("f.layer_norm", 2, ANY, _f_layer_norm),                    # F.layer_norm, with Parameters or none
    ("softmax", 2, ANY, _softmax),                              # F.softmax(x, dim=d)
    ("attention", 1, BATCHED, _attention),                      # softmax(q @ k^T * s) [@ k]
    ("f.dropout", 2, ANY, _f_dropout),                          # F.dropout(x, p, training=self.training)
    ("tensor-op", 6, ANY, _tensor_op),                          # torch.add / mul, + * - between tensors
    ("scalar-op", 5, ANY, _scalar_op),                          # + * - with a Python number, either side
    ("scale", 2, ANY, _scale),                                  # x * self.scale, x + self.scale
    ("cat", 2, ANY, _cat),                                      # torch.cat([x, y], dim=d)
    ("flatten", 2, ANY, _flatten),                              # torch.flatten(x[, start_dim])
    ("matmul", 2, ANY, _matmul),                                # torch.matmul(x, self.weight)
    ("reduce", 5, BATCHED, _reduce),                            # torch.sum(dim=), .sum(d), .mean(d, keepdim=)
    ("view", 5, BATCHED, _view),                                # .view(x.size(0), -1), .view, .reshape, .contiguous
    ("permute", 4, BATCHED, _permute),                          # .permute(perm), .transpose(a, b)
)
# The neutral draw (which Hypothesis favours, and what a layer shrinks to first) is no layer.
KINDS = Weighted(LAYERS, [row[1] for row in LAYERS], neutral=None)
FAMILIES = Weighted(("features", "sequence", "image"), (1, 1, 2), neutral="features")  # images: conv, pool


def first_shape(draw, family: str) -> tuple:
    if family == "features":
        return (draw(integers(1, 4)), draw(integers(1, 8)))
    if family == "sequence":
        return (draw(integers(1, 3)), draw(integers(1, 5)), draw(integers(2, 6)))
    return (draw(integers(1, 2)), draw(integers(1, 4)), draw(integers(2, 5)), draw(integers(2, 5)))
