# mypy: disable-error-code="no-untyped-def,untyped-decorator"
"""Triton quantize-and-store and gather-and-dequantize for the paged caches (twin: ``quantize_naive.py``).

    store_rows(StoreArgs(rows: f32[R, d], slots: i64[R], cache: u8[num_blocks, block_bytes], fmt, rows_per_block))
        in place: row i goes to slot slots[i] (row slot % rows_per_block of block slot // rows_per_block);
        a slot outside [0, num_blocks * rows_per_block), -1 included, is skipped.
    gather_rows(GatherArgs(cache, slots: i64[R], fmt, rows_per_block, out: f32[R, d], fill)) -> out
        row i is the dequantized slot slots[i]; ``fill`` where the slot is outside the cache.

A tile is ``ROWS`` rows seen as ``[ROWS * groups, words per group, codes per word]`` (4 e4m3 or 8 e2m1 codes per
32-bit word; rows are contiguous, so the group axis simply runs on into the next row). Group maxima are
reductions over the last two axes and the packed words a sum over the last axis (disjoint bit fields); the data
part is stored as 32-bit words, scales as bytes. A store program walks tiles ``pid, pid + grid, ...`` and loads
the next tile (rows and slots) before rounding and storing the current one; a gather program takes one row
compiled, 64 interpreted. Every rounding works on the fp32 bits with integer operations, exact fp32
multiplications and correctly rounded fp32 additions (``rounding.py``), so the interpreter gives the GPU's bytes
(a variant on Triton's own fp32 -> e4m3 conversion stored wrong bytes compiled: results/gpu_tests.md). A group
holding NaN or +-inf stores the NaN scale code (UE8M0 0xFF, e4m3 0x7F, fp32 0x7FC00000) and element codes 0x7F
(e4m3) or 0 (e2m1): the whole group reads back as NaN. The BF16 tail rounds to nearest even, overflows to
infinity and stores NaN as 0x7FC0.
"""

from __future__ import annotations

import functools
import os

import torch
import triton
import triton.language as tl

from fast.cache import formats
from fast.cache import rounding as rd
from fast.cache.checks import GatherArgs, StoreArgs
from fast.cache.formats import CacheFormat

# the scale rules as compile-time constants for the kernels
SCALE_FP8_UE8M0 = tl.constexpr(formats.SCALE_FP8_UE8M0)
SCALE_FP4_UE8M0 = tl.constexpr(formats.SCALE_FP4_UE8M0)
SCALE_FP4_E4M3 = tl.constexpr(formats.SCALE_FP4_E4M3)
SCALE_FP8_FP32 = tl.constexpr(formats.SCALE_FP8_FP32)


@triton.jit
def _slot_offsets(slot, n_slots, rows_per_block, block_bytes, data_stride, scale_base, scale_stride):
    """For each slot: (stored, data byte offset, scale byte offset), offsets in int64."""
    slot = slot.to(tl.int64)
    ok = (slot >= 0) & (slot < n_slots)
    slot = tl.where(ok, slot, 0)
    block = slot // rows_per_block
    r = slot - block * rows_per_block
    base = block * block_bytes
    return ok, base + r * data_stride, base + scale_base + r * scale_stride


