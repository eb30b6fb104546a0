"""The exact grids against ml_dtypes and torch, bit for bit: every code decoded, boundary and random values
rounded. Inputs to the libraries are float32-representable, so no library rounds twice."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import torch

from reference import grids
from tests.refusals import worded_exactly

RNG = random.Random(20260401)


def _lib_codes(values: list[Fraction], dtype: Any, clip: float | None = None) -> list[int]:
    array = np.array([float(v) for v in values], dtype=np.float32)
    if clip is not None:
        array = np.clip(array, -clip, clip)
    return [int(c) for c in array.astype(dtype).view(np.uint8 if np.dtype(dtype).itemsize == 1 else np.uint16)]


def _ours(fmt: object, values: list[Fraction]) -> list[int]:
    return [grids.encode(fmt, v) for v in values]  # type: ignore[arg-type]


def _neighbourhood(grid: tuple[Fraction, ...], fraction_of_gap: Fraction) -> list[Fraction]:
    """Every grid value, every midpoint, and points just either side of each midpoint."""
    points = list(grid)
    for lo, hi in itertools.pairwise(grid):
        mid = (lo + hi) / 2
        step = (hi - lo) * fraction_of_gap
        points += [mid, mid - step, mid + step]
    return points


# --- every code -------------------------------------------------------------------------------------


def test_all_256_e4m3fn_codes_decode_like_ml_dtypes_and_torch() -> None:
    codes = np.arange(256, dtype=np.uint8)
    ml = codes.view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    th = torch.from_numpy(codes.copy()).view(torch.float8_e4m3fn).to(torch.float64).numpy()
    for c in range(256):
        if np.isnan(ml[c]):
            assert grids.classify(grids.E4M3FN, c) == "nan" and np.isnan(th[c])
            with pytest.raises(ValueError, match=r"^code: 0x"):
                grids.decode(grids.E4M3FN, c)
        else:
            assert grids.decode(grids.E4M3FN, c) == Fraction(float(ml[c])) == Fraction(float(th[c]))
    assert [c for c in range(256) if grids.classify(grids.E4M3FN, c) == "nan"] == [0x7F, 0xFF]
    assert grids.E4M3FN.max_finite == 448 and grids.E4M3FN.min_subnormal == Fraction(1, 512)


def test_all_16_e2m1_codes_decode_like_ml_dtypes() -> None:
    codes = np.arange(16, dtype=np.uint8)
    ml = codes.view(ml_dtypes.float4_e2m1fn).astype(np.float64)
    assert [grids.decode(grids.E2M1, c) for c in range(16)] == [Fraction(float(v)) for v in ml]
    magnitudes = [Fraction(0), Fraction(1, 2), 1, Fraction(3, 2), 2, 3, 4, 6]
    assert [grids.decode(grids.E2M1, c) for c in range(8)] == magnitudes
    assert [grids.decode(grids.E2M1, c) for c in range(8, 16)] == [-m for m in magnitudes]


def test_torch_float4_e2m1fn_x2_is_a_container_only() -> None:
    """torch holds packed e2m1 bytes but converts none; when it learns to, compare values here."""
    packed = torch.tensor([0x21], dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
    assert packed.view(torch.uint8).item() == 0x21
    try:
        converted = packed.to(torch.float32)
    except (NotImplementedError, RuntimeError):
        pytest.skip("this torch cannot convert float4_e2m1fn_x2; values are checked against ml_dtypes")
    # low nibble 0x1 (0.5) is element 0, high nibble 0x2 (1.0) element 1
    assert converted.flatten().tolist() == [0.5, 1.0]


def test_all_256_ue8m0_codes_decode_like_ml_dtypes_and_torch() -> None:
    codes = np.arange(256, dtype=np.uint8)
    ml = codes.view(ml_dtypes.float8_e8m0fnu).astype(np.float64)
    th = torch.from_numpy(codes.copy()).view(torch.float8_e8m0fnu).to(torch.float64).numpy()
    for c in range(255):
        assert grids.ue8m0_decode(c) == Fraction(float(ml[c])) == Fraction(float(th[c])) == grids.power_of_two(c - 127)
        assert grids.ue8m0_encode(grids.ue8m0_decode(c)) == c
    assert np.isnan(ml[255]) and np.isnan(th[255])
    with pytest.raises(ValueError, match=r"^code: 0xff is the NaN code"):
        grids.ue8m0_decode(0xFF)


def test_all_65536_bf16_patterns_decode_like_ml_dtypes() -> None:
    patterns = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    with np.errstate(invalid="ignore"):
        ml = patterns.view(ml_dtypes.bfloat16).astype(np.float64)
    for bits in range(1 << 16):
        v = ml[bits]
        kind = grids.classify(grids.BF16, bits)
        if np.isnan(v):
            assert kind == "nan"
        elif np.isinf(v):
            assert kind == ("+inf" if v > 0 else "-inf")
        else:
            assert kind == "finite" and grids.decode(grids.BF16, bits) == Fraction(float(v))


def test_fp32_decode_matches_numpy_on_sampled_patterns() -> None:
    patterns = [RNG.getrandbits(32) for _ in range(2000)] + [0, 1, 0x7F7FFFFF, 0x00800000, 0x80000001]
    with np.errstate(invalid="ignore"):
        values = np.array(patterns, dtype=np.uint32).view(np.float32).astype(np.float64)
    for bits, v in zip(patterns, values, strict=True):
        if np.isfinite(v):
            assert grids.decode(grids.FP32, bits) == Fraction(float(v))
            assert grids.encode(grids.FP32, grids.decode(grids.FP32, bits)) == (bits if v != 0 else 0)


# --- rounding ---------------------------------------------------------------------------------------


def test_e4m3fn_rounding_ties_subnormals_and_random_like_ml_dtypes_and_torch() -> None:
    grid = grids.finite_values(grids.E4M3FN)
    values = _neighbourhood(grid, Fraction(1, 16))
    values += [Fraction(float(np.float32(RNG.uniform(-448, 448)))) for _ in range(3000)]
    values += [Fraction(float(np.float32(RNG.uniform(-0.02, 0.02)))) for _ in range(2000)]
    values += [grids.power_of_two(-10), -grids.power_of_two(-10), grids.power_of_two(-11), 3 * grids.power_of_two(-11)]
    ours = _ours(grids.E4M3FN, values)
    assert ours == _lib_codes(values, ml_dtypes.float8_e4m3fn)
    th = torch.tensor([float(v) for v in values], dtype=torch.float32).to(torch.float8_e4m3fn)
    assert ours == th.view(torch.uint8).tolist()
    # ties go to the even mantissa: 2**-10 (between 0 and 2**-9) rounds to 0, 3 * 2**-10 to 2**-8
    assert (
        grids.encode(grids.E4M3FN, grids.power_of_two(-10)) == 0x00
        and grids.encode(grids.E4M3FN, -grids.power_of_two(-10)) == 0x80
    )
    assert grids.encode(grids.E4M3FN, 3 * grids.power_of_two(-10)) == 0x02


def test_e4m3fn_saturates_at_448_like_the_clamping_quantizers() -> None:
    values = [Fraction(449), Fraction(463), Fraction(464), Fraction(465), Fraction(480), Fraction(10**6)]
    values += [-v for v in values]
    ours = _ours(grids.E4M3FN, values)
    assert ours == [0x7E] * 6 + [0xFE] * 6
    assert ours == _lib_codes(values, ml_dtypes.float8_e4m3fn, clip=448.0)
    assert [grids.round_to(grids.E4M3FN, v) for v in values] == [448] * 6 + [-448] * 6


def test_e2m1_rounding_ties_and_random_like_ml_dtypes() -> None:
    values = _neighbourhood(grids.finite_values(grids.E2M1), Fraction(1, 64))
    values += [Fraction(float(np.float32(RNG.uniform(-6, 6)))) for _ in range(3000)]
    assert _ours(grids.E2M1, values) == _lib_codes(values, ml_dtypes.float4_e2m1fn)
    ties = [Fraction(1, 4), Fraction(3, 4), Fraction(5, 4), Fraction(7, 4), Fraction(5, 2), Fraction(7, 2), Fraction(5)]
    assert [grids.round_to(grids.E2M1, t) for t in ties] == [0, 1, 1, 2, 2, 4, 4]


def test_e2m1_saturates_at_6() -> None:
    values = [Fraction(13, 2), Fraction(7), Fraction(100), Fraction(-7)]
    assert _ours(grids.E2M1, values) == [0x7, 0x7, 0x7, 0xF]
    assert _ours(grids.E2M1, values) == _lib_codes(values, ml_dtypes.float4_e2m1fn, clip=6.0)


def test_bf16_rounding_ties_subnormals_overflow_like_ml_dtypes_and_torch() -> None:
    exponents = list(range(-133, -120)) + list(range(-3, 4)) + list(range(120, 128))
    values: list[Fraction] = []
    for e in exponents:
        base = grids.power_of_two(e)
        for m in range(0, 256, 7):
            lo = base * (256 + m) / 256
            hi = base * (256 + m + 1) / 256
            values += [lo, (lo + hi) / 2, (lo + hi) / 2 + (hi - lo) / 32, (lo + hi) / 2 - (hi - lo) / 32]
    values += [Fraction(float(np.float32(RNG.uniform(-1e6, 1e6)))) for _ in range(2000)]
    values += [-v for v in values[:200]]
    ours = _ours(grids.BF16, values)
    assert ours == _lib_codes(values, ml_dtypes.bfloat16)
    th = torch.tensor([float(v) for v in values], dtype=torch.float32).to(torch.bfloat16)
    assert ours == th.view(torch.int16).to(torch.int32).bitwise_and(0xFFFF).tolist()


def test_bf16_overflow_is_the_infinity_code() -> None:
    top = grids.BF16.max_finite
    half_ulp = grids.power_of_two(127 - 8)
    assert grids.encode(grids.BF16, top + half_ulp - 1) == 0x7F7F
    assert grids.encode(grids.BF16, top + half_ulp) == 0x7F80  # tie: the even neighbour is 2**128, which overflows
    assert grids.encode(grids.BF16, -(top + half_ulp)) == 0xFF80
    with pytest.raises(ValueError, match=r"^x: .* overflows bf16"):
        grids.round_to(grids.BF16, top + half_ulp)


# --- exact logarithms and refusals -----------------------------------------------------------------


def test_floor_and_ceil_log2_against_brute_force() -> None:
    samples = [Fraction(RNG.randint(1, 10**6), RNG.randint(1, 10**6)) for _ in range(500)]
    samples += [grids.power_of_two(k) for k in range(-140, 140, 7)] + [Fraction(1, 10000) / 448]
    for x in samples:
        k = -200
        while grids.power_of_two(k + 1) <= x:
            k += 1
        assert grids.floor_log2(x) == k
        assert grids.ceil_log2(x) == (k if grids.power_of_two(k) == x else k + 1)


def test_refusals_name_the_argument() -> None:
    with pytest.raises(TypeError, match=r"^x: must be an int or Fraction, got float"):
        grids.encode(grids.E4M3FN, 0.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^x: must be an int or Fraction, got float"):
        grids.encode(grids.BF16, float("nan"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^code: must be in \[0, 255\]"):
        grids.decode(grids.E4M3FN, 256)
    with pytest.raises(ValueError, match=r"^scale: must be an exact power of two"):
        grids.ue8m0_encode(Fraction(3, 4))
    with pytest.raises(ValueError, match=r"^scale: exponent 128 is outside"):
        grids.ue8m0_encode(grids.power_of_two(128))
    with pytest.raises(ValueError, match=r"^x: must be > 0"):
        grids.ceil_log2(0)


# --- the named helpers, the top of each range, and every refusal worded exactly (docs/mutation.md) -------------


def test_named_helpers_and_whole_grids() -> None:
    assert (
        grids.e4m3_encode(448) == 0x7E
        and grids.e4m3_decode(0x7E) == 448
        and grids.e4m3_encode(-Fraction(1, 512)) == 0x81
    )
    assert grids.e2m1_encode(6) == 0x7 and grids.e2m1_decode(0xF) == -6 and grids.e2m1_encode(Fraction(1, 2)) == 0x1
    grid = [
        Fraction(0),
        Fraction(1, 2),
        Fraction(1),
        Fraction(3, 2),
        Fraction(2),
        Fraction(3),
        Fraction(4),
        Fraction(6),
    ]
    assert grids.finite_values(grids.E2M1) == tuple(sorted({Fraction(s * v) for v in grid for s in (1, -1)}))
    assert len(grids.finite_values(grids.E4M3FN)) == 253 and grids.finite_values(grids.E4M3FN)[-1] == 448


def test_the_largest_finite_value_rounds_to_itself() -> None:
    for fmt in (grids.BF16, grids.FP32, grids.E4M3FN, grids.E2M1):
        assert (
            grids.round_to(fmt, fmt.max_finite) == fmt.max_finite
            and grids.round_to(fmt, -fmt.max_finite) == -fmt.max_finite
        )
    assert grids.ue8m0_decode(254) == 2**127 and grids.ue8m0_decode(0) == Fraction(1, 2**127)
    assert grids.ue8m0_encode(2**127) == 254 and grids.ue8m0_encode(Fraction(1, 2**127)) == 0


test_every_refusal_is_worded_exactly = worded_exactly(
    [
        (lambda: grids.floor_log2(0.5), TypeError, "x: must be an int or Fraction, got float"),  # type: ignore[arg-type]
        (lambda: grids.floor_log2(0), ValueError, "x: must be > 0, got 0"),
        (lambda: grids.floor_log2(Fraction(-1, 2)), ValueError, "x: must be > 0, got -1/2"),
        (lambda: grids.ceil_log2(0), ValueError, "x: must be > 0, got 0"),
        (lambda: grids.classify(grids.E4M3FN, 1.5), TypeError, "code: must be an int, got float"),  # type: ignore[arg-type]
        (lambda: grids.classify(grids.E4M3FN, 256), ValueError, "code: must be in [0, 255] for e4m3fn, got 256"),
        (lambda: grids.classify(grids.BF16, -1), ValueError, "code: must be in [0, 65535] for bf16, got -1"),
        (
            lambda: grids.decode(grids.E4M3FN, 0x7F),
            ValueError,
            "code: 0x7f is a nan code of e4m3fn, which has no rational value",
        ),
        (
            lambda: grids.decode(grids.BF16, 0x7F80),
            ValueError,
            "code: 0x7f80 is a +inf code of bf16, which has no rational value",
        ),
        (lambda: grids.round_to(grids.BF16, 0.5), TypeError, "x: must be an int or Fraction, got float"),  # type: ignore[arg-type]
        (
            lambda: grids.round_to(grids.BF16, 2**200),
            ValueError,
            f"x: {2**200} overflows bf16 (rounds beyond {grids.BF16.max_finite}); encode gives inf",
        ),
        (lambda: grids.encode(grids.FP32, 0.5), TypeError, "x: must be an int or Fraction, got float"),  # type: ignore[arg-type]
        (lambda: grids.ue8m0_decode(1.0), TypeError, "code: must be an int, got float"),  # type: ignore[arg-type]
        (lambda: grids.ue8m0_decode(256), ValueError, "code: must be in [0, 255] for ue8m0, got 256"),
        (lambda: grids.ue8m0_decode(-1), ValueError, "code: must be in [0, 255] for ue8m0, got -1"),
        (
            lambda: grids.ue8m0_decode(255),
            ValueError,
            "code: 0xff is the NaN code of ue8m0, which has no rational value",
        ),
        (lambda: grids.ue8m0_encode(0.5), TypeError, "scale: must be an int or Fraction, got float"),  # type: ignore[arg-type]
        (lambda: grids.ue8m0_encode(0), ValueError, "scale: must be a positive power of two, got 0"),
        (lambda: grids.ue8m0_encode(-2), ValueError, "scale: must be a positive power of two, got -2"),
        (lambda: grids.ue8m0_encode(3), ValueError, "scale: must be an exact power of two, got 3"),
        (
            lambda: grids.ue8m0_encode(Fraction(1, 2**128)),
            ValueError,
            "scale: exponent -128 is outside the ue8m0 range [-127, 127]",
        ),
        (lambda: grids.ue8m0_encode(2**128), ValueError, "scale: exponent 128 is outside the ue8m0 range [-127, 127]"),
        (lambda: grids.power_of_two(1.5), TypeError, "exponent: must be an int, got float"),  # type: ignore[arg-type]
        (
            lambda: grids.e4m3_decode(0xFF),
            ValueError,
            "code: 0xff is a nan code of e4m3fn, which has no rational value",
        ),
        (lambda: grids.e2m1_decode(16), ValueError, "code: must be in [0, 15] for e2m1, got 16"),
    ]
)
