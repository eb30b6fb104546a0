# mypy: disable-error-code="no-untyped-def,untyped-decorator"
"""V4.1 candidate blocks in Triton: block scores, the kept blocks, and restoring compact offsets to rows.

    block_scores(scores, lengths, *, block_size, pin_newest=True)                       -> f32[M, ceil(N / bs)]
    candidate_select(scores, lengths, *, block_size, topk_blocks, pin_newest=True, drop_nan=True) -> i32[M, topk_blocks]
    candidate_restore(offsets, candidate_blocks, *, block_size, visible=None)          -> i32[M, k]
    candidate_remap(columns, candidate_blocks, lengths, *, block_size)                 -> (i32[M, k], i32[M])

Block scores: one program per (row, tile of blocks) loads a [blocks, bs] tile of the visible rows (rows at or
past ``lengths[m]`` are not loaded and count as -inf); a block holding a NaN scores NaN (explicitly: the
hardware max drops NaN); with ``pin_newest`` the block holding row ``lengths[m] - 1`` scores +inf. The kept
blocks are the top-k kernel's answer on those scores (``fast.indexing.topk``, ascending block index, ties to
the lowest block) with chosen -inf blocks, and NaN blocks under ``drop_nan``, turned into -1 lanes. The
restricted second-level top-k is ``topk(..., candidate_blocks=kept, block_size=bs)``.

Remap: a sparse consumer scores the positions below ``lengths[m]`` of the candidate blocks in ascending order.
Block j of a row holds ``v_j = clamp(lengths[m] - b_j * bs, 0, bs)`` of them (0 for padding) and they start at
column ``p_j = sum of v_i over the row's blocks b_i < b_j`` (blocks are distinct), so no sort is needed: one
program per (row, tile of columns) walks the blocks ``CH`` at a time, sums ``p_j`` over the blocks ``CH`` at a
time, and column c lands in the block with ``p_j <= c < p_j + v_j``, at position ``b_j * bs + c - p_j``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fast.indexing import topk as tk
from fast.indexing import validate as v


@triton.jit
def _block_scores_kernel(
    scores_ptr,
    lengths_ptr,
    out_ptr,
    rows,
    width,
    blocks,
    block_size,
    PIN: tl.constexpr,
    R: tl.constexpr,
    TILE: tl.constexpr,
    BSP: tl.constexpr,
):
    """``R`` rows x ``TILE`` blocks x ``BSP`` (>= block_size) lanes per program."""
    r = tl.program_id(0) * R + tl.arange(0, R)
    b = tl.program_id(1) * TILE + tl.arange(0, TILE)
    c = tl.arange(0, BSP)
    here = r < rows
    n = tl.minimum(tl.maximum(tl.load(lengths_ptr + r, mask=here, other=0).to(tl.int32), 0), width)
    lane = b[None, :, None] * block_size + c[None, None, :]
    seen = here[:, None, None] & (c[None, None, :] < block_size) & (lane < n[:, None, None])
    x = tl.load(scores_ptr + r.to(tl.int64)[:, None, None] * width + lane, mask=seen, other=float("-inf"))
    best = tl.max(x, 2)
    has_nan = tl.max((x != x).to(tl.int32), 2) > 0
    best = tl.where(has_nan, float("nan"), best)
    if PIN:
        newest = (n[:, None] > 0) & (b[None, :] == (n[:, None] - 1) // block_size)
        best = tl.where(newest, float("inf"), best)
    at = r.to(tl.int64)[:, None] * blocks + b[None, :]
    tl.store(out_ptr + at, best, mask=here[:, None] & (b < blocks)[None, :])


@triton.jit
def _restore_kernel(
    offsets_ptr,
    blocks_ptr,
    visible_ptr,
    out_ptr,
    rows,
    lanes,
    slots,
    block_size,
    HAS_VISIBLE: tl.constexpr,
    BR: tl.constexpr,
    BL: tl.constexpr,
):
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    c = tl.program_id(1) * BL + tl.arange(0, BL)
    here = (r < rows)[:, None] & (c < lanes)[None, :]
    at = r.to(tl.int64)[:, None] * lanes + c[None, :]
    o = tl.load(offsets_ptr + at, mask=here, other=-1).to(tl.int64)
    ok = here & (o >= 0) & (o < slots * block_size)
    block = tl.load(blocks_ptr + r.to(tl.int64)[:, None] * slots + o // block_size, mask=ok, other=-1).to(tl.int64)
    restored = block * block_size + o % block_size
    ok = ok & (block >= 0)
    if HAS_VISIBLE:
        seen = tl.load(visible_ptr + r, mask=r < rows, other=0).to(tl.int64)
        ok = ok & (restored < seen[:, None])
    tl.store(out_ptr + at, tl.where(ok, restored, -1).to(tl.int32), mask=here)


@triton.jit
def _visible_in_block(b, n, block_size):
    """Positions below ``n`` in block ``b`` (0 for a padding block)."""
    return tl.where(b >= 0, tl.minimum(tl.maximum(n - b * block_size, 0), block_size), 0)


@triton.jit
def _remap_kernel(
    columns_ptr,
    blocks_ptr,
    lengths_ptr,
    out_ptr,
    counts_ptr,
    lanes,
    slots,
    block_size,
    BL: tl.constexpr,
    CH: tl.constexpr,
):
    r = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1) * BL + tl.arange(0, BL)
    here = c < lanes
    n = tl.load(lengths_ptr + r).to(tl.int64)
    col = tl.load(columns_ptr + r * lanes + c, mask=here, other=-1).to(tl.int64)
    found = tl.full([BL], -1, dtype=tl.int64)
    count = n * 0
    for j0 in range(0, slots, CH):
        j = j0 + tl.arange(0, CH)
        bj = tl.load(blocks_ptr + r * slots + j, mask=j < slots, other=-1).to(tl.int64)
        vj = _visible_in_block(bj, n, block_size)
        start = tl.zeros([CH], dtype=tl.int64)
        for i0 in range(0, slots, CH):
            i = i0 + tl.arange(0, CH)
            bi = tl.load(blocks_ptr + r * slots + i, mask=i < slots, other=-1).to(tl.int64)
            vi = _visible_in_block(bi, n, block_size)
            start += tl.sum(tl.where(bi[:, None] < bj[None, :], vi[:, None], 0), 0)
        count += tl.sum(vj, 0)
        inside = (col[:, None] >= start[None, :]) & (col[:, None] < (start + vj)[None, :])
        position = bj[None, :] * block_size + col[:, None] - start[None, :]
        found = tl.maximum(found, tl.max(tl.where(inside, position, -1), 1))
    tl.store(out_ptr + r * lanes + c, found.to(tl.int32), mask=here)
    if tl.program_id(1) == 0:
        tl.store(counts_ptr + r, count.to(tl.int32))


def block_scores(
    scores: torch.Tensor, lengths: torch.Tensor, *, block_size: int, pin_newest: bool = True, validate: bool = True
) -> torch.Tensor:
    """Per block of ``block_size`` rows: max over the visible rows (NaN if one is NaN, -inf if none), the
    newest visible block +inf when pinned. scores: f32[M, N]; lengths: i32[M] -> f32[M, ceil(N / bs)]."""
    blocks = v.check_candidates(scores, lengths, block_size=block_size, topk_blocks=0, validate=validate).blocks
    v.backend_for("triton", scores.device)
    out = torch.empty(scores.shape[0], blocks, dtype=torch.float32, device=scores.device)
    if out.numel() == 0:
        return out
    bsp = tk.pow2(block_size)
    if v.interpreted():
        per_program, tile = min(tk.pow2(out.shape[0]), 8), min(tk.pow2(blocks), 64)
    else:
        per_program, tile = 1, max(1, min(tk.pow2(blocks), 4096 // bsp))
    _block_scores_kernel[(-(-out.shape[0] // per_program), -(-blocks // tile))](
        scores,
        lengths,
        out,
        out.shape[0],
        scores.shape[1],
        blocks,
        block_size,
        PIN=pin_newest,
        R=per_program,
        TILE=tile,
        BSP=bsp,
        num_warps=4,
    )
    return out


def candidate_select(
    scores: torch.Tensor,
    lengths: torch.Tensor,
    *,
    block_size: int,
    topk_blocks: int,
    pin_newest: bool = True,
    drop_nan: bool = True,
    validate: bool = True,
) -> torch.Tensor:
    """Kept candidate blocks of each row, ascending, -1 fill: i32[M, topk_blocks] (docs/indexing.md).

    The ``topk_blocks`` best blocks (NaN > +inf > numbers > -inf, ties to the lowest block) take the slots; a
    block in a slot is kept unless it scores -inf (or NaN, with ``drop_nan``: the public reference's
    ``score > -inf``).
    """
    a = v.check_candidates(scores, lengths, block_size=block_size, topk_blocks=topk_blocks, pin_newest=pin_newest,
                           drop_nan=drop_nan, validate=validate)  # fmt: skip
    v.backend_for("triton", scores.device)
    small = tk.default_config().pairwise
    if small and a.blocks <= small and scores.shape[1]:
        return tk.small_candidates(a)
    best = block_scores(scores, lengths, block_size=block_size, pin_newest=pin_newest, validate=False)
    counts = (lengths.to(torch.int64).clamp(0, scores.shape[1]) + block_size - 1) // block_size
    return tk.topk(best, counts, k=topk_blocks, convention="v4.1", drop_neg_inf=True, drop_nan=drop_nan, validate=False)


def candidate_restore(
    offsets: torch.Tensor,
    candidate_blocks: torch.Tensor,
    *,
    block_size: int,
    visible: torch.Tensor | None = None,
    validate: bool = True,
) -> torch.Tensor:
    """``o -> candidate_blocks[m, o // bs] * bs + o % bs``, -1 kept; offsets into a padding block (-1), outside
    the candidate list, or (with ``visible``: i32[M]) restoring to a row ``>= visible[m]`` give -1.
    offsets: i32|i64[M, k]; candidate_blocks: i32|i64[M, nb] -> i32[M, k]."""
    v.check_restore(offsets, candidate_blocks, block_size=block_size, visible=visible, validate=validate)
    v.backend_for("triton", offsets.device)
    rows, lanes = offsets.shape
    out = torch.empty(rows, lanes, dtype=torch.int32, device=offsets.device)
    if out.numel() == 0:
        return out
    br, bl = v.lane_tiles()
    _restore_kernel[(-(-rows // br), -(-lanes // bl))](
        offsets,
        candidate_blocks,
        offsets if visible is None else visible,
        out,
        rows,
        lanes,
        candidate_blocks.shape[1],
        block_size,
        HAS_VISIBLE=visible is not None,
        BR=br,
        BL=bl,
        num_warps=4,
    )
    return out


def candidate_remap(
    columns: torch.Tensor,
    candidate_blocks: torch.Tensor,
    lengths: torch.Tensor,
    *,
    block_size: int,
    validate: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Column ``c`` of row m -> the c-th position below ``lengths[m]`` of its candidate blocks in ascending order
    (blocks distinct, in any order, -1 padding anywhere); -1 and columns at or past the count give -1; with each
    row's count (vLLM's ``end``). columns: i32|i64[M, k]; candidate_blocks: i32|i64[M, nb]; lengths: i32|i64[M]
    -> (i32[M, k], i32[M])."""
    a = v.check_remap(columns, candidate_blocks, lengths, block_size=block_size, validate=validate)
    v.backend_for("triton", columns.device)
    rows, lanes = columns.shape
    out = torch.empty(rows, lanes, dtype=torch.int32, device=columns.device)
    counts = torch.empty(rows, dtype=torch.int32, device=columns.device)
    if rows == 0:
        return out, counts
    bl = v.lane_tiles()[1]
    chunk = min(tk.pow2(max(a.candidate_blocks.shape[1], 1)), 16 if v.interpreted() else 64)
    _remap_kernel[(rows, max(1, -(-lanes // bl)))](
        columns,
        candidate_blocks,
        lengths,
        out,
        counts,
        lanes,
        candidate_blocks.shape[1],
        block_size,
        BL=bl,
        CH=chunk,
        num_warps=4,
    )
    return out, counts
