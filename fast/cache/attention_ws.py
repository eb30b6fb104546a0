# mypy: disable-error-code="no-untyped-def,untyped-decorator"
"""Warp-specialized sparse MQA attention with a sink, in Triton's Gluon dialect (compiled sm_90 only).

    sparse_attention_ws(call: fast.cache.checks.AttentionArgs, tile: Tile | None) -> (out: f32[M, H, 512],
                                                                                     lse: f32[M, H])

The same operation as ``fast.cache.attention`` (its twin and its contract), for the calls production decode and
prefill make: bf16 q, D = dv = 512, bf16 probabilities, KV as BF16 rows or in a V4 584-byte or V4.1 528-byte FP8
cache; a query row is a query row, decode or prefill. ``fast.cache.dispatch`` runs it for those calls on sm_90
on an FP8 cache (BF16 rows go to ``fast.cache.attention_pair``). One program per (query row, 64 heads) holds two
partitions:

1. a producer of 4 warps walks the row's lanes a tile at a time and fills a ring of ``stages`` bf16 tiles in
   shared memory, waiting on a stage's ``empty`` barrier before it overwrites it and signalling its ``ready``
   barrier: BF16 rows by ``cp.async`` (the barrier completes when the copies land); FP8 codes either staged in
   its registers, a whole tile loaded before the stage is awaited, then converted (``cvt.rn.f16x2.e4m3x2`` times
   the group's power-of-two scale: exact) and stored, or (the default, ``Tile.code_chunks``) copied a 64-column
   chunk at a time into a ring of chunks, running ahead of the conversion across tiles;
2. the consumer, the program's 8 warps (two warp groups), waits on ``ready``, runs the scores' ``wgmma`` (q,
   64 x 512, against the tile), the online softmax, the ``p @ v`` ``wgmma`` with the same tile as v, and arrives
   on ``empty``.

So the gathers of the next tile run while the consumer computes this one, work the ``tl`` kernel puts on one
critical path (docs/targets.md, sections 2 and 3; docs/cache-kernels.md). Invalid lanes are read as zeros and
scored -inf; the sink enters the final denominator only; an empty row follows ``call.empty_nan``. Swept forms: an
L2 prefetch of the rows of the tiles ahead (``Tile.prefetch``, on in V4.1's default), FlashAttention-3's
overlapped consumer (``Tile.overlap``) and a persistent grid, one program an SM walking (row, head block) items
(``Tile.persistent``); ``PROBES`` leave one part of the work out, for timing only (``python -m
fast.cache.ws_probes``).

Gluon kernels do not run in the interpreter: on the CPU, ``python -m fast.cache.compile_check --only "warp
specialized"`` lowers every shipped tile for sm_90; results are checked on a GPU only (``tests/test_attention_ws.py``,
the ``sparse_attention_bf16`` properties, the benchmark's decode and prefill checks against f64).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from fast import l2
from fast.cache.checks import AttentionArgs
from fast.cache.formats import FORMATS, CacheFormat

BLOCK_H = 64
DIM = 512
CHUNK = 64
"""Columns of a tile the producer converts at a time (one 128-byte swizzle row of bf16)."""
PRODUCER_WARPS = 4
PRODUCER_REGS = 56
CONSUMER_WARPS = 8
_CONSUMER_WARPS = gl.constexpr(CONSUMER_WARPS)
WS_API = gl.constexpr(
    ["functions_and_args", "default_args", "args"].index(next(iter(inspect.signature(gl.warp_specialize).parameters)))
)
"""How this Triton's ``gl.warp_specialize`` takes its partitions: 0, (function, arguments) pairs (3.9); 1, the
default partition's arguments and function, then the workers' arguments and functions; 2, one argument tuple for
every partition, the default function, the workers' functions."""


