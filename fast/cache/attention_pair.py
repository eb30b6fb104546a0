# mypy: disable-error-code="no-untyped-def,untyped-decorator"
"""Sparse MQA attention with a sink, BF16 KV rows or a V4 / V4.1 FP8 cache, two consumer warp groups that each
score their own tile (Gluon, compiled sm_90 only).

    sparse_attention_pair(call: fast.cache.checks.AttentionArgs) -> (out: f32[M, H, 512], lse: f32[M, H])

The same operation as ``fast.cache.attention`` (its twin and its contract) for bf16 q, D = dv = 512, bf16
probabilities and KV as BF16 rows (the default path's kernel for them on sm_90, ``fast.cache.dispatch``) or in
a V4 584-byte or V4.1 528-byte FP8 cache (``Pair()``; ``default_for`` says why not yet the default). One
program per (query row, 64 heads) runs three partitions of one warp group:

1. the producer copies the lanes' rows by ``cp.async`` into two stages of 64 lanes, each in two halves of 256
   columns with their own ``ready`` and ``empty`` barriers, in the order the consumers free them; on an FP8
   cache it copies a half's codes into the back of the half itself and converts them there in place
   (``_produce_row_fp8``), so the consumers see the same bf16 tiles and need no more shared memory;
2. warp group 0 scores the even tiles (q @ k^T, 64 x 64 x 512), warp group 1 the odd ones; each adds to its half
   of the output (256 of the 512 columns) the p of both tiles of a pair: its own from registers, the other's
   from shared memory.

Per pair of tiles (a in stage 0, b in stage 1), with m the running row maximum both groups hold:

- group 0: m0 = max(m, rowmax s_a), published; p_a = exp(s_a - m0); o_0 += p_a v_a[:, :256]; then, given
  group 1's m1 = max(m0, rowmax s_b): p_a *= exp(m0 - m1) is published for group 1, o_0 and its row sum are
  rescaled the same way, and o_0 += p_b v_b[:, :256]; it issues the next pair's score before that product ends;
- group 1: m1 published; p_b = exp(s_b - m1); o_1 += p_b v_b[:, 256:] and o_1 += p_a v_a[:, 256:].

So each score is one 64-wide MMA per group with no exchange of row maxima inside a tile, the groups exchange
once per pair, and a stage's left half is refilled while its right half is still read. The row sums of the two
groups are added at the end. FlashMLA's sparse prefill kernel for sm_90 runs this schedule (docs/targets.md).
Invalid lanes are read as zeros and scored -inf; the sink enters the final denominator only; an empty row follows
``call.empty_nan``. On the CPU, ``python -m fast.cache.compile_check --only pair`` lowers it for sm_90; results
are checked on a GPU only (``tests/test_attention_pair.py``, the benchmark's decode and prefill checks).
"""

from __future__ import annotations

import dataclasses

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

from fast.cache import pair_protocol as protocol
from fast.cache.attention_ws import (
    BARRIER,
    WS_API,
    check_programs,
    chunk_layout,
    convert_chunk,
    copy_rows,
    issue_chunk,
    issue_q,
    issue_rope,
    issue_scales,
    kv_constants,
    kv_launch,
    normalize,
    persistent_items,
    scale_bytes,
    scale_layout,
    sm_count,
    tile_rows,
)
from fast.cache.attention_ws import (
    supports as ws_supports,
)
from fast.cache.checks import AttentionArgs

