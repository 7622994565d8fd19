"""Reference pass infrastructure and reference lowering passes.

Drop-in for ``torch.fx.passes.infra`` (``PassBase``, ``PassResult``, ``PassManager``,
``this_before_that_pass_constraint``, ``pass_result_wrapper``) without the flaws torch 2.13's
implementation has, a Torch-TensorRT style lowering-pass registry (``registry``), and reference
passes, each ``(gm, sample_inputs) -> gm``, in the default registry's order.
"""

from ._infra import PassBase, PassResult, pass_result_wrapper
from ._manager import PassManager, this_before_that_pass_constraint
from ._reference import (
    DEFAULT_LOWERING_PASSES,
    common_subexpression_elimination,
    constant_fold,
    eliminate_dead_code,
    remove_detach,
    remove_noop_ops,
    repair_input_as_output,
    view_to_reshape,
)
from . import registry
from .registry import LoweringPassRegistry

__all__ = [
    "DEFAULT_LOWERING_PASSES",
    "LoweringPassRegistry",
    "PassBase",
    "PassManager",
    "PassResult",
    "common_subexpression_elimination",
    "constant_fold",
    "eliminate_dead_code",
    "pass_result_wrapper",
    "registry",
    "remove_detach",
    "remove_noop_ops",
    "repair_input_as_output",
    "this_before_that_pass_constraint",
    "view_to_reshape",
]
