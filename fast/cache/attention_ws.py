# mypy: disable-error-code="no-untyped-def,untyped-decorator"
"""Warp-specialized sparse MQA attention with a sink, in Triton's Gluon dialect (compiled sm_90 only).

    sparse_attention_ws(call: fast.cache.checks.AttentionArgs) -> (out: f32[M, H, 512], lse: f32[M, H])

The same operation as ``fast.cache.attention`` (its twin and its contract), for the cases whose gathers the
``tl`` kernel cannot overlap with its MMAs: bf16 q, D = dv = 512, bf16 probabilities, KV as BF16 rows or in a
V4.1 528-byte FP8 cache (512 e4m3 dims, a UE8M0 scale per 32); decode and prefill alike (a query row is a
query row). One program per (query row, 64 heads) holds two partitions:

1. a producer of 4 warps walks the row's lanes 64 at a time: it reads the lanes' indices, gathers their rows
   (FP8: codes and scales, converted to bf16 by ``cvt.rn.f16x2.e4m3x2`` and the group's scale, a power of two, so
   every value is exact) and stores the tile into a ring of ``STAGES`` shared-memory tiles, then signals the
   tile's ``ready`` barrier; it waits on the tile's ``empty`` barrier before it overwrites a stage;
2. the consumer, the program's 8 warps (two warp groups), waits on ``ready``, runs the scores' ``wgmma`` (q,
   64 x 512, against the tile), the online softmax, the ``p @ v`` ``wgmma`` with the same tile as v, and signals
   ``empty``.

So the gathers (and conversion) of tile i + 1 run while the consumer computes tile i: the work the ``tl`` kernel
puts on one critical path (docs/targets.md, sections 2 and 3). Invalid lanes are read as zeros and scored -inf;
the sink enters the final denominator only; an empty row follows ``call.empty_nan``.

Gluon kernels do not run in the interpreter: on the CPU, ``python -m fast.cache.compile_check --only "warp
specialized"`` lowers this one for sm_90; its results are checked on a GPU only (``tests/test_attention_ws.py``;
the benchmark's decode and prefill cases time it as ``triton_ws`` and check it against f64).
"""

from __future__ import annotations

import inspect

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from fast.cache.checks import AttentionArgs
from fast.cache.formats import CacheFormat

BLOCK_H = 64
BLOCK_N = 64
DIM = 512
STAGES = 2
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
BARRIER = gl.barrier if hasattr(gl, "barrier") else gl.thread_barrier
"""A barrier of the threads that run it (of a partition, inside one): the name differs between releases."""


