"""reference.checks: the argument validation every reference function shares. Each failure names the argument
and the rule it broke, in a message matched here word for word; the limits are the int32 / int64 lanes'."""

from __future__ import annotations

from fractions import Fraction

from reference import checks
from tests.refusals import worded_exactly


def test_limits() -> None:
    assert (checks.INT32_MIN, checks.INT32_MAX, checks.INT64_MAX) == (-(2**31), 2**31 - 1, 2**63 - 1)


def test_accepted_values_come_back() -> None:
    assert checks.require_int(-7, "n") == -7 and checks.require_int(0, "n") == 0
    assert checks.require_positive_int(1, "n") == 1 and checks.require_positive_int(2**70, "n") == 2**70
    assert checks.require_nonnegative_int(0, "n") == 0 and checks.require_nonnegative_int(5, "n") == 5
    exact = checks.require_exact(Fraction(3, 4), "x")
    assert exact == Fraction(3, 4) and type(exact) is Fraction
    assert checks.require_exact(-2, "x") == -2 and type(checks.require_exact(-2, "x")) is Fraction
    checks.require(True, "x", "never raised")
    checks.require_length([1, 2], 2, "xs", "two things")
    error = checks.fail("arg", "the rule")
    assert type(error) is ValueError and str(error) == "arg: the rule"


test_every_refusal_is_worded_exactly = worded_exactly(
    [
        (lambda: checks.require(False, "arg", "the rule"), ValueError, "arg: the rule"),
        (lambda: checks.require_int(True, "n"), TypeError, "n: must be an int, got bool"),
        (lambda: checks.require_int(1.0, "n"), TypeError, "n: must be an int, got float"),
        (lambda: checks.require_int("1", "n"), TypeError, "n: must be an int, got str"),
        (lambda: checks.require_int(None, "n"), TypeError, "n: must be an int, got NoneType"),
        (lambda: checks.require_positive_int(0, "n"), ValueError, "n: must be a positive integer, got 0"),
        (lambda: checks.require_positive_int(-3, "n"), ValueError, "n: must be a positive integer, got -3"),
        (lambda: checks.require_positive_int(False, "n"), TypeError, "n: must be an int, got bool"),
        (lambda: checks.require_positive_int(2.0, "n"), TypeError, "n: must be an int, got float"),
        (lambda: checks.require_nonnegative_int(-1, "n"), ValueError, "n: must be >= 0, got -1"),
        (lambda: checks.require_nonnegative_int(True, "n"), TypeError, "n: must be an int, got bool"),
        (lambda: checks.require_nonnegative_int(0.0, "n"), TypeError, "n: must be an int, got float"),
        (lambda: checks.require_exact(True, "x"), TypeError, "x: must be an int or Fraction, got bool"),
        (lambda: checks.require_exact(0.5, "x"), TypeError, "x: must be an int or Fraction, got float"),
        (lambda: checks.require_exact("1/2", "x"), TypeError, "x: must be an int or Fraction, got str"),
        (
            lambda: checks.require_length([1], 2, "xs", "two things"),
            ValueError,
            "xs: must have length 2 (two things), got 1",
        ),
    ]
)
