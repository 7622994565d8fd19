"""fx-conformance: verify a PyTorch FX graph pass on generated graphs.

>>> from conformance import verify
>>> verify("torch._inductor.fx_passes.post_grad:view_to_reshape", max_examples=5, repro_dir=None).ok
True

Layers: ``adapters`` (any pass form -> one callable), ``invariants`` (graph validity), ``oracle``
(numerics), ``contracts`` (named postconditions), ``verify`` (one graph), ``verify()`` (a search
over generated graphs, shrinking, repro scripts), ``report`` (JSON, JUnit, Markdown).
"""

from ._errors import HarnessError, OriginalFailed, UsageError
from ._result import DEFAULT_PROPERTIES, PROPERTIES, Verdict, VerifyResult, Violation
from .search import verify
from .adapters import SIGNATURES, PassUnderTest, fake_mode_of, load_pass
from .contracts import CONTRACTS, register_contract
from .oracle import TOLERANCES
from .profiles import PROFILES, register_profiles
from .verify import check

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
    "fake_mode_of",
    "load_pass",
    "register_contract",
    "register_profiles",
    "verify",
]
