"""Padding rows: the one meaning of a length of -1 (docs/indexing.md, "Padding rows").

A CUDA graph is captured for a fixed batch size; a smaller batch fills the remaining rows with padding rows, whose
length (visible count, valid-lane count) engines set to -1. One engine cast that -1 to uint32, read the whole row
and deadlocked. The contract's convention ``padding_row`` (``reference.conventions.PADDING_ROWS``):

* a length of exactly ``PADDING_LENGTH`` (-1) marks a padding row: it is answered as a row of length 0. Nothing
  of it is read, and every output lane is the empty lane: the convention's fill for top-k (``-1``, or the select
  fill), no kept block for candidate selection, ``-1`` for slot translation;
* where a convention has no empty lane (``V4TopK(Phase.DECODE)``: the row holds exactly the visible rows, every
  lane a row), a padding row has no answer and is refused (``ValueError`` naming the lengths);
* any other negative length is refused (``ValueError`` naming the argument);
* index scores: a query at position -1 (a padding query) sees ``floor((-1 + 1) / r) = 0`` rows, what the
  visible-row formula gives; a position below -1 is refused.

A batch whose every length is 0 (or -1) is an ordinary batch: every row answers with empty lanes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from reference import indexing
from reference.addressing import SlotWidth, rows_to_slots
from reference.candidates import CandidateRule, kept_blocks
from reference.checks import require, require_int, require_positive_int
from reference.topk import TopKConvention, lane_layout, topk

PADDING_LENGTH: Final = -1
"""The length that marks a padding row (and the position of a padding query)."""


@dataclass(frozen=True)
class PaddingRows:
    """The padding-row convention: a row whose length is ``length`` is answered as a row of ``as_length``
    entries, except where the operation's convention has no empty lane, which refuses it."""

    length: int = PADDING_LENGTH
    as_length: int = 0


PADDING_ROW = PaddingRows()


def is_padding(length: object, rule: PaddingRows = PADDING_ROW) -> bool:
    return not isinstance(length, bool) and isinstance(length, int) and length == rule.length


def row_length(length: object, argument: str, rule: PaddingRows = PADDING_ROW) -> int:
    """The entries of a row to read: ``length`` itself when it is ``>= 0``, ``rule.as_length`` for a padding row;
    ``ValueError`` naming ``argument`` for any other negative length."""
    n = require_int(length, argument)
    if n == rule.length:
        return rule.as_length
    require(n >= 0, argument, f"must be >= 0, or {rule.length} for a padding row, got {n}")
    return n


def padding_refused(convention: TopKConvention) -> bool:
    """Whether a top-k convention refuses a padding row: it has no empty lane (V4 decode)."""
    return lane_layout(convention).whole_row


def topk_row(
    scores: Sequence[object], length: int, k: int, convention: TopKConvention, offset: int = 0
) -> tuple[int, ...]:
    """:func:`reference.topk.topk` of one row whose length may mark a padding row (every lane the fill)."""
    if is_padding(length):
        require(
            not padding_refused(convention),
            "lengths",
            "a padding row (-1) has no answer under a convention whose every lane holds a row (V4 decode)",
        )
    return topk(scores, row_length(length, "lengths"), k, convention, offset)


def candidate_row(
    scores: Sequence[object], length: int, topk_blocks: int, block_size: int, rule: CandidateRule | None = None
) -> tuple[int, ...]:
    """:func:`reference.candidates.kept_blocks` of one row whose length may mark a padding row (nothing kept)."""
    chosen = CandidateRule() if rule is None else rule
    return kept_blocks(scores, row_length(length, "lengths"), topk_blocks, block_size, chosen)


def slot_row(
    rows: Sequence[int],
    block_table: Sequence[int],
    block_size: int,
    ratio: int,
    length: int,
    count_guard: bool,
    width: SlotWidth = SlotWidth.INT64,
) -> tuple[int, ...]:
    """:func:`reference.addressing.rows_to_slots` of one request's lanes, ``length`` lanes live (the count guard:
    lanes past it are not read; the sentinel guard: lanes past it are -1); a padding row is every lane -1."""
    live = row_length(length, "lengths")
    require(live <= len(rows), "lengths", f"must be <= the {len(rows)} lanes of a row, got {live}")
    if count_guard:
        return rows_to_slots(rows, block_table, block_size, ratio, valid_lanes=live, width=width)
    return rows_to_slots(list(rows[:live]) + [-1] * (len(rows) - live), block_table, block_size, ratio, width=width)


def query_visible_rows(position: int, ratio: int) -> int:
    """Rows a query at ``position`` sees: :func:`reference.indexing.visible_rows`, and 0 for a padding query
    (position -1)."""
    p = require_int(position, "position")
    if p == PADDING_LENGTH:
        require_positive_int(ratio, "ratio")
        return 0
    return indexing.visible_rows(p, ratio)
