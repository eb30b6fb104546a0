"""Sparse attention with a sink: against a float64 numpy computation (relative tolerance 1e-12), and exact
structural properties (lane order, -1 lanes, duplicates, the sink applied once, empty rows)."""

from __future__ import annotations

import math
import random
import time
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import pytest

from reference.attention import (
    NAN,
    NEG_INF,
    POS_INF,
    VANISHING_BITS,
    HeadResult,
    Sink,
    sparse_attention,
    valid_lanes,
)
from reference.grids import FP32, round_to

RNG = random.Random(11)
TOLERANCE = 1e-12


def _rand_rows(n: int, d: int) -> list[list[Fraction]]:
    return [[Fraction(RNG.randint(-64, 64), 16) for _ in range(d)] for _ in range(n)]


def _numpy_attention(q: Any, keys: Any, lanes: Any, scale: Any, sinks: Any, values: Any = None) -> Any:
    """The formula in float64: valid lanes are those in [0, kv length); duplicates count."""
    k = np.array([[float(x) for x in row] for row in keys])
    v = k if values is None else np.array([[float(x) for x in row] for row in values])
    chosen = [j for j in lanes if 0 <= j < len(keys)]
    outs, lses = [], []
    for h, q_row in enumerate(q):
        s = float(scale) * (k[chosen] @ np.array([float(x) for x in q_row]))
        top = s.max()
        w = np.exp(s - top)
        sink = 0.0 if sinks[h] is None else math.exp(float(sinks[h]) - top)
        outs.append((w @ v[chosen]) / (w.sum() + sink))
        lses.append(top + math.log(w.sum()))
    return outs, lses


def _mp(x: object) -> mpmath.mpf:
    """An exact Fraction as an mpf at the working precision."""
    assert isinstance(x, Fraction)
    return mpmath.mpf(x.numerator) / x.denominator


def _f(x: object) -> float:
    assert isinstance(x, Fraction)
    return float(x)


def _floats(result: tuple[HeadResult, ...]) -> tuple[list[list[float]], list[float]]:
    return [[float(x) for x in r.out] for r in result], [float(r.lse) for r in result]  # type: ignore[arg-type]


@pytest.mark.parametrize("trial", range(12))
def test_matches_float64_numpy(trial: int) -> None:
    heads, d, kv_len = RNG.randint(1, 4), RNG.randint(1, 9), RNG.randint(1, 12)
    q, keys = _rand_rows(heads, d), _rand_rows(kv_len, d)
    values = _rand_rows(kv_len, RNG.randint(1, 5)) if trial % 2 else None
    lanes = [RNG.randint(-1, kv_len - 1) for _ in range(RNG.randint(1, 16))] + [0]
    sinks: list[Sink] = [None if RNG.random() < 0.3 else Fraction(RNG.randint(-40, 40), 8) for _ in range(heads)]
    scale = Fraction(1, RNG.randint(1, 8))
    got = sparse_attention(q, keys, lanes, scale=scale, sinks=sinks, values=values)
    want_out, want_lse = _numpy_attention(q, keys, lanes, scale, sinks, values)
    out, lse = _floats(got)
    np.testing.assert_allclose(np.array(out), np.array(want_out), rtol=TOLERANCE, atol=1e-300)
    np.testing.assert_allclose(lse, want_lse, rtol=TOLERANCE)


def test_second_formulation_at_higher_precision_agrees_to_45_digits() -> None:
    q, keys = _rand_rows(2, 6), _rand_rows(9, 6)
    lanes, sinks = [3, 1, 4, 1, 5, 8], [Fraction(3, 2), None]
    got = sparse_attention(q, keys, lanes, scale=Fraction(1, 3), sinks=sinks)
    with mpmath.workdps(90):
        for h in range(2):
            scores = [_mp(sum(a * b for a, b in zip(q[h], keys[j], strict=True)) / 3) for j in lanes]
            weights = [mpmath.exp(s) for s in scores]
            z = mpmath.fsum(weights)
            denom = z + (mpmath.exp(mpmath.mpf(3) / 2) if sinks[h] is not None else 0)
            for dim in range(6):
                num = mpmath.fsum(w * _mp(keys[j][dim]) for w, j in zip(weights, lanes, strict=True))
                exact = num / denom
                assert abs(_mp(got[h].out[dim]) - exact) <= mpmath.mpf(10) ** -45 * (1 + abs(exact))
            assert abs(_mp(got[h].lse) - mpmath.log(z)) <= mpmath.mpf(10) ** -45


