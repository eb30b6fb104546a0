"""reference.indexing: exact index scores, the scale factor, and visible compressed-row counts."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import TypeAlias

import pytest
import sympy
from hypothesis import given
from hypothesis import strategies as st

from reference.indexing import (
    decode_visible_rows,
    index_scores,
    prefill_visible_rows,
    public_weight_scale,
    quantized_index_scores,
    visible_rows,
)
from reference.topk import SelectTopK, V4TopK, V41TopK, topk
from tests.refusals import worded_exactly

Problem: TypeAlias = tuple[list[list[Fraction]], list[Fraction], list[list[Fraction]]]

exact = st.one_of(
    st.integers(-6, 6),
    st.fractions(min_value=-6, max_value=6, max_denominator=4),
)


@st.composite
def problems(draw: st.DrawFn) -> Problem:
    heads = draw(st.integers(1, 3))
    dim = draw(st.integers(1, 3))
    rows = draw(st.integers(0, 6))
    q = [[Fraction(draw(exact)) for _ in range(dim)] for _ in range(heads)]
    w = [Fraction(draw(exact)) for _ in range(heads)]
    k = [[Fraction(draw(exact)) for _ in range(dim)] for _ in range(rows)]
    return q, w, k


def oracle_scores(q: list[list[Fraction]], w: list[Fraction], k: list[list[Fraction]]) -> list[Fraction]:
    """Second formulation: the full head-by-row dot matrix first, ReLU as (d + |d|) / 2, then the weighted sum."""
    dots = [[sum((a * b for a, b in zip(head, key, strict=True)), Fraction(0)) for key in k] for head in q]
    return [sum((w[h] * (dots[h][j] + abs(dots[h][j])) / 2 for h in range(len(q))), Fraction(0)) for j in range(len(k))]


def test_book_example_scores() -> None:
    # Seed 000: heads (1,0) and (0,1), weights 1 and 2; key (0,3) scores 6, key (1,1) scores 3.
    assert index_scores([(1, 0), (0, 1)], [1, 2], [(0, 3), (1, 1)]) == [6, 3]


def test_relu_cuts_each_head_before_weighting() -> None:
    # Head 0 sees -4 (cut to 0), head 1 sees 5: only head 1 contributes, with its weight 3.
    assert index_scores([(1, 0), (0, 1)], [7, 3], [(-4, 5)]) == [15]
    # A negative weight makes a positive dot product count against the row.
    assert index_scores([(1,)], [-2], [(3,)]) == [-6]


@given(problems())
def test_scores_match_second_formulation(problem: Problem) -> None:
    q, w, k = problem
    assert index_scores(q, w, k) == oracle_scores(q, w, k)


@given(problems(), st.fractions(min_value=Fraction(1, 8), max_value=8, max_denominator=8))
def test_rational_scale_multiplies_every_score(problem: Problem, scale: Fraction) -> None:
    q, w, k = problem
    assert index_scores(q, w, k, scale=scale) == [scale * s for s in oracle_scores(q, w, k)]


@given(problems(), st.fractions(min_value=Fraction(1, 8), max_value=8, max_denominator=8), st.integers(0, 7))
def test_positive_scale_keeps_every_topk_result(problem: Problem, scale: Fraction, k: int) -> None:
    q, w, keys = problem
    plain, scaled = index_scores(q, w, keys), index_scores(q, w, keys, scale=scale)
    for valid in range(len(keys) + 1):
        for convention in (V41TopK(), V4TopK(), SelectTopK()):
            assert topk(scaled, valid, k, convention) == topk(plain, valid, k, convention)


def test_public_scale_is_exact_and_irrational() -> None:
    # 128 index dims, 64 heads: 128**-1/2 * 64**-1/2 = 1 / sqrt(8192) = 1 / (64 * sqrt(2)) = sqrt(2) / 128.
    scale = public_weight_scale(128, 64)
    assert sympy.simplify(scale - sympy.sqrt(2) / 128) == 0
    assert scale.is_rational is False
    assert scale.is_positive
    # 64 dims, 4 heads: 1 / sqrt(256) = 1/16, rational.
    assert public_weight_scale(64, 4) == sympy.Rational(1, 16)


@given(problems())
def test_irrational_public_scale_keeps_the_ranking(problem: Problem) -> None:
    q, w, k = problem
    plain = index_scores(q, w, k)
    scale = public_weight_scale(128, 64)
    scaled = [scale * sympy.Rational(s.numerator, s.denominator) for s in plain]
    # Rank both lists by exact comparison (sympy decides sqrt(2) * a > sqrt(2) * b exactly), ties by index.
    order_plain = sorted(range(len(plain)), key=lambda j: (-plain[j], j))
    order_scaled = sorted(
        range(len(scaled)),
        key=lambda j: (sum(1 for s in scaled if bool(s > scaled[j])), j),
    )
    assert order_scaled == order_plain


def test_visible_rows_matches_seed_text() -> None:
    # Seed 000: for C2, query 0 sees no row, query 1 sees row 0, query 2 still sees only row 0.
    assert prefill_visible_rows(0, 3, 2) == [0, 1, 1]


@pytest.mark.parametrize("ratio", [1, 2, 4, 128])
def test_visible_rows_counts_completed_groups(ratio: int) -> None:
    for position in range(3 * ratio + 2):
        # Row j is complete once the query has passed the last position j*r + r - 1 of its group.
        completed = sum(1 for j in range(position + 1) if j * ratio + ratio - 1 <= position)
        assert visible_rows(position, ratio) == completed


def test_prefill_and_decode_counts_agree_per_position() -> None:
    for ratio in (1, 2, 4):
        for start in range(0, 9):
            for seqlen in range(0, 6):
                expected = [visible_rows(p, ratio) for p in range(start, start + seqlen)]
                assert prefill_visible_rows(start, seqlen, ratio) == expected
        # A decode step: one query per request, at that request's own position.
        assert decode_visible_rows([0, 1, 7, 8], ratio) == [visible_rows(p, ratio) for p in (0, 1, 7, 8)]


@pytest.mark.parametrize("ratio", [1, 2, 3, 4, 128])
def test_one_visible_count_per_step_is_not_the_per_query_count(ratio: int) -> None:
    """The public V4.1 decode gives every query of a step of q positions ``end_pos // ratio`` rows; the contract
    counts per query (a verify step counts like a prefill chunk). For q = 1 they agree at every position; for
    every q >= 2 they disagree exactly where a position of the step after its first completes a row (at
    ratio 1: always), and every row the step-wide count adds for a query was completed by a later position of
    that same step."""
    for q in range(1, 17):
        disagreements = 0
        for start in range(0, 3 * ratio + 17):
            per_query = prefill_visible_rows(start, q, ratio)
            public = (start + q) // ratio
            completes_inside = any((p + 1) % ratio == 0 for p in range(start + 1, start + q))
            assert (per_query == [public] * q) is not completes_inside
            disagreements += completes_inside
            for p, seen in zip(range(start, start + q), per_query, strict=True):
                assert seen <= public
                assert all(p < (j + 1) * ratio - 1 < start + q for j in range(seen, public))
        assert (disagreements == 0) is (q == 1)
        if ratio == 1 and q > 1:
            assert disagreements == 3 * ratio + 17  # every start


def test_deepinfer_metadata_formula() -> None:
    # prepare_tensor_input_v4.cpp: for j in [seqlen_k - seqlen_q, seqlen_k): klen = (j + 1) / r.
    for seqlen_k, seqlen_q in [(5, 5), (9, 2), (16, 1)]:
        expected = [(j + 1) // 4 for j in range(seqlen_k - seqlen_q, seqlen_k)]
        assert prefill_visible_rows(seqlen_k - seqlen_q, seqlen_q, 4) == expected


def e4m3_by_fields(code: int) -> Fraction:
    """A second e4m3fn decoding, from its fields: (-1)^s 2^(e - 7) (1 + m / 8), subnormal 2^-6 m / 8 at e = 0."""
    sign, exponent, mantissa = code >> 7, (code >> 3) & 0xF, code & 0x7
    magnitude = (
        Fraction(mantissa, 8) * Fraction(1, 64)
        if exponent == 0
        else Fraction(8 + mantissa, 8) * Fraction(2) ** (exponent - 7)
    )
    return -magnitude if sign else magnitude


finite_codes = st.integers(0, 255).filter(lambda c: c & 0x7F != 0x7F)
positive = st.fractions(min_value=Fraction(1, 1024), max_value=64, max_denominator=1024)


@st.composite
def quantized_problems(
    draw: st.DrawFn,
) -> tuple[list[list[int]], list[Fraction], list[Fraction], list[list[int]], list[Fraction]]:
    heads, dim, rows = draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(0, 5))
    q = [[draw(finite_codes) for _ in range(dim)] for _ in range(heads)]
    k = [[draw(finite_codes) for _ in range(dim)] for _ in range(rows)]
    q_scales = [draw(positive) for _ in range(heads)]
    k_scales = [Fraction(draw(exact)) for _ in range(rows)]
    return q, q_scales, [Fraction(draw(exact)) for _ in range(heads)], k, k_scales


@given(quantized_problems())
def test_quantized_scores_are_the_scores_of_the_decoded_values(problem) -> None:  # type: ignore[no-untyped-def]
    q, q_scales, w, k, k_scales = problem
    queries = [[s * e4m3_by_fields(c) for c in head] for head, s in zip(q, q_scales, strict=True)]
    keys = [[s * e4m3_by_fields(c) for c in row] for row, s in zip(k, k_scales, strict=True)]
    assert quantized_index_scores(q, q_scales, w, k, k_scales) == oracle_scores(queries, w, keys)


@given(quantized_problems())
def test_query_scales_fold_into_the_weights(problem) -> None:  # type: ignore[no-untyped-def]
    """relu(s x) = s relu(x) for s > 0: the FP8 kernels' folding of the query scales is exact."""
    q, q_scales, w, k, k_scales = problem
    folded = [weight * s for weight, s in zip(w, q_scales, strict=True)]
    assert quantized_index_scores(q, q_scales, w, k, k_scales) == quantized_index_scores(
        q, [1] * len(q), folded, k, k_scales
    )


