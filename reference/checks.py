"""Argument validation shared by the reference: every failure names the argument and the rule it broke."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Final

INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1
INT64_MAX: Final = 2**63 - 1
"""The limits of the int32 and int64 lanes that indices, slots and lengths are stored in."""


def fail(argument: str, rule: str) -> ValueError:
    """The error for an argument that breaks a rule; callers ``raise fail(...)``."""
    return ValueError(f"{argument}: {rule}")


def require(condition: bool, argument: str, rule: str) -> None:
    if not condition:
        raise fail(argument, rule)


def require_int(value: object, argument: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{argument}: must be an int, got {type(value).__name__}")
    return value


def require_positive_int(value: object, argument: str) -> int:
    n = require_int(value, argument)
    require(n > 0, argument, f"must be a positive integer, got {n}")
    return n


def require_nonnegative_int(value: object, argument: str) -> int:
    n = require_int(value, argument)
    require(n >= 0, argument, f"must be >= 0, got {n}")
    return n


def require_exact(value: object, argument: str) -> Fraction:
    """An exact rational: int or Fraction (bool and float are refused)."""
    if isinstance(value, bool) or not isinstance(value, int | Fraction):
        raise TypeError(f"{argument}: must be an int or Fraction, got {type(value).__name__}")
    return Fraction(value)


def require_length(items: Sequence[object], length: int, argument: str, what: str) -> None:
    require(len(items) == length, argument, f"must have length {length} ({what}), got {len(items)}")
