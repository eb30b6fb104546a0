"""Exact index-score values: rationals plus the markers -inf, +inf and NaN, ordered as torch.topk orders them.

A score is a ``Fraction`` or one of three markers. ``NEG_INF`` is how a masked lane is written (outside the
candidate blocks, or past the visible count in the public prefill path); ``POS_INF`` is how a pinned candidate
block is written; ``NAN`` models a poisoned value (for example a warm-up logit). Callers may pass ``int`` as
well; it is converted to ``Fraction``. ``float`` and ``bool`` are refused: the reference is exact.

The ranking order is the one torch.topk and torch.sort use on floating tensors:
``NEG_INF < every rational < POS_INF < NAN``. Rationals compare exactly.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from fractions import Fraction
from typing import Final, TypeAlias


class Special(enum.Enum):
    """The non-rational score markers."""

    NEG_INF = "-inf"
    POS_INF = "+inf"
    NAN = "nan"

    def __repr__(self) -> str:
        return self.name


NEG_INF: Final = Special.NEG_INF
POS_INF: Final = Special.POS_INF
NAN: Final = Special.NAN

Score: TypeAlias = Fraction | Special

# Rank classes: a larger class ranks higher; rationals share class 1 and compare by value.
_CLASS: Final = {Special.NEG_INF: 0, Special.POS_INF: 2, Special.NAN: 3}


def require_score(value: object, argument: str) -> Score:
    """``value`` as a score: an int or Fraction becomes a Fraction; a marker is kept; anything else is refused."""
    if isinstance(value, Special):
        return value
    if isinstance(value, bool) or not isinstance(value, int | Fraction):
        raise TypeError(f"{argument}: must be an int, Fraction, NEG_INF, POS_INF or NAN, got {type(value).__name__}")
    return Fraction(value)


def rank_key(value: Score) -> tuple[int, Fraction]:
    """A key whose natural order is the ranking order (NEG_INF < rationals < POS_INF < NAN)."""
    if isinstance(value, Special):
        return (_CLASS[value], Fraction(0))
    return (1, value)


def is_neg_inf(value: Score) -> bool:
    return value is Special.NEG_INF


def is_nan(value: Score) -> bool:
    return value is Special.NAN


def score_max(values: Iterable[Score]) -> Score:
    """The maximum as ``amax`` computes it on floats: NaN if any value is NaN, ``NEG_INF`` when empty."""
    best: Score = NEG_INF
    for value in values:
        if value is Special.NAN:
            return NAN
        if rank_key(value) > rank_key(best):
            best = value
    return best


def format_score(value: Score) -> str:
    """``6`` for an integral rational, ``3/2`` otherwise, ``-inf``/``+inf``/``nan`` for the markers."""
    if isinstance(value, Special):
        return value.value
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def format_scores(values: Iterable[Score]) -> str:
    """A list of scores written like a Python list of ints: ``[2, 6, 3]``."""
    return "[" + ", ".join(format_score(v) for v in values) + "]"
