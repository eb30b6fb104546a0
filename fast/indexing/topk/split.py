# mypy: disable-error-code="no-untyped-def,untyped-decorator"
"""The split-row path of the top-k (few long rows): the sampled threshold per row, then programs over (split,
row) that count and compact each split's survivors, so that :func:`fast.indexing.topk.row._topk_kernel`
entered with ``PRESPLIT`` selects and collects from the same buffer the one-program pass would leave."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fast.indexing.topk.config import Operands, TopKConfig, pow2
from fast.indexing.topk.select import _compact_span, _sample_threshold


@triton.jit
def _split_threshold_kernel(
    scores_ptr,
    lengths_ptr,
    keep_ptr,
    thresh_ptr,
    width,
    k,
    block_size,
    keep_stride,
    HAS_KEEP: tl.constexpr,
    BLOCK: tl.constexpr,
    SAMPLE: tl.constexpr,
    OVERSAMPLE: tl.constexpr,
    DIRECT: tl.constexpr,
):
    """Split-row path, step 1 (one program per row): the sampled threshold t of ``row._topk_kernel``, for the
    rows that take its sampled path (``n > k`` and ``n > DIRECT``); other rows are left alone."""
    row = tl.program_id(0).to(tl.int64)
    n = tl.minimum(tl.maximum(tl.load(lengths_ptr + row).to(tl.int32), 0), width)
    want = tl.minimum(n, k)
    if (n > k) & (n > DIRECT):
        t = _sample_threshold(
            scores_ptr + row * width,
            keep_ptr + row * keep_stride,
            block_size,
            thresh_ptr,
            thresh_ptr,
            n,
            want,
            HAS_KEEP,
            SAMPLE,
            OVERSAMPLE,
            BLOCK,
        )
        tl.store(thresh_ptr + row, t.to(tl.int32, bitcast=True))


@triton.jit
def _split_pass_kernel(
    scores_ptr,
    lengths_ptr,
    keep_ptr,
    thresh_ptr,
    counts_ptr,
    buf_key_ptr,
    buf_idx_ptr,
    width,
    k,
    block_size,
    keep_stride,
    splits,
    HAS_KEEP: tl.constexpr,
    DIRECT: tl.constexpr,
    CAP: tl.constexpr,
    SPLIT: tl.constexpr,
    BLOCK: tl.constexpr,
    NSPLIT: tl.constexpr,
    STORE: tl.constexpr,
):
    """Split-row path, one program per (split, row) over lanes ``[split * SPLIT, (split + 1) * SPLIT)`` of the
    visible prefix. Without ``STORE`` (step 2): count the keys >= t and > t into ``counts[row, 0, split]`` and
    ``counts[row, 1, split]``. With ``STORE`` (step 3): write the split's (key, lane) of every key >= t into the
    row's buffer from the sum of the counts of the splits before it, so the buffer is in lane order as the
    one-program pass leaves it; only when the whole row fits (``k <= count(>= t) <= CAP``), the only case in
    which ``row._topk_kernel`` reads the buffer."""
    split = tl.program_id(0)
    row = tl.program_id(1).to(tl.int64)
    n = tl.minimum(tl.maximum(tl.load(lengths_ptr + row).to(tl.int32), 0), width)
    want = tl.minimum(n, k)
    row_ptr = scores_ptr + row * width
    keep_row = keep_ptr + row * keep_stride
    row_counts = counts_ptr + row * 2 * NSPLIT
    start = split * SPLIT
    end = tl.maximum(tl.minimum(start + SPLIT, n), start)
    active = (n > k) & (n > DIRECT)
    at_least = n * 0
    above_t = n * 0
    if STORE:
        s = tl.arange(0, NSPLIT)
        ge = tl.load(row_counts + s, mask=s < splits, other=0)
        total = tl.sum(ge, 0)
        at_least = tl.sum(tl.where(s < split, ge, 0), 0)
        mine = tl.load(row_counts + split)
        active = active & (total >= want) & (total <= CAP) & (mine > 0)
    if active:
        t = tl.load(thresh_ptr + row).to(tl.uint32, bitcast=True)
        at_least, above_t = _compact_span(
            row_ptr, keep_row, block_size, buf_key_ptr + row * CAP, buf_idx_ptr + row * CAP, start, end, t, at_least,
            above_t, HAS_KEEP, CAP, BLOCK, STORE,
        )  # fmt: skip
    if not STORE:
        tl.store(row_counts + split, at_least)
        tl.store(row_counts + NSPLIT + split, above_t)


def launch_split(
    ops: Operands, cfg: TopKConfig, split_lanes: int, buffers: tuple[torch.Tensor, torch.Tensor]
) -> tuple[int, int, torch.Tensor, torch.Tensor]:
    """Run the split-row kernels (threshold, count, compact) over ``split_lanes``-lane splits, filling
    ``buffers`` (keys, lanes: i32[M, CAP]). Returns ``(splits, NSPLIT, thresh i32[M], counts i32[M, 2,
    NSPLIT])`` for :func:`fast.indexing.topk.row.launch_rows`."""
    rows, device = ops.scores.shape[0], ops.scores.device
    scores, lengths, _, keep = ops.pointers()[:4]
    width, k, _, _, block_size, keep_stride = ops.sizes()[:6]
    buf_key, buf_idx = buffers
    splits = -(-width // split_lanes)
    nsplit = pow2(splits)
    thresh = torch.empty(rows, dtype=torch.int32, device=device)
    counts = torch.empty(rows, 2, nsplit, dtype=torch.int32, device=device)
    restrict = ops.keep is not None
    _split_threshold_kernel[(rows,)](
        scores, lengths, keep, thresh, width, k, block_size, keep_stride, HAS_KEEP=restrict, BLOCK=cfg.block,
        SAMPLE=cfg.sample, OVERSAMPLE=cfg.oversample, DIRECT=cfg.direct, num_warps=cfg.num_warps,
    )  # fmt: skip
    for store in (False, True):
        _split_pass_kernel[(splits, rows)](
            scores, lengths, keep, thresh, counts, buf_key, buf_idx, width, k, block_size, keep_stride, splits,
            HAS_KEEP=restrict, DIRECT=cfg.direct, CAP=buf_key.shape[1], SPLIT=split_lanes,
            BLOCK=min(cfg.split_block, split_lanes), NSPLIT=nsplit, STORE=store, num_warps=cfg.split_warps,
        )  # fmt: skip
    return splits, nsplit, thresh, counts
