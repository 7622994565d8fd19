"""Generated kernels against eager and Inductor: the corpus of ``_kernels.GRAPHS`` x sizes x dtypes x
providers, each checked against eager (fp64 reference) before it is timed.

Each row's ``extra_info`` carries what the nightly report reads: provider, graph, size, dtype, the
timer's median and spread in ms, bytes moved, GB/s, the fraction of the device-to-device copy
bandwidth measured in the same run, and a label ("interpreter" rows are reference_lowering on CPU,
under the Triton interpreter: recorded, never compared as performance). Under ``make test``
(``--benchmark-disable``) only the smallest size runs, once, as a correctness smoke test (f32; of
Inductor's rows, one graph).
"""

from __future__ import annotations

import pytest
import torch

from benchmarks import _kernels as K
from conformance.oracle import compare_outputs

DEVICE = K.DEVICE
SMOKE_INDUCTOR = "chain8"  # the graph Inductor compiles under make test


@pytest.fixture(scope="session")
def copy_gbps():
    return K.copy_bandwidth_gbps()


def _cases():
    for graph_name, graph in K.GRAPHS.items():
        for dtype_name in graph.dtypes:
            for numel in K.SIZES[DEVICE]:
                for provider in K.PROVIDERS:
                    yield pytest.param(graph_name, dtype_name, numel, provider,
                                       id=f"{provider}-{graph_name}-{dtype_name}-{numel}")


@pytest.mark.parametrize("graph_name,dtype_name,numel,provider", list(_cases()))
def test_kernel(benchmark, request, graph_name, dtype_name, numel, provider):
    if benchmark.disabled and numel not in K.SMOKE_SIZES[DEVICE]:
        pytest.skip("the full sweep runs with timing on (make bench / make nightly)")
    if benchmark.disabled and dtype_name != "f32":
        pytest.skip("smoke test: f32 only")
    if benchmark.disabled and provider == "inductor" and graph_name != SMOKE_INDUCTOR:
        # Inductor's first compile in a process is 11 s of CPU on the 2-core AMD EPYC (its C++ toolchain
        # warming up), each further graph ~1 s: one graph shows the provider works, the rest are timed nightly
        pytest.skip(f"smoke test: Inductor compiles {SMOKE_INDUCTOR} only")
    graph = K.GRAPHS[graph_name]
    gm = graph.build()
    inputs = K.make_inputs(graph, numel, K.DTYPES[dtype_name])
    fn, label = K.provider(provider, gm, inputs, precompiled_headers=not benchmark.disabled)  # smoke: one kernel
    got = fn(*inputs)
    message = compare_outputs(gm, inputs, got, f"{provider} output")
    assert message is None, message

    info = benchmark.extra_info
    info.update(provider=provider, graph=graph_name, size=numel, dtype=dtype_name, device=DEVICE, label=label)
    if K.GPU:
        info.update(device_name=torch.cuda.get_device_name(0), driver=K.driver_version())
    if benchmark.disabled:
        benchmark(lambda: fn(*inputs))
        return
    sync = torch.cuda.synchronize if K.GPU else (lambda: None)
    timing = K.bench(lambda: fn(*inputs))
    moved = K.bytes_moved(inputs, got)
    peak = request.getfixturevalue("copy_gbps")
    gbps = moved / (timing.median_ms * 1e-3) / 1e9
    info.update(median_ms=timing.median_ms, p20_ms=timing.p20_ms, p80_ms=timing.p80_ms, timer_rounds=timing.rounds,
                bytes=moved, gbps=gbps, copy_gbps=peak, fraction_of_peak=gbps / peak)
    benchmark.pedantic(lambda: (fn(*inputs), sync()), rounds=max(3, min(timing.rounds, 50)), iterations=1,
                       warmup_rounds=1)


def test_copy_bandwidth(benchmark, copy_gbps):
    """The ceiling every row is a fraction of: device-to-device copy, bytes read plus written."""
    numel = 2 ** 20
    src = torch.randn(numel, device=DEVICE)
    dst = torch.empty_like(src)
    benchmark.extra_info.update(provider="copy", graph="copy", size=numel, dtype="f32", device=DEVICE, label="peak",
                                copy_gbps=copy_gbps)
    benchmark(lambda: dst.copy_(src))
    assert torch.equal(dst, src)
