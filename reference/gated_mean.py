"""The per-channel gated mean of a group, exactly, under two weightings (docs/compression.md).

For one latent channel the compressed value of a group is ``sum_t w_t v_t / sum_t w_t``, where ``v_t`` is the
latent of entry ``t`` and ``w_t = exp(s_t + ape_t)`` its weight (a softmax over the group's entries).

``Weighting.RATIONAL`` is the lab's stand-in for the exponential: a score *is* a nonnegative rational weight and
an APE entry a positive rational factor (``exp(s + a) = exp(s) exp(a)``); results are Fractions.
``Weighting.EXP`` keeps the exponential exact with sympy: ``exp(s + a)``, a score of ``-oo`` gives weight 0, and
results are exact sympy expressions. ``evaluate`` turns one into a decimal of a chosen number of digits for
comparison with floating kernels. In both, the score that carries no weight (``absent``) is what an unwritten
state slot holds: ``-oo`` under EXP, 0 under RATIONAL.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import sympy

from reference.checks import fail, require, require_positive_int

Scalar = Any
"""An exact input number: int, Fraction, or (EXP weighting only) an exact real sympy expression."""
Value = Any
"""An exact result: Fraction under RATIONAL weighting, a sympy expression under EXP weighting."""


def _to_sympy(value: int | Fraction) -> Any:
    return sympy.Rational(value.numerator, value.denominator)


def _rational(value: object, argument: str) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, int | Fraction):
        raise TypeError(f"{argument}: must be an int or Fraction under rational weights, got {type(value).__name__}")
    return Fraction(value)


def _exact_real(value: object, argument: str, allow_minus_infinity: bool) -> Any:
    """An int, Fraction or sympy expression that is a concrete real number (no sympy Float inside)."""
    if isinstance(value, bool) or not isinstance(value, int | Fraction | sympy.Basic):
        raise TypeError(f"{argument}: must be an int, Fraction or exact sympy number, got {type(value).__name__}")
    if isinstance(value, int | Fraction):
        return _to_sympy(value)
    if value.has(sympy.Float):
        raise TypeError(f"{argument}: must be exact; a sympy Float is a rounded number, got {value}")
    if allow_minus_infinity and value == sympy.S.NegativeInfinity:
        return value
    require(
        bool(value.is_number) and value.is_extended_real is True and value.is_finite is True,
        argument,
        f"must be a finite real number{' or -oo' if allow_minus_infinity else ''}, got {value}",
    )
    return value


class Weighting(enum.Enum):
    """How a score becomes a weight (see the module docstring)."""

    RATIONAL = "rational"
    EXP = "exp"

    @property
    def absent(self) -> Scalar:
        """The score of an entry with weight 0 (an unwritten state slot): 0, or -oo under EXP."""
        return Fraction(0) if self is Weighting.RATIONAL else sympy.S.NegativeInfinity

    @property
    def zero(self) -> Value:
        """The zero output value (placeholder and non-completing rows)."""
        return Fraction(0) if self is Weighting.RATIONAL else sympy.S.Zero

    def score(self, value: object, argument: str) -> Scalar:
        """Check and normalize one score."""
        if self is Weighting.RATIONAL:
            weight = _rational(value, argument)
            require(
                weight >= 0, argument, f"a rational weight must be >= 0 (0 stands for a score of -inf), got {weight}"
            )
            return weight
        return _exact_real(value, argument, allow_minus_infinity=True)

    def latent(self, value: object, argument: str) -> Scalar:
        """Check and normalize one latent value."""
        if self is Weighting.RATIONAL:
            return _rational(value, argument)
        return _exact_real(value, argument, allow_minus_infinity=False)

    def ape(self, value: object, argument: str) -> Scalar:
        """Check and normalize one APE entry: a positive factor under RATIONAL, a finite real under EXP."""
        if self is Weighting.RATIONAL:
            factor = _rational(value, argument)
            require(factor > 0, argument, f"a rational APE factor must be > 0, got {factor}")
            return factor
        return _exact_real(value, argument, allow_minus_infinity=False)

    def with_ape(self, score: Scalar, ape: Scalar | None) -> Scalar:
        """The score after APE: ``score + ape`` (EXP), ``score * ape`` (RATIONAL); unchanged without APE."""
        if ape is None:
            return score
        return score * ape if self is Weighting.RATIONAL else score + ape

    def weight(self, score: Scalar) -> Value:
        """The weight of a (normalized, APE-applied) score."""
        if self is Weighting.RATIONAL:
            return score
        return sympy.S.Zero if score == sympy.S.NegativeInfinity else sympy.exp(score)


def gated_mean(scores: Sequence[Scalar], values: Sequence[Scalar], weighting: Weighting) -> Value:
    """``sum w_t v_t / sum w_t`` over one channel's entries, exactly.

    scores: normalized, APE-applied scores (``Weighting.score`` / ``with_ape``), one per entry.
    values: normalized latents, one per entry, in the same order.
    Raises ValueError naming ``scores`` when every weight is zero (every score -oo): the mean is undefined.
    """
    require(len(scores) == len(values), "values", f"must have one entry per score ({len(scores)}), got {len(values)}")
    weights = [weighting.weight(s) for s in scores]
    if all(w == 0 for w in weights):
        raise fail("scores", "at least one entry of a channel must carry weight (a score above -inf)")
    if weighting is Weighting.RATIONAL:
        return Fraction(sum(w * v for w, v in zip(weights, values, strict=True))) / sum(weights)
    numerator = sympy.Add(*(w * v for w, v in zip(weights, values, strict=True)))
    return numerator / sympy.Add(*weights)


def evaluate(value: Value, digits: int = 30) -> Any:
    """An exact result as a sympy decimal correct to ``digits`` significant digits.

    sympy's ``evalf`` (mpmath underneath) raises its working precision until the requested digits are certain,
    so the decimal is a correctly bounded reference for a floating kernel (30 digits is far beyond FP32/FP64).
    """
    require_positive_int(digits, "digits")
    if isinstance(value, bool) or not isinstance(value, int | Fraction | sympy.Basic):
        raise TypeError(f"value: must be an int, Fraction or sympy expression, got {type(value).__name__}")
    exact = _to_sympy(value) if isinstance(value, int | Fraction) else value
    return sympy.N(exact, digits)
