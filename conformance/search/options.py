"""``verify()``'s options, checked and recorded: ``resolve_options`` raises ``UsageError`` with one
line for a value out of range or options that do not go together (``ir=torch`` with mutating
graphs, ``dynamic`` outside functional aten graphs, ...), resolves the device (``resolve_device``:
``auto`` is CUDA where this machine has it) and returns the options as the report records them
(callables by their import path or name).
"""

from __future__ import annotations

import torch

from strategies import SIZES, InvalidArgument, check_hops, check_ir, custom_rows, rows_named

from .._errors import UsageError
from ..adapters import reference_of

GRAPH_KINDS = ("functional", "mutating")


def _hops(hops, ir: str, dynamic: bool) -> list:
    """``hops=`` (a list, or names comma-separated) checked as ``graphs(hops=)`` checks it."""
    if hops is None:
        return []
    names = [h.strip() for h in hops.split(",") if h.strip()] if isinstance(hops, str) else hops
    try:
        return list(check_hops(names, ir, dynamic))
    except InvalidArgument as exc:
        raise UsageError(str(exc)) from None


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
    if args["ops"] is not None and (ir == "torch" or args["dynamic"]):
        raise UsageError("ops= shapes drawn aten graphs; ir=torch draws nn.Modules and dynamic=True symbolic "
                         "programs of their own steps")
    if not isinstance(args["dce_pass"], bool):
        raise UsageError(f"dce_pass={args['dce_pass']!r}, but should be True or False")
    if isinstance(args["near_misses"], bool) or not isinstance(args["near_misses"], int) or args["near_misses"] < 0:
        raise UsageError(f"near_misses={args['near_misses']!r}, but should be a number of variants, 0 or more")
    opts_hops = _hops(args["hops"], ir, args["dynamic"])
    device = resolve_device(args["device"])
    keep = ("max_examples", "graphs", "special_values", "constants", "ensure", "preserve", "properties", "signature", "timeout",
            "isolate", "workers", "signed_zeros", "specials", "shrink", "focus", "seed_graphs", "sizes", "requires_grad", "dynamic",
            "dce_pass", "near_misses")
    opts = {k: args[k] for k in keep}
    if args["db"] is not None and not isinstance(args["db"], str):
        raise UsageError(f"db={args['db']!r}, but should be a directory or redis://host:port/N (comma-separated "
                         f"for several)")
    opts["db"], opts["db_readonly"] = args["db"] or None, bool(args["db_readonly"])
    if opts["db_readonly"] and opts["db"] is None:
        raise UsageError("db_readonly=True needs db=PATH or redis://host:port/N: there is no database to read")
    opts["ensure"] = list(args["ensure"] or ())
    opts["preserve"] = list(args["preserve"] or ())
    opts["settings_factory"] = args["settings_factory"] if isinstance(args["settings_factory"], (str, type(None))) \
        else getattr(args["settings_factory"], "__qualname__", "callable")
    opts["device"] = device
    opts["ir"] = ir
    opts["hops"] = opts_hops
    opts["pass_kwargs"] = dict(args["pass_kwargs"] or {})
    opts["context"] = args["context"] if isinstance(args["context"], (str, type(None))) \
        else reference_of(args["context"]) or getattr(args["context"], "__qualname__", "callable")
    if opts["seed_graphs"] is not None and not isinstance(opts["seed_graphs"], str):
        opts["seed_graphs"] = "given"
    opts["ops"] = None  # resolve_ops, once the pass's module (which may register them) is imported
    if not isinstance(opts["focus"], str):
        opts["focus"] = ",".join(getattr(f, "name", str(f)) for f in opts["focus"])
    return opts


def resolve_ops(ops) -> list | None:
    """``ops=`` as the names of the rows it draws (``"aten.add.Tensor"``, ``"mylib.rms_norm.default"``),
    in the order given; a string is comma-separated; UsageError naming what is neither a catalog op
    nor a registered one."""
    if ops is None:
        return None
    items = [o.strip() for o in ops.split(",") if o.strip()] if isinstance(ops, str) else list(ops)
    names, unknown = [], []
    for item in items:
        rows = rows_named(item) or custom_rows(item)
        if not rows:
            unknown.append(str(item))
        names += [row.name for row in rows]
    if unknown:
        raise UsageError(f"ops={','.join(unknown)}: neither a catalog op (aten.add.Tensor, aten.add) nor a registered "
                         f"op (mylib::rms_norm, mylib.rms_norm.default, a namespace mylib: import the module that "
                         f"registers them first)")
    if not names:
        raise UsageError(f"ops={ops!r} is empty; name ops or leave ops out")
    return list(dict.fromkeys(names))


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
