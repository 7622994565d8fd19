"""Torch's own graph passes, each verified in the IR its pipeline stage hands it and in its own
calling form, exactly as a user would run ``fx-conformance verify`` on them.

- ``PASSES``: one row per pass: its import path, the IR (``strategies.IRS``), the graph kind, and
  how it is called (``--pass-arg``, ``--context``; the form itself is detected: a pattern table, a
  PassBase class, ``fn(gm, *sample_args)``...). ``test_torch_pass`` runs ``verify()`` on it: every
  violation must be one that a row of ``FINDINGS`` names for that pass, and the pass must change
  graphs (a verdict on a pass that never fired is not a verdict). Known findings do not end the
  search (``verify(known=)``), so they cannot hide a new one. A pass the generator never reaches
  says why in its row, as a strict xfail on firing: the day it fires, the row must be updated.
- ``FINDINGS``: what the suite found wrong in torch's passes, each minimised by hand to a small
  program, traced into the pass's IR, and explained. ``test_finding_shows`` proves the program
  still shows it (the checker catches it); ``test_finding_fixed`` is a strict xfail naming the
  torch version and the behaviour, so a torch upgrade that fixes one turns the suite red until its
  row is removed. The nightly report lists them (``fx-conformance run --fx-summary-json``).

The search budget follows the Hypothesis profile (``ci``: 50 graphs per pass, seed 0).
"""

from __future__ import annotations

import collections
import copy
import inspect
import pathlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import pytest
import torch
import torch.fx as fx
from hypothesis import settings
from torch.fx.experimental.proxy_tensor import make_fx

from conformance import check, verify
from conformance._random import draws_random
from conformance.oracle import describe
from conformance.pytest_plugin import DATABASE
from strategies import to_ir

from ._tiers import spread

pytestmark = pytest.mark.conformance

aten = torch.ops.aten
prims = torch.ops.prims
TORCH = f"torch {torch.__version__.split('+')[0]}"
ROOT = pathlib.Path(__file__).resolve().parents[2]
PG = "torch._inductor.fx_passes.post_grad:"
JG = "torch._inductor.fx_passes.joint_graph:"
INDUCTOR = "conformance.contexts:inductor"


# --- seed programs: what a pattern table exists for (verify(seed_graphs=...)) ------------------------


def addmm_seeds():
    """The post-grad mm patterns: ``mm`` then an add of a bias (``addmm``), and of a product (``mm_plus_mm``)."""
    a, b, c = torch.randn(3, 4), torch.randn(4, 5), torch.randn(5)
    return [(lambda a, b, c: (torch.mm(a, b) + c,), (a, b, c)),
            (lambda a, b, c: (torch.add(torch.mm(a, b), c, alpha=0.5),), (a, b, c))]


def cumsum_seeds():
    """The post-grad ``pointless_cumsum`` pattern: a cumsum of a tensor of one value (``full``, with every
    keyword make_fx records), which it rewrites as ``arange * value``."""
    x = torch.randn(3, 4)
    return [(lambda x: (torch.cumsum(torch.full((3, 4), 2.0), 1) + x,), (x,)),
            (lambda x: (torch.cumsum(torch.full((3, 4), 3, dtype=torch.int32), 0) * x,), (x,))]


def cse_seeds():
    """A subexpression computed twice and read by one op: drawn duplicates are mostly outputs, which
    fx_graph_cse rightly keeps apart (separate tensors in eager), so it changed 3% of drawn graphs."""
    x, y = torch.randn(3, 4), torch.randn(4)
    return [(lambda x, y: (torch.mul(torch.sin(x) + y, torch.sin(x) + y),), (x, y))]


def uniform_seeds():
    """What the uniform-value folder is for: arithmetic on a tensor of one value (``full``, the
    ``*_like`` factories)."""
    x = torch.randn(3, 4)
    return [(lambda x: (torch.ones_like(x) * 3 + x,), (x,)),
            (lambda x: (torch.full((3, 4), 2.0) - torch.zeros_like(x).exp(),), (x,))]


def view_dtype_seeds():
    """What remove_redundant_views is for: a second ``view.dtype`` of a tensor to a dtype it was
    already viewed as (here its own)."""
    x = torch.randn(3, 4)
    return [(lambda x: (x.view(torch.int32).view(torch.float32) + 1,), (x,)),
            (lambda x: (x.view(torch.int32) + 1, x.view(torch.int32) * 2),
             (x,))]


@dataclass(frozen=True)
class Row:
    """One torch pass as its pipeline runs it."""

    target: str
    ir: str
    graphs: str = "functional"
    pass_kwargs: dict = field(default_factory=dict)
    context: str | None = None
    ensure: tuple = ()
    seeds: Callable | None = None
    constants: bool = True
    never_fires: str = ""  # why drawn graphs never reach it (a strict xfail on firing)
    by_design: tuple = ()  # (property, regex): what the pass documents it does (accepted, not a finding)
    note: str = ""
    ops: str | None = None  # graphs holding these user ops too (verify(ops=)), registered by ops_file
    ops_file: str | None = None  # relative to the repository
    hops: tuple = ()  # higher-order ops drawn too (verify(hops=))
    dce_pass: bool = False  # removing dead code is its job (verify(dce_pass=)): a graph it only cleaned up counts


def reinplace_inplaceable_ops(gm):
    """Inductor's reinplacing as ``post_grad_passes`` calls it, with the pipeline's ``FakeTensorUpdater``."""
    from torch._inductor.fx_passes.reinplace import reinplace_inplaceable_ops as reinplace
    from torch._inductor.fx_utils import FakeTensorUpdater

    reinplace(FakeTensorUpdater(gm), gm.graph)


# The example library's out-variant ops (examples/mylib_ops.py): in post-grad graphs, the
# auto_functionalized_v2 nodes serving stacks' passes and Inductor's own work on.
MYLIB = dict(ops="mylib", ops_file="examples/mylib_rules.py")
SUBGRAPH_HOPS = ("cond", "invoke_subgraph")  # drawn higher-order ops with subgraphs of their own drawing


PASSES = {
    # Inductor post-grad: AOTAutograd's inference graph, input mutations as a copy_ epilogue.
    "post_grad.remove_noop_ops": Row(PG + "remove_noop_ops", "post-grad", "mutating"),
    "post_grad.view_to_reshape": Row(PG + "view_to_reshape", "post-grad"),
    "post_grad.reorder_for_locality": Row(PG + "reorder_for_locality", "post-grad"),
    "post_grad.post_grad_passes": Row(PG + "post_grad_passes", "post-grad", "mutating",
                                      pass_kwargs={"is_inference": True}, context=INDUCTOR),
    "post_grad.pass_patterns[1]": Row(
        PG + "pass_patterns[1]", "post-grad", seeds=lambda: [*addmm_seeds(), *cumsum_seeds()],
        note="of its patterns only pointless_cumsum runs outside Inductor on a CPU: mm_plus_mm, cat/slice/cat, "
             "the mkldnn and quantized fusions need max_autotune, a GPU, mkldnn or Inductor's lowerings "
             "(docs/torch-facts.md section 9); drawn graphs seldom hold a cumsum of a full, its seeds do"),
    "post_grad.pass_patterns[2]": Row(PG + "pass_patterns[2]", "post-grad", seeds=addmm_seeds),
    # Inductor joint-graph passes: the same decomposed graph, before the partitioner.
    "joint_graph.joint_graph_passes": Row(JG + "joint_graph_passes", "post-grad", context=INDUCTOR),
    "joint_graph.constant_fold_uniform_value": Row(JG + "constant_fold_uniform_value", "post-grad",
                                                   seeds=uniform_seeds),
    "joint_graph.remove_redundant_views": Row(JG + "remove_redundant_views", "post-grad", seeds=view_dtype_seeds),
    "inductor.constant_folding.constant_fold": Row(
        "torch._inductor.constant_folding:constant_fold", "post-grad",
        never_fires="it folds only subgraphs of get_attr constants, and post-grad graphs have none: AOTAutograd "
                    "lifts every buffer to a placeholder"),
    "functorch.fx_graph_cse": Row("torch._functorch.compile_utils:fx_graph_cse", "post-grad", "mutating",
                                  seeds=cse_seeds),
    # The same passes over a user's custom ops (issue 35): auto_functionalized_v2 nodes back to in-place calls.
    "post_grad.decompose_auto_functionalized": Row(PG + "decompose_auto_functionalized", "post-grad", "mutating",
                                                   **MYLIB),
    "post_grad.reinplace_inplaceable_ops": Row("conformance.suite.test_torch_passes:reinplace_inplaceable_ops",
                                               "post-grad", "mutating", context=INDUCTOR, **MYLIB),
    # Export passes: torch.export + run_decompositions(), the signature in gm.meta.
    "export.constant_fold": Row(
        "torch._export.passes.constant_folding:constant_fold", "export",
        never_fires="export lifts buffers and constants to placeholders, so no node computes from get_attr "
                    "constants alone"),
    "export.ReplaceViewOpsWithViewCopyOpsPass": Row(
        "torch._export.passes.replace_view_ops_with_view_copy_ops_pass:ReplaceViewOpsWithViewCopyOpsPass",
        "export", ensure=("no-views",),
        note="it turns views into *_copy ops by design, so an output that was a view of an input becomes a "
             "copy: the no-views contract it establishes makes that the expected result"),
    "export.replace_set_grad_with_hop_pass": Row(
        "torch._export.passes.replace_set_grad_with_hop_pass:replace_set_grad_with_hop_pass", "export", "mutating",
        never_fires="run_decompositions() leaves no _set_grad_enabled nodes in the graph for it to wrap"),
    # The same export passes where they run, on make_fx's trace (aten graphs with grad and autocast
    # regions as mode nodes), which they outline into the higher-order ops of pre-dispatch graphs.
    # Functional graphs: a metadata mutation leaves the drawn graph's meta['val'] of the value it
    # changed as it was before (a snapshot), where make_fx's trace shows the change (one fake object
    # mutated), so the pass's getitem copying that meta reads as stale (mutating graphs, seed 31).
    "export.replace_set_grad_with_hop_pass[aten]": Row(
        "torch._export.passes.replace_set_grad_with_hop_pass:replace_set_grad_with_hop_pass", "aten",
        hops=("wrap_with_set_grad_enabled",)),
    "export.replace_autocast_with_hop_pass[aten]": Row(
        "torch._export.passes.replace_autocast_with_hop_pass:replace_autocast_with_hop_pass", "aten",
        hops=("wrap_with_autocast",)),
    # torch.fx passes.
    "fx.CSEPass": Row("torch.fx.passes.dialect.common.cse_pass:CSEPass", "pre-dispatch", "mutating", seeds=cse_seeds),
    "fx.reinplace": Row("torch.fx.passes.reinplace:reinplace", "aten", constants=False,
                        note="without constants: on a graph reading one it raises (a finding below), which "
                             "would end every search at its first graph"),
    "fx.legalize_graph": Row("torch.fx.passes.tools_common:legalize_graph", "aten"),
    "fx.Graph.eliminate_dead_code": Row("torch.fx.graph:Graph.eliminate_dead_code", "aten", "mutating", dce_pass=True),
    "fx.split_const_subgraphs": Row("torch.fx.experimental.const_fold:split_const_subgraphs", "aten"),
    # torch-level (pre-grad, module-level) passes: fx.symbolic_trace of nn.Modules.
    "fx.experimental.optimization.fuse": Row(
        "torch.fx.experimental.optimization:fuse", "torch", by_design=(("execution", "Fusion only for eval"),),
        note="it folds Conv/Linear -> BatchNorm pairs of eval-mode modules and raises on a train-mode one, as "
             "its docstring says"),
    "fx.experimental.normalize.NormalizeArgs": Row("torch.fx.experimental.normalize:NormalizeArgs", "torch"),
    # Graphs holding drawn higher-order ops (issue 35): a cond with drawn branches, a block called twice.
    "fx.CSEPass[hops]": Row("torch.fx.passes.dialect.common.cse_pass:CSEPass", "aten", hops=SUBGRAPH_HOPS),
    # ... and pre-dispatch's regions, as torch's pre-dispatch export outlines them.
    "fx.CSEPass[regions]": Row("torch.fx.passes.dialect.common.cse_pass:CSEPass", "pre-dispatch", "mutating",
                               hops=("wrap_with_set_grad_enabled", "wrap_with_autocast")),
    "functorch.fx_graph_cse[hops]": Row("torch._functorch.compile_utils:fx_graph_cse", "post-grad", hops=SUBGRAPH_HOPS),
    "fx.Graph.eliminate_dead_code[hops]": Row("torch.fx.graph:Graph.eliminate_dead_code", "aten", hops=SUBGRAPH_HOPS,
                                              dce_pass=True),
    "post_grad.remove_noop_ops[hops]": Row(PG + "remove_noop_ops", "post-grad", hops=SUBGRAPH_HOPS),
}


