"""``graphs()``: Hypothesis strategy for ATen-level FX graphs with example inputs.

The public strategy: it validates its options, finds the table of what the device runs
(``_draw/probe.py``), and hands them to the drawing (``_draw/draw.py``); graphs over symbolic sizes
are drawn by ``_dynamic/``, torch-level graphs by ``_ir/torch_ir.py``, and a drawn graph is brought
to the IR asked for by ``_ir/convert.py``.
"""

from __future__ import annotations

import dataclasses

from hypothesis import strategies as st

from ._build.device import check_device
from ._draw.draw import aten_graphs
from ._draw.focus import Focus
from ._draw.hops import check_hops, hops_in
from ._draw.probe import drawing_support
from ._dynamic.programs import FLOATS, dynamic_graph_cases, focus_kinds
from ._errors import InvalidArgument
from ._ir.convert import check_ir, convert
from ._ir.torch_ir import torch_graph_cases
from ._tensors import dtypes as _dtypes
from ._validation import check_bool, check_int_range, check_size_pair, check_strategy


SIZES = ("small", "large")


def graphs(*, ops=None, dtypes=None, min_nodes: int = 1, max_nodes: int = 12, min_inputs: int = 1,
           max_inputs: int = 4, views: bool = True, mutations: bool = False, special_values: bool = False,
           constants: bool = True, focus=None, sizes: str = "small", random: bool = False,
           ir: str = "aten", requires_grad: bool = False, dynamic: bool = False,
           device="cpu", hops=()) -> st.SearchStrategy:
    """Draw a ``GraphCase``: an ATen FX graph that runs in eager, with example inputs and features.

    Args:
        ops: catalog rows, OpOverloads or names to draw from (default: the whole catalog, less
            views when ``views=False`` and less in-place ops unless ``mutations=True``).
        dtypes: strategy of input dtypes (default ``strategies.dtypes()``).
        min_nodes, max_nodes: bounds on the number of op nodes (grad-mode markers not counted).
        min_inputs, max_inputs: bounds on the number of placeholders.
        views: draw view ops. mutations: draw in-place ops, input mutation, writes through views,
            metadata mutation and ``_set_grad_enabled`` regions. special_values: inputs may hold
            NaN, +-inf, -0.0, subnormals, huge and tiny values. constants: draw get_attr buffers.
        focus: a ``Focus`` (or a list of ops): draw those ops far more often, chained producer ->
            consumer, with scalars from ``Focus.scalars`` and 0, 1, -1, 2, 0.5 (see ``_draw/focus.py``).
            Focus ops that ``ops``/``views``/``mutations`` exclude are left out.
        sizes: ``"small"`` (at most 2048 elements a tensor: fast, and what failures shrink to) or
            ``"large"``: a third of new leaves hold 4096-65536 elements and a third of matmul and
            attention dims are 65-256, past the size thresholds real rewrites check.
        random: draw random ops (``rand_like``, ``native_dropout``). Each run of such a graph must
            start from one generator state: ``torch.manual_seed(strategies.RNG_SEED)`` first.
        ir: the form of the graph (``strategies.IRS``, see ``_ir/convert.py``): "aten" (as drawn), or as a
            pipeline stage hands it to its passes, traced by that stage's tracer: "post-grad"
            (AOTAutograd inference: functional, input mutations a ``copy_`` epilogue), "export" or
            "core-aten" (``torch.export`` + ``run_decompositions()``, the graph signature in
            ``gm.meta["graph_signature"]``), "pre-dispatch" (``make_fx(pre_dispatch=True)``).
            Outside "aten", module buffers are leading placeholders (and leading example inputs).
            "torch": torch-level graphs, ``fx.symbolic_trace`` of a drawn ``nn.Module`` (layers
            as ``call_module``, ``torch.nn.functional`` and methods; ``_ir/torch_ir.py``), for
            pre-grad and module-level passes; of the other options only ``max_nodes`` (the
            layers) and ``special_values`` apply, and their parameters always require grad.
        requires_grad: each floating input the graph does not write is, with chance 1/2, a leaf
            that requires grad, and each floating constant an ``nn.Parameter``, so outputs carry
            autograd state (``requires_grad``, ``grad_fn``) that a pass must keep. "aten" and
            "pre-dispatch" only: post-grad graphs are inference graphs, and export lifts parameters.
        dynamic: graphs over symbolic sizes, traced by ``make_fx(tracing_mode="symbolic")`` from a
            drawn program whose shape arguments are expressions of its inputs' sizes: SymInt sizes
            in ``meta['val']`` (one ``ShapeEnv``, with guards), ``sym_size.int`` nodes, ``operator``
            and ``sym_max`` arithmetic feeding ``view``/``expand``/``full``/``arange``/``slice``.
            ``case.symbolic`` says which input dims are symbols (``SymbolicShapes``). Floating
            dtypes, functional programs; of the other options ``dtypes``, ``min_nodes``/``max_nodes``
            and ``min_inputs``/``max_inputs`` (at most 3) apply (``_dynamic/``).
        device: the device the graph is drawn for ("cpu", "cuda", "cuda:N"): every node is computed
            there as it is drawn, inputs and constants live there, factories say ``device=``, and
            only what the device runs is drawn (its ``DeviceSupport`` table, learned from the
            device on first use and cached: ``_draw/probe.py``). CPU-only overloads are drawn for the
            CPU only; on CUDA the attention family draws the CUDA overloads. Dynamic and "torch"
            graphs are drawn on the CPU (the harness moves them: ``check(..., device=)``).
        hops: higher-order ops to draw among the steps (``strategies.HOPS``): "cond" (``torch.cond``
            on ``sum(x) > 0`` with two drawn branches) and "invoke_subgraph" (one drawn block called
            two or three times), their subgraphs ``get_attr`` submodules as traced graphs hold them
            (``_draw/hops.py``), in "aten" and "post-grad" graphs; "wrap_with_set_grad_enabled"
            (grad regions) and "wrap_with_autocast" (autocast regions to bfloat16 or float16) in
            "pre-dispatch" graphs, outlined as torch's pre-dispatch export outlines them.

    Every node carries ``meta['val']`` (a fake tensor of one shared FakeTensorMode). Shrinks by
    deleting steps and moving operands towards the first input and ops towards simpler ones.

    >>> from hypothesis import given
    >>> @given(graphs(max_nodes=4))
    ... def test_runs(case):
    ...     case.gm(*case.fresh_inputs())
    >>> test_runs()
    """
    check_size_pair(min_nodes, max_nodes, "min_nodes", "max_nodes")
    if max_nodes > 64:
        raise InvalidArgument(f"max_nodes={max_nodes!r} must be at most 64 (shrinking and speed suffer)")
    check_size_pair(min_inputs, max_inputs, "min_inputs", "max_inputs")
    check_int_range(max_inputs, "max_inputs", min_value=1)
    for name, value in (("views", views), ("mutations", mutations), ("special_values", special_values),
                        ("constants", constants), ("random", random), ("requires_grad", requires_grad)):
        check_bool(value, name)
    if sizes not in SIZES:
        raise InvalidArgument(f"sizes={sizes!r} must be one of {SIZES}")
    ir = check_ir(ir)
    check_bool(dynamic, "dynamic")
    dev = check_device(device)
    if (dynamic or ir == "torch") and dev.type != "cpu":
        raise InvalidArgument(f"device={device!r} with {'dynamic=True' if dynamic else 'ir=torch'}: these graphs are "
                              f"drawn on the CPU; draw them for device='cpu' and check them with "
                              f"check(..., device={str(dev)!r}) or verify(device=...), which move them")
    hops = check_hops(hops, ir, dynamic)
    if dynamic:
        return _dynamic_graphs(locals())
    if ir == "torch":
        return _torch_ir_graphs(ops, mutations, focus, requires_grad, sizes, max_nodes, special_values)
    if requires_grad and ir not in ("aten", "pre-dispatch"):
        raise InvalidArgument(f"requires_grad=True needs ir='aten' or 'pre-dispatch', not {ir!r}: post-grad graphs "
                              f"are inference graphs (traced under no_grad) and export lifts parameters to inputs")
    complex_leaves = dtypes is None  # the default dtypes: complex leaves where an op takes them
    if dtypes is None:
        dtypes = _dtypes()
    check_strategy(dtypes, "dtypes", "pass a strategy, e.g. dtypes=st.sampled_from([torch.float32])")
    if isinstance(focus, Focus) and hops_in(focus.hops, ir) != focus.hops:
        focus = dataclasses.replace(focus, hops=hops_in(focus.hops, ir))  # a pass's named hops: where they trace
    run_device, support = drawing_support(dev)
    drawn = aten_graphs(ops=ops, dtypes=dtypes, min_nodes=min_nodes, max_nodes=max_nodes, min_inputs=min_inputs,
                        max_inputs=max_inputs, views=views, mutations=mutations, special_values=special_values,
                        constants=constants, focus=focus, sizes=sizes, random=random, requires_grad=requires_grad,
                        device=dev, run_device=run_device, support=support, hops=hops, complex_leaves=complex_leaves)
    if ir == "aten":
        return drawn
    return drawn.map(lambda case: convert(case, ir))


