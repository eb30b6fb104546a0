"""Hypothesis profiles, chosen by the CSA_PROFILE environment variable.

- ``ci``: derandomized and bounded, so ``make check`` stays within its time budget on 2 cores
  (the default when ``CI`` is set).
- ``dev``: random, a few hundred examples per property (the default otherwise).
- ``deep``: at least 10,000 examples per property (``make fuzz``).
"""

import os

from hypothesis import HealthCheck, settings

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]

settings.register_profile(
    "ci", derandomize=True, max_examples=60, deadline=None, suppress_health_check=_SLOW_OK, print_blob=True
)
settings.register_profile("dev", max_examples=200, deadline=None, suppress_health_check=_SLOW_OK, print_blob=True)
settings.register_profile("deep", max_examples=10_000, deadline=None, suppress_health_check=_SLOW_OK, print_blob=True)

PROFILES = ("ci", "dev", "deep")


def profile_name() -> str:
    name = os.environ.get("CSA_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
    if name not in PROFILES:
        raise ValueError(f"CSA_PROFILE: must be one of {PROFILES}, got {name!r}")
    return name


def load_profile() -> str:
    name = profile_name()
    settings.load_profile(name)
    return name
