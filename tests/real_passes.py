"""Real graph passes torch 2.13 ships that run on a plain CPU ATen GraphModule, as verify() targets.

``REAL_PASSES`` maps a short name to a ``"pkg.mod:attr"`` target. Where a pass cannot be called
as it comes (a pattern table's ``apply`` returns an int, a pass wants extra arguments, a lazy init
must run first), a small adapter ``fn(gm) -> gm`` in this module wraps it; each adapter calls the
pass exactly as its torch caller does and nothing more. The comment after each entry is its
calling form as ``conformance.adapters`` detects it.

``scripts/fire_rates.py`` measures how often each changes a generated graph (docs/fire-rates.md);
``tests/test_real_pass_fire.py`` keeps the ones that fire firing.

Passes left out, and why:

- ``torch.export`` passes that take an ``ExportedProgram`` (``_remove_effect_tokens``,
  ``move_to_device_pass``, ``lift_constants_pass``, ``_remove_auto_functionalized_pass``,
  ``unlift``): not a GraphModule pass.
- Inductor pre-grad passes (``pre_grad_passes``, ``efficient_conv_bn_eval``, ``split_cat``'s
  pre-grad tables, ``numpy_compat_normalization``): they match torch-level calls (``torch.cat``,
  ``F.linear``, ``call_module``), never ATen nodes. The predispatch-ATen passes of
  ``pre_grad._run_pre_dispatch_passes`` are stubs returning None outside fbcode (``remove_noop_pass``,
  ``relu_nan_to_num``, ``merge_concats_pass`` ...), except ``normalization_pass_aten``, whose table
  is empty here: it is measured (``pre_grad_aten_normalization``) to show that.
- ``canonicalize_quant_mapping``, ``decompose_triton_kernel_wrapper_functional``,
  ``decompose_scan_to_while_loop``, ``decompose_map_to_while_loop``: act on higher-order ops only
  (``invoke_quant_packed``, triton kernels, ``scan``, ``map``), which graphs drawn from an ATen op
  catalog never hold; ``decompose_auto_functionalized`` is measured as the representative (over a
  user's out-variant ops, which post-grad graphs hold as ``auto_functionalized_v2``, it and
  ``reinplace_inplaceable_ops`` fire: rows of conformance/suite/test_torch_passes.py).
- ``binary_folding``, ``efficient_conv_bn_eval``, ``freezing_patterns``, ``b2b_gemm``, ``pad_mm``,
  ``group_batch_fusion`` (post-grad fusions are off by default: ``config.post_grad_fusion_options``
  is empty), ``micro_pipeline_tp``, ``ddp_fusion``, ``fsdp``/``bucketing``/``overlap_scheduling``:
  convolution, mm/bmm and collectives, none in the catalog; the mm patterns they register with the
  post-grad tables are measured through ``post_grad_patterns_*``.
- ``move_constructors_to_gpu``: a no-op without a GPU. ``dedupe_symints``: symbolic shapes only.
- ``torch.fx.passes.runtime_assert.insert_deferred_runtime_asserts``: needs a ShapeEnv.
"""

from __future__ import annotations

import torch
import torch.fx as fx
from torch._export.passes.replace_set_grad_with_hop_pass import replace_set_grad_with_hop_pass
from torch._export.passes.replace_view_ops_with_view_copy_ops_pass import ReplaceViewOpsWithViewCopyOpsPass
from torch._guards import detect_fake_mode
from torch._inductor.fx_passes import joint_graph, post_grad
from torch._inductor.fx_passes.pre_grad import normalization_pass_aten
from torch._inductor.fx_passes.reinplace import reinplace_inplaceable_ops as _reinplace_inplaceable_ops
from torch._inductor.fx_passes.replace_random import replace_random_passes as _replace_random_passes
from torch._inductor.fx_passes.split_cat import POST_GRAD_PATTERNS
from torch._inductor.fx_utils import FakeTensorUpdater
from torch._inductor.virtualized import V
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.const_fold import split_const_subgraphs

