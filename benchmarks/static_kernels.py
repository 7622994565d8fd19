"""Static (compile-only) figures of the kernel benchmark corpus, ours beside Inductor's, per GPU target.

``python -m benchmarks.static_kernels OUT.json [--numel N] [--no-inductor]`` (``make nightly`` runs
it): each graph of ``benchmarks/_kernels.GRAPHS`` in each of its dtypes, at ``numel`` elements, is
lowered by ``reference_lowering`` on the ``meta`` device and compiled for sm_90, sm_80 and gfx942;
Inductor's kernels for the same graph (``_inductor_codegen``, private APIs, guarded: a failure is
recorded, not raised) are compiled for the CUDA targets with Inductor's own compile arguments. Per
kernel: registers, local memory (spills), stack, shared memory, instructions, instructions per
element, the widths of global loads and stores, bytes moved per element; per graph, dtype and
target, the ratio of our instructions per element to Inductor's. No GPU is used, none launched.
Must run in a process where ``TRITON_INTERPRET`` was never set.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time

import torch

from benchmarks._kernels import DTYPES, GRAPHS, bytes_moved, make_inputs
from reference_lowering.pointwise import lower_pointwise
from reference_lowering.pointwise._targets import TARGETS, compile_for_target, compile_triton, elements_per_thread, figures

NUMEL = 2 ** 20
INDUCTOR_TARGETS = ("sm_90", "sm_80")  # Inductor's CUDA source; its ROCm heuristics differ


def _meta(t):
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")


def _row(graph, dtype, provider, figs, elements_per_thread, bytes_per_element):
    d = figs.as_dict()
    d.update(graph=graph, dtype=dtype, provider=provider, elements_per_thread=elements_per_thread,
             instructions_per_element=round(figs.instructions / elements_per_thread, 3),
             bytes_per_element=round(bytes_per_element, 3),
             load_bits=dict(sorted((str(b), n) for b, n in figs.widths("load").items())),
             store_bits=dict(sorted((str(b), n) for b, n in figs.widths("store").items())))
    return d


def ours(name, graph, dtype, numel) -> list:
    inputs = make_inputs(graph, numel, DTYPES[dtype])
    gm = graph.build()
    per_element = bytes_moved(inputs, [gm(*inputs)[0]]) / numel
    meta = tuple(_meta(t) for t in inputs)
    rows = []
    for kernel in lower_pointwise(gm, meta).meta["pointwise_kernels"]:
        code = kernel.code
        for target, (_, _, warp) in TARGETS.items():
            figs = compile_for_target(kernel, target)
            rows.append(_row(name, dtype, "reference_lowering", figs, elements_per_thread(code, warp), per_element))
    return rows


def inductor(name, graph, dtype, numel) -> list:
    from benchmarks._inductor_codegen import inductor_triton_kernels

    inputs = make_inputs(graph, numel, DTYPES[dtype])
    gm = graph.build()
    per_element = bytes_moved(inputs, [gm(*inputs)[0]]) / numel
    rows = []
    for k in inductor_triton_kernels(gm, inputs):
        args = k.compile_args[0]  # config 0: Inductor's default (with one config, what it runs)
        options = dict(args["options"])
        num_warps = options.pop("num_warps")
        pointers = sum(1 for t in k.signature.values() if t.startswith("*"))
        blocks = [v for key, v in args["constexprs"].items() if str(key).endswith("BLOCK") and isinstance(v, int)]
        ept = max(1, math.prod(blocks) // (num_warps * 32))
        for target in INDUCTOR_TARGETS:
            compiled, seconds = compile_triton(k.autotuner.fn, k.signature, args["constexprs"], target,
                                               num_warps=num_warps, options=options, attrs=k.attrs)
            rows.append(_row(name, dtype, "inductor", figures(compiled, target, pointers, seconds), ept, per_element))
    return rows


def ratios(rows) -> list:
    """Per graph, dtype and target: our instructions per element over Inductor's (kernels summed)."""
    total = {}
    for r in rows:
        key = (r["graph"], r["dtype"], r["target"], r["provider"])
        total[key] = total.get(key, 0.0) + r["instructions_per_element"]
    out = []
    for (g, d, t, p), value in sorted(total.items()):
        other = total.get((g, d, t, "inductor"))
        if p == "reference_lowering" and other:
            out.append({"graph": g, "dtype": d, "target": t, "ours": round(value, 3), "inductor": round(other, 3),
                        "ratio": round(value / other, 3)})
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--numel", type=int, default=NUMEL)
    p.add_argument("--no-inductor", action="store_true", help="our kernels only")
    p.add_argument("--graphs", default=None, help="comma-separated corpus graphs (default: all)")
    p.add_argument("--dtypes", default=None, help="comma-separated dtypes, of f32,f16,bf16 (default: each graph's)")
    args = p.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET", "0") == "1":
        print("static_kernels: TRITON_INTERPRET=1 is set; kernels cannot be compiled for a GPU here", file=sys.stderr)
        return 2
    names = args.graphs.split(",") if args.graphs else list(GRAPHS)
    unknown = [n for n in names if n not in GRAPHS]
    if unknown:
        print(f"static_kernels: --graphs {','.join(unknown)}: not in the corpus ({', '.join(GRAPHS)})", file=sys.stderr)
        return 2
    start, rows, notes = time.perf_counter(), [], []
    for name, graph in ((n, GRAPHS[n]) for n in names):
        for dtype in (d for d in graph.dtypes if not args.dtypes or d in args.dtypes.split(",")):
            rows += ours(name, graph, dtype, args.numel)
            if args.no_inductor:
                continue
            try:
                rows += inductor(name, graph, dtype, args.numel)
            except Exception as exc:  # noqa: BLE001 - private APIs: record, do not fail the report
                notes.append(f"inductor {name} {dtype}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
    result = {"kind": "static", "numel": args.numel, "targets": list(TARGETS), "torch": torch.__version__,
              "triton": __import__("triton").__version__, "machine": platform.machine(),
              "seconds": round(time.perf_counter() - start, 1), "kernels": rows, "ratios": ratios(rows),
              "notes": notes}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"static_kernels: {len(rows)} kernel figures, {len(result['ratios'])} ratios, "
          f"{len(notes)} notes -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
