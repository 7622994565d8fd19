"""The fx-conformance harness: profiles, the conformance run, CLI and pytest plugin.

Later layers (adapters, verify, oracle, repro scripts, prover) add to this package; the public
API stays a short re-export list here.
"""

from ._errors import HarnessError, UsageError
from .profiles import PROFILES, register_profiles

__all__ = ["PROFILES", "HarnessError", "UsageError", "register_profiles"]