# --- findings ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """A way a torch pass is wrong, minimised: ``program`` (ATen ops, traced by make_fx, then into the
    IR of each pass in ``passes``) shows a ``property`` violation whose message matches ``message``."""

    passes: tuple
    property: str
    message: str  # a regular expression
    program: Callable
    inputs: Callable
    behaviour: str
    # other ways a search meets the same bug: (property, message regex, regex the graph before the
    # pass must match, or None[, a further test of the violation])
    also: tuple = ()
    # traced with make_fx(pre_dispatch=True), which keeps CompositeImplicit ops (flatten, reshape) as
    # the aten IR's drawn graphs hold them; plain make_fx decomposes them
    pre_dispatch: bool = False
    # a regex the graph before the pass must match too, where the message alone is any bug's (an
    # IndexError): the structure the finding is about
    before: str | None = None
    # and where a regex cannot say that structure, a test of the violation (its graphs)
    shape: Callable | None = None

    def matches(self, violation, example=None) -> bool:
        """Whether ``violation`` is this bug: its property and message, the graph before matching
        ``before``, and each further test of it (``shape``: called with the violation, or with the
        violation and the ``example`` it was met on, ``.gm`` and ``.example_inputs``, where it takes two)."""
        ways = ((self.property, self.message, self.before, *((self.shape,) if self.shape else ())), *self.also)
        return any(violation.property == prop and re.search(message, violation.message)
                   and (before is None or re.search(before, violation.graph_before or ""))
                   and all(_test(test, violation, example) for test in more)
                   for prop, message, before, *more in ways)

    def graph(self, ir: str):
        """The program in ``ir``: for "torch" it is a factory of an ``nn.Module`` (symbolic_trace)."""
        inputs = self.inputs()
        if ir == "torch":
            return fx.symbolic_trace(self.program()), inputs
        return to_ir(make_fx(self.program, pre_dispatch=self.pre_dispatch)(*inputs), inputs, ir)


def _test(test, violation, example) -> bool:
    if len(inspect.signature(test).parameters) < 2:
        return test(violation)
    return example is not None and test(violation, example)


class Example(NamedTuple):
    """What a finding's test may replay: the graph before the pass and its inputs."""

    gm: fx.GraphModule
    example_inputs: tuple


def _count(pattern: str, graph: str | None) -> int:
    return len(re.findall(pattern, graph or ""))


def _random_calls(graph: str) -> list:
    """The names of the nodes of a graph's code that draw random numbers, in the code's order."""
    found = []
    for name, op, overload in re.findall(r"^\s*(\w+) = torch\.ops\.aten\.(\w+)\.(\w+)\(", graph, re.M):
        target = getattr(getattr(aten, op, None), overload, None)
        if target is not None and draws_random(target):
            found.append(name)
    return found


def _merges_random_draws(violation) -> bool:
    """The graph after holds fewer random draws than the graph before: two were merged into one."""
    return len(_random_calls(violation.graph_after or "")) < len(_random_calls(violation.graph_before or ""))


def _reorders_random_draws(violation) -> bool:
    """The graph after draws the same random numbers in another order than the graph before."""
    before, after = _random_calls(violation.graph_before or ""), _random_calls(violation.graph_after or "")
    return sorted(before) == sorted(after) and before != after


def _norm_after_a_linear_on_a_sequence(violation, example) -> bool:
    """The graph before runs a BatchNorm1d on the output of a Linear that has three or more dims (an
    (N, C, L) sequence, where the norm's features are dim 1 and the Linear's are the last)."""
    from torch.fx.passes.shape_prop import ShapeProp

    gm = copy.deepcopy(example.gm)
    try:
        ShapeProp(gm).propagate(*example.example_inputs)
    except Exception:  # noqa: BLE001 - a graph that does not propagate shows nothing of the kind
        return False
    modules = dict(gm.named_modules())
    for node in gm.graph.nodes:
        if node.op == "call_module" and isinstance(modules.get(node.target), torch.nn.BatchNorm1d):
            source = node.args[0] if node.args else None
            meta = source.meta.get("tensor_meta") if isinstance(source, fx.Node) else None
            if isinstance(source, fx.Node) and source.op == "call_module" \
                    and isinstance(modules.get(source.target), torch.nn.Linear) \
                    and meta is not None and len(meta.shape) >= 3:
                return True
    return False


def _reads_a_tensor_written_in_place(violation) -> bool:
    """The node a stale-meta message names reads, as its first operand, a tensor that an in-place op
    of the graph after the pass writes (reinplace's out-of-place meta, met downstream of the write)."""
    read = re.search(r"\[node \d+ %\w+: call_function [\w.]+\(%(\w+)", violation.message)
    return read is not None and read.group(1) in _written_in_place(violation.graph_after or "")


def _written_in_place(graph: str) -> set:
    """The names an in-place ATen op (``add_``, ``copy_``, ...) of a graph's code writes."""
    return set(re.findall(r"torch\.ops\.aten\.\w+_\.\w+\((\w+)\b", graph))


_VIEWS = ("split", "split_with_sizes", "slice", "select", "view", "reshape", "expand", "unsqueeze", "squeeze",
          "permute", "transpose", "t", "alias", "narrow", "unbind", "chunk", "diagonal", "as_strided", "unfold")


def _views_to_base(graph: str) -> dict:
    """``name -> the tensor it views`` for the view nodes of a graph's code (a getitem of a split too)."""
    read = {}
    for name, op, operand in re.findall(r"^\s*(\w+) = torch\.ops\.aten\.(\w+)\.\w+\((\w+)", graph, re.M):
        if op in _VIEWS:
            read[name] = operand
    for name, operand in re.findall(r"^\s*(\w+) = (\w+)\[\d+\]", graph, re.M):
        read[name] = operand
    return read


def _stale_node(violation) -> str | None:
    """The name of the node a message's ``[node N %name: ...]`` names, or None."""
    node = re.search(r"\[node \d+ %(\w+):", violation.message)
    return node.group(1) if node else None


def _base(name: str, views: dict) -> str:
    while name in views:
        name = views[name]
    return name


def _writes_what_it_reads(graph: str | None) -> bool:
    """An in-place op of a graph's code reads, as another operand, the tensor it writes or a view of it."""
    graph = graph or ""
    views = _views_to_base(graph)
    for written, operands in re.findall(r"torch\.ops\.aten\.\w+_\.\w+\((\w+), ([^)]*)\)", graph):
        read = re.findall(r"\b[a-z_]\w*\b", operands)
        if any(_base(r, views) == _base(written, views) for r in read):
            return True
    return False


def _views_a_tensor_written_in_place(violation) -> bool:
    """The node a stale-meta message names views (through views) a tensor that an in-place op of the
    graph after the pass writes, itself or through a view: Inductor's reinplacing of a scatter into
    a ``copy_`` on a slice of the input, met on a view of that input read after the write."""
    node, after = _stale_node(violation), violation.graph_after or ""
    views = _views_to_base(after)
    bases = {_base(w, views) for w in _written_in_place(after)}
    return node in views and _base(node, views) in bases


def _views_a_rebuilt_scatter(violation) -> bool:
    """The node a stale-meta message names views (through views) a ``slice_scatter``/``select_scatter``
    of the graph after the pass, and the graph before scattered so too."""
    name, after = _stale_node(violation), violation.graph_after or ""
    if name is None or not re.search(r"aten\.(slice|select)_scatter\.", violation.graph_before or ""):
        return False
    scatters = set(re.findall(r"^\s*(\w+) = torch\.ops\.aten\.(?:slice|select)_scatter\.", after, re.M))
    views = _views_to_base(after)
    while name in views:
        name = views[name]
        if name in scatters:
            return True
    return False


def _removed_calls(violation, ops: str) -> list:
    """``(name, operands)`` of each call of the graph before to ``aten.<ops>`` (a regex of op and
    overload) that the graph after no longer has; ``operands``: the text of its arguments."""
    after = violation.graph_after or ""
    return [(name, args.split(";")[0])
            for name, args in re.findall(rf"^\s*(\w+) = torch\.ops\.aten\.{ops}\(([^\n]*)\)",
                                         violation.graph_before or "", re.M)
            if not re.search(rf"^\s*{name} = ", after, re.M)]


def _kept_by_a_removed_op(violation) -> bool:
    """The node a stale-meta message names is an operand of an arithmetic node of the graph before that
    the graph after no longer has: the operand a no-op's removal kept in its place."""
    node = _stale_node(violation)
    return node is not None and any(re.search(rf"\b{node}\b", operands)
                                    for _, operands in _removed_calls(violation, r"(?:mul|add|sub|div)\.\w+"))


def _a_product_by_a_uniform_removed(violation) -> bool:
    """A product of the graph before, one of whose operands is a tensor of one value (``_UNIFORM``), is
    gone from the graph after: a ``* ones`` removed, not another complex NaN lost."""
    uniform = {m.group(1) for m in re.finditer(rf"^\s*(\w+) = torch\.ops\.{_UNIFORM}\(", violation.graph_before or "",
                                               re.M)}
    return any(set(re.findall(r"\w+", operands)) & uniform for _, operands in _removed_calls(violation, r"mul\.Tensor"))


def _signature(graph: str) -> list:
    found = re.search(r"def forward\(self(?:, )?([^)]*)\)", graph)
    return [a.strip() for a in found.group(1).split(",") if a.strip()] if found else []


def _erases_a_viewed_input(violation) -> bool:
    """An input of the graph before that a ``view.dtype`` read is gone from the graph after's signature."""
    before, after = violation.graph_before or "", violation.graph_after or ""
    gone = set(_signature(before)) - set(_signature(after))
    return any(re.search(rf"aten\.view\.dtype\({name}\b", before) for name in gone)


def _two_clones(a):
    return aten.clone.default(a), aten.clone.default(a)


