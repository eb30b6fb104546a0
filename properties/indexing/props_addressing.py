"""Properties of addresses: paged slots (``slot_translation``), prefill's gathered rows (``gathered_rows``) and
sliding-window indices (``window_indices``).

``slot_translation`` examples (``properties.indexing.strategies.slot_cases``) serve both lane guards: under
``sentinel`` a lane listed in ``holes`` holds -1 and ``lengths`` is the full width; under ``count`` the lanes
below ``lengths[m]`` hold rows and the others garbage (-1, negatives, INT32_MAX, rows past the table).
Requests own disjoint block tables, so slots must be distinct across the whole batch.
"""

from __future__ import annotations

from typing import Any

import torch

from properties.compare import Mismatch, assert_exact
from properties.indexing.strategies import gathered_cases, slot_cases, window_cases
from properties.indexing.values import index_tensor, output_lanes, visible_count
from properties.registry import Implementation
from properties.runner import Property
from reference import addressing, padding, window
from reference.conventions import WINDOW_INDICES, parse
from reference.padding import is_padding

# --- slot translation ----------------------------------------------------------------------------------------------


def counts(convention: str) -> bool:
    """Whether ``convention`` guards lanes by count (else by the -1 sentinel)."""
    return parse("slot_translation", convention).rule is addressing.LaneGuard.COUNT


def slot_width(convention: str) -> addressing.SlotWidth:
    """The integer width of ``convention``'s slots (``int32_slots``: int32)."""
    return parse("slot_translation", convention).setting(addressing.SlotWidth, addressing.SlotWidth.INT64)


def block_tables(case: dict[str, Any], convention: str) -> list[list[int]]:
    """The case's block tables; under ``int32_slots`` shifted down (distinct still) so that the largest id is at
    most ``reference.addressing.max_block_id``, where every slot fits int32: at the bound when it was above."""
    tables = case["block_tables"]
    width = slot_width(convention)
    if width is addressing.SlotWidth.INT64:
        return [list(t) for t in tables]
    bound = addressing.max_block_id(case["block_size"], case["ratio"], width)
    shift = max(0, max((b for t in tables for b in t), default=0) - bound)
    return [[b - shift for b in t] for t in tables]


def slot_dtype(convention: str) -> torch.dtype:
    return torch.int32 if slot_width(convention) is addressing.SlotWidth.INT32 else torch.int64


def wrapped_lanes(expected: list[list[int]], got: list[list[int]]) -> list[tuple[int, int]]:
    """The lanes whose slot is off by a multiple of 2**32: the slot wrapped in int32 arithmetic."""
    return [
        (m, i)
        for m, (e_row, g_row) in enumerate(zip(expected, got, strict=True))
        for i, (e, g) in enumerate(zip(e_row, g_row, strict=True))
        if e != g and (e - g) % 2**32 == 0
    ]


def slot_inputs(case: dict[str, Any], convention: str) -> tuple[list[list[int]], list[int]]:
    """The row lanes and lengths an implementation of ``convention`` receives."""
    if counts(convention):
        rows = [
            r[: visible_count(n)] + g[visible_count(n) :]
            for r, g, n in zip(case["rows"], case["garbage"], case["lengths"], strict=True)
        ]
        return rows, list(case["lengths"])
    rows = [
        [-1 if i in holes else j for i, j in enumerate(r)] for r, holes in zip(case["rows"], case["holes"], strict=True)
    ]
    return rows, [n if is_padding(n) else len(r) for r, n in zip(rows, case["lengths"], strict=True)]


def live_lanes(case: dict[str, Any], convention: str) -> list[list[int | None]]:
    """Per lane, the logical row it must translate, or None for a lane that must come out -1."""
    rows, lengths = slot_inputs(case, convention)
    return [[j if i < n and j != -1 else None for i, j in enumerate(r)] for r, n in zip(rows, lengths, strict=True)]


