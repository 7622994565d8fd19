"""The rms_norm + quant fusion of examples/mylib_fusion.py written as vLLM writes most of its
fusions: an Inductor ``PatternMatcherPass`` whose pattern and replacement are traced functions over
the ``auto_functionalized_v2`` form of the ops (``register_replacement``). The epsilon is a wildcard
of the pattern (``scalar_workaround``), handed to the replacement.

``fuse_with_patterns`` is the table (``fuse_with_patterns.apply(graph)``, as Inductor runs it);
``fuse_with_patterns_ignoring_epsilon`` is the same pattern whose replacement keeps the epsilon it
was traced with, whatever the matched norm's: the slip a pattern makes when its replacement does
not take the wildcard.
"""

from __future__ import annotations

import torch
from torch._inductor.pattern_matcher import PatternMatcherPass, fwd_only, register_replacement

import mylib_rules  # noqa: F401 - registers torch.ops.mylib and how fx-conformance draws its calls
from mylib_fusion import DEFAULT_EPSILON

mylib = torch.ops.mylib
AF = torch.ops.higher_order.auto_functionalized_v2


def _pattern(norm_result, result, input, weight, scale, epsilon):
    normed = AF(mylib.rms_norm.default, input=input, weight=weight, epsilon=epsilon, _result_base_index=0,
                _all_bases=[norm_result])
    quant = AF(mylib.static_scaled_fp8_quant.default, input=normed[1], scale=scale, _result_base_index=0,
               _all_bases=[result])
    return quant[1]


def _replacement(norm_result, result, input, weight, scale, epsilon):
    fused = AF(mylib.rms_norm_static_fp8_quant.default, input=input, weight=weight, scale=scale, epsilon=epsilon,
               _result_base_index=0, _all_bases=[result])
    return fused[1]


def _replacement_ignoring_epsilon(norm_result, result, input, weight, scale, epsilon):
    return _replacement(norm_result, result, input, weight, scale, DEFAULT_EPSILON)


def _table(replacement, name: str) -> PatternMatcherPass:
    table = PatternMatcherPass(pass_name=name)
    example = [torch.empty(4, 8), torch.empty(4, 8, dtype=torch.float8_e4m3fn), torch.empty(4, 8), torch.empty(8),
               torch.empty(1)]
    register_replacement(_pattern, replacement, example, fwd_only, table,
                         scalar_workaround={"epsilon": DEFAULT_EPSILON})
    return table


fuse_with_patterns = _table(_replacement, "mylib_rms_norm_quant")
fuse_with_patterns_ignoring_epsilon = _table(_replacement_ignoring_epsilon, "mylib_rms_norm_quant_ignoring_epsilon")