aten = torch.ops.aten

# The pattern tables, complete: post_grad_passes and joint_graph_passes call these lazy inits
# (which register the rest of their patterns) before they apply a table. Bound to module globals,
# as a user's wrapper would import them, so trigger discovery sees the tables' keys.
post_grad.lazy_init()
joint_graph.lazy_init()
POST_GRAD_TABLE_0, POST_GRAD_TABLE_1, POST_GRAD_TABLE_2 = post_grad.pass_patterns
JOINT_GRAPH_PATTERNS = joint_graph.patterns
JOINT_GRAPH_TABLE_1 = joint_graph.pass_patterns[1]
JOINT_GRAPH_EARLY = joint_graph.early_patterns
SPLIT_CAT_NORMALIZATION = POST_GRAD_PATTERNS["normalization_aten_pass"]
SPLIT_CAT_SELECT_CAT = POST_GRAD_PATTERNS["select_cat_aten_pass"]
SPLIT_CAT_MOVE_VIEW_AFTER_CAT = POST_GRAD_PATTERNS["move_view_after_cat_aten_pass"]
SPLIT_CAT_SPLIT_CAT = POST_GRAD_PATTERNS["split_cat_aten_pass"]
SPLIT_CAT_UNBIND_STACK = POST_GRAD_PATTERNS["unbind_stack_aten_pass"]


# --- adapters: fn(gm) -> gm, each calling the pass as its torch caller does -------------------------


def _apply_table(table, gm: fx.GraphModule) -> fx.GraphModule:
    table.apply(gm.graph)  # returns the number of matches
    gm.recompile()
    return gm


def post_grad_patterns_0(gm):
    return _apply_table(POST_GRAD_TABLE_0, gm)


def post_grad_patterns_1(gm):
    return _apply_table(POST_GRAD_TABLE_1, gm)


def post_grad_patterns_2(gm):
    return _apply_table(POST_GRAD_TABLE_2, gm)


def joint_graph_patterns(gm):
    return _apply_table(JOINT_GRAPH_PATTERNS, gm)


def joint_graph_patterns_1(gm):
    return _apply_table(JOINT_GRAPH_TABLE_1, gm)


def joint_graph_early_patterns(gm):
    return _apply_table(JOINT_GRAPH_EARLY, gm)


# post_grad_passes applies these tables for the names in config.post_grad_fusion_options (empty by default)
def split_cat_normalization_aten(gm):
    return _apply_table(SPLIT_CAT_NORMALIZATION, gm)


def split_cat_select_cat_aten(gm):
    return _apply_table(SPLIT_CAT_SELECT_CAT, gm)


def split_cat_move_view_after_cat_aten(gm):
    return _apply_table(SPLIT_CAT_MOVE_VIEW_AFTER_CAT, gm)


def split_cat_split_cat_aten(gm):
    """Its handler reads its own entry of ``config.post_grad_fusion_options`` (a KeyError without
    one: post_grad_passes runs the table only for the names listed there). ``threshold_to_cat=2``:
    the default, 10, needs a cat of ten split pieces."""
    from torch._inductor import config

    with config.patch(post_grad_fusion_options={"split_cat_aten_pass": {"threshold_to_cat": 2}}):
        return _apply_table(SPLIT_CAT_SPLIT_CAT, gm)


def split_cat_unbind_stack_aten(gm):
    return _apply_table(SPLIT_CAT_UNBIND_STACK, gm)


def pre_grad_aten_normalization(gm):
    return _apply_table(normalization_pass_aten, gm)


def _inductor_fake_mode(gm):
    """``V.set_fake_mode`` with the graph's own FakeTensorMode (the one its ``meta['val']`` values
    come from), as compile_fx sets it around the post-grad passes."""
    vals = [n.meta.get("val") for n in gm.graph.nodes]
    mode = detect_fake_mode([v for v in vals if isinstance(v, torch.Tensor)]) or FakeTensorMode()
    return V.set_fake_mode(mode)


