"""Compile the lowering's kernels for a GPU target with no GPU, and print what the binaries show.

Run by tests/test_gpu_targets.py in a process of its own (``TRITON_INTERPRET`` must never be set
there, and Triton gets its own cache directory): ``python -m tests._gpu_compile OUT.json
[--targets sm_90,sm_80,gfx942] [--planted] [--spread N]``; each case is lowered once and compiled per
target (``--spread N``: each golden case, and one op table case in N, for one target in turn).
The kernels are those of the golden graphs (tests/pointwise_cases.py) and, per op table row
and dtype, its first case of the table test's special-value grid, lowered on the ``meta`` device
(the GPU code path: nothing is launched). ``--planted`` adds kernels a GPU engineer would send back
(a 65536-wide block; a strided copy), which the test's checks must flag.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

from reference_lowering import LoweringError
from reference_lowering.pointwise import lower_pointwise
from reference_lowering.pointwise import _kernel, _runtime
from reference_lowering.pointwise._targets import TARGETS, compile_for_target, expected_elements
from tests.graphs import build
from tests.pointwise_cases import GOLDEN, POINTWISE, eager_ok, graph_of, grid_cases


def _meta(t: torch.Tensor) -> torch.Tensor:
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")


def golden_cases():
    for name, (body, make_inputs, dynamic) in sorted(GOLDEN.items()):
        inputs = make_inputs()
        yield f"golden/{name}", build(len(inputs), body), inputs, dynamic


def table_cases():
    for row in POINTWISE:
        for dtype in sorted(row.dtypes, key=str):
            for args, kwargs in grid_cases(row, dtype):
                if eager_ok(row, args, kwargs):
                    gm, inputs = graph_of(row, args, kwargs)
                    yield f"table/{row.name}/{str(dtype).removeprefix('torch.')}", gm, inputs, False
                    break


def planted_cases():
    aten = torch.ops.aten
    x = torch.randn(4096)
    yield "planted/wide_block", build(2, lambda g, c, a, b: [c(aten.add.Tensor, a, b)]), (x, x), False
    t, y = torch.randn(64, 32).t(), torch.randn(32, 64)
    yield "planted/strided", build(2, lambda g, c, a, b: [c(aten.sub.Tensor, a, b)]), (t, y), False


def compile_all(targets, planted: bool, spread: int = 0) -> dict:
    """target -> {"kernels": rows, "seconds": compile and read-back time}: each case lowered once.
    ``spread`` N: the planted cases for every target, each golden case and one op table case in N
    (the first, then every Nth: rows and dtypes alike) for one target in turn, so every target sees
    every kind of kernel and every golden kernel is compiled, its SASS listed (``cuobjdump -sass``,
    0.33 s a kernel) where that target is NVIDIA's; 0: every case for every target, every golden
    kernel listed for each NVIDIA target."""
    table = list(table_cases())[::spread or 1]
    nvidia = [t for t in targets if TARGETS[t][0] == "cuda"]
    cases = [*((c, [targets[k % len(targets)]] if spread else targets) for k, c in enumerate(golden_cases())),
             *((c, [targets[k % len(targets)]] if spread else targets) for k, c in enumerate(table)),
             *((c, targets) for c in (planted_cases() if planted else ()))]
    out = {t: {"kernels": [], "seconds": 0.0} for t in targets}
    for (case, gm, inputs, dynamic), case_targets in cases:
        meta = tuple(_meta(t) for t in inputs)
        if case == "planted/wide_block":  # the interpreter's launch configuration, on a GPU
            lowered = _lower_with(lambda numel, interpreter, bits: (65536, 4), gm, meta)
        elif case == "planted/strided":  # no tiling: one flat index over a transposed and a contiguous operand
            lowered = _lower_with(None, gm, meta)
        else:
            lowered = lower_pointwise(gm, meta, dynamic=dynamic)
        for kernel in lowered.meta["pointwise_kernels"]:
            values = kernel.scalar_args(meta) if kernel.code.dynamic else None
            common = {"case": case, "trig": "tl.sin(" in kernel.source or "tl.cos(" in kernel.source,
                      "element_bits": [d.itemsize * 8 for d in (*kernel.code.in_dtypes,
                                                          *(d for _, _, d in kernel.code.outputs))]}
            golden = case.startswith("golden/")
            for target in case_targets:
                start = time.perf_counter()
                try:
                    figures = compile_for_target(kernel, target, values, disassemble=golden and target in nvidia)
                    row = {**common, **figures.as_dict(),
                           "expected_elements": list(expected_elements(kernel.code, TARGETS[target][2], values))}
                except LoweringError as exc:
                    row = {**common, "kernel": kernel.name, "error": str(exc)}
                out[target]["kernels"].append(row)
                out[target]["seconds"] += time.perf_counter() - start
    return out


def _lower_with(config, gm, inputs):
    """Lowered with a planted launch configuration, or (``config`` None) with no tiling: one flat index
    in the first output's order, whatever the other operands' layouts."""
    from reference_lowering.pointwise import _index

    saved = _kernel.launch_config, _kernel._axes
    if config is not None:
        _kernel.launch_config = config
    else:
        _kernel._axes = lambda inputs, outputs, info, shape: _index.flat_axes(len(shape))
    try:
        return lower_pointwise(gm, inputs)
    finally:
        _kernel.launch_config, _kernel._axes = saved


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--targets", default=",".join(TARGETS), help="comma-separated (default: all)")
    p.add_argument("--planted", action="store_true")
    p.add_argument("--spread", type=int, default=0, metavar="N", help="one op table case in N, each for one target")
    args = p.parse_args(argv)
    targets = args.targets.split(",")
    if not set(targets) <= set(TARGETS):
        print(f"--targets {args.targets}: each should be one of {', '.join(TARGETS)}", file=sys.stderr)
        return 2
    if _runtime.interpreting():
        print("TRITON_INTERPRET=1 is set: kernels cannot be compiled for a GPU here", file=sys.stderr)
        return 2
    with open(args.out, "w") as f:
        json.dump({"pid": os.getpid(), "targets": compile_all(targets, args.planted, args.spread)}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
