"""reference.norm_rope: RMSNorm with a stated rounding of the inverse root, interleaved RoPE, and the faithful-row
comparison of a stored row with the exact one."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference import formats
from reference.norm_rope import (
    INVERSE_RMS_BITS,
    SLACK,
    faithful,
    inverse_rms,
    norm_rope_row,
    rms_norm,
    rope,
)
from tests.refusals import worded_exactly


def test_constants() -> None:
    assert INVERSE_RMS_BITS == 64
    assert Fraction(1, 128) == SLACK


@pytest.mark.parametrize(
    ("values", "eps"),
    [
        ([2, 0], 0),
        ([3, 4], 0),
        ([Fraction(1, 3), Fraction(-5, 7), 11], Fraction(1, 10**6)),
        ([Fraction(1, 2**140)], Fraction(0)),
        ([0], Fraction(1, 2**149)),
        ([2**100, -(2**90)], 1),
        ([0, 0], Fraction(1, 1000)),
    ],
)
def test_inverse_rms_is_the_root_rounded_down_to_64_bits(values: list[Fraction], eps: Fraction) -> None:
    variance = Fraction(sum(Fraction(v) ** 2 for v in values)) / len(values) + eps
    r = inverse_rms(values, eps)
    assert r * r * variance <= 1 < (r * (1 + Fraction(1, 2**INVERSE_RMS_BITS))) ** 2 * variance
    n, m = variance.numerator, variance.denominator
    s = max(0, 65 + (n.bit_length() - m.bit_length() + 2) // 2)
    assert r == Fraction(math.isqrt((m << (2 * s)) // n), 1 << s)
    assert r.denominator & (r.denominator - 1) == 0


def test_inverse_rms_is_exact_on_squares() -> None:
    assert inverse_rms([2, 2], 0) == Fraction(1, 2)
    assert inverse_rms([0, 0], 4) == Fraction(1, 2)
    assert inverse_rms([Fraction(1, 4)], 0) == 4


def test_rms_norm_scales_each_value_by_its_weight() -> None:
    assert rms_norm([3, -4], [1, Fraction(1, 2)], Fraction(7, 2)) == [Fraction(3, 4), Fraction(-1, 2)]
    rho = inverse_rms([1, 5, -7], Fraction(1, 8))
    assert rms_norm([1, 5, -7], [2, 3, 5], Fraction(1, 8)) == [2 * rho, 15 * rho, -35 * rho]


def test_rope_rotates_the_last_dims_in_interleaved_pairs() -> None:
    values = [Fraction(v) for v in (9, 8, 1, 2, 3, -4)]
    out, sizes = rope(values, [Fraction(1, 2), 3], [Fraction(1, 4), -1], 4)
    assert out == [9, 8, Fraction(1, 2) - Fraction(1, 2), 1 + Fraction(1, 4), 9 - 4, -12 - 3]
    assert sizes == [9, 8, Fraction(1, 2) + Fraction(1, 2), 1 + Fraction(1, 4), 9 + 4, 12 + 3]
    whole, _ = rope(values[:2], [0], [1], 2)
    assert whole == [-values[1], values[0]]


def test_norm_rope_row_is_rope_of_the_norm() -> None:
    values, weight = [1, 2, 3, 4], [1, 1, 2, 2]
    normed = rms_norm(values, weight, Fraction(1, 16))
    assert norm_rope_row(values, weight, Fraction(1, 16), [Fraction(1, 2)], [Fraction(3, 4)], 2) == rope(
        normed, [Fraction(1, 2)], [Fraction(3, 4)], 2
    )


def _row(fmt: formats.RowFormat) -> tuple[list[Fraction], list[Fraction]]:
    values = [Fraction((7 * i) % 23 - 11, 4) for i in range(fmt.dims)]
    return norm_rope_row(values, [1] * fmt.dims, Fraction(1, 10**6), [Fraction(3, 5)] * 32, [Fraction(4, 5)] * 32, 64)


@pytest.mark.parametrize("name", sorted(formats.ROW_FORMATS))
def test_the_reference_bytes_are_faithful_and_exactly_so_without_slack(name: str) -> None:
    fmt = formats.row_format(name)
    y, sizes = _row(fmt)
    row = formats.quantize_row(fmt, y)
    assert faithful(fmt, row, y, sizes) is None
    assert faithful(fmt, row, y, [Fraction(0)] * fmt.dims) is None


def test_a_changed_element_scale_or_bf16_value_is_not_faithful() -> None:
    fmt = formats.V4_MAIN_FP8
    y, _ = _row(fmt)
    zero = [Fraction(0)] * fmt.dims
    row = formats.quantize_row(fmt, y)
    data = bytearray(row.data)
    data[5] ^= 0x01
    assert (faithful(fmt, formats.QuantizedRow(bytes(data), row.scales), y, zero) or "").startswith("value 5: ")
    tail = bytearray(row.data)
    tail[fmt.quantized_bytes + 6] ^= 0x01  # the low byte of bf16 value 451
    assert (faithful(fmt, formats.QuantizedRow(bytes(tail), row.scales), y, zero) or "").startswith("value 451: bf16")
    scales = bytearray(row.scales)
    scales[2] += 1
    assert (faithful(fmt, formats.QuantizedRow(row.data, bytes(scales)), y, zero) or "").startswith("group 2: scale")


@pytest.mark.parametrize("unit", [Fraction(1), Fraction(1, 2**10)])
def test_slack_admits_a_row_rounded_once_to_bf16_and_not_one_twice_as_far(unit: Fraction) -> None:
    """y' = y (1 + SLACK) quantized is faithful; y (1 + 4 SLACK) is not, for an element whose code it moves (at
    scale 1 and 2**-10)."""
    fmt = formats.INDEX_FP8
    y = [440 * unit] + [(100 + i) * unit for i in range(fmt.dims - 1)]
    sizes = [abs(v) for v in y]
    near = formats.quantize_row(fmt, [y[0]] + [v * (1 + SLACK) for v in y[1:]])
    assert faithful(fmt, near, y, sizes) is None
    far = formats.quantize_row(fmt, [y[0]] + [v * (1 + 4 * SLACK) for v in y[1:]])
    assert (faithful(fmt, far, y, sizes) or "").startswith("value ")
    scale_up = formats.quantize_row(fmt, [v * (1 + 4 * SLACK) for v in y])
    assert (faithful(fmt, scale_up, y, sizes) or "").startswith("group 0: scale")


def test_each_group_is_judged_on_its_own_values() -> None:
    """Group 0 a thousand times larger than group 1: each group's scale range comes from its own maximum."""
    fmt = formats.V41_MAIN_FP8
    y = [Fraction(1000 if i < 32 else 1, 1 + i % 5) for i in range(fmt.dims)]
    assert faithful(fmt, formats.quantize_row(fmt, y), y, [abs(v) for v in y]) is None