def test_quantized_scores_cover_subnormal_and_largest_codes() -> None:
    """0x01 is 2^-9, 0x7e is 448, 0x80 is -0; head scale 2, key scales 1 and 1/2."""
    scores = quantized_index_scores([[0x01, 0x7E]], [2], [1], [[0x7E, 0x01], [0x80, 0x7E]], [1, Fraction(1, 2)])
    assert scores == [2 * (Fraction(448, 512) + Fraction(448, 512)), 2 * Fraction(1, 2) * 448 * 448]


@pytest.mark.parametrize(
    ("call", "error", "argument"),
    [
        (lambda: index_scores([(1, 0), (0, 1)], [1], [(1, 1)]), ValueError, "weights"),
        (lambda: index_scores([(1, 0), (0, 1)], [1, 2, 3], [(1, 1)]), ValueError, "weights"),
        (lambda: index_scores([(1, 0), (0, 1, 2)], [1, 2], [(1, 1)]), ValueError, r"queries\[1\]"),
        (lambda: index_scores([(1, 0)], [1], [(1, 1), (1,)]), ValueError, r"keys\[1\]"),
        (lambda: index_scores([], [], [(1,)]), ValueError, "queries"),
        (lambda: index_scores([(1, 0)], [1], [(1, 0.5)]), TypeError, r"keys\[0\]\[1\]"),
        (lambda: index_scores([(1, 0)], [True], [(1, 0)]), TypeError, r"weights\[0\]"),
        (lambda: index_scores([(1, 0)], [1], [(1, 0)], scale=0), ValueError, "scale"),
        (lambda: index_scores([(1, 0)], [1], [(1, 0)], scale=-1), ValueError, "scale"),
        (lambda: visible_rows(3, 0), ValueError, "ratio"),
        (lambda: visible_rows(-1, 2), ValueError, "position"),
        (lambda: prefill_visible_rows(0, -1, 2), ValueError, "seqlen"),
        (lambda: decode_visible_rows([3, -2], 2), ValueError, r"positions\[1\]"),
        (lambda: public_weight_scale(0, 64), ValueError, "index_head_dim"),
    ],
)
def test_bad_input_names_the_argument(call: Callable[[], object], error: type[Exception], argument: str) -> None:
    with pytest.raises(error, match=f"^{argument}"):
        call()


