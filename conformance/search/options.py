"""``verify()``'s options, checked and recorded: ``resolve_options`` raises ``UsageError`` with one
line for a value out of range or options that do not go together (``ir=torch`` with mutating
graphs, ``dynamic`` outside functional aten graphs, ...), resolves the device (``resolve_device``:
``auto`` is CUDA where this machine has it) and returns the options as the report records them
(callables by their import path or name).
"""

from __future__ import annotations

import torch

from strategies import SIZES, InvalidArgument, check_ir

from .._errors import UsageError
from ..adapters import reference_of

GRAPH_KINDS = ("functional", "mutating")


def resolve_options(args: dict) -> dict:
    """``verify()``'s arguments (its ``locals()``) checked, as the report records them."""
    if args["graphs"] not in GRAPH_KINDS:
        raise UsageError(f"graphs={args['graphs']!r}, but should be one of {', '.join(GRAPH_KINDS)}")
    if not isinstance(args["max_examples"], int) or args["max_examples"] < 1:
        raise UsageError(f"max_examples={args['max_examples']!r}, but should be a positive integer")
    if not isinstance(args["workers"], int) or args["workers"] < 1:
        raise UsageError(f"workers={args['workers']!r}, but should be a positive integer")
    try:
        ir = check_ir(args["ir"])
    except InvalidArgument as exc:
        raise UsageError(str(exc)) from None
    if args["sizes"] not in SIZES:
        raise UsageError(f"sizes={args['sizes']!r}, but should be one of {', '.join(SIZES)}")
    if ir == "torch" and (args["graphs"] == "mutating" or args["sizes"] != "small" or args["requires_grad"]):
        raise UsageError("ir=torch draws nn.Modules traced by fx.symbolic_trace: --graphs mutating, --sizes large "
                         "and --requires-grad do not apply (their parameters always require grad)")
    if args["dynamic"] and (ir != "aten" or args["graphs"] == "mutating" or args["sizes"] != "small"
                            or args["requires_grad"]):
        raise UsageError("dynamic=True draws functional aten graphs over symbolic sizes: --ir other than aten, "
                         "--graphs mutating, --sizes large and --requires-grad do not apply")
    if args["requires_grad"] and ir not in ("aten", "pre-dispatch"):
        raise UsageError(f"requires_grad needs ir aten or pre-dispatch, not {ir}: post-grad graphs are inference "
                         f"graphs (traced under no_grad) and export lifts parameters to inputs")
    if args["timeout"] is not None and args["timeout"] <= 0:
        raise UsageError(f"timeout={args['timeout']!r}, but should be a positive number of seconds")
    device = resolve_device(args["device"])
    keep = ("max_examples", "graphs", "special_values", "constants", "ensure", "preserve", "properties", "signature", "timeout",
            "isolate", "workers", "signed_zeros", "specials", "shrink", "focus", "seed_graphs", "sizes", "requires_grad", "dynamic")
    opts = {k: args[k] for k in keep}
    opts["ensure"] = list(args["ensure"] or ())
    opts["preserve"] = list(args["preserve"] or ())
    opts["settings_factory"] = args["settings_factory"] if isinstance(args["settings_factory"], (str, type(None))) \
        else getattr(args["settings_factory"], "__qualname__", "callable")
    opts["device"] = device
    opts["ir"] = ir
    opts["pass_kwargs"] = dict(args["pass_kwargs"] or {})
    opts["context"] = args["context"] if isinstance(args["context"], (str, type(None))) \
        else reference_of(args["context"]) or getattr(args["context"], "__qualname__", "callable")
    if opts["seed_graphs"] is not None and not isinstance(opts["seed_graphs"], str):
        opts["seed_graphs"] = "given"
    if not isinstance(opts["focus"], str):
        opts["focus"] = ",".join(getattr(f, "name", str(f)) for f in opts["focus"])
    return opts


def resolve_device(device: str) -> str:
    """``auto`` (CUDA where this machine has it, else the CPU), ``cpu`` or ``cuda``; UsageError else."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda"):
        raise UsageError(f"device={device!r}, but should be auto, cpu or cuda")
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError("device=cuda, but torch.cuda.is_available() is False on this machine")
    return device


__all__ = ["GRAPH_KINDS", "resolve_device", "resolve_options"]
