"""Drawing one ATen graph step by step, from validated options (``aten_graphs``).

How it draws (and so how it shrinks): the graph is a sequence of steps, each one drawn as its own
unit after a "one more?" flag; a step is an op from the catalog whose operands are picked from the
values built so far (earliest first), a duplicate of an earlier node, or a grad-mode region.
Shrinking deletes steps, moves operand choices towards the first input, and moves ops towards the
first row of their category, so a failing graph shrinks to a handful of nodes.

``graphs()`` (``strategies/_graphs.py``) validates its options, finds the device's table and hands
them here; the device probe (``probe.py``) draws here too, with a table that refuses nothing.
"""

from __future__ import annotations

import math
import threading
from dataclasses import replace

import torch
import torch.fx as fx
from hypothesis import reject
from hypothesis import strategies as st

from .._build.builder import INPUT, MAX_NUMEL, MAX_NUMEL_LARGE, GraphBuilder, StepRejected, Value, storage_key
from .._build.device import RNG_SEED, seeded
from .._build.meta import shared_fake_mode
from .._build.modes import current_modes, modes_kept, restore_modes
from .._catalog import vocabulary as C
from .._catalog.aims import aims_of
from .._catalog.custom import custom_rows
from .._catalog.ops import OPS, WEIGHTS, rows_named
from .._draws import Weighted, choose, flag, integers, neutral_or_index
from .._errors import InvalidArgument
from .._tensors import check_dtype, tensor_with_layout
from .._tensors import shapes as _shapes
from .call import call_args
from .operands import DrawContext, complex_input, new_leaf
from .case import GraphCase, _rebuild
from .chains import CHAINS, Chain
from .edges import INVERSES, diamond, edge_at, first_tensor_argument, relate, tensor_arguments
from .features import graph_features
from .focus import Focus
from .hops import HOPS, MAX_SUBGRAPH_NODES, REGION_HOPS, hop_step
from .seeds import seed_step



# Step kinds and their weights (repetition = weight). The first entry is what steps shrink to.
# The families issue 15 added (matmul to random) weigh 1 or 2 against the first version's kinds at
# four times their first weights (an eighth of the steps in all): real graphs are mostly pointwise
# ops and views, the bugs planted in those stay as reachable as they were, and a pass that rewrites
# the rarer families gets them drawn far more often through its focus.
_STEP_WEIGHTS = ((C.POINTWISE, 24), (C.VIEW, 10), (C.REDUCTION, 5), (C.OTHER, 5), ("duplicate", 5),
                 (C.INPLACE, 12), ("grad-region", 4), (C.MATMUL, 2), (C.CONV, 1), (C.NORM, 1), (C.ATTENTION, 1),
                 (C.INDEXING, 1), (C.FACTORY, 1), (C.QUANT, 1), (C.RANDOM, 1), (C.CUSTOM, 24))
# Each higher-order op asked for (graphs(hops=...)): about one step in six of a default draw (one in
# ten put cond in 5 of 40 post-grad graphs at seed 0, as the structures of issue 56 took steps).
_HOP_WEIGHT = 20
# The lower precisions of an autocast region (both devices' autocast takes either), and the rows
# autocast runs in them on the CPU and on CUDA alike (autocast_mode.cpp's lower-precision lists):
# an autocast region's first step is one of these half the time.
AUTOCAST_DTYPES = (torch.bfloat16, torch.float16)
AUTOCAST_CASTS = ("aten.mm.default", "aten.bmm.default", "aten.addmm.default", "aten.baddbmm.default",
                  "aten.scaled_dot_product_attention.default")


class _Config:
    """The validated options of one ``graphs()`` call (a plain class, so its repr stays short)."""

    def __init__(self, rows, dtypes, shapes, *, min_nodes, max_nodes, min_inputs, max_inputs,
                 mutations, special_values, constants, focus=None, focus_rows=(), focus_edges=(), large=False, chains=(),
                 requires_grad=False, device=torch.device("cpu"), run_device=torch.device("cpu"), support=None,
                 hops=(), complex_leaves=False):
        self.rows, self.dtypes, self.shapes = rows, dtypes, shapes
        self.complex_leaves = complex_leaves
        self.hops = hops
        self.device, self.run_device, self.support = device, run_device, support
        self.requires_grad = requires_grad
        self.min_nodes, self.max_nodes = min_nodes, max_nodes
        self.min_inputs, self.max_inputs = min_inputs, max_inputs
        self.mutations, self.special_values, self.constants = mutations, special_values, constants
        self.focus, self.focus_edges = focus, focus_edges
        # Chains that emit two or more focus ops are focus steps too: the pattern in the context
        # decompositions leave it in (linear's mm + add of a bias row, the RMS-norm chain's pow, mean
        # and rsqrt). A chain with one focus op would only dilute the focus (a cast in the RMS chain).
        overloads = {r.overload for r in focus_rows}
        focus_rows = (*focus_rows, *(ch for ch in chains if len(overloads & set(ch.overloads)) >= 2)) \
            if focus_rows else ()
        acting = {r for name in (focus.acting if focus is not None else ()) for r in rows_named(name)}
        self.focus_rows = Weighted(focus_rows, [3 if r in acting else 1 for r in focus_rows]) if focus_rows else None
        self.pair_rows = frozenset(r.overload for name in (focus.pairs if focus is not None else ()) for r in rows_named(name))
        self.large = large
        self.kinds = _step_kinds(rows, chains, mutations, False, hops)
        self.region_kinds = _step_kinds(rows, chains, mutations, True)
        self.by_category = op_tables(rows, chains)
        self.by_overload = {r.overload: r for r in rows}
        self.autocast_rows = [replace(r, dtypes=frozenset({torch.float32})) for r in rows
                              if r.name in AUTOCAST_CASTS and torch.float32 in r.dtypes] if hops else []
        self._subgraph_config = None

    def subgraph_config(self) -> "_Config":
        """What a higher-order op's subgraph is drawn with (``hops.py``): the functional rows (no
        in-place, random or user op, no chain), no new leaves, no higher-order op inside."""
        if self._subgraph_config is None:
            rows = tuple(r for r in self.rows if r.category not in (C.INPLACE, C.RANDOM, C.CUSTOM))
            self._subgraph_config = _Config(
                rows, self.dtypes, self.shapes, min_nodes=1, max_nodes=MAX_SUBGRAPH_NODES, min_inputs=0,
                max_inputs=0, mutations=False, special_values=self.special_values, constants=False,
                large=self.large, device=self.device, run_device=self.run_device, support=self.support,
                complex_leaves=self.complex_leaves)
        return self._subgraph_config

    def __repr__(self) -> str:
        return (f"<{len(self.rows)} ops, nodes {self.min_nodes}..{self.max_nodes}, inputs "
                f"{self.min_inputs}..{self.max_inputs}, mutations={self.mutations}, "
                f"special_values={self.special_values}, constants={self.constants}>")