def _two_outputs_replaced_by_one_kept_node(violation) -> bool:
    """The two outputs an aliasing message names are, in the graph after, one kept node of the graph
    before or views of it, and in the graph before each reaches that node through views and no-ops the
    pass removed (a clone, a round of an integer tensor; a copy, by its source), at least one through a
    removed no-op: the removals made them share storage (``clone(a), clone(a)`` returned, or
    ``view(clone(a)), clone(a)``, or ``clone(copy(b, a)), copy(b, a)``)."""
    found = re.search(r"output\[(\d+)\] aliases output\[(\d+)\]", violation.message)
    if found is None:
        return False
    i, j = int(found.group(1)), int(found.group(2))
    before_code, after_code = violation.graph_before or "", violation.graph_after or ""
    before, after = _returned(before_code), _returned(after_code)
    if max(i, j) >= min(len(before), len(after)) or before[i] == before[j]:
        return False

    def defined(name, code) -> bool:
        return re.search(rf"^\s*{name} = |def forward\(self\b[^)]*\b{name}\b", code, re.M) is not None

    def a_noop(name) -> bool:  # its op is one remove_noop_ops may drop (its noop_registry)
        op = re.search(rf"^\s*{name} = torch\.ops\.(?:aten|prims)\.(\w+)\.", before_code, re.M)
        return op is not None and op.group(1) in _NOOP_OPS

    def base(name, code, through_removed=False) -> tuple:
        """The node ``name`` is a view of (following views; with ``through_removed``, also the no-ops
        the pass removed), and whether a removed no-op was on the way."""
        removed = False
        for _ in range(64):
            call = re.search(rf"^\s*{name} = torch\.ops\.(?:aten|prims)\.(\w+)\.\w+\((\w+)(?:, (\w+))?", code, re.M)
            if call is None:
                break
            if through_removed and a_noop(name) and not defined(name, after_code):
                kept = call.group(3) if call.group(1) in _NOOP_KEEPS_SECOND else call.group(2)
                if kept is None:
                    break
                removed, name = True, kept
            elif call.group(1) in _VIEW_OPS:
                name = call.group(2)
            else:
                break
        return name, removed

    kept = base(after[i], after_code)[0]
    if base(after[j], after_code)[0] != kept or not defined(kept, before_code):
        return False
    reached = [base(before[k], before_code, through_removed=True) for k in (i, j)]
    return all(b == kept for b, _ in reached) and any(removed for _, removed in reached)


# Ops whose result is a view of their first operand (as the graphs' code writes them).
_VIEW_OPS = frozenset({"view", "_unsafe_view", "reshape", "alias", "slice", "select", "transpose", "permute", "expand",
                       "squeeze", "unsqueeze", "t", "as_strided", "diagonal", "unfold", "split", "split_with_sizes"})


# The no-ops remove_noop_ops replaces by their second operand (noop_registry's nop_arg=1): copy(dst, src) by src.
_NOOP_KEEPS_SECOND = frozenset({"copy"})

# The ops Inductor's remove_noop_ops may remove (torch 2.13's noop_registry, by packet name).
_NOOP_OPS = frozenset({"alias", "cat", "ceil", "clone", "constant_pad_nd", "copy", "floor", "pow", "convert_element_type",
                       "device_put", "repeat", "round", "slice", "slice_scatter", "trunc", "view"})


def _cse_made_two_outputs_one(violation) -> bool:
    """The graph after is the graph before with calls merged, nothing else: each op called as often or
    less, some op less (so the two outputs the aliasing message names share storage through a merge:
    ``neg(x)`` returned twice, or views of two equal ``invoke_subgraph`` calls), not any new alias."""
    if re.search(r"output\[\d+\] aliases output\[\d+\]", violation.message) is None:
        return False
    before, after = (collections.Counter(re.findall(r"= (torch\.ops\.[\w.]+)\(", code))
                     for code in (violation.graph_before or "", violation.graph_after or ""))
    return all(after[op] <= before[op] for op in after) and sum(after.values()) < sum(before.values())


_NUMBER = re.compile(r"(?<![\w.])(-?\d+)\.0(?![\d\w])")


def _cse_merged_scalar_twins(violation) -> bool:
    """The graph before holds two calls of one op whose arguments differ only in a number written as an
    int in one and as a float in the other (``add(x, 1)``, ``add(x, 1.0)``), and the graph after fewer
    calls of that op: the merge of the twins, not any dtype that differs."""
    before_code, after_code = violation.graph_before or "", violation.graph_after or ""
    calls = re.findall(r"^\s*\w+ = (torch\.ops\.[\w.]+)\((.*?)\)(?:;|$)", before_code, re.M)
    for k, (op, args) in enumerate(calls):
        for op2, args2 in calls[k + 1:]:
            if op == op2 and args != args2 and _NUMBER.sub(r"\1", args) == _NUMBER.sub(r"\1", args2):
                return after_code.count(op + "(") < before_code.count(op + "(")
    return False


def _int_tensor_plus_one_twice(x):
    return aten.add.Tensor(x, 1), aten.add.Tensor(x, 1.0)


def _returned(graph: str) -> list:
    found = re.findall(r"^\s*return \((.*)\)", graph, re.M)
    return [a.strip() for a in found[-1].split(",") if a.strip()] if found else []


def _an_output_view_folded(violation) -> bool:
    """One of the outputs the message names (the one that lost its alias, or the one it should alias)
    was a view in the graph before and is a ``full`` after the pass."""
    before, after = violation.graph_before or "", violation.graph_after or ""
    outs_before, outs_after = _returned(before), _returned(after)
    views = "|".join(_VIEWS)
    for i in {int(i) for i in re.findall(r"output\[(\d+)\]", violation.message)}:
        if i < min(len(outs_before), len(outs_after)) and \
                re.search(rf"^\s*{outs_before[i]} = torch\.ops\.aten\.({views})\.\w+\(", before, re.M) and \
                re.search(rf"^\s*{outs_after[i]} = torch\.ops\.aten\.full\.default\(", after, re.M):
            return True
    return False


def _sin_twice_one_written(x):
    a, b = aten.sin.default(x), aten.sin.default(x)
    aten.abs_.default(a)
    return (aten.add.Tensor(a, b),)


def _merges_a_tensor_written_in_place(violation) -> bool:
    """The graph before computes one value twice (the same op on the same operands) and writes one of
    the two in place later: merged, the other's readers see the write."""
    before = violation.graph_before or ""
    calls: dict = {}
    for name, call in re.findall(r"^\s*(\w+) = (torch\.ops\.aten\.\w+\.\w+\([^;\n]*\))", before, re.M):
        calls.setdefault(call, []).append(name)
    written = _written_in_place(before)
    return any(len(names) > 1 and written & set(names) for names in calls.values())


def _constant_program():
    c = torch.ones(3)
    return lambda x: (torch.ops.aten.add.Tensor(x, c.clone()),)


def _index_put_of_itself(x, i):
    t = aten.mul.Tensor(x, 2.0)
    return (aten.sigmoid.default(aten.index_put.default(t, [i], t)),)


def _add_own_diagonal(x):
    t = aten.mul.Tensor(x, 2.0)
    return (aten.add.Tensor(t, aten.diagonal.default(t)),)


# a product by zero, what the uniform-value folder folds to a full of zeros
_TIMES_ZERO = r"aten\.mul\.(Tensor|Scalar)\(\w+, (-?0(\.0)?|False)\)"  # x * False too (seed 1658953149)

# a tensor of one value, what remove_no_ops recognises an operand of a no-op by
_UNIFORM = r"aten\.(full|zeros_like|ones_like|zeros|ones|full_like|scalar_tensor)\.default"


def _clone_of_a_constant():
    c = torch.randn(3)
    return lambda x: (aten.clone.default(c), aten.add.Tensor(x, 1))


def _slice_of_a_constant():
    c = torch.randn(3, 4)
    return lambda x: (aten.add.Tensor(aten.slice.Tensor(c, 1, 0, 1), x),)


def _eval_pair(first, norm):
    """``first -> norm`` in eval mode, the norm's running statistics random (a fold that ignores them,
    or folds along the wrong dim, changes values)."""
    def make():
        g = torch.Generator().manual_seed(0)
        with torch.no_grad():
            norm.running_mean.copy_(torch.randn(norm.num_features, generator=g))
            norm.running_var.copy_(torch.rand(norm.num_features, generator=g) + 0.5)
        return torch.nn.Sequential(first, norm).eval()
    return make


def _row_written_then_viewed(x, a):
    """``x[0] += a; return x.unbind(0)[0]``: functionalized, ``unbind(select_scatter(x, ...))[0]``, a view
    of the scatter's fresh result, and the scatter copied back into ``x``."""
    aten.add_.Tensor(aten.select.int(x, 0, 0), a)
    return (aten.unbind.int(x)[0],)


def _dropout_then_rand_like(x):
    dropped = aten.native_dropout.default(aten.scalar_tensor.default(0.0), 0.25, True)[0]
    return (aten.rand_like.default(x), dropped)


