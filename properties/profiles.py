"""Hypothesis profiles, chosen by the CSA_PROFILE environment variable.

- ``ci``: derandomized and bounded, so ``make check`` stays within its time budget on 2 cores
  (the default when ``CI`` is set).
- ``dev``: random, a few hundred examples per property (the default otherwise).
- ``deep``: at least 10,000 examples per property (``make fuzz``).
- ``replay``: only the explicit examples and those saved in the example database (the end of a campaign).
- ``gpu``: derandomized, 20 examples per property (``scripts/gpu_check.sh``'s default): the compiled suite draws
  production shapes, and every new shape compiles new kernel variants, so 60 examples a property would not fit
  the device's time; the interpreted CPU suite runs the ``ci`` profile's 60 over the same logic.
"""

import os

from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]

settings.register_profile(
    "ci", derandomize=True, max_examples=60, deadline=None, suppress_health_check=_SLOW_OK, print_blob=True
)
settings.register_profile("dev", max_examples=200, deadline=None, suppress_health_check=_SLOW_OK, print_blob=True)
settings.register_profile("deep", max_examples=10_000, deadline=None, suppress_health_check=_SLOW_OK, print_blob=True)

settings.register_profile(
    "replay", phases=[Phase.explicit, Phase.reuse], deadline=None, suppress_health_check=_SLOW_OK, print_blob=True
)

settings.register_profile(
    "gpu", derandomize=True, max_examples=20, deadline=None, suppress_health_check=_SLOW_OK, print_blob=True
)

PROFILES = ("ci", "dev", "deep", "replay", "gpu")


def profile_name() -> str:
    name = os.environ.get("CSA_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
    if name not in PROFILES:
        raise ValueError(f"CSA_PROFILE: must be one of {PROFILES}, got {name!r}")
    return name


def example_database(location: str) -> ExampleDatabase:
    """The example database at ``location``: ``redis://host:port/db`` (Hypothesis's Redis database, shared by any
    number of machines) or a directory (shared by the processes of one machine)."""
    if location.startswith(("redis://", "rediss://", "unix://")):
        import redis
        from hypothesis.extra.redis import RedisExampleDatabase

        return RedisExampleDatabase(redis.Redis.from_url(location))
    return DirectoryBasedExampleDatabase(location)


def load_profile() -> str:
    """Load the chosen profile; CSA_DATABASE names an example database shared by parallel workers
    (:func:`example_database`)."""
    name = profile_name()
    settings.load_profile(name)
    shared = os.environ.get("CSA_DATABASE")
    if shared:
        settings.register_profile(f"{name}-shared", settings.get_profile(name), database=example_database(shared))
        settings.load_profile(f"{name}-shared")
    return name