def op_tables(rows, chains=()) -> dict:
    """Per category, its rows (and chains) drawn by weight (``WEIGHTS``): common ops come up more often."""
    tables = {}
    for c in C.CATEGORIES:
        in_c = [r for r in rows if r.category == c] + [ch for ch in chains if ch.category == c]
        if in_c:
            tables[c] = Weighted(in_c, [WEIGHTS.get(getattr(r, "overload", None), 1) for r in in_c])
    return tables


def _chains(rows: tuple) -> tuple:
    """The chains to draw: those whose every op is among ``rows`` (``empty`` aside, which no row
    draws), so views=False, mutations=False and ops= keep out what they keep out."""
    overloads = {r.overload for r in rows} | {torch.ops.aten.empty.memory_format}
    return tuple(ch for ch in CHAINS if all(o in overloads for o in ch.overloads))


def _step_kinds(rows: tuple, chains: tuple, mutations: bool, in_region: bool, hops: tuple = ()) -> Weighted:
    present = {row.category for row in rows} | {ch.category for ch in chains}  # a chain's kind may have no row
    kinds = [(kind, weight) for kind, weight in _STEP_WEIGHTS
             if kind in present or kind == "duplicate" or (kind == "grad-region" and mutations and not in_region)]
    # after the others: graphs without hops draw as before. A region's higher-order op is drawn as
    # its region (pre-dispatch tracing makes the op of it); a grad region drawn anyway keeps its place
    # and gets the weight of an op asked for.
    asked = [REGION_HOPS.get(hop, hop) for hop in hops]
    kinds = [(k, max(w, _HOP_WEIGHT) if k in asked else w) for k, w in kinds]
    kinds += [(k, _HOP_WEIGHT) for k in asked if k not in [k for k, _ in kinds]]
    return Weighted([k for k, _ in kinds], [w for _, w in kinds], neutral=kinds[0][0])


def _resolve_ops(ops, views: bool, mutations: bool, random: bool = True) -> tuple:
    if ops is None:
        return tuple(row for row in OPS if (views or row.category != C.VIEW) and not row.complex_only
                     and (mutations or row.category != C.INPLACE) and (random or row.category != C.RANDOM))
    if isinstance(ops, (str, C.OpSpec)) or not hasattr(ops, "__iter__"):
        raise InvalidArgument(f"ops={ops!r} must be a list of catalog rows, OpOverloads or names")
    rows = []
    for item in ops:
        named = rows_named(item) or custom_rows(item)
        if not named:
            raise InvalidArgument(
                f"ops={list(ops)!r}: {item!r} is neither in the op catalog nor a registered op; pass rows of "
                f"strategies.OPS, their overloads (torch.ops.aten.add.Tensor) or names ('aten.add.Tensor', or "
                f"'aten.add' for all), or your own ops (torch.ops.mylib.rms_norm.default, 'mylib::rms_norm', "
                f"or a namespace, 'mylib')"
            )
        for row in named:
            if row.category == C.INPLACE and not mutations:
                raise InvalidArgument(f"ops contains the in-place op {row.name}, which needs mutations=True")
            if row.category == C.VIEW and not views:
                raise InvalidArgument(f"ops contains the view op {row.name}, but views=False")
            if row.category == C.RANDOM and not random:
                raise InvalidArgument(f"ops contains the random op {row.name}, which needs random=True")
        rows += named
    if not rows:
        raise InvalidArgument(f"ops={ops!r} is empty; pass at least one op or leave ops=None")
    if all(row.category == C.CUSTOM for row in rows):  # a user's ops are drawn among the catalog's
        rows = [*_resolve_ops(None, views, mutations, random), *rows]
    return tuple(dict.fromkeys(rows))


def aten_graphs(*, ops, dtypes, min_nodes: int = 1, max_nodes: int = 12, min_inputs: int = 1, max_inputs: int = 4,
                views: bool = True, mutations: bool = False, special_values: bool = False, constants: bool = True,
                focus=None, sizes: str = "small", random: bool = False, requires_grad: bool = False,
                device: torch.device, run_device: torch.device, support, hops: tuple = (),
                complex_leaves: bool = False) -> st.SearchStrategy:
    """ATen graphs (``graphs()``'s options, validated) drawn for ``device``: computed on ``run_device``
    (the device itself, or the CPU where a simulated device's table is used), of the rows ``support``
    (a ``DeviceSupport``) says the device runs. ``complex_leaves``: in a focus step a new float32/float64
    leaf of an op that takes complex is its complex variant half the time (``graphs()``'s default dtypes)."""
    asked = _resolve_ops(ops, views, mutations, random)
    rows = support.narrow(asked)
    if not rows:
        raise InvalidArgument(f"ops={ops!r}: {device.type} ({support.name}) runs none of {[r.name for r in asked]}; "
                              f"draw them for another device")
    if focus is not None and not isinstance(focus, Focus):
        focus = Focus(ops=focus)
    focus_rows, focus_edges = (), ()
    hops = tuple(dict.fromkeys((*hops, *(focus.hops if focus is not None else ()))))
    if focus is not None and focus.ops:
        named = support.narrow(_resolve_ops(focus.ops, True, True))
        rows = (*rows, *(r for r in named if r.complex_only and r not in rows))  # drawn where a pass names them
        focus_rows = tuple(r for r in named if r in rows)
    if focus is not None and focus.edges:
        focus_edges = _resolve_edges(focus.edges, rows)
    large = sizes == "large"
    leaf_shapes = _shapes(max_dims=3, max_side=4)
    if large:
        leaf_shapes = st.one_of(leaf_shapes, leaf_shapes, _large_shapes())
    cfg = _Config(rows, dtypes.map(_checked_dtype), leaf_shapes, min_nodes=min_nodes,
                  max_nodes=max_nodes, min_inputs=min_inputs, max_inputs=max_inputs, mutations=mutations,
                  special_values=special_values, constants=constants, focus=focus, focus_rows=focus_rows,
                  focus_edges=focus_edges,
                  large=large, chains=_chains(rows), requires_grad=requires_grad,
                  device=device, run_device=run_device, support=support, hops=hops, complex_leaves=complex_leaves)
    return _graph_cases(cfg)


