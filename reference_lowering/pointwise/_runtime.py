"""Turning kernel source into a Triton function, and launching it.

Kernel modules are written to a per-user cache directory (Triton reads a ``@triton.jit`` function's
source with ``inspect``, so it must live in a file) and imported once per process and mode; the same
source in the same mode is the same function object.

Each kernel's mode is chosen by its device, not by the process: CPU tensors run under the Triton
interpreter (``"interpreter"``: the module's ``@triton.jit`` functions made interpreted functions
after import), any other device gets compiled functions (``"compiled"``), so CPU and GPU lowerings
coexist in one process and a GPU kernel can be compiled after a CPU one ran. Nothing here writes
``os.environ``. Where the user set ``TRITON_INTERPRET=1`` themselves, Triton makes every function
interpreted at decoration, and every kernel runs in the interpreter, whatever its device
(``PointwiseKernel.mode`` says so).
"""

from __future__ import annotations

import functools
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
    """``TRITON_INTERPRET=1`` in the environment: Triton interprets every kernel, whatever its device."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def mode_for(device: torch.device) -> str:
    """The mode a kernel for ``device`` runs in: ``"interpreter"`` or ``"compiled"``."""
    return "interpreter" if device.type == "cpu" or interpreting() else "compiled"


def compile_kernel(name: str, source: str, device: torch.device):
    """The ``@triton.jit`` function ``name`` defined by ``source``, in ``mode_for(device)``."""
    mode = mode_for(device)
    with _LOCK:
        if (name, mode) in _FUNCTIONS:
            return _FUNCTIONS[name, mode]
        path = os.path.join(cache_dir(), f"{name}.py")
        if not os.path.exists(path) or open(path).read() != source:
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                f.write(source)
            os.replace(tmp, path)
        module_name = f"fx_conformance_kernels.{mode}.{name}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
        if mode == "interpreter":
            _interpret(module)
        _FUNCTIONS[name, mode] = getattr(module, name)
        return _FUNCTIONS[name, mode]


def _interpret(module) -> None:
    """Make each compiled-mode ``@triton.jit`` function of ``module`` an interpreted one (what the
    decorator makes under ``TRITON_INTERPRET=1``); a kernel finds its helpers in the module, so its
    calls reach the interpreted ones."""
    from triton.runtime.jit import JITFunction

    for attr, value in list(vars(module).items()):
        if isinstance(value, JITFunction):
            setattr(module, attr, _interpreted_function()(value.fn))


@functools.cache
def _interpreted_function() -> type:
    from triton.runtime.interpreter import InterpretedFunction

    class QuietInterpretedFunction(InterpretedFunction):
        """A launch without numpy's warnings on what IEEE arithmetic does on purpose (log(0), 0/0,
        lanes past the mask): the interpreter computes with numpy, a GPU gives the same values
        silently. Scoped to the launch: the host's warning filters stay as they are."""

        def run(self, *args, **kwargs):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                return super().run(*args, **kwargs)

    return QuietInterpretedFunction


def launch(fn, grid: tuple, args: tuple, code) -> None:
    if all(g > 0 for g in grid):
        fn[grid](*args, **launch_options(code))


# Eager computes and rounds every op on its own, so a fused kernel does too: no contraction of
# ``a * b + c`` into an FMA unless a row asks for ``tl.fma`` (Triton 3.9 warns that its default, on,
# becomes off in 3.10; the choice is made here, not by the version).
FP_FUSION = False


def launch_options(code) -> dict:
    """The launch's constexprs (``XBLOCK``, a tile's ``YBLOCK``) and compile options for a
    ``KernelSource`` (the interpreter ignores the options)."""
    blocks = {"XBLOCK": code.block, **({"YBLOCK": code.tile[2]} if code.tile else {})}
    return {**blocks, "num_warps": code.num_warps, "enable_fp_fusion": FP_FUSION}


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
