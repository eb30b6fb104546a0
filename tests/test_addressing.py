"""reference.addressing: logical row -> paged slot, its inverse, gathered offsets, store slots."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference.addressing import (
    SlotWidth,
    gathered_rows,
    max_block_id,
    row_to_slot,
    rows_per_block,
    rows_to_slots,
    slot_to_row,
    store_row,
    store_slots,
)
from tests.indexing_oracles import Poison
from tests.refusals import worded_exactly


def physical_memory(block_table: list[int], block_size: int, ratio: int) -> dict[int, int]:
    """Brute force: lay the request's pages out one compressed row at a time; physical slot -> logical row."""
    per_block = block_size // ratio
    memory = {}
    row = 0
    for physical in block_table:
        for within in range(per_block):
            memory[physical * per_block + within] = row
            row += 1
    return memory


@st.composite
def layouts(draw: st.DrawFn) -> tuple[int, int, list[int]]:
    ratio = draw(st.sampled_from([1, 2, 4]))
    block_size = ratio * draw(st.integers(1, 5))
    table = draw(st.lists(st.integers(0, 40), unique=True, min_size=0, max_size=5))
    return block_size, ratio, table


def test_book_decode_example() -> None:
    # Seed 000: B = 8, r = 2, Bc = 4, block table [7, 2]: rows 1, 2, 4 -> slots 29, 30, 8; the padding lane stays -1.
    assert rows_per_block(8, 2) == 4
    assert rows_to_slots([1, 2, 4, -1], [7, 2], 8, 2) == (29, 30, 8, -1)


@given(layouts())
def test_slots_match_the_laid_out_memory(layout: tuple[int, int, list[int]]) -> None:
    block_size, ratio, table = layout
    memory = physical_memory(table, block_size, ratio)
    by_row = {row: slot for slot, row in memory.items()}
    for row in range(len(by_row)):
        assert row_to_slot(row, table, block_size, ratio) == by_row[row]
    for slot, row in memory.items():
        assert slot_to_row(slot, table, block_size, ratio) == row
    # Injective on the request's rows: distinct rows never share a slot.
    slots = rows_to_slots(list(range(len(by_row))), table, block_size, ratio)
    assert len(set(slots)) == len(slots)