def test_lane_order_and_minus_one_lanes_do_not_change_a_bit() -> None:
    q, keys = _rand_rows(3, 5), _rand_rows(10, 5)
    lanes = [7, 2, 2, 9, 0, 4]
    sinks: list[Sink] = [Fraction(1), None, Fraction(-2)]
    base = sparse_attention(q, keys, lanes, scale=Fraction(1, 2), sinks=sinks)
    for _ in range(10):
        shuffled = lanes + [-1] * RNG.randint(0, 4)
        RNG.shuffle(shuffled)
        assert sparse_attention(q, keys, shuffled, scale=Fraction(1, 2), sinks=sinks) == base


def test_duplicate_lanes_count_twice() -> None:
    q, keys = [[Fraction(1), Fraction(0)]], [[Fraction(2), Fraction(1)], [Fraction(0), Fraction(3)]]
    twice = sparse_attention(q, keys, [0, 0, 1], scale=1, sinks=[None])[0]
    once = sparse_attention(q, keys, [0, 1], scale=1, sinks=[None])[0]
    e2 = math.exp(2)
    assert _f(twice.out[1]) == pytest.approx((2 * e2 * 1 + 3) / (2 * e2 + 1), rel=TOLERANCE)
    assert _f(twice.lse) == pytest.approx(math.log(2 * e2 + 1), rel=TOLERANCE)
    assert twice != once


def test_sink_applied_once_and_not_in_lse() -> None:
    q, keys = _rand_rows(1, 4), _rand_rows(6, 4)
    plain = sparse_attention(q, keys, [0, 2, 5], scale=1, sinks=[None])[0]
    minus_inf = sparse_attention(q, keys, [0, 2, 5], scale=1, sinks=[NEG_INF])[0]
    sunk = sparse_attention(q, keys, [0, 2, 5], scale=1, sinks=[Fraction(1, 2)])[0]
    assert minus_inf == plain and sunk.lse == plain.lse
    with mpmath.workdps(60):
        z = mpmath.exp(_mp(plain.lse))
        factor = z / (z + mpmath.exp(mpmath.mpf(1) / 2))  # the sink enters the denominator exactly once
        for a, b in zip(sunk.out, plain.out, strict=True):
            assert abs(_mp(a) - _mp(b) * factor) < mpmath.mpf(10) ** -40
    assert sparse_attention(q, keys, [0, 2, 5], scale=1, sinks=[POS_INF])[0].out == (Fraction(0),) * 4


def test_empty_rows_under_both_conventions() -> None:
    q, keys = _rand_rows(2, 3), _rand_rows(4, 3)
    for lanes in ([], [-1, -1, -1]):
        zero = sparse_attention(q, keys, lanes, scale=1, sinks=[Fraction(2), None])
        assert all(r.out == (Fraction(0),) * 3 and r.lse is POS_INF for r in zero)
        nan = sparse_attention(q, keys, lanes, scale=1, sinks=[Fraction(2), None], empty_row="nan")
        assert all(r.out == (NAN, NAN, NAN) and r.lse is NAN for r in nan)


def test_invalid_lane_conventions() -> None:
    assert valid_lanes([3, -1, 0, 3], 4, "minus_one_only") == (0, 3, 3)
    assert valid_lanes([3, -2, 7, 0, -1, 4], 4, "out_of_range") == (0, 3)
    with pytest.raises(ValueError, match=r"^lanes\[1\]: -2 is negative but not -1"):
        valid_lanes([0, -2], 4, "minus_one_only")
    with pytest.raises(ValueError, match=r"^lanes\[0\]: 4 >= kv length 4; under minus_one_only"):
        valid_lanes([4], 4, "minus_one_only")
    q, keys = _rand_rows(1, 2), _rand_rows(4, 2)
    skipped = sparse_attention(q, keys, [1, 9, -5, 2], scale=1, sinks=[None], invalid="out_of_range")
    assert skipped == sparse_attention(q, keys, [1, 2], scale=1, sinks=[None])


def test_refusals() -> None:
    q, keys = _rand_rows(1, 2), _rand_rows(3, 2)
    with pytest.raises(ValueError, match=r"^sinks\[0\]: a NaN sink"):
        sparse_attention(q, keys, [0], scale=1, sinks=[NAN])
    with pytest.raises(ValueError, match=r"^sinks: must have one entry per head \(1\), got 2"):
        sparse_attention(q, keys, [0], scale=1, sinks=[None, None])
    with pytest.raises(TypeError, match=r"^scale: must be an int or Fraction, got float"):
        sparse_attention(q, keys, [0], scale=0.5, sinks=[None])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^keys\[1\]: must have 2 entries, got 3"):
        sparse_attention(q, [[0, 0], [0, 0, 0]], [0], scale=1, sinks=[None])
    with pytest.raises(ValueError, match=r"^empty_row: must be 'zero' or 'nan'"):
        sparse_attention(q, keys, [0], scale=1, sinks=[None], empty_row="inf")  # type: ignore[arg-type]


# --- sinks across the whole float32 range -------------------------------------------------------------------------