def test_a_maximum_crossing_a_scale_boundary_within_the_slack_may_take_either_scale() -> None:
    fmt = formats.INDEX_FP8
    y = [Fraction(446)] + [Fraction(i % 50 + 1) for i in range(fmt.dims - 1)]
    sizes = [abs(v) for v in y]
    for row in (y, [v * (1 + SLACK) for v in y]):  # scale 1, then 2 (449.5 > 448)
        assert faithful(fmt, formats.quantize_row(fmt, row), y, sizes) is None


@pytest.mark.parametrize(("stored", "ok"), [(1 + 1 / Fraction(128), True), (1 - 1 / Fraction(128), True),
                                           (1 + 2 / Fraction(128), False), (1 - 2 / Fraction(128), False)])  # fmt: skip
def test_a_bf16_value_may_move_by_the_slack_and_no_further(stored: Fraction, ok: bool) -> None:
    fmt = formats.V4_MAIN_FP8
    y = [Fraction(1)] * fmt.dims
    sizes = [Fraction(0)] * fmt.dims
    sizes[448] = Fraction(1)
    row = formats.quantize_row(fmt, [stored if i == 448 else v for i, v in enumerate(y)])
    assert (faithful(fmt, row, y, sizes) is None) == ok


def test_the_scale_floor_is_zero() -> None:
    """A group whose values all lie within the slack of 0 may take the rule's scale of amax 0."""
    fmt = formats.INDEX_FP4
    y, sizes = [Fraction(1, 2**20)] * fmt.dims, [Fraction(2**7, 2**20)] * fmt.dims
    assert faithful(fmt, formats.quantize_row(fmt, [Fraction(0)] * fmt.dims), y, sizes) is None


