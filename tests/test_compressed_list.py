"""reference.compressed_list: every visible compressed row, the index list of a V4 layer without an indexer."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference.compressed_list import compressed_indices
from reference.indexing import visible_rows
from reference.topk import Phase, V4TopK, topk


def public_v4(ratio: int, seqlen: int, start_pos: int, offset: int) -> list[list[int]]:
    """The public V4 ``get_compress_topk_idxs`` for one request, read line by line and written as plain Python:
    decode (``start_pos > 0``) ``arange(0, (start_pos + 1) // ratio) + offset``; prefill ``arange(seqlen //
    ratio)`` per query, ``-1`` where the lane ``>= arange(1, seqlen + 1) // ratio``, else plus ``offset``."""
    if start_pos > 0:
        return [[j + offset for j in range((start_pos + 1) // ratio)]]
    return [[-1 if j >= (i + 1) // ratio else j + offset for j in range(seqlen // ratio)] for i in range(seqlen)]


@pytest.mark.parametrize("ratio", [1, 2, 4, 128])
def test_public_branches(ratio: int) -> None:
    """Prefill from 0 and one-token decode are the public code's two branches exactly."""
    for seqlen in [*range(0, 10), ratio - 1, ratio, ratio + 1, 2 * ratio, 3 * ratio - 1]:
        got = compressed_indices(ratio, seqlen, 0, offset=seqlen)
        assert [list(row) for row in got] == public_v4(ratio, seqlen, 0, seqlen)
    for start in [1, 2, 3, ratio - 2, ratio - 1, ratio, 2 * ratio - 1, 5 * ratio + 3]:
        if start > 0:
            assert [list(row) for row in compressed_indices(ratio, 1, start, 128)] == public_v4(ratio, 1, start, 128)


def test_ratio_128_by_hand() -> None:
    rows = compressed_indices(128, 300, 0, offset=300)
    assert len(rows) == 300 and {len(r) for r in rows} == {2}
    assert rows[126] == (-1, -1)  # position 126 has completed nothing
    assert rows[127] == (300, -1)  # position 127 completes row 0 and sees it
    assert rows[254] == (300, -1)
    assert rows[255] == rows[299] == (300, 301)
    assert compressed_indices(128, 1, 126, offset=128) == ((),)  # decode before the first row: no lane
    assert compressed_indices(128, 1, 127, offset=128) == ((128,),)
    assert compressed_indices(128, 1, 1000, offset=128) == (tuple(range(128, 135)),)  # 1001 // 128 = 7 rows
    assert compressed_indices(128, 0, 0) == () and compressed_indices(128, 0, 500) == ()
    assert compressed_indices(2, 3, 0) == ((-1,), (0,), (0,))  # offset 0 by default


def test_a_verify_step_counts_per_query() -> None:
    """Positions 126, 127, 128 in one step: the first query has completed no row yet. The public V4.1 rule (one
    visible count for the step, end_pos // ratio = 1) would let it see row 0, completed by position 127."""
    assert compressed_indices(128, 3, 126, offset=10) == ((-1,), (10,), (10,))
    assert compressed_indices(1, 4, 3, offset=0) == ((0, 1, 2, 3, -1, -1, -1), (0, 1, 2, 3, 4, -1, -1),
                                                     (0, 1, 2, 3, 4, 5, -1), (0, 1, 2, 3, 4, 5, 6))  # fmt: skip


@given(st.sampled_from([1, 2, 3, 4, 128]), st.integers(0, 20), st.integers(0, 300), st.integers(0, 2**31))
def test_every_visible_row_and_nothing_else(ratio: int, seqlen: int, start: int, offset: int) -> None:
    """Row i lists, ascending and offset, exactly the rows completed by a position <= its own; then -1."""
    rows = compressed_indices(ratio, seqlen, start, offset)
    width = (start + seqlen) // ratio
    assert len(rows) == seqlen
    for i, row in enumerate(rows):
        p = start + i
        listed = [lane - offset for lane in row if lane != -1]
        assert listed == [j for j in range(width) if (j + 1) * ratio - 1 <= p]
        assert list(row) == [j + offset for j in listed] + [-1] * (width - len(listed))
        assert len(listed) == visible_rows(p, ratio)


@given(st.sampled_from([1, 2, 3, 4, 128]), st.integers(0, 12), st.integers(0, 300), st.integers(0, 99))
def test_equals_the_v4_topk_over_equal_scores(ratio: int, seqlen: int, start: int, offset: int) -> None:
    """A caller without this function builds the list as the V4 top-k over a row of equal scores with k at least
    the width: prefill lanes for any query; the decode convention (the row holds exactly the visible rows) for a
    query that sees the whole width."""
    width = (start + seqlen) // ratio
    equal = [0] * width
    for i, row in enumerate(compressed_indices(ratio, seqlen, start, offset)):
        seen = visible_rows(start + i, ratio)
        assert row == topk(equal, seen, width + 3, V4TopK(Phase.PREFILL), offset)
        if seen == width:
            assert row == topk(equal, seen, width, V4TopK(Phase.DECODE), offset)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0, 1, 0, 0), "ratio: must be a positive integer, got 0"),
        ((-128, 1, 0, 0), "ratio: must be a positive integer, got -128"),
        ((128, -1, 0, 0), "seqlen: must be >= 0, got -1"),
        ((128, 1, -1, 0), "start_pos: must be >= 0, got -1"),
        ((128, 1, 0, -1), "offset: must be >= 0, got -1"),
    ],
)
def test_bad_input_names_the_argument(args: tuple[int, int, int, int], message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        compressed_indices(*args)
    with pytest.raises(TypeError, match=r"^ratio: must be an int, got float$"):
        compressed_indices(128.0, 1, 0)  # type: ignore[arg-type]
