"""The compressed index list of a layer without an indexer: every compressed row a query can see (V4 ratio 128).

A V4 layer of ratio 128 has no indexer: each query attends to all the compressed rows it can see, listed by the
public V4 code's ``get_compress_topk_idxs``. For the queries at positions ``start_pos .. start_pos + seqlen - 1``
(``offset``: where the compressed rows begin in the attention's key list, after the window's entries):

* width: ``(start_pos + seqlen) // ratio`` lanes, the rows the last query sees;
* the row of the query at position ``p``: rows ``0 .. (p + 1) // ratio - 1`` ascending, each plus ``offset``
  (the visible count of :func:`reference.indexing.visible_rows`), then ``-1`` up to the width.

Prefill from position 0 is the public prefill branch (``seqlen // ratio`` lanes, ``-1`` past each query's rows);
one decode query (``seqlen = 1``) is the public decode branch (``(start_pos + 1) // ratio`` lanes, no ``-1``). A
step of several queries at ``start_pos > 0`` (a verify step; the public code runs one query per decode step)
counts per query, as prefill does: no query sees a row completed by a later position of its own step
(docs/indexing.md, "Visible rows"). It equals the V4 top-k (``V4TopK``) over a row of equal scores with ``k`` at
least the width (tests/test_compressed_list.py), which is how a caller without this function builds it.
"""

from __future__ import annotations

from reference.checks import require_nonnegative_int, require_positive_int


def compressed_indices(ratio: int, seqlen: int, start_pos: int, offset: int = 0) -> tuple[tuple[int, ...], ...]:
    """``seqlen`` rows of ``(start_pos + seqlen) // ratio`` lanes: each query's visible rows plus ``offset``,
    ascending, then ``-1``. Raises ValueError naming a non-positive ``ratio`` or a negative ``seqlen``,
    ``start_pos`` or ``offset``."""
    r = require_positive_int(ratio, "ratio")
    n = require_nonnegative_int(seqlen, "seqlen")
    start = require_nonnegative_int(start_pos, "start_pos")
    shift = require_nonnegative_int(offset, "offset")
    width = (start + n) // r
    rows = []
    for p in range(start, start + n):
        seen = (p + 1) // r
        rows.append(tuple(j + shift if j < seen else -1 for j in range(width)))
    return tuple(rows)
