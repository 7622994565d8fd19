"""The kernel benchmark's data and instruments: the graph corpus, the sweeps, the providers, and a
timer in the manner of Triton's ``do_bench``.

Everything a sweep covers is declared here as data (``GRAPHS``, ``SIZES``, ``DTYPES``,
``PROVIDERS``); ``test_kernels.py`` only walks it. Correctness against eager comes before any
timing. Bytes moved count each input's storage read once and each output written once.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass

import torch
import torch.fx as fx

aten = torch.ops.aten
GPU = torch.cuda.is_available()
DEVICE = "cuda" if GPU else "cpu"

# --- the corpus -----------------------------------------------------------------------------------


def _build(n_inputs: int, body) -> fx.GraphModule:
    g = fx.Graph()
    xs = [g.placeholder(f"x{i}") for i in range(n_inputs)]
    g.output(tuple(body(g, lambda target, *args, **kw: g.call_function(target, args, kw), *xs)))
    return fx.GraphModule(torch.nn.Module(), g)


_CHAIN_OPS = (  # a realistic mix: arithmetic, activations, a transcendental, a clamp
    (aten.mul.Tensor, 1.25), (aten.add.Tensor, 0.5), (aten.relu.default,), (aten.sigmoid.default,),
    (aten.sub.Tensor, 0.25), (aten.tanh.default,), (aten.mul.Tensor, 2.0), (aten.clamp_min.default, -0.5),
)


def _chain(n: int):
    def body(g, c, x):
        v = x
        for i in range(n):
            op, *args = _CHAIN_OPS[i % len(_CHAIN_OPS)]
            v = c(op, v, *args)
        return [v]
    return body


@dataclass(frozen=True)
class Graph:
    """A benchmark graph: ``body`` over ``inputs`` (kinds: "full" the whole tensor, "row" a bias of
    the last dim, "transposed" a non-contiguous view); ``dtypes`` it is run in."""

    body: object
    inputs: tuple
    dtypes: tuple = ("f32", "f16", "bf16")
    note: str = ""

    def build(self) -> fx.GraphModule:
        return _build(len(self.inputs), self.body)


GRAPHS = {
    "add": Graph(lambda g, c, x, y: [c(aten.add.Tensor, x, y)], ("full", "full"), note="one op"),
    "chain4": Graph(_chain(4), ("full",), note="4 pointwise ops"),
    "chain8": Graph(_chain(8), ("full",), note="8 pointwise ops"),
    "chain16": Graph(_chain(16), ("full",), note="16 pointwise ops"),
    "bias_gelu": Graph(lambda g, c, x, b: [c(aten.gelu.default, c(aten.add.Tensor, x, b), approximate="tanh")],
                       ("full", "row"), note="bias + activation, broadcast over rows"),
    "cast_chain": Graph(lambda g, c, x: [c(aten._to_copy.default, c(aten.mul.Tensor, c(
        aten._to_copy.default, x, dtype=torch.float16), 3), dtype=torch.float32)], ("full",), dtypes=("f32",),
        note="f32 -> f16 -> f32"),
    "two_outputs": Graph(lambda g, c, x, y: [c(aten.add.Tensor, x, y), c(aten.mul.Tensor, x, y)], ("full", "full"),
                         note="two outputs of one region"),
    "transposed_input": Graph(lambda g, c, x, y: [c(aten.mul.Tensor, c(aten.add.Tensor, x, y), 0.5)],
                              ("transposed", "full"), note="a non-contiguous (transposed) input"),
}

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
ROW = 1024  # the last dimension of 2-D inputs (bias rows, transposes)
# GPU: 2**12 .. 2**26 elements; CPU: small (the interpreter runs reference_lowering there)
SIZES = {"cuda": tuple(2 ** k for k in range(12, 27, 2)), "cpu": (2 ** 12, 2 ** 16)}
SMOKE_SIZES = {"cuda": (2 ** 12,), "cpu": (2 ** 12,)}  # under `make test` (--benchmark-disable)
PROVIDERS = ("eager", "reference_lowering", "inductor")


def make_inputs(graph: Graph, numel: int, dtype: torch.dtype, seed: int = 0, device: str = DEVICE) -> tuple:
    """Random inputs (never zeros: they hide unwritten outputs and run faster than data), on ``device``
    (the GPU where there is one)."""
    gen = torch.Generator().manual_seed(seed)
    rows = max(1, numel // ROW)
    out = []
    for kind in graph.inputs:
        if kind == "row":
            t = torch.randn(ROW, generator=gen)
        elif kind == "transposed":
            t = torch.randn(ROW, rows, generator=gen).t()
        else:
            t = torch.randn(rows, ROW, generator=gen)
        out.append(t.to(device=device, dtype=dtype))
    return tuple(out)


def bytes_moved(inputs, outputs) -> int:
    """Each input's storage read once (a bias row is read once, not per row), each output written once."""
    read = sum(t.untyped_storage().nbytes() for t in inputs)
    return read + sum(t.numel() * t.element_size() for t in outputs)