def post_grad_passes_inference(gm):
    """The whole Inductor post-grad pipeline as it runs on an inference graph."""
    with _inductor_fake_mode(gm):
        post_grad.post_grad_passes(gm, is_inference=True)
    return gm


def reinplace_inplaceable_ops(gm):
    """Inductor's reinplacing (post_grad_passes calls it with the pipeline's FakeTensorUpdater)."""
    with _inductor_fake_mode(gm):
        _reinplace_inplaceable_ops(FakeTensorUpdater(gm), gm.graph)
    gm.recompile()
    return gm


def remove_no_ops(gm):
    """joint_graph.remove_no_ops with the zeros/ones its caller (constant_fold_uniform_value) would
    know about: the graph's zeros_like/full_like/full nodes of fill value 0 and 1."""
    zeros, ones = set(), set()
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        if node.target is aten.zeros_like.default:
            zeros.add(node)
        elif node.target in (aten.full_like.default, aten.full.default) and len(node.args) >= 2:
            value = node.args[1]
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                (zeros if value == 0 else ones if value == 1 else set()).add(node)
    joint_graph.remove_no_ops(gm, zeros, ones)
    gm.recompile()
    return gm


def replace_random_passes(gm):
    """Inductor's replace_random_passes (returns a count; joint_graph_passes adds it up), inside the
    graph's fake mode as compile_fx runs it: its seed fusion enters ``V.fake_mode``."""
    with _inductor_fake_mode(gm):
        _replace_random_passes(gm)
    gm.recompile()
    return gm


def export_replace_set_grad_with_hop(gm):
    """torch.export's replace_set_grad_with_hop_pass (no graph signature, as for a plain module)."""
    return replace_set_grad_with_hop_pass(gm, None)[0]


def export_replace_view_ops_with_view_copy(gm):
    return ReplaceViewOpsWithViewCopyOpsPass()(gm).graph_module


def const_fold_split_const_subgraphs(gm):
    """torch.fx.experimental.const_fold: constant subgraphs run once and kept as attributes."""
    return split_const_subgraphs(gm)


# --- the targets -------------------------------------------------------------------------------------

_P = "tests.real_passes:"

