"""Restricting top-k to candidate blocks can change its result (seed 000, A.4.2): Hypothesis finds such a case
for the kept blocks of every registered reference candidate_select convention, and the book's lab is one."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import find, settings
from hypothesis import strategies as st

from properties.indexing.impls import visible_prefix
from properties.indexing.strategies import candidate_cases
from properties.indexing.values import as_float32, float32_rows
from properties.registry import Implementation, discover
from reference import candidates, topk

SELECTORS = discover().find(op="candidate_select", origin="reference")


def kept_by(impl: Implementation, case: dict[str, Any]) -> list[list[int]]:
    out = impl.fn(
        float32_rows(case["scores"], impl.device),
        torch.tensor(case["lengths"], dtype=torch.int32),
        block_size=case["block_size"],
        topk_blocks=case["topk_blocks"],
    )
    return [[b for b in row if b != -1] for row in out.tolist()]


def restricted_and_unrestricted(impl: Implementation, case: dict[str, Any], k: int) -> list[tuple[Any, Any]]:
    """Per row: top-k within the blocks ``impl`` keeps, and top-k over the whole valid prefix (V4.1 lanes)."""
    rows = []
    for values, n, kept in zip(as_float32(case["scores"]), case["lengths"], kept_by(impl, case), strict=True):
        prefix = visible_prefix(values, n)
        restricted = candidates.topk_within_blocks(prefix, n, k, kept, case["block_size"])
        rows.append((restricted, topk.topk(prefix, n, k, topk.V41TopK())))
    return rows


@pytest.mark.parametrize("impl", SELECTORS, ids=[i.id for i in SELECTORS])
def test_restriction_can_change_topk(impl: Implementation) -> None:
    def changes(drawn: tuple[dict[str, Any], int]) -> bool:
        case, k = drawn
        return any(r != u for r, u in restricted_and_unrestricted(impl, case, k))

    case, k = find(
        st.tuples(candidate_cases(), st.integers(1, 8)),
        changes,
        settings=settings(max_examples=500, derandomize=True, database=None),
    )
    restricted, unrestricted = next((r, u) for r, u in restricted_and_unrestricted(impl, case, k) if r != u)
    assert restricted != unrestricted


LAB = {"scores": [[2.0, 6.0, 3.0, 0.0, 300.0]], "lengths": [4], "block_size": 2, "topk_blocks": 1}


def test_lab_27_unpinned_restriction_changes_top2() -> None:
    """Seed 000: block scores [6, 3], block 0 retained; top-2 becomes [0, 1] instead of [1, 2]."""
    unpinned = next(i for i in SELECTORS if i.convention == "unpinned+drop_nan")
    assert kept_by(unpinned, LAB) == [[0]]
    assert restricted_and_unrestricted(unpinned, LAB, 2) == [((0, 1), (1, 2))]


def test_lab_27_pinned_keeps_the_newest_block() -> None:
    """Pinned, block 1 (rows 2 and 3, row 3 being the newest visible row) takes the only slot: top-2 is [2, 3]."""
    pinned = next(i for i in SELECTORS if i.convention == "pinned+drop_nan")
    assert kept_by(pinned, LAB) == [[1]]
    assert restricted_and_unrestricted(pinned, LAB, 2) == [((2, 3), (1, 2))]
