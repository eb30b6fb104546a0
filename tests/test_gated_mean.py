"""reference.gated_mean: the two weightings' checks and arithmetic, one entry point at a time (the compression
tests reach them through whole rows; tests/test_compression.py)."""

from __future__ import annotations

from fractions import Fraction

import sympy

from reference.gated_mean import Weighting, evaluate, gated_mean
from tests.refusals import worded_exactly

R = Weighting.RATIONAL
E = Weighting.EXP


def test_accepted_values_normalize() -> None:
    assert R.score(0, "s") == 0 and type(R.score(3, "s")) is Fraction
    assert R.latent(-5, "v") == -5 and R.ape(1, "a") == 1 and R.ape(Fraction(1, 3), "a") == Fraction(1, 3)
    assert E.score(sympy.S.NegativeInfinity, "s") == sympy.S.NegativeInfinity
    assert E.score(Fraction(1, 2), "s") == sympy.Rational(1, 2) and E.latent(3, "v") == 3
    assert E.ape(sympy.log(2), "a") == sympy.log(2) and E.ape(-2, "a") == -2
    assert (R.absent, R.zero, E.absent, E.zero) == (0, 0, sympy.S.NegativeInfinity, 0)
    assert R.with_ape(Fraction(3), Fraction(2)) == 6 and E.with_ape(sympy.Integer(3), sympy.Integer(2)) == 5
    assert R.with_ape(Fraction(3), None) == 3 and E.weight(sympy.Integer(0)) == 1
    assert E.weight(sympy.S.NegativeInfinity) == 0 and R.weight(Fraction(4)) == 4


def test_means() -> None:
    assert gated_mean([Fraction(1), Fraction(3)], [Fraction(0), Fraction(8)], R) == 6
    got = gated_mean([sympy.Integer(0), sympy.S.NegativeInfinity], [sympy.Integer(5), sympy.Integer(9)], E)
    assert got == 5
    both = gated_mean([sympy.Integer(0), sympy.Integer(1)], [sympy.Integer(0), sympy.Integer(1)], E)
    assert sympy.simplify(both - sympy.E / (1 + sympy.E)) == 0


def test_evaluate_gives_the_digits_asked() -> None:
    assert str(evaluate(Fraction(1, 3))) == "0." + "3" * 30  # 30 significant digits by default
    assert str(evaluate(Fraction(2, 3), 5)) == "0.66667" and str(evaluate(7, 3)) == "7.00"
    assert str(evaluate(sympy.E, 10)) == "2.718281828"


test_every_refusal_is_worded_exactly = worded_exactly(
    [
        (lambda: R.score(0.5, "s"), TypeError, "s: must be an int or Fraction under rational weights, got float"),
        (lambda: R.score(True, "s"), TypeError, "s: must be an int or Fraction under rational weights, got bool"),
        (
            lambda: R.score(-1, "s"),
            ValueError,
            "s: a rational weight must be >= 0 (0 stands for a score of -inf), got -1",
        ),
        (lambda: R.latent(0.5, "v"), TypeError, "v: must be an int or Fraction under rational weights, got float"),
        (lambda: R.ape(0, "a"), ValueError, "a: a rational APE factor must be > 0, got 0"),
        (lambda: R.ape(Fraction(-1, 2), "a"), ValueError, "a: a rational APE factor must be > 0, got -1/2"),
        (lambda: R.ape(1.5, "a"), TypeError, "a: must be an int or Fraction under rational weights, got float"),
        (lambda: E.score(0.5, "s"), TypeError, "s: must be an int, Fraction or exact sympy number, got float"),
        (lambda: E.score(True, "s"), TypeError, "s: must be an int, Fraction or exact sympy number, got bool"),
        (
            lambda: E.score(sympy.Float(1), "s"),
            TypeError,
            "s: must be exact; a sympy Float is a rounded number, got 1.00000000000000",
        ),
        (lambda: E.score(sympy.S.Infinity, "s"), ValueError, "s: must be a finite real number or -oo, got oo"),
        (lambda: E.score(sympy.I, "s"), ValueError, "s: must be a finite real number or -oo, got I"),
        (lambda: E.score(sympy.Symbol("x"), "s"), ValueError, "s: must be a finite real number or -oo, got x"),
        (lambda: E.latent(sympy.S.NegativeInfinity, "v"), ValueError, "v: must be a finite real number, got -oo"),
        (lambda: E.latent("1", "v"), TypeError, "v: must be an int, Fraction or exact sympy number, got str"),
        (lambda: E.ape(sympy.S.NegativeInfinity, "a"), ValueError, "a: must be a finite real number, got -oo"),
        (lambda: E.ape(sympy.S.NaN, "a"), ValueError, "a: must be a finite real number, got nan"),
        (lambda: E.ape(None, "a"), TypeError, "a: must be an int, Fraction or exact sympy number, got NoneType"),
        (lambda: gated_mean([1, 2], [1], R), ValueError, "values: must have one entry per score (2), got 1"),
        (
            lambda: gated_mean([0, 0], [1, 2], R),
            ValueError,
            "scores: at least one entry of a channel must carry weight (a score above -inf)",
        ),
        (
            lambda: gated_mean([sympy.S.NegativeInfinity], [1], E),
            ValueError,
            "scores: at least one entry of a channel must carry weight (a score above -inf)",
        ),
        (lambda: evaluate(1, 0), ValueError, "digits: must be a positive integer, got 0"),
        (lambda: evaluate(0.5), TypeError, "value: must be an int, Fraction or sympy expression, got float"),
        (lambda: evaluate("1"), TypeError, "value: must be an int, Fraction or sympy expression, got str"),
    ]
)
