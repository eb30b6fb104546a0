# mypy: disable-error-code="no-untyped-def,untyped-decorator"
"""The @triton.jit steps the top-k kernels share: order keys, slot translation, the compaction pass, the radix
select, the sampled threshold, and the output steps (emit the chosen lanes, rank-order sort, fill) (module
docstring of ``fast.indexing.topk``).

Order key of a score: its float bits made monotone (``~bits`` for negatives, ``bits | 2**31`` otherwise), -0
mapped onto +0 (``0x80000000``) and NaN above +inf (``0xFFFFFFFF``); -inf is ``0x007FFFFF``. Equal keys are
exactly equal scores.
"""

from __future__ import annotations

import triton
import triton.language as tl

from fast.indexing.topk.config import REGISTER_KEYS


@triton.jit
def _order_keys(x, keep_ptr, lane, block_size, mask, HAS_KEEP: tl.constexpr):
    """Order keys of the scores ``x`` of lanes ``lane`` (see the module docstring); with a keep map, a lane
    outside the kept candidate blocks (``keep_ptr[lane // block_size] == 0``, read where ``mask``) is -inf."""
    if HAS_KEEP:
        kept = tl.load(keep_ptr + lane // block_size, mask=mask, other=0)
        x = tl.where(kept != 0, x, float("-inf"))
    bits = x.to(tl.uint32, bitcast=True)
    key = tl.where(bits >= 0x80000000, ~bits, bits | 0x80000000)
    key = tl.where(x == 0.0, 0x80000000, key)
    return tl.where(x != x, 0xFFFFFFFF, key)


@triton.jit
def _table_slots(table_row_ptr, idx, chosen, table_width, rows_per_block):
    """Rows ``idx`` (int64) as physical slots through one block-table row: ``table[idx // Bc] * Bc + idx % Bc``;
    -1 where the entry lies past the table or is negative (entries are read only where ``chosen``)."""
    entry = idx // rows_per_block
    listed = chosen & (entry < table_width)
    block = tl.load(table_row_ptr + entry, mask=listed, other=-1).to(tl.int64)
    return tl.where(listed & (block >= 0), block * rows_per_block + idx % rows_per_block, -1)


@triton.jit
def _keys(row_ptr, keep_ptr, block_size, buf_key_ptr, buf_idx_ptr, i, valid, stride, from_buf, HAS_KEEP: tl.constexpr):
    """Order keys and row indices of items ``i``: buffer entries (``from_buf``) or row lanes ``i * stride``
    (with a keep map, lanes outside the kept candidate blocks read as -inf). Only the chosen source is loaded."""
    use_buf = (i * 0 + from_buf) != 0  # block-shaped: the interpreter mishandles a scalar bool in a mask
    in_buf = valid & use_buf
    in_row = valid & (use_buf == 0)
    lane = i.to(tl.int64) * stride
    x = tl.load(row_ptr + lane, mask=in_row, other=0.0)
    row_key = _order_keys(x, keep_ptr, lane, block_size, in_row, HAS_KEEP)
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
    key = _order_keys(x, keep_ptr, i, block_size, valid, HAS_KEEP)
    ge = valid & (key >= t)
    if STORE:
        pos = at_least + tl.cumsum(ge.to(tl.int32), 0) - 1
        room = ge & (pos < CAP)
        tl.store(buf_key_ptr + pos, key.to(tl.int32, bitcast=True), mask=room)
        tl.store(buf_idx_ptr + pos, i, mask=room)
    return at_least + tl.sum(ge.to(tl.int32), 0), above_t + tl.sum((valid & (key > t)).to(tl.int32), 0)


@triton.jit
def _compact_span(
    row_ptr,
    keep_ptr,
    block_size,
    buf_key_ptr,
    buf_idx_ptr,
    lo,
    hi,
    t,
    at_least,
    above_t,
    HAS_KEEP: tl.constexpr,
    CAP: tl.constexpr,
    BLOCK: tl.constexpr,
    STORE: tl.constexpr,
):
    """The compaction pass (:func:`_compact`) over lanes ``[lo, hi)``: whole chunks with unmasked, vectorized
    loads, then the last, partial chunk masked (lanes at or past ``hi`` are not loaded). Returns the counts of
    keys >= t and > t, added to ``at_least`` and ``above_t``."""
    full = lo + (hi - lo) // BLOCK * BLOCK
    for start in range(lo, full, BLOCK):
        at_least, above_t = _compact(
            row_ptr, keep_ptr, block_size, buf_key_ptr, buf_idx_ptr, start, hi, t, at_least, above_t, False,
            HAS_KEEP, CAP, BLOCK, STORE,
        )  # fmt: skip
    if full < hi:
        at_least, above_t = _compact(
            row_ptr, keep_ptr, block_size, buf_key_ptr, buf_idx_ptr, full, hi, t, at_least, above_t, True,
            HAS_KEEP, CAP, BLOCK, STORE,
        )  # fmt: skip
    return at_least, above_t


_REGISTER_KEYS = tl.constexpr(REGISTER_KEYS)


@triton.jit
def _kth_registers(key, want):
    """A threshold T of the register-held ``key`` (uint32; 1 <= want <= the number of keys above 0) with
    ``count(key > T) < want <= count(key >= T)``, and ``count(key > T)``: every key > T and the first ``want -
    count(key > T)`` keys == T are the ``want`` largest, as for the ``want``-th largest key itself. One bit a
    step, most significant first (a bit is kept when at least ``want`` keys are >= T with it set), at most 32
    steps; a candidate with exactly ``want`` keys >= it ends the search as T (with distinct scores, usually
    before the lowest bits)."""
    t = (want * 0).to(tl.uint32)
    bit = (want * 0 + 1).to(tl.uint32) << 31
    while bit != 0:
        candidate = t | bit
        at_least = tl.sum((key >= candidate).to(tl.int32), 0)
        t = tl.where(at_least >= want, candidate, t)
        bit = tl.where(at_least == want, 0, bit >> 1)
    return t, tl.sum((key > t).to(tl.int32), 0)


@triton.jit
def _kth_radix(
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
    """:func:`_kth_key` for any count (T is the ``want``-th largest key itself): four passes of an 8-bit digit
    histogram, most significant digit first, each over the keys that match the digits found so far."""
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
    BOUND: tl.constexpr,
):
    """A threshold T of ``count`` items (see :func:`_keys`; 1 <= want <= count) with ``count(key > T) < want
    <= count(key >= T)`` (the ``want``-th largest key, or a value between it and the next larger key), and
    ``count(key > T)``. ``BOUND``: a power of two ``count`` never exceeds (0: none). Up to ``config.REGISTER_KEYS``
    the items are loaded once into registers (:func:`_kth_registers`); otherwise the radix passes re-read
    them (:func:`_kth_radix`)."""
    if BOUND > 0:
        if BOUND <= _REGISTER_KEYS:
            i = tl.arange(0, BOUND)
            valid = i < count
            key, _ = _keys(
                row_ptr, keep_ptr, block_size, buf_key_ptr, buf_idx_ptr, i, valid, stride, from_buf, HAS_KEEP
            )
            t, above = _kth_registers(tl.where(valid, key, 0), want)
        else:
            t, above = _kth_radix(
                row_ptr, keep_ptr, block_size, buf_key_ptr, buf_idx_ptr, count, stride, from_buf, want, HAS_KEEP,
                BLOCK,
            )  # fmt: skip
    else:
        t, above = _kth_radix(
            row_ptr, keep_ptr, block_size, buf_key_ptr, buf_idx_ptr, count, stride, from_buf, want, HAS_KEEP, BLOCK
        )
    return t, above


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
    keys >= t expected in the row (``SAMPLE`` a power of two)."""
    stride = tl.maximum(n // SAMPLE, 1)
    sampled = tl.minimum(n, SAMPLE)
    pick = tl.minimum(tl.maximum((OVERSAMPLE * want + stride - 1) // stride, 1), sampled)
    t, _above_t = _kth_key(
        row_ptr, keep_ptr, block_size, buf_key_ptr, buf_idx_ptr, sampled, stride, n * 0, pick, HAS_KEEP, BLOCK, SAMPLE
    )
    return t


@triton.jit
def _drop(chosen, key, DROP_NEG_INF: tl.constexpr, DROP_NAN: tl.constexpr):
    """``chosen`` without the lanes whose key is -inf (``DROP_NEG_INF``) or NaN (``DROP_NAN``)."""
    if DROP_NEG_INF:
        chosen = chosen & (key != 0x007FFFFF)
    if DROP_NAN:
        chosen = chosen & (key != 0xFFFFFFFF)
    return chosen


@triton.jit
def _emit(dst, rank_keys, table_row, idx, key, pos, chosen, offset, table_width, rows_per_block,
          TRANSLATE: tl.constexpr, RANK: tl.constexpr):  # fmt: skip
    """Store each chosen lane's row ``idx`` (plus ``offset``, or translated to a slot through ``table_row``) at
    ``dst + pos``, and with ``RANK`` its order key at ``rank_keys + pos`` for :func:`_finish`'s sort."""
    if TRANSLATE:
        value = _table_slots(table_row, idx, chosen, table_width, rows_per_block)
    else:
        value = idx + offset
    tl.store(dst + pos, value.to(dst.dtype.element_ty), mask=chosen)
    if RANK:
        tl.store(rank_keys + pos, key.to(tl.int32, bitcast=True), mask=chosen)


@triton.jit
def _finish(out_row, dst, rank_keys, taken, lanes, fill, RANK: tl.constexpr, KPAD: tl.constexpr,
            BLOCK: tl.constexpr):  # fmt: skip
    """After the ``taken`` chosen lanes were emitted in index order: with ``RANK``, sort them from ``dst`` (the
    row's scratch) into ``out_row`` by (key descending, index ascending) with one bitonic sort of ``KPAD``; then
    write the fill value into lanes ``[taken, lanes)``."""
    if RANK:
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