def run_slots(impl: Implementation, case: dict[str, Any]) -> list[list[int]]:
    convention = impl.convention or ""
    rows, lengths = slot_inputs(case, convention)
    out = impl.fn(
        index_tensor(rows, torch.int32, impl.device),
        index_tensor(block_tables(case, convention), torch.int32, impl.device),
        torch.tensor(lengths, dtype=torch.int32, device=impl.device),
        block_size=case["block_size"],
        ratio=case["ratio"],
    )
    shape = (len(rows), len(rows[0]) if rows else 0)
    return output_lanes(out, slot_dtype(convention), shape, f"slot_translation[{convention}] output")


def per_block(case: dict[str, Any]) -> int:
    return int(case["block_size"]) // int(case["ratio"])


def check_slots_equal_reference(impl: Implementation, case: dict[str, Any]) -> None:
    convention = impl.convention or ""
    got = run_slots(impl, case)
    rows, lengths = slot_inputs(case, convention)
    width = slot_width(convention)
    expected = [
        list(padding.slot_row(r, t, case["block_size"], case["ratio"], n, counts(convention), width))
        for r, t, n in zip(rows, block_tables(case, convention), lengths, strict=True)
    ]
    wrapped = wrapped_lanes(expected, got)
    what = f"slot_translation[{convention}] slots vs the exact reference"
    if wrapped:
        m, i = wrapped[0]
        what += (
            f"; {len(wrapped)} slot(s) off by a multiple of 2**32, first lane {m}, {i}: int32 overflow (slots past "
            f"2**31 - 1 wrapped; int32 slots by design are the option int32_slots, whose block ids stay <= "
            f"{addressing.max_block_id(case['block_size'], case['ratio'], addressing.SlotWidth.INT32)})"
        )
    assert_exact(expected, got, what)


def check_slots_injective(impl: Implementation, case: dict[str, Any]) -> None:
    """Distinct (request, row) pairs get distinct slots; the same row always the same slot; slots >= 0."""
    convention = impl.convention or ""
    got = run_slots(impl, case)
    owner: dict[int, tuple[int, int]] = {}
    for m, (slots, rows) in enumerate(zip(got, live_lanes(case, convention), strict=True)):
        for i, (slot, row) in enumerate(zip(slots, rows, strict=True)):
            if row is None:
                continue
            if slot < 0:
                raise Mismatch(f"slot_translation[{convention}]", [((m, i), "a slot >= 0", slot)], detail=f"row {row}")
            if owner.setdefault(slot, (m, row)) != (m, row):
                raise Mismatch(
                    f"slot_translation[{convention}]: slot {slot} holds two rows",
                    detail=f"request {owner[slot][0]} row {owner[slot][1]} and request {m} row {row}",
                )


def check_slots_invertible(impl: Implementation, case: dict[str, Any]) -> None:
    """slot_to_row, the reference's inverse through the request's own table, gives each lane's row back."""
    convention = impl.convention or ""
    got = run_slots(impl, case)
    for m, (slots, rows) in enumerate(zip(got, live_lanes(case, convention), strict=True)):
        for i, (slot, row) in enumerate(zip(slots, rows, strict=True)):
            if row is None:
                continue
            try:
                back: int | str = addressing.slot_to_row(
                    slot, block_tables(case, convention)[m], case["block_size"], case["ratio"]
                )
            except ValueError as err:
                back = f"no row ({err})"
            if back != row:
                raise Mismatch(
                    f"slot_translation[{convention}]: slot_to_row(slot) is not the row", [((m, i), row, back)]
                )


def check_empty_lanes(impl: Implementation, case: dict[str, Any]) -> None:
    """A lane is -1 exactly when it holds -1 (sentinel) or lies at or past the request's length (count)."""
    convention = impl.convention or ""
    got = run_slots(impl, case)
    for m, (slots, rows) in enumerate(zip(got, live_lanes(case, convention), strict=True)):
        wrong: list[tuple[tuple[int, ...], Any, Any]] = [
            ((m, i), "-1" if row is None else "a slot", s)
            for i, (s, row) in enumerate(zip(slots, rows, strict=True))
            if (s == -1) != (row is None)
        ]
        if wrong:
            raise Mismatch(f"slot_translation[{convention}]: empty lanes", wrong, detail=f"lengths {case['lengths']}")


