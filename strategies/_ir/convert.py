"""IR modes: a drawn ATen graph re-expressed as a pipeline stage hands graphs to its passes.

``graphs(ir=...)`` draws an ``aten`` graph and converts it with torch's own tracer for that stage,
so what a pass gets is what the stage makes (docs/torch-facts.md section 10 has the measurements):

- ``aten``: the drawn graph itself (ATen overloads, views, and with ``mutations=True`` in-place
  ops, input and view mutation, ``_set_grad_enabled`` regions; with ``hops=["wrap_with_autocast"]``
  ``_enter_autocast``/``_exit_autocast`` regions; CompositeImplicit ops such as ``reshape`` and
  ``flatten`` as drawn).
- ``post-grad``: what AOTAutograd hands Inductor's post-grad passes in inference:
  ``aot_module_simplified`` under ``no_grad`` with ``keep_inference_input_mutations=True`` and
  Inductor's decomposition table. Functional ATen; input mutations are ``copy_`` nodes into the
  placeholders at the end (views of a written input may follow them); no grad-mode nodes; the
  module's buffers are leading placeholders.
- ``export`` (alias ``core-aten``): ``torch.export.export`` then ``run_decompositions()``. Functional,
  core ATen (no CompositeImplicit ops); input mutations are extra leading outputs named by the
  graph signature, which is ``gm.meta["graph_signature"]`` (an ``ExportGraphSignature``); buffers
  are leading placeholders.
- ``export-module``: ``torch.export.export`` then ``run_decompositions()`` then ``.module()``, what
  Torch-TensorRT's ``post_lowering`` and ExecuTorch-style module passes take: core ATen, parameters
  and buffers read by ``get_attr`` (module state, not inputs), a ``_guards_fn`` ``call_module`` with
  no users, input and buffer mutations written back by user-less ``copy_`` nodes at the end, the
  pytree calling convention (``_in_spec``/``_out_spec``), ``val`` and ``tensor_meta`` on nodes.
- ``dynamo``: the graph a ``torch.compile`` backend receives from Dynamo (``fullgraph=True``), as
  Torch-TensorRT's and vLLM's backends get it: the drawn calls as Dynamo records them (in-place ops
  kept), placeholders typed ``torch.Tensor``, ``example_value`` fake tensors in ``meta``; buffers
  are leading placeholders.
- ``pre-dispatch``: what torch's pre-dispatch export (``torch.export.export``'s training IR) makes:
  ``make_fx(pre_dispatch=True)`` over the graph with its buffers lifted to placeholders, then the
  two passes export runs on that trace, ``replace_set_grad_with_hop_pass`` and
  ``replace_autocast_with_hop_pass``: in-place ops and CompositeImplicit ops kept, each grad region
  a ``wrap_with_set_grad_enabled`` and each autocast region a ``wrap_with_autocast`` (their bodies
  ``get_attr`` submodules, results read through ``getitem``).
- ``torch``: not a conversion: ``fx.symbolic_trace`` of a drawn ``nn.Module`` (``torch_ir.py``),
  what pre-grad and module-level passes take (``call_module``, ``torch.nn.functional``, methods).

The conversion is a function of the drawn graph, so a converted case shrinks with it. A graph the
stage's tracer cannot take is rejected (Hypothesis draws another): graphs that change an input's
shape or strides in place (``metadata-mutation``) for post-grad and export (torch 2.13's tracers
lose or crash on those), and any graph the tracer raises on. ``ir_errors`` states each stage's
invariants; the meta-tests check every drawn graph against them.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import operator
import types
import warnings

import torch
import torch.fx as fx
from hypothesis import reject

from .._build.eager import quiet_logs
from .._build.device import device_of, forked_rng
from .._errors import InvalidArgument
from .._tensors import Layout
from .._build.meta import attach_meta
from .._build.modes import modes_kept
from .._draw.case import GraphCase, _rebuild
from .._draw.features import graph_features
from .torch_ir import torch_ir_errors

IRS = ("aten", "post-grad", "export", "export-module", "dynamo", "pre-dispatch", "torch")
ALIASES = {"core-aten": "export"}


def check_ir(ir) -> str:
    """The canonical IR name for ``ir`` (an alias resolved), or InvalidArgument."""
    name = ALIASES.get(ir, ir)
    if name not in IRS:
        raise InvalidArgument(f"ir={ir!r} must be one of {', '.join(IRS + tuple(ALIASES))}")
    return name


# --- conversions -------------------------------------------------------------------------------------


def _post_grad(gm: fx.GraphModule, buffers: list, inputs: tuple) -> fx.GraphModule:
    from torch._functorch.aot_autograd import aot_module_simplified
    import torch._inductor.lowering  # noqa: F401 - the decomposition table reads it
    from torch._inductor.decomposition import select_decomp_table

    box = {}

    def capture(graph_module, example_inputs):
        box["gm"] = graph_module
        return graph_module

    with torch.no_grad():
        aot_module_simplified(gm, list(inputs), fw_compiler=capture, decompositions=select_decomp_table(),
                              keep_inference_input_mutations=True)
    return box["gm"]


def _export(gm: fx.GraphModule, buffers: list, inputs: tuple) -> fx.GraphModule:
    with no_treespec_warning():
        ep = core_aten(torch.export.export(gm, tuple(inputs)))
    from torch.export.graph_signature import InputKind

    kinds = [s.kind for s in ep.graph_signature.input_specs]
    if any(k not in (InputKind.BUFFER, InputKind.USER_INPUT) for k in kinds) or \
            kinds != sorted(kinds, key=lambda k: k != InputKind.BUFFER):
        raise _Unsupported("a lifted input that is not a buffer, or buffers after user inputs")
    names = [s.target for s in ep.graph_signature.input_specs if s.kind == InputKind.BUFFER]
    if names != [name for name, _ in gm.named_buffers()]:
        raise _Unsupported("lifted buffers in another order than the module's")
    out = ep.graph_module
    out.meta["graph_signature"] = ep.graph_signature
    return out


def _export_module(gm: fx.GraphModule, buffers: list, inputs: tuple) -> fx.GraphModule:
    with no_treespec_warning():
        out = core_aten(torch.export.export(gm, tuple(inputs))).module()
    for name, value in [*out.named_buffers(), *out.named_parameters()]:  # its own state, not the drawn graph's
        owner, _, leaf = name.rpartition(".")
        module = out.get_submodule(owner)
        if leaf in module._parameters:
            module._parameters[leaf] = torch.nn.Parameter(_exact_copy(value.detach()), value.requires_grad)
        else:
            module._buffers[leaf] = _exact_copy(value)
    return out


def core_aten(ep):
    """``ep.run_decompositions()``, with its default table split once per state of the op registry.

    torch 2.13 builds that table anew on every call: it walks every CompositeImplicitAutograd op of
    every op namespace (27 of them) to materialize and sort them: a third of the export IR's cost
    (0.20 s of 0.56 s a drawn graph under cProfile; 295 -> 209 ms a draw, 2-core AMD EPYC). The split table is
    a function of the registered ops and decompositions, so it is kept with a key of what it reads:
    the C++ dispatcher's CompositeImplicitAutograd registrations, the op namespaces, and the size of
    the decomposition tables (a user's op registered between draws makes a new key). Then torch's own
    ``_decompose_exported_program`` runs, as ``run_decompositions()`` calls it. A torch without those
    internals, or with them called otherwise (they changed between torch releases), gets
    ``run_decompositions()`` itself."""
    internals = _decomposition_internals()
    if internals is None:  # another torch: the public call, whatever it costs
        return ep.run_decompositions()
    cia_to_decomp, python_decomp_table = _split_table(_registry_key())
    return internals[0](ep, cia_to_decomp=dict(cia_to_decomp), python_decomp_table=dict(python_decomp_table),
                        joint_loss_index=None, decompose_custom_triton_ops=False)


@functools.lru_cache(maxsize=1)
def _split_table(key: tuple) -> tuple:
    """``run_decompositions()``'s default table split as it splits it, for the registry state ``key``
    (``_registry_key()``: the split reads nothing else)."""
    return _decomposition_internals()[1](torch.export.default_decompositions().materialize())


# run_decompositions()'s own call, as torch 2.13 makes it (earlier releases took other arguments: no
# decompose_custom_triton_ops, or a decomp_table and _preserve_ops)
_DECOMPOSE_PARAMETERS = ("ep", "cia_to_decomp", "python_decomp_table", "joint_loss_index", "decompose_custom_triton_ops")


@functools.lru_cache(maxsize=1)
def _decomposition_internals():
    """torch's ``(_decompose_exported_program, _split_decomp_table_to_cia_and_python_decomp)`` where
    they take what ``core_aten`` passes, else None."""
    try:
        from torch.export.exported_program import (_decompose_exported_program,
                                                   _split_decomp_table_to_cia_and_python_decomp)
        parameters = tuple(inspect.signature(_decompose_exported_program).parameters)
    except (ImportError, TypeError, ValueError):
        return None
    if parameters != _DECOMPOSE_PARAMETERS:
        return None
    return _decompose_exported_program, _split_decomp_table_to_cia_and_python_decomp


def _registry_key() -> tuple:
    """What ``run_decompositions()``'s default table is a function of (0.3 ms to read)."""
    from torch._decomp import decomposition_table, global_decomposition_table

    cia = torch._C._dispatch_get_registrations_for_dispatch_key("CompositeImplicitAutograd")
    return (hash(tuple(sorted(cia))), tuple(torch.ops._dir), len(decomposition_table),
            tuple(len(t) for t in global_decomposition_table.values()))


def _dynamo(gm: fx.GraphModule, buffers: list, inputs: tuple):
    """Dynamo's graph and, per placeholder, the index of the argument it takes: Dynamo orders
    placeholders by first use and drops unused arguments, and a backend is called that way."""
    names = [name for name, _ in gm.named_buffers()]
    args = (*buffers, *inputs)
    box = []

    def capture(graph_module, example_inputs):
        box.append((graph_module, list(example_inputs)))
        return graph_module.forward

    def lifted(*args):
        return torch.func.functional_call(gm, dict(zip(names, args[:len(names)])), tuple(args[len(names):]))

    # A code object of its own: Dynamo caches compiled frames on the code object, so each drawn graph
    # is traced afresh without resetting Dynamo (the host's compiled functions stay compiled).
    fresh = types.FunctionType(lifted.__code__.replace(), lifted.__globals__, "drawn_graph", None, lifted.__closure__)
    with quiet_logs("torch._guards", "torch._dynamo"):  # guards it could not build for a graph it rejects
        torch.compile(fresh, backend=capture, fullgraph=True, dynamic=False)(*args)
    if len(box) != 1:
        raise _Unsupported(f"Dynamo handed the backend {len(box)} graphs")
    out, example_inputs = box[0]
    order = []
    for t in example_inputs:
        found = [i for i, a in enumerate(args) if a is t]
        if len(found) != 1:
            raise _Unsupported("a backend input that is not one of the graph's arguments")
        order.append(found[0])
    return out, tuple(order)


@contextlib.contextmanager
def no_treespec_warning():
    """torch 2.13 deprecates a pytree spec class its own ``ExportedProgram.module()`` (and any copy of
    that module's code generator) still builds: a FutureWarning per graph that is not the user's."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*LeafSpec.* is deprecated", category=FutureWarning)
        yield


def _pre_dispatch(gm: fx.GraphModule, buffers: list, inputs: tuple) -> fx.GraphModule:
    from torch.fx.experimental.proxy_tensor import make_fx

    names = [name for name, _ in gm.named_buffers()]

    def lifted(*args):
        return torch.func.functional_call(gm, dict(zip(names, args[:len(names)])), tuple(args[len(names):]))

    from torch._export.passes.replace_autocast_with_hop_pass import replace_autocast_with_hop_pass
    from torch._export.passes.replace_set_grad_with_hop_pass import replace_set_grad_with_hop_pass

    with modes_kept():
        traced = make_fx(lifted, pre_dispatch=True)(*buffers, *inputs)
    # as torch.export's _produce_aten_artifact does (grad regions first), with no signature to mend
    traced, _ = replace_set_grad_with_hop_pass(traced, None)
    traced, _ = replace_autocast_with_hop_pass(traced, None)
    return traced


class _Unsupported(Exception):
    """The stage's tracer gives a form this module does not hand on (rejected like a tracer failure)."""


_CONVERT = {"post-grad": _post_grad, "export": _export, "export-module": _export_module, "dynamo": _dynamo,
            "pre-dispatch": _pre_dispatch}
_NO_METADATA_MUTATION = ("post-grad", "export", "export-module")
_STATEFUL = ("export-module",)  # IRs whose buffers stay module state (get_attr), not leading inputs


def to_ir(gm: fx.GraphModule, inputs, ir: str):
    """``(gm, inputs)`` as the ``ir`` stage hands them to its passes: ``gm`` traced by that stage's
    tracer (``gm`` itself is not changed), its buffers lifted to leading inputs (``export-module``
    keeps them as module state; ``dynamo`` takes its arguments in Dynamo's order, the order of first
    use, without those the graph does not read). For hand-made graphs
    (a finding's minimal graph, a repro); ``graphs(ir=...)`` draws through it. InvalidArgument when
    the stage's tracer cannot take ``gm`` (post-grad and export want a tuple of outputs).

    >>> import torch, torch.fx as fx
    >>> gm = fx.symbolic_trace(lambda x: (torch.ops.aten.add_.Tensor(x, 1),))
    >>> out, ins = to_ir(gm, (torch.zeros(2),), "post-grad")
    >>> [n.target.__name__ for n in out.graph.nodes if n.op == "call_function"]
    ['add.Tensor', 'copy_.default']
    """
    ir = check_ir(ir)
    if ir == "aten":
        return gm, tuple(inputs)
    traced, inputs, _ = _trace(gm, inputs, ir)
    return traced, inputs


def _trace(gm: fx.GraphModule, inputs, ir: str):
    """``to_ir``, and which of ``(*buffers, *inputs)`` each placeholder of the traced graph takes
    (None: all, in order)."""
    ir = check_ir(ir)
    if ir == "torch":
        raise InvalidArgument("ir='torch' graphs are traced from nn.Modules (fx.symbolic_trace), not converted "
                              "from ATen graphs")
    if ir == "aten":
        return gm, tuple(inputs), None
    buffers = [b for _, b in gm.named_buffers()]
    originals = (*buffers, *inputs)

    def fresh() -> tuple:  # a tracer may run the graph on real tensors (pre-dispatch), writing them
        return tuple(_exact_copy(t) for t in originals)

    try:
        with modes_kept(), forked_rng(device_of(originals)):
            lifted = fresh()
            traced = _CONVERT[ir](gm, list(lifted[:len(buffers)]), lifted[len(buffers):])
            traced, order = traced if isinstance(traced, tuple) else (traced, None)
    except Exception as exc:  # noqa: BLE001 - the tracer's own error, said in one line
        raise InvalidArgument(f"the {ir} tracer cannot take this graph: {type(exc).__name__}: "
                              f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}") from None
    traced.meta["ir"] = ir
    if ir in _STATEFUL:
        order = tuple(range(len(buffers), len(originals)))
    if ir != "dynamo" and any("val" not in n.meta for n in traced.graph.nodes if n.op == "placeholder"):
        attach_meta(traced, _pick(fresh(), order))  # Dynamo's graphs carry example_value, as backends get them
    return traced, _pick(fresh(), order), order


def _pick(values: tuple, order) -> tuple:
    return values if order is None else tuple(values[i] for i in order)


def _exact_copy(t):
    """A copy of ``t`` with its own storage and the same sizes, strides, offset and requires_grad
    (``clone`` makes expanded and gapped tensors contiguous, and tracers see layouts)."""
    if not isinstance(t, torch.Tensor):
        return t
    out = torch.empty(0, dtype=t.dtype, device=t.device)
    out.set_(t.untyped_storage().clone(), t.storage_offset(), t.size(), t.stride())
    return out.requires_grad_() if t.requires_grad else out


def convert(case, ir: str):
    """``case`` (a drawn aten ``GraphCase``) in ``ir`` (``to_ir``). Calls ``hypothesis.reject()``
    where the tracer cannot take it, or where the trace does not run (a stage may trace what eager
    cannot run: torch-facts section 10)."""
    if ir == "aten":
        return case
    if ir in _NO_METADATA_MUTATION and "metadata-mutation" in case.features:
        reject()
    buffers = [b for _, b in case.gm.named_buffers()]
    recipes = tuple((b.clone(), Layout()) for b in buffers) + tuple(case.recipes)
    try:
        traced, _, order = _trace(case.gm, case.example_inputs, ir)  # it copies them: they stay as drawn
        recipes = _pick(recipes, order)
        features = graph_features(traced, _rebuild(recipes))  # its first run
    except Exception:  # noqa: BLE001 - a graph this stage cannot take: draw another
        reject()
    return GraphCase(traced, _rebuild(recipes), features, recipes, device=case.device)


# --- invariants --------------------------------------------------------------------------------------


def _composite_implicit(op) -> bool:
    return isinstance(op, torch._ops.OpOverload) and torch._C._dispatch_has_kernel_for_dispatch_key(
        op.name(), "CompositeImplicitAutograd")


def _mutable(op) -> bool:
    return isinstance(op, torch._ops.OpOverload) and op._schema.is_mutable


def ir_errors(gm: fx.GraphModule, ir: str) -> list:
    """What in ``gm`` breaks the invariants of ``ir`` (empty when none): one line per problem."""
    ir = check_ir(ir)
    if ir == "torch":
        return torch_ir_errors(gm)
    errors = []
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    errors += _node_errors(gm, calls, ir)
    if ir == "export":
        errors += _export_errors(gm, calls, placeholders)
    if ir == "post-grad":
        errors += _epilogue_errors(calls, placeholders)
    if ir == "export-module":
        errors += _module_errors(gm, calls, placeholders)
    if ir == "dynamo":
        errors += _dynamo_errors(gm, placeholders)
    return errors


# Functional higher-order ops every traced IR may hold (a user's op that writes is wrapped in
# auto_functionalized(_v2); cond and invoke_subgraph are what programs and regions trace to).
_FUNCTIONAL_HOPS = ("cond", "invoke_subgraph", "auto_functionalized", "auto_functionalized_v2")
# Pre-dispatch's regions (torch.export's training IR): their bodies may write, as the graph may.
_REGION_HOPS = ("wrap_with_set_grad_enabled", "wrap_with_autocast")
_AUTOCAST_NODES = (torch.amp.autocast_mode._enter_autocast, torch.amp.autocast_mode._exit_autocast)


def _mode_node(target, ir: str) -> bool:
    """A node that switches a mode, where ``ir`` holds such nodes: grad mode in aten, pre-dispatch
    (make_fx's own form, before export outlines it) and dynamo; autocast in aten and pre-dispatch."""
    return (target is torch._C._set_grad_enabled and ir in ("aten", "pre-dispatch", "dynamo")
            or target in _AUTOCAST_NODES and ir in ("aten", "pre-dispatch"))


def _node_errors(gm: fx.GraphModule, calls: list, ir: str, where: str = "") -> list:
    """Each call is an ATen overload, a getitem or a functional higher-order op (whose subgraphs are
    held to the same rules, named by their attribute); a grad-mode toggle where the IR has them."""
    errors, subgraphs, writable = [], {}, set()  # each subgraph checked once, however many calls fetch it
    for n in calls:
        hop = n.target.name() if isinstance(n.target, torch._ops.HigherOrderOperator) else None
        if hop in _FUNCTIONAL_HOPS or hop in _REGION_HOPS and ir == "pre-dispatch":
            found = [a.target for a in n.args if isinstance(a, fx.Node) and a.op == "get_attr"]
            subgraphs.update((t, getattr(gm, t, None)) for t in found)
            writable.update(found if hop in _REGION_HOPS else ())
        elif not isinstance(n.target, torch._ops.OpOverload) and n.target is not operator.getitem \
                and not _mode_node(n.target, ir):
            errors.append(f"{where}{n.name}: {n.target} is not an ATen overload (or getitem) in {ir} IR")
        elif ir in ("post-grad", "export", "export-module") and _composite_implicit(n.target):
            errors.append(f"{where}{n.name}: {n.target} is CompositeImplicitAutograd, which {ir} graphs never hold")
    for target, sub in subgraphs.items():
        if isinstance(sub, fx.GraphModule):
            inner = [m for m in sub.graph.nodes if m.op == "call_function"]
            errors += _node_errors(sub, inner, ir, f"{where}{target}.")
            errors += [f"{where}{target}.{m.name}: {m.target} mutates inside a subgraph" for m in inner
                       if _mutable(m.target) and target not in writable]
    return errors


def _epilogue_errors(calls: list, placeholders: list, state=(), user_less: bool = False) -> list:
    """Post-grad: the only mutation is ``copy_`` into a placeholder, once each, after every compute
    node (views and getitems of the written inputs may follow it). ``export-module``: into a
    placeholder or module state (``state``: its ``get_attr`` nodes), and read by no node
    but the output (``user_less``)."""
    errors, written, epilogue = [], set(), False
    for n in calls:
        if n.target is torch.ops.aten.copy_.default:
            epilogue = True
            dst = n.args[0]
            if dst not in placeholders and dst not in state:
                errors.append(f"{n.name}: copy_ into {dst}, which is not a placeholder"
                              f"{' or a get_attr' if user_less else ''}")
            elif dst in written:
                errors.append(f"{n.name}: a second copy_ into {dst.name}")
            if user_less and any(u.op != "output" for u in n.users):
                errors.append(f"{n.name}: a write-back copy_ that nodes read "
                              f"({', '.join(u.name for u in n.users if u.op != 'output')})")
            written.add(dst)
        elif _mutable(n.target):
            errors.append(f"{n.name}: {n.target} mutates, but {'export-module' if user_less else 'post-grad'} "
                          f"graphs are functional but for the copy_ epilogue")
        elif epilogue and not (n.target is operator.getitem or _is_view(n.target)):
            errors.append(f"{n.name}: {n.target} after the copy_ epilogue began (only views may follow it)")
    return errors


def _module_errors(gm: fx.GraphModule, calls: list, placeholders: list) -> list:
    """``ExportedProgram.module()``: state read by ``get_attr``, one user-less ``_guards_fn`` call,
    user-less write-backs."""
    state = [n for n in gm.graph.nodes if n.op == "get_attr"]
    errors = _epilogue_errors(calls, placeholders, state, user_less=True)
    for n in gm.graph.nodes:
        if n.op == "call_module" and (n.target != "_guards_fn" or n.users):
            errors.append(f"{n.name}: call_module {n.target}{' with users' if n.users else ''}; export-module "
                          f"graphs call only _guards_fn, and use nothing it returns")
        if n.op in ("placeholder", "get_attr") and "val" not in n.meta:
            errors.append(f"{n.name}: a {n.op} without meta['val']")
    return errors


def _dynamo_errors(gm: fx.GraphModule, placeholders: list) -> list:
    """What a backend gets from Dynamo: typed placeholders, ``example_value`` on every node that
    computes a tensor."""
    errors = []
    for n in placeholders:
        if not (isinstance(n.type, type) and issubclass(n.type, torch.Tensor)):
            errors.append(f"{n.name}: a placeholder typed {n.type!r}; Dynamo types tensor placeholders torch.Tensor")
    for n in gm.graph.nodes:
        if (n.op == "placeholder" or n.op == "call_function" and n.target is not torch._C._set_grad_enabled) \
                and "example_value" not in n.meta:
            errors.append(f"{n.name}: no meta['example_value'], which Dynamo sets on every node it records")
    return errors


def _is_view(op) -> bool:
    return isinstance(op, torch._ops.OpOverload) and op.is_view


def _export_errors(gm: fx.GraphModule, calls: list, placeholders: list) -> list:
    errors = []
    for n in calls:
        if _mutable(n.target):
            errors.append(f"{n.name}: {n.target} mutates, but export graphs are functional")
    sig = gm.meta.get("graph_signature")
    if sig is None:
        return errors + ["gm.meta['graph_signature'] is missing"]
    if [s.arg.name for s in sig.input_specs] != [p.name for p in placeholders]:
        errors.append("the signature's inputs are not the placeholders, in order")
    output = next(n for n in gm.graph.nodes if n.op == "output")
    outs = list(output.args[0])
    if len(sig.output_specs) != len(outs) or any(getattr(o, "name", None) != s.arg.name
                                                 for o, s in zip(outs, sig.output_specs)
                                                 if hasattr(s.arg, "name") and isinstance(o, fx.Node)):
        errors.append("the signature's outputs are not the graph's outputs, in order")
    return errors


__all__ = ["ALIASES", "IRS", "check_ir", "convert", "ir_errors", "to_ir"]
