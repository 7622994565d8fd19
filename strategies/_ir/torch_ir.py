"""The torch IR: FX graphs as ``torch.fx.symbolic_trace`` makes them from ``nn.Module``s.

This is what pre-grad and module-level passes take (``torch.fx.experimental.optimization.fuse``,
``NormalizeArgs``, Inductor's pre-grad passes): ``call_module`` nodes on leaf ``torch.nn`` modules
(Conv, BatchNorm, Linear, Dropout, Identity...), ``call_function`` on ``torch.*``,
``torch.nn.functional.*`` and ``operator.*``, ``call_method`` on Tensor methods (``.view``,
``.size``...), and ``get_attr`` of the module's Parameters. No node is an ATen overload, no node
has ``meta['val']``, and Python values are baked into the code (``self.training`` as
``F.dropout``'s ``training=``, literal shapes, and the defaults of ``F`` functions as keywords).
``torch_ir_errors`` states the invariants (the table ``INVARIANTS``).

How a module is drawn (and so how it shrinks): its mode (eval in five draws in six), dtype
(float64 in one in five), the first input's family (features ``(N, F)``, sequence ``(N, C, L)``
or image ``(N, C, H, W)``), the inputs' shapes and layouts, then a layer count and the layers,
each its own span: a kind from ``LAYERS`` (``torch_layers.py``) by weight, an operand among the
values so far that the kind takes (the latest, by default), and the kind's own choices. Each layer
runs on stand-ins of the inputs as it is drawn, so later layers fit its result, and one that does
not fit (a view of a transposed input, a train-mode batch norm over one value per channel) is left
out. The inputs'
values come last (they take most of the choices; drawn earlier, a change to them would misalign
every layer's), then the seed of a ``torch.Generator`` that sets every parameter and buffer
(batch-norm running statistics random, the variance positive, so a fold that ignores them changes
values). ``DrawnNet.forward`` interprets the fixed list of layers; ``symbolic_trace`` unrolls it,
and ``source_module(gm)`` keeps the module. Shrinking deletes layers (a layer's kind shrinks to
none), moves kinds towards the first row and operands to the latest value: a failing graph
shrinks to the layer or pair that fails, on the first input.
"""

from __future__ import annotations

import operator
import threading
import weakref

import torch
import torch.fx as fx
import torch.nn as nn
from hypothesis import reject
from hypothesis import strategies as st

from .._draws import choose, flag, integers, neutral_or_index
from .._errors import InvalidArgument
from .._tensors import draw_layout, tensor_with_layout
from .._validation import check_bool, check_int_range
from .._draw.case import GraphCase, _rebuild
from .._draw.features import graph_features
from .torch_layers import FAMILIES, KINDS, LAYERS, NETS, DrawnNet, ModuleBuilder, first_shape

MAX_LAYERS = 32


# --- the strategy --------------------------------------------------------------------------------


def torch_graph_cases(*, max_layers: int = 8, special_values: bool = True) -> st.SearchStrategy:
    """Draw a ``GraphCase`` whose ``gm`` is ``fx.symbolic_trace`` of a drawn ``nn.Module``.

    Args:
        max_layers: the most layers a module has (a conv -> batch norm pair is one), 1-32.
        special_values: inputs may hold NaN, +-inf, -0.0, subnormals, huge and tiny values.

    The case has 1-3 float32 (sometimes float64) inputs. ``gm.meta["ir"]`` is "torch", and
    ``source_module(gm)`` the module it was traced from. The module is in eval mode in most draws
    and in train mode in some (``gm.training``, and each submodule's). Shrinks by deleting layers,
    then towards the first kinds of ``LAYERS`` on the latest value.

    >>> from hypothesis import given
    >>> @given(torch_graph_cases(max_layers=3))
    ... def test_runs(case):
    ...     case.gm(*case.fresh_inputs())
    >>> test_runs()
    """
    check_int_range(max_layers, "max_layers", min_value=1)
    if max_layers > MAX_LAYERS:
        raise InvalidArgument(f"max_layers={max_layers!r} must be at most {MAX_LAYERS} (shrinking and speed suffer)")
    check_bool(special_values, "special_values")
    return _torch_cases(max_layers, special_values)


