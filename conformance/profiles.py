"""Hypothesis profiles, registered in this one place: ``dev``, ``ci`` and ``nightly``.

The pytest plugin imports this module, so ``pytest --hypothesis-profile=ci`` works wherever
fx-conformance is installed. Drawing an FX graph (eager run plus fake-tensor metadata) takes
milliseconds, so the deadline is off and the too_slow health check never aborts a run.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

_COMMON = dict(deadline=None, suppress_health_check=(HealthCheck.too_slow, HealthCheck.data_too_large))

PROFILES = {
    # Local work: quick, random, remembers failures in .hypothesis/.
    "dev": dict(_COMMON, max_examples=50),
    # CI: small and derandomized, so a red run is reproducible from the log alone; no database.
    "ci": dict(_COMMON, max_examples=25, derandomize=True, database=None, print_blob=True),
    # Nightly: large, random, with the example database kept between runs.
    "nightly": dict(_COMMON, max_examples=1000),
}


def register_profiles() -> None:
    """Register every profile in PROFILES with Hypothesis (idempotent)."""
    for name, options in PROFILES.items():
        settings.register_profile(name, **options)


register_profiles()
