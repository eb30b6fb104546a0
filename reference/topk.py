"""Top-k over the valid prefix of a score row, under each public output convention (docs/indexing.md).

Inputs shared by every function here:

- ``scores``: one query's score row (the logits buffer row), length L. Only ``scores[:valid]`` is ever read;
  entries at or past ``valid`` may hold anything (None, NaN, +inf, garbage) and never influence the result.
  Entries inside the prefix are ``int``/``Fraction`` or a marker of :mod:`reference.score_values`.
- ``valid``: the visible count (compressed rows the query can see), ``0 <= valid <= L``.
- ``k``: rows to select, ``k >= 0``; ``k = 0`` gives an empty result.

Selection, common to all conventions: rank the valid rows by score, highest first (``NEG_INF`` lowest, then
rationals, then ``POS_INF``, then ``NAN``, as torch.topk orders them); among equal scores the lowest index wins.
The first ``min(k, eligible)`` rows of that ranking are chosen. A valid row scoring ``NEG_INF`` is eligible
(``MaskedLanes.ELIGIBLE``, what the public V4.1 reference does, since such a lane is still below the visible count)
unless the convention says ``MaskedLanes.EXCLUDED``. The conventions then differ only in lane count, lane order,
fill value and where the offset goes.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeAlias

from reference.checks import INT32_MAX, fail, require, require_int, require_nonnegative_int
from reference.score_values import Score, is_neg_inf, rank_key, require_score


class Width(enum.Enum):
    """How many lanes a V4.1 result has."""

    CLAMPED = "clamped"
    """``min(k, L)`` lanes, as the seed's ``topk = min(self.index_topk, end_pos // ratio)`` (L = end_pos // ratio)."""
    FIXED = "fixed"
    """Exactly ``k`` lanes, as a fixed-width output buffer holds them."""


class MaskedLanes(enum.Enum):
    """Whether a valid row scoring ``NEG_INF`` (masked, e.g. outside the candidate blocks) can be chosen."""

    ELIGIBLE = "eligible"
    """It can, after every higher score; the public V4.1 reference keeps it since its index < the visible count."""
    EXCLUDED = "excluded"
    """It never is; its lane becomes a fill lane."""


class Phase(enum.Enum):
    PREFILL = "prefill"
    DECODE = "decode"


@dataclass(frozen=True)
class V41TopK:
    """V4.1 (seed 002 ``Indexer.forward``): ``topk(sorted=False)`` then sorted by index.

    Lanes: the chosen rows in ascending index order, each plus ``offset``, then ``-1`` lanes up to the width.
    A lane is ``-1`` iff it holds no valid row (in the seed: iff its index >= the visible count).
    """

    width: Width = Width.CLAMPED
    masked_lanes: MaskedLanes = MaskedLanes.ELIGIBLE


@dataclass(frozen=True)
class V4TopK:
    """V4 (public V4 ``Indexer.forward``): ``topk`` with torch's default ``sorted=True``.

    Order: descending score, ties by ascending index (the public code leaves tie order to the device).
    Prefill: ``min(k, L)`` lanes; lanes without a valid row are ``-1`` at the end; ``offset`` on valid lanes.
    Decode: the row holds exactly the visible rows (``valid == L`` is required), ``min(k, L)`` lanes, every lane
    valid and offset, never ``-1``.
    """

    phase: Phase = Phase.PREFILL


@dataclass(frozen=True)
class SelectTopK:
    """Select-style kernels (``topk(..., end=..., sorted_index=..., idx_oob_fill_value=...)``).

    Exactly ``k`` lanes: the chosen rows (``end`` = ``valid``), each plus ``offset``, then ``fill`` lanes, which are
    never offset and always trail the chosen rows. ``sorted_index=True`` lists the chosen rows by ascending index,
    ``False`` in rank order (descending score, ties by ascending index).
    """

    fill: int = INT32_MAX
    sorted_index: bool = True
    masked_lanes: MaskedLanes = MaskedLanes.ELIGIBLE


TopKConvention: TypeAlias = V41TopK | V4TopK | SelectTopK


