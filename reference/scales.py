"""The per-group scale rules of the cache formats, exactly (docs/formats.md cites the public kernels).

* FP8 groups (V4 main 584 B per 64, V4.1 528 B per 32, index 132 B per 128): a power-of-two scale
  ``2**ceil(log2(max(amax, 1e-4) / 448))`` where 1e-4 is the exact decimal ``Fraction(1, 10000)``.
  ``floor_applies_to="quotient"`` gives the variant of FlashMLA's test quantizer, which floors
  ``amax / 448`` at 1e-4 instead of ``amax``.
* main FP4 groups (V4.1 288 B per 16): an e4m3 scale ``e4m3(clamp(amax / 6, 2**-9, 448))``.
* index FP4 groups (68 B per 32): a power-of-two scale ``2**ceil(log2(max(amax, 6 * 2**-126) / 6))``.

Each rule is evaluated in one of two arithmetics (:class:`Arithmetic`, the convention option ``f32_scale``):

* ``EXACT`` (the default): the formulas above in exact rationals.
* ``F32``: as a kernel computes them in float32, each rounding evaluated exactly. The floor is the float32
  constant (``fl(1e-4)``); the quotient ``amax / 448`` (``/ 6``) is rounded to float32 (nearest even); the
  power-of-two rules then take ``ceil(fl(log2(q)))`` with the logarithm correctly rounded to float32, and the
  e4m3 rule rounds the float32 quotient to e4m3. They differ from ``EXACT`` just above a boundary: amax
  ``7168 * (1 + 2**-23)`` gives the quotient ``16 * (1 + 2**-23)``, whose exact scale is ``2**5`` but whose
  float32 logarithm rounds to 4.0, so the float32 scale is ``2**4``.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from fractions import Fraction
from typing import Literal

from reference.checks import fail, require, require_exact
from reference.grids import E4M3FN, FP32, ceil_log2, decode, e4m3_encode, encode, floor_log2, power_of_two, round_to


class Arithmetic(enum.Enum):
    """How a scale rule is evaluated."""

    EXACT = "exact"
    F32 = "f32"


FP8_MAX = Fraction(448)
FP4_MAX = Fraction(6)
FP8_AMAX_FLOOR = Fraction(1, 10000)
FP4_E4M3_SCALE_MIN = power_of_two(-9)
FP4_UE8M0_AMAX_FLOOR = 6 * power_of_two(-126)


def amax(values: Sequence[int | Fraction]) -> Fraction:
    """The largest magnitude of a non-empty group."""
    require(len(values) > 0, "values", "must be a non-empty group")
    return max(abs(require_exact(v, f"values[{i}]")) for i, v in enumerate(values))


def _f32(x: Fraction) -> Fraction:
    """``x`` rounded to float32 (nearest even); an overflow is refused."""
    return round_to(FP32, x)


def _arithmetic(arithmetic: object) -> Arithmetic:
    if not isinstance(arithmetic, Arithmetic):
        raise TypeError(f"arithmetic: must be an Arithmetic, got {type(arithmetic).__name__}")
    return arithmetic


def _require_f32_amax(a: Fraction) -> None:
    require(_f32(a) == a, "group_amax", f"must be a float32 value under f32 arithmetic, got {a}")


def _ln_bounds(x: Fraction, terms: int) -> tuple[Fraction, Fraction]:
    """Rational bounds ``low < ln(x) <= high`` for ``x > 1``: ``ln x = 2 * atanh(y)``, ``y = (x - 1) / (x + 1)``,
    ``terms`` terms of the series and its geometric tail bound."""
    y = (x - 1) / (x + 1)
    half = Fraction(0)
    power = y
    for j in range(terms):
        half += power / (2 * j + 1)
        power *= y * y
    tail = power / ((2 * terms + 1) * (1 - y * y))
    return 2 * half, 2 * (half + tail)


MAX_LOG_TERMS = 1 << 12


def log2_exceeds(m: Fraction, h: Fraction) -> bool:
    """Whether ``log2(m) > h`` for a rational ``1 < m < 2`` (``log2(m)`` is then irrational, so never equal to
    the rational ``h``), decided by refining rational bounds of both logarithms until they separate."""
    require(1 < m < 2, "m", f"must lie in (1, 2), got {m}")
    terms = 4
    while terms <= MAX_LOG_TERMS:
        low_m, high_m = _ln_bounds(m, terms)
        low_2, high_2 = _ln_bounds(Fraction(2), terms)
        if low_m > h * high_2:
            return True
        if high_m < h * low_2:
            return False
        terms *= 2
    raise fail("h", f"log2({m}) and {h} not separated within {MAX_LOG_TERMS} terms")


def f32_ceil_log2(q: int | Fraction) -> int:
    """``ceil(fl(log2(q)))`` for a positive float32 value ``q``, the logarithm correctly rounded to float32.

    With ``q = 2**k * m``, ``1 <= m < 2``: ``k`` when ``m == 1``; otherwise ``k + 1`` unless ``k + log2(m)``
    rounds down to ``k``, i.e. unless ``log2(m)`` is below half the gap from ``k`` to the next float32 above it.
    """
    value = require_exact(q, "q")
    require(value > 0 and _f32(value) == value, "q", f"must be a positive float32 value, got {value}")
    k = floor_log2(value)
    m = value / power_of_two(k)
    if m == 1:
        return k
    bits = encode(FP32, k)
    above = decode(FP32, bits + 1 if k >= 0 else bits - 1)
    return k + 1 if log2_exceeds(m, (above - k) / 2) else k


FP8_AMAX_FLOOR_F32 = _f32(FP8_AMAX_FLOOR)
"""The float32 constant a kernel's ``1e-4`` is: the nearest float32 to the exact decimal."""


