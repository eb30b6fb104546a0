# mypy: disable-error-code="no-untyped-def,untyped-decorator"
"""The @triton.jit pieces the compression kernels share (``triton_prefill.py``, ``triton_decode.py``).

- ``_exp2`` / ``_pow2``: 2**y, by the hardware ``exp2`` or a polynomial within one ulp (``Config.poly_exp``).
- ``_bf16_bits``: f32 -> bf16 bits, round to nearest even with integer operations (identical compiled and
  interpreted); NaN becomes 0x7FC0.
- ``_program``: which request (or tile) and which block of channels a program owns.
- ``_first_read``: the earliest position a tile of rows reads (only a tile reading before the request's start
  issues ring loads).
- ``_window_mean``: the gated mean of each row's window, reading new positions from the inputs and older ones
  from the ring.
- ``_store_rows``: rows, store slots, positions and cache rows.
- ``_read_channels``, ``_keep_newest``: the ring write of a request's newest positions.
"""

from __future__ import annotations

import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)  # a jit function may read only constexpr globals


EXP2_POLY = (0.6931472420692444, 0.24022647738456726, 0.05550302192568779, 0.009618324227631092,
             0.0013408145168796182, 0.00015394060756079853)  # fmt: skip
"""2**f - 1 on [-1/2, 1/2] (coefficients of f .. f**6), fitted for relative error; see ``_exp2``."""
C1, C2, C3, C4, C5, C6 = (tl.constexpr(c) for c in EXP2_POLY)


@triton.jit
def _exp2(y):
    """2**y for y <= 0 (or -inf), within one ulp, the same arithmetic compiled and interpreted.

    y = n + f with n = round(y), |f| <= 1/2; 2**f by a degree-6 polynomial in fused multiply-adds, 2**n by
    building the exponent bits. Results below 2**-126 become 0 (a weight that small cannot move a sum of
    weights that includes 1). NaN stays NaN.
    """
    y = tl.maximum(y, -127.0, propagate_nan=tl.PropagateNan.ALL)
    n = tl.floor(y + 0.5)
    f = y - n
    p = tl.fma(tl.fma(tl.fma(tl.fma(tl.fma(C6, f, C5), f, C4), f, C3), f, C2), f, C1)
    p = tl.fma(p, f, 1.0)
    scale = ((n.to(tl.int32) + 127) << 23).to(tl.float32, bitcast=True)
    return p * scale


@triton.jit
def _pow2(y, POLY_EXP: tl.constexpr):
    """2**y: the polynomial ``_exp2`` (same arithmetic compiled and interpreted) or the hardware ``exp2``."""
    if POLY_EXP:
        return _exp2(y)
    else:
        return tl.exp2(y)


@triton.jit
def _bf16_bits(x):
    """f32 -> bf16 bit pattern (int16), round to nearest even; NaN -> 0x7FC0."""
    bits = x.to(tl.uint32, bitcast=True)
    lsb = (bits >> 16) & 1
    rounded = (bits + 0x7FFF + lsb) >> 16
    rounded = tl.where(x != x, 0x7FC0, rounded).to(tl.int32)
    return (rounded - tl.where(rounded >= 0x8000, 0x10000, 0)).to(tl.int16)


@triton.jit
def _program(CHANNELS: tl.constexpr, BLOCK_C: tl.constexpr):
    """This program's (outer index, channel block, channels, channel mask): programs run over (outer index,
    block of ``BLOCK_C`` of ``CHANNELS`` channels), channel blocks fastest."""
    num_cb = (CHANNELS + BLOCK_C - 1) // BLOCK_C
    pid = tl.program_id(0)
    pid_c = pid % num_cb
    cols = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    return pid // num_cb, pid_c, cols, cols < CHANNELS


@triton.jit
def _request_fields(cu_ptr, start_ptr, state_index_ptr, request):
    """Request ``request``'s first new position, first input row, number of new positions and state slot."""
    start = tl.load(start_ptr + request)
    cu0 = tl.load(cu_ptr + request)
    length = tl.load(cu_ptr + request + 1) - cu0
    slot = tl.load(state_index_ptr + request)
    return start, cu0, length, slot


