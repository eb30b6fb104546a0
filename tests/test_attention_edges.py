"""reference.attention's edges: every refusal word for word, a cache of no rows, several heads with no valid
lane. Kept apart from tests/test_attention.py, which checks the values (docs/mutation.md)."""

from __future__ import annotations

import re
from collections.abc import Callable
from fractions import Fraction

import pytest

from reference.attention import NAN, POS_INF, HeadResult, sparse_attention, valid_lanes


def test_no_rows_and_no_valid_lane() -> None:
    assert valid_lanes([-1, -1], 0, "minus_one_only") == () and valid_lanes([3, -4], 0, "out_of_range") == ()
    assert sparse_attention([[1, 2]], [], [-1], scale=1, sinks=[None]) == (HeadResult((0, 0), POS_INF),)  # type: ignore[arg-type]
    two_heads = sparse_attention([[1], [2]], [[1]], [-1, -1], scale=1, sinks=[None, 0], empty_row="nan")
    assert len(two_heads) == 2 and all(h.out == (NAN,) and h.lse is NAN for h in two_heads)
    assert (
        sparse_attention([[1], [2]], [[1]], [5], scale=1, sinks=[None, 0], invalid="out_of_range")
        == (HeadResult((Fraction(0),), POS_INF),) * 2
    )


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: valid_lanes([0], -1, "out_of_range"), ValueError, "kv_length: must be >= 0, got -1"),
        (lambda: valid_lanes([0.5], 1, "out_of_range"), TypeError, "lanes[0]: must be an int, got float"),  # type: ignore[list-item]
        (
            lambda: valid_lanes([-2], 1, "minus_one_only"),
            ValueError,
            "lanes[0]: -2 is negative but not -1; under minus_one_only only -1 marks an invalid lane",
        ),
        (
            lambda: valid_lanes([0, 1], 1, "minus_one_only"),
            ValueError,
            "lanes[1]: 1 >= kv length 1; under minus_one_only that lane would be an out-of-bounds read",
        ),
        (
            lambda: valid_lanes([0], 1, "bogus"),  # type: ignore[arg-type]
            ValueError,
            "invalid: must be 'minus_one_only' or 'out_of_range', got 'bogus'",
        ),
        (lambda: sparse_attention([], [[1]], [0], scale=1, sinks=[]), ValueError, "q: must have at least one head"),
        (
            lambda: sparse_attention([[1, 2], [1]], [[1, 2]], [0], scale=1, sinks=[None, None]),
            ValueError,
            "q[1]: must have 2 entries, got 1",
        ),
        (
            lambda: sparse_attention([[1, 2]], [[1]], [0], scale=1, sinks=[None]),
            ValueError,
            "keys[0]: must have 2 entries, got 1",
        ),
        (
            lambda: sparse_attention([[0.5]], [[1]], [0], scale=1, sinks=[None]),  # type: ignore[list-item]
            TypeError,
            "q[0][0]: must be an int or Fraction, got float",
        ),
        (
            lambda: sparse_attention([[1]], [[1]], [0], scale=1, sinks=[None], values=[[Fraction(1, 2), 0.5]]),  # type: ignore[list-item]
            TypeError,
            "values[0][1]: must be an int or Fraction, got float",
        ),
        (
            lambda: sparse_attention([[1]], [[1]], [0], scale=1, sinks=[None], values=[[1], [2]]),
            ValueError,
            "values: must have 1 rows, got 2",
        ),
        (
            lambda: sparse_attention([[1]], [[1], [2]], [0], scale=1, sinks=[None], values=[[1], [2, 3]]),
            ValueError,
            "values: rows must all have the same length",
        ),
        (
            lambda: sparse_attention([[1]], [[1]], [0], scale=1, sinks=[None, None]),
            ValueError,
            "sinks: must have one entry per head (1), got 2",
        ),
        (
            lambda: sparse_attention([[1]], [[1]], [0], scale=0.5, sinks=[None]),  # type: ignore[arg-type]
            TypeError,
            "scale: must be an int or Fraction, got float",
        ),
        (
            lambda: sparse_attention([[1]], [[1]], [0], scale=1, sinks=[0.5]),  # type: ignore[list-item]
            TypeError,
            "sinks[0]: must be an int or Fraction, got float",
        ),
        (
            lambda: sparse_attention([[1]], [[1]], [0], scale=1, sinks=[NAN]),
            ValueError,
            "sinks[0]: a NaN sink has no defined result",
        ),
        (
            lambda: sparse_attention([[1]], [[1]], [0], scale=1, sinks=[None], empty_row="none"),  # type: ignore[arg-type]
            ValueError,
            "empty_row: must be 'zero' or 'nan', got 'none'",
        ),
        (
            lambda: sparse_attention([[1]], [[1]], [-1], scale=1, sinks=[None], empty_row="none"),  # type: ignore[arg-type]
            ValueError,
            "empty_row: must be 'zero' or 'nan', got 'none'",
        ),
    ],
)
def test_every_refusal_is_worded_exactly(call: Callable[[], object], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        call()
