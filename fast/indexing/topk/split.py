# mypy: disable-error-code="no-untyped-def,untyped-decorator"
"""The split-row path of the top-k (few long rows): the sampled threshold per row, then programs over (split,
row) that count and compact each split's survivors, so that :func:`fast.indexing.topk.row._topk_kernel`
entered with ``PRESPLIT`` selects and collects from the same buffer the one-program pass would leave.

Every form leaves the same threshold, counts and buffer; ``TopKConfig.split_launches`` picks one. With 3 (the
default), three kernels: threshold; count; compact. With 2, the threshold kernel, then ``_split_fused_kernel``
counting and compacting in one launch. With 1, ``_split_fused_kernel`` alone, its rows' first programs (the
leaders) finding the threshold. The fused kernel's programs wait on each other: a split's survivors go after the
earlier splits' survivors, and the other splits of a row wait for its leader's threshold. A wait must only ever
be on a program that is already running, so each fused program draws a ticket from a counter and takes the item
of that ticket, not of its program id (CUDA does not promise to start blocks in index order). With leaders,
tickets 0 to M - 1 are the rows' first splits and later tickets the other splits, row by row; without, tickets
go row by row from each row's first split. A program waits only on items of lower tickets (its row's leader, its
row's earlier splits), whose programs have started and wait on lower tickets still, so the lowest never waits
and every wait ends, however many programs are resident. Its words (int64 in ``sync``, zeroed by the host
before the launch; 0 means not yet written, so a published value is its own flag):

    sync[0]                          the ticket counter
    sync[1 + row]                    t + 1 (t widened without sign: never 0), written by the row's leader
    sync[1 + M + row * NSPLIT + s]   count(key >= t) + 1 of split s, written once the split is counted
    sync[1 + M + M * NSPLIT]         interpreted only: 1 if a wait found its word unwritten (a broken order)
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fast.indexing import validate as v
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


@triton.jit
def _wait_words(ptrs, mask, fault_ptr, INTERPRETED: tl.constexpr):
    """The int64 words at ``ptrs`` (1 where ``mask`` is off) once other programs have made them all non-zero.
    ``INTERPRETED``: programs run one after another in ticket order, so the words are already written, or
    ``fault_ptr`` is set (never a wait that hangs)."""
    words = tl.load(ptrs, mask=mask, other=1, volatile=True)
    if INTERPRETED:
        if tl.min(words, 0) == 0:
            tl.store(fault_ptr, 1)
    else:
        while tl.min(words, 0) == 0:
            words = tl.load(ptrs, mask=mask, other=1, volatile=True)
    return words


@triton.jit
def _split_fused_kernel(
    scores_ptr,
    lengths_ptr,
    keep_ptr,
    thresh_ptr,
    counts_ptr,
    sync_ptr,
    buf_key_ptr,
    buf_idx_ptr,
    width,
    k,
    block_size,
    keep_stride,
    splits,
    rows,
    HAS_KEEP: tl.constexpr,
    BLOCK: tl.constexpr,
    SAMPLE: tl.constexpr,
    OVERSAMPLE: tl.constexpr,
    DIRECT: tl.constexpr,
    CAP: tl.constexpr,
    SPLIT: tl.constexpr,
    SPLIT_BLOCK: tl.constexpr,
    NSPLIT: tl.constexpr,
    LEADERS: tl.constexpr,
    INTERPRETED: tl.constexpr,
):
    """The count and compaction kernels in one launch, and with ``LEADERS`` the threshold kernel too: one program
    per (split, row), the item of its ticket (module docstring), for rows on the sampled path. With ``LEADERS``
    the leader (split 0) finds t as ``_split_threshold_kernel`` does and publishes it; without, that kernel ran
    first and ``thresh`` holds t. Each split counts its keys >= t and > t, publishes the first count, waits for
    the earlier splits' counts of its row and writes its survivors from their sum, as ``_split_pass_kernel``
    does (positions at or past ``CAP`` are not written: ``row._topk_kernel`` then does not read the buffer).
    Leaves ``thresh`` and ``counts`` as the three kernels do."""
    ticket = tl.atomic_add(sync_ptr, 1).to(tl.int32)
    if LEADERS:
        others = tl.maximum(splits - 1, 1)
        leader = ticket < rows
        row = tl.where(leader, ticket, (ticket - rows) // others).to(tl.int64)
        split = tl.where(leader, 0, 1 + (ticket - rows) % others)
    else:
        row = (ticket // splits).to(tl.int64)
        split = ticket % splits
    n = tl.minimum(tl.maximum(tl.load(lengths_ptr + row).to(tl.int32), 0), width)
    want = tl.minimum(n, k)
    row_ptr = scores_ptr + row * width
    keep_row = keep_ptr + row * keep_stride
    row_counts = counts_ptr + row * 2 * NSPLIT
    thresh_word = sync_ptr + 1 + row
    at_least_words = sync_ptr + 1 + rows + row * NSPLIT
    fault = sync_ptr + 1 + rows + rows * NSPLIT
    if (n > k) & (n > DIRECT):
        if LEADERS:
            if leader:
                t = _sample_threshold(
                    row_ptr, keep_row, block_size, buf_key_ptr, buf_idx_ptr, n, want, HAS_KEEP, SAMPLE, OVERSAMPLE,
                    BLOCK,
                )  # fmt: skip
                tl.store(thresh_ptr + row, t.to(tl.int32, bitcast=True))
                word = (t.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF) + 1
                tl.atomic_xchg(thresh_word, word)
            else:
                one = tl.arange(0, 1)
                word = tl.sum(tl.maximum(_wait_words(thresh_word + one, one == 0, fault, INTERPRETED), 1), 0)
            t = (word - 1).to(tl.int32).to(tl.uint32, bitcast=True)
        else:
            t = tl.load(thresh_ptr + row).to(tl.uint32, bitcast=True)
        start = split * SPLIT
        end = tl.maximum(tl.minimum(start + SPLIT, n), start)
        buf_key = buf_key_ptr + row * CAP
        buf_idx = buf_idx_ptr + row * CAP
        at_least, above_t = _compact_span(
            row_ptr, keep_row, block_size, buf_key, buf_idx, start, end, t, n * 0, n * 0, HAS_KEEP, CAP, SPLIT_BLOCK,
            False,
        )  # fmt: skip
        tl.store(row_counts + split, at_least)
        tl.store(row_counts + NSPLIT + split, above_t)
        tl.atomic_xchg(at_least_words + split, at_least.to(tl.int64) + 1)
        s = tl.arange(0, NSPLIT)
        earlier = _wait_words(at_least_words + s, s < split, fault, INTERPRETED)
        first = tl.sum(tl.maximum(earlier, 1) - 1, 0).to(tl.int32)
        if (at_least > 0) & (first < CAP):
            _compact_span(
                row_ptr, keep_row, block_size, buf_key, buf_idx, start, end, t, first, n * 0, HAS_KEEP, CAP,
                SPLIT_BLOCK, True,
            )  # fmt: skip


def sync_words(rows: int, nsplit: int) -> int:
    """The int64 words of the fused form's ``sync`` for ``rows`` rows of ``nsplit`` splits (module docstring)."""
    return 1 + rows + rows * nsplit + 1


