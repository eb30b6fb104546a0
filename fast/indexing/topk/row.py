# mypy: disable-error-code="no-untyped-def,untyped-decorator"
"""The one-program-per-row top-k kernel: threshold, select and collect (steps 1-5 of ``fast.indexing.topk``),
and its launch."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fast.indexing.topk.config import Operands, TopKConfig
from fast.indexing.topk.select import _compact_span, _drop, _emit, _finish, _keys, _kth_key, _sample_threshold


@triton.jit
def _topk_kernel(
    scores_ptr,
    lengths_ptr,
    offsets_ptr,
    keep_ptr,
    table_ptr,
    out_ptr,
    buf_key_ptr,
    buf_idx_ptr,
    rank_key_ptr,
    rank_val_ptr,
    thresh_ptr,
    counts_ptr,
    width,
    k,
    lanes,
    fill,
    block_size,
    keep_stride,
    table_width,
    rows_per_block,
    splits,
    HAS_OFFSETS: tl.constexpr,
    HAS_KEEP: tl.constexpr,
    TRANSLATE: tl.constexpr,
    RANK: tl.constexpr,
    DROP_NEG_INF: tl.constexpr,
    DROP_NAN: tl.constexpr,
    BLOCK: tl.constexpr,
    SAMPLE: tl.constexpr,
    OVERSAMPLE: tl.constexpr,
    DIRECT: tl.constexpr,
    CAP: tl.constexpr,
    KPAD: tl.constexpr,
    PRESPLIT: tl.constexpr,
    NSPLIT: tl.constexpr,
):
    """One program per row (steps in the docstring of ``fast.indexing.topk``). ``PRESPLIT``: the sampled path's
    threshold, counts and buffer come from the split-row kernels (``thresh_ptr`` i32[M], ``counts_ptr``
    i32[M, 2, NSPLIT]: keys >= t and > t per split) instead of this program's own sample and compaction pass."""
    row = tl.program_id(0).to(tl.int64)
    row_ptr = scores_ptr + row * width
    keep_row = keep_ptr + row * keep_stride
    table_row = table_ptr + row * table_width
    buf_key = buf_key_ptr + row * CAP
    buf_idx = buf_idx_ptr + row * CAP
    n = tl.minimum(tl.maximum(tl.load(lengths_ptr + row).to(tl.int32), 0), width)
    want = tl.minimum(n, k)
    out_row = out_ptr + row * lanes
    offset = tl.load(offsets_ptr + row).to(tl.int64) if HAS_OFFSETS else 0
    taken = n * 0
    # Which keys to collect from (the row, or the buffer of survivors), the threshold and its tie quota.
    # n <= k: every visible lane (threshold 0 is below every key).
    count = n
    from_buf = n * 0
    threshold = (n * 0).to(tl.uint32)
    quota = n
    if n > k:
        if n <= DIRECT:
            threshold, above = _kth_key(
                row_ptr, keep_row, block_size, buf_key, buf_idx, n, 1, from_buf, want, HAS_KEEP, BLOCK, DIRECT
            )
            quota = want - above
        else:
            if PRESPLIT:
                t = tl.load(thresh_ptr + row).to(tl.uint32, bitcast=True)
                s = tl.arange(0, NSPLIT)
                at_least = tl.sum(tl.load(counts_ptr + row * 2 * NSPLIT + s, mask=s < splits, other=0), 0)
                above_t = tl.sum(tl.load(counts_ptr + row * 2 * NSPLIT + NSPLIT + s, mask=s < splits, other=0), 0)
            else:
                t = _sample_threshold(
                    row_ptr, keep_row, block_size, buf_key, buf_idx, n, want, HAS_KEEP, SAMPLE, OVERSAMPLE, BLOCK
                )
                at_least, above_t = _compact_span(
                    row_ptr, keep_row, block_size, buf_key, buf_idx, 0, n, t, n * 0, n * 0, HAS_KEEP, CAP, BLOCK, True
                )
            tl.debug_barrier()
            if (at_least >= want) & (at_least <= CAP):
                # the survivors hold the answer: select among them, collect from the buffer
                count = at_least
                from_buf = n * 0 + 1
                threshold, above = _kth_key(
                    row_ptr, keep_row, block_size, buf_key, buf_idx, count, 1, from_buf, want, HAS_KEEP, BLOCK, CAP
                )
                quota = want - above
            elif (above_t < want) & (at_least >= want):
                # t itself is the k-th largest key (too many ties at t to buffer)
                threshold = t
                quota = want - above_t
            else:
                # the sample misled: exact select over the whole row
                threshold, above = _kth_key(
                    row_ptr, keep_row, block_size, buf_key, buf_idx, n, 1, from_buf, want, HAS_KEEP, BLOCK, 0
                )
                quota = want - above
    # Collect: chosen lanes in index order; their output positions are prefix sums of the chosen mask.
    dst = rank_val_ptr + row * KPAD if RANK else out_ptr + row * lanes
    rank_keys = rank_key_ptr + row * KPAD
    ties = n * 0
    for start in range(0, count, BLOCK):
        i = start + tl.arange(0, BLOCK)
        valid = i < count
        key, idx = _keys(row_ptr, keep_row, block_size, buf_key, buf_idx, i, valid, 1, from_buf, HAS_KEEP)
        tie = valid & (key == threshold)
        tie_rank = ties + tl.cumsum(tie.to(tl.int32), 0) - 1
        chosen = _drop((valid & (key > threshold)) | (tie & (tie_rank < quota)), key, DROP_NEG_INF, DROP_NAN)
        pos = taken + tl.cumsum(chosen.to(tl.int32), 0) - 1
        _emit(dst, rank_keys, table_row, idx, key, pos, chosen, offset, table_width, rows_per_block, TRANSLATE, RANK)
        taken += tl.sum(chosen.to(tl.int32), 0)
        ties += tl.sum(tie.to(tl.int32), 0)
    _finish(out_row, dst, rank_keys, taken, lanes, fill, RANK, KPAD, BLOCK)


def launch_rows(
    ops: Operands,
    cfg: TopKConfig,
    buffers: tuple[torch.Tensor, torch.Tensor],
    kpad: int,
    split: tuple[int, int, torch.Tensor, torch.Tensor] | None,
) -> torch.Tensor:
    """Launch :func:`_topk_kernel`, one program per row, into ``ops.out``. ``buffers``: the rows' candidate
    buffers (keys, lanes: i32[M, CAP]); ``split``: ``(splits, NSPLIT, thresh, counts)`` of the split-row
    kernels that ran first (``PRESPLIT``), None for the one-program path."""
    rows = ops.scores.shape[0]
    splits, nsplit, thresh, counts = split if split is not None else (0, 1, ops.stand_in, ops.stand_in)
    buf_key, buf_idx = buffers
    rank_key, rank_val = ops.rank_scratch(kpad)
    _topk_kernel[(rows,)](
        *ops.pointers(), buf_key, buf_idx, rank_key, rank_val, thresh, counts, *ops.sizes(), splits, **ops.flags(),
        BLOCK=cfg.block, SAMPLE=cfg.sample, OVERSAMPLE=cfg.oversample, DIRECT=cfg.direct, CAP=buf_key.shape[1],
        KPAD=kpad, PRESPLIT=split is not None, NSPLIT=nsplit, num_warps=cfg.num_warps,
    )  # fmt: skip
    return ops.out
