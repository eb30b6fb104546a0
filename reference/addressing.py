"""Where a compressed row lives: paged physical slots, gathered (prefill) positions, and store slots.

An allocator block covers ``block_size`` (B) original positions. At compression ratio r it holds
``Bc = B / r`` compressed rows, so r must divide B. A request's ``block_table[i]`` is the physical block holding
its logical rows ``i*Bc .. (i+1)*Bc - 1``, and logical row j lives at

    slot(j) = block_table[j // Bc] * Bc + j % Bc.

``-1`` is the lane that holds no row; every function here maps it to ``-1``. A block table must name distinct,
non-negative blocks (two logical blocks sharing a physical one would make two rows share a slot).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from reference.checks import require, require_int, require_nonnegative_int, require_positive_int


class LaneGuard(enum.Enum):
    """Which lanes of a row list a translation reads (:func:`rows_to_slots`)."""

    SENTINEL = "sentinel"
    """Every lane below the row's length is read; a ``-1`` lane stays ``-1`` (the book's lab)."""
    COUNT = "count"
    """Lanes below the count must hold rows; lanes at or past it are not read (the public CUDA conversion)."""


class SlotWidth(enum.Enum):
    """The integer lanes slots are written in (the contract's default is int64)."""

    INT64 = 64
    INT32 = 32
    """Slots are int32 by design (one public engine): exact only while every block id is at most
    :func:`max_block_id`; a larger one is refused, naming the overflow."""


def max_block_id(block_size: int, ratio: int, width: SlotWidth = SlotWidth.INT64) -> int:
    """The largest physical block id whose every slot fits ``width``: the last slot of block b is
    ``(b + 1) * Bc - 1``, so ``b <= 2**(bits - 1) // Bc - 1`` (int32 at Bc = 2: ``2**30 - 1``)."""
    if not isinstance(width, SlotWidth):
        raise TypeError(f"width: must be a SlotWidth, got {type(width).__name__}")
    limit: int = 2 ** (width.value - 1)
    return limit // rows_per_block(block_size, ratio) - 1


def rows_per_block(block_size: int, ratio: int) -> int:
    """``Bc = block_size / ratio``; raises ValueError unless ``ratio`` divides ``block_size``."""
    b = require_positive_int(block_size, "block_size")
    r = require_positive_int(ratio, "ratio")
    require(b % r == 0, "ratio", f"must divide block_size = {b} (rows per block = block_size / ratio), got {r}")
    return b // r


def _table(block_table: Sequence[int]) -> list[int]:
    ids = [require_nonnegative_int(b, f"block_table[{i}]") for i, b in enumerate(block_table)]
    require(len(set(ids)) == len(ids), "block_table", "must name distinct physical blocks")
    return ids


def _slot(row: int, table: list[int], per_block: int, argument: str, width: SlotWidth = SlotWidth.INT64) -> int:
    if row == -1:
        return -1
    require(row >= 0, argument, f"must be a row index >= 0 or -1 (no row), got {row}")
    index = row // per_block
    require(
        index < len(table),
        "block_table",
        f"too short for row {row}: it needs entry {index} but has {len(table)} entries",
    )
    slot = table[index] * per_block + row % per_block
    bits = width.value
    require(
        slot < 2 ** (bits - 1),
        f"block_table[{index}]",
        f"block {table[index]} at {per_block} rows a block gives row {row} slot {slot}, which overflows int{bits} "
        f"(int{bits} slots need block ids <= {2 ** (bits - 1) // per_block - 1})",
    )
    return slot


def row_to_slot(row: int, block_table: Sequence[int], block_size: int, ratio: int) -> int:
    """Physical slot of logical compressed row ``row`` (``-1`` stays ``-1``)."""
    per_block = rows_per_block(block_size, ratio)
    return _slot(require_int(row, "row"), _table(block_table), per_block, "row")


def rows_to_slots(
    rows: Sequence[int],
    block_table: Sequence[int],
    block_size: int,
    ratio: int,
    valid_lanes: int | None = None,
    width: SlotWidth = SlotWidth.INT64,
) -> tuple[int, ...]:
    """Physical slots of a top-k row list, lane by lane.

    ``valid_lanes=None`` (sentinel guard, the book's lab): a lane is empty iff it holds ``-1``.
    ``valid_lanes=n`` (count guard, the public CUDA conversion): lanes ``>= n`` are empty whatever they hold and
    are not read; lanes ``< n`` must hold a real row, and a ``-1`` there raises ValueError (that kernel would
    translate it as a row). A slot that does not fit ``width`` raises ValueError naming the overflow and the
    bound of :func:`max_block_id`.
    """
    if not isinstance(width, SlotWidth):
        raise TypeError(f"width: must be a SlotWidth, got {type(width).__name__}")
    per_block = rows_per_block(block_size, ratio)
    table = _table(block_table)
    count = len(rows) if valid_lanes is None else require_nonnegative_int(valid_lanes, "valid_lanes")
    require(count <= len(rows), "valid_lanes", f"must be <= len(rows) = {len(rows)}, got {count}")
    slots: list[int] = []
    for i in range(len(rows)):
        if i >= count:
            slots.append(-1)
            continue
        row = require_int(rows[i], f"rows[{i}]")
        if valid_lanes is not None:
            require(row >= 0, f"rows[{i}]", f"lane {i} < valid_lanes = {count} must hold a row >= 0, got {row}")
        slots.append(_slot(row, table, per_block, f"rows[{i}]", width))
    return tuple(slots)


def slot_to_row(slot: int, block_table: Sequence[int], block_size: int, ratio: int) -> int:
    """The inverse of :func:`row_to_slot` for one request: logical row held in physical ``slot``.

    ``-1`` stays ``-1``; a slot in a block the table does not name raises ValueError.
    """
    per_block = rows_per_block(block_size, ratio)
    table = _table(block_table)
    s = require_int(slot, "slot")
    if s == -1:
        return -1
    require(s >= 0, "slot", f"must be a slot >= 0 or -1 (no row), got {s}")
    block = s // per_block
    require(block in table, "slot", f"lies in physical block {block}, which block_table does not name")
    return table.index(block) * per_block + s % per_block


def gathered_rows(rows: Sequence[int], offset: int) -> tuple[int, ...]:
    """Prefill's gathered layout: each row plus the request's ``offset``; ``-1`` lanes stay ``-1``."""
    shift = require_nonnegative_int(offset, "offset")
    out: list[int] = []
    for i, r in enumerate(rows):
        row = require_int(r, f"rows[{i}]")
        require(row >= -1, f"rows[{i}]", f"must be a row index >= 0 or -1 (no row), got {row}")
        out.append(-1 if row == -1 else row + shift)
    return tuple(out)


def store_row(position: int, ratio: int) -> int:
    """The compressed row that ``position`` completes: ``position // ratio`` when ``(position + 1) % ratio == 0``,
    else ``-1`` (the position leaves its group pending, nothing is stored)."""
    p = require_nonnegative_int(position, "position")
    r = require_positive_int(ratio, "ratio")
    return p // r if (p + 1) % r == 0 else -1


def store_slots(positions: Sequence[int], ratio: int, block_table: Sequence[int], block_size: int) -> tuple[int, ...]:
    """Store slot mapping: the physical slot each position's completed row is written to, ``-1`` if none."""
    rows = [store_row(p, ratio) for p in positions]
    return rows_to_slots(rows, block_table, block_size, ratio)
