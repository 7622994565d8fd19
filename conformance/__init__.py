"""fx-conformance: verify a PyTorch FX graph pass on generated graphs.

>>> from conformance import verify
>>> verify("torch._inductor.fx_passes.post_grad:view_to_reshape", max_examples=5, repro_dir=None).ok
True

Layers: ``adapters`` (any pass form -> one callable), ``invariants`` (graph validity), ``oracle``
(numerics), ``contracts`` (named postconditions), ``checker`` (one graph: ``check()``), ``search``
(``verify()``: a search over generated graphs, shrinking, repro scripts), ``report`` (JSON, JUnit,
Markdown).
"""

import importlib

from ._errors import HarnessError, OriginalFailed, UsageError
from ._result import DEFAULT_PROPERTIES, PROPERTIES, Verdict, VerifyResult, Violation
from .profiles import PROFILES, register_profiles

# The rest imports torch (and the search, Inductor's pattern matcher: 3-5 s) on first use, so that
# the pytest plugin, which every pytest run in an environment holding fx-conformance loads, imports
# no torch unless a run asks for fx-conformance.
_LAZY = {"SIGNATURES": "_signatures", "PassUnderTest": "adapters", "fake_mode_of": "adapters", "load_pass": "adapters",
         "CONTRACTS": "contracts", "register_contract": "contracts", "TOLERANCES": "oracle", "check": "checker",
         "verify": "search", "op_rule": "custom_ops", "custom_health": "custom_ops"}


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted({*globals(), *_LAZY})


__all__ = [
    "CONTRACTS",
    "DEFAULT_PROPERTIES",
    "PROFILES",
    "PROPERTIES",
    "SIGNATURES",
    "TOLERANCES",
    "HarnessError",
    "OriginalFailed",
    "PassUnderTest",
    "UsageError",
    "Verdict",
    "VerifyResult",
    "Violation",
    "check",
    "custom_health",
    "fake_mode_of",
    "load_pass",
    "op_rule",
    "register_contract",
    "register_profiles",
    "verify",
]