FINDINGS = {
    "remove-noop-ops-returns-a-view-of-the-input": Finding(
        ("post_grad.remove_noop_ops", "post_grad.post_grad_passes"), "aliasing", r"output\[\d+\] aliases input",
        lambda x: (aten.clone.default(aten.permute.default(aten.clone.default(x), [1, 0])),),
        lambda: (torch.randn(2, 3),),
        "remove_noop_ops drops both clones of clone(permute(clone(x))), so the output is a view of the input: "
        "it decides from meta['val'] storages, which its own first removal made stale. End to end, "
        "torch.compile(lambda x: x.clone().t().clone())(x) returns a tensor on x's storage",
        shape=lambda violation: _count(r"aten\.clone\.default\(", violation.graph_after)
        < _count(r"aten\.clone\.default\(", violation.graph_before)),  # a clone removed: not any new alias
    "remove-noop-ops-makes-two-outputs-one-tensor": Finding(
        ("post_grad.remove_noop_ops", "post_grad.post_grad_passes"), "aliasing", r"output\[\d+\] aliases output\[\d+\]",
        lambda x: _two_clones(aten.abs.default(x)), lambda: (torch.randn(3),),
        "remove_noop_ops drops both clones of one value that the graph returns twice (clone(a), clone(a)): "
        "it keeps a no-op whose removal would make an output share an output's storage, but reads the "
        "output storages once, before its first removal made a an output, so the two outputs come to be "
        "one tensor (found by make test under issue 56's aliasing rule, seed 0; the same with a round of "
        "an integer tensor and a clone of a clone of it, seed 1990585767; a view of one clone returned beside the "
        "other, view(clone(a)) and clone(a), which come to share a's storage: make test, seed 0; copy(round(a), a) "
        "returned beside a clone of it, both made a, the copy replaced by its source: make test, seed 0, on an "
        "Intel Xeon)",
        shape=_two_outputs_replaced_by_one_kept_node),
    "uniform-value-fold-drops-nan": Finding(
        ("joint_graph.constant_fold_uniform_value", "joint_graph.joint_graph_passes"), "values", "NaN",
        lambda x: (aten.mul.Scalar(aten.rsqrt.default(x), 0),), lambda: (torch.tensor([-1.0, 2.0]),),
        "the uniform-value folder folds x * 0 to a full of 0, dropping the NaN of rsqrt(-1) * 0 "
        "(fixed upstream after 2.13: pytorch/pytorch#186281)",
        before=_TIMES_ZERO,  # a NaN lost any other way is not this fold's
        also=(("values", r"differ", _TIMES_ZERO),)),  # the NaN seen through view.dtype
    "remove-no-ops-returns-an-input": Finding(
        ("joint_graph.joint_graph_passes", "joint_graph.constant_fold_uniform_value"), "aliasing",
        r"output\[\d+\] aliases input",
        lambda x, y: (aten.add.Tensor(aten.zeros_like.default(x), y),), lambda: (torch.randn(3), torch.randn(3)),
        "remove_no_ops replaces zeros_like(x) + y by y itself: the output is the input object "
        "(pytorch/pytorch#197893, open); constant_fold_uniform_value ends with remove_no_ops, and make "
        "conformance met it there through full(1) * x (seed 3012685193)",
        before=_UNIFORM),
    "remove-no-ops-overwrites-the-kept-operands-meta": Finding(
        ("joint_graph.joint_graph_passes", "joint_graph.constant_fold_uniform_value"), "validity",
        r"meta\['val'\].* stride=.*\(what the node produces\) \[node \d+ %\w+: (placeholder|call_function)",
        lambda x: (aten.mul.Tensor(aten.scalar_tensor.default(1.0), x),),
        lambda: (torch.randn(1, 1, 3).expand(1, 4, 3),),
        "remove_no_ops replaces 1.0 * x by x and copies the removed node's meta onto x "
        "(replacement.meta.update(node.meta)): x's meta['val'] takes the product's contiguous strides, "
        "which an expanded input does not have, so a later pass reads a layout the input lacks (found by "
        "make conformance, seed 1312097727; met through constant_fold_uniform_value, which ends with "
        "remove_no_ops, at seed 2284685492: (2 - exp(0)) * x; the kept operand may be any node: "
        "1.0 * expand(abs(x)), found by hand)",
        before=_UNIFORM, shape=_kept_by_a_removed_op),
    "remove-no-ops-multiplies-complex-by-one": Finding(
        ("joint_graph.joint_graph_passes", "joint_graph.constant_fold_uniform_value"), "values",
        r"as real, imaginary pairs(?s:.*)should be NaN and \+-inf at the same positions",
        lambda x: (aten.mul.Tensor(x, aten.full.default([2], 1.0, dtype=torch.complex64)),),
        lambda: (torch.tensor([complex(float("inf"), 1.0), complex(1.0, 2.0)]),),
        "remove_no_ops replaces x * ones by x for a complex x, but a complex product by 1 + 0j is not x "
        "where a part is infinite: (inf + 1j) * (1 + 0j) is inf + nan j in eager, whose real part's inf "
        "times the 0 of the imaginary one is NaN (found while the matcher corpus's own x * 1 removal was "
        "caught on complex x, issue 56; checked on the real pass by hand)",
        before=_UNIFORM, shape=_a_product_by_a_uniform_removed),
    "addmm-pattern-drops-alpha": Finding(
        ("post_grad.pass_patterns[2]", "post_grad.post_grad_passes"), "values", r"elements differ",
        lambda a, b, c: (aten.add.Tensor(aten.mm.default(a, b), c, alpha=0.5),),
        lambda: (torch.randn(2, 3), torch.randn(3, 4), torch.randn(4)),
        "the post-grad addmm pattern fuses add(mm(a, b), c, alpha=0.5) into addmm(c, a, b), adding all of c; "
        "torch.compile(lambda a, b, c: torch.add(torch.mm(a, b), c, alpha=0.5)) on CPU returns mm + c",
        # an add with an alpha reading an mm (the addmm it makes may be decomposed again: add(mm, mm,
        # alpha=1024) became mm + sum(a * b) for one row, seed 13): not any value that differs
        before=r"(\w+) = torch\.ops\.aten\.mm\.default\((?s:.*)aten\.add\.Tensor\((\1, \w+|\w+, \1), alpha = "),
    "reinplace-writes-into-a-broadcast-result": Finding(
        ("fx.reinplace",), "validity", r"doesn't match the broadcast shape",
        lambda x, y: (aten.add.Tensor(aten.abs.default(x), y),), lambda: (torch.randn(1), torch.randn(1, 1)),
        "reinplace turns add(abs(x), y) into add_ (any out-of-place op into its in-place form) though y "
        "broadcasts abs(x) to a bigger shape: the in-place op's result does not fit its operand, and it raises "
        "(addmm_'s message says so in other words: make conformance, seed 1209968833)",
        also=(("validity", r"Bad in-place call: input tensor size \[[\d, ]*\] and output tensor size \[[\d, ]*\] "
               r"should match", None),)),
    "reinplace-keeps-the-out-of-place-meta": Finding(
        ("fx.reinplace",), "validity", r"meta\['val'\].* stride=.*_\.",
        lambda x, y: (aten.mul.Tensor(aten.select_scatter.default(x, y, 0, 0), 2.0),),
        lambda: (torch.randn(4)[::2], torch.randn(())),
        "reinplace turns mul(t, 2) into mul_(t, 2) and keeps the out-of-place node's meta['val'] (a new "
        "contiguous tensor), but mul_ returns t itself: where t is not contiguous (select_scatter of a "
        "strided input keeps its stride 2) the meta's strides are wrong, and so are those of a view that "
        "now reads t (make conformance met it on an expand, seed 602868651)",
        also=(("validity", r"meta\['val'\].* stride=.*\(what the node produces\)", None,
               _reads_a_tensor_written_in_place),)),
    "inductor-reinplace-keeps-the-out-of-place-meta": Finding(
        ("post_grad.post_grad_passes",), "validity", r"meta\['val'\].* stride=.*index_put_",
        lambda v, x, i: (aten.index_put_.default(x, [i], v),),
        lambda: (torch.tensor(1.0), torch.randn(4)[::2], torch.tensor([1])),
        "Inductor's reinplace_inplaceable_ops turns index_put(x, ...) + the epilogue's copy_ into "
        "index_put_(x, ...) and keeps the out-of-place node's meta['val'] (contiguous), but the node now "
        "returns x itself: for a strided input (stride 2) the meta's strides are wrong; the same for a "
        "slice_scatter it turns into copy_ on a slice of x, where a view of the scatter (split(...)[0]) "
        "now views x and keeps the contiguous meta (make conformance, seed 2029246500)",
        also=(("validity", r"meta\['val'\].* stride=.*\(what the node produces\)",
               r"copy_\.default\(\w+, (slice_scatter|select_scatter)", _views_a_tensor_written_in_place),)),
    "pointless-cumsum-indexes-a-0-d-full": Finding(
        ("post_grad.pass_patterns[1]", "post_grad.post_grad_passes"), "execution",
        r"IndexError: tuple index out of range",
        lambda x: (aten.add.Tensor(torch.cumsum(torch.full([], 2.0), 0), x),), lambda: (torch.randn(()),),
        "the post-grad pointless_cumsum pattern rewrites cumsum(full(shape, v), dim) as arange * v, reading "
        "shape[dim]: for a 0-d full (shape []; eager's cumsum of a 0-d tensor along 0 is the tensor) it raises "
        "IndexError (found by make conformance, seed 3917614047)",
        before=r"(\w+) = torch\.ops\.aten\.full\.default\(\[\],(?s:.*)aten\.cumsum\.default\(\1\b"),
    "pointless-cumsum-uses-the-unrounded-fill": Finding(
        ("post_grad.pass_patterns[1]", "post_grad.post_grad_passes"), "values", r"elements differ",
        lambda x: (aten.add.Tensor(torch.cumsum(torch.full([300], 0.1, dtype=torch.float16), 0), x),),
        lambda: (torch.randn(300),),
        "the same pattern multiplies arange(1, n + 1) by the Python fill value, not by the value the full "
        "holds: full([300], 0.1, dtype=float16) holds float16(0.1), and eager's cumsum adds that, so in "
        "float16 and bfloat16 the rewrite's k * 0.1 differs from eager's k * float16(0.1) by an ulp "
        "(109 of 300 elements; found by hand while recording the 0-d finding)",
        before=r"(\w+) = torch\.ops\.aten\.full\.default\(\[[^\]]*\], [^,]+, dtype = torch\.(float16|bfloat16)"
               r"(?s:.*)aten\.cumsum\.default\(\1\b"),
    "pointless-cumsum-leaves-its-readers-meta": Finding(
        ("post_grad.pass_patterns[1]",), "validity",
        r"meta\['val'\].* stride=.*\(what the node produces\) "
        r"\[node \d+ %\w+: call_function [\w.]+\([^\]]*%expand_default",
        lambda x: (aten.add.Tensor(torch.cumsum(torch.full([3, 4], 2.0), 1), x),), lambda: (torch.randn(4, 3).t(),),
        "the same pattern's arange * v comes out as an expand (stride 0 on the broadcast dims) where the cumsum "
        "was contiguous, and the nodes reading it keep their meta['val']: add(cumsum, x) of a transposed x now "
        "follows x's layout (strides (1, 3)) while its meta says (4, 1) (found by make test once the row "
        "drew cumsum seeds; post_grad_passes as a whole re-derives the meta); a view of a reader that "
        "relied on its contiguity then raises when the graph runs ('view size is not compatible', make "
        "conformance, seed 2020945239: view(tanh(add(cumsum, x.t())), [12]))",
        before=r"(\w+) = torch\.ops\.aten\.full\.default\((?s:.*)aten\.cumsum\.default\(\1\b",
        also=(("validity", r"running the transformed graph raised RuntimeError: view size is not compatible with "
                           r"input tensor's size and stride",
               r"(\w+) = torch\.ops\.aten\.full\.default\((?s:.*)aten\.cumsum\.default\(\1\b",
               lambda violation: "aten.expand.default(" in (violation.graph_after or "")),)),
    "pointless-convert-drops-a-narrowing-cast": Finding(
        ("joint_graph.joint_graph_passes",), "values", r"differ",
        lambda x: (prims.convert_element_type.default(prims.convert_element_type.default(x, torch.bfloat16),
                                                      torch.float16),),
        lambda: (torch.tensor([1e5, 1e-6, 0.1, 3.14159]),),
        "the joint-graph pointless_convert pattern turns convert(convert(x, bfloat16), float16) into "
        "convert(x, float16): it keeps an intermediate dtype only when it is narrower than the last, and "
        "float16 and bfloat16 are the same width but round differently: 0.1 through bfloat16 to float16 is "
        "0.10009765625, straight to float16 0.0999755859375; 1e5 through float16 to bfloat16 is inf, straight "
        "to bfloat16 99840 (found by hand, looking for what drawn graphs seldom hold)",
        before=r"(\w+) = torch\.ops\.prims\.convert_element_type\.default\(\w+, torch\.(float16|bfloat16)\)"
               r"(?s:.*)prims\.convert_element_type\.default\(\1, torch\.(?!\2\b)(float16|bfloat16)\)"),
    "scaled-softmax-pattern-widens-a-narrowed-result": Finding(
        ("joint_graph.joint_graph_passes",), "values", r"dtype=torch\.\w+, but should be torch\.\w+",
        lambda x, c: (lambda s: (aten.sub.Tensor(s, aten.amax.default(s, [1], True)),))(
            prims.convert_element_type.default(aten.mul.Tensor(x, c), torch.float16)),
        lambda: (torch.randn(3, 4), torch.randn(3, 1)),
        "the joint-graph scaled-softmax pattern rewrites convert(x * c, float16) - amax(...) as "
        "(x - amax(x)) * c for stability, converting x but not c: with a float32 c the product promotes back, "
        "so the result is float32 where the original's is float16 (the same for a quotient; found by hand, "
        "looking for what drawn graphs seldom hold)",
        before=r"(\w+) = torch\.ops\.prims\.convert_element_type\.default\((mul|div)\w*, torch\.\w+\)"
               r"(?s:.*)aten\.amax\.default\(\1\b"),
    "redundant-views-erase-an-input": Finding(
        ("joint_graph.joint_graph_passes",), "validity",
        r"placeholders=\d+ .*, but should be \d+ \(one per input",
        lambda x: (aten.mul.Scalar(aten.view.dtype(x, torch.float64), 0),), lambda: (torch.randn(2),),
        "remove_redundant_views records the source of every view.dtype among the views it may clean up, and "
        "erases each that has no users left: once the uniform-value fold has turned view.dtype(x) * 0 into a "
        "full, the placeholder x is erased with its view, and the graph takes one input fewer than it is "
        "called with (found by make conformance, seed 2425308131)",
        shape=_erases_a_viewed_input),
    "uniform-fold-replaces-an-aliasing-output": Finding(
        ("joint_graph.constant_fold_uniform_value", "joint_graph.joint_graph_passes"), "aliasing",
        r"output\[\d+\] aliases nothing, but should alias",
        lambda x: (lambda v: (aten.add.Tensor(v, v), aten.view.default(v, [12, 1]), v))(
            aten.view.default(aten.sub.Tensor(aten.full.default([3, 4], 2.0), aten.exp.default(
                aten.full.default([3, 4], 0.0))), [12])),
        lambda: (torch.randn(2),),
        "the uniform-value fold replaces view(v, [12, 1]) of a tensor of one value (v, read by an add) with a "
        "fresh full([12, 1]), though the graph returns v too: two outputs that were views of one tensor no "
        "longer share storage, so a caller writing one no longer sees it in the other (found by make "
        "conformance, seed 176630605)",
        shape=_an_output_view_folded),
    "inductor-reinplace-writes-into-its-own-values": Finding(
        ("post_grad.post_grad_passes",), "validity", r"refer to a single memory location",
        _index_put_of_itself, lambda: (torch.randn(1, 4), torch.tensor([0])),
        "Inductor's reinplace_inplaceable_ops turns index_put(t, [i], t) (a tensor written with its own "
        "values) into index_put_(t, [i], t), which eager refuses: the values overlap the written-to tensor"),
    "post-grad-passes-re-derive-a-strided-scatter-as-contiguous": Finding(
        ("post_grad.post_grad_passes",), "validity", r"meta\['val'\].* stride=.*\(what the node produces\)",
        lambda x, s: (aten.view.default(aten.slice_scatter.default(x, s, 0, 0, 9223372036854775807, 3), [1, 2]),),
        lambda: (torch.randn(6)[::3], torch.randn(1)),
        "post_grad_passes rebuilds slice_scatter(x, src, 0, 0, max, 3) of a strided x (stride 3) as a new "
        "slice_scatter node and re-derives the view of it as contiguous (strides (*, 1)); eager's (and the "
        "fake tensor's) slice_scatter keeps x's stride 3, so the view's meta['val'] is wrong (found by "
        "make conformance, dev profile; the same for a permute, expand or unsqueeze of it, and for "
        "select_scatter: found by hand)",
        shape=_views_a_rebuilt_scatter),
    "reinplace-writes-into-a-tensor-it-also-reads-through-a-view": Finding(
        ("fx.reinplace",), "values", r"elements differ", _add_own_diagonal, lambda: (torch.randn(2, 2),),
        "reinplace turns add(t, diagonal(t)) into add_(t, diagonal(t)): the op writes t while it reads t's "
        "diagonal, so later elements see written ones (wrong values; where eager detects the overlap, it "
        "raises 'some elements of the input tensor and the written-to tensor refer to a single memory "
        "location')",
        shape=lambda violation: _writes_what_it_reads(violation.graph_after),  # not any value that differs
        also=(("validity", r"refer to a single memory location", None),)),
    "reinplace-raises-on-a-data-dependent-shape": Finding(
        ("fx.reinplace",), "execution", r"DynamicOutputShapeException",
        lambda x, m: (aten.index.Tensor(aten.add.Tensor(x, x), [m]),),
        lambda: (torch.randn(4), torch.tensor([True, False, True, False])),
        "reinplace propagates fake tensors through the graph, and a boolean-mask index (nonzero: its "
        "output shape depends on the data) raises DynamicOutputShapeException"),
    "reinplace-raises-on-a-constant": Finding(
        ("fx.reinplace",), "execution", "FakeTensor",
        _constant_program(), lambda: (torch.randn(3),),
        "reinplace fakeifies only the sample inputs, so a graph reading a get_attr tensor constant raises "
        "'Please convert all Tensors to FakeTensors first'"),
    "const-fold-keeps-the-view-strides-in-meta": Finding(
        ("fx.split_const_subgraphs",), "validity", r"meta\['val'\].* stride=.*_fx_const_folded_attrs",
        _slice_of_a_constant(), lambda: (torch.randn(3, 1),),
        "split_const_subgraphs folds slice(c, 1, 0, 1) of a (3, 4) constant into an attribute stored as a "
        "compact copy (strides (1, 1)), but its get_attr node keeps the slice's meta['val'] (strides (4, 1)): "
        "a later pass that reads meta['val'] sees a layout the tensor does not have"),
    "const-fold-returns-the-folded-constant": Finding(
        ("fx.split_const_subgraphs",), "aliasing", r"output\[\d+\] aliases a constant, but should not \(the original's",
        _clone_of_a_constant(), lambda: (torch.randn(3),),
        "split_const_subgraphs folds clone(c) of a constant c into an attribute computed once, and the output "
        "that was the clone is now that attribute: every call returns the same tensor, so a caller writing "
        "into one call's output changes what the next call returns (eager returns a fresh tensor each call; "
        "a view of the clone, expand_as(clone(c), x), or mul(c, 2) folds the same way) (found by make "
        "conformance, seed 3556620202)"),
    "reinplace-asserts-on-a-flatten-that-copies": Finding(
        ("fx.reinplace",), "execution", r"AssertionError: view_storage != base_storage",
        lambda x: (aten.add.Tensor(aten.flatten.using_ints(x, 0, 1), 1),),
        lambda: (torch.randn(2, 3, 4).transpose(0, 1),),
        "reinplace takes flatten.using_ints for a view by its schema (Tensor(a) -> Tensor(a)) and asserts that "
        "the result shares its input's storage; flatten of a non-contiguous input whose dims cannot merge "
        "copies, so the pass raises on the graph (pre-dispatch and export's training IR keep flatten) "
        "(found by make conformance, seed 3556620202)",
        pre_dispatch=True),
    "softmax-pattern-raises-on-a-0-d-operand": Finding(
        ("joint_graph.joint_graph_passes",), "execution", r"IndexError: list index out of range",
        lambda x: (aten._softmax.default(aten.div.Tensor(x, x), -1, False),), lambda: (torch.tensor(3.0),),
        "the joint-graph pattern for softmax of a product or quotient (x * other: the max and the sum "
        "reduce over a dim where `other` broadcasts) checks `other`'s size at the softmax's dim, and a 0-d "
        "`other` has no dim -1: `_other_is_broadcasted_in_dim` raises IndexError on softmax(div(x, x)) of a "
        "0-d x (found by make conformance, seed 2333188716)",
        before=r"aten\.amax\.default\((?s:.*)aten\.exp\.default"),
    "softmax-pattern-negates-a-bool-operand": Finding(
        ("joint_graph.joint_graph_passes",), "execution",
        r"RuntimeError: Negation, the `-` operator, on a bool tensor is not supported",
        lambda b: (aten._softmax.default(aten.div.Tensor(b, b), 0, False),), lambda: (torch.tensor([True]),),
        "the same joint-graph pattern for softmax of a quotient (inp / other) makes its sign's +-1 in the "
        "dividend's dtype (div_softmax_pattern: one = scalar_tensor(1, dtype=inp.dtype), then -one), and for "
        "a bool dividend (softmax(div(b, b)): the quotient is a float, eager runs it) that negation raises "
        "RuntimeError (found by `fx-conformance campaign examples/campaign_torch_passes.toml`, seed 1 of the "
        "row)",
        before=r"aten\.div\.Tensor\((?s:.*)aten\.amax\.default\((?s:.*)aten\.exp\.default"),
    "reinplace-keeps-the-functional-strides": Finding(
        ("post_grad.reinplace_inplaceable_ops",), "validity",
        r"meta\['val'\]=.+? stride=\(.*?\), but should be .+? stride=\(.*?\) \(what the node produces\) "
        r"\[node \d+ %\w+: call_function aten\.index_put_\.default",
        lambda v, x, i: (aten.index_put_.default(x, [i], v), aten.clone.default(x))[1:],
        lambda: (torch.randn(2, 2, dtype=torch.float16), torch.randn(4, 6, dtype=torch.float16)[:, ::3],
                 torch.tensor([1, 3])),
        "reinplace_inplaceable_ops turns index_put(x, ...) + copy_(x, ...) into index_put_(x, ...) and keeps "
        "the functional node's meta['val']: the out-of-place result's strides ((2, 1): a gapped x is cloned "
        "contiguous), where the in-place node returns x itself ((6, 3)), so a later pass reads a layout the "
        "value does not have (found by `fx-conformance campaign examples/campaign_torch_passes.toml`, seed 1 "
        "of the row)",
        before=r"aten\.index_put\.default\((?s:.*)aten\.copy_\.default\("),
    "reinplace-returns-a-view-of-the-input": Finding(
        ("post_grad.reinplace_inplaceable_ops", "post_grad.post_grad_passes"), "aliasing",
        r"output\[\d+\] aliases input\[\d+\], but should not \(the original's output\[\d+\] aliases nothing\)",
        _row_written_then_viewed, lambda: (torch.randn(3, 4), torch.randn(4)),
        "reinplace_inplaceable_ops turns select_scatter(x, ...) whose result is copied back into the input x "
        "into a write into x, and hands the scatter's other readers x itself: an output that was a view of "
        "the scatter's fresh result (unbind(select_scatter(x, ...))[0]) becomes a view of the input. End to "
        "end, torch.compile of z = torch.select_scatter(x, x[0] + a, 0, 0); x.copy_(z); "
        "return z.unbind(0)[0] returns a tensor on x's storage, where eager's is fresh (met by the row's "
        "search at seed 9, 50 graphs)",
        before=r"(\w+) = torch\.ops\.aten\.select_scatter\.default\((?s:.*)"
               r"torch\.ops\.aten\.copy_\.default\(\w+, \1\)"),
    "fuse-folds-a-sequence-norm-along-the-wrong-dim": Finding(
        ("fx.experimental.optimization.fuse",), "values", r"elements differ",
        _eval_pair(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4)), lambda: (torch.randn(2, 4, 3),),
        "fuse folds a BatchNorm1d into the Linear before it along the Linear's output features, but on an "
        "(N, C, L) input the norm normalises dim 1 (C): wrong values where out_features == C, and a raise "
        "('To fuse, linear.out_features == bn.num_features') otherwise (pytorch/ao#4116 is the same bug in "
        "torchao's pt2e fold)",
        shape=_norm_after_a_linear_on_a_sequence),  # replayed: not any value that differs
    "fuse-raises-on-a-sequence-norm": Finding(
        ("fx.experimental.optimization.fuse",), "execution", r"To fuse, linear\.out_features",
        _eval_pair(torch.nn.Linear(3, 5), torch.nn.BatchNorm1d(4)), lambda: (torch.randn(2, 4, 3),),
        "the same wrong-dim fold on a valid (N, C, L) graph where out_features != C: fuse raises"),
    "fuse-raises-on-a-norm-without-affine": Finding(
        ("fx.experimental.optimization.fuse",), "execution", r"NoneType",
        _eval_pair(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4, affine=False)), lambda: (torch.randn(2, 3),),
        "fuse_linear_bn_weights multiplies bn.weight, which is None for BatchNorm1d(affine=False): TypeError "
        "(pytorch/pytorch#122183, open; the conv fold handles it)"),
    "cse-pass-merges-random-ops": Finding(
        ("fx.CSEPass",), "values", r"differ",
        lambda x: (aten.rand_like.default(x), aten.rand_like.default(x)), lambda: (torch.zeros(3),),
        "CSEPass() bans no op by default (banned_ops=None becomes an empty set though the module lists its "
        "random ops in get_CSE_banned_ops()), so two rand_like draws on one tensor are merged into one",
        shape=_merges_random_draws),  # fewer draws after: not any value that differs
    "cse-pass-merges-a-value-written-in-place": Finding(
        ("fx.CSEPass",), "values", r"elements differ|shape=\(.*\), but should be", _sin_twice_one_written,
        lambda: (torch.tensor([-2.0, -1.0, 0.5, 1.0, 2.0, 3.0, 4.0, -3.0]),),
        "CSEPass merges two equal pure nodes (sin(x) twice) though one of them is written in place later "
        "(abs_): the other's readers then see the write (wrong values; where the merged tensor is both "
        "written and read by one in-place op, eager raises 'some elements of the input tensor and the "
        "written-to tensor refer to a single memory location'; a metadata write, transpose_, changes the "
        "other's shape: seed 3583679489) (found by make conformance, seed 823726206)",
        shape=_merges_a_tensor_written_in_place,
        also=(("validity", r"refer to a single memory location", None, _merges_a_tensor_written_in_place),
              # the written tensor returned twice, as two outputs that came to be one
              ("aliasing", r"output\[\d+\] aliases output\[\d+\]", None, _merges_a_tensor_written_in_place))),
    "cse-pass-makes-two-outputs-one-tensor": Finding(
        ("fx.CSEPass",), "aliasing", r"output\[\d+\] aliases output\[\d+\]",
        lambda x: (aten.neg.default(x), aten.neg.default(x)), lambda: (torch.randn(3),),
        "CSEPass merges two equal pure calls that are both outputs (neg(x) returned twice), so the two "
        "outputs come to be one tensor: a write to one shows in the other (found by make sweep under "
        "issue 56's aliasing rule, seed 0)",
        shape=_cse_made_two_outputs_one),
    "cse-pass-merges-int-and-float-scalars": Finding(
        ("fx.CSEPass",), "values", r"dtype=torch\.\w+, but should be torch\.\w+",
        _int_tensor_plus_one_twice, lambda: (torch.arange(4),),
        "CSEPass keys a call by its arguments, and 1 == 1.0 (and hashes alike): add(x, 1) and add(x, 1.0) on "
        "an integer x are merged, and the float sum becomes the integer one (found by make sweep, issue "
        "56's int/float scalar twins, seed 0: clamp(x, 16, -1) and clamp(x, 16, -1.0))",
        shape=_cse_merged_scalar_twins,
        also=(("validity", r"meta\['val'\]=\w+\[.*but should be", None, _cse_merged_scalar_twins),
              # an op after the merged one that takes only floats (var_mean of pow(x, 2) for pow(x, 2.0))
              ("validity", r"running the transformed graph raised", None, _cse_merged_scalar_twins))),
    "legalize-graph-reorders-random-draws": Finding(
        ("fx.legalize_graph",), "values", r"differ",
        lambda x: _dropout_then_rand_like(x), lambda: (torch.zeros(()),),
        "legalize_graph (a topological sort) moves a random op ahead of an earlier one it does not depend on, "
        "so the two draw each other's numbers from the one generator",
        shape=_reorders_random_draws),  # the draws in another order: not any value that differs
}