def _resolve_edges(edges, rows) -> tuple:
    """``Focus.edges`` as ``(producer row, consumer row, argument name or None)`` among ``rows`` (what
    this draw may use): a packet name stands for each of its rows; a name the consumer row has no
    tensor argument of leaves that row out."""
    out = []
    for edge in edges:
        producer, consumer, name = (*edge, None)[:3]
        found = [rows_named(producer) or custom_rows(producer), rows_named(consumer) or custom_rows(consumer)]
        if not all(found):
            raise InvalidArgument(f"Focus(edges=...): {tuple(edge)!r} names an op not in the op catalog")
        out += [(p, c, name) for p in found[0] for c in found[1]
                if p in rows and c in rows and (name is None or name in tensor_arguments(c))]
    return tuple(dict.fromkeys(out))


@st.composite
def _large_shapes(draw) -> tuple:
    """A shape of 4096-65536 elements, rank 1-3 (rows of a few hundred, as real activations have)."""
    target = draw(integers(4096, 65536))
    sides = [draw(integers(2, 64)) for _ in range(draw(integers(0, 2)))]
    last = max(1, -(-target // math.prod(sides))) if sides else target
    return (*sides, last)


def _checked_dtype(dtype):
    check_dtype(dtype, "dtypes")
    return dtype


@st.composite
def _graph_cases(draw, cfg: _Config) -> GraphCase:
    modes = current_modes()  # a grad or autocast region left open by a rejected draw is closed below
    try:
        builder = GraphBuilder(special_values=cfg.special_values, fake_mode=shared_fake_mode(),
                               max_nodes=cfg.max_nodes, max_numel=MAX_NUMEL_LARGE if cfg.large else MAX_NUMEL,
                               device=cfg.device, run_device=cfg.run_device, support=cfg.support)
        ctx = DrawContext(builder, cfg.dtypes, cfg.shapes, cfg.max_inputs, cfg.constants, cfg.special_values,
                          max_nodes=cfg.max_nodes, large=cfg.large, mutations=cfg.mutations)
        if cfg.focus is not None:
            i = neutral_or_index(draw, 100)  # the neutral draw (and what this shrinks to) is focused
            if i is None or i < 100 * cfg.focus.share:
                # complex leaves in focus steps alone: where the pass's own ops take them (plain
                # graphs, and graphs() in a user's own tests, keep the real dtypes they always drew)
                ctx.complex_leaves = cfg.complex_leaves
                ctx.focus_rows, ctx.scalar_pool, ctx.seeds = cfg.focus_rows, cfg.focus.pool(), cfg.focus.seeds
                ctx.pass_scalars, ctx.edges, ctx.pairs = cfg.focus.scalars, cfg.focus_edges, cfg.pair_rows
                ctx.edges_only = bool(cfg.focus_edges) and cfg.focus_rows is None
                ctx.duplicates = cfg.focus.duplicates
        for _ in range(cfg.min_inputs):
            dtype, shape = draw(cfg.dtypes), draw(cfg.shapes)
            _, base, layout = tensor_with_layout(draw, dtype, shape, special_values=cfg.special_values)
            builder.add_input(base, layout)
        # The node count is drawn first (so big graphs are common) and each step is its own span (so
        # the shrinker can delete or simplify steps one at a time); a rejected step is retried.
        # The larger of two draws: Hypothesis favours the lower bound, and one-node graphs find little.
        target = max(draw(integers(cfg.min_nodes, cfg.max_nodes)), draw(integers(cfg.min_nodes, cfg.max_nodes)))
        # half a duplicates focus's functional graphs end with an integral pair (_integral_pair): three
        # nodes of the target are kept for it. Not in small graphs (discovery's duplicates probes, of at
        # most five nodes, where the pair took the room of the exact repeats a correct CSE merges: it
        # no longer saw functorch's CSE act on one)
        pair = ctx.duplicates and not ctx.mutations and cfg.max_nodes >= _PAIR_MIN_NODES \
            and C.POINTWISE in cfg.by_category and flag(draw)
        outer, _CURRENT.step = getattr(_CURRENT, "step", None), (ctx, cfg)
        try:
            for _ in range(2 * target):
                if builder.n_calls >= target - 3 * pair:
                    break
                draw(_STEP)
        finally:
            _CURRENT.step = outer
        for _ in range(4 * pair):  # (a drawn row may take no integer operand or number: drawn again)
            try:
                _integral_pair(draw, ctx, cfg)
                break
            except StepRejected:
                pass
        if builder.n_calls < cfg.min_nodes:
            reject()
        draw(_outputs(builder))
    finally:
        restore_modes(modes)
    gm = builder.graph_module()
    gm.graph.lint()
    recipes = tuple(builder.recipes)
    inputs = _rebuild(recipes)  # only read by graph_features: it takes the builder's run, not a new one
    features = graph_features(gm, inputs, builder.record)
    if cfg.requires_grad:
        # the builder ran every node on its own copies of the inputs: their version counters (a view
        # shares its base's) say which ones the graph writes, without another run
        written = {i for i, v in enumerate(v for v in builder.values if v.origin == INPUT) if v.tensor._version}
        recipes, features = _with_grad(draw, gm, recipes, features, written)
        inputs = _rebuild(recipes)
    return GraphCase(gm, inputs, features, recipes, device=str(cfg.device))


def _with_grad(draw, gm: fx.GraphModule, recipes: tuple, features: frozenset, written: set):
    """``requires_grad=True``: each floating input the graph never writes (not in ``written``) is a leaf that requires
    grad with chance 1/2, and each floating constant an ``nn.Parameter`` (``gm`` is changed in place).
    Drawn after the steps, so the graph itself draws and shrinks as without. A graph that no longer
    runs (an in-place op on a view of a leaf that requires grad, a metadata change of one) keeps none."""
    drawn = tuple((base, replace(layout, requires_grad=True))
                  if base.is_floating_point() and i not in written and flag(draw) else (base, layout)
                  for i, (base, layout) in enumerate(recipes))
    params = [name for name, buf in gm.named_buffers() if buf.is_floating_point() and flag(draw)]
    if not params and drawn == recipes:
        return recipes, features
    buffers = {name: gm.get_buffer(name) for name in params}
    for name, buf in buffers.items():
        del gm._buffers[name]
        gm.register_parameter(name, torch.nn.Parameter(buf.clone()))
    try:
        _run_seeded(gm, _rebuild(drawn), drawn[0][0].device if drawn else "cpu")
    except Exception:  # noqa: BLE001 - see the docstring: the graph as drawn, without grad
        for name, buf in buffers.items():
            del gm._parameters[name]
            gm.register_buffer(name, buf)
        return recipes, features
    return drawn, features | {"requires-grad"}


def _run_seeded(gm: fx.GraphModule, inputs: tuple, device):
    with modes_kept(), seeded(device, RNG_SEED):
        return gm(*inputs)


@st.composite
def _step(draw) -> None:
    _do_step(draw, *_CURRENT.step)


# One step strategy for every draw, reading the graph being drawn from _CURRENT: a strategy made
# per step was validated anew each time (a tenth of the draw rate). Its span label is the same.
_STEP = _step()
_CURRENT = threading.local()


def _do_step(draw, ctx: DrawContext, cfg: _Config, in_region: bool = False) -> None:
    b = ctx.builder
    if b.n_calls >= cfg.max_nodes:
        return
    if ctx.seeds and draw(integers(0, 3)) == 3:
        seed_step(draw, ctx)
        return
    if ctx.duplicates and draw(integers(0, 2)) == 2:  # (Focus.duplicates: a CSE's graphs)
        try:
            if ctx.mutations and C.INPLACE in cfg.by_category and draw(integers(0, 2)) == 2:  # a third across a write
                _op_step(draw, ctx, cfg, C.INPLACE, across=True)
            else:
                _duplicate(draw, b, _pure_calls(b), picked_first=True)
        except StepRejected:
            pass
        return
    # an edge step every step where the focus is edges alone (discovery's edge probes: graphs of the
    # edge and nothing else; half their steps were one op, or the two unchained), a quarter beside
    # focus ops
    if ctx.edges and (ctx.edges_only or flag(draw)) and (ctx.focus_rows is None or flag(draw)):
        _edge_step(draw, ctx, cfg)
        return
    if ctx.focus_rows is not None and flag(draw):
        _focus_step(draw, ctx, cfg)
        return
    kind = (cfg.region_kinds if in_region else cfg.kinds).draw(draw)
    if kind == "grad-region":
        b.set_grad(False)
        for _ in range(draw(integers(1, 3))):
            _do_step(draw, ctx, cfg, in_region=True)
        b.set_grad(True)
        return
    try:
        if kind == "autocast-region":
            _autocast_region(draw, ctx, cfg)
            return
        if kind in HOPS:
            hop_step(draw, ctx, kind, lambda sub_ctx, n: _sub_steps(draw, sub_ctx, cfg.subgraph_config(), n))
            return
        if kind == "duplicate":
            _duplicate(draw, b, _pure_calls(b))
            return
        _op_step(draw, ctx, cfg, kind)
    except StepRejected:
        pass


def _op_step(draw, ctx: DrawContext, cfg: _Config, kind: str, across: bool = False) -> None:
    """One row (or chain) of category ``kind``; StepRejected where its call cannot be made. ``across``
    (an in-place row, a duplicates focus): the write goes to a value a pure call read, and that call
    is re-emitted after it (what a CSE must not merge with the first)."""
    b = ctx.builder
    spec = cfg.by_category[kind].draw(draw)
    if spec is None:  # the neutral draw: no step (what a step shrinks to before its first row)
        return
    if across and (isinstance(spec, Chain) or spec.mutates_metadata):
        raise StepRejected("a duplicate across a write needs a write of values")
    if isinstance(spec, Chain):
        spec.emit(draw, ctx)
        return
    read = _read_values(b) if kind == C.INPLACE and not spec.mutates_metadata and (across or draw(integers(0, 2)) == 0) \
        else []
    if across and not read:
        raise StepRejected("no value a pure call read to write")
    if read:  # a third of the writes go to a value a pure call read: the write after a read (issue 56)
        saved, ctx.prefer, ctx.chained = ctx.prefer, choose(draw, read), True
        try:
            args, kwargs = call_args(draw, ctx, spec)
        finally:
            ctx.prefer, ctx.chained = saved, False
    else:
        args, kwargs = call_args(draw, ctx, spec)
    twin = _integral_twins(draw, ctx, spec, args, kwargs) if kind == C.POINTWISE else None
    if twin is not None:
        (args, kwargs), other = twin
    value = b.call(spec, spec.overload, args, kwargs, keep=_keeper(draw))
    if twin is not None:
        b.call(spec, spec.overload, *other, keep=_keeper(draw))
    if kind == C.INPLACE and not spec.mutates_metadata and b.n_calls < cfg.max_nodes and (across or draw(integers(0, 2)) != 0):
        _read_after_write(draw, b, value)  # two writes in three


_PAIR_MIN_NODES = 8  # the graphs (max_nodes) an integral pair ends: graphs() draws up to 12 nodes by default


def _integral_pair(draw, ctx: DrawContext, cfg: _Config) -> None:
    """(Half a duplicates focus's functional graphs end with one, after their steps, which re-emit
    calls as before.) A pointwise call on an integer (or bool) operand holding an integral scalar, and
    its twin with the scalar as the other type (``x % 3`` and ``x % 3.0`` of an int ``x``: an int and
    a float tensor, which a CSE keyed on ``3 == 3.0`` merges), then the first again where the budget
    allows (which a correct CSE merges with the first); the second and third are returned three times
    in four. Re-emitting the graph's own calls made such a pair, its second call read, in 1 of 80
    focused graphs (few calls of a drawn graph are on integers with a scalar); these make it in 7.
    The row is one of the graph's pointwise rows that take an integer operand and a number;
    StepRejected where there is none, or no room, or a tensor was drawn where the number goes."""
    b = ctx.builder
    rows = [r for r in cfg.by_category[C.POINTWISE].items if not isinstance(r, Chain) and r.dtypes & C.INTEGRAL
            and r.args[0] != C.MASK and any(k in (C.SCALAR, C.TENSOR_OR_SCALAR) for k in r.args[1:])]
    if not rows or b.n_calls + 2 > ctx.max_nodes:
        raise StepRejected("no room for a pair of calls")
    spec = choose(draw, rows)
    ints = sorted(spec.dtypes & C.INTEGRAL, key=str)
    held = [v for v in b.values if v.tensor.dtype in ints]
    first = choose(draw, held) if held and flag(draw) else None
    if first is None:
        first = new_leaf(draw, ctx, dtypes_ok={choose(draw, ints)}, domain=spec.domain_of(0), like=None,
                         into=False, target=False)
    saved = ctx.prefer, ctx.chained
    ctx.prefer, ctx.chained = first, True
    try:
        args, kwargs = call_args(draw, ctx, spec)
    finally:
        ctx.prefer, ctx.chained = saved
    twin = _integral_twins(draw, ctx, spec, args, kwargs, always=True)
    if twin is None:
        raise StepRejected(f"{spec.name} drawn without a number on an integer operand")
    (args, kwargs), other = twin
    b.call(spec, spec.overload, args, kwargs, keep=_keeper(draw))
    b.often_returned.append(b.call(spec, spec.overload, *other, keep=_keeper(draw)))
    if b.n_calls < ctx.max_nodes:  # and the first again, exactly: what a correct CSE merges
        b.often_returned.append(b.call(spec, spec.overload, args, dict(kwargs), keep=_keeper(draw)))


def _autocast_region(draw, ctx: DrawContext, cfg: _Config) -> None:
    """1-3 steps under autocast (``GraphBuilder.autocast``) to a lower precision: half the time the
    first is one of ``AUTOCAST_CASTS`` where the rows hold one, on float32 operands, what autocast
    casts (most other ops it leaves as they are, and a region of those alone is one a pass may drop
    unseen)."""
    casts = cfg.autocast_rows
    with ctx.builder.autocast(choose(draw, AUTOCAST_DTYPES)):
        for i in range(draw(integers(1, 3))):
            if i == 0 and casts and flag(draw):
                spec = choose(draw, casts)
                try:  # (a rejected step must not leave the region: its enter node is in the graph)
                    args, kwargs = call_args(draw, ctx, spec)
                    ctx.builder.call(spec, spec.overload, args, kwargs, keep=_keeper(draw))
                except StepRejected:
                    pass
            else:
                _do_step(draw, ctx, cfg, in_region=True)


def _sub_steps(draw, sub_ctx: DrawContext, sub_cfg: _Config, n: int) -> None:
    """Up to ``n`` steps into a subgraph's builder, each its own span as the outer graph's are."""
    outer, _CURRENT.step = _CURRENT.step, (sub_ctx, sub_cfg)
    try:
        for _ in range(2 * n):
            if sub_ctx.builder.n_calls >= n:
                break
            draw(_STEP)
    finally:
        _CURRENT.step = outer


def _focus_step(draw, ctx: DrawContext, cfg: _Config) -> None:
    """A focus op, its first operand the latest focus op's result where that fits; then, now and
    then, the structures real passes go wrong on around it (``_around``)."""
    spec = ctx.focus_rows.draw(draw) or ctx.focus_rows.items[0]
    ctx.focus_step = True
    try:
        if isinstance(spec, Chain):
            ctx.prefer = spec.emit(draw, ctx)
            return
        ctx.aims = aims_of(spec.overload)
        overlapping = _overlapping_first(draw, ctx, cfg, spec)
        if overlapping is not None:  # the call its in-place form could be: the other operands fit into it
            ctx.prefer, ctx.chained, ctx.into_first = overlapping, True, True
        try:
            args, kwargs = call_args(draw, ctx, spec)
        finally:
            ctx.chained = ctx.into_first = False
        args = _tied(draw, spec, args, ctx.prefer)
        ctx.prefer = ctx.builder.call(spec, spec.overload, args, kwargs, keep=_keeper(draw))
        ctx.builder.focus_results.append(ctx.prefer)
        if spec.category == C.RANDOM and ctx.builder.n_calls < ctx.max_nodes and flag(draw):
            # the same random call again, drawing on from the state the first left: never its equal
            ctx.builder.call(spec, spec.overload, args, kwargs, keep=_keeper(draw))
        else:
            _around(draw, ctx, cfg, ctx.prefer)
    except StepRejected:
        pass
    finally:
        ctx.focus_step, ctx.aims, ctx.chained = False, (), False


# One focus call in this many is drawn on an overlapping view, and one in this many (in mutating
# graphs) is followed by a write to a value it read.
_OVERLAP_ONE_IN, _WRITE_ONE_IN = 8, 3


def _overlapping_first(draw, ctx: DrawContext, cfg: _Config, spec) -> Value | None:
    """One pointwise focus call in ``_OVERLAP_ONE_IN`` whose op has an in-place form: an expanded view
    of an intermediate (several elements at one address) made here, to be its first operand; else
    None. An out-of-place op on it is right, its in-place form is not (eager refuses to write it),
    which is what a reinplacing pass must see: the view is not an input, and has no other reader."""
    b = ctx.builder
    expand = cfg.by_overload.get(torch.ops.aten.expand.default)
    if expand is None or spec.category != C.POINTWISE or not _has_inplace_form(spec.overload) \
            or b.n_calls + 2 > ctx.max_nodes or draw(integers(0, _OVERLAP_ONE_IN - 1)) != 0:
        return None
    made = [v for v in b.values if v.call is not None and v.pure and v.tensor.dtype in spec.dtypes
            and 0 < v.tensor.numel() and v.tensor.dim() < 4]
    if not made:
        return None
    unread = [v for v in made if not v.node.users]  # nothing else reads it: what a reinplacing pass writes into
    v = (unread or made)[-1] if flag(draw) else choose(draw, unread or made)
    shape = list(v.tensor.shape)
    ones = [i for i, n in enumerate(shape) if n == 1]
    if ones and flag(draw):
        shape[choose(draw, ones)] = draw(integers(2, 3))
    else:
        shape.insert(0, draw(integers(2, 3)))
    if math.prod(shape) > ctx.max_numel:
        return None
    return b.call(expand, expand.overload, (v, shape), {})


def _tied(draw, spec, args: tuple, producer: Value | None) -> tuple:
    """A third of the focus calls that read the latest focus result (``producer``): a diamond, another
    tensor operand (or a number where a tensor may go) the producer's own first operand
    (``mul(sigmoid(x), x)``), where it fits (``edges.diamond``)."""
    if producer is None or not any(a is producer for a in args) or producer.call is None \
            or producer.call[0] is None or draw(integers(0, 2)) != 0:
        return args
    first = next((a for a in producer.operands), None)
    if first is None:
        return args
    out = list(args)
    diamond(draw, spec, out, first, producer.call)
    return tuple(out)


def _has_inplace_form(overload) -> bool:
    packet = getattr(torch.ops.aten, f"{overload.overloadpacket.__name__}_", None)
    return packet is not None and overload._overloadname in packet.overloads()


def _around(draw, ctx: DrawContext, cfg: _Config, value: Value | None) -> None:
    """After a focus call (or an edge's consumer), now and then, where the node budget allows: its
    twin on the same operands with one integral scalar of the other type (``add(x, 1)`` and
    ``add(x, 1.0)``: equal for a float ``x``, not for an int one, what a CSE keyed on ``1 == 1.0``
    merges); or, in mutating graphs, a write in place to a value it read, or its producer read
    (``x + 0`` then ``x.mul_(2)``: a pass that replaces the sum by ``x`` returns the written ``x``)."""
    b = ctx.builder
    if value is None or value.call is None or value.call[0] is None or b.n_calls >= ctx.max_nodes:
        return
    if _twin(draw, ctx, *value.call):
        return
    inplace = cfg.by_category.get(C.INPLACE)
    if inplace is None or not ctx.mutations or draw(integers(0, _WRITE_ONE_IN - 1)) != 0:
        return
    read = [v for v in value.operands if v.call is None or v.call[0] is None or v.call[0].category != C.INPLACE]
    read += [v for r in read for v in r.operands if v not in read]  # what its producer read
    if not read:
        return
    target = read[0] if draw(integers(0, 3)) != 0 else choose(draw, read)  # mostly the value it read first
    writer = inplace.draw(draw)
    if writer is None or isinstance(writer, Chain) or writer.mutates_metadata:
        return
    # the write's numbers are drawn as a plain step's, not from the focus's pool: the pass's own numbers
    # are its identities (x + 0, x * 1), and a write of them (pow_(x, 1.0), add_(x, 0)) changes nothing,
    # so a pass that takes the sum for x, written afterwards, was not seen to (noop-then-written)
    result, ctx.prefer, ctx.chained, ctx.aims = ctx.prefer, target, True, ()
    pool, ctx.scalar_pool, ctx.pass_scalars = (ctx.scalar_pool, ctx.pass_scalars), (), ()
    try:
        w_args, w_kwargs = call_args(draw, ctx, writer)
    finally:
        ctx.prefer, ctx.chained = result, False
        ctx.scalar_pool, ctx.pass_scalars = pool
    if w_args and w_args[0] is target:
        b.call(writer, writer.overload, w_args, w_kwargs, keep=_keeper(draw))
        # then read after the write: copied half the time, else returned three times in four
        if b.n_calls < ctx.max_nodes and flag(draw):
            b.call(None, torch.ops.aten.clone.default, (value,), {})
        else:
            b.often_returned.append(value)


def _twin(draw, ctx: DrawContext, spec, args: tuple, kwargs: dict) -> bool:
    """After a focus call on an integer (or bool) operand that holds an integral scalar, half the time,
    its twin with that scalar as the other type (``_other_scalar_type``), where the node budget
    allows: True where one was made. (On a float operand the twins are equal: merging them is right.)"""
    b = ctx.builder
    if spec is None or not _on_integers(args) or b.n_calls >= ctx.max_nodes \
            or not _scalar_slots(spec, args, kwargs) or not flag(draw):
        return False
    b.call(spec, spec.overload, *_other_scalar_type(draw, spec, args, kwargs), keep=_keeper(draw))
    return True


def _on_integers(args) -> bool:
    first = next((a for a in args if isinstance(a, Value)), None)
    return first is not None and not first.tensor.is_floating_point()


def _integral_twins(draw, ctx: DrawContext, spec, args: tuple, kwargs: dict, always: bool = False):
    """For a quarter of the calls on an integer (or bool) operand that hold a scalar (``always``: every
    one), where the budget allows two calls: ``((args, kwargs), (args, kwargs))`` of the call with
    that scalar truncated to an integer as an int and as a float, in a drawn order (``x % 3`` and
    ``x % 3.0``: an int and a float tensor); else None."""
    if not _on_integers(args) or ctx.builder.n_calls + 2 > ctx.max_nodes:
        return None
    schema = spec.overload._schema.arguments
    slots = [i for i, a in enumerate(args) if i < len(schema) and type(a) in (int, float) and math.isfinite(a)
             and _takes_a_number(schema[i])]
    # (a quarter, not half: each pair is two calls no correct CSE merges, and at half they took the
    # budget of the plain graphs discovery weighs a CSE on, where it merged in 20 of 300, 37 without)
    if not slots or (not always and draw(integers(0, 3)) != 0):
        return None
    i = choose(draw, slots)
    whole = int(args[i]) or 1  # (never 0: a divisor's domain)
    pair = [(*args[:i], kind(whole), *args[i + 1:]) for kind in ((int, float) if flag(draw) else (float, int))]
    return (pair[0], kwargs), (pair[1], dict(kwargs))


def _other_scalar_type(draw, spec, args: tuple, kwargs: dict) -> tuple | None:
    """``(args, kwargs)`` of ``spec`` with one ``Scalar`` argument of integral value as the other type
    (an int as a float, a float as an int, a bool as an int), or None where it has none."""
    slots = _scalar_slots(spec, args, kwargs)
    if not slots:
        return None
    i, k = choose(draw, slots)
    out, kw = list(args), dict(kwargs)
    here, key = (out, i) if k is None else (kw, k)
    v = here[key]
    here[key] = float(v) if type(v) is int else int(v)
    return tuple(out), kw


def _scalar_slots(spec, args: tuple, kwargs: dict) -> list:
    """Where ``spec``'s call holds a scalar of integral value (a ``Scalar`` argument, or a number
    where a ``Tensor`` goes): ``(position, None)`` or ``(None, keyword)``."""
    schema = spec.overload._schema.arguments
    slots = [(i, None) for i, a in enumerate(args) if i < len(schema) and _integral_scalar(a)
             and _takes_a_number(schema[i])]
    typed = {a.name: a for a in schema}
    return slots + [(None, k) for k, a in kwargs.items() if _integral_scalar(a) and k in typed and _takes_a_number(typed[k])]


def _takes_a_number(argument) -> bool:
    """A ``Scalar`` argument (``number`` in the schema's types), or a ``Tensor`` one a number stands in
    for (``add.Tensor(x, 1)``)."""
    kind = str(argument.type)
    return "number" in kind or kind.endswith("Scalar") or kind == "Tensor"


def _integral_scalar(a) -> bool:
    return type(a) in (int, bool) or (type(a) is float and a.is_integer())


def _edge_step(draw, ctx: DrawContext, cfg: _Config) -> None:
    """One of ``ctx.edges`` whole. At the consumer's first tensor argument (or an edge naming none): the
    consumer on the producer's result (the latest one in the graph half the time, else a new
    producer call). At another argument: a producer built backwards from a shape (``edges.INVERSES``),
    or any producer of a consumer whose whole call one rule draws, is drawn consumer first
    (``edges.edge_at``); any other half the time so, half the time producer first, its result
    pinned at the consumer's argument (``DrawContext.pin``: the consumer's rule takes it where it
    fits, else the edge is not drawn).
    Either way the arguments they share are related (``edges.relate``)."""
    producer, consumer, name = choose(draw, ctx.edges)
    b = ctx.builder
    ctx.focus_step = ctx.in_edge = True
    try:
        at_first = name is None or name == first_tensor_argument(consumer)
        # consumer first where the producer is built backwards, where one rule draws the consumer's
        # whole call, and else half the time: the producer then reads the operand it replaces
        # (zeros_like of a bias-shaped operand), where drawn first it reads any value
        if not at_first and (producer.overload in INVERSES or (consumer.draws_whole_call
                                                              and consumer.category != C.CUSTOM) or flag(draw)):
            ctx.aims = aims_of(consumer.overload)
            ctx.prefer = edge_at(draw, ctx, producer, consumer, name, _keeper(draw))
            b.focus_results.append(ctx.prefer)
            _around(draw, ctx, cfg, ctx.prefer)
            return
        # an earlier producer call: two times in three one no node reads yet (a consumer on one already
        # read is a shared producer, which matchers refuse: a slice of a cat the next slice also
        # reads), else the latest, whoever reads it (where a fusion's bug is: the sigmoid's other readers)
        made = [v for v in b.values if v.call is not None and v.call[0] is producer]
        if made and flag(draw):
            unread = [v for v in made if not v.node.users]
            source = unread[-1] if unread and draw(integers(0, 2)) != 0 else made[-1]
            producer_call = source.call
        else:
            ctx.aims = aims_of(producer.overload)
            # a producer that takes complex reads a new complex input one time in six (its operand is
            # mostly an existing value, rarely complex): a matcher's check for complex is forgotten
            # there (pow(abs(x), 2) -> x * x), and on a constant the edge would be dead
            if producer.dtypes & C.COMPLEX and ctx.complex_leaves and draw(integers(0, 5)) == 5:  # (shrinks to real)
                ctx.prefer = complex_input(draw, ctx, producer.dtypes) or ctx.prefer
                ctx.chained = ctx.prefer is not None and ctx.prefer.tensor.is_complex()
            try:
                args, kwargs = call_args(draw, ctx, producer)
            finally:
                ctx.chained = False
            # a consumer of a list (cat, stack) gets every result of a multi-result producer (split):
            # split-cat eliminations match all of them, in order
            keep = (lambda i: True) if _lists(consumer, name) else _keeper(draw)
            source = b.call(producer, producer.overload, args, kwargs, keep=keep)
            # the call, to relate the consumer's arguments to: a multi-result op's (split) too, whose
            # result here is its first getitem; a user's op's where its result is its own (not a buffer's)
            producer_call = (producer, args, kwargs) if producer.category != C.CUSTOM \
                else getattr(source, "call", None)
        if b.n_calls >= ctx.max_nodes or source is None:  # a user's op may write nothing a consumer reads
            return
        ctx.aims = aims_of(consumer.overload)
        if at_first:
            ctx.prefer, ctx.chained = source, True
        else:
            ctx.pin, ctx.pin_taken = (name, source), False
        try:
            args, kwargs = call_args(draw, ctx, consumer)
            if not at_first and not ctx.pin_taken:
                raise StepRejected(f"{consumer.name}'s {name} does not fit {producer.name}'s result")
        finally:
            ctx.chained, ctx.pin = False, None
        if producer_call is not None and producer_call[0] is producer:  # (not a user's op's buffer)
            args, kwargs = relate(draw, consumer, args, kwargs, producer_call)
        ctx.prefer = b.call(consumer, consumer.overload, args, kwargs, keep=_keeper(draw))
        b.focus_results.append(ctx.prefer)
        _around(draw, ctx, cfg, ctx.prefer)
    except StepRejected:
        pass
    finally:
        ctx.focus_step, ctx.in_edge, ctx.aims = False, False, ()


def _lists(consumer, name) -> bool:
    """Whether the consumer's argument ``name`` (its first tensor argument where None) is a list of tensors."""
    name = name or first_tensor_argument(consumer)
    return any(a.name == name and str(a.type).startswith("List[Tensor]") for a in consumer.overload._schema.arguments)


def _keeper(draw):
    """Which further results of a multi-result op get a getitem: each three times in four."""
    return lambda i: draw(integers(0, 3)) != 0


def _read_values(b: GraphBuilder) -> list:
    """The values a pure call has read (the first operand of each, latest last), each once."""
    read = [v.operands[0] for v in b.values if v.call is not None and v.pure and v.operands]
    return list(dict.fromkeys(read))


def _read_after_write(draw, b: GraphBuilder, written) -> None:
    """Read the storage just written: re-emit a pure expression that read it before the write (it
    now computes something else, the bait for CSE across a write) three times in four where one did,
    or clone another alias of it."""
    key = storage_key(written.tensor)
    if key is None:
        return
    readers = [v for v in b.values if v.call is not None and v.pure
               and any(storage_key(o.tensor) == key for o in v.operands)]
    aliases = [v for v in b.values if v is not written and storage_key(v.tensor) == key]
    if readers and (not aliases or draw(integers(0, 3)) != 0):
        _duplicate(draw, b, readers)
    elif aliases:
        b.call(None, torch.ops.aten.clone.default, (choose(draw, aliases),), {})


def _duplicate(draw, b: GraphBuilder, candidates: list, picked_first: bool = False) -> None:
    """Re-emit one of ``candidates``, or, where one is a call on an integer operand with an integral
    scalar, that call with the scalar of the other type: half the time; ``picked_first`` (a
    duplicates focus): the candidate picked first, and then its twin three times in four where it is
    such a call (the exact duplicates a correct CSE merges stay as many as the candidates on floats)."""
    if not candidates:
        raise StepRejected("nothing to duplicate")
    # (plain steps) half the time a call on an integer (or bool) operand with an integral Scalar (where one is a
    # candidate), re-emitted with it as the other type: add(x, 1) beside add(x, 1.0), what a CSE keyed
    # on 1 == 1.0 merges. (On a float operand the two are equal and merging them is right: flipped
    # there too, a correct CSE merged nothing in the 24 plain graphs discovery weighs it on, 6 before.)
    if picked_first:
        original = choose(draw, candidates)
        spec, args, kwargs = original.call
        if _integral_call(original) and draw(integers(0, 3)) != 0:
            args, kwargs = _other_scalar_type(draw, spec, args, kwargs)
        b.call(spec, original.node.target, args, kwargs)
        return
    scalar = [v for v in candidates if _integral_call(v)]
    if scalar and flag(draw):
        original = choose(draw, scalar)
        spec = original.call[0]
        args, kwargs = _other_scalar_type(draw, spec, *original.call[1:])
    else:
        original = choose(draw, candidates)
        spec, args, kwargs = original.call
    b.call(spec, original.node.target, args, kwargs)


def _pure_calls(b: GraphBuilder) -> list:
    """The values of pure calls drawn so far (what a duplicate re-emits)."""
    return [v for v in b.values if v.call is not None and v.pure]


def _integral_call(v: Value) -> bool:
    """A call on an integer (or bool) operand holding a scalar of integral value."""
    return v.call[0] is not None and _on_integers(v.call[1]) and bool(_scalar_slots(v.call[0], *v.call[1:]))


@st.composite
def _outputs(draw, b: GraphBuilder) -> None:
    # Outputs depend on an input: a value computed from constants alone is what constant folding
    # exists to fold, and returning one (or a view of a buffer) is not what real graphs do.
    live = _input_dependent(b)
    calls = [v for v in b.values if v.node.op == "call_function" and v.node in live]  # getitems included
    placeholders = [v for v in b.values if v.node.op == "placeholder"]
    if not calls and not placeholders:
        reject()
    outs = [calls[-1]] if calls else [placeholders[0]]
    for v in calls[:-1]:
        if v.pure and not v.node.users and not flag(draw):  # False (shrunk) = an output
            outs.append(v)
    # A focus op's result is returned too one time in four though later ops read it (as a joint graph
    # returns what backward saves): a rewrite that changes its dtype or values can hide downstream
    # (pow(int, 2.0) -> int mul, read by a float mul, gives the same float product).
    for v in b.focus_results:
        if v is not None and v.node in live and v.pure and v.node.users and draw(integers(0, 3)) == 3:
            outs.append(v)
    # A value computed before a write to what it read is returned three times in four (``_around``):
    # a pass that takes it for the written value (x + 0 -> x) is seen only where it is read after; so
    # are an integral pair's second and third calls (``_integral_pair``): a merge changes the second's
    # dtype, and the third is what a correct CSE merges.
    for v in b.often_returned:
        if v.node in live and draw(integers(0, 3)) != 0:
            outs.append(v)
    # A buffer a user's op wrote that nothing reads after it is returned half the time (as a model
    # returns or reads what its out-variant ops write); else it is dead, and functionalization drops
    # the call from post-grad graphs.
    for v in b.custom_writes:
        if len(v.node.users) == 1 and not flag(draw):
            outs.append(v)
    # Inputs returned as they are (a quarter of graphs, an eighth return two or more): what
    # repair passes exist for (Torch-TensorRT's repair_input_as_output), and what aliasing breaks.
    for i in range(3):
        rest = [p for p in placeholders if all(p is not o for o in outs)]
        if not rest or draw(integers(0, 3)) < (3 if i == 0 else 2):
            break
        outs.append(choose(draw, rest))
    b.output(list(dict.fromkeys(outs)))


def _input_dependent(b: GraphBuilder) -> set:
    live = set()
    for node in b.graph.nodes:  # every node: a multi-result op is no Value, its getitems are
        if node.op == "placeholder" or any(a in live for a in node.all_input_nodes):
            live.add(node)
    return live
