# mypy: disable-error-code="no-untyped-def,untyped-decorator"
"""Triton sparse MQA attention with a sink over selected lanes (twin: ``attention_naive.py``).

    sparse_attention(call: fast.cache.checks.AttentionArgs) -> (out: f32[M, H, dv], lse: f32[M, H])

``call.kv`` is ``f32|bf16[N, D]`` (the dtype of ``q``), or, with ``kv_cache`` = (format, rows per block), an FP8
cache ``u8[num_blocks, block_bytes]`` dequantized in the kernel (D = 512): V4 584-byte rows (448 e4m3 NoPE dims
with a UE8M0 scale per 64, then 64 BF16 RoPE dims; sectioned blocks) or V4.1 528-byte rows (512 e4m3 dims with
a UE8M0 scale per 32; interleaved blocks). Every offset comes from ``fast.cache.formats`` (``kv_constants``).
A lane is read only if ``0 <= lane < N``; every other lane (-1, any negative, past the end, anywhere in the row)
contributes nothing.

One program per (query row, block of heads), head blocks fastest so the programs of one query run together. A
program first reads the row's lane indices once, ``COUNT_LANES`` at a time, to count its valid lanes (the empty-row
test); the pass also brings the row into the cache, so the main loop's index loads, on which its gathers wait, hit
it (docs/cache-kernels.md has the H200 figures). It then walks the row's lanes in tiles of ``BLOCK_N``: it gathers
the tile's KV rows once (having first asked L2 for the rows of the tile ``Config.prefetch`` tiles ahead, compiled
only: ``fast.l2``), computes the scores of all its heads with one ``tl.dot`` (heads are the M dimension), and
folds them into a running maximum, sum and f32 accumulator (online softmax; scores and maxima in natural units, as a
torch softmax rounds them). The sink enters once, in the final denominator; lse excludes it. At f32 precision (f32
inputs, or ``pv_f32``) the compiled kernel takes ``exp`` and ``log`` from libdevice (within 1 ulp, as torch's); the
bf16 mode uses the hardware's approximate ``ex2``.
The "f64" mode forms the same products by broadcasting and ``tl.sum`` instead of ``tl.dot`` (the GPU's dot
lowering has no float64 path at these shapes), on tiles small enough for that (``_launch_config``).
A tile with no valid lane leaves the state unchanged (the running maximum stays -inf and is read as 0).
Under the interpreter, whose ``tl.dot`` cannot multiply bf16, the bf16 operands are widened to f32 first (the
products of bf16 values are exact in f32, so only the order of the f32 sums can differ from the GPU), and
probabilities are rounded to bf16 by integer operations, since its bf16 cast truncates.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

from fast import config_checks, fitting, l2
from fast.cache import rounding as rd
from fast.cache.checks import ATTENTION_KV_FORMATS, AttentionArgs
from fast.cache.formats import CacheFormat


@dataclass(frozen=True)
class Config:
    """Launch parameters: heads per program, lanes per tile, warps, software-pipeline stages."""

    block_h: int = 64
    block_n: int = 64
    num_warps: int = 8
    num_stages: int = 2
    native_fp8: bool = True
    """FP8 KV: convert the e4m3 codes with the hardware's conversion and scale each group (64 dims in V4, 32 in
    V4.1) by one multiply (``_fp8_tile``); False decodes every code with integer operations
    (``_fp8_v4_tile_int``, the earlier V4 path, kept for comparison in the benchmark; V4 584-byte caches
    only)."""
    prefetch: int = 0
    """Compiled only: while a tile is computed, ask the L2 cache for the KV rows of the tile this many tiles
    ahead (``prefetch.global.L2``, a hint that changes no result; 0: none). The gathers then wait on L2, not on
    DRAM."""

    def __post_init__(self) -> None:
        config_checks.powers_of_two(self, "block_h", "block_n", "num_warps")
        config_checks.at_least(self, num_stages=1, prefetch=0)


@triton.jit
def _exp(x, LIBDEVICE: tl.constexpr):
    """e^x: libdevice's correctly rounded-to-1-ulp ``exp`` where accuracy is asked for on the GPU, else
    ``tl.exp`` (the fast ``ex2.approx`` when compiled, numpy's ``exp`` under the interpreter)."""
    if LIBDEVICE:
        return libdevice.exp(x)
    else:
        return tl.exp(x)


@triton.jit
def _log(x, LIBDEVICE: tl.constexpr):
    if LIBDEVICE:
        return libdevice.log(x)
    else:
        return tl.log(x)


@triton.jit
def _tile_lanes(idx_ptr, m, K, N, lane0, BLOCK_N: tl.constexpr):
    """Lanes ``lane0 .. lane0 + BLOCK_N - 1`` of query row ``m`` -> (valid: ``0 <= index < N``, row i64: the
    index where valid, else 0)."""
    lane = lane0 + tl.arange(0, BLOCK_N)
    idx = tl.load(idx_ptr + m * K + lane, mask=lane < K, other=-1)
    valid = (idx >= 0) & (idx < N)
    return valid, tl.where(valid, idx, 0).to(tl.int64)


@triton.jit
def _prefetch_rows(kv_ptr, kv_b_ptr, idx_ptr, m, K, N, lane0, rows_per_block: tl.constexpr, block_bytes, scale_base,
                   D: tl.constexpr, BLOCK_N: tl.constexpr, FP8_KV: tl.constexpr, DATA_STRIDE: tl.constexpr,
                   SCALE_STRIDE: tl.constexpr, SEPARATE_SCALES: tl.constexpr, ROW_BYTES: tl.constexpr,
                   ELEMENT_BYTES: tl.constexpr, PREFETCH_POINTS: tl.constexpr):  # fmt: skip
    """L2 prefetch of the KV rows of lanes ``lane0 .. lane0 + BLOCK_N - 1`` (``fast.l2``): the ``ROW_BYTES`` a
    row's data spans, and its scale bytes where they sit in a section of their own (V4)."""
    ok, row = _tile_lanes(idx_ptr, m, K, N, lane0, BLOCK_N)
    if FP8_KV:
        data_b, scale_b = _fp8_row_offsets(row, rows_per_block, block_bytes, scale_base, DATA_STRIDE, SCALE_STRIDE)
        l2.prefetch_row_lines(kv_b_ptr + data_b, ROW_BYTES, ok, 1, PREFETCH_POINTS)
        if SEPARATE_SCALES:
            l2.prefetch_l2(kv_b_ptr + scale_b, ok)
    else:
        l2.prefetch_row_lines(kv_ptr + row * D, ROW_BYTES, ok, ELEMENT_BYTES, PREFETCH_POINTS)


@triton.jit
def _fp8_row_offsets(row, rows_per_block: tl.constexpr, block_bytes, scale_base, DATA_STRIDE: tl.constexpr,
                     SCALE_STRIDE: tl.constexpr):  # fmt: skip
    """Byte offsets of slot ``row``'s data and scale parts (``CacheFormat.offsets``). ``rows_per_block`` is a
    compile-time constant: the division by it is a shift or a multiply, not a 64-bit division routine."""
    block = row // rows_per_block
    r = row - block * rows_per_block
    return block * block_bytes + r * DATA_STRIDE, block * block_bytes + scale_base + r * SCALE_STRIDE


@triton.jit
def _fp8_tile(
    kv_f8_ptr,
    kv_b_ptr,
    kv_h_ptr,
    row,
    valid,
    rows_per_block: tl.constexpr,
    block_bytes,
    scale_base,
    d,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    GROUP: tl.constexpr,
    NG: tl.constexpr,
    TAIL: tl.constexpr,
    DATA_STRIDE: tl.constexpr,
    SCALE_STRIDE: tl.constexpr,
    INTERPRETED: tl.constexpr,
):
    """Rows ``row`` of an FP8 cache as f32 ``[BLOCK_N, BLOCK_D]`` (0 where not ``valid``; BLOCK_D = 512): the
    ``NG * GROUP`` e4m3 codes converted by the hardware, then each row's ``GROUP``-dim groups multiplied by their
    UE8M0 scale (a power of two, so the product is exact, as the integer decode's is), then the ``TAIL`` BF16
    dims (V4's RoPE part) after the codes. V4: 7 groups of 64 and a 64-dim tail; V4.1 528: 16 groups of 32."""
    QDIMS: tl.constexpr = NG * GROUP
    data_b, scale_b = _fp8_row_offsets(row, rows_per_block, block_bytes, scale_base, DATA_STRIDE, SCALE_STRIDE)
    v2 = valid[:, None]
    codes_mask = v2 & (d[None, :] < QDIMS)
    x = tl.load(kv_f8_ptr + data_b[:, None] + d[None, :], mask=codes_mask, other=0.0).to(tl.float32)
    if INTERPRETED:  # the interpreter reads the codes 0x7F / 0xFF as +-480; in e4m3fn they are NaN
        code = tl.load(kv_b_ptr + data_b[:, None] + d[None, :], mask=codes_mask, other=0)
        x = tl.where((code & 0x7F) == 0x7F, float("nan"), x)
    g = tl.arange(0, BLOCK_D // GROUP)  # the tail, if any, is the last group(s): scale 1 (code 127)
    scale_codes = tl.load(kv_b_ptr + scale_b[:, None] + g[None, :], mask=v2 & (g[None, :] < NG), other=127)
    scale = rd.ue8m0_value(scale_codes.to(tl.int32))
    grouped = tl.reshape(x, [BLOCK_N, BLOCK_D // GROUP, GROUP]) * scale[:, :, None]
    x = tl.reshape(grouped, [BLOCK_N, BLOCK_D])
    if TAIL > 0:
        tail_at = (data_b + QDIMS) // 2  # the row's BF16 dims after its e4m3 bytes (rows start at even bytes)
        tail = tl.load(kv_h_ptr + tail_at[:, None] + (d[None, :] - QDIMS), mask=v2 & (d[None, :] >= QDIMS), other=0)
        tail_f = ((tail.to(tl.int32) & 0xFFFF) << 16).to(tl.float32, bitcast=True)
        x = tl.where(d[None, :] >= QDIMS, tail_f, x)
    return x


@triton.jit
def _fp8_v4_tile_int(kv_b_ptr, kv_h_ptr, kv_q_ptr, row, valid, rows_per_block: tl.constexpr, block_bytes,
                     scale_base, d,
                     GROUP: tl.constexpr, NG: tl.constexpr, DATA_STRIDE: tl.constexpr,
                     SCALE_STRIDE: tl.constexpr):  # fmt: skip
    """``_fp8_tile`` of a V4 cache with every code decoded by integer operations (``Config.native_fp8`` False):
    a row's scale part is one 8-byte word (7 UE8M0 bytes and the pad), its byte ``d // GROUP`` taken by shifts."""
    QDIMS: tl.constexpr = NG * GROUP
    data_b, scale_b = _fp8_row_offsets(row, rows_per_block, block_bytes, scale_base, DATA_STRIDE, SCALE_STRIDE)
    v2 = valid[:, None]
    nope = tl.load(kv_b_ptr + data_b[:, None] + d[None, :], mask=v2 & (d[None, :] < QDIMS), other=0)
    scales = tl.load(kv_q_ptr + scale_b // 8, mask=valid, other=0)
    scale_code = ((scales[:, None] >> (8 * (d[None, :] // GROUP))) & 0xFF).to(tl.int32)
    nope_f = rd.e4m3_value(nope.to(tl.int32)) * rd.ue8m0_value(scale_code)
    rope_at = (data_b + QDIMS) // 2  # the row's 64 BF16 RoPE dims after its 448 e4m3 bytes (rows start at even bytes)
    rope = tl.load(kv_h_ptr + rope_at[:, None] + (d[None, :] - QDIMS), mask=v2 & (d[None, :] >= QDIMS), other=0)
    rope_f = ((rope.to(tl.int32) & 0xFFFF) << 16).to(tl.float32, bitcast=True)
    return tl.where(d[None, :] >= QDIMS, rope_f, nope_f)


@triton.jit
def _sparse_attention_kernel(
    q_ptr,
    kv_ptr,
    kv_f8_ptr,
    kv_b_ptr,
    kv_h_ptr,
    kv_q_ptr,
    idx_ptr,
    sink_ptr,
    out_ptr,
    lse_ptr,
    H,
    N,
    K,
    scale_hi,
    scale_lo,
    block_bytes,
    scale_base,
    D: tl.constexpr,
    DV: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_DV: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_N: tl.constexpr,
    FP8_KV: tl.constexpr,
    GROUP: tl.constexpr,
    NG: tl.constexpr,
    TAIL: tl.constexpr,
    DATA_STRIDE: tl.constexpr,
    SCALE_STRIDE: tl.constexpr,
    RPB: tl.constexpr,
    NATIVE_FP8: tl.constexpr,
    SEPARATE_V: tl.constexpr,
    HAS_SINK: tl.constexpr,
    EMPTY_NAN: tl.constexpr,
    MODE: tl.constexpr,
    ACC: tl.constexpr,
    IS_F32: tl.constexpr,
    INTERPRETED: tl.constexpr,
    LIBDEVICE: tl.constexpr,
    COUNT_LANES: tl.constexpr,
    PREFETCH: tl.constexpr,
    ROW_BYTES: tl.constexpr,
    ELEMENT_BYTES: tl.constexpr,
    PREFETCH_POINTS: tl.constexpr,
):
    hb = tl.program_id(0)
    m = tl.program_id(1).to(tl.int64)
    h = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    h_ok = h < H
    d = tl.arange(0, BLOCK_D)
    dv = tl.arange(0, BLOCK_DV)
    q = tl.load(q_ptr + (m * H + h)[:, None] * D + d[None, :], mask=h_ok[:, None] & (d[None, :] < D))
    dtype = q.dtype
    if MODE == 0:
        q = q.to(tl.float64)
        scale = tl.cast(scale_hi, tl.float64) + tl.cast(scale_lo, tl.float64)
    else:
        scale = scale_hi
    n_valid = 0
    for start in range(0, K, COUNT_LANES):
        lane = start + tl.arange(0, COUNT_LANES)
        idx = tl.load(idx_ptr + m * K + lane, mask=lane < K, other=-1)
        n_valid += tl.sum(((idx >= 0) & (idx < N)).to(tl.int32), axis=0)
    m_i = tl.full([BLOCK_H], float("-inf"), ACC)
    l_i = tl.zeros([BLOCK_H], ACC)
    acc = tl.zeros([BLOCK_H, BLOCK_DV], ACC)
    # Loop-invariant code stays in the loop: hoisted, the wgmma shared-memory descriptors of q and of the converted
    # FP8 tile (one a k-step) stay live across it and spill at D = 512 (compile_check: 216-600 B of stack).
    for start in tl.range(0, K, BLOCK_N, disable_licm=True):
        if PREFETCH > 0:
            _prefetch_rows(kv_ptr, kv_b_ptr, idx_ptr, m, K, N, start + PREFETCH * BLOCK_N, RPB, block_bytes,
                           scale_base, D, BLOCK_N, FP8_KV, DATA_STRIDE, SCALE_STRIDE, DATA_STRIDE != SCALE_STRIDE,
                           ROW_BYTES, ELEMENT_BYTES, PREFETCH_POINTS)  # fmt: skip
        valid, row = _tile_lanes(idx_ptr, m, K, N, start, BLOCK_N)
        if FP8_KV:
            if NATIVE_FP8:
                k = _fp8_tile(kv_f8_ptr, kv_b_ptr, kv_h_ptr, row, valid, RPB, block_bytes, scale_base, d,
                              BLOCK_N, BLOCK_D, GROUP, NG, TAIL, DATA_STRIDE, SCALE_STRIDE, INTERPRETED)  # fmt: skip
            else:
                k = _fp8_v4_tile_int(kv_b_ptr, kv_h_ptr, kv_q_ptr, row, valid, RPB, block_bytes,
                                     scale_base, d, GROUP, NG, DATA_STRIDE, SCALE_STRIDE)  # fmt: skip
            k = k.to(dtype)
        else:
            k = tl.load(kv_ptr + row[:, None] * D + d[None, :], mask=valid[:, None] & (d[None, :] < D), other=0)
        if MODE == 0:
            k = k.to(tl.float64)
            s = tl.sum(q[:, None, :] * k[None, :, :], axis=2)
        elif IS_F32:
            s = tl.dot(q, tl.trans(k), input_precision="ieee")
        elif INTERPRETED:
            s = tl.dot(q.to(tl.float32), tl.trans(k.to(tl.float32)))
        else:
            s = tl.dot(q, tl.trans(k))
        s = tl.where(valid[None, :], s * scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = _exp(m_i - m_use, LIBDEVICE)
        p = _exp(s - m_use[:, None], LIBDEVICE)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        if SEPARATE_V:
            v = tl.load(kv_ptr + row[:, None] * D + dv[None, :], mask=valid[:, None] & (dv[None, :] < DV), other=0)
            if MODE == 0:
                v = v.to(tl.float64)
        else:
            v = k
        if MODE == 0:
            pv = tl.sum(p[:, :, None] * v[None, :, :], axis=1)
        elif IS_F32:
            pv = tl.dot(p, v, input_precision="ieee")
        elif INTERPRETED:
            if MODE == 1:
                pv = tl.dot(p, v.to(tl.float32))
            else:
                pv = tl.dot(rd.bf16_round(p), v.to(tl.float32))
        elif MODE == 1:
            # p = hi + mid + lo to f32 precision, each piece bf16: three exact-product tensor-core passes
            hi = p.to(dtype)
            rest = p - hi.to(tl.float32)
            mid = rest.to(dtype)
            lo = (rest - mid.to(tl.float32)).to(dtype)
            pv = tl.dot(hi, v)
            pv = tl.dot(mid, v, pv)
            pv = tl.dot(lo, v, pv)
        else:
            pv = tl.dot(p.to(dtype), v)
        acc = acc * alpha[:, None] + pv
        m_i = m_new
    m_use = tl.where(m_i == float("-inf"), 0.0, m_i)
    denominator = l_i
    if HAS_SINK:
        sink = tl.load(sink_ptr + h, mask=h_ok, other=0.0).to(ACC)
        denominator = l_i + _exp(sink - m_use, LIBDEVICE)
    out = (acc / tl.where(denominator == 0.0, 1.0, denominator)[:, None]).to(tl.float32)
    lse = (m_i + _log(tl.where(l_i == 0.0, 1.0, l_i), LIBDEVICE)).to(tl.float32)
    if EMPTY_NAN:
        empty_out = float("nan")
        empty_lse = float("nan")
    else:
        empty_out = 0.0
        empty_lse = float("inf")
    empty = n_valid == 0
    out = tl.where(empty, empty_out, out)
    lse = tl.where(empty, empty_lse, lse)
    tl.store(out_ptr + (m * H + h)[:, None] * DV + dv[None, :], out, mask=h_ok[:, None] & (dv[None, :] < DV))
    tl.store(lse_ptr + m * H + h, lse, mask=h_ok)


MODES = {"f64": 0, "f32": 1, "bf16": 2}


def default_config(heads: int, dim: int, kv_format: str | None = None, precision: str = "bf16") -> Config:
    """A launch configuration for ``heads`` query heads of width ``dim`` and KV in ``kv_format`` (None: BF16
    rows), from the H200 sweeps at D = 512 (docs/cache-kernels.md): 64 lanes per tile, two stages, except FP8 KV
    at f32 probability precision, 32 lanes (64 need more shared memory than sm_90 has, ``compile_check
    --defaults``), and V4 584-byte KV in the 64-head, 64-lane tile, one stage (the fastest of the sweep's five
    tiles, 0.605 ms at b 128, h 64; two stages need 246,016 bytes of shared memory under Triton 3.6), and V4.1
    528-byte KV at D = 512 in the 64-head tile with bf16 probabilities, 128 lanes, one stage (0.416 ms against
    0.475 for 64 lanes at b 128, h 64, on the tree of f19709f). At D > 256 each tile asks L2 for the next
    tile's rows (``Config.prefetch``; at b 128, h 64: BF16 KV 0.279 against 0.315 ms, V4.1 0.360 against 0.369,
    V4 0.516 against 0.541; two tiles ahead was slower in each: results/sweeps/run6_155c32a)."""
    if precision not in MODES:
        raise ValueError(f"precision: must be one of {', '.join(MODES)}, got {precision!r}")
    if kv_format is not None and kv_format not in ATTENTION_KV_FORMATS:
        raise ValueError(f"kv_format: must be None or one of {', '.join(ATTENTION_KV_FORMATS)}, got {kv_format!r}")
    fp8 = kv_format is not None
    block_h = max(16, min(64, triton.next_power_of_2(heads)))
    block_n = 32 if fp8 and precision == "f32" and dim > 256 else 64
    stages = 1 if kv_format == "v4_584" and (block_h, block_n) == (64, 64) and dim > 256 else 2
    if kv_format == "v41_fp8_528" and precision != "f32" and (block_h, dim) == (64, 512):
        block_n, stages = 128, 1
    return Config(block_h=block_h, block_n=block_n, num_warps=8 if dim >= 256 else 4, num_stages=stages,
                  prefetch=1 if dim > 256 else 0)  # fmt: skip


COUNT_LANES = 1024
"""Lanes per step of the first pass over a row's indices (the valid-lane count)."""

F64_TILE_ELEMENTS = 4096


def _launch_config(cfg: Config, mode: int, dim: int, dv: int) -> Config:
    """``cfg`` as launched. The dots need 16 heads and 16 lanes at least (smaller blocks are padded, the extra
    rows masked). The f64 mode multiplies by broadcasting instead (the tensor cores have no f64 path for these
    shapes), so its ``[heads, lanes, dims]`` product is held to ``F64_TILE_ELEMENTS``: lanes first, then heads
    are cut down from ``cfg``'s."""
    if mode != MODES["f64"]:
        return dataclasses.replace(cfg, block_h=max(16, cfg.block_h), block_n=max(16, cfg.block_n))
    budget = max(1, F64_TILE_ELEMENTS // max(16, triton.next_power_of_2(max(dim, dv))))
    block_n = min(cfg.block_n, budget)
    block_h = min(cfg.block_h, max(1, budget // block_n))
    return dataclasses.replace(cfg, block_h=block_h, block_n=block_n)


def _fallbacks(cfg: Config) -> list[Config]:
    """``cfg``, one stage, then half the lanes a tile (to 16), then half the heads (to 16): what
    ``fitting.first_fitting`` tries when a tile overflows the shared memory (FP8 KV at D = 512 under some Triton
    versions)."""

    def narrower(c: Config) -> Config | None:
        if c.block_n > 16:
            return dataclasses.replace(c, block_n=c.block_n // 2)
        return dataclasses.replace(c, block_h=c.block_h // 2) if c.block_h > 16 else None

    return fitting.smaller(cfg, narrower)


def _nonempty(x: torch.Tensor) -> torch.Tensor:
    """``x`` itself, or a 16-byte stand-in when it is empty (no element of it is ever read then)."""
    return x if x.numel() else torch.zeros(16 // x.element_size(), dtype=x.dtype, device=x.device)


def kv_constants(fmt: CacheFormat | None, rows_per_block: int = 1) -> dict[str, int]:
    """The kernel's layout constexprs for KV in cache format ``fmt`` (None: a dense f32|bf16 ``kv``; else one of
    ``ATTENTION_KV_FORMATS``, which ``fast.cache.sparse_attention`` checks): its group size, quantized groups and
    BF16 tail dims, the data and scale strides of ``fmt.offsets`` and the rows a block (the scale part's base
    depends on ``rows_per_block`` and is an argument)."""
    if fmt is None:
        return dict(FP8_KV=False, GROUP=1, NG=0, TAIL=0, DATA_STRIDE=0, SCALE_STRIDE=0, RPB=1)
    data_stride, _, scale_stride = fmt.offsets(rows_per_block)
    return dict(FP8_KV=True, GROUP=fmt.group_size, NG=fmt.groups, TAIL=fmt.tail_dims, DATA_STRIDE=data_stride,
                SCALE_STRIDE=scale_stride, RPB=rows_per_block)  # fmt: skip


def prefetch_constants(layout: dict[str, int], dim: int, element_bytes: int, prefetch: int) -> dict[str, int]:
    """The kernel's prefetch constexprs: tiles ahead (``Config.prefetch``), the bytes a KV row's data spans
    (``kv_constants``'s data stride, which holds V4.1's interleaved scales; ``dim`` elements for dense KV), its
    element size and the addresses a row takes (``fast.l2.constants``)."""
    return l2.constants(prefetch, layout["DATA_STRIDE"] if layout["FP8_KV"] else dim * element_bytes, element_bytes)


def sparse_attention(call: AttentionArgs) -> tuple[torch.Tensor, torch.Tensor]:
    """Launch on a checked call. ``call.kv_cache``: ``(format, rows_per_block)`` for an FP8 cache.

    ``call.precision``: "f64" computes scores, exponentials and sums in float64 from the inputs' values and
    rounds once to f32; "f32" keeps f32 accumulators and, for bf16 inputs, the probabilities at f32 precision in
    ``p @ v`` (three bf16 pieces, three tensor-core products); "bf16" rounds the probabilities to bf16 once,
    as FlashMLA does (f32 inputs: same as "f32").
    """
    q, kv_cache, out, lse = call.q, call.kv_cache, call.out, call.lse
    M, H, D = q.shape
    K = call.indices.shape[1]
    if kv_cache is not None and call.config is not None and not call.config.native_fp8:
        if kv_cache[0].convention != "v4_584":
            raise ValueError(f"config: native_fp8=False (the integer decode) reads v4_584 caches only, got "
                             f"{kv_cache[0].convention}")  # fmt: skip
    if M == 0 or H == 0:
        return out, lse
    mode = MODES[call.precision]
    kv_format = kv_cache[0].convention if kv_cache is not None else None
    chosen = _launch_config(call.config or default_config(H, D, kv_format, call.precision), mode, D, call.dv)
    kv = _nonempty(call.kv)
    if kv_cache is not None:
        fmt, rows_per_block = kv_cache
        layout = kv_constants(fmt, rows_per_block)
        scale_base = fmt.offsets(rows_per_block)[1]
        N = call.kv.shape[0] * rows_per_block
        views = (kv, kv.view(torch.float8_e4m3fn), kv, kv.view(torch.int16), kv.view(torch.int64))
        block_bytes = kv.shape[-1]
    else:
        layout = kv_constants(None)
        rows_per_block, scale_base, block_bytes = 1, 0, 0
        N = call.kv.shape[0]
        views = (kv, kv, kv, kv, kv)
    interpreted = os.environ.get("TRITON_INTERPRET") == "1"
    block_d = max(16, triton.next_power_of_2(D))
    block_dv = max(16, triton.next_power_of_2(call.dv))
    scale_hi = float(torch.tensor(call.scale, dtype=torch.float32))

    def launch(cfg: Config) -> None:
        grid = (triton.cdiv(H, cfg.block_h), M)
        _sparse_attention_kernel[grid](
            q,
            *views,
            _nonempty(call.indices),
            call.sink if call.sink is not None else out,
            out,
            lse,
            H,
            N,
            K,
            scale_hi,
            call.scale - scale_hi,
            block_bytes,
            scale_base,
            D=D,
            DV=call.dv,
            BLOCK_D=block_d,
            BLOCK_DV=block_dv,
            BLOCK_H=cfg.block_h,
            BLOCK_N=cfg.block_n,
            **layout,
            NATIVE_FP8=cfg.native_fp8,
            SEPARATE_V=block_dv < block_d,
            HAS_SINK=call.sink is not None,
            EMPTY_NAN=call.empty_nan,
            MODE=mode,
            ACC=tl.float64 if mode == 0 else tl.float32,
            IS_F32=q.dtype == torch.float32,
            INTERPRETED=interpreted,
            LIBDEVICE=not interpreted and (mode < 2 or q.dtype == torch.float32),
            COUNT_LANES=min(COUNT_LANES, max(16, triton.next_power_of_2(K))),
            **prefetch_constants(layout, D, kv.element_size(), 0 if interpreted else cfg.prefetch),
            num_warps=cfg.num_warps,
            num_stages=cfg.num_stages,
        )

    key = ("sparse_attention", q.device, chosen, D, call.dv, K, tuple(layout.items()), mode, q.dtype)
    fitting.first_fitting([chosen] if call.config else _fallbacks(chosen), launch, key)
    return out, lse
