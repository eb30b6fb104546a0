"""Properties of the compressed index list of a layer without an indexer (``compressed_indices``): every
compressed row each query sees, as the public V4 code lists it for its ratio-128 layers.

Examples are ``{"ratio", "seqlen", "start_pos", "offset"}``: a prefill from position 0, one decode query, or a
verify step of up to 16 queries, placed near a group boundary (where the row a query's own position completes,
and rows completed later in the step, are at stake). The strategy lives here, beside its only user.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from properties.compare import Mismatch, assert_exact
from properties.indexing.values import output_lanes
from properties.registry import Implementation
from properties.runner import Property
from reference import compressed_list

RATIOS = (128, 1, 2, 4, 3)
MAX_STEP = 16
"""Queries of a verify step: as many as engines run drafts (past the 4 of the compression strategies)."""


@st.composite
def compressed_cases(draw: st.DrawFn) -> dict[str, Any]:
    ratio = draw(st.sampled_from(RATIOS))
    offset = draw(st.sampled_from([0, 128, 7]) | st.integers(0, 2**20))
    kind = draw(st.sampled_from(["step", "prefill", "decode"]))
    if kind == "prefill":
        near = [ratio - 1, ratio, ratio + 1, 2 * ratio - 1, 2 * ratio + 1]
        seqlen = draw(st.sampled_from(near) | st.integers(0, 12))
        return {"ratio": ratio, "seqlen": seqlen, "start_pos": 0, "offset": offset}
    seqlen = 1 if kind == "decode" else draw(st.integers(2, MAX_STEP))
    boundary = draw(st.integers(1, 3)) * ratio
    start = max(1, boundary - draw(st.integers(0, seqlen + 1)))
    return {"ratio": ratio, "seqlen": seqlen, "start_pos": draw(st.just(start) | st.integers(1, 4 * ratio)),
            "offset": offset}  # fmt: skip


def run(impl: Implementation, case: dict[str, Any]) -> list[list[int]]:
    out = impl.fn(ratio=case["ratio"], seqlen=case["seqlen"], start_pos=case["start_pos"], offset=case["offset"])
    shape = (case["seqlen"], (case["start_pos"] + case["seqlen"]) // case["ratio"])
    return output_lanes(out, torch.int32, shape, "compressed_indices output")


def check_equals_reference(impl: Implementation, case: dict[str, Any]) -> None:
    got = run(impl, case)
    args = (case["ratio"], case["seqlen"], case["start_pos"], case["offset"])
    expected = [list(row) for row in compressed_list.compressed_indices(*args)]
    assert_exact(expected, got, "compressed_indices vs the exact reference")


def check_rows_completed_by_the_query(impl: Implementation, case: dict[str, Any]) -> None:
    """Without the reference: the query at p lists, ascending and offset, exactly the rows j whose last
    position (j + 1) r - 1 is at most p (none completed later in its own step, none of its own missing), then -1."""
    got = run(impl, case)
    r, start, offset = case["ratio"], case["start_pos"], case["offset"]
    width = (start + case["seqlen"]) // r
    for i, lanes in enumerate(got):
        p = start + i
        rows = [j for j in range(width) if (j + 1) * r - 1 <= p]
        expected = [j + offset for j in rows] + [-1] * (width - len(rows))
        if lanes != expected:
            later = [j for j in range(width) if j + offset in lanes and (j + 1) * r - 1 > p]
            raise Mismatch(
                f"compressed_indices row {i} (query at position {p}, ratio {r})",
                [((i,), expected, lanes)],
                detail=f"rows completed after the query's position listed: {later}" if later else "",
            )


VERIFY_STEP = {"ratio": 128, "seqlen": 3, "start_pos": 126, "offset": 128}
"""Positions 126, 127, 128: the first query has completed no row; position 127 completes row 0."""
ONE_ROW = {"ratio": 128, "seqlen": 1, "start_pos": 127, "offset": 128}
"""The decode query that completes row 0 sees it."""

PROPERTIES = [
    Property(
        "compressed_equals_reference",
        "compressed_indices",
        compressed_cases(),
        check_equals_reference,
        examples=(VERIFY_STEP, ONE_ROW),
        doc="every query's rows equal the exact reference (prefill, decode, verify steps of up to 16)",
    ),
    Property(
        "compressed_rows_completed_by_the_query",
        "compressed_indices",
        compressed_cases(),
        check_rows_completed_by_the_query,
        doc="a query lists exactly the rows completed at or before its position: all of them, none later",
    ),
]
