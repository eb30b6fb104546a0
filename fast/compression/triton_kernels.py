# mypy: disable-error-code="no-untyped-def,untyped-decorator"
"""Triton kernels for compression: prefill over packed requests, and one-launch decode / verify.

Names and shapes follow ``naive.py``. Every kernel works on a tile of output rows x window entries x channels
(``[BLOCK_R, BLOCK_K, BLOCK_C]``, channels contiguous in memory):

- ``_prefill_rows_kernel``: one program per (tile of one request's output rows, block of channels), channel
  blocks fastest. The tile's request data is one host-built record (``prefill_tiles``), so addresses are
  scalars plus aranges; ring loads happen only in tiles that read before the request's start. A window of up
  to ``BLOCK_K`` entries is a two-pass softmax in registers; longer windows (r = 128) go through it in chunks
  with an online (running max) merge. Exponentials are the hardware ``exp2`` of ``(x - max) * log2(e)``
  (``Config.poly_exp``: a polynomial within one ulp instead), accumulation is f32, the final division is
  correctly rounded.
- The ring after a prefill holds each request's newest ``min(n, S)`` positions: what writing every position
  in order would leave. Only the first ``W / r`` rows of a request read its ring, so when they share the
  request's first tile, that tile's programs write the ring themselves after a barrier (``KEEP``; one
  launch in all). Otherwise (tiles of one row with overlap) ``_keep_kernel`` writes it in a second launch,
  on the same stream, so after every ring read.
- One request (the usual long prefill): its start, length and state slot are launch arguments, so programs
  start loading inputs at once instead of waiting for a tile record (``ONE_REQUEST``).
- ``_decode_kernel``: one program per (request, block of channels) for the whole batch: the rows the step
  completes, zero rows for the other positions, a barrier, then the ring write of the same channels. A program
  reads and writes only its own request's ring slot and channels, so read-then-write holds in one launch.

``launcher(plan)`` binds a validated call (tiles, arguments, compile-time flags) once; calling the ``Launch``
allocates the outputs and launches. Tile sizes: ``default_tiles``; compile check: ``compile_check.py``.

BF16 outputs are rounded to nearest even with integer operations on the f32 bits (identical compiled and
interpreted); NaN becomes 0x7FC0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl

from fast.compression.naive import CompressionResult
from fast.compression.plan import Mode, Plan, completed_rows

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


TILE_FIELDS = 8
"""A prefill tile's int32 record: request, first row (within the request), start, first input row, state slot,
completed rows, first output row, reserved rows."""


@triton.jit
def _prefill_rows_kernel(
    score_ptr,
    latent_ptr,
    ape_ptr,
    state_ptr,
    tiles_ptr,
    table_ptr,
    table_stride,
    out_ptr,
    slot_ptr,
    pos_ptr,
    cache_ptr,
    R: tl.constexpr,
    D: tl.constexpr,
    C: tl.constexpr,
    OVERLAP: tl.constexpr,
    HAS_APE: tl.constexpr,
    S: tl.constexpr,
    ROWS_PER_BLOCK: tl.constexpr,
    HAS_TABLE: tl.constexpr,
    WRITE_CACHE: tl.constexpr,
    OUT_BF16: tl.constexpr,
    CACHE_BF16: tl.constexpr,
    W: tl.constexpr,
    BLOCK_R: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_C: tl.constexpr,
    POLY_EXP: tl.constexpr,
    EVICT: tl.constexpr,
    cu_ptr,
    one_start,
    one_length,
    one_slot,
    one_completed,
    one_reserved,
    ONE_REQUEST: tl.constexpr,
    KEEP: tl.constexpr,
    BLOCK_P: tl.constexpr,
):
    """One (tile of a request's output rows, block of channels). The tile's request data is one record of
    ``tiles_ptr`` (``TILE_FIELDS``), or, for a call of ``ONE_REQUEST``, launch arguments (no load to wait for),
    so every address below is a scalar plus an arange. ``KEEP``: a request's first tile, the only one that reads
    its ring, also writes it, after its reads (a barrier between), for the channels it read."""
    num_cb = (D + BLOCK_C - 1) // BLOCK_C
    pid = tl.program_id(0)
    pid_c = pid % num_cb
    if ONE_REQUEST:
        request = 0
        row0 = (pid // num_cb) * BLOCK_R
        start = one_start
        cu0 = 0
        slot = one_slot
        completed = one_completed
        out0 = 0
        reserved = one_reserved
    else:
        record = tiles_ptr + (pid // num_cb) * 8
        request = tl.load(record)
        row0 = tl.load(record + 1)
        start = tl.load(record + 2)
        cu0 = tl.load(record + 3)
        slot = tl.load(record + 4)
        completed = tl.load(record + 5)
        out0 = tl.load(record + 6)
        reserved = tl.load(record + 7)
    local = row0 + tl.arange(0, BLOCK_R)
    valid = local < completed
    group = start // R + local
    if OVERLAP:  # the earliest position any row of the tile reads
        first_read = (start // R + row0 - 1) * R
    else:
        first_read = (start // R + row0) * R
    cols = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    col_ok = cols < D
    acc = _window_mean(
        score_ptr, latent_ptr, ape_ptr, state_ptr, start, cu0, slot, group, valid, first_read < start, cols,
        col_ok, R, D, C, OVERLAP, HAS_APE, S, W, BLOCK_K, POLY_EXP, EVICT,
    )  # fmt: skip
    _store_rows(
        out_ptr, slot_ptr, pos_ptr, cache_ptr, table_ptr, table_stride, out0 + local, local < reserved, valid,
        request, group, cols, col_ok, acc, pid_c, R, D, ROWS_PER_BLOCK, HAS_TABLE, WRITE_CACHE, OUT_BF16,
        CACHE_BF16,
    )  # fmt: skip
    if KEEP:
        if row0 == 0:
            if ONE_REQUEST:
                length = one_length
            else:
                length = tl.load(cu_ptr + request + 1) - cu0
            kept = tl.minimum(length, S)
            channels, channel_ok = _read_channels(cols, col_ok, D, OVERLAP)
            tl.debug_barrier()  # every ring read of this program happens before any of its ring writes
            for p0 in range(0, kept, BLOCK_P):
                i = p0 + tl.arange(0, BLOCK_P)
                _copy_to_ring(
                    score_ptr, latent_ptr, state_ptr, cu0, start, slot, length - kept + i, i < kept, channels,
                    channel_ok, C, S,
                )  # fmt: skip


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
def _copy_to_ring(
    score_ptr,
    latent_ptr,
    state_ptr,
    cu0,
    start,
    slot,
    local,
    live,
    channels,
    channel_ok,
    C: tl.constexpr,
    S: tl.constexpr,
):
    """state[slot, (start + local) % S] = (score, latent) of input row cu0 + local, for ``channels``
    ([H, BLOCK_C] offsets): [BLOCK_P] rows x channels in one load and one store per tensor."""
    src = (cu0 + local).to(tl.int64) * C
    dst = (slot.to(tl.int64) * S + (start + local) % S) * (2 * C)
    mask = live[:, None, None] & channel_ok[None, :, :]
    ch = channels[None, :, :]
    x = tl.load(score_ptr + src[:, None, None] + ch, mask=mask)
    v = tl.load(latent_ptr + src[:, None, None] + ch, mask=mask)
    tl.store(state_ptr + dst[:, None, None] + ch, x, mask=mask)
    tl.store(state_ptr + dst[:, None, None] + C + ch, v, mask=mask)


@triton.jit
def _keep_kernel(
    score_ptr,
    latent_ptr,
    state_ptr,
    state_index_ptr,
    cu_ptr,
    start_ptr,
    C: tl.constexpr,
    S: tl.constexpr,
    BLOCK_P: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    """Prefill: the newest min(n, S) positions of each request into its ring (all C channels)."""
    num_cb = (C + BLOCK_C - 1) // BLOCK_C
    pid = tl.program_id(0)
    pid_c = pid % num_cb
    request = pid // num_cb
    start = tl.load(start_ptr + request)
    cu0 = tl.load(cu_ptr + request)
    length = tl.load(cu_ptr + request + 1) - cu0
    slot = tl.load(state_index_ptr + request)
    kept = tl.minimum(length, S)
    cols = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    col_ok = cols < C
    for p0 in range(0, kept, BLOCK_P):
        i = p0 + tl.arange(0, BLOCK_P)
        _copy_to_ring(
            score_ptr, latent_ptr, state_ptr, cu0, start, slot, length - kept + i, i < kept, cols[None, :],
            col_ok[None, :], C, S,
        )  # fmt: skip


@triton.jit
def _decode_kernel(
    score_ptr,
    latent_ptr,
    ape_ptr,
    state_ptr,
    state_index_ptr,
    cu_ptr,
    start_ptr,
    table_ptr,
    table_stride,
    out_ptr,
    slot_ptr,
    pos_ptr,
    cache_ptr,
    R: tl.constexpr,
    D: tl.constexpr,
    C: tl.constexpr,
    OVERLAP: tl.constexpr,
    HAS_APE: tl.constexpr,
    S: tl.constexpr,
    ROWS_PER_BLOCK: tl.constexpr,
    HAS_TABLE: tl.constexpr,
    WRITE_CACHE: tl.constexpr,
    OUT_BF16: tl.constexpr,
    CACHE_BF16: tl.constexpr,
    WRITE_RING: tl.constexpr,
    W: tl.constexpr,
    BLOCK_R: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_C: tl.constexpr,
    POLY_EXP: tl.constexpr,
    EVICT: tl.constexpr,
):
    """One (request, channel block): its completed rows (tiles of BLOCK_R rows, only the positions that complete
    a group), zero rows for the other positions (tiles of BLOCK_N), then its ring write."""
    num_cb = (D + BLOCK_C - 1) // BLOCK_C
    pid = tl.program_id(0)
    pid_c = pid % num_cb
    request = pid // num_cb
    start = tl.load(start_ptr + request)
    cu0 = tl.load(cu_ptr + request)
    length = tl.load(cu_ptr + request + 1) - cu0
    slot = tl.load(state_index_ptr + request)
    cols = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    col_ok = cols < D
    if WRITE_RING:  # load the first tile of positions to keep now, while the rows' loads are in flight
        kept = tl.minimum(length, S)
        channels, channel_ok = _read_channels(cols, col_ok, D, OVERLAP)
        ahead = tl.arange(0, BLOCK_N)
        keep_local = length - kept + ahead
        keep_mask = (ahead < kept)[:, None, None] & channel_ok[None, :, :]
        keep_src = (cu0 + keep_local).to(tl.int64)[:, None, None] * C + channels[None, :, :]
        keep_x = tl.load(score_ptr + keep_src, mask=keep_mask)
        keep_v = tl.load(latent_ptr + keep_src, mask=keep_mask)
    # rows j in [start // R, (start + length) // R), completed at positions (j + 1) R - 1
    group_base = start // R
    completed = (start + length) // R - group_base
    for r0 in range(0, completed, BLOCK_R):
        local = r0 + tl.arange(0, BLOCK_R)
        valid = local < completed
        group = group_base + local
        if OVERLAP:  # the earliest position any row of the tile reads
            first_read = (group_base + r0 - 1) * R
        else:
            first_read = (group_base + r0) * R
        acc = _window_mean(
            score_ptr, latent_ptr, ape_ptr, state_ptr, start, cu0, slot, group, valid, first_read < start, cols,
            col_ok, R, D, C, OVERLAP, HAS_APE, S, W, BLOCK_K, POLY_EXP, EVICT,
        )  # fmt: skip
        _store_rows(
            out_ptr, slot_ptr, pos_ptr, cache_ptr, table_ptr, table_stride, cu0 + (group + 1) * R - 1 - start,
            valid, valid, request, group, cols, col_ok, acc, pid_c, R, D, ROWS_PER_BLOCK, HAS_TABLE,
            WRITE_CACHE, OUT_BF16, CACHE_BF16,
        )  # fmt: skip
    # every other new position: zero row, store slot -1, position 0
    nothing = tl.zeros([BLOCK_N], dtype=tl.int32)
    for p0 in range(0, length, BLOCK_N):
        i = p0 + tl.arange(0, BLOCK_N)
        idle = (i < length) & ((start + i + 1) % R != 0)
        _store_rows(
            out_ptr, slot_ptr, pos_ptr, cache_ptr, table_ptr, table_stride, cu0 + i, idle, idle & (i < 0),
            request, nothing, cols, col_ok, tl.zeros([BLOCK_N, BLOCK_C], dtype=tl.float32), pid_c, R, D,
            ROWS_PER_BLOCK, HAS_TABLE, WRITE_CACHE, OUT_BF16, CACHE_BF16,
        )  # fmt: skip
    if WRITE_RING:
        tl.debug_barrier()  # every ring read of this program happens before any of its ring writes
        keep_dst = ((slot.to(tl.int64) * S + (start + keep_local) % S) * (2 * C))[:, None, None]
        tl.store(state_ptr + keep_dst + channels[None, :, :], keep_x, mask=keep_mask)
        tl.store(state_ptr + keep_dst + C + channels[None, :, :], keep_v, mask=keep_mask)
        for r0 in range(BLOCK_N, kept, BLOCK_N):  # more than one tile to keep (steps longer than BLOCK_N)
            i = r0 + tl.arange(0, BLOCK_N)
            _copy_to_ring(
                score_ptr, latent_ptr, state_ptr, cu0, start, slot, length - kept + i, i < kept, channels,
                channel_ok, C, S,
            )  # fmt: skip


@dataclass(frozen=True)
class Config:
    """Tiles: output rows, window entries per chunk, channels; warps per program; decode: new positions per
    tile (zero rows, ring write)."""

    block_r: int
    block_k: int
    block_c: int
    num_warps: int
    block_n: int = 1
    poly_exp: bool = False
    evict_first: bool = False
    """Streamed inputs loaded with the evict-first cache hint (each is read once; 2% slower on C2 in the H200
    sweep, so off by default)."""


TILE_ELEMENTS = 8192
PREFILL_TILE_ELEMENTS = 2048


def default_tiles(mode: Mode, window: int, dim: int, max_new: int, max_completed: int) -> Config:
    """Tile sizes [rows, entries, channels], warps, from the H200 sweeps of the benchmark (results/bench.md)
    and the sm_90 register counts of compile_check. Prefill: 2048-element tiles, at least 2 rows, at most one
    warp per row, up to 4 (C2 ``8 x 2 x 128``, 4 warps; V4 overlap ``2 x 8 x 128``, 2 warps: warps split over
    the entries would reduce the window through shared memory, see ``2 x 8 x 128`` with 4 warps in the sweep);
    a window longer than 16 entries in chunks of 32 (``1 x 32 x 128``, 4 warps). Decode: only the rows that
    complete (``max_completed`` per request), so a batch fits one wave."""
    new_tile = triton.next_power_of_2(max(1, min(max_new, 16)))
    if window > 16:
        block_c = min(triton.next_power_of_2(dim), 128 if mode is Mode.PREFILL else 64)
        return Config(1, 32, block_c, 4, new_tile)
    block_k = triton.next_power_of_2(window)
    if mode is Mode.PREFILL:
        block_c = min(triton.next_power_of_2(dim), 128)
        block_r = max(2, min(64, PREFILL_TILE_ELEMENTS // (block_k * block_c)))
        warps = min(4, block_r)
    else:
        block_r = triton.next_power_of_2(max(1, max_completed))
        block_c = min(triton.next_power_of_2(dim), 128 if block_r >= 4 else 32)
        block_r = max(1, min(block_r, TILE_ELEMENTS // (block_k * block_c)))
        warps = 4 if block_r >= 4 else 1
    return Config(block_r, block_k, block_c, warps, new_tile)


def default_config(plan: Plan) -> Config:
    completed = (completed_rows(s, n, plan.ratio) for s, n in zip(plan.starts, plan.lengths, strict=True))
    return default_tiles(plan.mode, plan.window, plan.dim, plan.max_new, max(completed, default=0))


def allocate(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Output buffers, left unwritten: the kernels write every lane (tests pre-fill them with NaN to check)."""
    return torch.empty(shape, dtype=dtype, device=device)


def prefill_tiles(plan: Plan, block_r: int) -> torch.Tensor:
    """i32[tiles, TILE_FIELDS] on the plan's device: each request's reserved rows cut into tiles of block_r."""
    reserved = torch.tensor(plan.row_counts, dtype=torch.int64)
    per_request = (reserved + block_r - 1) // block_r
    request = torch.repeat_interleave(torch.arange(plan.num_requests), per_request)
    first_tile = torch.cumsum(per_request, 0) - per_request
    row0 = (torch.arange(request.numel()) - first_tile[request]) * block_r
    starts = torch.tensor(plan.starts, dtype=torch.int64)
    lengths = torch.tensor(plan.lengths, dtype=torch.int64)
    cu = torch.cumsum(lengths, 0) - lengths
    slots = torch.tensor(plan.slots, dtype=torch.int64)
    completed = (starts + lengths) // plan.ratio - starts // plan.ratio
    out0 = torch.cumsum(reserved, 0) - reserved
    fields = [request, row0, starts[request], cu[request], slots[request], completed[request], out0[request],
              reserved[request]]  # fmt: skip
    return torch.stack(fields, dim=1).to(torch.int32).to(plan.score.device)


@dataclass(frozen=True)
class Launch:
    """A validated call bound to its kernels: ``launch()`` allocates the outputs and launches, nothing else
    (the host work of building tiles and arguments is done once, as an engine would per step)."""

    plan: Plan
    config: Config
    tiles: torch.Tensor | None
    args: tuple[Any, ...]
    flags: dict[str, Any]
    """Keyword arguments of the kernels: compile-time flags and, for prefill, a single request's fields."""

    def __call__(self) -> CompressionResult:
        plan, cfg = self.plan, self.config
        device, R = plan.score.device, plan.total_rows
        rows = allocate((R, plan.dim), plan.out_dtype, device)
        slots = allocate((R,), torch.int64, device)
        positions = allocate((R,), torch.int64, device)
        out = rows.view(torch.int16) if plan.out_dtype == torch.bfloat16 else rows
        score, latent, ape, state, table, table_stride, cache = self.args
        if plan.mode is Mode.PREFILL:
            if R > 0:
                tiles = self.tiles if self.tiles is not None else plan.cu_seqlens  # unread with ONE_REQUEST
                tile_count = self.tiles.shape[0] if self.tiles is not None else triton.cdiv(R, cfg.block_r)
                _prefill_rows_kernel[(tile_count * triton.cdiv(plan.dim, cfg.block_c),)](
                    score, latent, ape, state, tiles, table, table_stride, out, slots, positions, cache,
                    **self.flags, num_warps=cfg.num_warps,
                )  # fmt: skip
            if any(plan.kept) and not self.flags.get("KEEP"):
                C = plan.channels
                keep_c = min(triton.next_power_of_2(C), 256)
                keep_p = max(1, min(triton.next_power_of_2(max(plan.kept)), 4096 // keep_c))
                _keep_kernel[(plan.num_requests * triton.cdiv(C, keep_c),)](
                    score, latent, plan.state, plan.state_index, plan.cu_seqlens, plan.start_pos,
                    C=C, S=plan.ring, BLOCK_P=keep_p, BLOCK_C=keep_c, num_warps=4,
                )  # fmt: skip
        elif plan.num_requests > 0:
            _decode_kernel[(plan.num_requests * triton.cdiv(plan.dim, cfg.block_c),)](
                score, latent, ape, state, plan.state_index, plan.cu_seqlens, plan.start_pos, table, table_stride,
                out, slots, positions, cache, **self.flags, WRITE_RING=any(plan.kept), BLOCK_N=cfg.block_n,
                num_warps=cfg.num_warps,
            )  # fmt: skip
        return CompressionResult(rows, slots, positions)


def launcher(plan: Plan, config: Config | None = None) -> Launch:
    """Bind a validated call to its kernels (tiles, arguments, compile-time flags)."""
    cfg = config or default_config(plan)
    dummy = plan.score
    state = plan.state if plan.state.numel() > 0 else dummy
    ape = plan.ape if plan.ape is not None else dummy
    table = plan.block_table if plan.block_table is not None else plan.start_pos
    table_stride = int(table.stride(0)) if plan.block_table is not None else 0
    cache = plan.kv_cache
    cache_arg = dummy if cache is None else (cache.view(torch.int16) if cache.dtype == torch.bfloat16 else cache)
    flags: dict[str, Any] = dict(
        R=plan.ratio,
        D=plan.dim,
        C=plan.channels,
        OVERLAP=plan.overlap,
        HAS_APE=plan.ape is not None,
        S=max(1, plan.ring),  # W = 1 may run without a ring; nothing then reads or writes it
        ROWS_PER_BLOCK=max(1, plan.rows_per_block),
        HAS_TABLE=plan.block_table is not None,
        WRITE_CACHE=cache is not None,
        OUT_BF16=plan.out_dtype == torch.bfloat16,
        CACHE_BF16=cache is not None and cache.dtype == torch.bfloat16,
        W=plan.window,
        BLOCK_R=cfg.block_r,
        BLOCK_K=cfg.block_k,
        BLOCK_C=cfg.block_c,
        POLY_EXP=cfg.poly_exp,
        EVICT="evict_first" if cfg.evict_first else "",
    )
    tiles = None
    if plan.mode is Mode.PREFILL:
        one = plan.num_requests == 1
        if plan.total_rows > 0 and not one:
            tiles = prefill_tiles(plan, cfg.block_r)
        start, length, slot, reserved = (plan.starts[0], plan.lengths[0], plan.slots[0], plan.row_counts[0]) if one \
            else (0, 0, 0, 0)  # fmt: skip
        readers = 2 if plan.overlap else 1  # the rows whose windows can reach before the start
        flags |= dict(cu_ptr=plan.cu_seqlens, one_start=start, one_length=length, one_slot=slot,
                      one_completed=completed_rows(start, length, plan.ratio), one_reserved=reserved, ONE_REQUEST=one,
                      KEEP=any(plan.kept) and cfg.block_r >= readers,
                      BLOCK_P=max(1, min(triton.next_power_of_2(max(plan.kept, default=1)), 16)))  # fmt: skip
    return Launch(plan, cfg, tiles, (plan.score, plan.latent, ape, state, table, table_stride, cache_arg), flags)


def run(plan: Plan, config: Config | None = None) -> CompressionResult:
    """Launch the kernels for a validated call: one launch (prefill: two where a tile of one row leaves an
    overlapping window's ring readers in two tiles, see ``_keep_kernel``)."""
    return launcher(plan, config)()
