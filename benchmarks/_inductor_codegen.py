"""Inductor's Triton kernels for a CUDA GPU, generated on a machine without one (nightly only).

``inductor_triton_kernels(gm, example_inputs)`` runs Inductor's real ``compile_fx`` on fake CUDA
tensors with the device queries, dynamo's ``CudaInterface`` and the Triton driver faked as an sm_90
part, records each kernel's final source, and stops before the wrapper module is loaded (that needs a
CUDA build of torch). Loading each source builds Inductor's ``CachingAutotuner`` without compiling,
whose configs and ``_create_compile_meta``/``_create_compile_options`` are exactly what Inductor
passes to ``triton.compile``.

Private torch APIs it depends on (any torch upgrade may break it; it is guarded, never run in CI):
``compile_fx``, ``TritonScheduling._emit_kernel_to_wrapper``, ``GraphLowering._compile_to_module_lines``,
``fx_passes.joint_graph.lazy_init``, ``runtime.triton_helpers.set_driver_to_gpu``,
``CachingAutotuner._create_compile_meta``/``_create_compile_options``, ``CudaInterface``,
``DeviceProperties.create``, ``torch.utils._triton.triton_backend``. Written from a prototype measured
on torch 2.13.0+cpu and triton 3.9.0. Never sets ``TRITON_INTERPRET``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import re
import tempfile
import time
import types
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx
import triton
from triton.backends.compiler import GPUTarget
from triton.backends.driver import DriverBase

KERNEL_DIR = os.path.join(tempfile.gettempdir(), "inductor_src_kernels")


# --------------------------------------------------------------------------- fakes
def _fake_props(cc: int):
    major, minor = divmod(cc, 10)
    return types.SimpleNamespace(
        name="NVIDIA H100 80GB HBM3" if cc == 90 else f"fake sm_{cc}",
        major=major, minor=minor, multi_processor_count=132 if cc == 90 else 108,
        regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048,
        max_threads_per_block=1024, warp_size=32, total_memory=80 * 2**30,
        shared_memory_per_block_optin=232448 if cc >= 90 else 166912,
        shared_memory_per_multiprocessor=233472, L2_cache_size=50 * 2**20, gcnArchName="",
        is_integrated=False, is_multi_gpu_board=False, uuid="fake")


class FakeCudaDriver(DriverBase):
    """Triton driver that claims to be CUDA sm_<cc>; enough for codegen + backend hash."""
    cc = 90

    @classmethod
    def is_active(cls):
        return True

    def map_python_to_cpp_type(self, ty):
        return ty

    def get_current_target(self):
        return GPUTarget("cuda", self.cc, 32)

    def get_active_torch_device(self):
        return torch.device("cuda", 0)

    def get_benchmarker(self):
        raise NotImplementedError("fake driver cannot run kernels")

    def get_current_device(self):
        return 0

    def set_current_device(self, d):
        pass

    def get_current_stream(self, idx=None):
        return 0

    def get_device_capability(self, d=None):
        return divmod(self.cc, 10)


class _Stop(Exception):
    pass


@contextlib.contextmanager
def _patched(obj, name, value):
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


@contextlib.contextmanager
def _codegen_patches(mode: str, cc: int, captured: list):
    import torch._inductor.config as icfg
    import torch.utils._triton as ut
    from torch._dynamo import device_interface as di
    from torch._inductor import graph as ind_graph
    from torch._inductor.codegen.triton import TritonScheduling
    from torch._inductor.fx_passes import joint_graph
    from torch._inductor.runtime import triton_helpers
    from torch._inductor.runtime.hints import DeviceProperties

    props = _fake_props(cc)
    drv = FakeCudaDriver()
    drv.cc = cc
    es = contextlib.ExitStack()
    with es:
        # 1. Triton driver: only needed for torch.utils._triton.triton_hash_with_backend()
        old_active = triton.runtime.driver._active
        triton.runtime.driver.set_active(drv)
        es.callback(lambda: setattr(triton.runtime.driver, "_active", old_active))
        for fn in (ut.triton_backend, ut.triton_hash_with_backend, DeviceProperties.create):
            fn.cache_clear()
            es.callback(fn.cache_clear)
        es.enter_context(_patched(triton_helpers, "set_driver_to_gpu", lambda: None))

        # 2. capture each kernel's final source, stop before loading the wrapper module
        orig_emit = TritonScheduling._emit_kernel_to_wrapper

        def emit(self, wrapper, kernel, src_code, kernel_name, *a, **k):
            captured.append(("kernel", kernel_name, src_code))
            return orig_emit(self, wrapper, kernel, src_code, kernel_name, *a, **k)

        def stop(self, wrapper_code):
            captured.append(("wrapper", "wrapper", wrapper_code.value))
            raise _Stop()

        es.enter_context(_patched(TritonScheduling, "_emit_kernel_to_wrapper", emit))
        es.enter_context(_patched(ind_graph.GraphLowering, "_compile_to_module_lines", stop))
        # no FX-graph / AOTAutograd cache hits (a hit would skip codegen); not
        # force_disable_caches: that makes a fresh tmp cache dir per call and leaks it on _Stop
        es.enter_context(icfg.patch(fx_graph_cache=False, fx_graph_remote_cache=False,
                                    compile_threads=1))
        import torch._functorch.config as fcfg
        es.enter_context(fcfg.patch(enable_autograd_cache=False, enable_remote_autograd_cache=False))

        if mode == "fake_cuda":
            # 3. torch.cuda / dynamo CudaInterface device queries -> fake H100
            cap = divmod(cc, 10)
            for name, val in dict(
                get_device_properties=lambda d=None: props,
                get_device_capability=lambda d=None: cap,
                current_device=lambda: 0, device_count=lambda: 1, set_device=lambda d: None,
                is_bf16_supported=lambda including_emulation=True: True,
            ).items():
                es.enter_context(_patched(torch.cuda, name, val))
            CI = di.CudaInterface
            for name, val in dict(
                get_device_properties=lambda d=None: props, current_device=lambda: 0,
                device_count=lambda: 1, set_device=lambda d: None, is_available=lambda: True,
                is_bf16_supported=lambda including_emulation=True: True,
                get_compute_capability=lambda d=None: cc,
            ).items():
                es.enter_context(_patched(CI, name, staticmethod(val)))
            es.enter_context(_patched(CI.Worker, "get_device_properties", staticmethod(lambda d=None: props)))
            es.enter_context(_patched(CI.Worker, "current_device", staticmethod(lambda: 0)))
            # 4. pattern-matcher init traces tiny *real* tensors on the input device;
            #    the patterns are device-agnostic, so build them on CPU instead.
            orig_li = joint_graph.lazy_init
            es.enter_context(_patched(joint_graph, "lazy_init",
                                      lambda input_device=None, *a, **k: orig_li(torch.device("cpu"))))
        elif mode == "cpu_triton":
            es.enter_context(icfg.patch(cpu_backend="triton"))
            # CPU inputs are otherwise all treated as unaligned (no tt.divisibility on in_ptrs)
            es.enter_context(_patched(ind_graph, "should_assume_input_aligned", lambda ex: True))
        else:
            raise ValueError(mode)
        yield


def _fake_cuda_inputs(example_inputs, fake_mode):
    from torch._subclasses.fake_tensor import FakeTensor
    out = []
    for t in example_inputs:
        if not isinstance(t, torch.Tensor):
            out.append(t)
            continue
        need = t.storage_offset() + sum((s - 1) * st for s, st in zip(t.shape, t.stride())) + 1 if t.numel() else 0
        base = torch.empty(max(need, 0), dtype=t.dtype, device="meta")
        meta = base.as_strided(t.shape, t.stride(), t.storage_offset())
        out.append(FakeTensor(fake_mode, meta, torch.device("cuda", 0)))
    return out


# --------------------------------------------------------------------------- result
@dataclass
class KernelInfo:
    name: str
    source: str                     # exactly the text Inductor passes to async_compile.triton
    path: str                       # file it was written to (JITFunction needs a real file)
    signature: dict[str, str]       # arg -> '*fp32' / 'i32' / 'constexpr'
    attrs: dict                     # {(i,): [['tt.divisibility', 16]], ...}  (triton_meta['configs'][0])
    size_hints: dict[str, int]
    configs: list[dict]             # all candidate launch configs, in Inductor order
    # for each config: {'XBLOCK':..,['YBLOCK':..], 'num_warps':.., 'num_stages':..}
    compile_args: list[dict] = field(default_factory=list)  # per config: constexprs, options, target
    autotuner: Any = None           # CachingAutotuner (fn, triton_meta, inductor_meta)
    launch_args: str | None = None  # the `.run(...)` call in the wrapper (numel values)

    @property
    def launch(self):
        """Config 0 = Inductor's default; the only one when len(configs)==1.  With >1
        candidates Inductor benchmarks at runtime and picks the fastest."""
        return self.configs[0]


def _load_kernel_module(name: str, src: str):
    os.makedirs(KERNEL_DIR, exist_ok=True)
    h = hashlib.sha256(src.encode()).hexdigest()[:16]
    path = os.path.join(KERNEL_DIR, f"{name}_{h}.py")
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write(src)
    spec = importlib.util.spec_from_file_location(f"_ind_{name}_{h}", path)
    mod = importlib.util.module_from_spec(spec)
    from torch._inductor.runtime import triton_helpers
    with _patched(triton_helpers, "set_driver_to_gpu", lambda: None), \
         _patched(triton_helpers, "set_driver_to_cpu", lambda: None):
        spec.loader.exec_module(mod)   # builds a CachingAutotuner; compiles nothing
    return mod, path


def inductor_triton_kernels(gm: fx.GraphModule, example_inputs, *, mode: str = "fake_cuda",
                            cc: int = 90, keep_wrapper: bool = False):
    """Run Inductor codegen for `gm` as if on a CUDA sm_<cc> device; return [KernelInfo]."""
    from torch._inductor.compile_fx import compile_fx
    from torch._subclasses.fake_tensor import FakeTensorMode

    captured: list = []
    t0 = time.time()
    with _codegen_patches(mode, cc, captured):
        try:
            if mode == "fake_cuda":
                fake_mode = FakeTensorMode()
                inputs = _fake_cuda_inputs(example_inputs, fake_mode)
                with fake_mode:
                    compile_fx(gm, inputs)
            else:
                compile_fx(gm, list(example_inputs))
        except Exception as e:  # InductorError wraps _Stop
            if not (isinstance(e, _Stop) or isinstance(getattr(e, "inner_exception", None), _Stop)
                    or "_Stop" in repr(e)):
                raise
        codegen_s = time.time() - t0

        wrapper = next((c[2] for c in captured if c[0] == "wrapper"), "")
        out = []
        for kind, name, src in captured:
            if kind != "kernel":
                continue
            mod, path = _load_kernel_module(name, src)
            at = getattr(mod, name)  # CachingAutotuner
            cfgs, cargs = [], []
            for c in at.configs:
                d = dict(c.kwargs)
                d.update(num_warps=c.num_warps, num_stages=c.num_stages)
                cfgs.append(d)
                cm = at._create_compile_meta(c)
                opts = at._create_compile_options(c, cm)
                cargs.append(dict(constexprs=dict(cm["constants"]), options=opts,
                                  target=("cuda", cm["cc"] if isinstance(cm["cc"], int) else cc, 32)))
            m = re.search(rf"^\s*{re.escape(name)}\.run\((.*)\)\s*$", wrapper, re.M)
            out.append(KernelInfo(
                name=name, source=src, path=path,
                signature=dict(at.triton_meta["signature"]),
                attrs=at.triton_meta["configs"][0] if at.triton_meta.get("configs") else {},
                size_hints=dict(at.size_hints), configs=cfgs, compile_args=cargs, autotuner=at,
                launch_args=m.group(1) if m else None))
    if keep_wrapper:
        return out, wrapper, codegen_s
    return out