def known_for(name: str):
    """``verify(known=)`` for pass ``name``: its findings and what it does by design are accepted
    (recorded, and the search goes on past them, so they cannot hide a new one). A row over other
    graphs of the same pass (``fx.CSEPass[hops]``) accepts that pass's findings too: at a random seed
    it meets them as its base row does (CSEPass merging two rand_like draws, at seed 6)."""
    target = PASSES[name].target
    findings = [f for f in FINDINGS.values()
                if name in f.passes or any(p in PASSES and PASSES[p].target == target for p in f.passes)]
    by_design = PASSES[name].by_design

    def known(violation, example=None) -> bool:
        return any(f.matches(violation, example) for f in findings) or any(
            violation.property == prop and re.search(pattern, violation.message) for prop, pattern in by_design)

    return known


def check_row(pass_name: str, gm, inputs, **options):
    """``check()`` of pass ``pass_name`` on one graph as its row calls it, each violation filled as the
    search reports it: the graphs before and after and the inputs, what a finding's ``before`` and
    ``shape`` read (``options``: ``symbolic=`` for a graph over symbolic sizes)."""
    row = PASSES[pass_name]
    verdict = check(row.target, gm, inputs, pass_kwargs=row.pass_kwargs or None, context=row.context,
                    ensure=row.ensure, **options)
    for v in verdict.violations:
        v.graph_before = v.graph_before or gm.code.strip()
        v.graph_after = v.graph_after or verdict.graph_after
        v.inputs = v.inputs or "\n".join(f"input[{i}]: {describe(t)}" for i, t in enumerate(inputs))
    return verdict