REAL_PASSES: dict[str, str] = {
    # Inductor post-grad (torch._inductor.fx_passes.post_grad)
    "post_grad.remove_noop_ops": "torch._inductor.fx_passes.post_grad:remove_noop_ops",  # graph -> None
    "post_grad.view_to_reshape": "torch._inductor.fx_passes.post_grad:view_to_reshape",  # gm -> None
    "post_grad.remove_assert_ops": "torch._inductor.fx_passes.post_grad:remove_assert_ops",  # graph -> None
    "post_grad.reorder_for_locality": "torch._inductor.fx_passes.post_grad:reorder_for_locality",  # graph -> None
    "post_grad.stable_topological_sort": "torch._inductor.fx_passes.post_grad:stable_topological_sort",  # graph -> None
    "post_grad.pass_patterns[0]": _P + "post_grad_patterns_0",  # adapter gm -> gm (table.apply(graph) -> int)
    "post_grad.pass_patterns[1]": _P + "post_grad_patterns_1",  # adapter gm -> gm (table.apply(graph) -> int)
    "post_grad.pass_patterns[2]": _P + "post_grad_patterns_2",  # adapter gm -> gm (table.apply(graph) -> int)
    "post_grad.decompose_auto_functionalized": "torch._inductor.fx_passes.post_grad:decompose_auto_functionalized",  # graph -> None
    "post_grad.reinplace_inplaceable_ops": _P + "reinplace_inplaceable_ops",  # adapter gm -> gm (FakeTensorUpdater, graph)
    "post_grad.post_grad_passes": _P + "post_grad_passes_inference",  # adapter gm -> gm (gm, is_inference=True)
    "split_cat.normalization_aten_pass": _P + "split_cat_normalization_aten",  # adapter gm -> gm (table.apply(graph))
    "split_cat.select_cat_aten_pass": _P + "split_cat_select_cat_aten",  # adapter gm -> gm (table.apply(graph))
    "split_cat.move_view_after_cat_aten_pass": _P + "split_cat_move_view_after_cat_aten",  # adapter gm -> gm
    "split_cat.split_cat_aten_pass": _P + "split_cat_split_cat_aten",  # adapter gm -> gm (table.apply(graph))
    "split_cat.unbind_stack_aten_pass": _P + "split_cat_unbind_stack_aten",  # adapter gm -> gm (table.apply(graph))
    "pre_grad.normalization_pass_aten": _P + "pre_grad_aten_normalization",  # adapter gm -> gm (table.apply(graph))
    # Inductor joint-graph (torch._inductor.fx_passes.joint_graph)
    "joint_graph.joint_graph_passes": "torch._inductor.fx_passes.joint_graph:joint_graph_passes",  # gm -> gm
    "joint_graph.constant_fold_uniform_value": "torch._inductor.fx_passes.joint_graph:constant_fold_uniform_value",  # gm -> None
    "joint_graph.remove_no_ops": _P + "remove_no_ops",  # adapter gm -> gm (gm, zeros, ones)
    "joint_graph.remove_redundant_views": "torch._inductor.fx_passes.joint_graph:remove_redundant_views",  # gm -> None
    "joint_graph.patterns": _P + "joint_graph_patterns",  # adapter gm -> gm (table.apply(graph) -> int)
    "joint_graph.pass_patterns[1]": _P + "joint_graph_patterns_1",  # adapter gm -> gm (table.apply(graph) -> int)
    "joint_graph.early_patterns": _P + "joint_graph_early_patterns",  # adapter gm -> gm (table.apply(graph) -> int)
    "replace_random.replace_random_passes": _P + "replace_random_passes",  # adapter gm -> gm (gm -> int)
    # Inductor constant folding
    "inductor.constant_fold": "torch._inductor.constant_folding:constant_fold",  # gm -> None
    # torch.fx
    "fx.CSEPass": "torch.fx.passes.dialect.common.cse_pass:CSEPass",  # PassBase class, instantiated: gm -> PassResult
    "fx.reinplace": "torch.fx.passes.reinplace:reinplace",  # fn(gm, *sample_args) -> gm
    "fx.Graph.eliminate_dead_code": "torch.fx:Graph.eliminate_dead_code",  # graph -> bool
    "fx.legalize_graph": "torch.fx.passes.tools_common:legalize_graph",  # gm -> gm
    "fx.const_fold.split_const_subgraphs": _P + "const_fold_split_const_subgraphs",  # adapter gm -> FoldedGraphModule
    # torch._functorch
    "functorch.fx_graph_cse": "torch._functorch.compile_utils:fx_graph_cse",  # graph -> new Graph
    "functorch.strip_overloads": "torch._functorch.compile_utils:strip_overloads",  # gm -> None
    "functorch.raise_getitems": "torch._functorch.compile_utils:raise_getitems",  # gm -> gm
    # torch._export passes that accept a plain ATen GraphModule
    "export.constant_fold": "torch._export.passes.constant_folding:constant_fold",  # gm -> None
    "export.replace_view_ops_with_view_copy": _P + "export_replace_view_ops_with_view_copy",  # adapter gm -> gm (PassBase)
    "export.remove_runtime_assertions": "torch._export.passes.remove_runtime_assertions:_RemoveRuntimeAssertionsPass",  # PassBase class
    "export.replace_set_grad_with_hop": _P + "export_replace_set_grad_with_hop",  # adapter gm -> gm ((gm, None)[0])
}

# Passes measured on mutating graphs as well (they act on in-place ops, input mutation or grad-mode
# regions, which only graphs="mutating" draws).
MUTATING = (
    "post_grad.reinplace_inplaceable_ops",
    "post_grad.remove_noop_ops",
    "fx.CSEPass",
    "functorch.fx_graph_cse",
    "fx.reinplace",
    "export.replace_set_grad_with_hop",
)