def check_block_arithmetic(impl: Implementation, case: dict[str, Any]) -> None:
    """slot // Bc is the row's physical block and slot % Bc its place there, in exact integers (no int32 wrap)."""
    convention = impl.convention or ""
    got = run_slots(impl, case)
    bc = per_block(case)
    for m, (slots, rows) in enumerate(zip(got, live_lanes(case, convention), strict=True)):
        table = block_tables(case, convention)[m]
        for i, (slot, row) in enumerate(zip(slots, rows, strict=True)):
            if row is not None and (slot // bc, slot % bc) != (table[row // bc], row % bc):
                raise Mismatch(
                    f"slot_translation[{convention}]: (slot // Bc, slot % Bc) with Bc = {bc}",
                    [((m, i), (table[row // bc], row % bc), (slot // bc, slot % bc))],
                    detail=f"row {row}, slot {slot}",
                )


# --- gathered rows -------------------------------------------------------------------------------------------------


def check_gathered(impl: Implementation, case: dict[str, Any]) -> None:
    """Each row lane plus its request's offset (int64, no wrap); -1 lanes stay -1, never -1 + offset."""
    rows = case["rows"]
    out = impl.fn(
        index_tensor(rows, torch.int32, impl.device),
        torch.tensor(case["offsets"], dtype=torch.int64, device=impl.device),
    )
    got = output_lanes(out, torch.int64, (len(rows), len(rows[0]) if rows else 0), "gathered_rows output")
    expected = [[-1 if j == -1 else j + o for j in r] for r, o in zip(rows, case["offsets"], strict=True)]
    assert_exact(expected, got, "gathered rows: row + offset on row lanes, -1 kept")
    reference = [list(addressing.gathered_rows(r, o)) for r, o in zip(rows, case["offsets"], strict=True)]
    assert_exact(reference, got, "gathered rows vs the exact reference")


# --- window indices ------------------------------------------------------------------------------------------------


def run_window(impl: Implementation, case: dict[str, Any]) -> list[list[int]]:
    w, n, start = case["window"], case["seqlen"], case["start_pos"]
    out = impl.fn(window=w, seqlen=n, start_pos=start)
    shape = (n, min(w, n)) if start == 0 else (1, w)
    return output_lanes(out, torch.int32, shape, f"window_indices[{impl.convention}] output")


def window_positions(case: dict[str, Any]) -> list[list[int]]:
    """Per row, the positions in the window, oldest first (decode: the positions whose ring slots are listed)."""
    w, n, start = case["window"], case["seqlen"], case["start_pos"]
    if start == 0:
        return [list(range(max(0, i - w + 1), i + 1)) for i in range(n)]
    return [list(range(max(0, start - w + 1), start + 1))]


def check_window_equals_reference(impl: Implementation, case: dict[str, Any]) -> None:
    convention = impl.convention or ""
    got = run_window(impl, case)
    w, n, start = case["window"], case["seqlen"], case["start_pos"]
    if start == 0:
        expected = [list(r) for r in window.prefill_window(w, n)]
    else:
        order = window.WindowOrder.V4 if convention == "v4" else window.WindowOrder.V41
        expected = [list(window.decode_window(w, start, order))]
    assert_exact(expected, got, f"window_indices[{convention}] vs the exact reference")


def check_window_covers_positions(impl: Implementation, case: dict[str, Any]) -> None:
    """The non-empty lanes, in lane order, are the window's positions oldest first (decode: their ring slots)."""
    convention = impl.convention or ""
    got = run_window(impl, case)
    w, start = case["window"], case["start_pos"]
    for m, (lanes, positions) in enumerate(zip(got, window_positions(case), strict=True)):
        listed = [lane for lane in lanes if lane != -1]
        expected = positions if start == 0 else [t % w for t in positions]
        if listed != expected:
            raise Mismatch(
                f"window_indices[{convention}] row {m}: the listed lanes are not the window, oldest first",
                [((m,), expected, listed)],
                detail=f"window {w}, start_pos {start}, lanes {lanes}",
            )


def check_empty_lane_placement(impl: Implementation, case: dict[str, Any]) -> None:
    """Empty lanes (-1) are last in prefill and in v4 decode, first in v4.1 decode."""
    convention = impl.convention or ""
    got = run_window(impl, case)
    leading = case["start_pos"] > 0 and WINDOW_INDICES[convention].rule is window.WindowOrder.V41
    for m, lanes in enumerate(got):
        empty = lanes.count(-1)
        placed = lanes[:empty] if leading else lanes[len(lanes) - empty :]
        if placed != [-1] * empty:
            where = "first" if leading else "last"
            raise Mismatch(f"window_indices[{convention}] row {m}: -1 lanes must come {where}", detail=f"lanes {lanes}")


LAB_27_DECODE = {
    "rows": [[1, 2, 4, 0]],
    "holes": [[3]],
    "lengths": [3],
    "garbage": [[0, 0, 0, -1]],
    "block_tables": [[7, 2]],
    "block_size": 8,
    "ratio": 2,
}
"""Lab 27: B = 8, r = 2, table [7, 2]: rows [1, 2, 4, -1] -> slots [29, 30, 8, -1] (count guard: 3 valid lanes)."""
LAB_27_PREFILL = {"rows": [[1, 2]], "offsets": [10]}
"""Lab 27: prefill at gathered offset 10: rows [1, 2] -> [11, 12]."""
INT32_EDGE = {
    "rows": [[0, 1, 3]],
    "holes": [[]],
    "lengths": [3],
    "garbage": [[0, 0, 0]],
    "block_tables": [[2**31 // 2, 2**31 // 2 - 1]],
    "block_size": 4,
    "ratio": 2,
}
"""Block 2**30 with Bc = 2 puts row 0 at slot 2**31, just past int32."""

PROPERTIES = [
    Property(
        "slot_equals_reference",
        "slot_translation",
        slot_cases(),
        check_slots_equal_reference,
        examples=(LAB_27_DECODE, INT32_EDGE),
        doc="every slot equals the exact reference (both lane guards)",
    ),
    Property(
        "slot_injective",
        "slot_translation",
        slot_cases(),
        check_slots_injective,
        doc="distinct rows of the batch's requests (disjoint tables) get distinct non-negative slots",
    ),
    Property(
        "slot_invertible",
        "slot_translation",
        slot_cases(),
        check_slots_invertible,
        examples=(LAB_27_DECODE,),
        doc="slot_to_row through the request's table gives every translated row back",
    ),
    Property(
        "slot_empty_lanes",
        "slot_translation",
        slot_cases(),
        check_empty_lanes,
        examples=(LAB_27_DECODE,),
        doc="-1 stays -1, lanes past the count guard are -1 whatever they hold, and no row lane becomes -1",
    ),
    Property(
        "slot_int64_block_arithmetic",
        "slot_translation",
        slot_cases(),
        check_block_arithmetic,
        examples=(INT32_EDGE,),
        doc="slot // Bc is the physical block and slot % Bc the row's place, in int64 (block ids near 2**31 / Bc)",
    ),
    Property(
        "gathered_offset_on_row_lanes",
        "gathered_rows",
        gathered_cases(),
        check_gathered,
        examples=(LAB_27_PREFILL,),
        doc="prefill's gathered layout adds the request's offset to row lanes only, in int64",
    ),
    Property(
        "window_equals_reference",
        "window_indices",
        window_cases(),
        check_window_equals_reference,
        doc="prefill rows and the decode row equal the exact reference of the convention's order",
    ),
    Property(
        "window_covers_positions",
        "window_indices",
        window_cases(),
        check_window_covers_positions,
        doc="the valid lanes are exactly the window's positions (decode: their ring slots), oldest first",
    ),
    Property(
        "window_empty_lane_placement",
        "window_indices",
        window_cases(),
        check_empty_lane_placement,
        doc="-1 lanes last in prefill and v4 decode, first in v4.1 decode while the ring fills",
    ),
]