def _dynamic_graphs(args: dict) -> st.SearchStrategy:
    fixed = {"ops": None, "views": True, "mutations": False, "special_values": False, "constants": True,
             "sizes": "small", "random": False, "ir": "aten", "requires_grad": False}
    changed = [f"{k}={args[k]!r}" for k, default in fixed.items() if args[k] != default]
    if changed:
        raise InvalidArgument(f"dynamic=True draws functional float programs traced symbolically, which "
                              f"{', '.join(changed)} cannot shape: leave them at their defaults")
    focus = args["focus"]
    if focus is not None and not isinstance(focus, Focus):
        focus = Focus(ops=focus)
    if focus is not None and focus.edges:
        raise InvalidArgument("dynamic=True: Focus(ops=...) picks its steps and Focus(seeds=...) its example "
                              "programs; edges shape static graphs only")
    kinds = focus_kinds(focus.ops) if focus is not None and focus.ops else ()
    dtypes = args["dtypes"]
    if dtypes is None:
        dtypes = st.sampled_from(FLOATS)
    check_strategy(dtypes, "dtypes", "pass a strategy, e.g. dtypes=st.sampled_from([torch.float32])")
    return dynamic_graph_cases(dtypes=dtypes, min_nodes=args["min_nodes"], max_nodes=args["max_nodes"],
                               min_inputs=args["min_inputs"], max_inputs=min(args["max_inputs"], 3), focus=kinds,
                               seeds=focus.seeds if focus is not None else ())


def _torch_ir_graphs(ops, mutations, focus, requires_grad, sizes, max_nodes, special_values):
    # random is allowed: a train-mode module's dropout draws (every run starts from RNG_SEED's state)
    unused = [name for name, value in (("ops", ops), ("mutations", mutations), ("focus", focus),
                                       ("requires_grad", requires_grad)) if value]
    if unused or sizes != "small":
        raise InvalidArgument(f"ir='torch' draws nn.Modules, which {', '.join(unused or ['sizes'])} cannot shape: "
                              f"leave them at their defaults (its parameters always require grad)")
    return torch_graph_cases(max_layers=max_nodes, special_values=special_values)


__all__ = ["SIZES", "graphs"]