def fp8_scale_exponent(
    group_amax: int | Fraction,
    *,
    floor_applies_to: Literal["amax", "quotient"] = "amax",
    arithmetic: Arithmetic = Arithmetic.EXACT,
) -> int:
    """The exponent ``e`` of the FP8 group scale ``2**e`` (the UE8M0 byte is ``e + 127``)."""
    a = require_exact(group_amax, "group_amax")
    require(a >= 0, "group_amax", f"must be >= 0, got {a}")
    if _arithmetic(arithmetic) is Arithmetic.F32:
        require(floor_applies_to == "amax", "floor_applies_to", "f32 arithmetic floors amax")
        _require_f32_amax(a)
        return f32_ceil_log2(_f32(max(a, FP8_AMAX_FLOOR_F32) / FP8_MAX))
    if floor_applies_to == "amax":
        quotient = max(a, FP8_AMAX_FLOOR) / FP8_MAX
    elif floor_applies_to == "quotient":
        quotient = max(a / FP8_MAX, FP8_AMAX_FLOOR)
    else:
        raise ValueError(f"floor_applies_to: must be 'amax' or 'quotient', got {floor_applies_to!r}")
    return ceil_log2(quotient)


def fp4_e4m3_scale_code(group_amax: int | Fraction, arithmetic: Arithmetic = Arithmetic.EXACT) -> int:
    """The e4m3 code of the main-FP4 group scale ``e4m3(clamp(amax / 6, 2**-9, 448))``.

    Under f32 arithmetic the quotient is first rounded to float32, which changes no code: for a float32 ``amax``
    other than ``6 m`` the quotient lies more than half a float32 gap from every e4m3 midpoint ``m`` (the gap of
    ``6 m`` divided by 6 exceeds it), so both roundings reach the same side; the clamp bounds are float32 values.
    ``amax`` must still be a float32 value."""
    a = require_exact(group_amax, "group_amax")
    require(a >= 0, "group_amax", f"must be >= 0, got {a}")
    if _arithmetic(arithmetic) is Arithmetic.F32:
        _require_f32_amax(a)
    clamped = min(max(a / FP4_MAX, FP4_E4M3_SCALE_MIN), E4M3FN.max_finite)
    return e4m3_encode(clamped)


def fp4_ue8m0_scale_exponent(group_amax: int | Fraction, arithmetic: Arithmetic = Arithmetic.EXACT) -> int:
    """The exponent ``e`` of the index-FP4 group scale ``2**e`` (``e >= -126``)."""
    a = require_exact(group_amax, "group_amax")
    require(a >= 0, "group_amax", f"must be >= 0, got {a}")
    if _arithmetic(arithmetic) is Arithmetic.F32:
        _require_f32_amax(a)
        return f32_ceil_log2(_f32(max(a, FP4_UE8M0_AMAX_FLOOR) / FP4_MAX))
    return ceil_log2(max(a, FP4_UE8M0_AMAX_FLOOR) / FP4_MAX)