@dataclass(frozen=True)
class LaneLayout:
    """How a convention lays out one result row: ``index_order`` (ascending index, else rank order),
    ``fixed`` width (``k`` lanes, else ``min(k, len(scores))``), the ``fill`` of lanes holding no row, and
    ``whole_row`` (the row must hold exactly the visible rows, V4 decode)."""

    index_order: bool
    fixed: bool
    fill: int
    whole_row: bool = False

    def lanes(self, k: int, length: int) -> int:
        """Lanes of a result row for ``k`` and a score row of ``length`` entries."""
        return k if self.fixed else min(k, length)


def lane_layout(convention: TopKConvention) -> LaneLayout:
    """The lane layout of ``convention`` (what :func:`topk` writes)."""
    if isinstance(convention, V41TopK):
        return LaneLayout(True, convention.width is Width.FIXED, -1)
    if isinstance(convention, V4TopK):
        return LaneLayout(False, False, -1, whole_row=convention.phase is Phase.DECODE)
    if isinstance(convention, SelectTopK):
        return LaneLayout(convention.sorted_index, True, require_int(convention.fill, "fill"))
    raise fail("convention", f"must be V41TopK, V4TopK or SelectTopK, got {type(convention).__name__}")


def valid_prefix(scores: Sequence[object], valid: int) -> list[Score]:
    """``scores[:valid]`` as exact scores; raises if ``valid`` is negative or larger than the row."""
    n = require_nonnegative_int(valid, "valid")
    require(n <= len(scores), "valid", f"must be <= len(scores) = {len(scores)} (the row length), got {n}")
    return [require_score(scores[i], f"scores[{i}]") for i in range(n)]


def ranked_rows(
    scores: Sequence[object], valid: int, masked_lanes: MaskedLanes = MaskedLanes.ELIGIBLE
) -> tuple[int, ...]:
    """Every eligible valid row, best first (descending score, ties by ascending index)."""
    prefix = valid_prefix(scores, valid)
    rows = [i for i, s in enumerate(prefix) if masked_lanes is MaskedLanes.ELIGIBLE or not is_neg_inf(s)]

    def order(i: int) -> tuple[int, Fraction, int]:
        cls, value = rank_key(prefix[i])
        return (-cls, -value, i)

    return tuple(sorted(rows, key=order))


def chosen_rows(
    scores: Sequence[object], valid: int, k: int, masked_lanes: MaskedLanes = MaskedLanes.ELIGIBLE
) -> tuple[int, ...]:
    """The first ``min(k, eligible)`` rows of :func:`ranked_rows`, in rank order."""
    count = require_nonnegative_int(k, "k")
    return ranked_rows(scores, valid, masked_lanes)[:count]


def topk(scores: Sequence[object], valid: int, k: int, convention: TopKConvention, offset: int = 0) -> tuple[int, ...]:
    """The lanes a kernel following ``convention`` writes for one query (see the convention classes).

    ``offset`` (>= 0) is added to lanes holding a row, never to fill lanes. Raises ValueError for a negative
    ``k``/``valid``/``offset``, for ``valid > len(scores)``, for a V4 decode row that is not exactly the visible
    rows, and for a select-style fill value that could be mistaken for a row.
    """
    count = require_nonnegative_int(k, "k")
    shift = require_nonnegative_int(offset, "offset")
    length = len(scores)
    layout = lane_layout(convention)
    if layout.whole_row:
        require(
            valid == length,
            "valid",
            f"V4 decode scores exactly the visible rows, so valid must equal len(scores) = {length}, got {valid}",
        )
    if isinstance(convention, SelectTopK):
        require(
            layout.fill < 0 or layout.fill >= shift + length,
            "fill",
            f"must not collide with a row lane: use a negative value or one >= offset + len(scores) = "
            f"{shift + length}, got {layout.fill}",
        )
    masked = MaskedLanes.ELIGIBLE if isinstance(convention, V4TopK) else convention.masked_lanes
    picked = chosen_rows(scores, valid, count, masked)
    ordered = sorted(picked) if layout.index_order else list(picked)
    return _pad([r + shift for r in ordered], layout.lanes(count, length), layout.fill)


def _pad(lanes: list[int], width: int, fill: int) -> tuple[int, ...]:
    return tuple(lanes + [fill] * (width - len(lanes)))
