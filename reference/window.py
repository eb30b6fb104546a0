"""Sliding-window index lists: which window-cache entries each query attends to, ``-1`` for an empty lane.

Prefill (a request's first chunk, start position 0): the query at position i lists the sequence positions
``max(0, i - W + 1) .. i`` oldest first, padded with ``-1`` at the end to ``min(seqlen, W)`` lanes. The public V4
and V4.1 code build prefill rows identically.

Decode (one query at ``position`` p >= 0): the window cache is a ring of W slots, position t in slot ``t % W``;
the row has W lanes naming ring slots, oldest position first. The versions differ in where empty slots go while
the ring is still filling (p < W - 1):

- ``WindowOrder.V4``: occupied slots first, ``-1`` padding at the end (``[0, 1, .., p, -1, ..]``).
- ``WindowOrder.V41``: ``-1`` lanes first, then the occupied slots (``[-1, .., 0, 1, .., p]``), as seed 002's
  ``get_window_topk_idxs`` lists ``oldest = p % W + 1`` onward and blanks indices above p.

Once the ring is full both list ``(p+1) % W, .., W-1, 0, .., p % W``. Attention must not depend on lane order.
The public code sends ``start_pos == 0`` through the prefill path (one lane); :func:`decode_window` still answers
for p = 0 with W lanes, by the same rule as any other p.
"""

from __future__ import annotations

import enum

from reference.checks import fail, require_nonnegative_int, require_positive_int


class WindowOrder(enum.Enum):
    V4 = "v4"
    V41 = "v4.1"


def prefill_window(window_size: int, seqlen: int) -> tuple[tuple[int, ...], ...]:
    """``seqlen`` rows of ``min(seqlen, window_size)`` lanes (both versions)."""
    w = require_positive_int(window_size, "window_size")
    n = require_nonnegative_int(seqlen, "seqlen")
    lanes = min(n, w)
    rows: list[tuple[int, ...]] = []
    for i in range(n):
        first = max(0, i - w + 1)
        row = [first + c if first + c <= i else -1 for c in range(lanes)]
        rows.append(tuple(row))
    return tuple(rows)


def decode_window(window_size: int, position: int, order: WindowOrder) -> tuple[int, ...]:
    """``window_size`` lanes of ring slots for the decode query at ``position``."""
    w = require_positive_int(window_size, "window_size")
    p = require_nonnegative_int(position, "position")
    oldest = max(0, p - w + 1)
    occupied = [t % w for t in range(oldest, p + 1)]
    empty = [-1] * (w - len(occupied))
    if order is WindowOrder.V4:
        return tuple(occupied + empty)
    if order is WindowOrder.V41:
        return tuple(empty + occupied)
    raise fail("order", f"must be WindowOrder.V4 or WindowOrder.V41, got {order!r}")
