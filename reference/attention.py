"""Sparse MQA attention with a sink over selected lanes, evaluated to 50 significant digits.

For one query row, head ``h`` and the multiset ``J`` of valid lanes (duplicates counted every time they
appear, as the public kernels do)::

    s_j   = scale * q_h . k_j                          (exact rational)
    out_h = sum_j e^{s_j} v_j / (e^{sink_h} + sum_j e^{s_j})
    lse_h = ln sum_j e^{s_j}                           (the sink is not part of lse)

The exponential is transcendental, so the output cannot be an exact rational. It is evaluated with
mpmath at ``DIGITS = 50`` significant decimal digits (about 166 bits) after subtracting the exact row
maximum; the error is far below fp32 and float64 resolution, and each value is returned as the exact
Fraction of the 50-digit number. Valid lanes are summed in ascending index order, so the result does not
depend on the order of lanes in the row, bit for bit.

A sink far from the row maximum ``m`` is bounded, never expanded (any float32 sink, up to +-3.4e38, answers at
once): with ``g = sink - m`` exact and ``T = sum_j e^{s_j - m}`` in ``[1, K]``,

* ``g <= -SINK_NEGLIGIBLE_BITS ln 2``: ``e^g / T < 2^-200``, below the 50-digit evaluation's own error, so the
  sink term is left out of the denominator;
* ``g >= (VANISHING_BITS + log2(K max|v|)) ln 2``: every ``|out| < K max|v| e^{-g} <= 2^-1100``, which rounds to
  zero in float64 and float32 alike, so ``out`` is 0 (``ln 2`` is bounded above by the rational ``LN2_ABOVE``).

Between the two the sink term is evaluated as any other exponential.

Conventions (docs/attention.md):

* invalid lanes, ``invalid``: ``"minus_one_only"``: only -1 is invalid, any other negative lane or a
  lane ``>= kv length`` is a ``ValueError`` (such a lane would be a wrong read, never a skip);
  ``"out_of_range"``: every lane ``< 0`` or ``>= kv length`` is invalid and skipped;
* a row with no valid lane, ``empty_row``: ``"zero"``: output 0 and lse ``+inf``;
  ``"nan"``: output NaN and lse NaN, what the public PyTorch reference computes (-inf minus -inf);
* sink per head: a rational, or ``None`` / ``NEG_INF`` for no sink, or ``POS_INF`` (output 0); the
  markers are those of ``reference.score_values``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import mpmath

from reference.checks import fail, require, require_exact, require_int
from reference.score_values import NAN, NEG_INF, POS_INF, Special

__all__ = [
    "DIGITS",
    "LN2_ABOVE",
    "NAN",
    "NEG_INF",
    "POS_INF",
    "SINK_NEGLIGIBLE_BITS",
    "VANISHING_BITS",
    "EmptyRow",
    "HeadResult",
    "InvalidLanes",
    "LaneRules",
    "Sink",
    "Special",
    "Value",
    "sparse_attention",
    "valid_lanes",
]

DIGITS = 50
LN2_ABOVE = Fraction(6932, 10000)
"""A rational above ln 2 (0.693147...): ``e^{-g} < 2^{-g / LN2_ABOVE}`` for ``g > 0`` and
``e^{g} < 2^{g / LN2_ABOVE}`` for ``g < 0``."""
SINK_NEGLIGIBLE_BITS = 200
"""A sink ``2^200`` times below the row's sum of weights (which is at least 1) is left out of the denominator."""
VANISHING_BITS = 1100
"""An output provably below ``2^-1100`` in magnitude is returned as 0: it rounds to zero in float64 (whose
smallest subnormal is ``2^-1074``) and in float32."""

Value = Fraction | Special
InvalidLanes = Literal["minus_one_only", "out_of_range"]
EmptyRow = Literal["zero", "nan"]
Sink = int | Fraction | Special | None


@dataclass(frozen=True)
class LaneRules:
    """The two choices of a sparse-attention convention: which lanes are skipped, and what a row with none
    left returns."""

    invalid: InvalidLanes
    empty_row: EmptyRow


@dataclass(frozen=True)
class HeadResult:
    """One head's output vector (``value_dim`` entries) and log-sum-exp."""

    out: tuple[Value, ...]
    lse: Value


def valid_lanes(lanes: Sequence[int], kv_length: int, invalid: InvalidLanes) -> tuple[int, ...]:
    """The valid lanes of a row, ascending, duplicates kept."""
    require(kv_length >= 0, "kv_length", f"must be >= 0, got {kv_length}")
    kept = []
    for i, lane in enumerate(lanes):
        index = require_int(lane, f"lanes[{i}]")
        if invalid == "out_of_range":
            if 0 <= index < kv_length:
                kept.append(index)
        elif invalid == "minus_one_only":
            if index == -1:
                continue
            require(
                index >= 0,
                f"lanes[{i}]",
                f"{index} is negative but not -1; under minus_one_only only -1 marks an invalid lane",
            )
            require(
                index < kv_length,
                f"lanes[{i}]",
                f"{index} >= kv length {kv_length}; under minus_one_only that lane would be an out-of-bounds read",
            )
            kept.append(index)
        else:
            raise fail("invalid", f"must be 'minus_one_only' or 'out_of_range', got {invalid!r}")
    return tuple(sorted(kept))


def _to_mpf(x: Fraction) -> mpmath.mpf:
    return mpmath.mpf(x.numerator) / x.denominator


def _to_fraction(x: mpmath.mpf) -> Fraction:
    mantissa, exponent = x.man_exp
    magnitude = Fraction(int(mantissa)) * (Fraction(2) ** int(exponent))
    return -magnitude if x < 0 else magnitude


