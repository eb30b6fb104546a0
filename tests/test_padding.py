"""Padding rows (reference.padding): a length of -1 is a row answered as length 0, refused where a convention has no
empty lane; any other negative length is refused."""

from __future__ import annotations

from fractions import Fraction

import pytest

from reference import padding
from reference.addressing import SlotWidth
from reference.candidates import CandidateRule
from reference.conventions import PADDED_OPERATIONS, PADDING_ROWS, TOPK
from reference.score_values import NAN, POS_INF
from reference.topk import Phase, V4TopK, V41TopK, Width, topk
from tests.refusals import worded_exactly

ROW = [Fraction(3), NAN, POS_INF, Fraction(-1), Fraction(7)]


def test_the_convention_is_named_once() -> None:
    assert PADDING_ROWS["padding_row"].rule == padding.PADDING_ROW
    assert padding.PADDING_ROW.length == padding.PADDING_LENGTH == -1
    assert set(PADDED_OPERATIONS) == {"index_scores", "topk", "candidate_select", "slot_translation"}


def test_row_length() -> None:
    assert padding.row_length(-1, "lengths") == 0
    assert padding.row_length(0, "lengths") == 0
    assert padding.row_length(5, "lengths") == 5
    with pytest.raises(ValueError, match=r"^lengths: must be >= 0, or -1 for a padding row, got -2"):
        padding.row_length(-2, "lengths")
    with pytest.raises(TypeError, match=r"^lengths: must be an int"):
        padding.row_length(-1.0, "lengths")
    assert padding.is_padding(-1) and not padding.is_padding(0) and not padding.is_padding(True)


@pytest.mark.parametrize("name", list(TOPK))
def test_topk_padding_row_is_every_lane_the_fill(name: str) -> None:
    rule = TOPK[name].rule
    if padding.padding_refused(rule):
        with pytest.raises(ValueError, match=r"^lengths: a padding row \(-1\) has no answer"):
            padding.topk_row(ROW, -1, 3, rule)
        return
    lanes = padding.topk_row([None] * 5, -1, 3, rule, offset=4)  # nothing of the row is read
    assert lanes == topk([None] * 5, 0, 3, rule, offset=4)
    assert set(lanes) <= {-1, 2**31 - 1} and len(lanes) == 3


def test_candidates_slots_and_queries() -> None:
    for pin in (True, False):
        assert padding.candidate_row([None] * 5, -1, 3, 2, CandidateRule(pin_newest=pin)) == ()
    assert padding.candidate_row(ROW, 5, 3, 2) == (1, 2)  # the NaN block 0 takes a slot and is dropped
    for count_guard in (True, False):
        assert padding.slot_row([0, 1, 9], [4, 5], 4, 2, -1, count_guard) == (-1, -1, -1)
        assert padding.slot_row([0, 1, 3], [4, 5], 4, 2, 2, count_guard) == (8, 9, -1)
    with pytest.raises(ValueError, match=r"^lengths: must be <= the 3 lanes"):
        padding.slot_row([0, 1, 3], [4, 5], 4, 2, 4, True)
    assert padding.query_visible_rows(-1, 4) == 0
    assert padding.query_visible_rows(7, 4) == 2
    with pytest.raises(ValueError, match=r"^position: must be >= 0"):
        padding.query_visible_rows(-2, 4)
    with pytest.raises(ValueError, match=r"^ratio"):
        padding.query_visible_rows(-1, 0)


def test_a_row_that_is_not_padding_is_the_plain_operation() -> None:
    """A length >= 0 passes through: top-k of the visible rows 0..2 (scores 3, 1, 7) keeps rows 0 and 2, offset by
    nothing unless an offset is given; candidate selection takes the rule it is given (blocks [5, 1] and [1, 0]:
    pinned, the newest block 1 is kept; unpinned, block 0 with the larger maximum); every lane of a row may be
    live (rows 0, 1, 3 in blocks of 2 rows, table [4, 5]: slots 8, 9 and 5 * 2 + 1 = 11)."""
    fixed = V41TopK(width=Width.FIXED)
    scores = [Fraction(3), Fraction(1), Fraction(7), Fraction(5)]
    assert padding.topk_row(scores, 3, 2, fixed) == (0, 2)
    assert padding.topk_row(scores, 3, 2, fixed, offset=4) == (4, 6)
    assert padding.topk_row(scores, 3, 2, fixed, 10) == (10, 12)
    blocks = [Fraction(5), Fraction(1), Fraction(1), Fraction(0)]
    assert padding.candidate_row(blocks, 4, 1, 2) == (1,)
    assert padding.candidate_row(blocks, 4, 1, 2, CandidateRule(pin_newest=True)) == (1,)
    assert padding.candidate_row(blocks, 4, 1, 2, CandidateRule(pin_newest=False)) == (0,)
    for count_guard in (True, False):
        assert padding.slot_row([0, 1, 3], [4, 5], 4, 2, 3, count_guard) == (8, 9, 11)


DECODE = V4TopK(Phase.DECODE)
ANY_NEGATIVE = "lengths: must be >= 0, or -1 for a padding row, got -2"


test_every_refusal_is_worded_exactly = worded_exactly(
    [
        (
            lambda: padding.topk_row(ROW, -1, 3, DECODE),
            ValueError,
            "lengths: a padding row (-1) has no answer under a convention whose every lane holds a row (V4 decode)",
        ),
        (lambda: padding.topk_row(ROW, -2, 3, V41TopK()), ValueError, ANY_NEGATIVE),
        (lambda: padding.topk_row(ROW, 1.0, 3, V41TopK()), TypeError, "lengths: must be an int, got float"),  # type: ignore[arg-type]
        (lambda: padding.candidate_row(ROW, -2, 3, 2), ValueError, ANY_NEGATIVE),
        (lambda: padding.candidate_row(ROW, None, 3, 2), TypeError, "lengths: must be an int, got NoneType"),  # type: ignore[arg-type]
        (lambda: padding.slot_row([0, 1, 3], [4, 5], 4, 2, -2, True), ValueError, ANY_NEGATIVE),
        (lambda: padding.slot_row([0, 1, 3], [4, 5], 4, 2, -3, False), ValueError, ANY_NEGATIVE.replace("-2", "-3")),
        (
            lambda: padding.slot_row([0, 1, 3], [4, 5], 4, 2, 4, False),
            ValueError,
            "lengths: must be <= the 3 lanes of a row, got 4",
        ),
        (lambda: padding.query_visible_rows(1.5, 4), TypeError, "position: must be an int, got float"),  # type: ignore[arg-type]
        (lambda: padding.query_visible_rows(-2, 4), ValueError, "position: must be >= 0, got -2"),
        (lambda: padding.query_visible_rows(-1, 0), ValueError, "ratio: must be a positive integer, got 0"),
    ]
)


@pytest.mark.parametrize("count_guard", [True, False])
def test_slot_rows_in_int32(count_guard: bool) -> None:
    """The slot width reaches the translation under both guards: block 2**30 at two rows a block overflows int32."""
    assert padding.slot_row([1, 0], [2**30], 2, 1, 2, count_guard) == (2**31 + 1, 2**31)
    assert padding.slot_row([1, 0], [2**30 - 1], 2, 1, 2, count_guard, SlotWidth.INT32) == (2**31 - 1, 2**31 - 2)
    with pytest.raises(ValueError, match="overflows int32"):
        padding.slot_row([1, 0], [2**30], 2, 1, 2, count_guard, SlotWidth.INT32)