BLOCK_H = 64
BLOCK_N = 64
DIM = 512
CHUNK = 64
"""Columns a ``cp.async`` call covers (one 128-byte swizzle row)."""
WARPS = 4
"""Warps of each partition: a warp group."""
PRODUCER_REGS = 56
CONSUMER_REGS = 224
"""Registers a thread of the producer and of consumer group 1 (group 0, the default partition, gets the rest)."""
_PUBLIC_REINTERPRET = gl.constexpr(hasattr(gl.shared_memory_descriptor, "reinterpret"))
"""Whether this Triton names a shared-memory view of another type ``reinterpret`` (3.9) or ``_reinterpret`` (3.6)."""
_S_L = gl.constexpr(gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPS, 1], instr_shape=[16, BLOCK_N, 16]))
"""A group's scores, [64 heads, 64 lanes], as its ``wgmma`` leaves them."""
_O_L = gl.constexpr(gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPS, 1], instr_shape=[16, DIM // 2, 16]))
"""A group's half of the output, [64 heads, 256 columns]."""
_P_L = gl.constexpr(gl.DotOperandLayout(operand_index=0, parent=_O_L.value, k_width=2))
"""p as the A operand of a group's ``p @ v`` from registers."""


@gluon.jit
def _producer(q_smem, k_smem, p_smem, m_smem, l_smem, ready, empty, sync, codes, scales, kv_ptr, idx_ptr, sink_ptr,
              out_ptr, lse_ptr, q_ptr, q_ready, q_empty, M, m, h0, H, N, K, scale, block_bytes, scale_base,
              RPB: gl.constexpr, DATA_STRIDE: gl.constexpr, SCALE_STRIDE: gl.constexpr, GROUP: gl.constexpr,
              QDIMS: gl.constexpr, FP8_KV: gl.constexpr, HAS_SINK: gl.constexpr, EMPTY_NAN: gl.constexpr,
              BLOCK_H: gl.constexpr, BLOCK_N: gl.constexpr, DIM: gl.constexpr, CHUNK: gl.constexpr, WARPS: gl.constexpr,
              PROBE: gl.constexpr, PERSISTENT: gl.constexpr):  # fmt: skip
    """The row's pairs; persistent: each item's q (once both groups have done their last score of the item
    before), then its pairs, the pairs counted across items."""
    if PERSISTENT:
        first, end, step, n_blocks, n_tiles = persistent_items(M, H, K, BLOCK_H, BLOCK_N)
        n_pairs = (n_tiles + 1) // 2
        for w in range(first, end, step):
            i = (w - first) // step
            row = (w // n_blocks).to(gl.int64)
            mbarrier.wait(q_empty, (i & 1) ^ 1)
            issue_q(q_smem.index(0), q_ptr, row, (w % n_blocks) * BLOCK_H, H, BLOCK_H, DIM, CHUNK, WARPS)
            async_copy.mbarrier_arrive(q_ready, increment_count=False)
            if FP8_KV and PROBE != 1:
                _produce_row_fp8(k_smem, codes, scales, ready, empty, kv_ptr, idx_ptr, row, i * n_pairs, N, K,
                                 block_bytes, scale_base, RPB, DATA_STRIDE, SCALE_STRIDE, GROUP, QDIMS, BLOCK_N, DIM,
                                 CHUNK, WARPS)  # fmt: skip
            else:
                _produce_row(k_smem, ready, empty, kv_ptr, idx_ptr, row, i * n_pairs, N, K, BLOCK_N, DIM, CHUNK,
                             WARPS, PROBE)  # fmt: skip
    elif FP8_KV and PROBE != 1:
        _produce_row_fp8(k_smem, codes, scales, ready, empty, kv_ptr, idx_ptr, m, 0, N, K, block_bytes, scale_base,
                         RPB, DATA_STRIDE, SCALE_STRIDE, GROUP, QDIMS, BLOCK_N, DIM, CHUNK, WARPS)  # fmt: skip
    else:
        _produce_row(k_smem, ready, empty, kv_ptr, idx_ptr, m, 0, N, K, BLOCK_N, DIM, CHUNK, WARPS, PROBE)


@gluon.jit
def _produce_row_fp8(k_smem, codes, scales, ready, empty, kv_ptr, idx_ptr, m, g0, N, K, block_bytes, scale_base,
                     RPB: gl.constexpr, DATA_STRIDE: gl.constexpr, SCALE_STRIDE: gl.constexpr, GROUP: gl.constexpr,
                     QDIMS: gl.constexpr, BLOCK_N: gl.constexpr, DIM: gl.constexpr, CHUNK: gl.constexpr,
                     WARPS: gl.constexpr):  # fmt: skip
    """FP8 codes: each stage half's codes copied by ``cp.async`` into the half itself (``_issue_half``), then
    converted there in place (``_convert_half``), in the steps of ``pair_protocol``: ``FIRST`` (pair 0's a-left),
    then ``PAIR_ORDER`` a pair (the three halves the consumers free at the pair boundary copied as each is freed,
    then converted, a-right first; then a-left of the next pair, which group 0 frees in the middle of this one).
    ``pair_protocol.run`` checks that order for deadlock; the kernel takes its steps from there."""
    n_pairs = (K + 2 * BLOCK_N - 1) // (2 * BLOCK_N)
    if n_pairs > 0:
        _fp8_steps(k_smem, codes, scales, ready, empty, kv_ptr, idx_ptr, m, g0, 0, n_pairs, N, K, block_bytes,
                   scale_base, True, RPB, DATA_STRIDE, SCALE_STRIDE, GROUP, QDIMS, BLOCK_N, DIM, CHUNK,
                   WARPS)  # fmt: skip
    for j in range(n_pairs):
        _fp8_steps(k_smem, codes, scales, ready, empty, kv_ptr, idx_ptr, m, g0, j, n_pairs, N, K, block_bytes,
                   scale_base, False, RPB, DATA_STRIDE, SCALE_STRIDE, GROUP, QDIMS, BLOCK_N, DIM, CHUNK,
                   WARPS)  # fmt: skip


FP8_STEP_FIELDS = ("issue", "stage", "side", "on", "later")
"""What ``fp8_step`` tells of a step."""


@gluon.constexpr_function
def fp8_step_count(first):
    """The count of ``pair_protocol``'s FP8 producer steps, ``FIRST`` or ``PAIR_ORDER``."""
    return len(protocol.FIRST if first else protocol.PAIR_ORDER)


@gluon.constexpr_function
def fp8_step(first, k, field):
    """Field ``field`` of step ``k`` of ``pair_protocol.FIRST`` or ``PAIR_ORDER``: ``issue`` (a copy, else a
    conversion), ``stage``, ``side`` and ``on`` (pairs on) of its half, and for a conversion ``later``, the copies
    issued after its half's among the steps before it (``cp.async.wait_group``'s count: they may still be in
    flight)."""
    steps = protocol.FIRST if first else protocol.PAIR_ORDER
    if field not in FP8_STEP_FIELDS:
        raise ValueError(f"field: must be one of {FP8_STEP_FIELDS}, got {field!r}")
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < len(steps):
        raise ValueError(f"k: must be a step of the {len(steps)} there are, got {k!r}")
    verb, half, on = steps[k]
    issued = [(h, o) for v, h, o in steps[:k] if v == "issue"]
    later = len(issued) - 1 - issued.index((half, on)) if verb == "convert" else 0
    return {"issue": verb == "issue", "stage": half // 2, "side": half % 2, "on": on, "later": later}[field]


@gluon.jit
def _fp8_steps(k_smem, codes, scales, ready, empty, kv_ptr, idx_ptr, m, g0, j, n_pairs, N, K, block_bytes,
               scale_base, FIRST: gl.constexpr, RPB: gl.constexpr, DATA_STRIDE: gl.constexpr,
               SCALE_STRIDE: gl.constexpr, GROUP: gl.constexpr, QDIMS: gl.constexpr, BLOCK_N: gl.constexpr,
               DIM: gl.constexpr, CHUNK: gl.constexpr, WARPS: gl.constexpr):  # fmt: skip
    """Pair ``j``'s steps (``FIRST``: ``pair_protocol.FIRST``, else ``PAIR_ORDER``); a step of the pair past the
    last is left out."""
    for k in gl.static_range(fp8_step_count(FIRST)):
        if fp8_step(FIRST, k, "on") == 0:
            _fp8_step(k_smem, codes, scales, ready, empty, kv_ptr, idx_ptr, m, g0, j, N, K, block_bytes, scale_base,
                      FIRST, k, RPB, DATA_STRIDE, SCALE_STRIDE, GROUP, QDIMS, BLOCK_N, DIM, CHUNK, WARPS)  # fmt: skip
        elif j + 1 < n_pairs:
            _fp8_step(k_smem, codes, scales, ready, empty, kv_ptr, idx_ptr, m, g0, j, N, K, block_bytes, scale_base,
                      FIRST, k, RPB, DATA_STRIDE, SCALE_STRIDE, GROUP, QDIMS, BLOCK_N, DIM, CHUNK, WARPS)  # fmt: skip


@gluon.jit
def _fp8_step(k_smem, codes, scales, ready, empty, kv_ptr, idx_ptr, m, g0, j, N, K, block_bytes, scale_base,
              FIRST: gl.constexpr, k: gl.constexpr, RPB: gl.constexpr, DATA_STRIDE: gl.constexpr,
              SCALE_STRIDE: gl.constexpr, GROUP: gl.constexpr, QDIMS: gl.constexpr, BLOCK_N: gl.constexpr,
              DIM: gl.constexpr, CHUNK: gl.constexpr, WARPS: gl.constexpr):  # fmt: skip
    """Step ``k`` of pair ``j``: half (stage, side) of pair i = j + on is tile 2i + stage, columns ``side`` (0
    left, 1 right), freed for the (g0 + i)-th time."""
    ON: gl.constexpr = fp8_step(FIRST, k, "on")
    STAGE: gl.constexpr = fp8_step(FIRST, k, "stage")
    SIDE: gl.constexpr = fp8_step(FIRST, k, "side")
    if fp8_step(FIRST, k, "issue"):
        _issue_half(k_smem, codes, scales, empty, kv_ptr, idx_ptr, m, 2 * (j + ON) + STAGE, N, K, block_bytes,
                    scale_base, ((g0 + j + ON) & 1) ^ 1, STAGE, SIDE, RPB, DATA_STRIDE, SCALE_STRIDE, GROUP, QDIMS,
                    BLOCK_N, DIM, CHUNK, WARPS)  # fmt: skip
    else:
        _convert_half(k_smem, codes, scales, ready, STAGE, SIDE, fp8_step(FIRST, k, "later"), GROUP, QDIMS, BLOCK_N,
                      DIM, CHUNK, WARPS)  # fmt: skip


@gluon.constexpr_function
def half_chunks(side, QDIMS, DIM, CHUNK):
    """The chunks of FP8 codes in a tile's ``side`` half: all of the left half's, the right half's before QDIMS."""
    return DIM // 2 // CHUNK if side == 0 else (QDIMS - DIM // 2) // CHUNK


@gluon.constexpr_function
def tile_chunk(side, i, DIM, CHUNK):
    """The tile's chunk (``CHUNK`` columns) that is chunk ``i`` of its ``side`` half."""
    return side * (DIM // 2 // CHUNK) + i


@gluon.constexpr_function
def code_slot(stage, side, i, QDIMS, DIM, CHUNK):
    """The 4 KB slot of the stages (``CHUNK`` bytes of 64 lanes; ``DIM // CHUNK`` a half) that holds the codes of
    chunk ``i`` of the ``side`` half of stage ``stage``: slot Q + i of the half's, Q its chunks of codes. Chunk i's
    bf16 takes the half's slots 2i and 2i + 1, so converting the chunks in order overwrites only codes already
    converted or chunk i's own (``tests/test_attention_pair.py`` checks this, and that V4's tail misses them)."""
    return (2 * stage + side) * (DIM // CHUNK) + half_chunks(side, QDIMS, DIM, CHUNK) + i


@gluon.constexpr_function
def holds_codes(side, i, QDIMS, DIM, CHUNK):
    """Whether the slots chunk ``i``'s bf16 takes (2i and 2i + 1 of the half's) hold codes when it is converted."""
    return 2 * i + 1 >= half_chunks(side, QDIMS, DIM, CHUNK)


@gluon.jit
def _issue_half(k_smem, codes, scales, empty, kv_ptr, idx_ptr, m, t, N, K, block_bytes, scale_base, free,
                stage: gl.constexpr, side: gl.constexpr, RPB: gl.constexpr, DATA_STRIDE: gl.constexpr,
                SCALE_STRIDE: gl.constexpr, GROUP: gl.constexpr, QDIMS: gl.constexpr, BLOCK_N: gl.constexpr,
                DIM: gl.constexpr, CHUNK: gl.constexpr, WARPS: gl.constexpr):  # fmt: skip
    """Once the consumers have freed it, ``cp.async`` the codes of tile ``t``'s ``side`` half into that half of
    stage ``stage`` (``code_slot``); with the tile's first half its scales (scale slot ``stage``); with V4's right
    half the bf16 values past QDIMS straight into their columns. One commit group."""
    Q: gl.constexpr = half_chunks(side, QDIMS, DIM, CHUNK)
    code_l: gl.constexpr = chunk_layout(CHUNK, GROUP, WARPS)
    mbarrier.wait(empty.index(2 * stage + side), free)
    lane = t * BLOCK_N + gl.arange(0, BLOCK_N, gl.SliceLayout(1, gl.SliceLayout(2, code_l)))
    idx_c = gl.load(idx_ptr + m * K + lane, mask=lane < K, other=-1)
    for i in gl.static_range(Q):
        issue_chunk(codes.index(code_slot(stage, side, i, QDIMS, DIM, CHUNK)), kv_ptr, idx_c,
                    tile_chunk(side, i, DIM, CHUNK), N, block_bytes, RPB, DATA_STRIDE, CHUNK, GROUP, WARPS)  # fmt: skip
    if side == stage:
        SCALES: gl.constexpr = scale_bytes(QDIMS, GROUP)
        lane_s = t * BLOCK_N + gl.arange(0, BLOCK_N, gl.SliceLayout(1, scale_layout(SCALES, WARPS)))
        idx_s = gl.load(idx_ptr + m * K + lane_s, mask=lane_s < K, other=-1)
        issue_scales(scales.index(stage), kv_ptr, idx_s, N, block_bytes, scale_base, RPB, SCALE_STRIDE, SCALES,
                     WARPS)  # fmt: skip
    if side == 1 and QDIMS < DIM:
        row, ok = tile_rows(idx_ptr, m, t, N, K, BLOCK_N, CHUNK, WARPS)
        issue_rope(k_smem.index(stage), kv_ptr, row, ok, block_bytes, RPB, DATA_STRIDE, QDIMS, CHUNK, WARPS)
    async_copy.commit_group()


@gluon.jit
def _convert_half(k_smem, codes, scales, ready, stage: gl.constexpr, side: gl.constexpr, LATER: gl.constexpr,
                  GROUP: gl.constexpr, QDIMS: gl.constexpr, BLOCK_N: gl.constexpr, DIM: gl.constexpr,
                  CHUNK: gl.constexpr, WARPS: gl.constexpr):  # fmt: skip
    """Once its copies have landed (``LATER`` groups issued after them may still be in flight), convert the codes
    of ``stage``'s ``side`` half in place: each chunk's codes times their groups' scales, as bf16 (powers of two:
    exact), into its columns; where those columns hold codes (``code_slot``), every thread has read this chunk's
    codes first. Then the half is ready."""
    Q: gl.constexpr = half_chunks(side, QDIMS, DIM, CHUNK)
    async_copy.wait_group(LATER)  # this thread's copies of the half have landed
    BARRIER()  # and every producer thread's
    tile = k_smem.index(stage)
    for i in gl.static_range(Q):
        convert_chunk(tile, codes.index(code_slot(stage, side, i, QDIMS, DIM, CHUNK)),
                      scales.index(stage).slice(tile_chunk(side, i, DIM, CHUNK) * (CHUNK // GROUP), CHUNK // GROUP,
                                                dim=1), tile_chunk(side, i, DIM, CHUNK), BLOCK_N, CHUNK, GROUP, WARPS,
                      holds_codes(side, i, QDIMS, DIM, CHUNK))  # fmt: skip
    fence_async_shared()
    BARRIER()
    mbarrier.arrive(ready.index(2 * stage + side), count=WARPS * 32)


@gluon.jit
def _produce_row(k_smem, ready, empty, kv_ptr, idx_ptr, m, g0, N, K, BLOCK_N: gl.constexpr, DIM: gl.constexpr,
                 CHUNK: gl.constexpr, WARPS: gl.constexpr, PROBE: gl.constexpr):  # fmt: skip
    """Fill each stage half as the consumers free it: a's left, b's right, a's right, b's left; ``g0``: the ring's
    pairs before this row's. Both tiles' lane indices are loaded once a pair, before the first wait, so that no
    refill waits on an index load."""
    for j in range((K + 2 * BLOCK_N - 1) // (2 * BLOCK_N)):
        free = ((g0 + j) & 1) ^ 1  # the first round passes at once
        row_a, ok_a = tile_rows(idx_ptr, m, 2 * j, N, K, BLOCK_N, CHUNK, WARPS)
        row_b, ok_b = tile_rows(idx_ptr, m, 2 * j + 1, N, K, BLOCK_N, CHUNK, WARPS)
        _fill(k_smem, ready, empty, kv_ptr, row_a, ok_a, free, 0, 0, DIM, CHUNK, WARPS, PROBE)
        _fill(k_smem, ready, empty, kv_ptr, row_b, ok_b, free, 1, 1, DIM, CHUNK, WARPS, PROBE)
        _fill(k_smem, ready, empty, kv_ptr, row_a, ok_a, free, 0, 1, DIM, CHUNK, WARPS, PROBE)
        _fill(k_smem, ready, empty, kv_ptr, row_b, ok_b, free, 1, 0, DIM, CHUNK, WARPS, PROBE)


@gluon.jit
def _fill(k_smem, ready, empty, kv_ptr, row, ok, free, stage: gl.constexpr, half: gl.constexpr, DIM: gl.constexpr,
          CHUNK: gl.constexpr, WARPS: gl.constexpr, PROBE: gl.constexpr):  # fmt: skip
    """Once the consumers have freed it, copy the columns of ``half`` of KV rows ``row`` (``tile_rows``) into
    stage ``stage``; the ready barrier completes when every producer thread's copies have landed (probe 1: at
    once, nothing copied)."""
    mbarrier.wait(empty.index(2 * stage + half), free)
    if PROBE == 1:
        mbarrier.arrive(ready.index(2 * stage + half), count=WARPS * 32)
    else:
        per_half: gl.constexpr = DIM // 2 // CHUNK
        copy_rows(k_smem.index(stage), kv_ptr, row, ok, DIM, CHUNK, WARPS, half * per_half, (half + 1) * per_half)
        async_copy.mbarrier_arrive(ready.index(2 * stage + half), increment_count=False)


@gluon.jit
def _drain(ready, empty, n_pairs, g0, group: gl.constexpr):
    """Probe 2: wait for each half this group frees and free it, computing nothing (group 0 frees a's and b's left
    halves, group 1 b's and a's right ones)."""
    for j in range(n_pairs):
        phase = (g0 + j) & 1
        mbarrier.wait(ready.index(3 * group), phase)
        _publish(empty.index(3 * group))
        mbarrier.wait(ready.index(2 - group), phase)
        _publish(empty.index(2 - group))


@gluon.jit
def _score_half(q_smem, tile, bar, phase, half: gl.constexpr, s, use_acc: gl.constexpr, DIM: gl.constexpr):
    """Issue q @ tile^T over the columns of ``half`` once ``bar`` (that half's ``ready``) is passed."""
    mbarrier.wait(bar, phase)
    return warpgroup_mma(q_smem.slice(half * (DIM // 2), DIM // 2, dim=1),
                         tile.slice(half * (DIM // 2), DIM // 2, dim=1).permute((1, 0)), s, use_acc=use_acc,
                         is_async=True)  # fmt: skip


@gluon.jit
def _publish(bar):
    """Every thread of this group has written what ``bar`` announces: one arrival for the group."""
    BARRIER()
    mbarrier.arrive(bar, count=1)


@gluon.jit
def _lanes_valid(idx_ptr, m, t, N, K, BLOCK_N: gl.constexpr, s_l: gl.constexpr):
    lane = t * BLOCK_N + gl.arange(0, BLOCK_N, gl.SliceLayout(0, s_l))
    idx = gl.load(idx_ptr + m * K + lane, mask=lane < K, other=-1)
    return (idx >= 0) & (idx < N)


@gluon.jit
def _finish(acc, m_i, l_i, l_smem, sync, i, group: gl.constexpr, idx_ptr, sink_ptr, out_ptr, lse_ptr, m, h0, H, N,
            K, HAS_SINK: gl.constexpr, EMPTY_NAN: gl.constexpr, BLOCK_H: gl.constexpr, DIM: gl.constexpr,
            s_l: gl.constexpr, o_l: gl.constexpr, WARPS: gl.constexpr):  # fmt: skip
    """Add the other group's row sums, divide, write this group's half of the output (and group 0 the lse)."""
    count_l: gl.constexpr = gl.BlockedLayout([4], [32], [WARPS], [0])
    n_valid = 0
    for start in range(0, K, 512):
        lane = start + gl.arange(0, 512, count_l)
        idx = gl.load(idx_ptr + m * K + lane, mask=lane < K, other=-1)
        n_valid += gl.sum(((idx >= 0) & (idx < N)).to(gl.int32), axis=0)
    l_smem.index(group).store(l_i)
    _publish(sync.index(4 + group))
    mbarrier.wait(sync.index(5 - group), i & 1)
    l_i = l_i + l_smem.index(1 - group).load(gl.SliceLayout(1, s_l))
    h = h0 + gl.arange(0, BLOCK_H, gl.SliceLayout(1, s_l))
    h_ok = h < H
    out, lse = normalize(acc, m_i, l_i, n_valid, sink_ptr, h, h_ok, HAS_SINK, EMPTY_NAN, o_l)
    ho = h0 + gl.arange(0, BLOCK_H, gl.SliceLayout(1, o_l))
    d = group * (DIM // 2) + gl.arange(0, DIM // 2, gl.SliceLayout(0, o_l))
    gl.store(out_ptr + (m * H + ho)[:, None] * DIM + d[None, :], out, mask=(ho < H)[:, None])
    if group == 0:
        gl.store(lse_ptr + m * H + h, lse, mask=h_ok)


@gluon.jit
def _start(ready, empty, K, g0, group: gl.constexpr, BLOCK_H: gl.constexpr, BLOCK_N: gl.constexpr,
           DIM: gl.constexpr, PROBE: gl.constexpr):  # fmt: skip
    """A group's pairs of tiles (0 under probe 2, which only drains them) and its empty running maximum, row sum,
    output half and score."""
    n_pairs = (K + 2 * BLOCK_N - 1) // (2 * BLOCK_N)
    if PROBE == 2:
        _drain(ready, empty, n_pairs, g0, group)
        n_pairs = 0
    m_i = gl.full([BLOCK_H], float("-inf"), gl.float32, gl.SliceLayout(1, _S_L))
    l_i = gl.full([BLOCK_H], 0.0, gl.float32, gl.SliceLayout(1, _S_L))
    acc = gl.full([BLOCK_H, DIM // 2], 0.0, gl.float32, _O_L)
    s = gl.full([BLOCK_H, BLOCK_N], 0.0, gl.float32, _S_L)
    return n_pairs, m_i, l_i, acc, s


@gluon.jit
def _walk(ROW: gl.constexpr, q_smem, k_smem, p_smem, m_smem, l_smem, ready, empty, sync, q_ready, q_empty, idx_ptr,
          sink_ptr, out_ptr, lse_ptr, M, m, h0, H, N, K, scale, HAS_SINK: gl.constexpr, EMPTY_NAN: gl.constexpr,
          BLOCK_H: gl.constexpr, BLOCK_N: gl.constexpr, DIM: gl.constexpr, WARPS: gl.constexpr, PROBE: gl.constexpr,
          PERSISTENT: gl.constexpr):  # fmt: skip
    """A group's work, ``ROW`` (``_group0_row`` or ``_group1_row``) on each of its items: the program's (row, head
    block) alone, or persistent, the items in the producer's order, pairs counted across them."""
    if PERSISTENT:
        first, end, step, n_blocks, n_tiles = persistent_items(M, H, K, BLOCK_H, BLOCK_N)
        for w in range(first, end, step):
            i = (w - first) // step
            ROW(q_smem, k_smem, p_smem, m_smem, l_smem, ready, empty, sync, q_ready, q_empty, i,
                i * ((n_tiles + 1) // 2), idx_ptr, sink_ptr, out_ptr, lse_ptr, (w // n_blocks).to(gl.int64),
                (w % n_blocks) * BLOCK_H, H, N, K, scale, HAS_SINK, EMPTY_NAN, BLOCK_H, BLOCK_N, DIM, WARPS, PROBE,
                PERSISTENT)  # fmt: skip
    else:
        ROW(q_smem, k_smem, p_smem, m_smem, l_smem, ready, empty, sync, q_ready, q_empty, 0, 0, idx_ptr, sink_ptr,
            out_ptr, lse_ptr, m, h0, H, N, K, scale, HAS_SINK, EMPTY_NAN, BLOCK_H, BLOCK_N, DIM, WARPS, PROBE,
            PERSISTENT)  # fmt: skip


@gluon.jit
def _group0(q_smem, k_smem, p_smem, m_smem, l_smem, ready, empty, sync, codes, scales, kv_ptr, idx_ptr, sink_ptr,
            out_ptr, lse_ptr, q_ptr, q_ready, q_empty, M, m, h0, H, N, K, scale, block_bytes, scale_base,
            RPB: gl.constexpr, DATA_STRIDE: gl.constexpr, SCALE_STRIDE: gl.constexpr, GROUP: gl.constexpr,
            QDIMS: gl.constexpr, FP8_KV: gl.constexpr, HAS_SINK: gl.constexpr, EMPTY_NAN: gl.constexpr,
            BLOCK_H: gl.constexpr, BLOCK_N: gl.constexpr, DIM: gl.constexpr, CHUNK: gl.constexpr, WARPS: gl.constexpr,
            PROBE: gl.constexpr, PERSISTENT: gl.constexpr):  # fmt: skip
    """The even tiles' scores; output columns [0, DIM / 2)."""
    _walk(_group0_row, q_smem, k_smem, p_smem, m_smem, l_smem, ready, empty, sync, q_ready, q_empty, idx_ptr, sink_ptr,
          out_ptr, lse_ptr, M, m, h0, H, N, K, scale, HAS_SINK, EMPTY_NAN, BLOCK_H, BLOCK_N, DIM, WARPS, PROBE,
          PERSISTENT)  # fmt: skip


@gluon.jit
def _group0_row(q_smem, k_smem, p_smem, m_smem, l_smem, ready, empty, sync, q_ready, q_empty, i, g0, idx_ptr,
                sink_ptr, out_ptr, lse_ptr, m, h0, H, N, K, scale, HAS_SINK: gl.constexpr, EMPTY_NAN: gl.constexpr,
                BLOCK_H: gl.constexpr, BLOCK_N: gl.constexpr, DIM: gl.constexpr, WARPS: gl.constexpr,
                PROBE: gl.constexpr, PERSISTENT: gl.constexpr):  # fmt: skip
    """Heads ``h0`` on of query row ``m``, the program's ``i``-th item, ``g0`` pairs of the ring before its own."""
    half: gl.constexpr = DIM // 2
    s_l: gl.constexpr = _S_L
    o_l: gl.constexpr = _O_L
    p_l: gl.constexpr = _P_L
    row_l: gl.constexpr = gl.SliceLayout(1, s_l)
    n_pairs, m_i, l_i, acc, s = _start(ready, empty, K, g0, 0, BLOCK_H, BLOCK_N, DIM, PROBE)
    if PERSISTENT:
        if PROBE == 2:
            _publish(q_empty)
        mbarrier.wait(q_ready, i & 1)
    if n_pairs > 0:
        z0 = i // (i + 1)  # 0, not known to be so (as z below), or the item loop keeps these descriptors live
        s = _score_half(q_smem.index(z0), k_smem.index(z0), ready.index(0), g0 & 1, 0, s, False, DIM)
        s = _score_half(q_smem.index(z0), k_smem.index(z0), ready.index(1), g0 & 1, 1, s, True, DIM)
        s = warpgroup_mma_wait(num_outstanding=0, deps=(s,))
        if PERSISTENT:
            if n_pairs == 1:  # this group's last score of the item: the producer may copy the next q
                _publish(q_empty)
    for j in range(n_pairs):
        phase = (g0 + j) & 1
        z = j // n_pairs  # 0, not known to be so: the descriptors are made in the loop, not kept in registers
        valid = _lanes_valid(idx_ptr, m, 2 * j, N, K, BLOCK_N, s_l)
        s = gl.where(valid[None, :], s * scale, float("-inf"))
        m0 = gl.maximum(m_i, gl.max(s, axis=1))
        m_smem.store(m0)
        _publish(sync.index(0))
        m0u = gl.where(m0 == float("-inf"), 0.0, m0)
        alpha = gl.exp(m_i - m0u)
        p = gl.exp(s - m0u[:, None])
        l_i = l_i * alpha + gl.sum(p, axis=1)
        acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_l))[:, None]
        acc = warpgroup_mma(gl.convert_layout(p.to(gl.bfloat16), p_l), k_smem.index(z).slice(0, half, dim=1), acc,
                            is_async=True)  # fmt: skip
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        _publish(empty.index(0))  # a's left half
        mbarrier.wait(sync.index(1), phase)  # group 1's m1
        m1 = m_smem.load(row_l)
        m1u = gl.where(m1 == float("-inf"), 0.0, m1)
        beta = gl.exp(m0 - m1u)  # 0 while no lane has been valid (p and the sums are 0 then)
        p_smem.index(0).store((p * beta[:, None]).to(gl.bfloat16))
        fence_async_shared()
        _publish(sync.index(2))  # p_a, at m1
        l_i = l_i * beta
        acc = acc * gl.convert_layout(beta, gl.SliceLayout(1, o_l))[:, None]
        m_i = m1
        mbarrier.wait(sync.index(3), phase)  # p_b
        pv = warpgroup_mma(p_smem.index(1), k_smem.index(z + 1).slice(0, half, dim=1), acc, is_async=True)
        if j + 1 < n_pairs:  # the next pair's score, issued while p_b v_b runs
            s_next = _score_half(q_smem.index(z), k_smem.index(z), ready.index(0), phase ^ 1, 0, s, False, DIM)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(pv,))
            _publish(empty.index(2))  # b's left half
            s_next = _score_half(q_smem.index(z), k_smem.index(z), ready.index(1), phase ^ 1, 1, s_next, True, DIM)
            s = warpgroup_mma_wait(num_outstanding=0, deps=(s_next,))
            if PERSISTENT:
                if j + 2 == n_pairs:  # this group's last score of the item
                    _publish(q_empty)
        else:
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(pv,))
            _publish(empty.index(2))
    _finish(acc, m_i, l_i, l_smem, sync, i, 0, idx_ptr, sink_ptr, out_ptr, lse_ptr, m, h0, H, N, K, HAS_SINK, EMPTY_NAN,
            BLOCK_H, DIM, s_l, o_l, WARPS)  # fmt: skip


@gluon.jit
def _group1(q_smem, k_smem, p_smem, m_smem, l_smem, ready, empty, sync, codes, scales, kv_ptr, idx_ptr, sink_ptr,
            out_ptr, lse_ptr, q_ptr, q_ready, q_empty, M, m, h0, H, N, K, scale, block_bytes, scale_base,
            RPB: gl.constexpr, DATA_STRIDE: gl.constexpr, SCALE_STRIDE: gl.constexpr, GROUP: gl.constexpr,
            QDIMS: gl.constexpr, FP8_KV: gl.constexpr, HAS_SINK: gl.constexpr, EMPTY_NAN: gl.constexpr,
            BLOCK_H: gl.constexpr, BLOCK_N: gl.constexpr, DIM: gl.constexpr, CHUNK: gl.constexpr, WARPS: gl.constexpr,
            PROBE: gl.constexpr, PERSISTENT: gl.constexpr):  # fmt: skip
    """The odd tiles' scores; output columns [DIM / 2, DIM)."""
    _walk(_group1_row, q_smem, k_smem, p_smem, m_smem, l_smem, ready, empty, sync, q_ready, q_empty, idx_ptr, sink_ptr,
          out_ptr, lse_ptr, M, m, h0, H, N, K, scale, HAS_SINK, EMPTY_NAN, BLOCK_H, BLOCK_N, DIM, WARPS, PROBE,
          PERSISTENT)  # fmt: skip


@gluon.jit
def _group1_row(q_smem, k_smem, p_smem, m_smem, l_smem, ready, empty, sync, q_ready, q_empty, i, g0, idx_ptr,
                sink_ptr, out_ptr, lse_ptr, m, h0, H, N, K, scale, HAS_SINK: gl.constexpr, EMPTY_NAN: gl.constexpr,
                BLOCK_H: gl.constexpr, BLOCK_N: gl.constexpr, DIM: gl.constexpr, WARPS: gl.constexpr,
                PROBE: gl.constexpr, PERSISTENT: gl.constexpr):  # fmt: skip
    """Heads ``h0`` on of query row ``m``, the program's ``i``-th item, ``g0`` pairs of the ring before its own."""
    half: gl.constexpr = DIM // 2
    s_l: gl.constexpr = _S_L
    o_l: gl.constexpr = _O_L
    p_l: gl.constexpr = _P_L
    row_l: gl.constexpr = gl.SliceLayout(1, s_l)
    n_pairs, m_i, l_i, acc, s = _start(ready, empty, K, g0, 1, BLOCK_H, BLOCK_N, DIM, PROBE)
    if PERSISTENT:
        if PROBE == 2:
            _publish(q_empty)
        mbarrier.wait(q_ready, i & 1)
    for j in range(n_pairs):
        phase = (g0 + j) & 1
        z = j // n_pairs  # 0 (as in _group0)
        s = _score_half(q_smem.index(z), k_smem.index(z + 1), ready.index(3), phase, 1, s, False, DIM)
        s = _score_half(q_smem.index(z), k_smem.index(z + 1), ready.index(2), phase, 0, s, True, DIM)
        s = warpgroup_mma_wait(num_outstanding=0, deps=(s,))
        if PERSISTENT:
            if j + 1 == n_pairs:  # this group's last score of the item
                _publish(q_empty)
        valid = _lanes_valid(idx_ptr, m, 2 * j + 1, N, K, BLOCK_N, s_l)
        s = gl.where(valid[None, :], s * scale, float("-inf"))
        mbarrier.wait(sync.index(0), phase)  # group 0's m0
        m1 = gl.maximum(m_smem.load(row_l), gl.max(s, axis=1))
        BARRIER()  # every thread has read m0
        m_smem.store(m1)
        _publish(sync.index(1))
        m1u = gl.where(m1 == float("-inf"), 0.0, m1)
        alpha = gl.exp(m_i - m1u)
        p = gl.exp(s - m1u[:, None])
        l_i = l_i * alpha + gl.sum(p, axis=1)
        acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_l))[:, None]
        pb = gl.convert_layout(p.to(gl.bfloat16), p_l)
        pv = warpgroup_mma(pb, k_smem.index(z + 1).slice(half, half, dim=1), acc, is_async=True)
        p_smem.index(1).store(p.to(gl.bfloat16))
        mbarrier.wait(sync.index(2), phase)  # p_a, at m1
        pv = warpgroup_mma(p_smem.index(0), k_smem.index(z).slice(half, half, dim=1), pv, is_async=True)
        fence_async_shared()
        _publish(sync.index(3))  # p_b
        pb = warpgroup_mma_wait(num_outstanding=1, deps=(pb,))  # p_b v_b has ended, p_a v_a may not have
        _publish(empty.index(3))  # b's right half
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(pv,))
        _publish(empty.index(1))  # a's right half
        m_i = m1
    _finish(acc, m_i, l_i, l_smem, sync, i, 1, idx_ptr, sink_ptr, out_ptr, lse_ptr, m, h0, H, N, K, HAS_SINK, EMPTY_NAN,
            BLOCK_H, DIM, s_l, o_l, WARPS)  # fmt: skip


@gluon.jit
def _sparse_attention_pair_kernel(q_ptr, kv_ptr, idx_ptr, sink_ptr, out_ptr, lse_ptr, M, H, N, K, scale,
                                  block_bytes, scale_base, RPB: gl.constexpr, DATA_STRIDE: gl.constexpr,
                                  SCALE_STRIDE: gl.constexpr, GROUP: gl.constexpr, QDIMS: gl.constexpr,
                                  FP8_KV: gl.constexpr, HAS_SINK: gl.constexpr, EMPTY_NAN: gl.constexpr,
                                  BLOCK_H: gl.constexpr,
                                  BLOCK_N: gl.constexpr, DIM: gl.constexpr, CHUNK: gl.constexpr,
                                  WARPS: gl.constexpr, PRODUCER_REGS: gl.constexpr,
                                  CONSUMER_REGS: gl.constexpr, PROBE: gl.constexpr,
                                  PERSISTENT: gl.constexpr):  # fmt: skip
    h0 = gl.program_id(0) * BLOCK_H  # persistent: unused (the partitions walk the items)
    m = gl.program_id(1).to(gl.int64)
    smem_l: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    plain_1d: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [0])
    q_smem = gl.allocate_shared_memory(gl.bfloat16, [1, BLOCK_H, DIM], smem_l)
    k_smem = gl.allocate_shared_memory(gl.bfloat16, [2, BLOCK_N, DIM], smem_l)
    # FP8: the stages as slots of one chunk of codes (``_issue_half``), a half's columns 64 at a time being one
    # 128-byte swizzle row, [BLOCK_N rows] contiguous; two tiles' scales
    code_shape: gl.constexpr = [2 * 2 * (DIM // CHUNK), BLOCK_N, CHUNK // GROUP, GROUP]
    code_l: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [2, 1, 0])
    if _PUBLIC_REINTERPRET:
        codes = k_smem.reinterpret(gl.uint8, code_shape, code_l)
    else:
        codes = k_smem._reinterpret(gl.uint8, code_shape, code_l)
    if FP8_KV:
        scales = gl.allocate_shared_memory(gl.uint8, [2, BLOCK_N, scale_bytes(QDIMS, GROUP)],
                                           gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))  # fmt: skip
    else:
        scales = gl.allocate_shared_memory(gl.uint8, [1, 1, 4], gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
    p_smem = gl.allocate_shared_memory(gl.bfloat16, [2, BLOCK_H, BLOCK_N], smem_l)
    m_smem = gl.allocate_shared_memory(gl.float32, [BLOCK_H], plain_1d)
    l_smem = gl.allocate_shared_memory(gl.float32, [2, BLOCK_H], plain_1d)
    # ready / empty: stage 0's left and right halves, then stage 1's; sync: m0, m1, p_a, p_b, l of group 0, of 1
    ready = gl.allocate_shared_memory(gl.int64, [4, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [4, 1], mbarrier.MBarrierLayout())
    sync = gl.allocate_shared_memory(gl.int64, [6, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(4):
        mbarrier.init(ready.index(i), count=WARPS * 32)  # one arrival a producer thread, when its copies land
        mbarrier.init(empty.index(i), count=1)
    for i in gl.static_range(6):
        mbarrier.init(sync.index(i), count=1)
    q_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(q_ready, count=WARPS * 32)  # the producer's copies of an item's q have landed
    mbarrier.init(q_empty, count=2)  # both groups have done their last score of an item
    if not PERSISTENT:
        q_l: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [WARPS, 1], [1, 0])
        h = h0 + gl.arange(0, BLOCK_H, gl.SliceLayout(1, q_l))
        d = gl.arange(0, DIM, gl.SliceLayout(0, q_l))
        q_smem.index(0).store(gl.load(q_ptr + (m * H + h)[:, None] * DIM + d[None, :], mask=(h < H)[:, None],
                                      other=0.0))  # fmt: skip
    fence_async_shared()
    BARRIER()
    # every partition takes the same arguments (one release passes one tuple to all), written out in each call: a
    # tuple held in a variable loses its constexpr elements
    if WS_API == 0:
        gl.warp_specialize(
            [
                (_group0, (q_smem, k_smem, p_smem, m_smem, l_smem, ready, empty, sync, codes, scales, kv_ptr, idx_ptr,
                           sink_ptr, out_ptr, lse_ptr, q_ptr, q_ready, q_empty, M, m, h0, H, N, K, scale, block_bytes,
                           scale_base, RPB, DATA_STRIDE, SCALE_STRIDE, GROUP, QDIMS, FP8_KV, HAS_SINK, EMPTY_NAN,
                           BLOCK_H, BLOCK_N, DIM, CHUNK, WARPS, PROBE, PERSISTENT)),
                (_group1, (q_smem, k_smem, p_smem, m_smem, l_smem, ready, empty, sync, codes, scales, kv_ptr, idx_ptr,
                           sink_ptr, out_ptr, lse_ptr, q_ptr, q_ready, q_empty, M, m, h0, H, N, K, scale, block_bytes,
                           scale_base, RPB, DATA_STRIDE, SCALE_STRIDE, GROUP, QDIMS, FP8_KV, HAS_SINK, EMPTY_NAN,
                           BLOCK_H, BLOCK_N, DIM, CHUNK, WARPS, PROBE, PERSISTENT)),
                (_producer, (q_smem, k_smem, p_smem, m_smem, l_smem, ready, empty, sync, codes, scales, kv_ptr, idx_ptr,
                             sink_ptr, out_ptr, lse_ptr, q_ptr, q_ready, q_empty, M, m, h0, H, N, K, scale, block_bytes,
                             scale_base, RPB, DATA_STRIDE, SCALE_STRIDE, GROUP, QDIMS, FP8_KV, HAS_SINK, EMPTY_NAN,
                             BLOCK_H, BLOCK_N, DIM, CHUNK, WARPS, PROBE, PERSISTENT)),
            ],
            [WARPS, WARPS],
            [CONSUMER_REGS, PRODUCER_REGS],
        )  # fmt: skip
    elif WS_API == 1:
        gl.warp_specialize(
            (q_smem, k_smem, p_smem, m_smem, l_smem, ready, empty, sync, codes, scales, kv_ptr, idx_ptr, sink_ptr,
             out_ptr, lse_ptr, q_ptr, q_ready, q_empty, M, m, h0, H, N, K, scale, block_bytes, scale_base, RPB,
             DATA_STRIDE, SCALE_STRIDE, GROUP, QDIMS, FP8_KV, HAS_SINK, EMPTY_NAN, BLOCK_H, BLOCK_N, DIM, CHUNK, WARPS,
             PROBE, PERSISTENT),
            _group0,
            (q_smem, k_smem, p_smem, m_smem, l_smem, ready, empty, sync, codes, scales, kv_ptr, idx_ptr, sink_ptr,
             out_ptr, lse_ptr, q_ptr, q_ready, q_empty, M, m, h0, H, N, K, scale, block_bytes, scale_base, RPB,
             DATA_STRIDE, SCALE_STRIDE, GROUP, QDIMS, FP8_KV, HAS_SINK, EMPTY_NAN, BLOCK_H, BLOCK_N, DIM, CHUNK, WARPS,
             PROBE, PERSISTENT),
            [_group1, _producer],
            [WARPS, WARPS],
            [CONSUMER_REGS, PRODUCER_REGS],
        )  # fmt: skip
    else:
        gl.warp_specialize(
            (q_smem, k_smem, p_smem, m_smem, l_smem, ready, empty, sync, codes, scales, kv_ptr, idx_ptr, sink_ptr,
             out_ptr, lse_ptr, q_ptr, q_ready, q_empty, M, m, h0, H, N, K, scale, block_bytes, scale_base, RPB,
             DATA_STRIDE, SCALE_STRIDE, GROUP, QDIMS, FP8_KV, HAS_SINK, EMPTY_NAN, BLOCK_H, BLOCK_N, DIM, CHUNK, WARPS,
             PROBE, PERSISTENT),
            _group0,
            [_group1, _producer],
            [WARPS, WARPS],
            [CONSUMER_REGS, PRODUCER_REGS],
        )  # fmt: skip


PROBES = {
    1: "the producer loads nothing (it only signals each half): the consumers alone",
    2: "the consumers compute nothing (they only wait for and free each half): the producer alone",
}
"""The kernel's timing probes (``sparse_attention_pair(..., probe=k)``, ``python -m fast.cache.ws_probes --kernel
pair``), as ``attention_ws.PROBES``: each leaves one part of the work out; their results are wrong."""


@dataclasses.dataclass(frozen=True)
class Pair:
    """``config`` for ``fast.cache.sparse_attention``: run this kernel; ``persistent`` (the default path's form), on
    a grid of one program an SM, each walking (row, head block) items, as ``attention_ws.Tile.persistent``; False:
    one program an item."""

    persistent: bool = True


def available(call: AttentionArgs) -> bool:
    """Whether this kernel can run ``call``: ``supports`` it, on an sm_90 GPU."""
    return call.q.is_cuda and torch.cuda.get_device_capability(call.q.device)[0] == 9 and supports(call)


def default_for(call: AttentionArgs) -> bool:
    """Whether the default path runs ``call`` on this kernel: ``available`` and on BF16 rows. FP8 caches stay on
    the warp-specialized kernel until this kernel's FP8 producer is timed faster there (docs/targets.md, section
    2); ``Pair()`` runs them here."""
    return call.kv_cache is None and available(call)


def supports(call: AttentionArgs) -> bool:
    """Whether ``call`` is a case this kernel serves: the warp-specialized kernel's (bf16 q, D = dv = 512, bf16
    probabilities, KV as BF16 rows or in a V4.1 or V4 FP8 cache)."""
    return ws_supports(call)


KV_KEYS = ("RPB", "DATA_STRIDE", "SCALE_STRIDE", "GROUP", "QDIMS", "FP8_KV")
"""The KV constexprs this kernel takes of ``attention_ws.kv_constants``."""


def constants(has_sink: bool, empty_nan: bool, probe: int = 0, persistent: bool = False,
              kv: dict[str, int | bool] | None = None) -> dict[str, int | bool]:  # fmt: skip
    """The kernel's constexprs; ``kv``: ``attention_ws.kv_constants`` of the call's KV (default: BF16 rows)."""
    kv = kv_constants(None, 1) if kv is None else kv
    return dict(**{k: kv[k] for k in KV_KEYS}, HAS_SINK=has_sink, EMPTY_NAN=empty_nan, BLOCK_H=BLOCK_H,
                BLOCK_N=BLOCK_N, DIM=DIM, CHUNK=CHUNK, WARPS=WARPS, PRODUCER_REGS=PRODUCER_REGS,
                CONSUMER_REGS=CONSUMER_REGS, PROBE=probe, PERSISTENT=persistent)  # fmt: skip


def sparse_attention_pair(
    call: AttentionArgs, *, probe: int = 0, persistent: bool = Pair.persistent, programs: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Launch on a checked call that ``supports`` accepts (ValueError otherwise). ``probe`` (``PROBES``; timing
    only, wrong results) leaves one part of the work out; ``persistent`` (``Pair``'s default): one program an SM
    walks the (row, head block) items (``programs`` sets another count); False: one program an item."""
    if probe not in PROBES and probe != 0:
        raise ValueError(f"probe: must be 0 or one of {sorted(PROBES)}, got {probe!r}")
    if not isinstance(persistent, bool):
        raise TypeError(f"persistent: must be a bool, got {type(persistent).__name__}")
    check_programs(programs)
    if not supports(call):
        raise ValueError("call: the paired-group kernel serves bf16 q at D = dv = 512 with bf16 probabilities and "
                         "KV as BF16 rows or in a V4.1 or V4 FP8 cache")  # fmt: skip
    if not available(call):
        raise ValueError(f"call: the paired-group kernel runs on an sm_90 GPU, got tensors on {call.q.device}")
    q, out, lse, kv = call.q, call.out, call.lse, call.kv
    M, H, _ = q.shape
    if M == 0 or H == 0:
        return out, lse
    K = call.indices.shape[1]
    if call.kv_cache is not None and K == 1:
        # Triton specializes K = 1 as a constant; the second tile's lanes are then known to lie past K, and their
        # fully masked code copies lower with no known alignment (Triton 3.6 refuses them: cp.async under 4
        # bytes). An invalid second lane gives the same rows.
        call = dataclasses.replace(call, indices=torch.nn.functional.pad(call.indices, (0, 1), value=-1))
        K = 2
    persistent = persistent and K > 0  # with no lanes no score would free q: one program an item gives the rows
    layout, n, block_bytes, scale_base = kv_launch(call)
    grid = (triton.cdiv(H, BLOCK_H), M)
    if persistent:
        grid = (min(grid[0] * M, programs or sm_count(q.device)), 1)
    _sparse_attention_pair_kernel[grid](
        q, kv, call.indices, call.sink if call.sink is not None else out, out, lse, M, H, n, K, float(call.scale),
        block_bytes, scale_base, **constants(call.sink is not None, call.empty_nan, probe, persistent, layout),
        num_warps=WARPS,
    )  # fmt: skip
    return out, lse
