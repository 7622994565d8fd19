"""``DeviceSupport``: what one device runs, as refusals per catalog row, and the CPU's table.

A graph drawn for a device holds only what that device runs: every node of it is computed there as
it is drawn (``_build/device.py``), so whatever the device refuses (CUDA has no integer ``mm``, the
CPU no ``_scaled_dot_product_efficient_attention``) is rejected while the graph is drawn; on top of
that a ``DeviceSupport`` table says, per catalog row, the dtypes the device runs, and which operand
dtype combinations of a call it refused, so the generator does not waste its steps on them:

- the CPU's table is the catalog itself (every listed dtype is measured on the CPU by
  tests/test_catalog.py), less the rows the dispatcher has no CPU kernel for (``cpu_support``);
- any other device's table is learned from the device (``_draw/probe.py``) and cached, never
  hard-coded from one GPU.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

import torch

from .._build.device import has_kernel, op_name, signature
from .._catalog.ops import OPS
from .._catalog import vocabulary as C
from .._catalog.vocabulary import MASK


SCHEMA = 1


def primary_dtype(args, kwargs, out=None, target=None) -> str | None:
    """The dtype a catalog row's ``dtypes`` describe for this call: its first tensor operand's after
    the bool masks the row of ``target`` opens with (``where.self``'s condition), or for a factory
    (no tensor operand) its result's (``dtype=``, else the default dtype)."""
    sig = signature(tuple(args)[_leading_masks(target):], {})
    if sig:
        return sig[0]
    if isinstance(out, torch.Tensor):
        return str(out.dtype).removeprefix("torch.")
    dtype = kwargs.get("dtype") if isinstance(kwargs, dict) else None
    return str(dtype or torch.get_default_dtype()).removeprefix("torch.")


@functools.lru_cache(maxsize=None)
def _leading_masks(target) -> int:
    """How many bool mask operands open a call of ``target``'s catalog row (0 for any other)."""
    row = next((r for r in OPS if r.overload is target), None)
    if row is None or row.draws_whole_call:
        return 0
    return next((i for i, kind in enumerate(row.args) if kind != MASK), 0)


@dataclass(frozen=True)
class DeviceSupport:
    """What one device runs, as refusals: ``refused_dtypes`` maps a row name to the dtypes (of the
    operand the row's dtypes describe) it never ran at, with the error; ``refused_calls`` maps an
    ``(op name, signature)`` to the error of a call the device refused where the CPU ran it (mixed
    dtypes: a float16 ``native_layer_norm`` with float32 weights). Rows absent run at every listed
    dtype. ``rows`` (when not None) are the only rows the device has kernels for."""

    device: str  # the device type: "cpu", "cuda"
    name: str  # "cpu", or the GPU's name: the cache key with the torch version
    torch_version: str
    source: str  # "catalog", "probe" or a recorded table's description
    refused_dtypes: dict = field(default_factory=dict)  # row name -> {dtype name: error}
    refused_calls: dict = field(default_factory=dict)  # (op name, signature) -> error
    rows: frozenset | None = None  # names of the rows the device has kernels for (None: every row)

    def runs_row(self, row) -> bool:
        if row.category == C.CUSTOM:  # a user's op says itself what it runs (its calls are tried)
            return True
        return (self.rows is None or row.name in self.rows) and bool(self.dtypes_of(row))

    def dtypes_of(self, row) -> frozenset:
        refused = self.refused_dtypes.get(row.name, {})
        return frozenset(d for d in row.dtypes if str(d).removeprefix("torch.") not in refused)

    def narrow(self, rows) -> tuple:
        """``rows`` the device runs, each with only the dtypes it runs."""
        out = []
        for row in rows:
            if not self.runs_row(row):
                continue
            dtypes = self.dtypes_of(row)
            out.append(row if dtypes == row.dtypes else replace(row, dtypes=dtypes))
        return tuple(out)

    def refusal(self, target, args, kwargs) -> str | None:
        """Why the device does not run this call (None: it may)."""
        name = op_name(target)
        if self.refused_calls:  # the signature walk only where a refused call could match (the CPU has none)
            sig = signature(args, kwargs)
            if (name, sig) in self.refused_calls:
                return f"{self.device} refuses {name}{sig}: {self.refused_calls[name, sig]}"
        refused = self.refused_dtypes.get(name)
        if refused:
            dtype = primary_dtype(args, kwargs, target=target)
            if dtype in refused:
                return f"{self.device} refuses {name} on {dtype}: {refused[dtype]}"
        if self.rows is not None and name not in self.rows and name in _catalog_names():
            return f"{self.device} has no kernel for {name}"
        return None

    def to_json(self) -> dict:
        return {"schema": SCHEMA, "device": self.device, "name": self.name, "torch": self.torch_version,
                "source": self.source, "refused_dtypes": self.refused_dtypes,
                "refused_calls": [{"op": op, "dtypes": list(sig), "error": err}
                                  for (op, sig), err in sorted(self.refused_calls.items())],
                "rows": None if self.rows is None else sorted(self.rows)}

    @classmethod
    def from_json(cls, data: dict) -> DeviceSupport:
        if data.get("schema") != SCHEMA:
            raise ValueError(f"schema={data.get('schema')!r}, but should be {SCHEMA}")
        return cls(device=data["device"], name=data["name"], torch_version=data["torch"], source=data["source"],
                   refused_dtypes={k: dict(v) for k, v in data["refused_dtypes"].items()},
                   refused_calls={(c["op"], tuple(c["dtypes"])): c["error"] for c in data["refused_calls"]},
                   rows=None if data.get("rows") is None else frozenset(data["rows"]))


@functools.lru_cache(maxsize=1)
def _catalog_names() -> frozenset:
    return frozenset(row.name for row in OPS)


@functools.lru_cache(maxsize=1)
def cpu_support() -> DeviceSupport:
    return DeviceSupport("cpu", "cpu", torch.__version__, "catalog",
                         rows=frozenset(row.name for row in OPS if has_kernel(row.overload, "cpu")))
