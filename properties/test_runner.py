"""run_property reports the example that failed: a failing explicit example is not hidden behind the explicit
examples Hypothesis runs after it; every distinct failure comes with its own example; ``shrink_seconds`` bounds
shrinking."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

from properties.cache.frozen import STORED_NAN
from properties.cache.props_store import PROPERTIES
from properties.mutants import register_mutants
from properties.registry import Implementation
from properties.runner import Property, run_property


def test_a_failing_explicit_example_is_the_one_reported() -> None:
    (mutant,) = [m for m in register_mutants().find() if m.name == "store_nan_not_refused"]
    (prop,) = [p for p in PROPERTIES if p.name == "quant_store_refuses_bad_rows"]
    assert prop.examples[-1] is STORED_NAN and len(prop.examples) > 1  # others run after it
    outcome = run_property(prop, mutant, max_examples=1, shrink=False, derandomize=True)
    assert not outcome.passed
    assert outcome.example == STORED_NAN


def _broken_topk() -> Implementation:
    import pathlib

    from properties.registry import load_callable

    path = pathlib.Path(__file__).resolve().parents[1] / "examples" / "broken_topk.py"
    return Implementation("topk", "user", load_callable(f"{path}:topk"), "v4.1", origin="user")


def test_each_failure_comes_with_the_example_that_raised_it() -> None:
    """broken_topk fails several frozen examples of topk_equals_reference, each with its own lanes: the example
    reported is the one whose check raised the message reported (not the last example that failed)."""
    from properties.catalog import properties_for

    impl = _broken_topk()
    (prop,) = [p for p in properties_for("topk") if p.name == "topk_equals_reference"]
    failing = []
    for frozen in prop.examples:
        try:
            prop.check(impl, frozen)
        except AssertionError as err:
            failing.append((frozen, str(err)))
    assert len({message for _, message in failing}) >= 2  # several replayed examples fail, differently
    outcome = run_property(prop, impl, max_examples=5, seed=0)
    assert not outcome.passed and len(outcome.failures) == 1
    (failure,) = outcome.failures
    assert (failure.example, str(failure.error)) in failing
    assert outcome.example is failure.example and outcome.error is failure.error


def test_distinct_failures_are_each_reported_with_their_example() -> None:
    def check(impl: Implementation, x: int) -> None:
        if x == 3:
            raise ValueError("three")
        if x == 5:
            raise AssertionError("five")

    prop = Property("distinct", "topk", st.integers(0, 1), check, examples=(3, 5, 1))
    impl = Implementation("topk", "user", lambda *a, **k: None, "v4.1", origin="user")
    outcome = run_property(prop, impl, max_examples=2, seed=0)
    found = sorted((f.example, type(f.error).__name__, str(f.error)) for f in outcome.failures)
    assert found == [(3, "ValueError", "three"), (5, "AssertionError", "five")]


def test_shrink_seconds_bounds_shrinking_and_says_so() -> None:
    def check(impl: Implementation, x: int) -> None:
        assert x < 1000, "too big"

    prop = Property("shrinks", "topk", st.integers(0, 10**9), check)
    impl = Implementation("topk", "user", lambda *a, **k: None, "v4.1", origin="user")
    full = run_property(prop, impl, max_examples=100, seed=0)
    assert full.example == 1000 and not full.shrink_cut
    cut = run_property(prop, impl, max_examples=100, seed=0, shrink_seconds=0)
    assert cut.shrink_cut and cut.example >= 1000 and cut.examples < full.examples
    with pytest.raises(AssertionError, match="too big"):
        check(impl, cut.example)  # the example reported still fails
