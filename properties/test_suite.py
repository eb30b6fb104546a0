"""Every property on every registered implementation (the reference adapters, the project's fast kernels)."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

from properties.catalog import all_properties
from properties.registry import Implementation, discover
from properties.runner import applicable, hypothesis_test

PAIRS = applicable(all_properties(), discover().find())
INTERPRETED_EXAMPLES = 10
"""Examples per property for a Triton kernel under TRITON_INTERPRET=1 (CPU CI): the interpreter checks the
kernel's logic at about a thousandth of its speed; the compiled GPU run uses the profile's full count."""


def interpreted(impl: Implementation) -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1" and "triton" in impl.name


@pytest.mark.parametrize(("prop", "impl"), PAIRS, ids=[f"{p.name}-{i.id}" for p, i in PAIRS])
def test_property(prop, impl):  # type: ignore[no-untyped-def]
    test = hypothesis_test(prop, impl)
    if interpreted(impl):
        test = settings(settings.default, max_examples=min(settings.default.max_examples, INTERPRETED_EXAMPLES))(test)
    test()


def test_every_property_runs_somewhere() -> None:
    covered = {p.name for p, _ in PAIRS}
    assert covered == {p.name for p in all_properties()}, "a property with no implementation to run on"
