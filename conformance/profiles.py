"""Hypothesis profiles, registered in this one place: ``fx-dev``, ``fx-ci`` and ``fx-nightly``.

The pytest plugin imports this module, so ``pytest --hypothesis-profile=fx-ci`` works wherever
fx-conformance is installed. The names are our own: Hypothesis registers a profile named ``ci`` and
loads it by itself when ``CI`` is set, so a ``ci`` of ours would change every other project's
Hypothesis tests in the same environment (25 examples on CI instead of 100). Registering a profile
loads nothing. ``fx-conformance run --profile`` takes the short names (``dev``, ``ci``,
``nightly``). Drawing an FX graph (eager run plus fake-tensor metadata) takes milliseconds, so the
deadline is off and the too_slow health check never aborts a run.

Each profile is built on Hypothesis's ``default`` profile, not on the profile loaded when this module
is imported: with ``CI`` set that is Hypothesis's ``ci`` (derandomized, no database), under which
``fx-dev`` and ``fx-nightly`` drew the same graphs at every seed and kept no database on a CI machine.
A profile of ours means the same on every machine.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

_COMMON = dict(deadline=None, suppress_health_check=(HealthCheck.too_slow, HealthCheck.data_too_large))

PROFILES = {
    # Local work: quick, random, remembers failures in .hypothesis/.
    "fx-dev": dict(_COMMON, max_examples=50),
    # CI: small and derandomized, so a red run is reproducible from the log alone; no database.
    "fx-ci": dict(_COMMON, max_examples=25, derandomize=True, database=None, print_blob=True),
    # Nightly: large, random, with the example database kept between runs.
    "fx-nightly": dict(_COMMON, max_examples=1000),
}


def profile_name(name: str) -> str:
    """The registered name of a profile given by its short name (``ci`` -> ``fx-ci``) or its own."""
    return name if name in PROFILES else f"fx-{name}"


def register_profiles() -> None:
    """Register every profile in PROFILES with Hypothesis (idempotent; loads none)."""
    base = settings.get_profile("default")
    for name, options in PROFILES.items():
        settings.register_profile(name, parent=base, **options)


register_profiles()