@given(layouts(), st.data())
def test_minus_one_lanes_are_kept(layout: tuple[int, int, list[int]], data: st.DataObject) -> None:
    block_size, ratio, table = layout
    capacity = len(table) * (block_size // ratio)
    rows = data.draw(st.lists(st.integers(-1, capacity - 1) if capacity else st.just(-1), max_size=8))
    slots = rows_to_slots(rows, table, block_size, ratio)
    assert [s == -1 for s in slots] == [r == -1 for r in rows]
    assert [slot_to_row(s, table, block_size, ratio) for s in slots] == rows


def test_count_guard_ignores_lanes_past_the_count() -> None:
    # The public CUDA conversion: lanes at or past the valid count are -1 whatever they hold, and are not read.
    lanes: list[object] = [1, 4, Poison(), Poison()]
    assert rows_to_slots(lanes, [7, 2], 8, 2, valid_lanes=2) == (29, 8, -1, -1)  # type: ignore[arg-type]
    assert rows_to_slots([1, 4], [7, 2], 8, 2, valid_lanes=0) == (-1, -1)
    # A -1 inside the declared count is a caller bug under that convention.
    with pytest.raises(ValueError, match=r"^rows\[1\]"):
        rows_to_slots([1, -1, 4], [7, 2], 8, 2, valid_lanes=3)


def test_large_block_ids_stay_exact() -> None:
    # An int32 slot computation overflows here; the reference is exact and a kernel must use int64.
    block = 2**31 // 64 + 5
    slot = row_to_slot(70, [3, block], 128, 2)
    assert slot == block * 64 + 6
    assert slot > 2**31 - 1


def test_gathered_rows() -> None:
    # Seed 000: with base 10, logical rows 1 and 2 become 11 and 12.
    assert gathered_rows([1, 2], 10) == (11, 12)
    assert gathered_rows([0, -1, 3, -1], 7) == (7, -1, 10, -1)


@pytest.mark.parametrize("ratio", [1, 2, 4, 128])
def test_store_rows_mark_group_ends(ratio: int) -> None:
    # Brute force: row j is written by the last position of its group, j*r + r - 1; other positions store nothing.
    last_of_group = {j * ratio + ratio - 1: j for j in range(6)}
    for position in range(6 * ratio):
        assert store_row(position, ratio) == last_of_group.get(position, -1)


def test_store_rows_follow_the_seed_chunks() -> None:
    # Seed 000: C2 over positions 0..6; [1, 4) completes pairs (0, 1) and (2, 3), [4, 7) only (4, 5).
    rows = [store_row(p, 2) for p in range(7)]
    assert [r for r in rows[1:4] if r != -1] == [0, 1]
    assert [r for r in rows[4:7] if r != -1] == [2]
    assert rows[0] == -1 and rows[6] == -1


def test_store_slots_translate_completed_rows() -> None:
    # C2, B = 8 (4 rows per block), table [7, 2]: position 3 stores row 1 at slot 29; position 9 row 4 at slot 8.
    assert store_slots([0, 3, 8, 9], 2, [7, 2], 8) == (-1, 29, -1, 8)


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: rows_per_block(8, 3), "ratio"),
        (lambda: rows_per_block(0, 1), "block_size"),
        (lambda: row_to_slot(8, [7, 2], 8, 2), "block_table"),
        (lambda: row_to_slot(0, [], 8, 2), "block_table"),
        (lambda: row_to_slot(-2, [7, 2], 8, 2), "row"),
        (lambda: row_to_slot(0, [7, 7], 8, 2), "block_table"),
        (lambda: row_to_slot(0, [-1, 2], 8, 2), r"block_table\[0\]"),
        (lambda: rows_to_slots([0, 9], [7, 2], 8, 2), "block_table"),
        (lambda: rows_to_slots([0, -3], [7, 2], 8, 2), r"rows\[1\]"),
        (lambda: rows_to_slots([0], [7, 2], 8, 2, valid_lanes=2), "valid_lanes"),
        (lambda: slot_to_row(12, [7, 2], 8, 2), "slot"),
        (lambda: slot_to_row(-5, [7, 2], 8, 2), "slot"),
        (lambda: gathered_rows([1, -2], 3), r"rows\[1\]"),
        (lambda: gathered_rows([1], -3), "offset"),
        (lambda: store_row(-1, 2), "position"),
        (lambda: store_slots([5], 4, [0], 6), "ratio"),
    ],
)
def test_bad_input_names_the_argument(call: Callable[[], object], argument: str) -> None:
    with pytest.raises(ValueError, match=f"^{argument}"):
        call()


test_every_refusal_is_worded_exactly = worded_exactly(
    [
        (lambda: rows_per_block(0, 2), ValueError, "block_size: must be a positive integer, got 0"),
        (lambda: rows_per_block(8, 0), ValueError, "ratio: must be a positive integer, got 0"),
        (
            lambda: rows_per_block(8, 3),
            ValueError,
            "ratio: must divide block_size = 8 (rows per block = block_size / ratio), got 3",
        ),
        (lambda: row_to_slot(0, [1, 1], 8, 2), ValueError, "block_table: must name distinct physical blocks"),
        (lambda: row_to_slot(-2, [1], 8, 2), ValueError, "row: must be a row index >= 0 or -1 (no row), got -2"),
        (
            lambda: row_to_slot(9, [1], 8, 2),
            ValueError,
            "block_table: too short for row 9: it needs entry 2 but has 1 entries",
        ),
        (lambda: row_to_slot(1.0, [1], 8, 2), TypeError, "row: must be an int, got float"),  # type: ignore[arg-type]
        (lambda: rows_to_slots([0], [1], 8, 2, valid_lanes=-1), ValueError, "valid_lanes: must be >= 0, got -1"),
        (
            lambda: rows_to_slots([0], [1], 8, 2, valid_lanes=2),
            ValueError,
            "valid_lanes: must be <= len(rows) = 1, got 2",
        ),
        (lambda: rows_to_slots([0.5], [1], 8, 2), TypeError, "rows[0]: must be an int, got float"),  # type: ignore[list-item]
        (
            lambda: rows_to_slots([-1, 0], [1], 8, 2, valid_lanes=1),
            ValueError,
            "rows[0]: lane 0 < valid_lanes = 1 must hold a row >= 0, got -1",
        ),
        (
            lambda: rows_to_slots([0, -1], [1], 8, 2, valid_lanes=2),
            ValueError,
            "rows[1]: lane 1 < valid_lanes = 2 must hold a row >= 0, got -1",
        ),
        (lambda: slot_to_row(1.0, [1], 8, 2), TypeError, "slot: must be an int, got float"),  # type: ignore[arg-type]
        (lambda: slot_to_row(-2, [1], 8, 2), ValueError, "slot: must be a slot >= 0 or -1 (no row), got -2"),
        (
            lambda: slot_to_row(0, [1], 8, 2),
            ValueError,
            "slot: lies in physical block 0, which block_table does not name",
        ),
        (lambda: gathered_rows([0.5], 1), TypeError, "rows[0]: must be an int, got float"),  # type: ignore[list-item]
        (lambda: gathered_rows([-2], 1), ValueError, "rows[0]: must be a row index >= 0 or -1 (no row), got -2"),
        (lambda: gathered_rows([0], -1), ValueError, "offset: must be >= 0, got -1"),
        (lambda: store_row(-1, 2), ValueError, "position: must be >= 0, got -1"),
        (lambda: store_row(1, 0), ValueError, "ratio: must be a positive integer, got 0"),
    ]
)