def launch_split(
    ops: Operands, cfg: TopKConfig, split_lanes: int, buffers: tuple[torch.Tensor, torch.Tensor]
) -> tuple[int, int, torch.Tensor, torch.Tensor]:
    """Run the split-row kernels (threshold, count, compact, in ``cfg.split_launches`` launches) over
    ``split_lanes``-lane splits, filling ``buffers`` (keys, lanes: i32[M, CAP]). Returns ``(splits, NSPLIT,
    thresh i32[M], counts i32[M, 2, NSPLIT])`` for :func:`fast.indexing.topk.row.launch_rows`."""
    rows, device = ops.scores.shape[0], ops.scores.device
    scores, lengths, _, keep = ops.pointers()[:4]
    width, k, _, _, block_size, keep_stride = ops.sizes()[:6]
    buf_key, buf_idx = buffers
    splits = -(-width // split_lanes)
    nsplit = pow2(splits)
    thresh = torch.empty(rows, dtype=torch.int32, device=device)
    counts = torch.empty(rows, 2, nsplit, dtype=torch.int32, device=device)
    restrict = ops.keep is not None
    interpreted = v.interpreted()
    if cfg.split_launches > 1:
        _split_threshold_kernel[(rows,)](
            scores, lengths, keep, thresh, width, k, block_size, keep_stride, HAS_KEEP=restrict, BLOCK=cfg.block,
            SAMPLE=cfg.sample, OVERSAMPLE=cfg.oversample, DIRECT=cfg.direct, num_warps=cfg.num_warps,
        )  # fmt: skip
    if cfg.split_launches < 3:
        sync = torch.zeros(sync_words(rows, nsplit), dtype=torch.int64, device=device)
        _split_fused_kernel[(splits * rows,)](
            scores, lengths, keep, thresh, counts, sync, buf_key, buf_idx, width, k, block_size, keep_stride, splits,
            rows, HAS_KEEP=restrict, BLOCK=cfg.block, SAMPLE=cfg.sample, OVERSAMPLE=cfg.oversample, DIRECT=cfg.direct,
            CAP=buf_key.shape[1], SPLIT=split_lanes, SPLIT_BLOCK=min(cfg.split_block, split_lanes), NSPLIT=nsplit,
            LEADERS=cfg.split_launches == 1, INTERPRETED=interpreted, num_warps=cfg.split_warps,
        )  # fmt: skip
        if interpreted and int(sync[-1]):
            raise RuntimeError("split-row kernel: a wait found its word unwritten (the ticket order is broken)")
        return splits, nsplit, thresh, counts
    for store in (False, True):
        _split_pass_kernel[(splits, rows)](
            scores, lengths, keep, thresh, counts, buf_key, buf_idx, width, k, block_size, keep_stride, splits,
            HAS_KEEP=restrict, DIRECT=cfg.direct, CAP=buf_key.shape[1], SPLIT=split_lanes,
            BLOCK=min(cfg.split_block, split_lanes), NSPLIT=nsplit, STORE=store, num_warps=cfg.split_warps,
        )  # fmt: skip
    return splits, nsplit, thresh, counts