def _check_finding(name: str, pass_name: str):
    """The finding, the row's verdict on its program, and that program (an ``Example``)."""
    finding = FINDINGS[name]
    gm, inputs = finding.graph(PASSES[pass_name].ir)
    return finding, check_row(pass_name, gm, inputs), Example(gm, inputs)


def finding_params(findings: dict, strict_xfail: bool):
    """A param per (finding, pass it names) of ``findings`` (here and test_torch_passes_dynamic.py), as
    a strict xfail naming the torch version and the behaviour where ``strict_xfail``."""
    for name, finding in findings.items():
        for pass_name in finding.passes:
            marks = [pytest.mark.xfail(strict=True, reason=f"{TORCH}: {pass_name}: {finding.behaviour}")] \
                if strict_xfail else []
            yield pytest.param(name, pass_name, id=f"{name}-{pass_name}", marks=marks)


@pytest.mark.parametrize("name, pass_name", list(finding_params(FINDINGS, strict_xfail=False)))
def test_finding_shows(name, pass_name):
    """The finding's program, in the pass's IR, still shows the violation its row names."""
    finding, verdict, example = _check_finding(name, pass_name)
    # a pass that raised returned no graph; a stale meta['val'] can sit on a graph of the same structure
    if finding.property not in ("execution", "validity"):
        assert verdict.changed, f"{pass_name} did not change the finding's graph:\n{verdict.graph_after}"
    assert any(finding.matches(v, example) for v in verdict.violations), \
        f"{pass_name}: expected {finding.property} /{finding.message}/, got {verdict}"


@pytest.mark.parametrize("name, pass_name", list(finding_params(FINDINGS, strict_xfail=True)))
def test_finding_fixed(name, pass_name):
    """Fails while torch has the bug (a strict xfail): the day it passes, remove the finding's row."""
    _, verdict, _ = _check_finding(name, pass_name)
    assert verdict.ok, "\n".join(f"{v.property}: {v.message}" for v in verdict.violations)


# --- a finding hides its bug, and no other --------------------------------------------------------------

# rows whose findings are values that differ: a new numerical bug there must still be reported
_VALUES_ROWS = ("post_grad.post_grad_passes", "fx.CSEPass", "fx.legalize_graph", "fx.experimental.optimization.fuse",
                "fx.reinplace")


def _nudge(x):
    return x * 1.0625 if isinstance(x, torch.Tensor) and x.is_floating_point() else x


def _with_a_new_bug(name: str):
    """Row ``name``'s pass as the row calls it, then a bug of its own: each floating output of what it
    returns scaled by 1.0625 (values differ; shapes, dtypes and meta as before)."""
    from conformance.adapters import load_pass

    row = PASSES[name]
    put = load_pass(row.target, pass_kwargs=row.pass_kwargs or None, context=row.context)

    def pass_with_a_new_bug(gm, example_inputs):
        out = put.apply(gm, tuple(example_inputs)).gm
        graph = out.graph
        output = next(n for n in graph.nodes if n.op == "output")

        def nudged(a):
            val = a.meta.get("val") if isinstance(a, fx.Node) else None
            if isinstance(val, torch.Tensor):  # an ATen IR: an ATen op, its meta as the node's
                if not val.is_floating_point():
                    return a
                new = graph.call_function(aten.mul.Tensor, (a, 1.0625))
                new.meta.update(a.meta)
                return new
            return graph.call_function(_nudge, (a,)) if isinstance(a, fx.Node) else a

        with graph.inserting_before(output):
            output.args = (fx.map_arg(output.args[0], nudged),)
        out.recompile()
        return out

    return pass_with_a_new_bug


@pytest.mark.parametrize("name", _VALUES_ROWS)
def test_a_new_numerical_bug_in_a_pass_with_findings_is_still_reported(name):
    """The row's findings match their bugs by structure, not by the symptom ("elements differ"): a
    planted bug of the same symptom is reported by the row's search, and each finding's own program
    stays accepted."""
    row = PASSES[name]
    known = known_for(name)
    result = verify(_with_a_new_bug(name), ir=row.ir, graphs=row.graphs, seed_graphs=row.seeds,
                    constants=row.constants, known=known, focus="none", max_examples=10, seed=0, repro_dir=None,
                    shrink=False, timeout=30)
    assert "values" in {v.property for v in result.violations}, \
        f"{name}: the planted bug was taken for a finding: {[v.message.splitlines()[0] for v in result.known]}"
    for finding in (f for f, row_finding in FINDINGS.items() if name in row_finding.passes):
        _, verdict, example = _check_finding(finding, name)
        assert verdict.violations and any(known(v, example) for v in verdict.violations), (finding, verdict)


# --- the search ---------------------------------------------------------------------------------------


