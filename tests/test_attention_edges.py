"""reference.attention's edges: every refusal word for word, a cache of no rows, several heads with no valid
lane, values of no column, and the sink's two bounds at their exact edges. Kept apart from tests/test_attention.py,
which checks the values (docs/mutation.md)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from reference.attention import (
    LN2_ABOVE,
    NAN,
    NEG_INF,
    POS_INF,
    SINK_NEGLIGIBLE_BITS,
    VANISHING_BITS,
    HeadResult,
    sink_share,
    sparse_attention,
    valid_lanes,
)
from tests.refusals import worded_exactly


def test_no_rows_and_no_valid_lane() -> None:
    assert valid_lanes([-1, -1], 0, "minus_one_only") == () and valid_lanes([3, -4], 0, "out_of_range") == ()
    assert sparse_attention([[1, 2]], [], [-1], scale=1, sinks=[None]) == (HeadResult((0, 0), POS_INF),)  # type: ignore[arg-type]
    two_heads = sparse_attention([[1], [2]], [[1]], [-1, -1], scale=1, sinks=[None, 0], empty_row="nan")
    assert len(two_heads) == 2 and all(h.out == (NAN,) and h.lse is NAN for h in two_heads)
    assert (
        sparse_attention([[1], [2]], [[1]], [5], scale=1, sinks=[None, 0], invalid="out_of_range")
        == (HeadResult((Fraction(0),), POS_INF),) * 2
    )


def test_values_of_no_column() -> None:
    """Values with no column (value_dim 0): each head's output is empty, and its lse is still ln of the sum of the
    weights, e^1 + e^2 for the two lanes' scores 1 and 2; a rational sink takes part in neither."""
    for sink in (None, Fraction(0), Fraction(5)):
        (head,) = sparse_attention([[1]], [[1], [2]], [0, 1], scale=1, sinks=[sink], values=[[], []])
        assert head.out == ()
        assert isinstance(head.lse, Fraction)
        assert math.isclose(float(head.lse), math.log(math.exp(1) + math.exp(2)), rel_tol=1e-15)


# --- the sink's bounds (module docstring): g = sink - top, K lanes, largest |v| ----------------------------------

TOP = Fraction(1000)
"""A row maximum far from 0, so that a bound on ``sink`` alone, or on ``sink + top``, is told from one on the gap."""
NEGLIGIBLE = -SINK_NEGLIGIBLE_BITS * LN2_ABOVE
"""``g <= -200 * 0.6932 = -138.64``: the sink is left out (``"none"``)."""
TINY = Fraction(1, 10**9)


def test_sink_share_markers_and_refusal() -> None:
    assert sink_share(None, TOP, 3, Fraction(1)) == "none"
    assert sink_share(NEG_INF, TOP, 3, Fraction(1)) == "none"
    assert sink_share(POS_INF, TOP, 3, Fraction(1)) == "all"
    assert NEGLIGIBLE == Fraction(-13864, 100)


def test_sink_share_at_the_negligible_bound() -> None:
    """At ``g = -138.64`` exactly the sink is left out; just above, it is evaluated; ``g = -150``, below the bound
    (and above ``-200 / 0.6932``, a bound with the wrong operation), is left out too."""
    assert sink_share(TOP + NEGLIGIBLE, TOP, 3, Fraction(1)) == "none"
    assert sink_share(TOP + NEGLIGIBLE - TINY, TOP, 3, Fraction(1)) == "none"
    assert sink_share(TOP + NEGLIGIBLE + TINY, TOP, 3, Fraction(1)) == "evaluated"
    assert sink_share(TOP - 150, TOP, 3, Fraction(1)) == "none"
    assert sink_share(TOP, TOP, 3, Fraction(1)) == "evaluated"


@pytest.mark.parametrize(
    ("lanes", "largest", "bits"),
    [
        # K max|v| = 3/2: its ceiling 2 has bit length 2 (>= log2(3/2)); its floor 1 would give 1
        (3, Fraction(1, 2), 2),
        # K max|v| = 16: bit length 5; 4 / 4 = 1 (the quotient instead of the product) would give 1
        (4, Fraction(4), 5),
        # K max|v| = 1/3: ceiling 1, bit length 1
        (1, Fraction(1, 3), 1),
        # K max|v| = 5: bit length 3
        (1, Fraction(5), 3),
    ],
)
def test_sink_share_at_the_vanishing_bound(lanes: int, largest: Fraction, bits: int) -> None:
    """``g >= (1100 + bit length of ceil(K max|v|)) * 0.6932``: every output is below ``2^-1100`` and out is 0
    (``"all"``), from that edge on; just below it the sink is evaluated."""
    edge = (VANISHING_BITS + bits) * LN2_ABOVE
    assert sink_share(TOP + edge, TOP, lanes, largest) == "all"
    assert sink_share(TOP + edge + 1, TOP, lanes, largest) == "all"
    assert sink_share(TOP + edge - TINY, TOP, lanes, largest) == "evaluated"


def test_sink_share_when_every_value_is_zero() -> None:
    """``K max|v| = 0``: every output is 0 whatever the sink, so a sink above the row maximum (``g > 0``, however
    little) takes all; one at or below it (down to the negligible bound) is evaluated."""
    for lanes in (1, 2, 5):
        assert sink_share(TOP + TINY, TOP, lanes, Fraction(0)) == "all"
        assert sink_share(TOP + Fraction(1, 2), TOP, lanes, Fraction(0)) == "all"
        assert sink_share(TOP + 1, TOP, lanes, Fraction(0)) == "all"
        assert sink_share(TOP, TOP, lanes, Fraction(0)) == "evaluated"
        assert sink_share(TOP - 1, TOP, lanes, Fraction(0)) == "evaluated"
        assert sink_share(TOP + NEGLIGIBLE, TOP, lanes, Fraction(0)) == "none"


test_every_refusal_is_worded_exactly = worded_exactly(
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
        (
            lambda: sink_share(0.5, Fraction(0), 1, Fraction(1)),  # type: ignore[arg-type]
            ValueError,
            "sink: must be a Fraction, None or a marker, got 0.5",
        ),
    ]
)
