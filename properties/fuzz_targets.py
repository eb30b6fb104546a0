"""Every (property, implementation) pair of the suite as a module-level Hypothesis test, for HypoFuzz.

``properties/test_suite.py`` runs the same pairs as one parametrized pytest test, which HypoFuzz cannot fuzz (it
drives only functions that are Hypothesis tests themselves). This module is not collected by ``make test`` (its
name does not match ``test_*.py``); ``csa.campaign`` passes it to ``hypothesis fuzz`` explicitly.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from properties.catalog import all_properties
from properties.registry import discover
from properties.runner import applicable, hypothesis_test


def _test_name(prop: str, impl: str) -> str:
    return "test_" + re.sub(r"\W+", "_", f"{prop}__{impl}").strip("_")


TARGETS: dict[str, Callable[[], None]] = {
    _test_name(prop.name, impl.id): hypothesis_test(prop, impl)
    for prop, impl in applicable(all_properties(), discover().find())
}
globals().update(TARGETS)
