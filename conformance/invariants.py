"""Graph validity: the one IR checker. Every message names the node index, op, target, its
``meta['val']`` and its inputs, so a user can find the node in ``gm.code`` without a debugger."""

from __future__ import annotations

import operator

import torch
import torch.fx as fx
import torch.utils._pytree as pytree

from .oracle import describe, significant_strides


def node_label(gm: fx.GraphModule, node: fx.Node) -> str:
    """``node 4 %view: call_function aten.view.default(%x0, [3, 2]) meta['val']=float32[3, 2]``."""
    index = next((i for i, n in enumerate(gm.graph.nodes) if n is node), "?")
    val = node.meta.get("val")
    meta = f" meta['val']={describe(val)}" if isinstance(val, torch.Tensor) else ""
    try:
        args = ", ".join([*(_arg(a) for a in node.args), *(f"{k}={_arg(v)}" for k, v in node.kwargs.items())])
    except Exception:  # noqa: BLE001 - a label must never fail
        args = "..."
    return f"node {index} %{node.name}: {node.op} {_target(node.target)}({args}){meta}"


def _target(target) -> str:
    if isinstance(target, str):
        return target
    name = getattr(target, "__name__", None) or repr(target)
    module = getattr(target, "__module__", "") or ""
    if module.startswith("torch._ops."):
        return f"{module.removeprefix('torch._ops.')}.{name}"
    return str(target) if name == repr(target) else name


def _arg(a) -> str:
    if isinstance(a, fx.Node):
        return f"%{a.name}"
    if isinstance(a, (list, tuple)):
        inner = ", ".join(_arg(x) for x in a)
        return f"[{inner}]" if isinstance(a, list) else f"({inner})"
    return repr(a)


def structural_errors(gm: fx.GraphModule, n_inputs: int) -> list:
    """Errors that make the graph unusable: lint failures, a changed signature, a failed recompile."""
    try:
        gm.graph.lint()
    except Exception as exc:  # noqa: BLE001 - lint raises RuntimeError, AssertionError, KeyError...
        return [f"graph.lint() raised {type(exc).__name__}: {first_line(exc)}, but should pass"]
    for name, sub in gm.named_modules():  # a higher-order op's subgraphs (cond's branches, a loop's body)
        if isinstance(sub, fx.GraphModule) and sub is not gm:
            try:
                sub.graph.lint()
            except Exception as exc:  # noqa: BLE001 - as above
                return [f"subgraph {name}: graph.lint() raised {type(exc).__name__}: {first_line(exc)}, "
                        "but should pass"]
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != n_inputs:
        names = ", ".join(n.name for n in placeholders)
        return [f"placeholders={len(placeholders)} ({names}), but should be {n_inputs} (one per input; a pass "
                f"must keep the graph's signature)"]
    if not any(n.op == "output" for n in gm.graph.nodes):
        return ["output node=missing, but should be present"]
    try:
        gm.recompile()
    except Exception as exc:  # noqa: BLE001
        return [f"gm.recompile() raised {type(exc).__name__}: {first_line(exc)}, but should succeed"]
    return []


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (capped), for one-line findings."""
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else "(no message)"


class Recorder(fx.Interpreter):
    """Runs a graph node by node, keeping each tensor result's metadata and the node that failed."""

    def __init__(self, gm: fx.GraphModule):
        super().__init__(gm)
        self.seen = {}
        self.failed = None

    def run_node(self, n):
        try:
            out = super().run_node(n)
        except Exception:
            self.failed = n
            raise
        if isinstance(out, torch.Tensor):
            self.seen[n] = (tuple(out.shape), out.dtype, significant_strides(out.shape, out.stride()))
        return out


def meta_val_errors(gm: fx.GraphModule, seen: dict, *, excuse=None) -> list:
    """``meta['val']`` (where present) against what each node really produced: shape, dtype, strides.
    ``excuse(node)``: a mismatch at that node is not an error (``fake_rederives``)."""
    errors = []
    for node, (shape, dtype, strides) in seen.items():
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor) or not _concrete(val.shape):
            continue
        got = (tuple(val.shape), val.dtype, significant_strides(val.shape, val.stride()) if _concrete(val.stride()) else strides)
        if got != (shape, dtype, strides) and not (excuse is not None and excuse(node)):
            want = f"{str(dtype).removeprefix('torch.')}{list(shape)} stride={_show(strides)}"
            have = f"{str(got[1]).removeprefix('torch.')}{list(got[0])} stride={_show(got[2])}"
            errors.append(f"meta['val']={have}, but should be {want} (what the node produces) "
                          f"[{node_label(gm, node)}]")
    return errors


def fake_rederives(node: fx.Node) -> bool:
    """Whether torch's meta kernels (what fake-tensor propagation runs), run on tensors with the
    node's operands' ``meta['val']`` shapes, strides and dtypes, derive the node's own
    ``meta['val']`` (shape, dtype, significant strides; a getitem's through the call it reads). A
    pass that propagated fakes then did what torch says, and where eager produces another layout
    the two halves of torch disagree (``strategies.eager_fake_disagreement``): torch's finding, not
    the pass's. (On meta tensors, not in the node's FakeTensorMode: a pass's new nodes often carry
    fakes of another mode, and mixing modes raises.)"""
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or not _concrete(val.shape) or not _concrete(val.stride()):
        return False
    out = _meta_result(node)
    return (isinstance(out, torch.Tensor) and tuple(out.shape) == tuple(val.shape) and out.dtype == val.dtype
            and significant_strides(out.shape, out.stride()) == significant_strides(val.shape, val.stride()))


def _meta_result(node: fx.Node):
    """The node's call re-run on meta tensors shaped like its operands' ``meta['val']``, or None."""
    if node.op != "call_function":
        return None
    if node.target is operator.getitem and isinstance(node.args[0], fx.Node):
        results = _meta_result(node.args[0])
        return results[node.args[1]] if isinstance(results, (tuple, list)) else None
    if not isinstance(node.target, torch._ops.OpOverload) or node.target._schema.is_mutable:
        return None  # (an in-place op's result is its operand's metadata, which it may change)
    missing = []

    def meta_of(a):
        if isinstance(a, fx.Node):
            v = a.meta.get("val")
            if not isinstance(v, torch.Tensor) or not _concrete(v.shape) or not _concrete(v.stride()):
                missing.append(a)
                return None
            return torch.empty_strided(tuple(v.shape), tuple(v.stride()), dtype=v.dtype, device="meta")
        if isinstance(a, torch.device):
            return torch.device("meta")
        return a

    args, kwargs = pytree.tree_map(meta_of, (node.args, node.kwargs))
    if missing:
        return None
    if "device" in kwargs:
        kwargs["device"] = torch.device("meta")
    try:
        return node.target(*args, **kwargs)
    except Exception:  # noqa: BLE001 - the meta kernel refusing is no excuse
        return None


def _concrete(values) -> bool:
    return all(isinstance(v, int) for v in values)


def _show(strides) -> str:
    return "(" + ", ".join("*" if s is None else str(s) for s in strides) + ")"