@gluon.jit
def _producer(q_smem, k_smem, ready, empty, kv_ptr, idx_ptr, sink_ptr, out_ptr, lse_ptr, m, h0, H, N, K, scale,
              block_bytes, scale_base, RPB: gl.constexpr, DATA_STRIDE: gl.constexpr, SCALE_STRIDE: gl.constexpr,
              GROUP: gl.constexpr, BLOCK_H: gl.constexpr, BLOCK_N: gl.constexpr, DIM: gl.constexpr,
              STAGES: gl.constexpr, CHUNK: gl.constexpr, HAS_SINK: gl.constexpr, EMPTY_NAN: gl.constexpr,
              FP8_KV: gl.constexpr):  # fmt: skip
    # FP8: [lanes, 16-byte pieces of a chunk, 16 bytes]: a thread's 16 codes share one group, hence one scale
    codes_l: gl.constexpr = gl.BlockedLayout([1, 1, 16], [8, CHUNK // 16, 1], [4, 1, 1], [2, 1, 0])
    piece_l: gl.constexpr = gl.SliceLayout(2, codes_l)
    pieces_l: gl.constexpr = gl.SliceLayout(0, piece_l)
    byte_l: gl.constexpr = gl.SliceLayout(0, gl.SliceLayout(1, codes_l))
    rows_l: gl.constexpr = gl.BlockedLayout([1, 8], [32 // (CHUNK // 8), CHUNK // 8], [4, 1], [1, 0])  # BF16: 16 B
    n_tiles = (K + BLOCK_N - 1) // BLOCK_N
    for t in range(n_tiles):
        stage = t % STAGES
        tile = k_smem.index(stage)
        if FP8_KV:
            lane = t * BLOCK_N + gl.arange(0, BLOCK_N, gl.SliceLayout(1, piece_l))
            idx = gl.load(idx_ptr + m * K + lane, mask=lane < K, other=-1)
            valid = (idx >= 0) & (idx < N)
            row = gl.where(valid, idx, 0).to(gl.int64)
            block = row // RPB
            r = row - block * RPB
            data_b = block * block_bytes + r * DATA_STRIDE
            scale_b = block * block_bytes + scale_base + r * SCALE_STRIDE
            mbarrier.wait(empty.index(stage), ((t // STAGES) & 1) ^ 1)  # the first round passes at once
            for c in gl.static_range(DIM // CHUNK):
                piece = c * (CHUNK // 16) + gl.arange(0, CHUNK // 16, pieces_l)
                byte = gl.arange(0, 16, byte_l)
                at = data_b[:, None, None] + (piece * 16)[None, :, None] + byte[None, None, :]
                codes = gl.load(kv_ptr + at, mask=valid[:, None, None], other=0)
                scale_code = gl.load(kv_ptr + scale_b[:, None] + (piece * 16 // GROUP)[None, :], mask=valid[:, None],
                                     other=127).to(gl.int32)  # fmt: skip
                group_scale = gl.where(scale_code == 0, 0x00400000, scale_code << 23).to(gl.float32, bitcast=True)
                group_scale = gl.where(scale_code == 0xFF, float("nan"), group_scale)
                x = codes.to(gl.float8e4nv, bitcast=True).to(gl.float32) * group_scale[:, :, None]
                tile.slice(c * CHUNK, CHUNK, dim=1).store(gl.reshape(x.to(gl.bfloat16), [BLOCK_N, CHUNK]))
        else:
            lane = t * BLOCK_N + gl.arange(0, BLOCK_N, gl.SliceLayout(1, rows_l))
            idx = gl.load(idx_ptr + m * K + lane, mask=lane < K, other=-1)
            valid = (idx >= 0) & (idx < N)
            row = gl.where(valid, idx, 0).to(gl.int64)
            mbarrier.wait(empty.index(stage), ((t // STAGES) & 1) ^ 1)
            for c in gl.static_range(DIM // CHUNK):
                col = c * CHUNK + gl.arange(0, CHUNK, gl.SliceLayout(0, rows_l))
                x = gl.load(kv_ptr + row[:, None] * DIM + col[None, :], mask=valid[:, None], other=0.0)
                tile.slice(c * CHUNK, CHUNK, dim=1).store(x)
        fence_async_shared()
        BARRIER()
        mbarrier.arrive(ready.index(stage), count=1)


@gluon.jit
def _consumer(q_smem, k_smem, ready, empty, kv_ptr, idx_ptr, sink_ptr, out_ptr, lse_ptr, m, h0, H, N, K, scale,
              block_bytes, scale_base, RPB: gl.constexpr, DATA_STRIDE: gl.constexpr, SCALE_STRIDE: gl.constexpr,
              GROUP: gl.constexpr, BLOCK_H: gl.constexpr, BLOCK_N: gl.constexpr, DIM: gl.constexpr,
              STAGES: gl.constexpr, CHUNK: gl.constexpr, HAS_SINK: gl.constexpr, EMPTY_NAN: gl.constexpr,
              FP8_KV: gl.constexpr):  # fmt: skip
    s_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 2], instr_shape=[16, 32, 16])
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
    for t in range(n_tiles):
        stage = t % STAGES
        lane = t * BLOCK_N + gl.arange(0, BLOCK_N, gl.SliceLayout(0, s_l))
        idx = gl.load(idx_ptr + m * K + lane, mask=lane < K, other=-1)
        valid = (idx >= 0) & (idx < N)
        mbarrier.wait(ready.index(stage), (t // STAGES) & 1)
        tile = k_smem.index(stage)
        s = warpgroup_mma(q_smem, tile.permute((1, 0)), gl.full([BLOCK_H, BLOCK_N], 0.0, gl.float32, s_l),
                          use_acc=False, is_async=True)  # fmt: skip
        s = warpgroup_mma_wait(num_outstanding=0, deps=(s,))
        s = gl.where(valid[None, :], s * scale, float("-inf"))
        m_new = gl.maximum(m_i, gl.max(s, axis=1))
        m_use = gl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = gl.exp(m_i - m_use)
        p = gl.exp(s - m_use[:, None])
        l_i = l_i * alpha + gl.sum(p, axis=1)
        acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_l))[:, None]
        acc = warpgroup_mma(gl.convert_layout(p.to(gl.bfloat16), p_l), tile, acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        BARRIER()
        mbarrier.arrive(empty.index(stage), count=1)
        m_i = m_new
    h = h0 + gl.arange(0, BLOCK_H, gl.SliceLayout(1, s_l))
    h_ok = h < H
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
    out = gl.where(n_valid == 0, empty_out, out)
    lse = gl.where(n_valid == 0, empty_lse, lse)
    ho = h0 + gl.arange(0, BLOCK_H, gl.SliceLayout(1, o_l))
    d = gl.arange(0, DIM, gl.SliceLayout(0, o_l))
    gl.store(out_ptr + (m * H + ho)[:, None] * DIM + d[None, :], out, mask=(ho < H)[:, None])
    gl.store(lse_ptr + m * H + h, lse, mask=h_ok)


@gluon.jit
def _sparse_attention_ws_kernel(q_ptr, kv_ptr, idx_ptr, sink_ptr, out_ptr, lse_ptr, H, N, K, scale, block_bytes,
                                scale_base, RPB: gl.constexpr, DATA_STRIDE: gl.constexpr,
                                SCALE_STRIDE: gl.constexpr, GROUP: gl.constexpr, BLOCK_H: gl.constexpr,
                                BLOCK_N: gl.constexpr, DIM: gl.constexpr, STAGES: gl.constexpr,
                                CHUNK: gl.constexpr, HAS_SINK: gl.constexpr, EMPTY_NAN: gl.constexpr,
                                FP8_KV: gl.constexpr, PRODUCER_WARPS: gl.constexpr,
                                PRODUCER_REGS: gl.constexpr):  # fmt: skip
    h0 = gl.program_id(0) * BLOCK_H
    m = gl.program_id(1).to(gl.int64)
    smem_l: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    q_smem = gl.allocate_shared_memory(gl.bfloat16, [BLOCK_H, DIM], smem_l)
    k_smem = gl.allocate_shared_memory(gl.bfloat16, [STAGES, BLOCK_N, DIM], smem_l)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
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
                (_consumer, (q_smem, k_smem, ready, empty, kv_ptr, idx_ptr, sink_ptr, out_ptr, lse_ptr, m, h0, H,
                             N, K, scale, block_bytes, scale_base, RPB, DATA_STRIDE, SCALE_STRIDE, GROUP, BLOCK_H,
                             BLOCK_N, DIM, STAGES, CHUNK, HAS_SINK, EMPTY_NAN, FP8_KV)),
                (_producer, (q_smem, k_smem, ready, empty, kv_ptr, idx_ptr, sink_ptr, out_ptr, lse_ptr, m, h0, H,
                             N, K, scale, block_bytes, scale_base, RPB, DATA_STRIDE, SCALE_STRIDE, GROUP, BLOCK_H,
                             BLOCK_N, DIM, STAGES, CHUNK, HAS_SINK, EMPTY_NAN, FP8_KV)),
            ],
            [PRODUCER_WARPS],
            [PRODUCER_REGS],
        )  # fmt: skip
    elif WS_API == 1:
        gl.warp_specialize(
            (q_smem, k_smem, ready, empty, kv_ptr, idx_ptr, sink_ptr, out_ptr, lse_ptr, m, h0, H, N, K, scale,
             block_bytes, scale_base, RPB, DATA_STRIDE, SCALE_STRIDE, GROUP, BLOCK_H, BLOCK_N, DIM, STAGES, CHUNK,
             HAS_SINK, EMPTY_NAN, FP8_KV),
            _consumer,
            (q_smem, k_smem, ready, empty, kv_ptr, idx_ptr, sink_ptr, out_ptr, lse_ptr, m, h0, H, N, K, scale,
             block_bytes, scale_base, RPB, DATA_STRIDE, SCALE_STRIDE, GROUP, BLOCK_H, BLOCK_N, DIM, STAGES, CHUNK,
             HAS_SINK, EMPTY_NAN, FP8_KV),
            [_producer],
            [PRODUCER_WARPS],
            [PRODUCER_REGS],
        )  # fmt: skip
    else:
        gl.warp_specialize(
            (q_smem, k_smem, ready, empty, kv_ptr, idx_ptr, sink_ptr, out_ptr, lse_ptr, m, h0, H, N, K, scale,
             block_bytes, scale_base, RPB, DATA_STRIDE, SCALE_STRIDE, GROUP, BLOCK_H, BLOCK_N, DIM, STAGES, CHUNK,
             HAS_SINK, EMPTY_NAN, FP8_KV),
            _consumer,
            [_producer],
            [PRODUCER_WARPS],
            [PRODUCER_REGS],
        )  # fmt: skip


def supports(call: AttentionArgs) -> bool:
    """Whether ``call`` is a case this kernel serves: bf16 q, D = dv = 512, bf16 probabilities, KV as BF16 rows
    or in a V4.1 FP8 cache."""
    kv_ok = call.kv_cache is None or call.kv_cache[0].convention == "v41_fp8_528"
    return (kv_ok and call.q.dtype == torch.bfloat16 and call.q.shape[-1] == DIM and call.dv == DIM
            and call.precision == "bf16")  # fmt: skip


def kv_constants(fmt: CacheFormat | None, rows_per_block: int) -> dict[str, int | bool]:
    """The kernel's KV constexprs: BF16 rows (``fmt`` None) or cache format ``fmt`` (``CacheFormat.offsets``)."""
    if fmt is None:
        return dict(FP8_KV=False, RPB=1, DATA_STRIDE=0, SCALE_STRIDE=0, GROUP=1)
    data_stride, _, scale_stride = fmt.offsets(rows_per_block)
    return dict(FP8_KV=True, RPB=rows_per_block, DATA_STRIDE=data_stride, SCALE_STRIDE=scale_stride,
                GROUP=fmt.group_size)  # fmt: skip


def tile_constants(has_sink: bool, empty_nan: bool) -> dict[str, int | bool]:
    """The kernel's tile and partition constexprs."""
    return dict(BLOCK_H=BLOCK_H, BLOCK_N=BLOCK_N, DIM=DIM, STAGES=STAGES, CHUNK=CHUNK, HAS_SINK=has_sink,
                EMPTY_NAN=empty_nan, PRODUCER_WARPS=PRODUCER_WARPS, PRODUCER_REGS=PRODUCER_REGS)  # fmt: skip


def sparse_attention_ws(call: AttentionArgs) -> tuple[torch.Tensor, torch.Tensor]:
    """Launch on a checked call that ``supports`` accepts (ValueError otherwise)."""
    if not supports(call):
        raise ValueError("call: the warp-specialized kernel serves bf16 q at D = dv = 512 with bf16 probabilities, "
                         "KV as BF16 rows or in a V4.1 FP8 cache")  # fmt: skip
    q, out, lse, kv = call.q, call.out, call.lse, call.kv
    M, H, _ = q.shape
    K = call.indices.shape[1]
    if M == 0 or H == 0:
        return out, lse
    if call.kv_cache is not None:
        fmt, rows_per_block = call.kv_cache
        layout = kv_constants(fmt, rows_per_block)
        n, block_bytes, scale_base = kv.shape[0] * rows_per_block, kv.shape[-1], fmt.offsets(rows_per_block)[1]
    else:
        layout = kv_constants(None, 1)
        n, block_bytes, scale_base = kv.shape[0], 0, 0
    grid = (triton.cdiv(H, BLOCK_H), M)
    _sparse_attention_ws_kernel[grid](
        q, kv, call.indices, call.sink if call.sink is not None else out, out, lse, H, n, K, float(call.scale),
        block_bytes, scale_base, **layout, **tile_constants(call.sink is not None, call.empty_nan),
        num_warps=CONSUMER_WARPS,
    )  # fmt: skip
    return out, lse