@gluon.constexpr_function
def chunk_layout(CHUNK, GROUP, PRODUCER_WARPS):
    """A ``CHUNK``-column chunk of codes, [lanes, CHUNK // GROUP groups, GROUP]: 16 bytes a thread, a thread's
    codes in one group (one scale)."""
    return gl.BlockedLayout([1, 1, 16], [8, CHUNK // GROUP, GROUP // 16], [PRODUCER_WARPS, 1, 1], [2, 1, 0])


@gluon.constexpr_function
def scale_layout(SCALES, PRODUCER_WARPS):
    """A row's ``SCALES`` scale bytes, [lanes, SCALES]: 4 bytes a thread."""
    return gl.BlockedLayout([1, 4], [32 // (SCALES // 4), SCALES // 4], [PRODUCER_WARPS, 1], [1, 0])


@gluon.constexpr_function
def scale_bytes(QDIMS, GROUP):
    """The scale bytes a chunked copy takes of a row: its groups' count rounded up to a power of two (a V4 row's
    7 scales and their pad byte, a V4.1 row's 16)."""
    return max(4, 1 << (QDIMS // GROUP - 1).bit_length())


ASYNC_LOAD = getattr(async_copy, "async_load", None) or async_copy.async_copy_global_to_shared
"""``cp.async`` of a tensor of pointers into shared memory (renamed between releases)."""
_PREFETCH_ASM = gl.constexpr(l2.PREFETCH_ASM.value)
"""``prefetch.global.L2`` where a predicate holds (``fast.l2``'s text)."""
LINE = gl.constexpr(l2.LINE_BYTES.value)
"""The line a prefetch asks for (``fast.l2``)."""
BARRIER = gl.barrier if hasattr(gl, "barrier") else gl.thread_barrier
"""A barrier of the threads that run it (of a partition, inside one): the name differs between releases."""


@gluon.constexpr_function
def rows_layout(CHUNK, PRODUCER_WARPS):
    """How the producer holds the rows it copies (``tile_rows``, ``copy_rows``, ``issue_q``): ``CHUNK`` columns
    across a row's threads, 8 bf16 (16 bytes) a thread."""
    return gl.BlockedLayout([1, 8], [32 // (CHUNK // 8), CHUNK // 8], [PRODUCER_WARPS, 1], [1, 0])


@gluon.jit
def issue_rows(tile, kv_ptr, idx_ptr, m, t, N, K, BLOCK_N: gl.constexpr, DIM: gl.constexpr, CHUNK: gl.constexpr,
                PRODUCER_WARPS: gl.constexpr, C0: gl.constexpr, C1: gl.constexpr):  # fmt: skip
    """BF16 rows: ``cp.async`` chunks ``C0`` to ``C1 - 1`` (``CHUNK`` columns each) of the lanes of tile ``t``
    into ``tile`` (an invalid lane's row is zero-filled)."""
    row, valid = tile_rows(idx_ptr, m, t, N, K, BLOCK_N, CHUNK, PRODUCER_WARPS)
    copy_rows(tile, kv_ptr, row, valid, DIM, CHUNK, PRODUCER_WARPS, C0, C1)


@gluon.jit
def tile_rows(idx_ptr, m, t, N, K, BLOCK_N: gl.constexpr, CHUNK: gl.constexpr, PRODUCER_WARPS: gl.constexpr):
    """Tile ``t``'s KV rows (0 where invalid) and whether each lane is valid, in ``copy_rows``'s layout."""
    rows_l: gl.constexpr = rows_layout(CHUNK, PRODUCER_WARPS)
    lane = t * BLOCK_N + gl.arange(0, BLOCK_N, gl.SliceLayout(1, rows_l))
    idx = gl.load(idx_ptr + m * K + lane, mask=lane < K, other=-1)
    valid = (idx >= 0) & (idx < N)
    return gl.where(valid, idx, 0).to(gl.int64), valid


@gluon.jit
def copy_rows(tile, ptr, row, valid, DIM: gl.constexpr, CHUNK: gl.constexpr, PRODUCER_WARPS: gl.constexpr,
              C0: gl.constexpr, C1: gl.constexpr):  # fmt: skip
    """``cp.async`` chunks ``C0`` to ``C1 - 1`` of bf16 rows ``row`` (``DIM`` wide, from ``ptr``) into ``tile``'s
    rows; a row whose ``valid`` is false is zero-filled. ``row`` and ``valid`` in ``issue_rows``'s layout."""
    rows_l: gl.constexpr = rows_layout(CHUNK, PRODUCER_WARPS)
    for c in gl.static_range(C0, C1):
        col = c * CHUNK + gl.arange(0, CHUNK, gl.SliceLayout(0, rows_l))
        ASYNC_LOAD(tile.slice(c * CHUNK, CHUNK, dim=1), ptr + row[:, None] * DIM + col[None, :], mask=valid[:, None])


@gluon.jit
def issue_q(q_smem, q_ptr, m, h0, H, BLOCK_H: gl.constexpr, DIM: gl.constexpr, CHUNK: gl.constexpr,
             PRODUCER_WARPS: gl.constexpr):  # fmt: skip
    """The persistent form: ``cp.async`` heads ``h0`` on of query row ``m`` into ``q_smem`` (heads past ``H`` zero)."""
    rows_l: gl.constexpr = rows_layout(CHUNK, PRODUCER_WARPS)
    h = h0 + gl.arange(0, BLOCK_H, gl.SliceLayout(1, rows_l))
    copy_rows(q_smem, q_ptr, m * H + h, h < H, DIM, CHUNK, PRODUCER_WARPS, 0, DIM // CHUNK)


@gluon.jit
def _tile_indices(idx_ptr, m, t, K, BLOCK_N: gl.constexpr, code_l: gl.constexpr, scale_l: gl.constexpr):
    """Tile ``t``'s lane indices (-1 past ``K``), once in the code copies' layout ``code_l`` (3-d) and once in the
    scale copies' ``scale_l``: loading them twice costs less than converting one (a round trip through shared
    memory with barriers)."""
    lane_c = t * BLOCK_N + gl.arange(0, BLOCK_N, gl.SliceLayout(1, gl.SliceLayout(2, code_l)))
    lane_s = t * BLOCK_N + gl.arange(0, BLOCK_N, gl.SliceLayout(1, scale_l))
    idx_c = gl.load(idx_ptr + m * K + lane_c, mask=lane_c < K, other=-1)
    idx_s = gl.load(idx_ptr + m * K + lane_s, mask=lane_s < K, other=-1)
    return idx_c, idx_s


@gluon.jit
def _cache_offset(row, block_bytes, RPB: gl.constexpr, STRIDE: gl.constexpr):
    """The byte offset of cache row ``row`` (int64) in its block's section of rows ``STRIDE`` bytes apart."""
    block = row // RPB
    return block * block_bytes + (row - block * RPB) * STRIDE


@gluon.jit
def issue_scales(scales, kv_ptr, idx_s, N, block_bytes, scale_base, RPB: gl.constexpr, SCALE_STRIDE: gl.constexpr,
                 SCALES: gl.constexpr, PRODUCER_WARPS: gl.constexpr):  # fmt: skip
    """FP8: ``cp.async`` the first ``SCALES`` scale bytes ([lanes, SCALES]) of the lanes ``idx_s``
    (``scale_layout``; an invalid lane's zero-filled)."""
    s_valid = (idx_s >= 0) & (idx_s < N)
    s_row = gl.where(s_valid, idx_s, 0).to(gl.int64)
    scale_b = _cache_offset(s_row, block_bytes, RPB, SCALE_STRIDE) + scale_base
    g = gl.arange(0, SCALES, gl.SliceLayout(0, scale_layout(SCALES, PRODUCER_WARPS)))
    ASYNC_LOAD(scales, kv_ptr + scale_b[:, None] + g[None, :], mask=s_valid[:, None])


@gluon.jit
def issue_chunk(slot, kv_ptr, idx_c, c: gl.constexpr, N, block_bytes, RPB: gl.constexpr, DATA_STRIDE: gl.constexpr,
                CHUNK: gl.constexpr, GROUP: gl.constexpr, PRODUCER_WARPS: gl.constexpr):  # fmt: skip
    """FP8: ``cp.async`` the codes of columns ``c * CHUNK`` on ([lanes, CHUNK // GROUP groups, GROUP]) of the lanes
    ``idx_c`` into the ring slot ``slot`` (an invalid lane's zero-filled)."""
    code_l: gl.constexpr = chunk_layout(CHUNK, GROUP, PRODUCER_WARPS)
    valid = (idx_c >= 0) & (idx_c < N)
    row = gl.where(valid, idx_c, 0).to(gl.int64)
    data_b = _cache_offset(row, block_bytes, RPB, DATA_STRIDE) + c * CHUNK
    group = gl.arange(0, CHUNK // GROUP, gl.SliceLayout(0, gl.SliceLayout(2, code_l)))
    byte = gl.arange(0, GROUP, gl.SliceLayout(0, gl.SliceLayout(1, code_l)))
    at = data_b[:, None, None] + (group * GROUP)[None, :, None] + byte[None, None, :]
    ASYNC_LOAD(slot, kv_ptr + at, mask=valid[:, None, None])


@gluon.jit
def issue_rope(tile, kv_ptr, row, valid, block_bytes, RPB: gl.constexpr, DATA_STRIDE: gl.constexpr,
               QDIMS: gl.constexpr, CHUNK: gl.constexpr, PRODUCER_WARPS: gl.constexpr):  # fmt: skip
    """V4: ``cp.async`` the bf16 values past ``QDIMS`` (``CHUNK`` of them) of the cache rows ``row`` straight into
    ``tile``'s columns ``QDIMS`` on (``tile_rows``'s layout; an invalid lane's zero-filled)."""
    rows_l: gl.constexpr = rows_layout(CHUNK, PRODUCER_WARPS)
    base = _cache_offset(row, block_bytes, RPB, DATA_STRIDE) + QDIMS
    e = gl.arange(0, CHUNK, gl.SliceLayout(0, rows_l))
    rows = (kv_ptr + base).to(gl.pointer_type(gl.bfloat16), bitcast=True)  # bf16 units: 16-byte copies
    ASYNC_LOAD(tile.slice(QDIMS, CHUNK, dim=1), rows[:, None] + e[None, :], mask=valid[:, None])


@gluon.jit
def convert_chunk(tile, codes, scales, c: gl.constexpr, BLOCK_N: gl.constexpr, CHUNK: gl.constexpr,
                  GROUP: gl.constexpr, PRODUCER_WARPS: gl.constexpr, READ_FIRST: gl.constexpr):  # fmt: skip
    """Columns ``c * CHUNK`` on of ``tile``: the codes ``codes`` ([lanes, CHUNK // GROUP groups, GROUP] in shared
    memory) times their groups' scales (``scales``, [lanes, CHUNK // GROUP]), as bf16 (powers of two: exact);
    ``READ_FIRST``: every producer thread reads its codes and scales before any stores (the columns hold codes)."""
    code_l: gl.constexpr = chunk_layout(CHUNK, GROUP, PRODUCER_WARPS)
    x = codes.load(code_l)
    s = scales.load(gl.SliceLayout(2, code_l))
    if READ_FIRST:
        BARRIER()
    group_scale = ue8m0_scale(s)
    x = x.to(gl.float8e4nv, bitcast=True).to(gl.float32) * group_scale[:, :, None]
    tile.slice(c * CHUNK, CHUNK, dim=1).store(gl.reshape(x.to(gl.bfloat16), [BLOCK_N, CHUNK]))


@gluon.jit
def ue8m0_scale(code):
    """A UE8M0 scale code's value as f32: ``2 ** (code - 127)``, code 0 as ``2 ** -127``, code 255 NaN."""
    code = code.to(gl.int32)
    value = gl.where(code == 0, 0x00400000, code << 23).to(gl.float32, bitcast=True)
    return gl.where(code == 0xFF, float("nan"), value)


@gluon.jit
def _load_chunk(kv_ptr, data_b, scale_b, valid, c: gl.constexpr, CHUNK: gl.constexpr, GROUP: gl.constexpr,
                QDIMS: gl.constexpr, PRODUCER_WARPS: gl.constexpr):  # fmt: skip
    """Columns ``c * CHUNK`` on of the lanes at ``data_b``: e4m3 codes [lanes, groups, GROUP] and their UE8M0
    scale codes [lanes, groups], or past ``QDIMS`` (V4's RoPE values) bf16 [lanes, 1, CHUNK] and a dummy."""
    code_l: gl.constexpr = gl.BlockedLayout([1, 1, 16], [8, CHUNK // GROUP, GROUP // 16], [PRODUCER_WARPS, 1, 1],
                                            [2, 1, 0])  # fmt: skip
    if c * CHUNK < QDIMS:
        g = gl.arange(0, CHUNK // GROUP, gl.SliceLayout(0, gl.SliceLayout(2, code_l)))
        b = gl.arange(0, GROUP, gl.SliceLayout(0, gl.SliceLayout(1, code_l)))
        at = data_b[:, None, None] + (c * CHUNK + g * GROUP)[None, :, None] + b[None, None, :]
        x = gl.load(kv_ptr + at, mask=valid[:, None, None], other=0)
        s = gl.load(kv_ptr + scale_b[:, None] + (c * CHUNK // GROUP + g)[None, :], mask=valid[:, None], other=0)
        return x, s
    else:
        rope_l: gl.constexpr = gl.BlockedLayout([1, 1, 8], [8, 1, 4], [PRODUCER_WARPS, 1, 1], [2, 1, 0])
        rows = gl.convert_layout(data_b, gl.SliceLayout(1, gl.SliceLayout(2, rope_l)))
        ok = gl.convert_layout(valid, gl.SliceLayout(1, gl.SliceLayout(2, rope_l)))
        e = gl.arange(0, CHUNK, gl.SliceLayout(0, gl.SliceLayout(1, rope_l)))
        at = rows[:, None, None] + QDIMS + (c * CHUNK - QDIMS + e)[None, None, :] * 2
        x = gl.load((kv_ptr + at).to(gl.pointer_type(gl.bfloat16), bitcast=True), mask=ok[:, None, None], other=0.0)
        return x, ok


@gluon.jit
def _store_chunk(tile, x, s, c: gl.constexpr, BLOCK_N: gl.constexpr, CHUNK: gl.constexpr, QDIMS: gl.constexpr):
    """``_load_chunk``'s columns, scaled to bf16 (powers of two: exact), into ``tile``."""
    if c * CHUNK < QDIMS:
        y = (x.to(gl.float8e4nv, bitcast=True).to(gl.float32) * ue8m0_scale(s)[:, :, None]).to(gl.bfloat16)
    else:
        y = x
    tile.slice(c * CHUNK, CHUNK, dim=1).store(gl.reshape(y, [BLOCK_N, CHUNK]))


@gluon.jit
def _prefetch_tile(kv_ptr, idx_ptr, m, t, N, K, block_bytes, scale_base, RPB: gl.constexpr, DATA_STRIDE: gl.constexpr,
                   SCALE_STRIDE: gl.constexpr, ROW_BYTES: gl.constexpr, POINTS: gl.constexpr, FP8_KV: gl.constexpr,
                   BLOCK_N: gl.constexpr, DIM: gl.constexpr, PRODUCER_WARPS: gl.constexpr):  # fmt: skip
    """Ask L2 for the lines of tile ``t``'s rows (``prefetch.global.L2``, one address every 128 bytes of a row's
    data and its last byte, and an FP8 row's scale line; a hint: no value changes, no register is held)."""
    pf_l: gl.constexpr = gl.BlockedLayout([1, POINTS // 2], [16, 2], [PRODUCER_WARPS, 1], [1, 0])
    lane = t * BLOCK_N + gl.arange(0, BLOCK_N, gl.SliceLayout(1, pf_l))
    idx = gl.load(idx_ptr + m * K + lane, mask=lane < K, other=-1)
    ok = (idx >= 0) & (idx < N)
    row = gl.where(ok, idx, 0).to(gl.int64)
    point = gl.arange(0, POINTS, gl.SliceLayout(0, pf_l))
    at = gl.minimum(point * LINE, ROW_BYTES - 1)
    lines = (ROW_BYTES + LINE - 1) // LINE + 1
    mask = ok[:, None] & (point < lines)[None, :]
    if FP8_KV:
        data = kv_ptr + _cache_offset(row, block_bytes, RPB, DATA_STRIDE)[:, None] + at[None, :]
        scales = kv_ptr + _cache_offset(row, block_bytes, RPB, SCALE_STRIDE) + scale_base
        gl.inline_asm_elementwise(_PREFETCH_ASM, "=r,l,r", [scales, ok.to(gl.int32)], dtype=gl.int32, is_pure=False,
                                  pack=1)  # fmt: skip
    else:
        data = kv_ptr + (row * DIM)[:, None] + (at // 2)[None, :]
    gl.inline_asm_elementwise(_PREFETCH_ASM, "=r,l,r", [data, mask.to(gl.int32)], dtype=gl.int32, is_pure=False,
                              pack=1)  # fmt: skip


@gluon.jit
def _produce_staged(k_smem, ready, empty, kv_ptr, idx_ptr, m, g0, N, K, block_bytes, scale_base, RPB: gl.constexpr,
                    DATA_STRIDE: gl.constexpr, SCALE_STRIDE: gl.constexpr, GROUP: gl.constexpr,
                    QDIMS: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CHUNK: gl.constexpr,
                    PRODUCER_WARPS: gl.constexpr, PREFETCH: gl.constexpr, ROW_BYTES: gl.constexpr,
                    POINTS: gl.constexpr, DIM: gl.constexpr):  # fmt: skip
    """FP8, staged in registers: a tile's eight chunks are loaded before the stage is awaited, so the whole
    tile's bytes are in flight at once, then converted and stored; with ``PREFETCH``, the rows of the tile that
    many ahead are asked of L2 once this tile's loads are issued, so that its loads wait on L2, not DRAM."""
    code_l: gl.constexpr = gl.BlockedLayout([1, 1, 16], [8, CHUNK // GROUP, GROUP // 16], [PRODUCER_WARPS, 1, 1],
                                            [2, 1, 0])  # fmt: skip
    n_tiles = (K + BLOCK_N - 1) // BLOCK_N
    for t in gl.static_range(1, PREFETCH):
        _prefetch_tile(kv_ptr, idx_ptr, m, t, N, K, block_bytes, scale_base, RPB, DATA_STRIDE, SCALE_STRIDE, ROW_BYTES,
                       POINTS, True, BLOCK_N, DIM, PRODUCER_WARPS)  # fmt: skip
    lane0 = gl.arange(0, BLOCK_N, gl.SliceLayout(1, gl.SliceLayout(2, code_l)))
    for t in range(n_tiles):
        lane = t * BLOCK_N + lane0
        idx = gl.load(idx_ptr + m * K + lane, mask=lane < K, other=-1)
        valid = (idx >= 0) & (idx < N)
        row = gl.where(valid, idx, 0).to(gl.int64)
        data_b = _cache_offset(row, block_bytes, RPB, DATA_STRIDE)
        scale_b = _cache_offset(row, block_bytes, RPB, SCALE_STRIDE) + scale_base
        x0, s0 = _load_chunk(kv_ptr, data_b, scale_b, valid, 0, CHUNK, GROUP, QDIMS, PRODUCER_WARPS)
        x1, s1 = _load_chunk(kv_ptr, data_b, scale_b, valid, 1, CHUNK, GROUP, QDIMS, PRODUCER_WARPS)
        x2, s2 = _load_chunk(kv_ptr, data_b, scale_b, valid, 2, CHUNK, GROUP, QDIMS, PRODUCER_WARPS)
        x3, s3 = _load_chunk(kv_ptr, data_b, scale_b, valid, 3, CHUNK, GROUP, QDIMS, PRODUCER_WARPS)
        x4, s4 = _load_chunk(kv_ptr, data_b, scale_b, valid, 4, CHUNK, GROUP, QDIMS, PRODUCER_WARPS)
        x5, s5 = _load_chunk(kv_ptr, data_b, scale_b, valid, 5, CHUNK, GROUP, QDIMS, PRODUCER_WARPS)
        x6, s6 = _load_chunk(kv_ptr, data_b, scale_b, valid, 6, CHUNK, GROUP, QDIMS, PRODUCER_WARPS)
        x7, s7 = _load_chunk(kv_ptr, data_b, scale_b, valid, 7, CHUNK, GROUP, QDIMS, PRODUCER_WARPS)
        if PREFETCH > 0:  # lanes past K ask for nothing
            _prefetch_tile(kv_ptr, idx_ptr, m, t + PREFETCH, N, K, block_bytes, scale_base, RPB, DATA_STRIDE,
                           SCALE_STRIDE, ROW_BYTES, POINTS, True, BLOCK_N, DIM, PRODUCER_WARPS)  # fmt: skip
        stage = (g0 + t) % STAGES
        tile = k_smem.index(stage)
        mbarrier.wait(empty.index(stage), (((g0 + t) // STAGES) & 1) ^ 1)  # the first round passes at once
        _store_chunk(tile, x0, s0, 0, BLOCK_N, CHUNK, QDIMS)
        _store_chunk(tile, x1, s1, 1, BLOCK_N, CHUNK, QDIMS)
        _store_chunk(tile, x2, s2, 2, BLOCK_N, CHUNK, QDIMS)
        _store_chunk(tile, x3, s3, 3, BLOCK_N, CHUNK, QDIMS)
        _store_chunk(tile, x4, s4, 4, BLOCK_N, CHUNK, QDIMS)
        _store_chunk(tile, x5, s5, 5, BLOCK_N, CHUNK, QDIMS)
        _store_chunk(tile, x6, s6, 6, BLOCK_N, CHUNK, QDIMS)
        _store_chunk(tile, x7, s7, 7, BLOCK_N, CHUNK, QDIMS)
        fence_async_shared()
        BARRIER()
        mbarrier.arrive(ready.index(stage), count=1)


@gluon.jit
def _produce_chunked(k_smem, codes, scales, ready, empty, kv_ptr, idx_ptr, m, N, K, block_bytes, scale_base,
                     RPB: gl.constexpr, DATA_STRIDE: gl.constexpr, SCALE_STRIDE: gl.constexpr, GROUP: gl.constexpr,
                     QDIMS: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CODE_CHUNKS: gl.constexpr,
                     CHUNK: gl.constexpr, DIM: gl.constexpr, PRODUCER_WARPS: gl.constexpr, PREFETCH: gl.constexpr,
                     ROW_BYTES: gl.constexpr, POINTS: gl.constexpr):  # fmt: skip
    """FP8, codes copied a chunk at a time: a ring of ``CODE_CHUNKS`` slots of one ``CHUNK``-column chunk of a
    tile's codes, the copies ``AHEAD = CODE_CHUNKS - 2`` chunks ahead of the conversion and across tiles, so
    that the next tile's codes are in flight while this one converts and waits for its stage, in no register.

    Step g of the ``STEPS`` a tile has (one a chunk of codes) issues chunk g + AHEAD, waits for chunk g's copies,
    meets the other producer threads at a barrier and converts chunk g. Chunk g lands in slot
    ``g % CODE_CHUNKS``: the slot step g fills was last read at step g - 2, before step g - 1's barrier. A
    tile's scales land in scale slot ``tile % 2``, copied with its first chunk, whose slot the tile two before
    last read behind at least one barrier (``AHEAD < STEPS``). V4's bf16 values past ``QDIMS`` are copied
    straight into the stage in step 1's copies, once step 0 has seen the stage free; they have landed by the
    tile's last step when ``AHEAD <= STEPS - 2``."""
    STEPS: gl.constexpr = QDIMS // CHUNK
    AHEAD: gl.constexpr = CODE_CHUNKS - 2
    SCALES: gl.constexpr = scale_bytes(QDIMS, GROUP)
    ROPE: gl.constexpr = QDIMS < DIM
    code_l: gl.constexpr = chunk_layout(CHUNK, GROUP, PRODUCER_WARPS)
    scale_l: gl.constexpr = scale_layout(SCALES, PRODUCER_WARPS)
    gl.static_assert(AHEAD >= 1 and AHEAD <= STEPS - 1 - ROPE, "code_chunks out of range (check_tile)")
    n_tiles = (K + BLOCK_N - 1) // BLOCK_N
    for t in gl.static_range(1, PREFETCH):
        _prefetch_tile(kv_ptr, idx_ptr, m, t, N, K, block_bytes, scale_base, RPB, DATA_STRIDE, SCALE_STRIDE, ROW_BYTES,
                       POINTS, True, BLOCK_N, DIM, PRODUCER_WARPS)  # fmt: skip
    idx_c, idx_s = _tile_indices(idx_ptr, m, 0, K, BLOCK_N, code_l, scale_l)
    issue_scales(scales.index(0), kv_ptr, idx_s, N, block_bytes, scale_base, RPB, SCALE_STRIDE, SCALES,
                 PRODUCER_WARPS)  # fmt: skip
    for j in gl.static_range(AHEAD):  # AHEAD < STEPS: tile 0's first chunks
        issue_chunk(codes.index(j), kv_ptr, idx_c, j, N, block_bytes, RPB, DATA_STRIDE, CHUNK, GROUP, PRODUCER_WARPS)
        async_copy.commit_group()
    next_c, next_s = _tile_indices(idx_ptr, m, 1, K, BLOCK_N, code_l, scale_l)
    rope_row, rope_ok = tile_rows(idx_ptr, m, 0, N, K, BLOCK_N, CHUNK, PRODUCER_WARPS)
    for t in range(n_tiles):
        if PREFETCH > 0:  # lanes past K ask for nothing
            _prefetch_tile(kv_ptr, idx_ptr, m, t + PREFETCH, N, K, block_bytes, scale_base, RPB, DATA_STRIDE,
                           SCALE_STRIDE, ROW_BYTES, POINTS, True, BLOCK_N, DIM, PRODUCER_WARPS)  # fmt: skip
        stage = t % STAGES
        tile = k_smem.index(stage)
        for c in gl.static_range(STEPS):
            g = t * STEPS + c
            if c + AHEAD == STEPS:  # the next tile's first chunk: its lanes, its scales, the lanes after it
                idx_c = next_c
                issue_scales(scales.index((t + 1) % 2), kv_ptr, next_s, N, block_bytes, scale_base, RPB,
                             SCALE_STRIDE, SCALES, PRODUCER_WARPS)  # fmt: skip
                next_c, next_s = _tile_indices(idx_ptr, m, t + 2, K, BLOCK_N, code_l, scale_l)
            issue_chunk(codes.index((g + AHEAD) % CODE_CHUNKS), kv_ptr, idx_c, (c + AHEAD) % STEPS, N, block_bytes,
                        RPB, DATA_STRIDE, CHUNK, GROUP, PRODUCER_WARPS)  # fmt: skip
            if ROPE and c == 1:  # the stage is free (step 0 waited for it)
                issue_rope(tile, kv_ptr, rope_row, rope_ok, block_bytes, RPB, DATA_STRIDE, QDIMS, CHUNK,
                           PRODUCER_WARPS)  # fmt: skip
                rope_row, rope_ok = tile_rows(idx_ptr, m, t + 1, N, K, BLOCK_N, CHUNK, PRODUCER_WARPS)
            async_copy.commit_group()
            async_copy.wait_group(AHEAD)  # this thread's copies of chunk g have landed
            BARRIER()  # and every producer thread's
            if c == 0:
                mbarrier.wait(empty.index(stage), ((t // STAGES) & 1) ^ 1)  # the first round passes at once
            convert_chunk(tile, codes.index(g % CODE_CHUNKS), scales.index(t % 2).slice(c * (CHUNK // GROUP),
                          CHUNK // GROUP, dim=1), c, BLOCK_N, CHUNK, GROUP, PRODUCER_WARPS, False)  # fmt: skip
        fence_async_shared()
        BARRIER()
        mbarrier.arrive(ready.index(stage), count=1)
    async_copy.wait_group(0)  # the copies past the last tile (masked: zero fills) land before the program ends


@gluon.jit
def persistent_items(M, H, K, BLOCK_H: gl.constexpr, BLOCK_N: gl.constexpr):
    """A persistent program's items ``range(first, end, step)`` (item w: row ``w // n_blocks``, head block
    ``w % n_blocks``), and the tiles an item has."""
    n_blocks = (H + BLOCK_H - 1) // BLOCK_H
    return gl.program_id(0), M * n_blocks, gl.num_programs(0), n_blocks, (K + BLOCK_N - 1) // BLOCK_N


@gluon.jit
def _producer(q_smem, k_smem, codes, scales, ready, empty, kv_ptr, idx_ptr, sink_ptr, out_ptr, lse_ptr, q_ptr,
              q_ready, q_empty, M, m, h0, H, N, K, scale, block_bytes, scale_base, RPB: gl.constexpr,
              DATA_STRIDE: gl.constexpr, SCALE_STRIDE: gl.constexpr, GROUP: gl.constexpr, QDIMS: gl.constexpr,
              BLOCK_H: gl.constexpr, BLOCK_N: gl.constexpr, DIM: gl.constexpr, STAGES: gl.constexpr,
              CODE_CHUNKS: gl.constexpr, CHUNK: gl.constexpr, HAS_SINK: gl.constexpr,
              EMPTY_NAN: gl.constexpr,
              FP8_KV: gl.constexpr, PRODUCER_WARPS: gl.constexpr, OVERLAP: gl.constexpr, PREFETCH: gl.constexpr,
              ROW_BYTES: gl.constexpr, POINTS: gl.constexpr, PROBE: gl.constexpr,
              PERSISTENT: gl.constexpr):  # fmt: skip
    if PERSISTENT:  # the program's (row, head block) items in turn; the ring's tiles counted across them
        first, end, step, n_blocks, n_tiles = persistent_items(M, H, K, BLOCK_H, BLOCK_N)
        for w in range(first, end, step):
            j = (w - first) // step
            row = (w // n_blocks).to(gl.int64)
            mbarrier.wait(q_empty, (j & 1) ^ 1)  # the consumer's last score MMA of the item before is done
            issue_q(q_smem.index(0), q_ptr, row, (w % n_blocks) * BLOCK_H, H, BLOCK_H, DIM, CHUNK, PRODUCER_WARPS)
            async_copy.mbarrier_arrive(q_ready, increment_count=False)
            _produce_row(k_smem, codes, scales, ready, empty, kv_ptr, idx_ptr, row, j * n_tiles, N, K, block_bytes,
                         scale_base, RPB, DATA_STRIDE, SCALE_STRIDE, GROUP, QDIMS, BLOCK_N, DIM, STAGES,
                         CODE_CHUNKS,
                         CHUNK, FP8_KV, PRODUCER_WARPS, PREFETCH, ROW_BYTES, POINTS, PROBE)  # fmt: skip
    else:
        _produce_row(k_smem, codes, scales, ready, empty, kv_ptr, idx_ptr, m, 0, N, K, block_bytes, scale_base, RPB,
                     DATA_STRIDE, SCALE_STRIDE, GROUP, QDIMS, BLOCK_N, DIM, STAGES, CODE_CHUNKS, CHUNK,
                     FP8_KV,
                     PRODUCER_WARPS, PREFETCH, ROW_BYTES, POINTS, PROBE)  # fmt: skip


@gluon.jit
def _produce_row(k_smem, codes, scales, ready, empty, kv_ptr, idx_ptr, m, g0, N, K, block_bytes, scale_base,
                 RPB: gl.constexpr, DATA_STRIDE: gl.constexpr, SCALE_STRIDE: gl.constexpr, GROUP: gl.constexpr,
                 QDIMS: gl.constexpr, BLOCK_N: gl.constexpr, DIM: gl.constexpr, STAGES: gl.constexpr,
                 CODE_CHUNKS: gl.constexpr, CHUNK: gl.constexpr, FP8_KV: gl.constexpr,
                 PRODUCER_WARPS: gl.constexpr,
                 PREFETCH: gl.constexpr, ROW_BYTES: gl.constexpr, POINTS: gl.constexpr,
                 PROBE: gl.constexpr):  # fmt: skip
    """One query row's tiles into the ring, the ``g0``-th tile of the ring's sequence first."""
    n_tiles = (K + BLOCK_N - 1) // BLOCK_N
    if PROBE == 7:
        for t in range(n_tiles):
            stage = (g0 + t) % STAGES
            mbarrier.wait(empty.index(stage), (((g0 + t) // STAGES) & 1) ^ 1)
            if FP8_KV:
                mbarrier.arrive(ready.index(stage), count=1)
            else:
                mbarrier.arrive(ready.index(stage), count=PRODUCER_WARPS * 32)
    elif FP8_KV and CODE_CHUNKS > 0:
        _produce_chunked(k_smem, codes, scales, ready, empty, kv_ptr, idx_ptr, m, N, K, block_bytes, scale_base, RPB,
                         DATA_STRIDE, SCALE_STRIDE, GROUP, QDIMS, BLOCK_N, STAGES, CODE_CHUNKS, CHUNK, DIM,
                         PRODUCER_WARPS, PREFETCH, ROW_BYTES, POINTS)  # fmt: skip
    elif FP8_KV:
        _produce_staged(k_smem, ready, empty, kv_ptr, idx_ptr, m, g0, N, K, block_bytes, scale_base, RPB, DATA_STRIDE,
                        SCALE_STRIDE, GROUP, QDIMS, BLOCK_N, STAGES, CHUNK, PRODUCER_WARPS, PREFETCH, ROW_BYTES, POINTS,
                        DIM)  # fmt: skip
    else:
        for t in gl.static_range(STAGES, PREFETCH):  # the first STAGES tiles' copies are issued at once
            _prefetch_tile(kv_ptr, idx_ptr, m, t, N, K, block_bytes, scale_base, RPB, DATA_STRIDE, SCALE_STRIDE,
                           ROW_BYTES, POINTS, False, BLOCK_N, DIM, PRODUCER_WARPS)  # fmt: skip
        for t in range(n_tiles):
            stage = (g0 + t) % STAGES
            mbarrier.wait(empty.index(stage), (((g0 + t) // STAGES) & 1) ^ 1)
            issue_rows(k_smem.index(stage), kv_ptr, idx_ptr, m, t, N, K, BLOCK_N, DIM, CHUNK, PRODUCER_WARPS, 0,
                       DIM // CHUNK)  # fmt: skip
            async_copy.mbarrier_arrive(ready.index(stage), increment_count=False)  # when this thread's copies land
            if PREFETCH > 0:  # beyond the STAGES tiles the copies keep in flight (check_tile)
                _prefetch_tile(kv_ptr, idx_ptr, m, t + PREFETCH, N, K, block_bytes, scale_base, RPB, DATA_STRIDE,
                               SCALE_STRIDE, ROW_BYTES, POINTS, False, BLOCK_N, DIM, PRODUCER_WARPS)  # fmt: skip


@gluon.jit
def _consumer(q_smem, k_smem, codes, scales, ready, empty, kv_ptr, idx_ptr, sink_ptr, out_ptr, lse_ptr, q_ptr,
              q_ready, q_empty, M, m, h0, H, N, K, scale, block_bytes, scale_base, RPB: gl.constexpr,
              DATA_STRIDE: gl.constexpr, SCALE_STRIDE: gl.constexpr, GROUP: gl.constexpr, QDIMS: gl.constexpr,
              BLOCK_H: gl.constexpr, BLOCK_N: gl.constexpr, DIM: gl.constexpr, STAGES: gl.constexpr,
              CODE_CHUNKS: gl.constexpr, CHUNK: gl.constexpr, HAS_SINK: gl.constexpr,
              EMPTY_NAN: gl.constexpr,
              FP8_KV: gl.constexpr, PRODUCER_WARPS: gl.constexpr, OVERLAP: gl.constexpr, PREFETCH: gl.constexpr,
              ROW_BYTES: gl.constexpr, POINTS: gl.constexpr, PROBE: gl.constexpr,
              PERSISTENT: gl.constexpr):  # fmt: skip
    if PERSISTENT:  # the items in the producer's order
        first, end, step, n_blocks, n_tiles = persistent_items(M, H, K, BLOCK_H, BLOCK_N)
        for w in range(first, end, step):
            j = (w - first) // step
            _consume_row(q_smem, k_smem, ready, empty, q_ready, q_empty, j, idx_ptr, sink_ptr, out_ptr, lse_ptr,
                         (w // n_blocks).to(gl.int64), (w % n_blocks) * BLOCK_H, j * n_tiles, H, N, K, scale,
                         BLOCK_H, BLOCK_N, DIM, STAGES, HAS_SINK, EMPTY_NAN, OVERLAP, PROBE, PERSISTENT)  # fmt: skip
    else:
        _consume_row(q_smem, k_smem, ready, empty, q_ready, q_empty, 0, idx_ptr, sink_ptr, out_ptr, lse_ptr, m, h0,
                     0, H, N, K, scale, BLOCK_H, BLOCK_N, DIM, STAGES, HAS_SINK, EMPTY_NAN, OVERLAP, PROBE,
                     PERSISTENT)  # fmt: skip


@gluon.jit
def _consume_row(q_smem, k_smem, ready, empty, q_ready, q_empty, j, idx_ptr, sink_ptr, out_ptr, lse_ptr, m, h0, g0,
                 H, N, K, scale, BLOCK_H: gl.constexpr, BLOCK_N: gl.constexpr, DIM: gl.constexpr,
                 STAGES: gl.constexpr, HAS_SINK: gl.constexpr, EMPTY_NAN: gl.constexpr, OVERLAP: gl.constexpr,
                 PROBE: gl.constexpr, PERSISTENT: gl.constexpr):  # fmt: skip
    """Heads ``h0`` on of query row ``m``, from the ring's ``g0``-th tile on; persistent: the program's ``j``-th
    item, whose q the producer copies once the item before has done its last score MMA."""
    s_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 2],
                                                  instr_shape=[16, BLOCK_N // 2, 16])  # fmt: skip
    o_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 2], instr_shape=[16, 256, 16])
    p_l: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_l, k_width=2)
    count_l: gl.constexpr = gl.BlockedLayout([4], [32], [8], [0])
    n_valid = 0
    for start in range(0, K, 1024):
        lane = start + gl.arange(0, 1024, count_l)
        idx = gl.load(idx_ptr + m * K + lane, mask=lane < K, other=-1)
        n_valid += gl.sum(((idx >= 0) & (idx < N)).to(gl.int32), axis=0)
    m_i = gl.full([BLOCK_H], float("-inf"), gl.float32, gl.SliceLayout(1, s_l))
    l_i = gl.full([BLOCK_H], 0.0, gl.float32, gl.SliceLayout(1, s_l))
    acc = gl.full([BLOCK_H, DIM], 0.0, gl.float32, o_l)
    n_tiles = (K + BLOCK_N - 1) // BLOCK_N
    if PERSISTENT:
        mbarrier.wait(q_ready, j & 1)
    if OVERLAP:  # tile t's score MMA in flight with tile t - 1's p @ v, its softmax beside the p @ v
        lane = gl.arange(0, BLOCK_N, gl.SliceLayout(0, s_l))
        idx = gl.load(idx_ptr + m * K + lane, mask=lane < K, other=-1)
        valid = (idx >= 0) & (idx < N)
        mbarrier.wait(ready.index(0), 0)
        fence_async_shared()
        s = warpgroup_mma(q_smem, k_smem.index(0).permute((1, 0)), gl.full([BLOCK_H, BLOCK_N], 0.0, gl.float32, s_l),
                          use_acc=False, is_async=True)  # fmt: skip
        s = warpgroup_mma_wait(num_outstanding=0, deps=(s,))
        s = gl.where(valid[None, :], s * scale, float("-inf"))
        m_i = gl.max(s, axis=1)
        m_use = gl.where(m_i == float("-inf"), 0.0, m_i)
        p = gl.exp(s - m_use[:, None])
        l_i = gl.sum(p, axis=1)
        pb = gl.convert_layout(p.to(gl.bfloat16), p_l)
        for t in range(1, n_tiles):
            stage = t % STAGES
            prev = (t - 1) % STAGES
            lane = t * BLOCK_N + gl.arange(0, BLOCK_N, gl.SliceLayout(0, s_l))
            idx = gl.load(idx_ptr + m * K + lane, mask=lane < K, other=-1)
            valid = (idx >= 0) & (idx < N)
            mbarrier.wait(ready.index(stage), (t // STAGES) & 1)
            fence_async_shared()
            s = warpgroup_mma(
                q_smem,
                k_smem.index(stage).permute((1, 0)),
                gl.full([BLOCK_H, BLOCK_N], 0.0, gl.float32, s_l),
                use_acc=False,
                is_async=True,
            )
            acc = warpgroup_mma(pb, k_smem.index(prev), acc, is_async=True)
            s = warpgroup_mma_wait(num_outstanding=1, deps=(s,))
            s = gl.where(valid[None, :], s * scale, float("-inf"))
            m_new = gl.maximum(m_i, gl.max(s, axis=1))
            m_use = gl.where(m_new == float("-inf"), 0.0, m_new)
            alpha = gl.exp(m_i - m_use)
            p = gl.exp(s - m_use[:, None])
            l_i = l_i * alpha + gl.sum(p, axis=1)
            pb = gl.convert_layout(p.to(gl.bfloat16), p_l)
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
            BARRIER()
            mbarrier.arrive(empty.index(prev), count=1)
            acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_l))[:, None]
            m_i = m_new
        last = (n_tiles - 1) % STAGES
        acc = warpgroup_mma(pb, k_smem.index(last), acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        BARRIER()
        mbarrier.arrive(empty.index(last), count=1)
    for t in range(0 if OVERLAP else n_tiles):
        stage = (g0 + t) % STAGES
        lane = t * BLOCK_N + gl.arange(0, BLOCK_N, gl.SliceLayout(0, s_l))
        idx = gl.load(idx_ptr + m * K + lane, mask=lane < K, other=-1)
        valid = (idx >= 0) & (idx < N)
        mbarrier.wait(ready.index(stage), ((g0 + t) // STAGES) & 1)
        fence_async_shared()  # the tile's cp.async writes, seen through the barrier, before wgmma reads them
        tile = k_smem.index(stage)
        if PROBE == 8:
            m_new = m_i
        elif PROBE == 3:
            pp = gl.full([BLOCK_H, BLOCK_N], 1.0, gl.bfloat16, p_l)
            acc = warpgroup_mma(pp, tile, acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
            m_new = m_i
        else:
            if PROBE == 4:
                s = gl.full([BLOCK_H, BLOCK_N], 0.0, gl.float32, s_l)
            else:
                if PERSISTENT:  # q indexed by t // n_tiles (0, unknown to the compiler), or its 32 descriptors are
                    # hoisted out of the item loop and spilled
                    q_tile = q_smem.index(t // n_tiles)
                else:
                    q_tile = q_smem
                s = warpgroup_mma(q_tile, tile.permute((1, 0)), gl.full([BLOCK_H, BLOCK_N], 0.0, gl.float32, s_l),
                                  use_acc=False, is_async=True)  # fmt: skip
                s = warpgroup_mma_wait(num_outstanding=0, deps=(s,))
            if PERSISTENT:
                if t == n_tiles - 1:  # q's last reader is done: the producer may copy the next item's
                    BARRIER()
                    mbarrier.arrive(q_empty, count=1)
            s = gl.where(valid[None, :], s * scale, float("-inf"))
            if PROBE == 1 or PROBE == 2:
                m_new = gl.maximum(m_i, 0.0)
            else:
                m_new = gl.maximum(m_i, gl.max(s, axis=1))
            m_use = gl.where(m_new == float("-inf"), 0.0, m_new)
            alpha = gl.exp(m_i - m_use)
            p = gl.exp(s - m_use[:, None])
            if PROBE == 2:
                l_i = l_i * alpha + 1.0
            else:
                l_i = l_i * alpha + gl.sum(p, axis=1)
            if PROBE != 6:
                acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_l))[:, None]
            if PROBE != 5:
                acc = warpgroup_mma(gl.convert_layout(p.to(gl.bfloat16), p_l), tile, acc, is_async=True)
                acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        BARRIER()
        mbarrier.arrive(empty.index(stage), count=1)
        m_i = m_new
    if PERSISTENT and (PROBE == 3 or PROBE == 8):  # no score MMA read q
        mbarrier.arrive(q_empty, count=1)
    h = h0 + gl.arange(0, BLOCK_H, gl.SliceLayout(1, s_l))
    h_ok = h < H
    out, lse = normalize(acc, m_i, l_i, n_valid, sink_ptr, h, h_ok, HAS_SINK, EMPTY_NAN, o_l)
    ho = h0 + gl.arange(0, BLOCK_H, gl.SliceLayout(1, o_l))
    d = gl.arange(0, DIM, gl.SliceLayout(0, o_l))
    gl.store(out_ptr + (m * H + ho)[:, None] * DIM + d[None, :], out, mask=(ho < H)[:, None])
    gl.store(lse_ptr + m * H + h, lse, mask=h_ok)


@gluon.jit
def normalize(acc, m_i, l_i, n_valid, sink_ptr, h, h_ok, HAS_SINK: gl.constexpr, EMPTY_NAN: gl.constexpr,
              o_l: gl.constexpr):  # fmt: skip
    """The rows' output (``acc`` over the row sum ``l_i``, the sink in the denominator) and lse, at the running
    maximum ``m_i``; a row with no valid lane (``n_valid`` 0) as ``EMPTY_NAN`` says."""
    m_use = gl.where(m_i == float("-inf"), 0.0, m_i)
    denominator = l_i
    if HAS_SINK:
        denominator = l_i + gl.exp(gl.load(sink_ptr + h, mask=h_ok, other=0.0) - m_use)
    lse = m_i + gl.log(gl.where(l_i == 0.0, 1.0, l_i))
    out = acc / gl.convert_layout(gl.where(denominator == 0.0, 1.0, denominator), gl.SliceLayout(1, o_l))[:, None]
    if EMPTY_NAN:
        empty_out = float("nan")
        empty_lse = float("nan")
    else:
        empty_out = 0.0
        empty_lse = float("inf")
    return gl.where(n_valid == 0, empty_out, out), gl.where(n_valid == 0, empty_lse, lse)


@gluon.jit
def _sparse_attention_ws_kernel(q_ptr, kv_ptr, idx_ptr, sink_ptr, out_ptr, lse_ptr, M, H, N, K, scale, block_bytes,
                                scale_base, RPB: gl.constexpr, DATA_STRIDE: gl.constexpr,
                                SCALE_STRIDE: gl.constexpr, GROUP: gl.constexpr, QDIMS: gl.constexpr,
                                BLOCK_H: gl.constexpr, BLOCK_N: gl.constexpr,
                                DIM: gl.constexpr, STAGES: gl.constexpr,
                                CODE_CHUNKS: gl.constexpr,
                                CHUNK: gl.constexpr, HAS_SINK: gl.constexpr, EMPTY_NAN: gl.constexpr,
                                FP8_KV: gl.constexpr, PRODUCER_WARPS: gl.constexpr,
                                PRODUCER_REGS: gl.constexpr, OVERLAP: gl.constexpr, PREFETCH: gl.constexpr,
              ROW_BYTES: gl.constexpr, POINTS: gl.constexpr, PROBE: gl.constexpr,
              PERSISTENT: gl.constexpr):  # fmt: skip
    h0 = gl.program_id(0) * BLOCK_H  # persistent: unused (the partitions walk the items)
    m = gl.program_id(1).to(gl.int64)
    smem_l: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    plain_3d: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [2, 1, 0])
    plain_2d: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
    if PERSISTENT:
        q_smem = gl.allocate_shared_memory(gl.bfloat16, [1, BLOCK_H, DIM], smem_l)
    else:
        q_smem = gl.allocate_shared_memory(gl.bfloat16, [BLOCK_H, DIM], smem_l)
    k_smem = gl.allocate_shared_memory(gl.bfloat16, [STAGES, BLOCK_N, DIM], smem_l)
    if FP8_KV and CODE_CHUNKS > 0:  # a ring of chunks of codes, two tiles' scales
        codes = gl.allocate_shared_memory(gl.uint8, [CODE_CHUNKS, BLOCK_N, CHUNK // GROUP, GROUP], plain_3d)
        scales = gl.allocate_shared_memory(gl.uint8, [2, BLOCK_N, scale_bytes(QDIMS, GROUP)], plain_2d)
    else:  # BF16 rows are copied into k_smem, staged codes loaded into registers
        codes = gl.allocate_shared_memory(gl.uint8, [1, 1, DIM // 32, 32], plain_3d)
        scales = gl.allocate_shared_memory(gl.uint8, [1, 1, DIM // 32], plain_2d)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        if FP8_KV:  # one arrival after the conversion; BF16: one per producer thread, when its copies land
            mbarrier.init(ready.index(i), count=1)
        else:
            mbarrier.init(ready.index(i), count=PRODUCER_WARPS * 32)
        mbarrier.init(empty.index(i), count=1)
    q_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(q_ready, count=PRODUCER_WARPS * 32)
    mbarrier.init(q_empty, count=1)
    if not PERSISTENT:
        q_l: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [_CONSUMER_WARPS, 1], [1, 0])
        h = h0 + gl.arange(0, BLOCK_H, gl.SliceLayout(1, q_l))
        d = gl.arange(0, DIM, gl.SliceLayout(0, q_l))
        q_smem.store(gl.load(q_ptr + (m * H + h)[:, None] * DIM + d[None, :], mask=(h < H)[:, None], other=0.0))
    fence_async_shared()
    BARRIER()
    # Both partitions take the same arguments (one release passes one tuple to every partition); the tuple is
    # written out in each call, since a tuple held in a variable loses its constexpr elements.
    if WS_API == 0:
        gl.warp_specialize(
            [
                (_consumer, (q_smem, k_smem, codes, scales, ready, empty, kv_ptr, idx_ptr, sink_ptr, out_ptr,
                             lse_ptr, q_ptr, q_ready, q_empty, M, m, h0, H, N, K, scale, block_bytes, scale_base,
                             RPB, DATA_STRIDE, SCALE_STRIDE, GROUP, QDIMS, BLOCK_H, BLOCK_N, DIM, STAGES,
                             CODE_CHUNKS, CHUNK, HAS_SINK, EMPTY_NAN, FP8_KV, PRODUCER_WARPS, OVERLAP,
                             PREFETCH,
                             ROW_BYTES, POINTS, PROBE, PERSISTENT)),
                (_producer, (q_smem, k_smem, codes, scales, ready, empty, kv_ptr, idx_ptr, sink_ptr, out_ptr,
                             lse_ptr, q_ptr, q_ready, q_empty, M, m, h0, H, N, K, scale, block_bytes, scale_base,
                             RPB, DATA_STRIDE, SCALE_STRIDE, GROUP, QDIMS, BLOCK_H, BLOCK_N, DIM, STAGES,
                             CODE_CHUNKS, CHUNK, HAS_SINK, EMPTY_NAN, FP8_KV, PRODUCER_WARPS, OVERLAP,
                             PREFETCH,
                             ROW_BYTES, POINTS, PROBE, PERSISTENT)),
            ],
            [PRODUCER_WARPS],
            [PRODUCER_REGS],
        )  # fmt: skip
    elif WS_API == 1:
        gl.warp_specialize(
            (q_smem, k_smem, codes, scales, ready, empty, kv_ptr, idx_ptr, sink_ptr, out_ptr, lse_ptr, q_ptr, q_ready,
             q_empty, M, m, h0, H, N, K, scale, block_bytes, scale_base, RPB, DATA_STRIDE, SCALE_STRIDE, GROUP,
             QDIMS, BLOCK_H, BLOCK_N, DIM, STAGES, CODE_CHUNKS, CHUNK, HAS_SINK, EMPTY_NAN, FP8_KV,
             PRODUCER_WARPS,
             OVERLAP, PREFETCH, ROW_BYTES, POINTS, PROBE, PERSISTENT),
            _consumer,
            (q_smem, k_smem, codes, scales, ready, empty, kv_ptr, idx_ptr, sink_ptr, out_ptr, lse_ptr, q_ptr, q_ready,
             q_empty, M, m, h0, H, N, K, scale, block_bytes, scale_base, RPB, DATA_STRIDE, SCALE_STRIDE, GROUP,
             QDIMS, BLOCK_H, BLOCK_N, DIM, STAGES, CODE_CHUNKS, CHUNK, HAS_SINK, EMPTY_NAN, FP8_KV,
             PRODUCER_WARPS,
             OVERLAP, PREFETCH, ROW_BYTES, POINTS, PROBE, PERSISTENT),
            [_producer],
            [PRODUCER_WARPS],
            [PRODUCER_REGS],
        )  # fmt: skip
    else:
        gl.warp_specialize(
            (q_smem, k_smem, codes, scales, ready, empty, kv_ptr, idx_ptr, sink_ptr, out_ptr, lse_ptr, q_ptr, q_ready,
             q_empty, M, m, h0, H, N, K, scale, block_bytes, scale_base, RPB, DATA_STRIDE, SCALE_STRIDE, GROUP,
             QDIMS, BLOCK_H, BLOCK_N, DIM, STAGES, CODE_CHUNKS, CHUNK, HAS_SINK, EMPTY_NAN, FP8_KV,
             PRODUCER_WARPS,
             OVERLAP, PREFETCH, ROW_BYTES, POINTS, PROBE, PERSISTENT),
            _consumer,
            [_producer],
            [PRODUCER_WARPS],
            [PRODUCER_REGS],
        )  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Tile:
    """A launch's tile: ``block_n`` lanes a tile, ``stages`` bf16 tiles in the ring the consumer reads, and for an
    FP8 cache the codes either copied a 64-column chunk at a time into a ring of ``code_chunks`` slots,
    ``code_chunks - 2`` chunks ahead of the conversion and across tiles (``_produce_chunked``), or, with
    ``code_chunks`` 0, staged in the producer's registers (``_produce_staged``); ``producer_regs`` a producer
    thread. Shared memory: q (64 KB) + ``stages`` x ``block_n`` x 1 KB (+ ``code_chunks`` x ``block_n`` x 64 B and
    two tiles' scales). ``overlap``: the consumer issues tile t's score MMA before tile t - 1's p @ v and runs tile
    t's softmax while that p @ v is in flight (FlashAttention-3's intra-warpgroup overlap), holding two stages at
    once. ``prefetch``: the rows of the tile that many ahead asked of L2. ``persistent``: one program an SM walks
    (row, head block) items."""

    block_n: int
    stages: int
    producer_regs: int = PRODUCER_REGS
    overlap: bool = False
    prefetch: int = 0
    persistent: bool = False
    code_chunks: int = 0

    def smem_bytes(self, fp8_kv: bool) -> int:
        """The ring's and q's shared memory, in bytes."""
        codes = DIM + DIM // 32  # the kernel's placeholder of one row where no ring of codes is held
        if fp8_kv and self.code_chunks:
            codes = self.code_chunks * self.block_n * CHUNK + 2 * self.block_n * (DIM // 32)
        return BLOCK_H * DIM * 2 + self.stages * self.block_n * DIM * 2 + codes


def label(tile: Tile, fp8_kv: bool) -> str:
    """A tile's name in the benchmark's report."""
    chunks = f",k{tile.code_chunks}" if tile.code_chunks else ""
    codes = f"{chunks},r{tile.producer_regs}" if fp8_kv else ""
    extra = (",o" if tile.overlap else "") + (f",pf{tile.prefetch}" if tile.prefetch else "")
    extra += ",p" if tile.persistent else ""
    return f"triton_ws[n{tile.block_n},s{tile.stages}{codes}{extra}]"


STAGED_TILES = {"v41_fp8_528": Tile(64, 2, 128, prefetch=1), "v4_584": Tile(64, 2, 128)}
"""The fastest tiles with the codes staged in the producer's registers (results/sweeps/run8-11 on the H200; V4.1's
L2 prefetch one tile ahead from run14, docs/targets.md section 2): the FP8 defaults before the chunked copies, and
the base of the persistent form, which the chunked copies do not take."""
DEFAULT_TILES = {
    None: Tile(64, 2),
    "v41_fp8_528": Tile(64, 2, 96, code_chunks=7),
    "v4_584": Tile(64, 2, 96, code_chunks=7),
}
"""The tile for each KV format (None: BF16 rows), the fastest of the sweeps: BF16 rows from results/sweeps/run8-11;
the FP8 caches' codes copied a chunk at a time, 7 slots, 96 producer registers, from run17 on the H200 (V4 decode
at b 128, h 64: 0.228 ms against 0.253-0.271 ms staged in registers, docs/targets.md section 2)."""
SWEEP = {
    False: (
        Tile(32, 4),
        Tile(64, 2, overlap=True),
        Tile(64, 2, prefetch=3),
        Tile(64, 2, prefetch=4),
        Tile(64, 2, persistent=True),
    ),
    True: (
        Tile(64, 2, 152),
        Tile(64, 2, 128),
        Tile(64, 2, 112),
        *(Tile(64, 2, regs, prefetch=n) for regs in (112, 128) for n in (1, 2)),
        *(Tile(64, 2, regs, prefetch=n, persistent=True) for regs, n in ((112, 0), (128, 0), (128, 1))),
        *(Tile(64, 2, 96, prefetch=n, code_chunks=7) for n in (0, 1, 2)),
        *(Tile(64, 2, r, prefetch=1, code_chunks=7) for r in (56, 128)),
        Tile(64, 2, 96, prefetch=1, code_chunks=5),
    ),
}
"""Tiles the benchmark's sweep times besides the defaults."""
SMEM_LIMIT = 232_448 - 4096
"""sm_90's shared memory a block may hold, less 4 KB for the barriers and the compiler's layout-conversion
scratch (3.6 KB at most in the tiles of SWEEP under Triton 3.6)."""
PROBES = {
    1: "no row max across the warp groups (the max taken as 0)",
    2: "no row max and no row sum across the warp groups",
    3: "p @ v only: no score MMA, no softmax (p = 1)",
    4: "no score MMA (scores 0)",
    5: "no p @ v MMA",
    6: "no rescale of the accumulator",
    7: "the producer loads nothing (it only signals each stage)",
    8: "the consumer computes nothing (it only waits and frees each stage)",
}
"""The kernel's timing probes (``sparse_attention_ws(..., probe=k)``, ``python -m fast.cache.ws_probes``): each
leaves one part of the work out, so that the time it saves bounds what that part costs. Their results are wrong;
nothing but the probe tool passes one."""
KV_FORMATS = ("v41_fp8_528", "v4_584")
"""The FP8 caches it reads (V4's with the codes staged in registers or copied a chunk at a time)."""


def sweep_tiles(kv_format: str | None) -> list[Tile]:
    """The tiles of ``SWEEP`` that serve KV in ``kv_format`` (None: BF16 rows)."""
    out = []
    for tile in SWEEP[kv_format is not None]:
        if tile == DEFAULT_TILES[kv_format]:
            continue
        try:
            check_tile(tile, kv_format)
        except ValueError:
            continue
        out.append(tile)
    return out


def available(call: AttentionArgs) -> bool:
    """Whether this kernel can run ``call``: ``supports`` it, on an sm_90 GPU (the default path's kernel on an FP8
    cache)."""
    return call.q.is_cuda and torch.cuda.get_device_capability(call.q.device)[0] == 9 and supports(call)


def supports(call: AttentionArgs) -> bool:
    """Whether ``call`` is a case this kernel serves: bf16 q, D = dv = 512, bf16 probabilities, KV as BF16 rows
    or in a V4.1 or V4 FP8 cache."""
    kv_ok = call.kv_cache is None or call.kv_cache[0].convention in KV_FORMATS
    return (kv_ok and call.q.dtype == torch.bfloat16 and call.q.shape[-1] == DIM and call.dv == DIM
            and call.precision == "bf16")  # fmt: skip


def kv_constants(fmt: CacheFormat | None, rows_per_block: int) -> dict[str, int | bool]:
    """The kernel's KV constexprs: BF16 rows (``fmt`` None) or cache format ``fmt`` (``CacheFormat.offsets``)."""
    if fmt is None:
        return dict(FP8_KV=False, RPB=1, DATA_STRIDE=0, SCALE_STRIDE=0, GROUP=32, QDIMS=DIM, **_lines(2 * DIM))
    data_stride, _, scale_stride = fmt.offsets(rows_per_block)
    qdims = fmt.row.quantized_dims
    return dict(FP8_KV=True, RPB=rows_per_block, DATA_STRIDE=data_stride, SCALE_STRIDE=scale_stride,
                GROUP=fmt.group_size, QDIMS=qdims, **_lines(qdims + 2 * (DIM - qdims)))  # fmt: skip


def kv_launch(call: AttentionArgs) -> tuple[dict[str, int | bool], int, int, int]:
    """The KV arguments of a launch on ``call``: ``kv_constants``, the rows (cache slots), a block's bytes and the
    scales' offset in a block (0 and 0 for BF16 rows)."""
    if call.kv_cache is None:
        return kv_constants(None, 1), call.kv.shape[0], 0, 0
    fmt, rows_per_block = call.kv_cache
    kv = call.kv
    return kv_constants(fmt, rows_per_block), kv.shape[0] * rows_per_block, kv.shape[-1], fmt.offsets(rows_per_block)[1]


def _lines(row_bytes: int) -> dict[str, int]:
    """A row's data bytes and the addresses its L2 prefetch takes (``fast.l2.constants``: one every 128 bytes and
    its last byte, padded to a power of two), under this kernel's names."""
    c = l2.constants(0, row_bytes, 1)
    return dict(ROW_BYTES=c["ROW_BYTES"], POINTS=c["PREFETCH_POINTS"])


def tile_constants(tile: Tile, has_sink: bool, empty_nan: bool, probe: int = 0) -> dict[str, int | bool]:
    """The kernel's tile and partition constexprs."""
    return dict(BLOCK_H=BLOCK_H, BLOCK_N=tile.block_n, DIM=DIM, STAGES=tile.stages,
                CODE_CHUNKS=tile.code_chunks,
                CHUNK=CHUNK, HAS_SINK=has_sink, EMPTY_NAN=empty_nan, PRODUCER_WARPS=PRODUCER_WARPS,
                PRODUCER_REGS=tile.producer_regs, OVERLAP=tile.overlap, PREFETCH=tile.prefetch,
                PERSISTENT=tile.persistent, PROBE=probe)  # fmt: skip


def most_code_chunks(kv_format: str | None) -> int:
    """The most ``Tile.code_chunks`` that KV in ``kv_format`` allows (``_produce_chunked``): ``AHEAD`` below a
    tile's chunks of codes, and for V4's rope values at most that less 2; 0 for BF16 rows."""
    if kv_format is None:
        return 0
    if kv_format not in KV_FORMATS:
        raise ValueError(f"kv_format: must be None or one of {KV_FORMATS}, got {kv_format!r}")
    row = FORMATS[kv_format].row
    steps = row.quantized_dims // CHUNK
    return 2 + steps - 1 - (row.quantized_dims < DIM)


def check_tile(tile: Tile, kv_format: str | None) -> None:
    """ValueError naming ``tile`` and the rule it breaks, for KV in ``kv_format`` (None: BF16 rows)."""
    fp8 = kv_format is not None
    if tile.block_n not in (32, 64) or tile.stages < 1:
        raise ValueError(f"tile: {tile} needs block_n 32 or 64 and stages >= 1")
    if tile.code_chunks and not 3 <= tile.code_chunks <= most_code_chunks(kv_format):
        raise ValueError(f"tile: {tile} needs code_chunks 0 or in [3, {most_code_chunks(kv_format)}] for "
                         f"{kv_format} (the copies run code_chunks - 2 chunks ahead, fewer than a tile's chunks "
                         "of codes, and V4's rope values land by a tile's last step)")  # fmt: skip
    if tile.overlap and tile.stages < 2:
        raise ValueError(f"tile: {tile} overlaps two tiles in the consumer, which needs stages >= 2")
    if tile.persistent and (tile.overlap or tile.code_chunks):
        raise ValueError(f"tile: {tile} is persistent, which the overlapped consumer and codes copied ahead are not")
    if not 0 <= tile.prefetch <= 4 or (not fp8 and 0 < tile.prefetch <= tile.stages):
        raise ValueError(f"tile: {tile} needs prefetch in [0, 4], past the stages' copies for BF16 rows (> stages)")
    if tile.producer_regs % 8 or not 24 <= tile.producer_regs <= 160:
        raise ValueError(f"tile: {tile} needs producer_regs a multiple of 8 in [24, 160]")
    if tile.smem_bytes(fp8) > SMEM_LIMIT:
        raise ValueError(f"tile: {tile} needs {tile.smem_bytes(fp8)} bytes of shared memory, over {SMEM_LIMIT}")


def sparse_attention_ws(
    call: AttentionArgs, tile: Tile | None = None, *, probe: int = 0, programs: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Launch on a checked call that ``supports`` accepts (ValueError otherwise), in ``tile`` (default: the
    ``DEFAULT_TILES`` entry of the call's KV format). ``probe`` (``PROBES``; timing only, wrong results) leaves
    one part of the work out. ``programs``: a persistent tile's grid (default: one program an SM)."""
    if probe not in PROBES and probe != 0:
        raise ValueError(f"probe: must be 0 or one of {sorted(PROBES)}, got {probe!r}")
    check_programs(programs)
    if not supports(call):
        raise ValueError("call: the warp-specialized kernel serves bf16 q at D = dv = 512 with bf16 probabilities, "
                         "KV as BF16 rows or in a V4.1 or V4 FP8 cache")  # fmt: skip
    kv_format = call.kv_cache[0].convention if call.kv_cache else None
    tile = DEFAULT_TILES[kv_format] if tile is None else tile
    check_tile(tile, kv_format)
    q, out, lse, kv = call.q, call.out, call.lse, call.kv
    M, H, _ = q.shape
    K = call.indices.shape[1]
    if K == 0:  # the overlapped consumer's first tile is unconditional, and a persistent item's q copy waits on a
        # score MMA: with no lanes every form gives the same rows
        tile = dataclasses.replace(tile, overlap=False, persistent=False)
    if M == 0 or H == 0:
        return out, lse
    layout, n, block_bytes, scale_base = kv_launch(call)
    grid = (triton.cdiv(H, BLOCK_H), M)
    if tile.persistent:  # one program an SM (the ring's shared memory), each walking items (row, head block)
        grid = (min(grid[0] * M, programs or sm_count(q.device)), 1)
    _sparse_attention_ws_kernel[grid](
        q, kv, call.indices, call.sink if call.sink is not None else out, out, lse, M, H, n, K, float(call.scale),
        block_bytes, scale_base, **layout, **tile_constants(tile, call.sink is not None, call.empty_nan, probe),
        num_warps=CONSUMER_WARPS,
    )  # fmt: skip
    return out, lse


def check_programs(programs: int | None) -> None:
    """ValueError naming ``programs`` unless it is None or a positive int (a persistent grid's size)."""
    if programs is not None and (isinstance(programs, bool) or not isinstance(programs, int) or programs < 1):
        raise ValueError(f"programs: must be a positive int or None, got {programs!r}")


@functools.cache
def sm_count(device: torch.device) -> int:
    """The device's SMs: a persistent grid's default size (one program an SM)."""
    return torch.cuda.get_device_properties(device).multi_processor_count
