"""Every property on every registered implementation (the reference adapters, the project's fast kernels)."""

from __future__ import annotations

import pytest

from properties.catalog import all_properties
from properties.registry import discover
from properties.runner import applicable, hypothesis_test

PAIRS = applicable(all_properties(), discover().find())


@pytest.mark.parametrize(("prop", "impl"), PAIRS, ids=[f"{p.name}-{i.id}" for p, i in PAIRS])
def test_property(prop, impl):  # type: ignore[no-untyped-def]
    hypothesis_test(prop, impl)()


def test_every_property_runs_somewhere() -> None:
    covered = {p.name for p, _ in PAIRS}
    assert covered == {p.name for p in all_properties()}, "a property with no implementation to run on"
