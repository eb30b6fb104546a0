# mypy: disable-error-code="no-untyped-def,untyped-decorator"
"""The compression decode / verify kernel (``triton_kernels.py`` launches it).

``_decode_kernel``: one program per (request, block of channels) for the whole batch: the rows the step
completes, zero rows for the other positions, a barrier, then the ring write of the same channels. A program
reads and writes only its own request's ring slot and channels, so read_then_write holds in one launch.
"""

from __future__ import annotations

import triton
import triton.language as tl

from fast.compression.triton_common import (
    _first_read,
    _keep_newest,
    _program,
    _read_channels,
    _request_fields,
    _store_rows,
    _window_mean,
)


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
    request, pid_c, cols, col_ok = _program(D, BLOCK_C)
    start, cu0, length, slot = _request_fields(cu_ptr, start_ptr, state_index_ptr, request)
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
        first_read = _first_read(group_base + r0, R, OVERLAP)
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
        _keep_newest(  # more than one tile to keep (steps longer than BLOCK_N)
            score_ptr, latent_ptr, state_ptr, cu0, start, slot, length, kept, BLOCK_N, channels, channel_ok, C, S,
            BLOCK_N,
        )  # fmt: skip