@st.composite
def _torch_cases(draw, max_layers: int, special_values: bool):
    training = draw(integers(0, 5)) == 5
    dtype = torch.float64 if draw(integers(0, 4)) == 4 else torch.float32
    first = first_shape(draw, FAMILIES.draw(draw))
    shapes = [first] + [first[-choose(draw, range(len(first), 0, -1)):] for _ in range(draw(integers(0, 2)))]
    layouts = [draw_layout(draw, shape) for shape in shapes]
    net = NETS[len(shapes)](training)
    stand_ins = [lay.apply(torch.zeros(lay.base_shape(s), dtype=dtype)) for s, lay in zip(shapes, layouts)]
    b = ModuleBuilder(net, dtype, stand_ins)
    # The layer count first (the largest of three draws: Hypothesis favours the lower bound, and
    # small modules find little), then each layer as its own span, so the shrinker deletes or
    # simplifies layers one at a time; a layer that does not fit is retried.
    target = max(draw(integers(1, max_layers)) for _ in range(3))
    outer, _CURRENT.builder = getattr(_CURRENT, "builder", None), b
    try:
        with torch.random.fork_rng(devices=[]):  # modules' default inits and train-mode dropout draw from it
            for _ in range(3 * target):
                if b.n_layers >= target:
                    break
                draw(_LAYER)
    finally:
        _CURRENT.builder = outer
    if not b.n_layers:
        reject()
    # Outputs: the last value, and each earlier result nothing reads in one draw in two.
    used = {j for _, operands in net.layers for j in operands}
    last = len(b.values) - 1
    net.outputs = tuple(j for j in range(len(shapes), last) if j not in used and not flag(draw)) + (last,)
    recipes = []
    for shape, layout in zip(shapes, layouts):
        _, base, _ = tensor_with_layout(draw, dtype, layout.base_shape(shape), special_values=special_values,
                                        noncontiguous=False)
        recipes.append((base, layout))
    b.fill(draw(integers(0, 2**16 - 1)))
    gm = fx.symbolic_trace(net)
    gm.meta["ir"] = "torch"
    _SOURCES[gm] = net
    recipes = tuple(recipes)
    return GraphCase(gm, _rebuild(recipes), _features(gm, recipes), recipes)


@st.composite
def _layer(draw) -> None:
    b, row = _CURRENT.builder, KINDS.draw(draw)
    if row is None:
        return
    _, _, ranks, drawer = row
    fits = [i for i, v in enumerate(b.values) if v.ndim in ranks]
    if fits:
        i = neutral_or_index(draw, len(fits))
        drawer(draw, b, fits[-1] if i is None else fits[i])


def source_module(gm: fx.GraphModule) -> DrawnNet | None:
    """The module a drawn ``gm`` was traced from (sharing its submodules and Parameters), else None.

    Kept beside the graph, not in ``gm.meta``: passes deep-copy graphs, and would copy it too."""
    return _SOURCES.get(gm)


_SOURCES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

# One layer strategy for every draw, reading the module being drawn from _CURRENT (as _draw/draw.py's
# _STEP does: a strategy made per layer is validated anew each time).
_LAYER = _layer()
_CURRENT = threading.local()


def _features(gm: fx.GraphModule, recipes) -> frozenset:
    """``graph_features`` (its run leaves the module's state as drawn: a train-mode batch norm writes
    its running statistics), and the tags it reads off ATen schemas, from torch-level nodes."""
    saved = [t.clone() for t in gm.buffers()]
    try:
        found = set(graph_features(gm, _rebuild(recipes)))
    finally:
        with torch.no_grad():
            for t, s in zip(gm.buffers(), saved):
                t.copy_(s)
    for n in gm.graph.nodes:
        if n.target in ("view", "reshape", "permute", "transpose", torch.flatten) or \
                (n.op == "call_module" and isinstance(gm.get_submodule(n.target), nn.Flatten)):
            found.add("view")
        elif n.target in ("sum", "mean", torch.sum):
            found.add("reduction")
        elif n.target in (operator.add, operator.mul, operator.sub) and \
                any(isinstance(a, (int, float)) for a in n.args):
            found.add("scalar-arg")
    return frozenset(found)


