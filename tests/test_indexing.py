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