@triton.jit
def _first_read(first_group, R: tl.constexpr, OVERLAP: tl.constexpr):
    """The earliest position any row of a tile whose first row is ``first_group`` reads."""
    if OVERLAP:
        return (first_group - 1) * R
    else:
        return first_group * R


@triton.jit
def _window_mean(
    score_ptr,
    latent_ptr,
    ape_ptr,
    state_ptr,
    start,
    cu0,
    slot,
    group,
    valid,
    needs_ring,
    cols,
    col_ok,
    R: tl.constexpr,
    D: tl.constexpr,
    C: tl.constexpr,
    OVERLAP: tl.constexpr,
    HAS_APE: tl.constexpr,
    S: tl.constexpr,
    W: tl.constexpr,
    BLOCK_K: tl.constexpr,
    POLY_EXP: tl.constexpr,
    EVICT: tl.constexpr,
):
    """Gated mean of the window of each row: f32[BLOCK_R, BLOCK_C] (meaningless where not ``valid``).

    start, cu0, slot: the request's first new position, first input row and state slot (scalars); group, valid:
    [BLOCK_R] row j and whether it completes; needs_ring: whether any row of the tile reads a position before
    ``start`` (only then are ring loads issued). Tiles are [rows, entries, channels], the window reduction over
    axis 1. Entries are ordered current group first, so the first chunk of a valid row always holds a present
    entry.
    """
    entry = tl.arange(0, BLOCK_K)
    for k0 in tl.static_range(0, W, BLOCK_K):
        e = k0 + entry
        in_window = e < W
        if OVERLAP:
            previous = (e >= R).to(tl.int32)
            offset = e - previous * R
            half = (1 - previous) * D
            t = (group[:, None] - previous[None, :]) * R + offset[None, :]
        else:
            offset = e
            half = tl.zeros_like(e)
            t = group[:, None] * R + offset[None, :]
        present = valid[:, None] & in_window[None, :] & (t >= 0)
        c3 = cols[None, None, :]
        in_row = (cu0 + t - start).to(tl.int64) * C + half[None, :]
        m_in = (present & (t >= start))[:, :, None] & col_ok[None, None, :]
        x = tl.load(score_ptr + in_row[:, :, None] + c3, mask=m_in, other=0.0, eviction_policy=EVICT)
        v = tl.load(latent_ptr + in_row[:, :, None] + c3, mask=m_in, other=0.0, eviction_policy=EVICT)
        if needs_ring:
            ring_row = ((slot.to(tl.int64) * S + tl.where(t >= 0, t, 0) % S) * 2) * C + half[None, :]
            m_ring = (present & (t < start))[:, :, None] & col_ok[None, None, :]
            # other=0, then a select: with other=x the ring load would wait for the input load to land
            ring_x = tl.load(state_ptr + ring_row[:, :, None] + c3, mask=m_ring, other=0.0)
            ring_v = tl.load(state_ptr + ring_row[:, :, None] + C + c3, mask=m_ring, other=0.0)
            x = tl.where(m_ring, ring_x, x)
            v = tl.where(m_ring, ring_v, v)
        if HAS_APE:
            a = tl.load(
                ape_ptr + (offset * C + half)[:, None] + cols[None, :],
                mask=in_window[:, None] & col_ok[None, :],
                other=0.0,
            )
            x = x + a[None, :, :]
        x = tl.where(present[:, :, None], x, float("-inf"))
        chunk_max = tl.max(x, axis=1)
        if k0 == 0:
            run_max = tl.where(chunk_max == float("-inf"), 0.0, chunk_max)
            p = _pow2((x - run_max[:, None, :]) * LOG2E, POLY_EXP)
            total = tl.sum(p, axis=1)
            acc = tl.sum(p * v, axis=1)
        else:
            new_max = tl.maximum(run_max, chunk_max)
            alpha = _pow2((run_max - new_max) * LOG2E, POLY_EXP)
            p = _pow2((x - new_max[:, None, :]) * LOG2E, POLY_EXP)
            total = total * alpha + tl.sum(p, axis=1)
            acc = acc * alpha + tl.sum(p * v, axis=1)
            run_max = new_max
    return tl.math.div_rn(acc, tl.where(valid[:, None], total, 1.0))