# --- invariants ----------------------------------------------------------------------------------


def _label(i: int, n: fx.Node) -> str:
    args = ", ".join([*(f"%{a.name}" if isinstance(a, fx.Node) else repr(a) for a in n.args),
                      *(f"{k}={v!r}" for k, v in n.kwargs.items())])
    target = n.target if isinstance(n.target, str) else getattr(n.target, "__name__", repr(n.target))
    return f"node {i} %{n.name}: {n.op} {target}({args})"


def _lint(gm):
    try:
        gm.graph.lint()
    except Exception as exc:  # noqa: BLE001 - lint raises RuntimeError, AssertionError, KeyError...
        first = (str(exc).strip().splitlines() or ["(no message)"])[0][:300]
        yield f"graph.lint() raised {type(exc).__name__}: {first}, but should pass"


def _above_dispatch(gm):
    for i, n in enumerate(gm.graph.nodes):
        if n.op == "call_function" and isinstance(n.target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
            yield (f"target={n.target}, but should be a torch-level callable (torch.*, F.*, operator.*): ATen "
                   f"overloads are what make_fx and AOTAutograd trace, not symbolic_trace [{_label(i, n)}]")


def _module_targets(gm):
    for i, n in enumerate(gm.graph.nodes):
        if n.op != "call_module":
            continue
        try:
            m = gm.get_submodule(n.target)
        except (AttributeError, TypeError):
            yield f"call_module target={n.target!r}, but should name a submodule of gm [{_label(i, n)}]"
            continue
        if isinstance(m, (nn.Sequential, nn.ModuleList, nn.ModuleDict)):
            yield (f"call_module target={n.target!r} is a {type(m).__name__}, but should be a leaf module "
                   f"(symbolic_trace inlines containers) [{_label(i, n)}]")


def _attr_targets(gm):
    for i, n in enumerate(gm.graph.nodes):
        if n.op == "get_attr":
            try:
                value = operator.attrgetter(n.target)(gm)
            except (AttributeError, TypeError):
                value = None
            if not isinstance(value, torch.Tensor):
                yield (f"get_attr target={n.target!r} is a {type(value).__name__}, but should be a Parameter "
                       f"or buffer of gm [{_label(i, n)}]")


def _method_targets(gm):
    for i, n in enumerate(gm.graph.nodes):
        if n.op == "call_method" and not (isinstance(n.target, str) and hasattr(torch.Tensor, n.target)):
            yield f"call_method target={n.target!r}, but should name a torch.Tensor method [{_label(i, n)}]"


def _one_mode(gm):
    for name, m in gm.named_modules():
        if m.training != gm.training:
            yield (f"submodule {name} training={m.training}, but should be {gm.training} as gm's (a module is "
                   f"traced in one mode, which F.dropout(training=self.training) baked in)")


# The invariants of torch IR: (name, what holds, checker yielding one line per break).
INVARIANTS = (
    ("lint", "the graph lints (definition before use, one output, targets that exist)", _lint),
    ("above-dispatch", "no call_function target is an ATen OpOverload or packet", _above_dispatch),
    ("module-targets", "every call_module target names a leaf submodule", _module_targets),
    ("attr-targets", "every get_attr target names a Parameter or buffer", _attr_targets),
    ("method-targets", "every call_method target names a torch.Tensor method", _method_targets),
    ("one-mode", "every submodule is in gm's mode (train or eval)", _one_mode),
)


def torch_ir_errors(gm: fx.GraphModule) -> list:
    """What in ``gm`` breaks the invariants of torch IR (``INVARIANTS``): one line each, [] when none.

    >>> import torch
    >>> torch_ir_errors(fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())))
    []
    """
    return [message for _, _, checker in INVARIANTS for message in checker(gm)]


__all__ = ["INVARIANTS", "LAYERS", "DrawnNet", "source_module", "torch_graph_cases", "torch_ir_errors"]
