"""Hypothesis profiles, chosen by the CSA_PROFILE environment variable.

- ``ci``: derandomized and bounded, so ``make check`` stays within its time budget on 2 cores
  (the default when ``CI`` is set).
- ``dev``: random, a few hundred examples per property (the default otherwise).
- ``deep``: at least 10,000 examples per property (``make fuzz``).
"""

import os

from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

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
    """Load the chosen profile; CSA_DATABASE names a directory example database shared by parallel workers."""
    name = profile_name()
    settings.load_profile(name)
    shared = os.environ.get("CSA_DATABASE")
    if shared:
        settings.register_profile(
            f"{name}-shared", settings.get_profile(name), database=DirectoryBasedExampleDatabase(shared)
        )
        settings.load_profile(f"{name}-shared")
    return name


def pin_worker_gpu() -> None:
    """Under a campaign with CSA_GPUS set, xdist worker gwN sees only GPU N mod CSA_GPUS."""
    worker, gpus = os.environ.get("PYTEST_XDIST_WORKER", ""), os.environ.get("CSA_GPUS")
    if worker.startswith("gw") and gpus and "CUDA_VISIBLE_DEVICES" not in os.environ:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(int(worker[2:]) % int(gpus))