@triton.jit
def _store_rows(
    out_ptr,
    slot_ptr,
    pos_ptr,
    cache_ptr,
    table_ptr,
    table_stride,
    out_rows,
    live,
    valid,
    request,
    group,
    cols,
    col_ok,
    acc,
    channel_block,
    R: tl.constexpr,
    D: tl.constexpr,
    ROWS_PER_BLOCK: tl.constexpr,
    HAS_TABLE: tl.constexpr,
    WRITE_CACHE: tl.constexpr,
    OUT_BF16: tl.constexpr,
    CACHE_BF16: tl.constexpr,
):
    """Rows (zero where not valid), cache rows, and (channel block 0 only) store slots and positions."""
    res = tl.where(valid[:, None], acc, 0.0)
    orow = out_rows.to(tl.int64)
    optr = out_ptr + orow[:, None] * D + cols[None, :]
    omask = live[:, None] & col_ok[None, :]
    if OUT_BF16:
        tl.store(optr, _bf16_bits(res), mask=omask)
    else:
        tl.store(optr, res, mask=omask)
    j = group.to(tl.int64)
    if HAS_TABLE:
        block = tl.load(table_ptr + request.to(tl.int64) * table_stride + j // ROWS_PER_BLOCK, mask=valid, other=-1).to(
            tl.int64
        )
        slot = tl.where(valid & (block >= 0), block * ROWS_PER_BLOCK + j % ROWS_PER_BLOCK, -1)
    else:
        slot = tl.where(valid, j, -1)
    meta = live & ((out_rows * 0 + channel_block) == 0)  # one channel block writes the per-row metadata
    tl.store(slot_ptr + orow, slot, mask=meta)
    tl.store(pos_ptr + orow, tl.where(valid, j * R, 0), mask=meta)
    if WRITE_CACHE:
        cmask = (valid & (slot >= 0))[:, None] & col_ok[None, :]
        cptr = cache_ptr + tl.where(slot >= 0, slot, 0)[:, None] * D + cols[None, :]
        if CACHE_BF16:
            tl.store(cptr, _bf16_bits(acc), mask=cmask)
        else:
            tl.store(cptr, acc, mask=cmask)


@triton.jit
def _read_channels(cols, col_ok, D: tl.constexpr, OVERLAP: tl.constexpr):
    """The state channels a program of output channels ``cols`` reads: [halves, BLOCK_C] offsets and mask
    (``cols``, and with overlap also ``D + cols``)."""
    if OVERLAP:
        halves = tl.arange(0, 2)
    else:
        halves = tl.arange(0, 1)
    return halves[:, None] * D + cols[None, :], (halves[:, None] >= 0) & col_ok[None, :]


@triton.jit
def _keep_newest(
    score_ptr,
    latent_ptr,
    state_ptr,
    cu0,
    start,
    slot,
    length,
    kept,
    first,
    channels,
    channel_ok,
    C: tl.constexpr,
    S: tl.constexpr,
    BLOCK_P: tl.constexpr,
):
    """The newest ``kept`` of a request's ``length`` new positions into its ring, from the ``first``-th of them
    on: ``state[slot, (start + local) % S] = (score, latent)`` of input row ``cu0 + local``, for ``channels``
    ([H, BLOCK_C] offsets), ``BLOCK_P`` rows x channels in one load and one store per tensor at a time."""
    ch = channels[None, :, :]
    for p0 in range(first, kept, BLOCK_P):
        i = p0 + tl.arange(0, BLOCK_P)
        local = length - kept + i
        src = (cu0 + local).to(tl.int64) * C
        dst = (slot.to(tl.int64) * S + (start + local) % S) * (2 * C)
        mask = (i < kept)[:, None, None] & channel_ok[None, :, :]
        x = tl.load(score_ptr + src[:, None, None] + ch, mask=mask)
        v = tl.load(latent_ptr + src[:, None, None] + ch, mask=mask)
        tl.store(state_ptr + dst[:, None, None] + ch, x, mask=mask)
        tl.store(state_ptr + dst[:, None, None] + C + ch, v, mask=mask)
