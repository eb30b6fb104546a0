# mypy: disable-error-code="no-untyped-def,untyped-decorator"
"""Logical compressed row -> physical slot, and prefill's gathered offsets, in Triton.

    slot_translation(rows, block_table, lengths, *, rows_per_block, guard="sentinel") -> i64[M, K]
    gathered_rows(rows, offsets)                                                       -> i64[M, K]

``slot = block_table[m, j // Bc] * Bc + j % Bc`` computed in int64 (block ids near ``2**31 / Bc`` give slots
past int32). Lane i of request m is -1 when it holds -1 or when ``i >= lengths[m]`` (the count guard: such a
lane is not even loaded). A lane whose row needs a table entry past the table, or an entry < 0, is never
dereferenced and gives -1 (the host check refuses those inputs first unless ``validate=False``).
The same translation runs fused in the top-k epilogue (``fast.indexing.topk.topk(block_table=...)``).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fast.indexing import validate as v


@triton.jit
def _slot_kernel(
    rows_ptr,
    table_ptr,
    lengths_ptr,
    out_ptr,
    requests,
    lanes,
    table_width,
    rows_per_block,
    BR: tl.constexpr,
    BL: tl.constexpr,
):
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    c = tl.program_id(1) * BL + tl.arange(0, BL)
    here = (r < requests)[:, None] & (c < lanes)[None, :]
    count = tl.load(lengths_ptr + r, mask=r < requests, other=0).to(tl.int64)
    live = here & (c[None, :] < count[:, None])
    at = r.to(tl.int64)[:, None] * lanes + c[None, :]
    j = tl.load(rows_ptr + at, mask=live, other=-1).to(tl.int64)
    entry = j // rows_per_block
    live = live & (j >= 0) & (entry < table_width)
    block = tl.load(table_ptr + r.to(tl.int64)[:, None] * table_width + entry, mask=live, other=-1).to(tl.int64)
    live = live & (block >= 0)
    tl.store(out_ptr + at, tl.where(live, block * rows_per_block + j % rows_per_block, -1), mask=here)


@triton.jit
def _gathered_kernel(rows_ptr, offsets_ptr, out_ptr, requests, lanes, BR: tl.constexpr, BL: tl.constexpr):
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    c = tl.program_id(1) * BL + tl.arange(0, BL)
    here = (r < requests)[:, None] & (c < lanes)[None, :]
    at = r.to(tl.int64)[:, None] * lanes + c[None, :]
    j = tl.load(rows_ptr + at, mask=here, other=-1).to(tl.int64)
    shift = tl.load(offsets_ptr + r, mask=r < requests, other=0).to(tl.int64)
    tl.store(out_ptr + at, tl.where(j >= 0, j + shift[:, None], -1), mask=here)


def _lanes_out(rows: torch.Tensor) -> tuple[torch.Tensor, tuple[int, int], dict[str, int]]:
    """The i64 output of a lane-wise kernel over ``rows`` (i32|i64[M, K]), its grid and its tiles."""
    v.backend_for("triton", rows.device)
    m, lanes = rows.shape
    br, bl = v.lane_tiles()
    out = torch.empty(m, lanes, dtype=torch.int64, device=rows.device)
    return out, (-(-m // br), -(-lanes // bl)), dict(BR=br, BL=bl, num_warps=4)


def slot_translation(
    rows: torch.Tensor,
    block_table: torch.Tensor,
    lengths: torch.Tensor,
    *,
    rows_per_block: int,
    guard: str = "sentinel",
    validate: bool = True,
) -> torch.Tensor:
    """Physical slots of top-k rows. rows: i32|i64[M, K] (-1 = no row); block_table: i32|i64[M, blocks];
    lengths: i32[M], lanes at or past it are -1 and unread (``guard="sentinel"``: pass K; ``"count"``: lanes
    below the count must hold rows). -> i64[M, K]."""
    v.check_slots(rows, block_table, lengths, rows_per_block=rows_per_block, guard=guard, validate=validate)
    out, grid, tiles = _lanes_out(rows)
    if out.numel():
        _slot_kernel[grid](rows, block_table, lengths, out, *out.shape, block_table.shape[1], rows_per_block, **tiles)
    return out


def gathered_rows(rows: torch.Tensor, offsets: torch.Tensor, *, validate: bool = True) -> torch.Tensor:
    """``rows[m, i] + offsets[m]`` (int64) on row lanes, -1 kept. rows: i32|i64[M, K]; offsets: i32|i64[M]."""
    v.check_gathered(rows, offsets, validate)
    out, grid, tiles = _lanes_out(rows)
    if out.numel():
        _gathered_kernel[grid](rows, offsets, out, *out.shape, **tiles)
    return out
