"""Every property on every registered implementation (the reference adapters, the project's fast kernels)."""

from __future__ import annotations

import dataclasses
import os

import pytest
from hypothesis import settings

from properties.catalog import all_properties
from properties.presets import EXAMPLES as PRESETS
from properties.registry import Implementation, discover
from properties.runner import applicable, hypothesis_test

PAIRS = applicable(all_properties(), discover().find())
INTERPRETED_EXAMPLES = 10
"""Examples per property for a Triton kernel under TRITON_INTERPRET=1 (CPU CI): the interpreter checks the
kernel's logic at about a thousandth of its speed; the compiled GPU run uses the profile's full count. The
V4 / V4.1 preset examples of the shape ladders (``properties.presets``: a 1024-lane top-k, 2048 candidate
slots) are replayed on every other implementation and, compiled, on the GPU; interpreted, they would take
minutes."""


def interpreted(impl: Implementation) -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1" and "triton" in impl.name


@pytest.mark.parametrize(("prop", "impl"), PAIRS, ids=[f"{p.name}-{i.id}" for p, i in PAIRS])
def test_property(prop, impl):  # type: ignore[no-untyped-def]
    if interpreted(impl) and prop.name in PRESETS:
        prop = dataclasses.replace(prop, examples=())  # the GPU run replays them compiled
    test = hypothesis_test(prop, impl)
    if interpreted(impl):
        test = settings(settings.default, max_examples=min(settings.default.max_examples, INTERPRETED_EXAMPLES))(test)
    test()


def test_every_property_runs_somewhere() -> None:
    covered = {p.name for p, _ in PAIRS}
    assert covered == {p.name for p in all_properties()}, "a property with no implementation to run on"
