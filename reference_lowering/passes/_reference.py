"""The reference lowering passes, and the order the default registry runs them in.

Each is ``(gm, sample_inputs) -> gm`` (Torch-TensorRT's ATen lowering-pass form), edits ``gm`` in
place and returns it linted and recompiled; ``sample_inputs`` is accepted for the signature and
not needed by any of them.
"""

from __future__ import annotations

from ._cleanup import repair_input_as_output, remove_detach, remove_noop_ops, view_to_reshape
from ._dce_cse import common_subexpression_elimination, eliminate_dead_code
from ._fold import constant_fold

# The default registry's order; why each one sits where it does:
DEFAULT_LOWERING_PASSES = (
    eliminate_dead_code,  # first: a dead write blocks every pass below (no folding, no no-op removal,
    # no merging of what it writes) and none of them makes a write dead (found by make conformance:
    # with DCE later, a second run of the pipeline did what the first could not)
    remove_detach,  # detach hides no-op views and equal expressions from the passes below
    remove_noop_ops,  # before CSE and folding, so x and alias(x) are seen as one value
    view_to_reshape,  # after remove_noop_ops, which only knows views; reshape is what backends take
    constant_fold,  # before CSE/DCE: folding leaves dead constant subgraphs and equal buffers' readers
    common_subexpression_elimination,  # merged nodes leave their duplicates' arguments unused ...
    eliminate_dead_code,  # ... which DCE then removes
    repair_input_as_output,  # last: earlier passes may make an input an output again (alias(x) -> x)
)

__all__ = [
    "DEFAULT_LOWERING_PASSES",
    "common_subexpression_elimination",
    "constant_fold",
    "eliminate_dead_code",
    "remove_detach",
    "remove_noop_ops",
    "repair_input_as_output",
    "view_to_reshape",
]