# --- providers ------------------------------------------------------------------------------------


def provider(name: str, gm: fx.GraphModule, inputs: tuple, *, precompiled_headers: bool = True):
    """``(callable, label)``: the graph as that provider runs it. The label says what a timing means
    ("interpreter": reference_lowering on CPU runs under the Triton interpreter, not a performance).
    ``precompiled_headers=False``: Inductor's C++ compile goes without its precompiled header, which a
    cold cache builds first for the many kernels a timed run compiles (one kernel, chain8: 17.2 s of
    compile with it, 9.7 s without, on the 2-core AMD EPYC); the code it generates is the same."""
    if name == "eager":
        return gm, "eager"
    if name == "reference_lowering":
        from reference_lowering.pointwise import lower_pointwise

        lowered = lower_pointwise(gm, inputs)
        modes = {k.mode for k in lowered.meta["pointwise_kernels"]}
        return lowered, "interpreter" if "interpreter" in modes else "compiled"
    if name == "inductor":
        import torch._inductor.config as inductor_config

        _inductor_cache_per_capability()
        compiled = torch.compile(gm, fullgraph=True, dynamic=False)
        # Inductor skips the f16/bf16 rounding of intermediates unless asked (docs/torch-facts.md, section 5):
        # asked, so it computes what eager and reference_lowering compute. Compilation happens at the first call.
        headers = {} if precompiled_headers else {"cpp_cache_precompile_headers": False}
        with inductor_config.patch(emulate_precision_casts=True, **headers):
            compiled(*inputs)
        return compiled, "compiled"
    raise ValueError(f"provider={name!r}, but should be one of {PROVIDERS}")


def _inductor_cache_per_capability() -> None:
    """torch 2.13 keys Inductor's precompiled C++ header without the CPU capability: one built under
    AVX2 fails every later compile under ATEN_CPU_CAPABILITY=default (docs/torch-facts.md, section 5).
    Unless the user chose a cache directory, each capability gets its own."""
    try:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    except ImportError:  # another torch release: its own default
        return
    chosen = os.environ.get("TORCHINDUCTOR_CACHE_DIR")  # torch writes its default here on first use
    if chosen is not None and os.path.abspath(chosen) != os.path.abspath(default_cache_dir()):
        return
    capability = torch.backends.cpu.get_cpu_capability().lower()
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(default_cache_dir(), f"cpu-{capability}")


# --- timing ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    median_ms: float
    p20_ms: float
    p80_ms: float
    rounds: int


def _quantile(xs: list, q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(q * (len(xs) - 1)))))]


def bench(fn, *, warmup_ms: float = 25.0, rep_ms: float = 100.0, max_rounds: int = 1000) -> Timing:
    """Time ``fn()`` as Triton's ``do_bench`` does: budgets in ms for warm-up and repetitions; on a GPU,
    CUDA events around each call and the L2 cache flushed before it (a 256 MB write); on a CPU the
    host clock. Median with the 20th and 80th percentiles."""
    if GPU:
        cache = torch.empty(256 * 2 ** 20, dtype=torch.int8, device="cuda")
        fn()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(5):
            cache.zero_()
            fn()
        end.record()
        torch.cuda.synchronize()
        estimate = max(start.elapsed_time(end) / 5, 1e-3)
        for _ in range(max(1, int(warmup_ms / estimate))):
            fn()
        n = min(max_rounds, max(5, int(rep_ms / estimate)))
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for s, e in zip(starts, ends):
            cache.zero_()
            s.record()
            fn()
            e.record()
        torch.cuda.synchronize()
        times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    else:
        fn()
        t0 = time.perf_counter()
        fn()
        estimate = max((time.perf_counter() - t0) * 1e3, 1e-3)
        for _ in range(max(1, int(warmup_ms / estimate))):
            fn()
        n = min(max_rounds, max(5, int(rep_ms / estimate)))
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return Timing(statistics.median(times), _quantile(times, 0.2), _quantile(times, 0.8), len(times))


def copy_bandwidth_gbps() -> float:
    """Device-to-device copy bandwidth measured now: bytes read plus bytes written over the median
    time of copying a large buffer (256 MB on a GPU, 64 MB on a CPU)."""
    numel = (2 ** 26) if GPU else (2 ** 24)
    src = torch.randn(numel, device=DEVICE)
    dst = torch.empty_like(src)
    timing = bench(lambda: dst.copy_(src), rep_ms=200.0)
    return 2 * src.numel() * src.element_size() / (timing.median_ms * 1e-3) / 1e9


def driver_version() -> str | None:
    """The NVIDIA driver (nvidia-smi), or None."""
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out.splitlines()[0] if out else None
