"""Turning kernel source into a Triton function, and launching it.

Kernel modules are written to a per-user cache directory (Triton reads a ``@triton.jit`` function's
source with ``inspect``, so it must live in a file) and imported once per process; the same source
is the same function object.

CPU tensors run under the Triton interpreter. ``TRITON_INTERPRET=1`` must be set before the
decorator runs, and Triton reads it again at launch, so the first CPU kernel sets it for the rest of
the process; a kernel made after that is interpreted on any device (``PointwiseKernel.mode`` says
which). A process that should compile for a GPU must not lower for CPU first.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
import threading
import warnings

import torch

_LOCK = threading.Lock()
_FUNCTIONS: dict = {}


def cache_dir() -> str:
    path = os.environ.get("FX_CONFORMANCE_KERNEL_DIR") or os.path.join(
        tempfile.gettempdir(), f"fx-conformance-kernels-{os.getuid() if hasattr(os, 'getuid') else 'user'}")
    os.makedirs(path, exist_ok=True)
    return path


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def compile_kernel(name: str, source: str, device: torch.device):
    """The ``@triton.jit`` function ``name`` defined by ``source`` (interpreted when ``device`` is a CPU)."""
    with _LOCK:
        if name in _FUNCTIONS:
            return _FUNCTIONS[name]
        if device.type == "cpu":
            os.environ["TRITON_INTERPRET"] = "1"
            # The interpreter computes with numpy, which warns on what IEEE arithmetic does on purpose
            # (log(0), 0/0, lanes past the mask); a GPU gives the same values silently.
            warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"triton\.runtime\.interpreter")
        path = os.path.join(cache_dir(), f"{name}.py")
        if not os.path.exists(path) or open(path).read() != source:
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                f.write(source)
            os.replace(tmp, path)
        module_name = f"fx_conformance_kernels.{name}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
        _FUNCTIONS[name] = getattr(module, name)
        return _FUNCTIONS[name]


# Eager computes and rounds every op on its own, so a fused kernel does too: no contraction of
# ``a * b + c`` into an FMA unless a row asks for ``tl.fma`` (Triton 3.9 warns that its default, on,
# becomes off in 3.10; the choice is made here, not by the version).
FP_FUSION = False


def launch_options(code) -> dict:
    """The launch's constexprs (``XBLOCK``, a tile's ``YBLOCK``) and compile options for a
    ``KernelSource`` (the interpreter ignores the options)."""
    blocks = {"XBLOCK": code.block, **({"YBLOCK": code.tile[2]} if code.tile else {})}
    return {**blocks, "num_warps": code.num_warps, "enable_fp_fusion": FP_FUSION}


def launch(fn, grid: tuple, args: tuple, code) -> None:
    if all(g > 0 for g in grid):
        fn[grid](*args, **launch_options(code))


# --- the FX wrapper node: torch's triton_kernel_wrapper_mutation and its kernel side table ---------

_CONSTANT_ARGS: dict = {}


def side_table_indices(fn, code) -> tuple:
    """``(kernel_idx, constant_args_idx)`` for the wrapper node; the same kernel and launch options give
    the same indices (torch's table appends constant args on every call, which would make lowering
    nondeterministic)."""
    from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table

    options = launch_options(code)
    with _LOCK:
        kernel_idx = kernel_side_table.add_kernel(fn)
        key = (kernel_idx, *sorted(options.items()))
        if kernel_side_table.constant_args.get(_CONSTANT_ARGS.get(key)) != options:
            # first use, or torch._dynamo.reset() emptied the table (graphs lowered before it are stale)
            _CONSTANT_ARGS[key] = kernel_side_table.add_constant_args(options)
        return kernel_idx, _CONSTANT_ARGS[key]
