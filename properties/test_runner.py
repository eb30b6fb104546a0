"""run_property reports the example that failed: a failing explicit example is not hidden behind the explicit
examples Hypothesis runs after it."""

from __future__ import annotations

from properties.cache.frozen import STORED_NAN
from properties.cache.props_store import PROPERTIES
from properties.mutants import register_mutants
from properties.runner import run_property


def test_a_failing_explicit_example_is_the_one_reported() -> None:
    (mutant,) = [m for m in register_mutants().find() if m.name == "store_nan_not_refused"]
    (prop,) = [p for p in PROPERTIES if p.name == "quant_store_matches_reference"]
    assert prop.examples[-1] is STORED_NAN and len(prop.examples) > 1  # others run after it
    outcome = run_property(prop, mutant, max_examples=1, shrink=False, derandomize=True)
    assert not outcome.passed
    assert outcome.example == STORED_NAN
