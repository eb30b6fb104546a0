"""The per-group scale rules of the cache formats, exactly (docs/formats.md cites the public kernels).

* FP8 groups (V4 main 584 B per 64, V4.1 528 B per 32, index 132 B per 128): a power-of-two scale
  ``2**ceil(log2(max(amax, 1e-4) / 448))`` where 1e-4 is the exact decimal ``Fraction(1, 10000)``.
  ``floor_applies_to="quotient"`` gives the variant of FlashMLA's test quantizer, which floors
  ``amax / 448`` at 1e-4 instead of ``amax``.
* main FP4 groups (V4.1 288 B per 16): an e4m3 scale ``e4m3(clamp(amax / 6, 2**-9, 448))``.
* index FP4 groups (68 B per 32): a power-of-two scale ``2**ceil(log2(max(amax, 6 * 2**-126) / 6))``.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Literal

from reference.checks import require, require_exact
from reference.grids import E4M3FN, ceil_log2, e4m3_encode, power_of_two

FP8_MAX = Fraction(448)
FP4_MAX = Fraction(6)
FP8_AMAX_FLOOR = Fraction(1, 10000)
FP4_E4M3_SCALE_MIN = power_of_two(-9)
FP4_UE8M0_AMAX_FLOOR = 6 * power_of_two(-126)


def amax(values: Sequence[int | Fraction]) -> Fraction:
    """The largest magnitude of a non-empty group."""
    require(len(values) > 0, "values", "must be a non-empty group")
    return max(abs(require_exact(v, f"values[{i}]")) for i, v in enumerate(values))


def fp8_scale_exponent(group_amax: int | Fraction, *, floor_applies_to: Literal["amax", "quotient"] = "amax") -> int:
    """The exponent ``e`` of the FP8 group scale ``2**e`` (the UE8M0 byte is ``e + 127``)."""
    a = require_exact(group_amax, "group_amax")
    require(a >= 0, "group_amax", f"must be >= 0, got {a}")
    if floor_applies_to == "amax":
        quotient = max(a, FP8_AMAX_FLOOR) / FP8_MAX
    elif floor_applies_to == "quotient":
        quotient = max(a / FP8_MAX, FP8_AMAX_FLOOR)
    else:
        raise ValueError(f"floor_applies_to: must be 'amax' or 'quotient', got {floor_applies_to!r}")
    return ceil_log2(quotient)


def fp4_e4m3_scale_code(group_amax: int | Fraction) -> int:
    """The e4m3 code of the main-FP4 group scale ``e4m3(clamp(amax / 6, 2**-9, 448))``."""
    a = require_exact(group_amax, "group_amax")
    require(a >= 0, "group_amax", f"must be >= 0, got {a}")
    clamped = min(max(a / FP4_MAX, FP4_E4M3_SCALE_MIN), E4M3FN.max_finite)
    return e4m3_encode(clamped)


def fp4_ue8m0_scale_exponent(group_amax: int | Fraction) -> int:
    """The exponent ``e`` of the index-FP4 group scale ``2**e`` (``e >= -126``)."""
    a = require_exact(group_amax, "group_amax")
    require(a >= 0, "group_amax", f"must be >= 0, got {a}")
    return ceil_log2(max(a, FP4_UE8M0_AMAX_FLOOR) / FP4_MAX)