def _budget(ir: str):
    """Graphs per pass and seed: twice the profile's examples (a quarter of that in export, whose
    tracer costs 0.2 s a graph), seed 0 under a derandomized profile."""
    profile = settings.default
    n = 2 * profile.max_examples
    return (max(10, n // 4) if ir == "export" else n), (0 if profile.derandomize else None)


def _pass_params():
    """Every row; make test verifies an eighth of the rows that fire, evenly spread (``_tiers``: three
    of 27, post_grad.remove_noop_ops, functorch.fx_graph_cse and fx.Graph.eliminate_dead_code;
    a row takes 2-20 s of CPU with its discovery on the 2-core AMD EPYC, the post-grad ones the most), make sweep and make conformance all: each row is
    the same property, of another pass.
    A row that never fires is a strict xfail there (5-7 s a row, its discovery included, to learn
    again that nothing changed): make sweep's and make conformance's."""
    firing = [pytest.param(name, id=name) for name, row in PASSES.items() if not row.never_fires]
    idle = [pytest.param(name, id=name, marks=[
        pytest.mark.xfail(strict=True, reason=f"{TORCH}: never fires on drawn graphs: {row.never_fires}"),
        pytest.mark.sweep]) for name, row in PASSES.items() if row.never_fires]
    return [*spread(firing, max(1, len(firing) // 8)), *idle]


def verify_row(name: str, max_examples: int, seed: int | None, **overrides):
    """``verify()`` on pass ``name`` exactly as its row says (scripts/torch_passes_table.py too)."""
    row = PASSES[name]
    if row.ops_file:  # imported as verify() imports a file target (its folder on sys.path for its neighbours)
        from conformance.adapters import _import_file

        _import_file(str(ROOT / row.ops_file))
    options = dict(ir=row.ir, graphs=row.graphs, pass_kwargs=row.pass_kwargs or None, context=row.context,
                   ensure=row.ensure, seed_graphs=row.seeds, constants=row.constants, ops=row.ops, hops=row.hops or None,
                   known=known_for(name), focus="none" if row.ir == "torch" else "auto", max_examples=max_examples,
                   seed=seed, repro_dir=None, shrink=False, timeout=30, dce_pass=row.dce_pass, **DATABASE)
    return verify(row.target, **{**options, **overrides})


def campaign_rows() -> list:
    """The rows a campaign's ``suite = "torch-passes"`` job runs (``conformance/campaign.py``)."""
    return list(PASSES)


def campaign_run(name: str, examples: int, seed: int, **options) -> tuple:
    """One row at one seed for a campaign: ``(VerifyResult, {"ir", "never_fires"})``."""
    row = PASSES[name]
    return verify_row(name, examples, seed, **options), {"ir": row.ir, "never_fires": bool(row.never_fires)}


@pytest.mark.parametrize("name", list(_pass_params()))
def test_torch_pass(name):
    """``name`` verified on drawn graphs in its IR: no violation but its known findings, and it fires."""
    row = PASSES[name]
    max_examples, seed = _budget(row.ir)
    result = verify_row(name, max_examples, seed)
    assert result.ok, f"{name} ({row.ir} IR, seed {result.seed}): a violation no finding names:\n" + "\n\n".join(
        f"{v.property}: {v.message}\n{v.graph_before}\n{v.graph_after}" for v in result.violations)
    assert result.acted > 0, f"{name}: {result.vacuous_text} (seed {result.seed})"


def _write_a_split_then_read_it(x, i, v):
    aten.index_put_.default(aten.split.Tensor(x, 4, -2)[0], [i], v, True)
    return (aten.clone.default(aten.split.Tensor(x, 4, -2)[0]),)


def test_inductor_reinplace_meta_met_on_a_view_of_a_written_slice_is_matched_there_only():
    """make conformance (seed 2029246500) met Inductor's reinplaced meta through a slice_scatter: the
    minimal program's stale view matches the finding; the same message where the graph after writes
    nothing in place, or the graph before scatters nothing back, does not."""
    row = PASSES["post_grad.post_grad_passes"]
    inputs = (torch.randn(9, 4, 1)[::3], torch.tensor([1]), torch.tensor(1.0))
    gm, inputs = to_ir(make_fx(_write_a_split_then_read_it)(*inputs), inputs, row.ir)
    stale = [v for v in check_row("post_grad.post_grad_passes", gm, inputs).violations if v.property == "validity"]
    assert stale and "%getitem" in stale[0].message, stale
    finding = FINDINGS["inductor-reinplace-keeps-the-out-of-place-meta"]
    for v in stale:
        assert finding.matches(v), v.message
    v = stale[0]
    written, v.graph_after = v.graph_after, re.sub(r"aten\.copy_\.default", "aten.copy.default", v.graph_after)
    assert not finding.matches(v)
    v.graph_after, v.graph_before = written, v.graph_before.replace("slice_scatter", "slice_copy")
    assert not finding.matches(v)


@pytest.mark.parametrize("pass_name", ["joint_graph.constant_fold_uniform_value", "joint_graph.joint_graph_passes"])
def test_a_no_ops_kept_operand_with_the_removed_nodes_meta_is_matched_whatever_it_is(pass_name):
    """remove_no_ops' meta copy shows on any kept operand: 1.0 * expand(abs(x)) keeps the expand, whose
    meta['val'] takes the product's contiguous strides; the same stale node where the graph after still
    has the product is not the finding."""
    row, inputs = PASSES[pass_name], (torch.randn(1, 3),)
    program = lambda x: (aten.mul.Tensor(aten.scalar_tensor.default(1.0),  # noqa: E731
                                         aten.expand.default(aten.abs.default(x), [4, 3])),)
    gm, inputs = to_ir(make_fx(program)(*inputs), inputs, row.ir)
    verdict = check_row(pass_name, gm, inputs)
    stale = [v for v in verdict.violations if "%expand: call_function" in v.message]
    assert stale, verdict.violations
    finding = FINDINGS["remove-no-ops-overwrites-the-kept-operands-meta"]
    v = stale[0]
    assert finding.matches(v)
    product = re.search(r"^\s*(mul\w*) = torch\.ops\.aten\.mul\.Tensor\(.*$", gm.code, re.M).group(0)
    v.graph_after = verdict.graph_after + "\n" + product
    assert not finding.matches(v)


_MAX = 9223372036854775807
_STRIDED_SCATTERS = {  # views of a scatter of a strided input, each a form of one finding
    "permute": (lambda x, s: (aten.permute.default(aten.slice_scatter.default(x, s, 1, 0, _MAX, 2), [1, 0]),),
                lambda: (torch.randn(2, 8)[:, ::2], torch.randn(2, 2))),
    "expand": (lambda x, s: (aten.expand.default(aten.slice_scatter.default(x, s, 0, 0, _MAX, 3), [2, 2]),),
               lambda: (torch.randn(6)[::3], torch.randn(1))),
    "unsqueeze": (lambda x, s: (aten.unsqueeze.default(aten.slice_scatter.default(x, s, 0, 0, _MAX, 3), 0),),
                  lambda: (torch.randn(6)[::3], torch.randn(1))),
    "select_scatter": (lambda x, s: (aten.view.default(aten.select_scatter.default(x, s, 0, 0), [1, 2]),),
                       lambda: (torch.randn(6)[::3], torch.randn(()))),
    "view-of-a-view": (lambda x, s: (aten.view.default(aten.view.default(
        aten.slice_scatter.default(x, s, 0, 0, _MAX, 3), [2, 1]), [1, 2]),),
        lambda: (torch.randn(6)[::3], torch.randn(1))),
}


@pytest.mark.parametrize("form", list(_STRIDED_SCATTERS))
def test_a_strided_scatter_re_derived_as_contiguous_is_matched_through_any_view(form):
    """post_grad_passes' contiguous re-derivation of a strided scatter (found as a view of a slice_scatter)
    shows through every view of it and through select_scatter: each is the finding; the same stale meta
    where the graph after holds no scatter is not."""
    program, make_inputs = _STRIDED_SCATTERS[form]
    row, inputs = PASSES["post_grad.post_grad_passes"], make_inputs()
    gm, inputs = to_ir(make_fx(program)(*inputs), inputs, row.ir)
    verdict = check_row("post_grad.post_grad_passes", gm, inputs)
    assert verdict.violations, f"{form}: the pass no longer shows it"
    finding = FINDINGS["post-grad-passes-re-derive-a-strided-scatter-as-contiguous"]
    for v in verdict.violations:
        assert finding.matches(v), v.message
        v.graph_after = re.sub(r"(slice|select)_scatter", "slice_copy", v.graph_after)
        assert not finding.matches(v)


def _addmm_into_a_broadcast(x, a, b):
    return (aten.addmm.default(aten.abs.default(x), a, b),)


def test_reinplace_into_a_broadcast_result_is_matched_in_addmms_words_too():
    """make conformance (seed 1209968833) met reinplace's in-place op on a broadcast operand as addmm_,
    whose error reads 'Bad in-place call: ... should match'."""
    row = PASSES["fx.reinplace"]
    inputs = (torch.randn(1), torch.randn(1, 2), torch.randn(2, 1))
    gm, inputs = to_ir(make_fx(_addmm_into_a_broadcast)(*inputs), inputs, row.ir)
    verdict = check_row("fx.reinplace", gm, inputs)
    assert [v.property for v in verdict.violations] == ["validity"], verdict.violations
    assert "Bad in-place call" in verdict.violations[0].message
    assert FINDINGS["reinplace-writes-into-a-broadcast-result"].matches(verdict.violations[0])


def _forward(*calls: str, returns: str) -> str:
    """A graph's code as the graphs print it: ``"a = abs(x)"`` for ``a = torch.ops.aten.abs.default(x)``."""
    lines = [re.sub(r"^(\w+) = (\w+)\(", r"\1 = torch.ops.aten.\2.default(", c) for c in calls]
    return "def forward(self, x):\n" + "".join(f"    {line}\n" for line in lines) + f"    return ({returns})"


def test_two_outputs_made_one_tensor_is_the_no_op_finding_only_where_no_ops_were_removed():
    """remove_noop_ops's finding: the two outputs made one are a kept node and no-ops removed in its
    place; a merge of two computed outputs (a CSE's bug, not this one) is not matched."""
    from conformance._result import Violation

    message = "output[0] aliases output[1], but should not (the original's output[0] aliases nothing)"
    finding = FINDINGS["remove-noop-ops-makes-two-outputs-one-tensor"]

    def matches(before, after) -> bool:
        return finding.matches(Violation("aliasing", message, graph_before=before, graph_after=after))

    after = _forward("a = abs(x)", returns="a, a")
    assert matches(_forward("a = abs(x)", "clone = clone(a)", "clone_1 = clone(a)", returns="clone, clone_1"), after)
    assert not matches(_forward("a = abs(x)", "b = abs(x)", returns="a, b"), after)
    # a view of one clone and the other clone (make test, seed 0, after issue 56's complex operands moved
    # the draws): the view comes to read the kept node the other output is
    before = _forward("a = floor(x)", "clone = clone(a)", "view = view(clone, [-1])", "clone_1 = clone(a)",
                      returns="view, clone_1")
    after = _forward("a = floor(x)", "view = view(a, [-1])", returns="view, a")
    assert matches(before, after)
    # the same outputs where no no-op was removed (the view's operand replaced by another computed value) is not it
    assert not matches(before.replace("clone = torch.ops.aten.clone.default(a)", "clone = torch.ops.aten.abs.default(a)"),
                       after)
    # copy(dst, src) is removed for its source (make test, seed 0, on an Intel Xeon): copy(round(x), a) and a
    # clone of it returned, both made a; reached through the copy's destination, it is not this removal
    before = _forward("round_1 = round(x)", "a = abs(x)", "copy = copy(round_1, a)", "clone = clone(copy)",
                      returns="clone, copy")
    assert matches(before, _forward("round_1 = round(x)", "a = abs(x)", returns="a, a"))
    assert not matches(before, _forward("round_1 = round(x)", "a = abs(x)", returns="round_1, round_1"))


def test_a_finding_met_another_way_is_matched_only_with_its_graph():
    """``Finding.also``: make conformance met the uniform-value fold's NaN through a view.dtype (an int32
    output that differs, no NaN in the message) and reinplace's overlap as a raise; those match, and
    the same message from a graph without the pattern does not."""
    from conformance._result import Violation

    def met(name, prop, message, before="", after=""):
        violation = Violation(prop, message)
        violation.graph_before, violation.graph_after = before, after
        return FINDINGS[name].matches(violation)

    differ = "output[0]: 1 of 4 elements differ (int32[1, 4]), but should be exactly equal"
    assert met("uniform-value-fold-drops-nan", "values", differ, "mul_1 = torch.ops.aten.mul.Tensor(sum_1, 0)")
    # a NaN lost by another rewrite is not the fold's (a float16 -> bfloat16 chain made one cast: 99840
    # where the original had inf)
    nan = ("output[0]: 1 of 3 elements differ (bfloat16[3]), but should be NaN and +-inf at the same positions "
           "as the original")
    assert met("uniform-value-fold-drops-nan", "values", nan, "mul = torch.ops.aten.mul.Scalar(rsqrt, 0)")
    assert met("uniform-value-fold-drops-nan", "values", nan, "mul = torch.ops.aten.mul.Scalar(arg1_1, False)")
    chain = ("convert_element_type = torch.ops.prims.convert_element_type.default(arg0_1, torch.float16)\n"
             "convert_element_type_1 = torch.ops.prims.convert_element_type.default(convert_element_type, "
             "torch.bfloat16)")
    assert not met("uniform-value-fold-drops-nan", "values", nan, chain)
    assert met("pointless-convert-drops-a-narrowing-cast", "values", nan, chain)
    assert not met("pointless-convert-drops-a-narrowing-cast", "values", nan,
                   chain.replace("torch.bfloat16)", "torch.float16)"))
    assert not met("uniform-value-fold-drops-nan", "values", differ, "mul_1 = torch.ops.aten.mul.Tensor(sum_1, 2)")
    overlap = ("running the transformed graph raised RuntimeError: unsupported operation: some elements of the "
               "input tensor and the written-to tensor refer to a single memory location. Please clone() the "
               "tensor before performing the operation.")
    assert met("reinplace-writes-into-a-tensor-it-also-reads-through-a-view", "validity", overlap)
    assert not met("reinplace-writes-into-a-broadcast-result", "validity", overlap)
    # ``Finding.before``: an IndexError is any bug's message; the softmax pattern's needs its graph
    index = "pass raised IndexError: list index out of range, but should return a graph"
    softmax = ("amax = torch.ops.aten.amax.default(div, [-1], True)\n"
               "sub = torch.ops.aten.sub.Tensor(div, amax)\nexp = torch.ops.aten.exp.default(sub)")
    assert met("softmax-pattern-raises-on-a-0-d-operand", "execution", index, softmax)
    assert not met("softmax-pattern-raises-on-a-0-d-operand", "execution", index,
                   "cat = torch.ops.aten.cat.default([x0, x1], 1)")
    # CSE across a write met as eager's overlap check (make conformance, seed 823726206): with a value
    # computed twice and one copy written in place in the graph before, and not without
    twice = ("sin = torch.ops.aten.sin.default(arg3_1)\nsin_1 = torch.ops.aten.sin.default(arg3_1);  arg3_1 = None\n"
             "abs_ = torch.ops.aten.abs_.default(sin);  sin = None\n"
             "scatter_add_ = torch.ops.aten.scatter_add_.default(abs_, 0, arg0_1, sin_1)")
    assert met("cse-pass-merges-a-value-written-in-place", "validity", overlap, twice)
    assert not met("cse-pass-merges-a-value-written-in-place", "validity", overlap, twice.replace("abs_.default(sin)",
                                                                                               "abs.default(sin)"))
    assert not met("cse-pass-merges-a-value-written-in-place", "values", differ, twice.replace("sin.default(arg3_1);",
                                                                                             "cos.default(arg3_1);"))
    # an input erased with the view.dtype that read it (seed 2425308131), not any input lost
    lost = "placeholders=1 (arg0_1), but should be 2 (one per input; a pass must keep the graph's signature)"
    viewed = ("def forward(self, arg0_1, arg1_1):\n    view = torch.ops.aten.view.dtype(arg1_1, torch.float64)\n"
              "    return (view,)")
    assert met("redundant-views-erase-an-input", "validity", lost, viewed, "def forward(self, arg0_1):")
    assert not met("redundant-views-erase-an-input", "validity", lost,
                   viewed.replace("view.dtype(arg1_1", "view.dtype(arg0_1"), "def forward(self, arg0_1):")
    # an output that was a view and is a fresh full (seed 176630605), not any output that lost its alias
    unshared = "output[1] aliases nothing, but should alias output[2] too (as the original's does)"
    views = ("    view = torch.ops.aten.view.default(sub_1, [12])\n"
             "    view_1 = torch.ops.aten.view.default(view, [12, 1])\n    return (add, view_1, view)")
    folded = ("    view = torch.ops.aten.view.default(sub_1, [12])\n"
              "    full_default = torch.ops.aten.full.default([12, 1], 1.0)\n    return (add, full_default, view)")
    assert met("uniform-fold-replaces-an-aliasing-output", "aliasing", unshared, views, folded)
    assert met("uniform-fold-replaces-an-aliasing-output", "aliasing",  # the other side of the same pair
               "output[2] aliases nothing, but should alias output[1] too (as the original's does)", views, folded)
    assert not met("uniform-fold-replaces-an-aliasing-output", "aliasing", unshared, views,
                   folded.replace("aten.full.default([12, 1], 1.0)", "aten.clone.default(view_1)"))
    transposed = "output[1] shape=(1, 4, 0), but should be (0, 4, 1)"  # seed 3583679489: transpose_ of one copy
    assert met("cse-pass-merges-a-value-written-in-place", "values", transposed, twice)
    assert not met("cse-pass-merges-a-value-written-in-place", "values", transposed,
                   twice.replace("abs_.default(sin)", "abs.default(sin)"))
    # reinplace's out-of-place meta met on a view of the written tensor, and not on a view of another
    stale = ("meta['val']=float32[4, 3, 1] stride=(3, 1, *), but should be float32[4, 3, 1] stride=(6, 2, *) "
             "(what the node produces) [node 12 %expand_default: call_function "
             "aten.expand.default(%slice_scatter_default, [-1, 3, 1]) meta['val']=float32[4, 3, 1]]")
    expand = "\nexpand_default = torch.ops.aten.expand.default(slice_scatter_default, [-1, 3, 1])"
    assert met("reinplace-keeps-the-out-of-place-meta", "validity", stale,
               after="mul_tensor = torch.ops.aten.mul_.Tensor(slice_scatter_default, rsqrt_default)" + expand)
    assert not met("reinplace-keeps-the-out-of-place-meta", "validity", stale,
                   after="mul_tensor = torch.ops.aten.mul_.Tensor(rsqrt_default, slice_scatter_default)" + expand)


def _view_of_a_cumsum_reader(x):
    return (aten.view.default(aten.tanh.default(aten.add.Tensor(torch.cumsum(torch.full([3, 4], 2.0), 1), x)), [12]),)


def test_a_cumsum_readers_layout_met_as_a_view_that_raises_is_the_finding():
    """make conformance (seed 2020945239) met pointless_cumsum's layout change as a later view that raises
    when the graph runs: it matches the finding; the same raise from a graph without the cumsum of a full
    does not."""
    row, inputs = PASSES["post_grad.pass_patterns[1]"], (torch.randn(4, 3).t(),)
    gm, inputs = to_ir(make_fx(_view_of_a_cumsum_reader)(*inputs), inputs, row.ir)
    raised = [v for v in check_row("post_grad.pass_patterns[1]", gm, inputs).violations
              if "view size is not compatible" in v.message]
    assert raised, "the pass no longer shows it"
    finding = FINDINGS["pointless-cumsum-leaves-its-readers-meta"]
    assert finding.matches(raised[0])
    raised[0].graph_before = raised[0].graph_before.replace("aten.cumsum.default", "aten.cummax.default")
    assert not finding.matches(raised[0])


def test_a_complex_product_by_ones_removed_is_matched_and_no_other_complex_nan_lost():
    """remove-no-ops-multiplies-complex-by-one matches a complex NaN/inf mismatch only where a product by a
    tensor of one value is gone from the graph after: not where the product stays, nor where the removed
    product's operands hold no such tensor, nor a real output's NaN lost."""
    from conformance._result import Violation

    def met(message, before, after):
        violation = Violation("values", message)
        violation.graph_before, violation.graph_after = before, after
        return FINDINGS["remove-no-ops-multiplies-complex-by-one"].matches(violation)

    complex_nan = ("output[0] (as real, imaginary pairs): 1 of 4 elements differ (float32[2, 2]), but should be "
                   "NaN and +-inf at the same positions as the original")
    ones = "    full_default = torch.ops.aten.full.default([2], 1.0, dtype = torch.complex64)\n"
    product = "    mul = torch.ops.aten.mul.Tensor(arg0_1, full_default);  arg0_1 = None\n"
    assert met(complex_nan, ones + product, "    return (arg0_1,)")
    assert not met(complex_nan, ones + product, product + "    return (mul,)")  # the product kept
    assert not met(complex_nan, "    mul = torch.ops.aten.mul.Tensor(arg0_1, arg1_1)\n", "    return (arg0_1,)")
    assert not met(complex_nan.replace(" (as real, imaginary pairs)", ""), ones + product, "    return (arg0_1,)")


def test_the_cse_pass_findings_match_a_merge_and_nothing_else():
    """CSEPass's output merge and int/float merge (issue 56's structures met them) are accepted only where
    the graphs show that merge: an alias, a dtype or a raise from another change is still reported."""
    from conformance._result import Violation

    def met(name, prop, message, before, after):
        violation = Violation(prop, message)
        violation.graph_before, violation.graph_after = before, after
        return FINDINGS[name].matches(violation)

    alias = "output[0] aliases output[1], but should not (the original's output[0] aliases nothing)"
    twice = ("    neg = torch.ops.aten.neg.default(x)\n    neg_1 = torch.ops.aten.neg.default(x)\n"
             "    return (neg, neg_1)")
    merged = "    neg = torch.ops.aten.neg.default(x)\n    return (neg, neg)"
    assert met("cse-pass-makes-two-outputs-one-tensor", "aliasing", alias, twice, merged)
    # an output replaced by a new op's result (not a merge), or made an input: not this finding
    assert not met("cse-pass-makes-two-outputs-one-tensor", "aliasing", alias, twice,
                   "    neg = torch.ops.aten.neg.default(x)\n    view = torch.ops.aten.view.default(neg, [3])\n"
                   "    return (neg, view)")
    assert not met("cse-pass-makes-two-outputs-one-tensor", "aliasing", "output[0] aliases input[0]", twice, merged)
    dtype = "output[0] dtype=torch.int64, but should be torch.float32"
    twins = ("    add = torch.ops.aten.add.Tensor(x, 1)\n    add_1 = torch.ops.aten.add.Tensor(x, 1.0)\n"
             "    return (add_1, add)")
    one = "    add = torch.ops.aten.add.Tensor(x, 1)\n    return (add, add)"
    assert met("cse-pass-merges-int-and-float-scalars", "values", dtype, twins, one)
    assert met("cse-pass-merges-int-and-float-scalars", "validity", "running the transformed graph raised "
               "RuntimeError: var_mean only support floating point", twins, one)
    # numbers that differ by value (1 and 2.0), or twins the pass left apart: another bug's dtype
    assert not met("cse-pass-merges-int-and-float-scalars", "values", dtype, twins.replace("1.0", "2.0"), one)
    assert not met("cse-pass-merges-int-and-float-scalars", "values", dtype, twins, twins)
