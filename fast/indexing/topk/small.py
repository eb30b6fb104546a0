# mypy: disable-error-code="no-untyped-def,untyped-decorator"
"""The pairwise-rank top-k for short rows (meant for the interpreter, which pays per operation rather than per
element), and candidate blocks in the same single launch."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fast.indexing.topk.config import Operands, pow2
from fast.indexing.topk.select import _order_keys, _table_slots
from fast.indexing.validate import CandidateArgs


@triton.jit
def _topk_small_kernel(
    scores_ptr,
    lengths_ptr,
    offsets_ptr,
    keep_ptr,
    table_ptr,
    out_ptr,
    rows,
    width,
    k,
    lanes,
    fill,
    block_size,
    keep_stride,
    table_width,
    rows_per_block,
    HAS_OFFSETS: tl.constexpr,
    HAS_KEEP: tl.constexpr,
    TRANSLATE: tl.constexpr,
    RANK: tl.constexpr,
    DROP_NEG_INF: tl.constexpr,
    DROP_NAN: tl.constexpr,
    R: tl.constexpr,
    P: tl.constexpr,
    L: tl.constexpr,
    BSP: tl.constexpr,
    PIN: tl.constexpr,
):
    """Rows of at most ``P`` lanes, ``R`` rows per program: each lane's rank by pairwise comparison (key
    descending, index ascending), the chosen lanes are those ranked below k. Meant for the interpreter, which
    pays per operation rather than per element.

    ``BSP > 0``: the lanes are candidate blocks of ``block_size`` score rows (``BSP`` >= block_size): each
    lane's score is its block's maximum over the visible rows (NaN if one is NaN), the newest visible block
    +inf when ``PIN``; ``lengths`` then counts score rows, ``width`` score-row width (one launch for
    ``candidates.candidate_select``)."""
    r = tl.program_id(0) * R + tl.arange(0, R)[:, None]
    here = r < rows
    row = r.to(tl.int64)
    i = tl.arange(0, P)[None, :]
    n = tl.minimum(tl.maximum(tl.load(lengths_ptr + r, mask=here, other=0).to(tl.int32), 0), width)
    if BSP > 0:
        c = tl.arange(0, BSP)[None, None, :]
        lane = i[:, :, None] * block_size + c
        seen = here[:, :, None] & (c < block_size) & (lane < n[:, :, None])
        rows_x = tl.load(scores_ptr + row[:, :, None] * width + lane, mask=seen, other=float("-inf"))
        x = tl.max(rows_x, 2)
        x = tl.where(tl.max((rows_x != rows_x).to(tl.int32), 2) > 0, float("nan"), x)
        n = (n + block_size - 1) // block_size
        if PIN:
            x = tl.where(i == n - 1, float("inf"), x)
    want = tl.minimum(n, k)
    valid = here & (i < n)
    if BSP == 0:
        x = tl.load(scores_ptr + row * width + i, mask=valid, other=0.0)
    key = _order_keys(x, keep_ptr + row * keep_stride, i, block_size, valid, HAS_KEEP)
    mine = key[:, :, None]
    other = key[:, None, :]
    lane = tl.arange(0, P)
    better = (other > mine) | ((other == mine) & (lane[None, None, :] < lane[None, :, None]))
    rank = tl.sum((better & valid[:, None, :]).to(tl.int32), 2)
    chosen = valid & (rank < want)
    if DROP_NEG_INF:
        chosen = chosen & (key != 0x007FFFFF)
    if DROP_NAN:
        chosen = chosen & (key != 0xFFFFFFFF)
    if RANK:
        pos = tl.sum((chosen[:, None, :] & (rank[:, None, :] < rank[:, :, None])).to(tl.int32), 2)
    else:
        pos = tl.cumsum(chosen.to(tl.int32), 1) - 1
    idx = i.to(tl.int64) + row * 0
    if TRANSLATE:
        value = _table_slots(table_ptr + row * table_width, idx, chosen, table_width, rows_per_block)
    elif HAS_OFFSETS:
        value = idx + tl.load(offsets_ptr + r, mask=here, other=0).to(tl.int64)
    else:
        value = idx
    tl.store(out_ptr + row * lanes + pos, value.to(out_ptr.dtype.element_ty), mask=chosen)
    taken = tl.sum(chosen.to(tl.int32), 1)[:, None]
    j = tl.arange(0, L)[None, :]
    empty = tl.zeros([R, L], dtype=out_ptr.dtype.element_ty) + fill
    tl.store(out_ptr + row * lanes + j, empty, mask=here & (j >= taken) & (j < lanes))


def small_rows(ops: Operands, lanes_in: int, block_lanes: int = 0, pin: bool = False) -> torch.Tensor:
    """Launch :func:`_topk_small_kernel` into ``ops.out``, up to 8 rows a program: ``lanes_in`` lanes a row
    (score rows, or candidate blocks of ``ops.block_size`` rows when ``block_lanes`` > 0)."""
    rows = ops.scores.shape[0]
    per_program = min(pow2(rows), 8)
    _topk_small_kernel[(-(-rows // per_program),)](
        *ops.pointers(), rows, *ops.sizes(), **ops.flags(), R=per_program, P=max(2, pow2(lanes_in)),
        L=max(2, pow2(ops.out.shape[1])), BSP=block_lanes, PIN=pin, num_warps=1,
    )  # fmt: skip
    return ops.out


def small_candidates(call: CandidateArgs) -> torch.Tensor:
    """Candidate blocks of a checked ``candidate_select`` call in one launch of :func:`_topk_small_kernel`
    (interpreter; rows of few blocks)."""
    rows = call.scores.shape[0]
    out = torch.empty(rows, call.topk_blocks, dtype=torch.int32, device=call.scores.device)
    if out.numel() == 0:
        return out
    k = min(call.topk_blocks, call.blocks)
    ops = Operands(call.scores, call.lengths, out, k, -1, block_size=call.block_size, drop_neg_inf=True,
                   drop_nan=call.drop_nan)  # fmt: skip
    return small_rows(ops, call.blocks, block_lanes=pow2(call.block_size), pin=call.pin_newest)
