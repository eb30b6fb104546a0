"""V4.1 candidate blocks: the first level of the two-level top-k, and restoring compact offsets to rows.

A candidate block is ``block_size`` consecutive compressed rows (block b holds rows ``b*block_size`` to
``(b+1)*block_size - 1``); it is unrelated to the allocator's page. For one query with score row ``scores`` and
visible count ``valid`` (only ``scores[:valid]`` is read, as in :mod:`reference.topk`):

1. Block scores: the maximum over each block of the visible rows, rows at or past ``valid`` counting as
   ``NEG_INF`` (the -inf padding to whole blocks). A block holding a ``NAN`` scores ``NAN`` (max propagates NaN).
   With ``pin_newest`` the block holding row ``valid - 1`` scores ``POS_INF`` whatever it holds.
2. Ranking: blocks ordered as torch.topk orders them (``NAN`` > ``POS_INF`` > rationals > ``NEG_INF``), ties by
   lowest block index; the first ``topk_blocks`` take the slots.
3. Kept: a block in a slot is kept only if its score is not ``NEG_INF``; under ``NanPolicy.DROP`` a ``NAN`` block
   is not kept either (it still used up a slot). Under ``NanPolicy.PROPAGATE`` it is kept.
4. The second level ranks rows with everything outside the kept blocks masked to ``NEG_INF``.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from reference.checks import require, require_int, require_nonnegative_int, require_positive_int
from reference.score_values import NEG_INF, POS_INF, Score, is_nan, is_neg_inf, rank_key, score_max
from reference.topk import TopKConvention, V41TopK, topk, valid_prefix


class NanPolicy(enum.Enum):
    """Whether a block whose score is NaN can be kept once it has taken a slot."""

    DROP = "drop"
    """Public V4.1 reference: kept only where ``score > -inf``, which is false for NaN."""
    PROPAGATE = "propagate"
    """One public engine: kept where ``score != -inf`` (NaN is treated as a real score)."""


@dataclass(frozen=True)
class CandidateRule:
    """The named choices of the first level. Default: the public V4.1 reference (pinned, NaN dropped)."""

    pin_newest: bool = True
    nan_policy: NanPolicy = NanPolicy.DROP


def block_scores(scores: Sequence[object], valid: int, block_size: int, pin_newest: bool = True) -> list[Score]:
    """One score per block holding a visible row: ``ceil(valid / block_size)`` entries (step 1 above)."""
    size = require_positive_int(block_size, "block_size")
    prefix = valid_prefix(scores, valid)
    count = -(-len(prefix) // size)
    blocks = [score_max(prefix[b * size : (b + 1) * size]) for b in range(count)]
    if pin_newest and count:
        blocks[-1] = POS_INF
    return blocks


def kept_blocks(
    scores: Sequence[object],
    valid: int,
    topk_blocks: int,
    block_size: int,
    rule: CandidateRule = CandidateRule(),
) -> tuple[int, ...]:
    """The kept block indices, ascending (steps 1-3 above). ``topk_blocks = 0`` keeps nothing."""
    slots = require_nonnegative_int(topk_blocks, "topk_blocks")
    per_block = block_scores(scores, valid, block_size, rule.pin_newest)

    def order(b: int) -> tuple[int, Fraction, int]:
        cls, value = rank_key(per_block[b])
        return (-cls, -value, b)

    top = sorted(range(len(per_block)), key=order)[:slots]
    kept = [
        b
        for b in top
        if not is_neg_inf(per_block[b]) and not (is_nan(per_block[b]) and rule.nan_policy is NanPolicy.DROP)
    ]
    return tuple(sorted(kept))


def _block_ids(blocks: Sequence[int], argument: str, allow_padding: bool) -> list[int]:
    """Validated block indices: each >= 0 (or -1 for padding where allowed), no real block named twice."""
    lowest = -1 if allow_padding else 0
    what = "a block index or -1 (padding)" if allow_padding else "a block index >= 0"
    ids: list[int] = []
    for i, b in enumerate(blocks):
        value = require_int(b, f"{argument}[{i}]")
        require(value >= lowest, f"{argument}[{i}]", f"must be {what}, got {value}")
        ids.append(value)
    real = [b for b in ids if b >= 0]
    require(len(set(real)) == len(real), argument, "must not name a block twice")
    return ids


def candidate_mask(kept: Sequence[int], block_size: int, width: int) -> tuple[bool, ...]:
    """The public reference's mask over a score row of ``width`` rows: True where the row's block is kept."""
    size = require_positive_int(block_size, "block_size")
    n = require_nonnegative_int(width, "width")
    keep = set(_block_ids(kept, "kept", allow_padding=False))
    return tuple(i // size in keep for i in range(n))


def restrict_to_blocks(scores: Sequence[object], valid: int, kept: Sequence[int], block_size: int) -> list[object]:
    """``scores`` with every visible row outside the kept blocks set to ``NEG_INF`` (step 4 above).

    Entries at or past ``valid`` are passed through untouched and unread.
    """
    size = require_positive_int(block_size, "block_size")
    keep = set(_block_ids(kept, "kept", allow_padding=False))
    prefix = valid_prefix(scores, valid)
    masked: list[object] = [s if i // size in keep else NEG_INF for i, s in enumerate(prefix)]
    return masked + list(scores[len(prefix) :])


def topk_within_blocks(
    scores: Sequence[object],
    valid: int,
    k: int,
    kept: Sequence[int],
    block_size: int,
    convention: TopKConvention | None = None,
    offset: int = 0,
) -> tuple[int, ...]:
    """The second-level top-k: :func:`reference.topk.topk` over :func:`restrict_to_blocks`.

    Under ``MaskedLanes.ELIGIBLE`` (the public reference) rows outside the kept blocks can still be chosen when
    ``k`` exceeds the rows with a higher score; ``MaskedLanes.EXCLUDED`` turns those lanes into fill lanes.
    ``convention`` defaults to ``V41TopK()``.
    """
    chosen = V41TopK() if convention is None else convention
    return topk(restrict_to_blocks(scores, valid, kept, block_size), valid, k, chosen, offset)


def candidate_rows(candidate_blocks: Sequence[int], block_size: int) -> tuple[int, ...]:
    """The compact row list a consumer scores: each candidate block's rows in turn, ``-1`` for a padding block."""
    size = require_positive_int(block_size, "block_size")
    blocks = _block_ids(candidate_blocks, "candidate_blocks", allow_padding=True)
    return tuple(b * size + i if b >= 0 else -1 for b in blocks for i in range(size))