def test_row_zero_is_a_row_under_the_count_guard() -> None:
    assert rows_to_slots([0, 5, 3], [1, 2], 8, 2, valid_lanes=2) == (4, 9, -1)


# --- int32 slots (the option int32_slots) -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("block_size", "ratio", "bound"), [(2, 1, 2**30 - 1), (8, 4, 2**30 - 1), (4, 1, 2**29 - 1), (3, 1, 715827881)]
)
def test_max_block_id_is_the_last_block_whose_slots_fit_int32(block_size: int, ratio: int, bound: int) -> None:
    per_block = block_size // ratio
    assert max_block_id(block_size, ratio, SlotWidth.INT32) == bound
    assert (bound + 1) * per_block - 1 <= 2**31 - 1 < (bound + 2) * per_block - 1
    assert rows_to_slots([per_block - 1], [bound], block_size, ratio, width=SlotWidth.INT32) == (
        (bound + 1) * per_block - 1,
    )


def test_max_block_id_int64() -> None:
    assert max_block_id(2, 1) == 2**62 - 1


def test_int32_slots_the_engine_case() -> None:
    """Block 2**30 at 2 rows a block: slot 2**31, which an int32 lane holds as -2**31."""
    assert rows_to_slots([0], [2**30], 2, 1) == (2**31,)
    with pytest.raises(ValueError, match="overflows int32"):
        rows_to_slots([0], [2**30], 2, 1, width=SlotWidth.INT32)
    assert rows_to_slots([1], [2**30 - 1], 2, 1, width=SlotWidth.INT32) == (2**31 - 1,)
    assert rows_to_slots([-1, 0], [5], 2, 1, width=SlotWidth.INT32) == (-1, 10)


test_int32_refusals = worded_exactly(
    [
        (
            lambda: rows_to_slots([3], [7, 2**30], 2, 1, width=SlotWidth.INT32),
            ValueError,
            "block_table[1]: block 1073741824 at 2 rows a block gives row 3 slot 2147483649, which overflows int32 "
            "(int32 slots need block ids <= 1073741823)",
        ),
        (
            lambda: rows_to_slots([0], [2**62], 2, 1),
            ValueError,
            "block_table[0]: block 4611686018427387904 at 2 rows a block gives row 0 slot 9223372036854775808, which "
            "overflows int64 (int64 slots need block ids <= 4611686018427387903)",
        ),
        (lambda: rows_to_slots([0], [1], 2, 1, width=32), TypeError, "width: must be a SlotWidth, got int"),  # type: ignore[arg-type]
        (lambda: max_block_id(2, 1, 32), TypeError, "width: must be a SlotWidth, got int"),  # type: ignore[arg-type]
    ]
)