test_every_refusal_is_worded_exactly = worded_exactly(
    [
        (lambda: inverse_rms([], 1), ValueError, "values: must hold at least one value"),
        (lambda: inverse_rms([1.5], 1), TypeError, "values[0]: must be an int or Fraction, got float"),  # type: ignore[list-item]
        (lambda: inverse_rms([1], Fraction(-1, 2)), ValueError, "eps: must be >= 0, got -1/2"),
        (lambda: inverse_rms([1], 1e-6), TypeError, "eps: must be an int or Fraction, got float"),  # type: ignore[arg-type]
        (lambda: rms_norm([1, 0.5], [1, 1], 1), TypeError, "values[1]: must be an int or Fraction, got float"),  # type: ignore[list-item]
        (
            lambda: inverse_rms([0, 0], 0),
            ValueError,
            "eps: must be > 0 when every value is 0 (the mean square is 0)",
        ),
        (lambda: rms_norm([1, 2], [1], 1), ValueError, "weight: must have length 2 (one weight per value), got 1"),
        (lambda: rms_norm([1], [0.5], 1), TypeError, "weight[0]: must be an int or Fraction, got float"),  # type: ignore[list-item]
        (lambda: rope([Fraction(1)] * 4, [1], [1], 0), ValueError, "rope_dim: must be a positive integer, got 0"),
        (lambda: rope([Fraction(1)] * 4, [1], [1], 3), ValueError, "rope_dim: must be even and <= 4, got 3"),
        (lambda: rope([Fraction(1)] * 4, [1] * 3, [1] * 3, 6), ValueError, "rope_dim: must be even and <= 4, got 6"),
        (
            lambda: rope([Fraction(1)] * 4, [1], [1, 1], 4),
            ValueError,
            "cos: must have length 2 (one entry per rotated pair), got 1",
        ),
        (
            lambda: rope([Fraction(1)] * 4, [1, 1], [1], 4),
            ValueError,
            "sin: must have length 2 (one entry per rotated pair), got 1",
        ),
        (lambda: rope([Fraction(1)] * 2, [0.5], [1], 2), TypeError, "cos[0]: must be an int or Fraction, got float"),  # type: ignore[list-item]
        (lambda: rope([Fraction(1)] * 2, [1], [0.5], 2), TypeError, "sin[0]: must be an int or Fraction, got float"),  # type: ignore[list-item]
        (
            lambda: faithful(formats.INDEX_FP8, formats.quantize_row(formats.INDEX_FP8, [0] * 128), [Fraction(0)], []),
            ValueError,
            "exact: must have length 128 (index_fp8_132 rows have 128 values), got 1",
        ),
        (
            lambda: faithful(
                formats.INDEX_FP8, formats.quantize_row(formats.INDEX_FP8, [0] * 128), [Fraction(0)] * 128, []
            ),
            ValueError,
            "sizes: must have length 128 (one magnitude per value), got 0",
        ),
    ]
)


@given(st.integers(0, 2**300))
def test_integer_square_root_is_the_floor(n: int) -> None:
    from reference.norm_rope import _isqrt

    assert _isqrt(n) == math.isqrt(n)


def test_integer_square_root_small() -> None:
    from reference.norm_rope import _isqrt

    assert [_isqrt(n) for n in range(10)] == [0, 1, 1, 1, 2, 2, 2, 2, 2, 3]