@triton.jit
def _load_tile(rows_ptr, slots_ptr, tile, R, DIMS: tl.constexpr, GROUP: tl.constexpr, TG: tl.constexpr,
               PACK: tl.constexpr, TAIL: tl.constexpr, NG: tl.constexpr, ROWS: tl.constexpr):  # fmt: skip
    """Tile ``tile``'s rows as ``[ROWS * TG, GROUP / PACK, PACK]`` with each entry's slot, and its BF16 tail as
    ``[ROWS, TAIL / 2, 2]`` with each row's slot (zeros and slot -1 past ``R``)."""
    gr = tl.arange(0, ROWS * TG)
    row = (gr // TG).to(tl.int64) + tile * ROWS
    w = tl.arange(0, GROUP // PACK)[None, :, None]
    k = tl.arange(0, PACK)[None, None, :]
    element = (row * DIMS + (gr % TG) * GROUP)[:, None, None] + w * PACK + k
    # the BF16 tail's lanes (groups NG..TG-1) are loaded apart, as the tail tile
    x = tl.load(rows_ptr + element, mask=((row < R) & (gr % TG < NG))[:, None, None], other=0.0)
    slot = tl.load(slots_ptr + row, mask=row < R, other=-1)
    if TAIL > 0:
        trow = tl.arange(0, ROWS).to(tl.int64) + tile * ROWS
        t = tl.arange(0, TAIL // 2)[None, :, None]
        half = tl.arange(0, 2)[None, None, :]
        tail_at = (trow * DIMS + NG * GROUP)[:, None, None] + 2 * t + half
        tail_x = tl.load(rows_ptr + tail_at, mask=(trow < R)[:, None, None], other=0.0)
        tail_slot = tl.load(slots_ptr + trow, mask=trow < R, other=-1)
    else:
        tail_x = x
        tail_slot = slot
    return x, slot, tail_x, tail_slot


@triton.jit
def _store_tile(
    x,
    slot,
    tail_x,
    tail_slot,
    cache_w_ptr,
    cache_b_ptr,
    n_slots,
    rows_per_block,
    block_bytes,
    data_stride,
    scale_base,
    scale_stride,
    GROUP: tl.constexpr,
    NG: tl.constexpr,
    TG: tl.constexpr,
    PACK: tl.constexpr,
    BITS: tl.constexpr,
    SCALE_RULE: tl.constexpr,
    SCALE_BYTES: tl.constexpr,
    TAIL: tl.constexpr,
    ROWS: tl.constexpr,
):
    """Quantize one loaded tile (``_load_tile``) and store it at its rows' slots."""
    WPG: tl.constexpr = GROUP // PACK
    g = tl.arange(0, ROWS * TG) % TG
    ok, data_b, scale_b = _slot_offsets(
        slot, n_slots, rows_per_block, block_bytes, data_stride, scale_base, scale_stride
    )
    k = tl.arange(0, PACK)[None, None, :]
    mag, neg = rd.magnitude(x)
    amax = tl.max(tl.max(mag, axis=2), axis=1)
    bad = amax >= 0x7F800000
    bad3 = bad[:, None, None]
    if SCALE_RULE == SCALE_FP4_E4M3:
        scale_code = rd.fp4_e4m3_scale_code(amax)
        s = rd.e4m3_value(scale_code)[:, None, None]
        codes = rd.e2m1_by_thresholds(mag.to(tl.float32, bitcast=True), s)
        codes = tl.where(bad3, 0, codes | (neg.to(tl.int32) << 3))
        scale_byte = tl.where(bad, 0x7F, scale_code)
    else:
        if SCALE_RULE == SCALE_FP4_UE8M0:
            e = rd.fp4_ue8m0_exponent(amax)
            codes = rd.round_pow2_scaled(mag, e[:, None, None], 1, 0, rd.E2M1_MAX_CODE)
            codes = tl.where(bad3, 0, codes | (neg.to(tl.int32) << 3))
        else:
            e = rd.fp8_exponent(amax)
            codes = rd.round_pow2_scaled(mag, e[:, None, None], 3, -6, rd.E4M3_MAX_CODE)
            codes = tl.where(bad3, 0x7F, codes | (neg.to(tl.int32) << 7))
        scale_byte = tl.where(bad, 0xFF, e + 127)
    words = tl.sum(codes << (BITS * k), axis=2)
    word_at = (data_b // 4 + g * WPG)[:, None] + tl.arange(0, WPG)[None, :]
    tl.store(cache_w_ptr + word_at, words, mask=(ok & (g < NG))[:, None])
    if SCALE_RULE == SCALE_FP8_FP32:
        scale_bits = tl.where(bad, 0x7FC00000, (e + 127) << 23)
        tl.store(cache_w_ptr + scale_b // 4 + g, scale_bits, mask=ok & (g < NG))
    else:
        scale_byte = tl.where(g < NG, scale_byte, 0)
        tl.store(cache_b_ptr + scale_b + g, scale_byte.to(tl.uint8), mask=ok & (g < SCALE_BYTES))
    if TAIL > 0:
        # the BF16 tail, two values per word
        tok, tdata_b, _ = _slot_offsets(
            tail_slot, n_slots, rows_per_block, block_bytes, data_stride, scale_base, scale_stride
        )
        half = tl.arange(0, 2)[None, None, :]
        tail_words = tl.sum(rd.bf16_bits(tail_x) << (16 * half), axis=2)
        tw = tl.arange(0, TAIL // 2)[None, :]
        tl.store(cache_w_ptr + (tdata_b // 4 + (NG * GROUP) // 4)[:, None] + tw, tail_words, mask=tok[:, None])


@triton.jit
def _store_kernel(
    rows_ptr,
    slots_ptr,
    cache_w_ptr,
    cache_b_ptr,
    R,
    n_slots,
    rows_per_block,
    block_bytes,
    data_stride,
    scale_base,
    scale_stride,
    DIMS: tl.constexpr,
    GROUP: tl.constexpr,
    NG: tl.constexpr,
    TG: tl.constexpr,
    PACK: tl.constexpr,
    BITS: tl.constexpr,
    SCALE_RULE: tl.constexpr,
    SCALE_BYTES: tl.constexpr,
    TAIL: tl.constexpr,
    ROWS: tl.constexpr,
):
    # tiles pid, pid + grid, ...: the next tile's loads are issued before this tile's rounding and stores
    step = tl.num_programs(0)
    n_tiles = tl.cdiv(R, ROWS)
    x, slot, tail_x, tail_slot = _load_tile(
        rows_ptr, slots_ptr, tl.program_id(0), R, DIMS, GROUP, TG, PACK, TAIL, NG, ROWS
    )
    for tile in tl.range(tl.program_id(0), n_tiles, step, num_stages=1):
        next_x, next_slot, next_tail_x, next_tail_slot = _load_tile(
            rows_ptr, slots_ptr, tile + step, R, DIMS, GROUP, TG, PACK, TAIL, NG, ROWS
        )
        _store_tile(x, slot, tail_x, tail_slot, cache_w_ptr, cache_b_ptr, n_slots, rows_per_block, block_bytes,
                    data_stride, scale_base, scale_stride, GROUP, NG, TG, PACK, BITS, SCALE_RULE, SCALE_BYTES, TAIL,
                    ROWS)  # fmt: skip
        x, slot, tail_x, tail_slot = next_x, next_slot, next_tail_x, next_tail_slot


@triton.jit
def _gather_kernel(
    cache_w_ptr,
    cache_b_ptr,
    cache_h_ptr,
    slots_ptr,
    out_ptr,
    fill,
    R,
    n_slots,
    rows_per_block,
    block_bytes,
    data_stride,
    scale_base,
    scale_stride,
    DIMS: tl.constexpr,
    GROUP: tl.constexpr,
    NG: tl.constexpr,
    TG: tl.constexpr,
    PACK: tl.constexpr,
    BITS: tl.constexpr,
    SCALE_RULE: tl.constexpr,
    TAIL: tl.constexpr,
    ROWS: tl.constexpr,
):
    WPG: tl.constexpr = GROUP // PACK
    gr = tl.arange(0, ROWS * TG)
    row = tl.program_id(0).to(tl.int64) * ROWS + gr // TG
    row_ok = row < R
    g = gr % TG
    slot = tl.load(slots_ptr + row, mask=row_ok, other=-1)
    ok, data_b, scale_b = _slot_offsets(
        slot, n_slots, rows_per_block, block_bytes, data_stride, scale_base, scale_stride
    )
    w2 = tl.arange(0, WPG)[None, :]
    word_at = (data_b // 4 + g * WPG)[:, None] + w2
    words = tl.load(cache_w_ptr + word_at, mask=(ok & (g < NG))[:, None], other=0)
    k = tl.arange(0, PACK)[None, None, :]
    codes = (words[:, :, None] >> (BITS * k)) & ((1 << BITS) - 1)
    if SCALE_RULE == SCALE_FP8_FP32:
        scale = tl.load(cache_w_ptr + scale_b // 4 + g, mask=ok & (g < NG), other=0).to(tl.float32, bitcast=True)
    else:
        scale_code = tl.load(cache_b_ptr + scale_b + g, mask=ok & (g < NG), other=0).to(tl.int32)
        if SCALE_RULE == SCALE_FP4_E4M3:
            scale = rd.e4m3_value(scale_code)
        else:
            scale = rd.ue8m0_value(scale_code)
    if SCALE_RULE == SCALE_FP4_E4M3 or SCALE_RULE == SCALE_FP4_UE8M0:
        values = rd.e2m1_value(codes)
    else:
        values = rd.e4m3_value(codes)
    values = values * scale[:, None, None]
    w = tl.arange(0, WPG)[None, :, None]
    within = (g * GROUP)[:, None, None] + w * PACK + k
    if TAIL > 0:
        tail_at = ((data_b + NG * GROUP) // 2)[:, None, None] + (within - NG * GROUP)
        tail_mask = (ok & (g >= NG))[:, None, None]
        tail = tl.load(cache_h_ptr + tail_at, mask=tail_mask, other=0).to(tl.int32)
        values = tl.where((g >= NG)[:, None, None], ((tail & 0xFFFF) << 16).to(tl.float32, bitcast=True), values)
    values = tl.where(ok[:, None, None], values, fill)
    tl.store(out_ptr + (row * DIMS)[:, None, None] + within, values, mask=row_ok[:, None, None])


def store_launch(fmt: CacheFormat) -> tuple[int, int, int]:
    """(rows per tile, warps, programs per SM) of the store. Compiled: tiles of 512 e4m3 elements on one warp,
    16 programs per SM; e2m1 formats (the heavier rounding) tiles of 1024 on two warps, 8 per SM: the fastest
    of the H200 sweep at 8192 x 512 (docs/cache-kernels.md). Each program walks its tiles with the next tile's
    loads in flight. The interpreter: 64-row tiles, one program each (its cost is per operation)."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        return 64, 4, 0
    if fmt.fp4:
        return max(1, 1024 // fmt.dims), 2, 8
    return max(1, 512 // fmt.dims), 1, 16


def _check_launch(launch: object) -> None:
    """``launch`` must be (rows per tile, warps, programs per SM): two powers of two and an int >= 0."""
    if not (isinstance(launch, tuple) and len(launch) == 3 and all(type(v) is int for v in launch)):
        raise TypeError(
            f"launch: must be a tuple of three ints (rows per tile, warps, programs per SM), got {launch!r}"
        )
    per, warps, per_sm = launch
    if per < 1 or per & (per - 1) or warps < 1 or warps & (warps - 1) or per_sm < 0:
        raise ValueError(
            f"launch: rows per tile and warps must be powers of two and programs per SM >= 0, got {launch}"
        )


@functools.cache
def _multiprocessors(device: torch.device) -> int:
    """The device's SM count; 1 off CUDA, so that ``launch`` counts programs there (tests walk tiles in a loop)."""
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 1


def rows_per_program() -> int:
    """One row per program when compiled (the grid hides latency); many under the interpreter, whose cost
    is per operation, not per element."""
    return 64 if os.environ.get("TRITON_INTERPRET") == "1" else 1


def _constants(fmt: CacheFormat) -> dict[str, int]:
    return dict(
        DIMS=fmt.dims,
        GROUP=fmt.group_size,
        NG=fmt.groups,
        TG=fmt.tile_groups,
        PACK=8 if fmt.fp4 else 4,
        BITS=4 if fmt.fp4 else 8,
        SCALE_RULE=fmt.scale_rule,
        TAIL=fmt.tail_dims,
    )


@functools.cache
def _offsets(fmt: CacheFormat, rows_per_block: int) -> tuple[int, int, int]:
    return fmt.offsets(rows_per_block)


def _layout_args(fmt: CacheFormat, cache: torch.Tensor, rows_per_block: int) -> tuple[int, ...]:
    data_stride, scale_base, scale_stride = _offsets(fmt, rows_per_block)
    n_slots = cache.shape[0] * rows_per_block
    return n_slots, rows_per_block, cache.shape[1], data_stride, scale_base, scale_stride


def _page_views(call: StoreArgs | GatherArgs) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The cache as bytes, int32 and int16 words, starting at layer ``call.layer``'s page of block 0: the kernels
    add ``block * cache.shape[1]`` (every layer's page of a block) and the format's offsets inside the page, so
    layer ``l`` is the same launch on a base ``l * page_bytes`` further (every page is a multiple of 4 bytes)."""
    flat = call.cache.view(-1)[call.layer * call.page_bytes :]
    return flat, flat.view(torch.int32), flat.view(torch.int16)


def store_rows(call: StoreArgs, launch: tuple[int, int, int] | None = None) -> None:
    """Quantize ``call.rows`` (f32[R, fmt.dims]) into ``call.cache`` (u8[num_blocks, block_bytes]) at
    ``call.slots`` (i64[R]).

    ``launch``: (rows per tile, warps, programs per SM; 0: one program per tile), for tuning and tests; the
    tile sizes are powers of two. Default ``store_launch(fmt)``.
    """
    if launch is not None:
        _check_launch(launch)
    rows, cache, fmt = call.rows, call.cache, call.fmt
    if rows.shape[0] == 0:
        return
    assert rows.is_contiguous()
    per, warps, per_sm = launch or store_launch(fmt)
    tiles = triton.cdiv(rows.shape[0], per)
    programs = tiles if per_sm == 0 else min(tiles, per_sm * _multiprocessors(rows.device))
    data, words, _ = _page_views(call)
    _store_kernel[(programs,)](
        rows,
        call.slots,
        words,
        data,
        rows.shape[0],
        *_layout_args(fmt, cache, call.rows_per_block),
        **_constants(fmt),
        SCALE_BYTES=fmt.scale_bytes,
        ROWS=per,
        num_warps=warps,
    )


def gather_rows(call: GatherArgs) -> torch.Tensor:
    """Dequantize the rows at ``call.slots`` (i64[R]) into ``call.out`` (f32[R, fmt.dims]); ``call.fill``
    outside the cache."""
    cache, out = call.cache, call.out
    if out.shape[0] == 0:
        return out
    assert out.is_contiguous()
    per = rows_per_program()
    data, words, halves = _page_views(call)
    _gather_kernel[(triton.cdiv(out.shape[0], per),)](
        words,
        data,
        halves,
        call.slots,
        out,
        call.fill,
        out.shape[0],
        *_layout_args(call.fmt, cache, call.rows_per_block),
        **_constants(call.fmt),
        ROWS=per,
        num_warps=4,
    )
    return out
