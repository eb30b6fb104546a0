"""Exact value grids of the small binary floating-point formats, with round-to-nearest-even encoding.

Every value is an exact rational (``int`` or ``Fraction``); a code is the unsigned integer bit pattern
(``0..2**width - 1``). The rules, stated once (docs/formats.md derives them):

* encoding rounds to nearest, ties to the code with an even last mantissa bit, over the format's grid
  including subnormals; a negative value that rounds to zero gets the negative-zero code (sign bit set);
* e4m3fn and e2m1 saturate: a magnitude above the largest finite value encodes as that value (448 and 6),
  which is what the public quantizers do by clamping before the cast;
* bf16 and fp32 follow IEEE 754: a rounded magnitude above the largest finite value encodes as infinity;
* NaN and infinity are not rationals, so no encoder accepts them: ``float`` inputs are refused with
  ``TypeError``; decoding a NaN or infinity code raises ``ValueError`` naming the code, and
  ``classify`` reports what such a code is without raising;
* UE8M0 is an exponent byte: code ``c`` means ``2**(c - 127)``, ``0xff`` is NaN, and only exact powers of
  two are encoded.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from reference.checks import fail, require, require_exact, require_int

CodeClass = Literal["finite", "nan", "+inf", "-inf"]


@dataclass(frozen=True)
class FloatFormat:
    """A sign / exponent / mantissa format.

    ``nan_rule``: ``"none"`` (every code is finite), ``"all_ones"`` (only exponent and mantissa all ones
    is NaN, as e4m3fn), ``"ieee"`` (maximal exponent is infinity or NaN). ``overflow``: what a rounded
    magnitude above ``max_finite`` becomes.
    """

    name: str
    exponent_bits: int
    mantissa_bits: int
    bias: int
    nan_rule: Literal["none", "all_ones", "ieee"]
    overflow: Literal["saturate", "infinity"]

    @property
    def width(self) -> int:
        return 1 + self.exponent_bits + self.mantissa_bits

    @property
    def sign_bit(self) -> int:
        return 1 << (self.width - 1)

    @property
    def min_normal_exponent(self) -> int:
        return 1 - self.bias

    @property
    def max_finite(self) -> Fraction:
        top = (1 << self.exponent_bits) - 1
        mantissa_all = (1 << self.mantissa_bits) - 1
        if self.nan_rule == "ieee":
            exponent_field, mantissa = top - 1, mantissa_all
        elif self.nan_rule == "all_ones":
            exponent_field, mantissa = top, mantissa_all - 1
        else:
            exponent_field, mantissa = top, mantissa_all
        return _field_value(self, exponent_field, mantissa)

    @property
    def min_subnormal(self) -> Fraction:
        return _power_of_two(self.min_normal_exponent - self.mantissa_bits)


E4M3FN = FloatFormat("e4m3fn", 4, 3, 7, "all_ones", "saturate")
E2M1 = FloatFormat("e2m1", 2, 1, 1, "none", "saturate")
BF16 = FloatFormat("bf16", 8, 7, 127, "ieee", "infinity")
FP32 = FloatFormat("fp32", 8, 23, 127, "ieee", "infinity")


def _power_of_two(exponent: int) -> Fraction:
    return Fraction(1 << exponent) if exponent >= 0 else Fraction(1, 1 << -exponent)


def _field_value(fmt: FloatFormat, exponent_field: int, mantissa: int) -> Fraction:
    if exponent_field == 0:
        return mantissa * _power_of_two(fmt.min_normal_exponent - fmt.mantissa_bits)
    significand = (1 << fmt.mantissa_bits) + mantissa
    return significand * _power_of_two(exponent_field - fmt.bias - fmt.mantissa_bits)


def floor_log2(x: int | Fraction) -> int:
    """The largest integer ``k`` with ``2**k <= x``, exactly (``x > 0``)."""
    value = require_exact(x, "x")
    require(value > 0, "x", f"must be > 0, got {value}")
    k = value.numerator.bit_length() - value.denominator.bit_length()
    while _power_of_two(k) > value:
        k -= 1
    while _power_of_two(k + 1) <= value:
        k += 1
    return k


def ceil_log2(x: int | Fraction) -> int:
    """The smallest integer ``k`` with ``2**k >= x``, exactly (``x > 0``)."""
    k = floor_log2(x)
    return k if _power_of_two(k) == Fraction(x) else k + 1


def _round_half_even(value: Fraction) -> int:
    floor = value.numerator // value.denominator
    rest = value - floor
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and floor % 2 == 1):
        return floor + 1
    return floor


def _check_code(fmt: FloatFormat, code: object) -> int:
    c = require_int(code, "code")
    require(0 <= c < (1 << fmt.width), "code", f"must be in [0, {(1 << fmt.width) - 1}] for {fmt.name}, got {c}")
    return c


def classify(fmt: FloatFormat, code: int) -> CodeClass:
    """What a code of ``fmt`` is: ``"finite"``, ``"nan"``, ``"+inf"`` or ``"-inf"``."""
    c = _check_code(fmt, code)
    magnitude = c & (fmt.sign_bit - 1)
    exponent_field = magnitude >> fmt.mantissa_bits
    mantissa = magnitude & ((1 << fmt.mantissa_bits) - 1)
    top = (1 << fmt.exponent_bits) - 1
    if fmt.nan_rule == "all_ones" and exponent_field == top and mantissa == (1 << fmt.mantissa_bits) - 1:
        return "nan"
    if fmt.nan_rule == "ieee" and exponent_field == top:
        if mantissa != 0:
            return "nan"
        return "-inf" if c & fmt.sign_bit else "+inf"
    return "finite"


def decode(fmt: FloatFormat, code: int) -> Fraction:
    """The exact value of a finite code; ``ValueError`` for a NaN or infinity code."""
    kind = classify(fmt, code)
    if kind != "finite":
        raise fail("code", f"0x{code:x} is a {kind} code of {fmt.name}, which has no rational value")
    magnitude = code & (fmt.sign_bit - 1)
    value = _field_value(fmt, magnitude >> fmt.mantissa_bits, magnitude & ((1 << fmt.mantissa_bits) - 1))
    return -value if code & fmt.sign_bit else value


def _round_magnitude(fmt: FloatFormat, magnitude: Fraction) -> Fraction:
    """Round a magnitude to the grid with an unbounded exponent range above (no overflow handling)."""
    if magnitude == 0:
        return Fraction(0)
    exponent = max(floor_log2(magnitude), fmt.min_normal_exponent)
    quantum = _power_of_two(exponent - fmt.mantissa_bits)
    return _round_half_even(magnitude / quantum) * quantum


def round_to(fmt: FloatFormat, x: int | Fraction) -> Fraction:
    """``x`` rounded to the nearest value of ``fmt`` (ties to even), saturating for e4m3fn and e2m1.

    For bf16 and fp32 an overflow has no rational result and raises ``ValueError``; use ``encode`` to get
    the infinity code instead.
    """
    value = require_exact(x, "x")
    rounded = _round_magnitude(fmt, abs(value))
    if rounded > fmt.max_finite:
        if fmt.overflow == "infinity":
            raise fail("x", f"{value} overflows {fmt.name} (rounds beyond {fmt.max_finite}); encode gives inf")
        rounded = fmt.max_finite
    return -rounded if value < 0 else rounded


def encode(fmt: FloatFormat, x: int | Fraction) -> int:
    """The code of ``x`` rounded to nearest even; sign bit set for every negative ``x`` (also -0)."""
    value = require_exact(x, "x")
    sign = fmt.sign_bit if value < 0 else 0
    rounded = _round_magnitude(fmt, abs(value))
    if rounded > fmt.max_finite:
        if fmt.overflow == "infinity":
            return sign | (((1 << fmt.exponent_bits) - 1) << fmt.mantissa_bits)
        rounded = fmt.max_finite
    if rounded == 0:
        return sign
    exponent = floor_log2(rounded)
    if exponent < fmt.min_normal_exponent:
        mantissa = rounded / _power_of_two(fmt.min_normal_exponent - fmt.mantissa_bits)
        return sign | int(mantissa)
    significand = rounded / _power_of_two(exponent - fmt.mantissa_bits)
    exponent_field = exponent + fmt.bias
    return sign | (exponent_field << fmt.mantissa_bits) | (int(significand) - (1 << fmt.mantissa_bits))


def finite_values(fmt: FloatFormat) -> tuple[Fraction, ...]:
    """All distinct finite values of ``fmt``, ascending (one zero)."""
    values = {decode(fmt, c) for c in range(1 << fmt.width) if classify(fmt, c) == "finite"}
    return tuple(sorted(values))


# Named helpers for the formats the cache uses.


def e4m3_encode(x: int | Fraction) -> int:
    return encode(E4M3FN, x)


def e4m3_decode(code: int) -> Fraction:
    return decode(E4M3FN, code)


def e2m1_encode(x: int | Fraction) -> int:
    return encode(E2M1, x)


def e2m1_decode(code: int) -> Fraction:
    return decode(E2M1, code)


UE8M0_NAN = 0xFF
UE8M0_BIAS = 127


def ue8m0_decode(code: int) -> Fraction:
    """``2**(code - 127)``; ``ValueError`` for the NaN code 0xff."""
    c = require_int(code, "code")
    require(0 <= c <= 0xFF, "code", f"must be in [0, 255] for ue8m0, got {c}")
    if c == UE8M0_NAN:
        raise fail("code", "0xff is the NaN code of ue8m0, which has no rational value")
    return _power_of_two(c - UE8M0_BIAS)


def ue8m0_encode(scale: int | Fraction) -> int:
    """The code of an exact power of two in ``[2**-127, 2**127]``; anything else is a ``ValueError``."""
    value = require_exact(scale, "scale")
    require(value > 0, "scale", f"must be a positive power of two, got {value}")
    exponent = floor_log2(value)
    require(_power_of_two(exponent) == value, "scale", f"must be an exact power of two, got {value}")
    require(
        -UE8M0_BIAS <= exponent <= UE8M0_BIAS,
        "scale",
        f"exponent {exponent} is outside the ue8m0 range [-127, 127]",
    )
    return exponent + UE8M0_BIAS


def power_of_two(exponent: int) -> Fraction:
    """``2**exponent`` as an exact Fraction (negative exponents allowed)."""
    return _power_of_two(require_int(exponent, "exponent"))