def _dot(a: Sequence[Fraction], b: Sequence[Fraction]) -> Fraction:
    return sum((x * y for x, y in zip(a, b, strict=True)), Fraction(0))


def _exact_rows(rows: Sequence[Sequence[int | Fraction]], name: str, width: int | None) -> list[list[Fraction]]:
    out = []
    for r, row in enumerate(rows):
        if width is not None:
            require(len(row) == width, f"{name}[{r}]", f"must have {width} entries, got {len(row)}")
        out.append([require_exact(v, f"{name}[{r}][{c}]") for c, v in enumerate(row)])
    return out


def sink_share(sink: Sink, top: Fraction, lanes: int, largest_value: Fraction) -> Literal["none", "evaluated", "all"]:
    """How the sink enters a head's denominator, bounded without expanding ``e^{sink - top}`` (module docstring):
    ``"none"`` (no sink, or one below ``2^-SINK_NEGLIGIBLE_BITS`` of the sum of weights), ``"all"`` (``+inf``, or
    one so far above that every output is below ``2^-VANISHING_BITS``: out is 0), ``"evaluated"`` otherwise.
    ``top`` is the row maximum, ``lanes`` the valid lanes (the sum of weights is in ``[1, lanes]``),
    ``largest_value`` the largest ``|v|`` they read."""
    if sink is None or sink is NEG_INF:
        return "none"
    if sink is POS_INF:
        return "all"
    if not isinstance(sink, Fraction):
        raise fail("sink", f"must be a Fraction, None or a marker, got {sink!r}")
    gap = sink - top
    if gap <= -SINK_NEGLIGIBLE_BITS * LN2_ABOVE:
        return "none"
    bound = lanes * largest_value
    if bound == 0 or gap >= (VANISHING_BITS + _ceil_log2(bound)) * LN2_ABOVE:
        return "all" if gap > 0 else "evaluated"
    return "evaluated"


def _ceil_log2(x: Fraction) -> int:
    """An integer ``>= log2(x)`` for ``x > 0`` (the bit length of its ceiling)."""
    return (-(-x.numerator // x.denominator)).bit_length()


def _empty(value_dim: int, empty_row: EmptyRow) -> HeadResult:
    if empty_row == "zero":
        return HeadResult(tuple(Fraction(0) for _ in range(value_dim)), POS_INF)
    if empty_row == "nan":
        return HeadResult(tuple(NAN for _ in range(value_dim)), NAN)
    raise fail("empty_row", f"must be 'zero' or 'nan', got {empty_row!r}")


def sparse_attention(
    q: Sequence[Sequence[int | Fraction]],
    keys: Sequence[Sequence[int | Fraction]],
    lanes: Sequence[int],
    *,
    scale: int | Fraction,
    sinks: Sequence[Sink],
    values: Sequence[Sequence[int | Fraction]] | None = None,
    invalid: InvalidLanes = "minus_one_only",
    empty_row: EmptyRow = "zero",
) -> tuple[HeadResult, ...]:
    """Attention of one query row (``q``: heads x d) over the lanes' rows of ``keys`` (kv length x d).

    ``values`` (kv length x value_dim) defaults to ``keys``: the MQA cache row is both key and value.
    ``sinks`` has one entry per head.
    """
    require(len(q) > 0, "q", "must have at least one head")
    dim = len(q[0])
    q_exact = _exact_rows(q, "q", dim)
    k_exact = _exact_rows(keys, "keys", dim)
    v_exact = k_exact if values is None else _exact_rows(values, "values", None)
    require(len(v_exact) == len(k_exact), "values", f"must have {len(k_exact)} rows, got {len(v_exact)}")
    value_dim = len(v_exact[0]) if v_exact else dim
    require(all(len(v) == value_dim for v in v_exact), "values", "rows must all have the same length")
    require(len(sinks) == len(q), "sinks", f"must have one entry per head ({len(q)}), got {len(sinks)}")
    s = require_exact(scale, "scale")
    chosen = valid_lanes(lanes, len(k_exact), invalid)
    if empty_row not in ("zero", "nan"):
        raise fail("empty_row", f"must be 'zero' or 'nan', got {empty_row!r}")
    results = []
    for h, q_row in enumerate(q_exact):
        sink = sinks[h]
        if sink is not None and not isinstance(sink, Special):
            sink = require_exact(sink, f"sinks[{h}]")
        if sink is NAN:
            raise fail(f"sinks[{h}]", "a NaN sink has no defined result")
        if not chosen:
            results.append(_empty(value_dim, empty_row))
            continue
        scores = [s * _dot(q_row, k_exact[j]) for j in chosen]
        top = max(scores)
        share = sink_share(
            sink,
            top,
            len(chosen),
            max((abs(v_exact[j][d]) for j in chosen for d in range(value_dim)), default=Fraction(0)),
        )
        with mpmath.workdps(DIGITS):
            weights = [mpmath.exp(_to_mpf(score - top)) for score in scores]
            total = mpmath.fsum(weights)
            lse = _to_mpf(top) + mpmath.log(total)
            if share == "all":
                out: tuple[Value, ...] = tuple(Fraction(0) for _ in range(value_dim))
            else:
                denominator = total
                if share == "evaluated":
                    assert isinstance(sink, Fraction)
                    denominator = total + mpmath.exp(_to_mpf(sink - top))
                out = tuple(
                    _to_fraction(
                        mpmath.fsum(w * _to_mpf(v_exact[j][d]) for w, j in zip(weights, chosen, strict=True))
                        / denominator
                    )
                    for d in range(value_dim)
                )
            results.append(HeadResult(out, _to_fraction(lse)))
    return tuple(results)
