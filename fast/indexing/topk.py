# mypy: disable-error-code="no-untyped-def,untyped-decorator"
"""Valid-prefix top-k in Triton: a sampled threshold, one compaction pass, a radix select on the few survivors,
and a collect pass that writes the chosen rows in ascending index order (docs/indexing-kernels.md).

    topk(scores, lengths, *, k, convention="v4.1", offsets=None, fill=None, block_table=None,
         rows_per_block=None, candidate_blocks=None, block_size=None, drop_neg_inf=False, drop_nan=False,
         validate=True, config=None) -> i32[M, lanes] (i64 slots with block_table)

One program per score row. Rows are ranked by a 32-bit order key (computed in :func:`_keys`): the float's bits made
monotone, NaN mapped above +inf and -0 onto +0, so equal keys are exactly equal scores. The k-th largest key T
and the count G of keys above it determine the answer: every key > T, and the first k - G keys == T in index
order (the lowest index wins a tie). Steps per row of n visible lanes (lanes past n are never loaded):

1. n <= k: every visible lane is chosen (collect with T = 0).
2. Sample ``min(n, SAMPLE)`` lanes at stride ``n // SAMPLE``; a radix select (four 8-bit histogram passes)
   gives a key t expected to have about ``OVERSAMPLE * k`` keys >= t in the row.
3. One pass over the row compacts (key, index) of every key >= t into a per-row buffer, in index order, and
   counts the keys >= t and > t.
4. k <= count(>= t) <= CAP: radix select on the buffer, then collect from the buffer.
   count(> t) < k <= count(>= t): T = t, collect from the row.  Otherwise (a sample that misled): radix
   select over the whole row (four passes), then collect from the row. Every path gives the same answer.
5. Collect: prefix sums of the chosen mask give each chosen lane its output position; the lane's row (plus its
   offset, or translated to a slot through the block table in int64) is stored there. Rank-order conventions
   then sort the chosen lanes by (key descending, index ascending) with one bitonic sort.

Split-row path (few long rows, :func:`split_lanes_for`): step 2 in a per-row kernel, step 3 by programs over
(split, row) that count, then write each split's survivors at the prefix of the earlier splits' counts, and
steps 4-5 by the same kernel entered with ``PRESPLIT``: the same t, counts and buffer, the same output.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from fast.indexing import validate as v


@dataclass(frozen=True)
class TopKConfig:
    """Launch constants: lanes per chunk, warps, sample size, the expected candidates per chosen row
    (``oversample``) and the candidate buffer's size as a multiple of k (``cap_factor``, a power of two).

    Split-row path (:func:`split_lanes_for`): lanes per split program (``split_lanes``, 0: never split), lanes
    per chunk within it (``split_block``) and its warps; taken for at most ``split_max_rows`` rows of at least
    ``split_min_width`` lanes; splits are halved (not below ``split_block``) until the grid has at least
    ``split_min_programs`` programs."""

    block: int = 4096
    num_warps: int = 16
    sample: int = 4096
    oversample: int = 2
    cap_factor: int = 8
    min_cap: int = 0
    direct: int = 4096
    pairwise: int = 0
    split_lanes: int = 8192
    split_block: int = 1024
    split_warps: int = 4
    split_min_width: int = 32768
    split_max_rows: int = 512
    split_min_programs: int = 264


COMPILED = TopKConfig()
INTERPRETED = TopKConfig(
    block=64,
    num_warps=1,
    sample=16,
    oversample=2,
    cap_factor=4,
    direct=8,
    pairwise=64,
    split_lanes=8,
    split_block=8,
    split_warps=1,
    split_min_width=24,
    split_max_rows=8,
    split_min_programs=0,
)
"""The interpreter pays per operation, not per element: rows of 24 lanes or more (at most 8 rows) take the
split-row path with 8-lane splits, so the property suite's rows exercise it; other rows up to 64 lanes take
the pairwise-rank path."""


def split_lanes_for(cfg: TopKConfig, rows: int, width: int) -> int:
    """Lanes per split program of the split-row path for ``rows`` rows of ``width`` lanes, 0 for the
    one-program path. The split-row path is for few long rows: one program per row leaves SMs idle (or each
    streaming one long row alone) while ``rows <= split_max_rows``, and splitting pays only once a row spans
    several splits (``width >= split_min_width``, a multiple of ``split_lanes``). The split starts at
    ``split_lanes`` and is halved, not below ``split_block``, while ``rows * ceil(width / split)`` is under
    ``split_min_programs`` (two waves on 132 SMs by default). Rows are the grid's second axis: at most 65535."""
    if cfg.split_lanes <= 0 or width < cfg.split_min_width or not 0 < rows <= min(cfg.split_max_rows, 65535):
        return 0
    lanes = cfg.split_lanes
    while lanes // 2 >= cfg.split_block and rows * -(-width // lanes) < cfg.split_min_programs:
        lanes //= 2
    return lanes


