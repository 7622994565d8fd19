"""Named contracts: postconditions a kind of pass promises, selected with ``--ensure NAME``.

A contract is a function of a ``ContractContext`` returning messages (empty = kept). Register new
ones with ``@register_contract``; later layers add theirs (e.g. ``pointwise-kernels-only``).

>>> @register_contract("no-get-attr", "the result reads no module attributes")
... def _no_get_attr(ctx):
...     return [f"get_attr {n.target}, but should be none" for n in ctx.after.graph.nodes if n.op == "get_attr"]
>>> "no-get-attr" in CONTRACTS
True
>>> del CONTRACTS["no-get-attr"]
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.fx as fx

from ._errors import UsageError
from .invariants import node_label


@dataclass(frozen=True)
class ContractContext:
    """What a contract may look at: both graphs, and one run of each on identical inputs."""

    before: fx.GraphModule
    after: fx.GraphModule
    inputs: tuple  # inputs after the transformed graph's run
    outputs: tuple  # outputs of the transformed graph's run


@dataclass(frozen=True)
class Contract:
    name: str
    description: str
    check: object  # Callable[[ContractContext], list[str]]
    allows_alias_removal: bool = False  # the contract requires outputs to stop aliasing inputs


CONTRACTS: dict = {}


def register_contract(name: str, description: str, *, allows_alias_removal: bool = False):
    """Decorator: register ``fn(ctx) -> list[str]`` as contract ``name``."""

    def decorate(fn):
        CONTRACTS[name] = Contract(name, description, fn, allows_alias_removal)
        return fn

    return decorate


def get_contracts(names) -> tuple:
    """The Contract objects for ``names``; UsageError naming the known ones for an unknown name."""
    found = []
    for name in names:
        if name not in CONTRACTS:
            raise UsageError(f"--ensure {name!r} is not a known contract; known: {', '.join(sorted(CONTRACTS))}")
        found.append(CONTRACTS[name])
    return tuple(found)


def storage_of(t):
    if not isinstance(t, torch.Tensor):
        return None
    st = t.untyped_storage()
    return st.data_ptr() if st.nbytes() else None


def is_mutating_target(node: fx.Node) -> bool:
    """A node that writes to an operand: an op with a mutable schema, or an in-place method call."""
    if node.op == "call_method":
        return isinstance(node.target, str) and node.target.endswith("_") and not node.target.startswith("_")
    schema = getattr(node.target, "_schema", None)
    return node.op == "call_function" and schema is not None and schema.is_mutable


# The writes a functional graph may end with: caller-visible inputs and constants brought up to
# date (metadata first, then data), as torch.func.functionalize's epilogue does.
EPILOGUE_OPS = frozenset({torch.ops.aten.copy_.default, torch.ops.aten.as_strided_.default})


@register_contract("functional", "no op with a mutable schema except an epilogue writing inputs or constants "
                   "after all compute, and no output aliases an input unless declared", allows_alias_removal=True)
def _functional(ctx: ContractContext) -> list:
    """Mutating ops anywhere (nested bodies of higher-order ops included) are violations, except the
    epilogue: ``copy_``/``as_strided_`` into a placeholder or ``get_attr`` (or a dense ``as_strided``
    view of one, the way into an expanded input) after the last compute node of the top-level graph. An output may alias an input only where the graph declares it in
    ``gm.meta["declared_output_aliases"]`` (output index -> "input[i]")."""
    errors = []
    for gm in _graphs(ctx.after):
        epilogue = _epilogue(gm) if gm is ctx.after else set()
        errors += [f"mutating op={node.target}, but should be none in a functional graph (an epilogue writes only "
                   f"placeholders or constants, after all compute) [{node_label(gm, node)}]"
                   for node in gm.graph.nodes if is_mutating_target(node) and node not in epilogue]
    declared = dict(ctx.after.meta.get("declared_output_aliases", {}))
    inputs = {}  # storage -> the inputs on it (callers may pass several views of one buffer)
    for i, t in enumerate(ctx.inputs):
        if storage_of(t) is not None:
            inputs.setdefault(storage_of(t), []).append(f"input[{i}]")
    for i, out in enumerate(ctx.outputs):
        on = inputs.get(storage_of(out), [])
        if on and declared.get(i) not in on:
            errors.append(f"output[{i}] aliases {on[0]}, but should not: a view of an input escapes a functional "
                          f"graph (undeclared)")
    return errors


def _caller_state(node: fx.Node) -> bool:
    """A placeholder or constant, or an ``as_strided`` view of one."""
    if node.op == "call_function" and node.target == torch.ops.aten.as_strided.default:
        node = node.args[0]
    return node.op in ("placeholder", "get_attr")


def _graphs(gm: fx.GraphModule) -> list:
    """``gm`` and every GraphModule below it (bodies of higher-order ops)."""
    return [m for m in gm.modules() if isinstance(m, fx.GraphModule)]


def _epilogue(gm: fx.GraphModule) -> set:
    """The trailing writes into placeholders/constants: after the last node that is neither such a
    write nor an ``as_strided`` view (the replays they copy from, the outputs viewing inputs) or a
    ``view.dtype`` of one (an output viewing an input as another dtype)."""
    nodes = [n for n in gm.graph.nodes if n.op not in ("placeholder", "get_attr", "output")]
    found = set()
    for node in reversed(nodes):
        if node.target in EPILOGUE_OPS and _caller_state(node.args[0]):
            found.add(node)
        elif node.target not in (torch.ops.aten.as_strided.default, torch.ops.aten.view.dtype):
            break
    return found


@register_contract("no-input-as-output", "no graph input is returned directly as an output (Torch-TensorRT)",
                   allows_alias_removal=True)  # the repair (a clone) necessarily ends the output's aliasing
def _no_input_as_output(ctx: ContractContext) -> list:
    output = next(n for n in ctx.after.graph.nodes if n.op == "output")
    flat = torch.utils._pytree.tree_leaves(output.args[0])
    return [f"output[{i}]=%{a.name} (a placeholder), but should not be a graph input [{node_label(ctx.after, a)}]"
            for i, a in enumerate(flat) if isinstance(a, fx.Node) and a.op == "placeholder"]


@register_contract("no-views", "no view op is left in the graph: every view became a copy (export's "
                   "ReplaceViewOpsWithViewCopyOpsPass, Edge's view_copy IR)",
                   allows_alias_removal=True)  # a view's copy necessarily ends the output's aliasing
def _no_views(ctx: ContractContext) -> list:
    """A view op is an ATen overload whose first return aliases an operand without writing it
    (``view``, ``permute``, ``slice.Tensor``, ``alias``...); ``*_copy`` ops and getitem are not."""
    errors = []
    for gm in _graphs(ctx.after):
        for node in gm.graph.nodes:
            schema = getattr(node.target, "_schema", None)
            if node.op != "call_function" or schema is None or not schema.returns or is_mutating_target(node):
                continue
            info = schema.returns[0].alias_info
            if info is not None and not info.is_write:
                errors.append(f"view op={node.target}, but should be none (a copy instead) [{node_label(gm, node)}]")
    return errors


def _pointwise_ops() -> frozenset:
    from strategies import OPS

    return frozenset(row.overload for row in OPS if row.category == "pointwise")


@register_contract("pointwise-kernels-only", "no pointwise ATen op is left outside a kernel (a pointwise lowering "
                   "put every one into a fused kernel launch; an op on complex values, which no kernel "
                   "language has a type for, stays an ATen call)")
def _pointwise_kernels_only(ctx: ContractContext) -> list:
    """A pointwise op is one of the catalog's, or any ATen overload tagged ``pointwise``; writes are not
    counted (an in-place op is not a lowering's to fuse), nor ops reading or making a complex tensor
    (Triton has no complex type: a lowering leaves them to ATen, as Inductor falls back on them), and
    nodes inside higher-order-op bodies are."""
    catalog = _pointwise_ops()
    errors = []
    for gm in _graphs(ctx.after):
        for node in gm.graph.nodes:
            target = node.target
            if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload) or is_mutating_target(node):
                continue
            if (target in catalog or torch.Tag.pointwise in target.tags) and not _on_complex(node):
                errors.append(f"pointwise op={target}, but should be inside a kernel [{node_label(gm, node)}]")
    return errors


def _on_complex(node: fx.Node) -> bool:
    """Whether ``node`` reads or makes a complex tensor (by ``meta['val']``)."""
    vals = [n.meta.get("val") for n in (node, *node.all_input_nodes)]
    return any(isinstance(v, torch.Tensor) and v.is_complex() for v in vals)