# --- every refusal worded exactly (docs/mutation.md) ------------------------------------------------------------


test_every_refusal_is_worded_exactly = worded_exactly(
    [
        (
            lambda: quantized_index_scores([[0x7F]], [1], [1], [[1]], [1]),
            ValueError,
            "q_codes[0][0]: must be a finite e4m3fn code (0..255 but 0x7f / 0xff), got 127",
        ),
        (
            lambda: quantized_index_scores([[1]], [1], [1], [[1, 0xFF]], [1]),
            ValueError,
            "k_codes[0][1]: must be a finite e4m3fn code (0..255 but 0x7f / 0xff), got 255",
        ),
        (
            lambda: quantized_index_scores([[1]], [1], [1], [[256]], [1]),
            ValueError,
            "k_codes[0][0]: must be a finite e4m3fn code (0..255 but 0x7f / 0xff), got 256",
        ),
        (
            lambda: quantized_index_scores([[1]], [1], [1], [[-1]], [1]),
            ValueError,
            "k_codes[0][0]: must be a finite e4m3fn code (0..255 but 0x7f / 0xff), got -1",
        ),
        (
            lambda: quantized_index_scores([[1.0]], [1], [1], [[1]], [1]),  # type: ignore[list-item]
            TypeError,
            "q_codes[0][0]: must be an int, got float",
        ),
        (
            lambda: quantized_index_scores([[1]], [0.5], [1], [[1]], [1]),
            TypeError,
            "q_scales[0]: must be an int or Fraction, got float",
        ),
        (
            lambda: quantized_index_scores([[1]], [1], [1], [[1]], [0.5]),
            TypeError,
            "k_scales[0]: must be an int or Fraction, got float",
        ),
        (
            lambda: quantized_index_scores([[1]], [0], [1], [[1]], [1]),
            ValueError,
            "q_scales[0]: must be positive (a query scale folds into the head weight), got 0",
        ),
        (
            lambda: quantized_index_scores([[1]], [1, 2], [1], [[1]], [1]),
            ValueError,
            "q_scales: must have length 1 (one scale per query head), got 2",
        ),
        (
            lambda: quantized_index_scores([[1]], [1], [1], [[1]], []),
            ValueError,
            "k_scales: must have length 1 (one scale per key row), got 0",
        ),
        (lambda: index_scores([], [], []), ValueError, "queries: must hold at least one head"),
        (
            lambda: index_scores([[1, 2], [1]], [1, 1], [[1, 2]]),
            ValueError,
            "queries[1]: must have length 2 (the index head dimension), got 1",
        ),
        (
            lambda: index_scores([[1, 2]], [1, 1], [[1, 2]]),
            ValueError,
            "weights: must have length 1 (one weight per query head), got 2",
        ),
        (
            lambda: index_scores([[1, 2]], [0.5], [[1, 2]]),
            TypeError,
            "weights[0]: must be an int or Fraction, got float",
        ),
        (
            lambda: index_scores([[1, 2]], [1], [[1]]),
            ValueError,
            "keys[0]: must have length 2 (the index head dimension), got 1",
        ),
        (
            lambda: index_scores([[1, 2]], [1], [[1, 0.5]]),
            TypeError,
            "keys[0][1]: must be an int or Fraction, got float",
        ),
        (
            lambda: index_scores([[1, 2]], [1], [[1, 2]], scale=0),
            ValueError,
            "scale: must be positive (a positive factor keeps the ranking), got 0",
        ),
        (
            lambda: index_scores([[1, 2]], [1], [[1, 2]], scale=0.5),
            TypeError,
            "scale: must be an int or Fraction, got float",
        ),
        (lambda: public_weight_scale(0, 64), ValueError, "index_head_dim: must be a positive integer, got 0"),
        (lambda: public_weight_scale(128, 0), ValueError, "n_heads: must be a positive integer, got 0"),
        (lambda: visible_rows(-1, 2), ValueError, "position: must be >= 0, got -1"),
        (lambda: visible_rows(1, 0), ValueError, "ratio: must be a positive integer, got 0"),
        (lambda: prefill_visible_rows(-1, 2, 2), ValueError, "start_pos: must be >= 0, got -1"),
        (lambda: prefill_visible_rows(0, -1, 2), ValueError, "seqlen: must be >= 0, got -1"),
        (lambda: prefill_visible_rows(0, 2, 0), ValueError, "ratio: must be a positive integer, got 0"),
        (lambda: decode_visible_rows([1], 0), ValueError, "ratio: must be a positive integer, got 0"),
        (lambda: decode_visible_rows([1, -1], 2), ValueError, "positions[1]: must be >= 0, got -1"),
    ]
)