def uses_split(cfg: TopKConfig, rows: int, width: int) -> bool:
    """Whether :func:`topk` takes the split-row path (:func:`split_lanes_for`)."""
    return split_lanes_for(cfg, rows, width) > 0


def default_config() -> TopKConfig:
    return INTERPRETED if v.interpreted() else COMPILED


NAN_KEY = 0xFFFFFFFF
NEG_INF_KEY = 0x007FFFFF


@triton.jit
def _keys(row_ptr, keep_ptr, block_size, buf_key_ptr, buf_idx_ptr, i, valid, stride, from_buf, HAS_KEEP: tl.constexpr):
    """Order keys and row indices of items ``i``: buffer entries (``from_buf``) or row lanes ``i * stride``
    (with a keep map, lanes outside the kept candidate blocks read as -inf). Only the chosen source is loaded.
    Written out in one function: the interpreter pays for every nested call."""
    use_buf = (i * 0 + from_buf) != 0  # block-shaped: the interpreter mishandles a scalar bool in a mask
    in_buf = valid & use_buf
    in_row = valid & (use_buf == 0)
    lane = i.to(tl.int64) * stride
    x = tl.load(row_ptr + lane, mask=in_row, other=0.0)
    if HAS_KEEP:
        kept = tl.load(keep_ptr + lane // block_size, mask=in_row, other=0)
        x = tl.where(kept != 0, x, float("-inf"))
    bits = x.to(tl.uint32, bitcast=True)
    row_key = tl.where(bits >= 0x80000000, ~bits, bits | 0x80000000)
    row_key = tl.where(x == 0.0, 0x80000000, row_key)
    row_key = tl.where(x != x, 0xFFFFFFFF, row_key)
    buf_key = tl.load(buf_key_ptr + i, mask=in_buf, other=0).to(tl.uint32, bitcast=True)
    buf_idx = tl.load(buf_idx_ptr + i, mask=in_buf, other=0).to(tl.int64)
    return tl.where(in_buf, buf_key, row_key), tl.where(in_buf, buf_idx, lane)


@triton.jit
def _compact(
    row_ptr,
    keep_ptr,
    block_size,
    buf_key_ptr,
    buf_idx_ptr,
    start,
    n,
    t,
    at_least,
    above_t,
    MASKED: tl.constexpr,
    HAS_KEEP: tl.constexpr,
    CAP: tl.constexpr,
    BLOCK: tl.constexpr,
    STORE: tl.constexpr,
):
    """One chunk of the compaction pass: append (key, lane) of every key >= t to the buffer in lane order (from
    position ``at_least``; only with ``STORE``) and count the keys >= t and > t. ``MASKED`` only for the last
    chunk (a mask on a run-time bound would stop the loads from being vectorized); lanes at or past ``n`` are
    not loaded."""
    i = start + tl.arange(0, BLOCK)
    if MASKED:
        valid = i < n
        x = tl.load(row_ptr + i, mask=valid, other=0.0)
    else:
        valid = i >= 0
        x = tl.load(row_ptr + i)
    if HAS_KEEP:
        kept = tl.load(keep_ptr + i // block_size, mask=valid, other=0)
        x = tl.where(kept != 0, x, float("-inf"))
    bits = x.to(tl.uint32, bitcast=True)
    key = tl.where(bits >= 0x80000000, ~bits, bits | 0x80000000)
    key = tl.where(x == 0.0, 0x80000000, key)
    key = tl.where(x != x, 0xFFFFFFFF, key)
    ge = valid & (key >= t)
    if STORE:
        pos = at_least + tl.cumsum(ge.to(tl.int32), 0) - 1
        room = ge & (pos < CAP)
        tl.store(buf_key_ptr + pos, key.to(tl.int32, bitcast=True), mask=room)
        tl.store(buf_idx_ptr + pos, i, mask=room)
    return at_least + tl.sum(ge.to(tl.int32), 0), above_t + tl.sum((valid & (key > t)).to(tl.int32), 0)


@triton.jit
def _kth_key(
    row_ptr,
    keep_ptr,
    block_size,
    buf_key_ptr,
    buf_idx_ptr,
    count,
    stride,
    from_buf,
    want,
    HAS_KEEP: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """The ``want``-th largest key (1 <= want <= count) among ``count`` items (see :func:`_keys`), and how
    many keys exceed it. Four passes of an 8-bit digit histogram, most significant digit first, each over the
    keys that match the digits found so far."""
    prefix = (want * 0).to(tl.uint32)
    rem = want
    bins = tl.arange(0, 256)
    for p in tl.static_range(4):
        hist = tl.zeros([256], dtype=tl.int32)
        for start in range(0, count, BLOCK):
            i = start + tl.arange(0, BLOCK)
            valid = i < count
            key, _ = _keys(
                row_ptr, keep_ptr, block_size, buf_key_ptr, buf_idx_ptr, i, valid, stride, from_buf, HAS_KEEP
            )
            match = valid & ((key & ((0xFFFFFFFF << (32 - 8 * p)) & 0xFFFFFFFF)) == prefix)
            digit = ((key >> (24 - 8 * p)) & 0xFF).to(tl.int32)
            hist += tl.histogram(digit, 256, mask=match)
        at_or_above = tl.cumsum(hist, 0, reverse=True)
        b = tl.max(tl.where(at_or_above >= rem, bins, -1), 0)
        rem -= tl.sum(tl.where(bins > b, hist, 0), 0)
        prefix = prefix | (b.to(tl.uint32) << (24 - 8 * p))
    return prefix, want - rem


@triton.jit
def _sample_threshold(
    row_ptr,
    keep_ptr,
    block_size,
    buf_key_ptr,
    buf_idx_ptr,
    n,
    want,
    HAS_KEEP: tl.constexpr,
    SAMPLE: tl.constexpr,
    OVERSAMPLE: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """The key t of ``min(n, SAMPLE)`` lanes sampled at stride ``n // SAMPLE`` with about ``OVERSAMPLE * want``
    keys >= t expected in the row."""
    stride = tl.maximum(n // SAMPLE, 1)
    sampled = tl.minimum(n, SAMPLE)
    pick = tl.minimum(tl.maximum((OVERSAMPLE * want + stride - 1) // stride, 1), sampled)
    t, _above_t = _kth_key(
        row_ptr, keep_ptr, block_size, buf_key_ptr, buf_idx_ptr, sampled, stride, n * 0, pick, HAS_KEEP, BLOCK
    )
    return t


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
    """One program per row (steps in the module docstring). ``PRESPLIT``: the sampled path's threshold, counts
    and buffer come from the split-row kernels (``thresh_ptr`` i32[M], ``counts_ptr`` i32[M, 2, NSPLIT]: keys
    >= t and > t per split) instead of this program's own sample and compaction pass."""
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
                row_ptr, keep_row, block_size, buf_key, buf_idx, n, 1, from_buf, want, HAS_KEEP, BLOCK
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
                at_least = n * 0
                above_t = n * 0
                full = n // BLOCK * BLOCK
                for start in range(0, full, BLOCK):  # whole chunks: unmasked, vectorized loads
                    at_least, above_t = _compact(
                        row_ptr,
                        keep_row,
                        block_size,
                        buf_key,
                        buf_idx,
                        start,
                        n,
                        t,
                        at_least,
                        above_t,
                        False,
                        HAS_KEEP,
                        CAP,
                        BLOCK,
                        True,
                    )
                if full < n:  # the last, partial chunk: lanes past n are not loaded
                    at_least, above_t = _compact(
                        row_ptr,
                        keep_row,
                        block_size,
                        buf_key,
                        buf_idx,
                        full,
                        n,
                        t,
                        at_least,
                        above_t,
                        True,
                        HAS_KEEP,
                        CAP,
                        BLOCK,
                        True,
                    )
            tl.debug_barrier()
            if (at_least >= want) & (at_least <= CAP):
                # the survivors hold the answer: select among them, collect from the buffer
                count = at_least
                from_buf = n * 0 + 1
                threshold, above = _kth_key(
                    row_ptr, keep_row, block_size, buf_key, buf_idx, count, 1, from_buf, want, HAS_KEEP, BLOCK
                )
                quota = want - above
            elif (above_t < want) & (at_least >= want):
                # t itself is the k-th largest key (too many ties at t to buffer)
                threshold = t
                quota = want - above_t
            else:
                # the sample misled: exact select over the whole row
                threshold, above = _kth_key(
                    row_ptr, keep_row, block_size, buf_key, buf_idx, n, 1, from_buf, want, HAS_KEEP, BLOCK
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
        chosen = (valid & (key > threshold)) | (tie & (tie_rank < quota))
        if DROP_NEG_INF:
            chosen = chosen & (key != 0x007FFFFF)
        if DROP_NAN:
            chosen = chosen & (key != 0xFFFFFFFF)
        pos = taken + tl.cumsum(chosen.to(tl.int32), 0) - 1
        if TRANSLATE:
            entry = idx // rows_per_block
            listed = chosen & (entry < table_width)
            block = tl.load(table_row + entry, mask=listed, other=-1).to(tl.int64)
            value = tl.where(listed & (block >= 0), block * rows_per_block + idx % rows_per_block, -1)
        else:
            value = idx + offset
        tl.store(dst + pos, value.to(dst.dtype.element_ty), mask=chosen)
        if RANK:
            tl.store(rank_keys + pos, key.to(tl.int32, bitcast=True), mask=chosen)
        taken += tl.sum(chosen.to(tl.int32), 0)
        ties += tl.sum(tie.to(tl.int32), 0)
    if RANK:
        # rank order: sort the collected lanes by (key descending, position = index ascending)
        tl.debug_barrier()
        lane = tl.arange(0, KPAD)
        held = lane < taken
        key = tl.load(rank_keys + lane, mask=held, other=0).to(tl.uint32, bitcast=True)
        composite = (key.to(tl.uint64) << 32) | (KPAD - 1 - lane).to(tl.uint64)
        ranked = tl.sort(tl.where(held, composite, 0), descending=True)
        source = KPAD - 1 - (ranked & 0xFFFFFFFF).to(tl.int32)
        value = tl.load(dst + source, mask=held, other=0)
        tl.store(out_row + lane, value, mask=held & (lane < lanes))
    for start in range(0, lanes, BLOCK):
        j = start + tl.arange(0, BLOCK)
        empty = tl.zeros([BLOCK], dtype=out_row.dtype.element_ty) + fill
        tl.store(out_row + j, empty, mask=(j >= taken) & (j < lanes))


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
    """Split-row path, step 1 (one program per row): the sampled threshold t of :func:`_topk_kernel`, for the
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
    which :func:`_topk_kernel` reads the buffer."""
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
        full = start + (end - start) // BLOCK * BLOCK
        for c in range(start, full, BLOCK):  # whole chunks: unmasked, vectorized loads
            at_least, above_t = _compact(
                row_ptr,
                keep_row,
                block_size,
                buf_key_ptr + row * CAP,
                buf_idx_ptr + row * CAP,
                c,
                end,
                t,
                at_least,
                above_t,
                False,
                HAS_KEEP,
                CAP,
                BLOCK,
                STORE,
            )
        if full < end:
            at_least, above_t = _compact(
                row_ptr,
                keep_row,
                block_size,
                buf_key_ptr + row * CAP,
                buf_idx_ptr + row * CAP,
                full,
                end,
                t,
                at_least,
                above_t,
                True,
                HAS_KEEP,
                CAP,
                BLOCK,
                STORE,
            )
    if not STORE:
        tl.store(row_counts + split, at_least)
        tl.store(row_counts + NSPLIT + split, above_t)


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
    if HAS_KEEP:
        kept = tl.load(keep_ptr + row * keep_stride + i // block_size, mask=valid, other=0)
        x = tl.where(kept != 0, x, float("-inf"))
    bits = x.to(tl.uint32, bitcast=True)
    key = tl.where(bits >= 0x80000000, ~bits, bits | 0x80000000)
    key = tl.where(x == 0.0, 0x80000000, key)
    key = tl.where(x != x, 0xFFFFFFFF, key)
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
        entry = idx // rows_per_block
        listed = chosen & (entry < table_width)
        block = tl.load(table_ptr + row * table_width + entry, mask=listed, other=-1).to(tl.int64)
        value = tl.where(listed & (block >= 0), block * rows_per_block + idx % rows_per_block, -1)
    elif HAS_OFFSETS:
        value = idx + tl.load(offsets_ptr + r, mask=here, other=0).to(tl.int64)
    else:
        value = idx
    tl.store(out_ptr + row * lanes + pos, value.to(out_ptr.dtype.element_ty), mask=chosen)
    taken = tl.sum(chosen.to(tl.int32), 1)[:, None]
    j = tl.arange(0, L)[None, :]
    empty = tl.zeros([R, L], dtype=out_ptr.dtype.element_ty) + fill
    tl.store(out_ptr + row * lanes + j, empty, mask=here & (j >= taken) & (j < lanes))


def keep_map(candidate_blocks: torch.Tensor, width: int, block_size: int) -> torch.Tensor:
    """u8[M, ceil(width / bs)]: 1 where the row's candidate list names the block (-1 and ids past the row are
    ignored)."""
    m = candidate_blocks.shape[0]
    blocks = -(-width // block_size)
    ids = candidate_blocks.to(torch.int64)
    ok = (ids >= 0) & (ids < blocks)
    keep = torch.zeros(m, blocks + 1, dtype=torch.uint8, device=candidate_blocks.device)
    keep.scatter_(1, torch.where(ok, ids, blocks), 1)
    return keep[:, :blocks].contiguous() if blocks else keep[:, :1].contiguous()


def _pow2(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())


def _small(
    scores: torch.Tensor,
    lengths: torch.Tensor,
    offsets: torch.Tensor | None,
    keep: torch.Tensor | None,
    block_size: int,
    block_table: torch.Tensor | None,
    rows_per_block: int | None,
    out: torch.Tensor,
    a: v.TopKArgs,
    rank: bool,
    drop_neg_inf: bool,
    drop_nan: bool,
) -> torch.Tensor:
    """Launch :func:`_topk_small_kernel` (rows of at most ``TopKConfig.pairwise`` lanes)."""
    dummy = torch.zeros(1, dtype=torch.int32, device=scores.device)
    per_program = min(_pow2(a.rows), 8)
    _topk_small_kernel[(-(-a.rows // per_program),)](
        scores,
        lengths,
        dummy if offsets is None else offsets,
        dummy if keep is None else keep,
        dummy if block_table is None else block_table,
        out,
        a.rows,
        a.width,
        min(a.k, a.width),
        a.lanes,
        a.fill,
        block_size,
        keep.shape[-1] if keep is not None else 0,
        block_table.shape[1] if block_table is not None else 0,
        rows_per_block or 1,
        HAS_OFFSETS=offsets is not None,
        HAS_KEEP=keep is not None,
        TRANSLATE=a.translate,
        RANK=rank,
        DROP_NEG_INF=drop_neg_inf,
        DROP_NAN=drop_nan,
        R=per_program,
        P=max(2, _pow2(a.width)),
        L=max(2, _pow2(a.lanes)),
        BSP=0,
        PIN=False,
        num_warps=1,
    )
    return out


def small_candidates(
    scores: torch.Tensor,
    lengths: torch.Tensor,
    *,
    block_size: int,
    topk_blocks: int,
    pin_newest: bool,
    drop_nan: bool,
) -> torch.Tensor:
    """Candidate blocks in one launch of :func:`_topk_small_kernel` (interpreter; rows of few blocks)."""
    rows, width = scores.shape
    blocks = -(-width // block_size)
    out = torch.empty(rows, topk_blocks, dtype=torch.int32, device=scores.device)
    if out.numel() == 0:
        return out
    dummy = torch.zeros(1, dtype=torch.int32, device=scores.device)
    per_program = min(_pow2(rows), 8)
    _topk_small_kernel[(-(-rows // per_program),)](
        scores,
        lengths,
        dummy,
        dummy,
        dummy,
        out,
        rows,
        width,
        min(topk_blocks, blocks),
        topk_blocks,
        -1,
        block_size,
        0,
        0,
        1,
        HAS_OFFSETS=False,
        HAS_KEEP=False,
        TRANSLATE=False,
        RANK=False,
        DROP_NEG_INF=True,
        DROP_NAN=drop_nan,
        R=per_program,
        P=max(2, _pow2(blocks)),
        L=max(2, _pow2(topk_blocks)),
        BSP=_pow2(block_size),
        PIN=pin_newest,
        num_warps=1,
    )
    return out


def topk(
    scores: torch.Tensor,
    lengths: torch.Tensor,
    *,
    k: int,
    convention: str = "v4.1",
    offsets: torch.Tensor | None = None,
    fill: int | None = None,
    block_table: torch.Tensor | None = None,
    rows_per_block: int | None = None,
    candidate_blocks: torch.Tensor | None = None,
    block_size: int | None = None,
    drop_neg_inf: bool = False,
    drop_nan: bool = False,
    validate: bool = True,
    config: TopKConfig | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Top-k of each row's first ``lengths[m]`` scores under ``convention``.

    scores: f32[M, N] (lanes at or past ``lengths[m]`` are never read); lengths: i32[M] in [0, N].
    convention: ``v4.1`` (k lanes, ascending index, -1 fill), ``v4.1-clamped`` (min(k, N) lanes),
    ``v4-prefill`` / ``v4-decode`` (min(k, N) lanes, rank order, -1 fill; decode needs lengths == N),
    ``select`` (k lanes, ascending index, fill INT32_MAX), ``select-unsorted`` (select in rank order).
    offsets: i32|i64[M] added to lanes holding a row (never to fill lanes). fill: overrides the fill value.
    block_table (+ rows_per_block): the chosen rows are translated to physical slots
    ``block_table[m, j // Bc] * Bc + j % Bc`` in int64 (output i64, fill lanes keep the fill value).
    candidate_blocks (+ block_size): lanes outside the row's candidate blocks score -inf (the restricted
    second-level top-k; -inf lanes stay eligible). drop_neg_inf / drop_nan: chosen lanes scoring -inf / NaN
    become fill lanes (the kept rule of candidate blocks). out: written in place when given.
    """
    a = v.check_topk(
        scores,
        lengths,
        k=k,
        convention=convention,
        offsets=offsets,
        fill=fill,
        block_table=block_table,
        rows_per_block=rows_per_block,
        candidate_blocks=candidate_blocks,
        block_size=block_size,
        validate=validate,
    )
    v.backend_for("triton", scores.device)
    cfg = config or default_config()
    device = scores.device
    out = v.output(out, (a.rows, a.lanes), torch.int64 if a.translate else torch.int32, device)
    if a.rows == 0 or a.lanes == 0:
        return out
    if a.width == 0 or a.k == 0:
        return out.fill_(a.fill)
    kpad = _pow2(min(a.k, a.width))
    cap = max(_pow2(cfg.cap_factor * kpad), cfg.min_cap)
    cap = min(cap, max(_pow2(a.width), 1))
    rank = not a.mode.index_order
    keep: torch.Tensor | None = None
    bs = 1
    if candidate_blocks is not None and block_size is not None:
        keep, bs = keep_map(candidate_blocks, a.width, block_size), block_size
    split_lanes = split_lanes_for(cfg, a.rows, a.width)
    split = split_lanes > 0
    if cfg.pairwise and a.width <= cfg.pairwise and not split:
        return _small(
            scores, lengths, offsets, keep, bs, block_table, rows_per_block, out, a, rank, drop_neg_inf, drop_nan
        )
    buf_key = torch.empty(a.rows, cap, dtype=torch.int32, device=device)
    buf_idx = torch.empty(a.rows, cap, dtype=torch.int32, device=device)
    rank_key = torch.empty(a.rows, kpad if rank else 1, dtype=torch.int32, device=device)
    rank_val = torch.empty(a.rows, kpad if rank else 1, dtype=out.dtype, device=device)
    dummy = torch.zeros(1, dtype=torch.int32, device=device)
    restrict = keep is not None
    keep = dummy if keep is None else keep
    keep_stride = keep.shape[-1] if restrict else 0
    table = dummy if block_table is None else block_table
    splits, nsplit = 0, 1
    thresh = counts = dummy
    if split:
        splits = -(-a.width // split_lanes)
        nsplit = _pow2(splits)
        thresh = torch.empty(a.rows, dtype=torch.int32, device=device)
        counts = torch.empty(a.rows, 2, nsplit, dtype=torch.int32, device=device)
        k_row = min(a.k, a.width)
        _split_threshold_kernel[(a.rows,)](
            scores,
            lengths,
            keep,
            thresh,
            a.width,
            k_row,
            bs,
            keep_stride,
            HAS_KEEP=restrict,
            BLOCK=cfg.block,
            SAMPLE=cfg.sample,
            OVERSAMPLE=cfg.oversample,
            DIRECT=cfg.direct,
            num_warps=cfg.num_warps,
        )
        for store in (False, True):
            _split_pass_kernel[(splits, a.rows)](
                scores,
                lengths,
                keep,
                thresh,
                counts,
                buf_key,
                buf_idx,
                a.width,
                k_row,
                bs,
                keep_stride,
                splits,
                HAS_KEEP=restrict,
                DIRECT=cfg.direct,
                CAP=cap,
                SPLIT=split_lanes,
                BLOCK=min(cfg.split_block, split_lanes),
                NSPLIT=nsplit,
                STORE=store,
                num_warps=cfg.split_warps,
            )
    _topk_kernel[(a.rows,)](
        scores,
        lengths,
        dummy if offsets is None else offsets,
        keep,
        table,
        out,
        buf_key,
        buf_idx,
        rank_key,
        rank_val,
        thresh,
        counts,
        a.width,
        min(a.k, a.width),
        a.lanes,
        a.fill,
        bs,
        keep_stride,
        table.shape[1] if block_table is not None else 0,
        rows_per_block or 1,
        splits,
        HAS_OFFSETS=offsets is not None,
        HAS_KEEP=restrict,
        TRANSLATE=a.translate,
        RANK=rank,
        DROP_NEG_INF=drop_neg_inf,
        DROP_NAN=drop_nan,
        BLOCK=cfg.block,
        SAMPLE=cfg.sample,
        OVERSAMPLE=cfg.oversample,
        DIRECT=cfg.direct,
        CAP=cap,
        KPAD=kpad,
        PRESPLIT=split,
        NSPLIT=nsplit,
        num_warps=cfg.num_warps,
    )
    return out
