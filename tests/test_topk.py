"""reference.topk: valid-prefix top-k under the V4.1, V4 and select-style conventions."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from fractions import Fraction

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from reference.checks import INT32_MAX, INT32_MIN
from reference.score_values import NAN, NEG_INF, POS_INF, Special, format_score, format_scores, require_score, score_max
from reference.topk import (
    LaneLayout,
    MaskedLanes,
    Phase,
    SelectTopK,
    TopKConvention,
    V4TopK,
    V41TopK,
    Width,
    chosen_rows,
    lane_layout,
    ranked_rows,
    topk,
    valid_prefix,
)
from tests.indexing_oracles import Poison, chosen_set, in_rank_order
from tests.refusals import worded_exactly

finite = st.one_of(st.integers(-3, 3), st.fractions(min_value=-3, max_value=3, max_denominator=2))
prefix_value = st.one_of(finite, finite, finite, st.just(NEG_INF), st.just(POS_INF), st.just(NAN))
garbage = st.sampled_from([None, NAN, POS_INF, NEG_INF, float("nan"), float("inf"), "garbage", 10**9, Poison()])


@st.composite
def rows(draw: st.DrawFn, values: st.SearchStrategy[object] = prefix_value) -> tuple[list[object], int]:
    """A score row: a valid prefix of exact scores followed by garbage that must never be read."""
    valid = draw(st.integers(0, 7))
    tail = draw(st.integers(0, 3))
    return [draw(values) for _ in range(valid)] + [draw(garbage) for _ in range(tail)], valid


ks = st.integers(0, 9)
offsets = st.integers(0, 50)

ALL_CONVENTIONS = [
    V41TopK(),
    V41TopK(width=Width.FIXED),
    V41TopK(masked_lanes=MaskedLanes.EXCLUDED),
    V41TopK(Width.FIXED, MaskedLanes.EXCLUDED),
    V4TopK(Phase.PREFILL),
    SelectTopK(),
    SelectTopK(fill=-1),
    SelectTopK(sorted_index=False),
    SelectTopK(fill=-7, sorted_index=False, masked_lanes=MaskedLanes.EXCLUDED),
]


# --- selection: the chosen set, the tie rule, the rank order ---------------------------------------------------


@given(rows(), ks)
def test_chosen_set_is_the_unique_winner_of_brute_force(row: tuple[list[object], int], k: int) -> None:
    scores, valid = row
    assert frozenset(chosen_rows(scores, valid, k)) == chosen_set(scores, valid, k)
    excluded = chosen_rows(scores, valid, k, MaskedLanes.EXCLUDED)
    assert frozenset(excluded) == chosen_set(scores, valid, k, exclude_neg_inf=True)


@given(rows(values=st.integers(-3, 3)), st.integers(0, 7))
def test_chosen_rows_have_the_best_total_of_every_subset(row: tuple[list[object], int], k: int) -> None:
    # The book's check: no k-subset of valid rows has a larger total score.
    scores, valid = row
    ints = [s for s in scores[:valid] if isinstance(s, int)]
    assert len(ints) == valid
    chosen = chosen_rows(scores, valid, k)
    size = min(k, valid)
    assert len(chosen) == size
    best = max(sum(ints[i] for i in subset) for subset in itertools.combinations(range(valid), size))
    assert sum(ints[i] for i in chosen) == best


@given(rows())
def test_ranking_is_descending_with_lowest_index_first_among_ties(row: tuple[list[object], int]) -> None:
    scores, valid = row
    ranked = ranked_rows(scores, valid)
    assert sorted(ranked) == list(range(valid))
    assert in_rank_order(ranked, scores)


def test_tie_rule_lowest_index_wins() -> None:
    assert topk([5, 5, 5, 5], 4, 2, V41TopK()) == (0, 1)
    assert topk([1, 5, 5, 5], 4, 2, V4TopK()) == (1, 2)
    assert topk([5, 7, 5, 7], 4, 3, SelectTopK(sorted_index=False)) == (1, 3, 0)
    assert topk([NEG_INF, NEG_INF, 1], 3, 2, V4TopK()) == (2, 0)


def test_rank_order_of_markers_matches_torch_topk() -> None:
    # Distinct values, so torch's order is fully determined: NaN above +inf above numbers above -inf.
    values: list[int | Fraction | Special] = [3, NEG_INF, NAN, Fraction(-1, 2), POS_INF, 0]
    as_float = [float(str(v.value)) if isinstance(v, Special) else float(v) for v in values]
    expected = torch.tensor(as_float, dtype=torch.float64).topk(len(values)).indices.tolist()
    assert list(ranked_rows(values, len(values))) == expected


# --- V4.1 ------------------------------------------------------------------------------------------------------


@given(rows(), ks, offsets, st.sampled_from(list(Width)), st.sampled_from(list(MaskedLanes)))
def test_v41_lanes(row: tuple[list[object], int], k: int, offset: int, width: Width, masked: MaskedLanes) -> None:
    scores, valid = row
    lanes = topk(scores, valid, k, V41TopK(width, masked), offset)
    expected_width = min(k, len(scores)) if width is Width.CLAMPED else k
    assert len(lanes) == expected_width
    real = [lane for lane in lanes if lane != -1]
    # Real lanes first, ascending by index, each offset; -1 lanes only at the end.
    assert list(lanes) == real + [-1] * (len(lanes) - len(real))
    assert real == sorted(real)
    expected = chosen_set(scores, valid, k, exclude_neg_inf=masked is MaskedLanes.EXCLUDED)
    assert {lane - offset for lane in real} == expected
    assert all(0 <= lane - offset < valid for lane in real)


def test_v41_width_choices() -> None:
    scores = [4, 3, 2]
    assert topk(scores, 1, 5, V41TopK()) == (0, -1, -1)  # min(k, row length) = 3 lanes
    assert topk(scores, 1, 5, V41TopK(width=Width.FIXED)) == (0, -1, -1, -1, -1)


def test_v41_offset_only_on_valid_lanes() -> None:
    # Seed 000: prefill at gathered offset 10 turns rows 1 and 2 into 11 and 12.
    assert topk([2, 6, 3, 0, 300], 4, 2, V41TopK(), offset=10) == (11, 12)
    assert topk([2, 6, 3], 1, 3, V41TopK(), offset=10) == (10, -1, -1)


def test_v41_matches_a_torch_transcription_of_seed_002() -> None:
    # Seed 002: scores past the visible count masked to -inf, topk(min(index_topk, L), sorted=False), sorted by
    # index, lanes >= compress_lens -> -1, others + offset. Distinct finite scores: torch's choice is unique.
    row = [5, -1, 7, 2, 9, 4, 8, 0]
    for valid in range(len(row) + 1):
        for k in range(0, 10):
            logits = torch.tensor(row, dtype=torch.float64)
            logits[valid:] = float("-inf")
            width = min(k, len(row))
            idxs = logits.topk(width, sorted=False).indices.sort().values
            expected = torch.where(idxs < valid, idxs + 3, -1).tolist()
            # Past the valid rows torch picks among tied -inf lanes, but every such pick becomes a trailing -1.
            assert list(topk(row, valid, k, V41TopK(), offset=3)) == expected


def test_v41_neg_inf_valid_lanes_are_chosen_unless_excluded() -> None:
    # Rows 1 and 3 are masked (-inf) but visible; k exceeds the finite rows.
    scores = [4, NEG_INF, 2, NEG_INF, 9, None]
    assert topk(scores, 5, 4, V41TopK()) == (0, 1, 2, 4)  # lowest masked index fills the fourth lane
    assert topk(scores, 5, 4, V41TopK(masked_lanes=MaskedLanes.EXCLUDED)) == (0, 2, 4, -1)
    assert topk(scores, 5, 5, V41TopK()) == (0, 1, 2, 3, 4)


# --- V4 --------------------------------------------------------------------------------------------------------


@given(rows(), ks, offsets)
def test_v4_prefill_lanes(row: tuple[list[object], int], k: int, offset: int) -> None:
    scores, valid = row
    lanes = topk(scores, valid, k, V4TopK(Phase.PREFILL), offset)
    assert len(lanes) == min(k, len(scores))
    real = [lane - offset for lane in lanes if lane != -1]
    assert list(lanes) == [r + offset for r in real] + [-1] * (len(lanes) - len(real))
    assert set(real) == chosen_set(scores, valid, k)
    assert in_rank_order(real, scores)


@given(rows(values=prefix_value), ks, offsets)
def test_v4_decode_has_no_minus_one(row: tuple[list[object], int], k: int, offset: int) -> None:
    scores, valid = row
    scores = scores[:valid]  # a V4 decode row holds exactly the visible rows
    lanes = topk(scores, valid, k, V4TopK(Phase.DECODE), offset)
    assert len(lanes) == min(k, valid)
    assert -1 not in lanes
    assert in_rank_order([lane - offset for lane in lanes], scores)


def test_v4_decode_rejects_rows_past_the_visible_count() -> None:
    with pytest.raises(ValueError, match=r"^valid"):
        topk([1, 2, 3], 2, 2, V4TopK(Phase.DECODE))


# --- select-style ----------------------------------------------------------------------------------------------


@given(rows(), ks, offsets, st.sampled_from([INT32_MAX, -1, -5]), st.booleans(), st.sampled_from(list(MaskedLanes)))
def test_select_lanes(
    row: tuple[list[object], int], k: int, offset: int, fill: int, sorted_index: bool, masked: MaskedLanes
) -> None:
    scores, valid = row
    convention = SelectTopK(fill=fill, sorted_index=sorted_index, masked_lanes=masked)
    lanes = topk(scores, valid, k, convention, offset)
    assert len(lanes) == k
    real = [lane for lane in lanes if lane != fill]
    assert list(lanes) == real + [fill] * (k - len(real))  # fill lanes trail and are never offset
    rows_ = [lane - offset for lane in real]
    assert set(rows_) == chosen_set(scores, valid, k, exclude_neg_inf=masked is MaskedLanes.EXCLUDED)
    if sorted_index:
        assert rows_ == sorted(rows_)
    else:
        assert in_rank_order(rows_, scores)


def test_select_defaults() -> None:
    assert INT32_MAX == 2**31 - 1
    assert SelectTopK() == SelectTopK(fill=2**31 - 1, sorted_index=True, masked_lanes=MaskedLanes.ELIGIBLE)
    # Seed 000: one valid row, three output slots.
    assert topk([2, 6, 3, 0, 300], 1, 3, SelectTopK(fill=-1)) == (0, -1, -1)
    assert topk([2, 6, 3], 1, 3, SelectTopK(), offset=5) == (5, INT32_MAX, INT32_MAX)


@pytest.mark.parametrize(
    ("scores", "offset", "fill", "lanes"),
    [
        ([1, 2, 3], 0, 3, (1, 0, 3)),  # fill = offset + len(scores): the first value no row lane can take
        ([4, 9], 5, 7, (6, 5, 7)),
        ([], 0, 0, (0, 0, 0)),  # no row at all: even 0 cannot be mistaken for one
        ([1, 2, 3], 0, -1, (1, 0, -1)),
        ([1, 2, 3], 4, INT32_MIN, (5, 4, INT32_MIN)),
    ],
)
def test_select_fill_at_the_bounds_is_accepted(scores: list[int], offset: int, fill: int, lanes: tuple[int]) -> None:
    assert topk(scores, min(len(scores), 2), 3, SelectTopK(fill=fill, sorted_index=False), offset) == lanes


@pytest.mark.parametrize(
    ("length", "offset", "fill"),
    [(3, 0, 0), (3, 0, 2), (2, 5, 6), (2, 5, 0), (2, 5, 5), (1, 0, 0)],
)
def test_select_fill_that_a_row_lane_can_hold_is_refused(length: int, offset: int, fill: int) -> None:
    """``0 <= fill < offset + len(scores)`` could be read as a row: 0, the last row lane and the offset itself."""
    message = (
        "fill: must not collide with a row lane: use a negative value or one >= offset + len(scores) = "
        f"{offset + length}, got {fill}"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        topk(list(range(length)), length, 1, SelectTopK(fill=fill), offset)


# --- every convention: past-the-end storage, empty ranges, k = 0 ----------------------------------------------


@pytest.mark.parametrize("convention", ALL_CONVENTIONS, ids=repr)
@given(row=rows(), k=ks)
def test_storage_past_the_valid_end_never_matters(
    convention: TopKConvention, row: tuple[list[object], int], k: int
) -> None:
    scores, valid = row
    clean = list(scores[:valid]) + [0] * (len(scores) - valid)
    poisoned = list(scores[:valid]) + [Poison()] * (len(scores) - valid)
    nan_filled = list(scores[:valid]) + [NAN] * (len(scores) - valid)
    huge = list(scores[:valid]) + [POS_INF] * (len(scores) - valid)
    results = {topk(s, valid, k, convention, 1) for s in (scores, clean, poisoned, nan_filled, huge)}
    assert len(results) == 1


@pytest.mark.parametrize("convention", ALL_CONVENTIONS, ids=repr)
def test_all_invalid_row_gives_only_fill(convention: TopKConvention) -> None:
    scores = [POS_INF, NAN, 300]
    lanes = topk(scores, 0, 2, convention, offset=4)
    fill = convention.fill if isinstance(convention, SelectTopK) else -1
    assert lanes == (fill, fill)


@pytest.mark.parametrize("convention", [*ALL_CONVENTIONS, V4TopK(Phase.DECODE)], ids=repr)
def test_k_zero_is_empty(convention: TopKConvention) -> None:
    assert topk([1, 2, 3], 3, 0, convention) == ()


def test_empty_row() -> None:
    assert topk([], 0, 3, V41TopK()) == ()
    assert topk([], 0, 3, V41TopK(width=Width.FIXED)) == (-1, -1, -1)
    assert topk([], 0, 2, V4TopK(Phase.DECODE)) == ()


def test_nan_in_the_valid_prefix_ranks_first() -> None:
    assert topk([1, NAN, 5], 3, 1, V4TopK()) == (1,)
    assert topk([1, NAN, POS_INF, 5], 4, 3, V4TopK()) == (1, 2, 3)


# --- bad input -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "argument"),
    [
        (lambda: topk([1, 2], 2, -1, V41TopK()), ValueError, "k"),
        (lambda: topk([1, 2], 3, 1, V41TopK()), ValueError, "valid"),
        (lambda: topk([1, 2], -1, 1, V41TopK()), ValueError, "valid"),
        (lambda: topk([1, 2], 2, 1, V41TopK(), offset=-1), ValueError, "offset"),
        (lambda: topk([1, 0.5], 2, 1, V41TopK()), TypeError, r"scores\[1\]"),
        (lambda: topk([1, None], 2, 1, V41TopK()), TypeError, r"scores\[1\]"),
        (lambda: topk([1, 2], 2, 1, SelectTopK(fill=1)), ValueError, "fill"),
        (lambda: topk([1, 2], 2, 1, SelectTopK(fill=11), offset=10), ValueError, "fill"),
        (lambda: topk([1, 2], 2, 1, "v4.1"), ValueError, "convention"),  # type: ignore[arg-type]
        (lambda: chosen_rows([1, 2], 2, -2), ValueError, "k"),
    ],
)
def test_bad_input_names_the_argument(call: Callable[[], object], error: type[Exception], argument: str) -> None:
    with pytest.raises(error, match=f"^{argument}"):
        call()


# --- every refusal worded exactly (docs/mutation.md) ------------------------------------------------------------


test_every_refusal_is_worded_exactly = worded_exactly(
    [
        (lambda: lane_layout(SelectTopK(fill=1.5)), TypeError, "fill: must be an int, got float"),  # type: ignore[arg-type]
        (lambda: lane_layout("v4.1"), ValueError, "convention: must be V41TopK, V4TopK or SelectTopK, got str"),  # type: ignore[arg-type]
        (
            lambda: topk([1, 2], 3, 1, V41TopK()),
            ValueError,
            "valid: must be <= len(scores) = 2 (the row length), got 3",
        ),
        (
            lambda: topk([1, 2, 3], 2, 1, V4TopK(Phase.DECODE)),
            ValueError,
            "valid: V4 decode scores exactly the visible rows, so valid must equal len(scores) = 3, got 2",
        ),
        (lambda: valid_prefix([1, 2], -1), ValueError, "valid: must be >= 0, got -1"),
        (lambda: chosen_rows([1, 2], 2, -1), ValueError, "k: must be >= 0, got -1"),
        (lambda: topk([1, 2], 2, 1, V41TopK(), offset=-1), ValueError, "offset: must be >= 0, got -1"),
        (lambda: require_score(0.5, "s"), TypeError, "s: must be an int, Fraction, NEG_INF, POS_INF or NAN, got float"),
        (lambda: require_score(True, "s"), TypeError, "s: must be an int, Fraction, NEG_INF, POS_INF or NAN, got bool"),
        (
            lambda: require_score(None, "s"),
            TypeError,
            "s: must be an int, Fraction, NEG_INF, POS_INF or NAN, got NoneType",
        ),
    ]
)


def test_lane_layouts_exactly() -> None:
    assert lane_layout(V4TopK()) == LaneLayout(False, False, -1, False)
    assert lane_layout(V4TopK(Phase.DECODE)) == LaneLayout(False, False, -1, True)
    assert lane_layout(V41TopK()) == LaneLayout(True, False, -1) and lane_layout(V41TopK(Width.FIXED)).fixed is True
    assert lane_layout(SelectTopK(fill=-7, sorted_index=False)) == LaneLayout(False, True, -7)
    layout = lane_layout(V4TopK())
    assert layout.index_order is False and layout.fixed is False and layout.whole_row is False


def test_scores_are_written_like_python_numbers() -> None:
    assert [format_score(v) for v in (Fraction(6), Fraction(3, 2), Fraction(-1, 4))] == ["6", "3/2", "-1/4"]
    assert [format_score(v) for v in (NEG_INF, POS_INF, NAN)] == ["-inf", "+inf", "nan"]
    assert format_scores([Fraction(2), Fraction(6), POS_INF]) == "[2, 6, +inf]" and format_scores([]) == "[]"
    assert score_max([]) is NEG_INF and score_max([Fraction(1), NAN, POS_INF]) is NAN
    assert score_max([Fraction(1), POS_INF, Fraction(7)]) is POS_INF and score_max([Fraction(1), Fraction(3)]) == 3