def restore_offsets(
    offsets: Sequence[int], candidate_blocks: Sequence[int], block_size: int, visible: int | None = None
) -> tuple[int, ...]:
    """Candidate-relative offsets -> logical rows: ``o -> candidate_blocks[o // bs] * bs + o % bs``.

    ``offsets[i]`` is ``-1`` (kept as ``-1``) or an offset into the compact list of :func:`candidate_rows`, so
    ``0 <= o < len(candidate_blocks) * block_size``; anything else raises ValueError. An offset into a padding
    block (``-1``) restores to ``-1``, and so does a row ``>= visible`` when ``visible`` is given (the newest
    block can extend past the visible count; the public reference's final ``idxs < compress_lens`` does the same).
    """
    size = require_positive_int(block_size, "block_size")
    blocks = _block_ids(candidate_blocks, "candidate_blocks", allow_padding=True)
    limit = None if visible is None else require_nonnegative_int(visible, "visible")
    span = len(blocks) * size
    rows: list[int] = []
    for i, o in enumerate(offsets):
        value = require_int(o, f"offsets[{i}]")
        if value == -1:
            rows.append(-1)
            continue
        require(
            0 <= value < span,
            f"offsets[{i}]",
            f"must be -1 or in [0, {span}) (len(candidate_blocks) * block_size), got {value}",
        )
        block = blocks[value // size]
        row = -1 if block < 0 else block * size + value % size
        rows.append(-1 if limit is not None and row >= limit else row)
    return tuple(rows)


def kept_positions(candidate_blocks: Sequence[int], length: int, block_size: int) -> tuple[int, ...]:
    """The positions a sparse consumer scores for one row, ascending: every position below ``length`` of every
    candidate block, whatever order the blocks come in; ``-1`` padding blocks and blocks wholly at or past
    ``length`` add nothing, and the newest block only its positions below ``length``.

    This is :func:`candidate_rows` over the real blocks sorted ascending, cut at ``length``: the compact list
    that :func:`restore_offsets` indexes keeps the blocks in their given order and padding in place, this one
    does not (vLLM's ``candidate_blocks_to_sparse_indices``: blocks filtered to the row's range, sorted, the
    valid columns a prefix of ``end`` columns).
    """
    limit = require_nonnegative_int(length, "length")
    blocks = _block_ids(candidate_blocks, "candidate_blocks", allow_padding=True)
    ordered = candidate_rows(sorted(b for b in blocks if b >= 0), block_size)
    return tuple(p for p in ordered if p < limit)


def remap_columns(
    columns: Sequence[int], candidate_blocks: Sequence[int], length: int, block_size: int
) -> tuple[tuple[int, ...], int]:
    """Columns of the sparse score row back to positions, and the row's count of valid columns.

    Column ``c`` scores ``kept_positions(...)[c]``; ``-1`` (a fill lane of the top-k over the columns) stays
    ``-1``. The count is ``len(kept_positions(...))``: a column at or past it names no position and raises
    ValueError, as does any negative column other than ``-1``.
    """
    kept = kept_positions(candidate_blocks, length, block_size)
    positions: list[int] = []
    for i, c in enumerate(columns):
        value = require_int(c, f"columns[{i}]")
        require(
            -1 <= value < len(kept),
            f"columns[{i}]",
            f"must be -1 or in [0, {len(kept)}) (the row's valid columns), got {value}",
        )
        positions.append(-1 if value == -1 else kept[value])
    return tuple(positions), len(kept)
