"""How fx-conformance draws calls of ``torch.ops.mylib`` (examples/mylib_ops.py): what the schemas
cannot say. Arguments a rule leaves out are drawn from the schema."""

from __future__ import annotations

import torch

import mylib_ops  # noqa: F401 - registers torch.ops.mylib
from conformance import op_rule

mylib = torch.ops.mylib
EPSILONS = (1e-6, 1e-5, 0.1, 1.0)  # serving models use the first two; the others show a fusion that drops it


@op_rule(mylib.rms_norm)
def _(call):
    x = call.tensor("input", fits=lambda s: len(s) >= 1 and s[-1] > 0)
    call.tensor("weight", shape=x.shape[-1:], dtype=x.dtype)
    call.out("result", like=x)
    call.value("epsilon", EPSILONS)


@op_rule(mylib.fused_add_rms_norm)
def _(call):
    x = call.tensor("input", fits=lambda s: len(s) >= 1 and s[-1] > 0)  # written: a clone, or x itself
    call.tensor("residual", like=x)
    call.tensor("weight", shape=x.shape[-1:], dtype=x.dtype)
    call.value("epsilon", EPSILONS)


@op_rule(mylib.silu_and_mul)
def _(call):
    x = call.tensor("input", fits=lambda s: len(s) >= 1 and s[-1] % 2 == 0 and s[-1] > 0)
    call.out("result", shape=(*x.shape[:-1], x.shape[-1] // 2), dtype=x.dtype)


@op_rule(mylib.static_scaled_fp8_quant)
def _(call):
    x = call.tensor("input")
    call.tensor("scale", shape=(1,), dtype=torch.float32, domain="positive")
    call.out("result", like=x, dtype=mylib_ops.FP8)


@op_rule(mylib.rms_norm_static_fp8_quant)
def _(call):
    x = call.tensor("input", fits=lambda s: len(s) >= 1 and s[-1] > 0)
    call.tensor("weight", shape=x.shape[-1:], dtype=x.dtype)
    call.tensor("scale", shape=(1,), dtype=torch.float32, domain="positive")
    call.out("result", shape=x.shape, dtype=mylib_ops.FP8)
    call.value("epsilon", EPSILONS)


@op_rule(mylib.fused_add_rms_norm_static_fp8_quant)
def _(call):
    x = call.tensor("input", fits=lambda s: len(s) >= 1 and s[-1] > 0)
    call.tensor("residual", like=x)
    call.tensor("weight", shape=x.shape[-1:], dtype=x.dtype)
    call.tensor("scale", shape=(1,), dtype=torch.float32, domain="positive")
    call.out("result", shape=x.shape, dtype=mylib_ops.FP8)
    call.value("epsilon", EPSILONS)