EXTREME_QUERY = [[Fraction(1, 4), Fraction(-1, 2)], [Fraction(3, 2), Fraction(1, 8)]]
EXTREME_KEYS = [[Fraction(1), Fraction(2)], [Fraction(-1, 4), Fraction(3, 4)], [Fraction(2), Fraction(-5, 4)]]
EXTREME_LANES = [0, 1, 2, -1, 1]


def _lse_of_first_head() -> Fraction:
    lse = sparse_attention(EXTREME_QUERY, EXTREME_KEYS, EXTREME_LANES, scale=1, sinks=[None, None])[0].lse
    assert isinstance(lse, Fraction)
    return lse


def _sink(kind: str) -> Fraction:
    """A float32 sink: 1e30, -1e30, the f32 maximum, or the first head's lse plus an offset, rounded to f32."""
    fixed = {"1e30": 1e30, "-1e30": -1e30, "f32_max": 3.4028234663852886e38, "-f32_max": -3.4028234663852886e38}
    value = fixed[kind] if kind in fixed else float(_lse_of_first_head()) + float(kind.removeprefix("lse+"))
    return Fraction(float(np.float32(value)))


def _true_out(sink: Fraction, head: int) -> list[mpmath.mpf]:
    """The head's outputs at 120 digits, straight from the formula (mpmath's exponent range is unbounded, and
    nothing is converted to a Fraction)."""
    with mpmath.workdps(120):
        q = EXTREME_QUERY[head]
        lanes = [j for j in EXTREME_LANES if j >= 0]
        weights = [mpmath.exp(_mp(sum(a * b for a, b in zip(q, EXTREME_KEYS[j], strict=True)))) for j in lanes]
        denominator = mpmath.fsum(weights) + mpmath.exp(_mp(sink))
        return [
            mpmath.fsum(w * _mp(EXTREME_KEYS[j][d]) for w, j in zip(weights, lanes, strict=True)) / denominator
            for d in range(2)
        ]


def _as_fraction(x: mpmath.mpf) -> Fraction:
    mantissa, exponent = x.man_exp
    magnitude = Fraction(abs(int(mantissa))) * Fraction(2) ** int(exponent)
    return -magnitude if x < 0 else magnitude


@pytest.mark.parametrize("kind", ["1e30", "-1e30", "lse+1000"])
def test_extreme_sink_answers_in_under_a_second(kind: str) -> None:
    """Sink 1e30, -1e30 and lse + 1000: each row answered in under a second (before the bounds, 1e30 ran out of
    memory after 31 s: e^{-1e30} as an exact Fraction has a denominator of 1.4e30 bits)."""
    sink = _sink(kind)
    start = time.perf_counter()
    got = sparse_attention(EXTREME_QUERY, EXTREME_KEYS, EXTREME_LANES, scale=1, sinks=[sink, sink])
    assert time.perf_counter() - start < 1.0
    plain = sparse_attention(EXTREME_QUERY, EXTREME_KEYS, EXTREME_LANES, scale=1, sinks=[None, None])
    assert [r.lse for r in got] == [r.lse for r in plain]
    if kind == "-1e30":
        assert got == plain  # e^{-1e30} is below 2^-200 of the sum: it leaves no trace at 50 digits
    else:
        assert all(r.out == (Fraction(0), Fraction(0)) for r in got)


@pytest.mark.parametrize("kind", ["1e30", "-1e30", "f32_max", "-f32_max", "lse+1000", "lse+760", "lse+709", "lse+88"])
def test_extreme_sink_rounds_to_the_true_value(kind: str) -> None:
    """Every output rounds, in float64 and float32, to what the formula gives at 120 digits: the bounded cases
    (0 above, the sink left out below) and the evaluated ones near both bounds (lse + 760: just below the
    vanishing bound, where out is about 2^-1096 and still evaluated)."""
    sink = _sink(kind)
    got = sparse_attention(EXTREME_QUERY, EXTREME_KEYS, EXTREME_LANES, scale=1, sinks=[sink, sink])
    for head in range(2):
        for value, true in zip(got[head].out, _true_out(sink, head), strict=True):
            assert isinstance(value, Fraction)
            with mpmath.workdps(120):
                tiny = abs(true) < mpmath.mpf(2) ** -2000
            # float(Fraction) rounds correctly (mpmath's float() does not in the float64 subnormal range)
            exact = Fraction(0) if tiny else _as_fraction(true)
            assert float(value) == float(exact)
            assert round_to(FP32, value) == round_to(FP32, exact)
            with mpmath.workdps(120):
                if value == 0:
                    assert abs(true) < mpmath.mpf(2) ** -VANISHING_BITS
                else:
                    assert abs(_mp(value) - true) <= mpmath.mpf(10) ** -45 * abs(true)
