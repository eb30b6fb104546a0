# mypy: disable-error-code="no-untyped-def,untyped-decorator"
"""Index logits ``I[m, j] = sum_h w[m, h] * relu(q[m, h] . k[j])`` in Triton (docs/indexing-kernels.md).

    index_logits(q, weights, k, lengths, *, k_scale=None, q_scale=None, validate=True, config=None) -> f32[M, N]
    paged_index_logits(q, weights, cache, block_table, lengths, *, rows_per_block, width=None,
                       q_scale=None, validate=True, config=None)                                   -> f32[B*T, W]

One program owns a tile of ``BQ`` queries (all their heads: ``BQ * HP`` columns, the queries' rows of
``q[M, H, D]`` are contiguous) and a range of key rows, which it walks ``BK`` rows at a time:

    S[j, (m, h)] = K[j, :] . Q[(m, h), :]          tl.dot, [BK, DP] x [DP, BQ*HP], bf16 in, f32 accumulate
    I[j, m] = sum_h w[m, h] * relu(S[j, (m, h)])   in registers, f32: reshape [BK, BQ, HP], sum over heads
    I[j, m] *= scale[j]                            FP8 keys: the row's scale, after the head sum (below)

Keys are the dot's first operand so each key tile is loaded once for every query of the tile; the head-sum
runs along the accumulator's columns. A query sees rows ``j < lengths[m]``: a key row is loaded only when some
query of the tile sees it, lanes past a query's length are written -inf, and a tile past every query's length
only writes -inf. FP8 keys (e4m3 codes with one float32 scale per row) are decoded with integer operations into
exact bf16 values, so the dot itself is the bf16 one. FP8 queries (e4m3 codes with one positive float32 scale
per query head) against FP8 keys: the dot runs on the e4m3 operands themselves (sm_89+ tensor cores, float32
accumulation) and the query scales are folded into the head weights (``relu(s * x) = s * relu(x)`` for s > 0).
Key scales leave the relu the same way, multiplying the head sums, in a program whose rows' scales are all finite
and non-negative (any quantizer's; it reads them once first); a program with another scale multiplies each dot
first, as the definition reads.
float32 inputs use an IEEE float32 dot (checks only).

Paged layout (decode): query ``(b, t)`` reads its rows through ``block_table[b]``: row j lives in physical block
``block_table[b, j // Bc]`` at row ``j % Bc``; addresses are computed in int64. A block id outside the cache
is never dereferenced: its rows read as NaN.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl

from fast import config_checks, fitting, l2
from fast.indexing import validate as v


@dataclass(frozen=True)
class LogitsConfig:
    """Tile sizes: ``columns`` = queries x padded heads per tile (``BQ = columns // HP``), ``block_k`` key rows
    per step, ``split`` the most key rows one program walks (0: decided from the SM count), warps, stages."""

    columns: int = 256
    block_k: int = 64
    split: int = 0
    num_warps: int = 8
    num_stages: int = 2
    hoist: bool = True
    """Let the compiler hoist loop-invariant code (the query tile's shared-memory descriptors) out of the key
    loop; False keeps it in the loop (``tl.range(disable_licm=True)``): fewer registers a thread."""
    relu_max: bool = True
    """relu as one NaN-keeping ``max``; False: a compare and a select (the same values, NaN kept). On the H200
    under Triton 3.6 the max is faster in the flat kernels and slower in the paged bf16 one at B 128, next_n 2,
    32K (0.594 against 0.495 ms; docs/targets.md)."""
    prefetch: int = 0
    """Paged kernels, compiled only: each step asks the L2 cache for the key rows (and FP8 scales) of the step
    this many steps ahead, through the block table (``fast.l2``; a hint that changes no result); 0: none. On in
    the FP8-query default (``PAGED_Q8``); the bf16 and FP8-key paged kernels gain 1% or lose with it."""
    fold: bool = True
    """FP8 keys: where every key row a program reads has a finite scale >= 0 (one read of its rows' scales
    first), multiply the head sums by the scales (one product a key and query); False, or another scale: scale
    every dot (one product a key, query and head)."""

    def __post_init__(self) -> None:
        config_checks.powers_of_two(self, "columns", "block_k", "num_warps")
        config_checks.at_least(self, num_stages=1, split=0, prefetch=0)


COMPILED = LogitsConfig()
"""bf16 keys, 64 heads: 4 queries x 64 heads per tile, 64 keys per step, 8 warps, 2 stages: 124 registers and
97 KiB of shared memory (triton 3.6, sm_90), so two programs fit one SM."""
PAGED = LogitsConfig(relu_max=False)
"""Paged decode, bf16 keys: ``COMPILED`` with relu as a compare and a select (0.495 ms against 0.594 with the
max at B 128, next_n 2, 32K, on the H200 under Triton 3.6: results/sweeps/run6_155c32a)."""
COMPILED_FP8 = LogitsConfig(columns=256, num_stages=3)
"""FP8 keys, bf16 queries: 4 queries x 64 heads, 3 stages: 4.75 ms against 7.34 for 2 queries, 2 stages (the
H200 sweep on 4096 x 16384)."""
COMPILED_Q8 = LogitsConfig(columns=256, block_k=64, num_warps=4, num_stages=3)
"""FP8 queries and keys: an e4m3 dot (no decode), 4 queries x 64 heads per tile, one warp group (236 registers):
the fastest of the benchmark's sweep on the H200 (results/bench.md, "Triton tile variants")."""
PAGED_Q8 = LogitsConfig(block_k=128, num_warps=4, num_stages=2, fold=False, prefetch=1, hoist=False)
"""Paged decode with FP8 queries: 128 rows (two 64-row blocks) a step, one warp group, every dot scaled (the
fold's first read of the scales through the block table costs more than it saves here: 0.407 against 0.364 ms),
the next step's rows asked of L2 with the loop-invariant code kept in the loop: 0.322 ms against 0.368 without the
prefetch and 0.328 with it hoisted, at B 128, next_n 2, 32K on the H200 (results/sweeps/run7_6e20deb)."""
SCALES_A_STEP = 1024
"""Key scales a step of the check that decides a program's fold (``LogitsConfig.fold``)."""
INTERPRETED = LogitsConfig(columns=32, block_k=16, split=32, num_warps=1, num_stages=1)


def _fallbacks(cfg: LogitsConfig, paged: bool = False) -> list[LogitsConfig]:
    """``cfg``, one stage, then half the key rows a step (to 16, the dot's least), then half the columns (to 16;
    not paged, whose tile holds one request's queries): what ``fitting.first_fitting`` tries when a wide
    dimension (512) overflows the shared memory."""

    def narrower(c: LogitsConfig) -> LogitsConfig | None:
        if c.block_k > 16:
            return dataclasses.replace(c, block_k=c.block_k // 2)
        return dataclasses.replace(c, columns=c.columns // 2) if c.columns > 16 and not paged else None

    return fitting.smaller(cfg, narrower)


def default_config(fp8: bool = False, q8: bool = False, paged: bool = False) -> LogitsConfig:
    if v.interpreted():
        return INTERPRETED
    if q8:
        return PAGED_Q8 if paged else COMPILED_Q8
    if fp8:
        return COMPILED_FP8
    return PAGED if paged else COMPILED


@triton.jit
def _e4m3_to_f32(code):
    """e4m3fn codes (uint8) -> float32, exactly: the 7 magnitude bits placed in a float32's exponent and
    mantissa fields, times 2**120 (rebiases the exponent; subnormals come out right), sign put back;
    0x7F / 0xFF are NaN."""
    c = code.to(tl.uint32)
    magnitude = ((c & 0x7F) << 20).to(tl.float32, bitcast=True) * 1.329227995784916e36
    value = tl.where((c & 0x80) != 0, -magnitude, magnitude)
    return tl.where((c & 0x7F) == 0x7F, float("nan"), value)


@triton.jit
def _head_sum(s, w, BK: tl.constexpr, BQ: tl.constexpr, HP: tl.constexpr, RELU_MAX: tl.constexpr):
    """[BK, BQ * HP] dots -> [BK, BQ]: sum over heads of w * relu(s). relu keeps NaN, as torch's does: one
    NaN-keeping max (``RELU_MAX``) or a compare and a select (``LogitsConfig.relu_max``)."""
    if RELU_MAX:
        r = tl.maximum(s, 0.0, propagate_nan=tl.PropagateNan.ALL)
    else:
        r = tl.where(s < 0.0, 0.0, s)
    return tl.sum(tl.reshape(r * w[None, :], (BK, BQ, HP)), axis=2)


@triton.jit
def _scaled_head_sum(s, scale, w, BK: tl.constexpr, BQ: tl.constexpr, HP: tl.constexpr, FOLDED: tl.constexpr,
                     RELU_MAX: tl.constexpr):  # fmt: skip
    """FP8 keys: [BK, BQ * HP] dots of unscaled keys and ``scale``: [BK] their rows' scales -> [BK, BQ]: sum over
    heads of w * relu(scale * s). ``FOLDED`` (every scale finite and >= 0, which the caller has checked): the
    scale leaves the relu, ``relu(c * x) = c * relu(x)``, and multiplies the [BK, BQ] sums, one product a (key,
    query) pair instead of one a (key, query, head). Otherwise (a negative scale, which the contract allows, or
    a non-finite one) every dot is scaled first."""
    if FOLDED:
        out = _head_sum(s, w, BK, BQ, HP, RELU_MAX) * scale[:, None]
    else:
        out = _head_sum(s * scale[:, None], w, BK, BQ, HP, RELU_MAX)
    return out


@triton.jit
def _foldable(scale, ok):
    """1 when every scale where ``ok`` is finite and >= 0 (the fold's condition), else 0."""
    return 1 - tl.max(tl.where(ok & ~((scale >= 0.0) & (scale < float("inf"))), 1, 0), 0)


@triton.jit
def _dot(keys, qt, F32: tl.constexpr, UPCAST: tl.constexpr):
    if F32:
        return tl.dot(keys, qt, input_precision="ieee")
    if UPCAST:
        return tl.dot(keys.to(tl.float32), qt.to(tl.float32), input_precision="ieee")
    return tl.dot(keys, qt)


@triton.jit
def _queries(q_ptr, qs_ptr, w_ptr, rows, qcol, d, D, Q8: tl.constexpr, UPCAST: tl.constexpr):
    """The tile's queries transposed ([DP, BQ * HP], the dot's second operand) and their head weights: FP8
    queries as e4m3 (decoded to float32 in the interpreter), their positive scales folded into the weights."""
    at = q_ptr + rows[:, None] * D + d[None, :]
    mask = qcol[:, None] & (d[None, :] < D)
    w = tl.load(w_ptr + rows, mask=qcol, other=0.0).to(tl.float32)
    if Q8:
        codes = tl.load(at, mask=mask, other=0)
        if UPCAST:
            q = _e4m3_to_f32(codes)
        else:
            q = codes.to(tl.float8e4nv, bitcast=True)
        w = w * tl.load(qs_ptr + rows, mask=qcol, other=0.0)
    else:
        q = tl.load(at, mask=mask, other=0.0)
    return tl.trans(q), w


@triton.jit
def _fp8_keys(codes, Q8: tl.constexpr, UPCAST: tl.constexpr):
    """e4m3 key codes as the dot's operand: e4m3 itself against FP8 queries (compiled), else exact bf16
    (float32 in the interpreter against FP8 queries)."""
    if Q8:
        if UPCAST:
            keys = _e4m3_to_f32(codes)
        else:
            keys = codes.to(tl.float8e4nv, bitcast=True)
    else:
        keys = _e4m3_to_f32(codes).to(tl.bfloat16)
    return keys


@triton.jit
def _hide_rest(out_rows, seen, j_lo, j_hi, query_ok, BK: tl.constexpr, BQ: tl.constexpr):
    """-inf into the program's rows ``max(seen, j_lo) .. j_hi - 1``, which no query of the tile sees, for the
    tile's queries (``out_rows``: [1, BQ] pointers to their output rows; ``query_ok``: [BQ])."""
    hidden = tl.full((BK, BQ), float("-inf"), tl.float32)
    for j0 in range(tl.maximum(seen, j_lo), j_hi, BK):
        j = j0 + tl.arange(0, BK)
        tl.store(out_rows + j[:, None], hidden, mask=(j < j_hi)[:, None] & query_ok[None, :])


@triton.jit
def _flat_rows(k_ptr, scale_ptr, qt, w, lens, out_rows, query_ok, j_lo, seen, d, D, BQ: tl.constexpr,
               HP: tl.constexpr, BK: tl.constexpr, FP8: tl.constexpr, Q8: tl.constexpr, F32: tl.constexpr,
               UPCAST: tl.constexpr, EVEN_D: tl.constexpr, NO_LICM: tl.constexpr, FOLDED: tl.constexpr,
               RELU_MAX: tl.constexpr):  # fmt: skip
    """The flat kernel's walk over key rows ``j_lo .. seen - 1``, ``BK`` at a time: dot, head sum, store."""
    for j0 in tl.range(j_lo, seen, BK, disable_licm=NO_LICM):
        j = j0 + tl.arange(0, BK)
        live = j < seen
        kmask = live[:, None] & ((d[None, :] < D) | EVEN_D)
        if FP8:
            codes = tl.load(k_ptr + j.to(tl.int64)[:, None] * D + d[None, :], mask=kmask, other=0)
            keys = _fp8_keys(codes, Q8, UPCAST)
        else:
            keys = tl.load(k_ptr + j.to(tl.int64)[:, None] * D + d[None, :], mask=kmask, other=0.0)
        s = _dot(keys, qt, F32, UPCAST)
        if FP8:
            logit = _scaled_head_sum(s, tl.load(scale_ptr + j, mask=live, other=0.0), w, BK, BQ, HP, FOLDED, RELU_MAX)
        else:
            logit = _head_sum(s, w, BK, BQ, HP, RELU_MAX)
        logit = tl.where(j[:, None] < lens[None, :], logit, float("-inf"))
        tl.store(out_rows + j[:, None], logit, mask=live[:, None] & query_ok[None, :])


@triton.jit
def _logits_kernel(
    q_ptr,
    qs_ptr,
    w_ptr,
    k_ptr,
    scale_ptr,
    len_ptr,
    out_ptr,
    M,
    N,
    H,
    D,
    split,
    BQ: tl.constexpr,
    HP: tl.constexpr,
    DP: tl.constexpr,
    BK: tl.constexpr,
    FP8: tl.constexpr,
    Q8: tl.constexpr,
    F32: tl.constexpr,
    UPCAST: tl.constexpr,
    EVEN_D: tl.constexpr,
    NO_LICM: tl.constexpr,
    RELU_MAX: tl.constexpr,
    FOLD: tl.constexpr,
    SCALES_A_STEP: tl.constexpr,
):
    q0 = tl.program_id(0) * BQ
    j_lo = tl.program_id(1) * split
    j_hi = tl.minimum(j_lo + split, N)
    col = tl.arange(0, BQ * HP)
    qi = q0 + col // HP
    head = col % HP
    d = tl.arange(0, DP)
    qcol = (qi < M) & (head < H)
    qt, w = _queries(q_ptr, qs_ptr, w_ptr, qi.to(tl.int64) * H + head, qcol, d, D, Q8, UPCAST)
    qrow = q0 + tl.arange(0, BQ)
    lens = tl.load(len_ptr + qrow, mask=qrow < M, other=0).to(tl.int32)
    lens = tl.minimum(tl.maximum(lens, 0), N)
    seen = tl.minimum(tl.max(lens, 0), j_hi)
    out_rows = out_ptr + qrow.to(tl.int64)[None, :] * N
    folded = 0  # one loop or the other for the whole range (Triton 3.6 pipelines no branch inside the loop)
    if FP8 & FOLD:
        folded = 1
        for j0 in range(j_lo, seen, SCALES_A_STEP):
            j = j0 + tl.arange(0, SCALES_A_STEP)
            folded = folded & _foldable(tl.load(scale_ptr + j, mask=j < seen, other=0.0), j < seen)
    if folded == 1:
        _flat_rows(k_ptr, scale_ptr, qt, w, lens, out_rows, qrow < M, j_lo, seen, d, D, BQ, HP, BK, FP8, Q8, F32,
                   UPCAST, EVEN_D, NO_LICM, True, RELU_MAX)  # fmt: skip
    else:
        _flat_rows(k_ptr, scale_ptr, qt, w, lens, out_rows, qrow < M, j_lo, seen, d, D, BQ, HP, BK, FP8, Q8, F32,
                   UPCAST, EVEN_D, NO_LICM, False, RELU_MAX)  # fmt: skip
    _hide_rest(out_rows, seen, j_lo, j_hi, qrow < M, BK, BQ)


@triton.jit
def _paged_row(table, j, seen, rows_per_block, num_blocks):
    """Logical rows ``j`` (those below ``seen``) -> (physical block i64, found: a block id inside the cache, row
    within the block i64)."""
    live = j < seen
    block = tl.load(table + j // rows_per_block, mask=live, other=-1).to(tl.int64)
    return block, live & (block >= 0) & (block < num_blocks), (j % rows_per_block).to(tl.int64)


@triton.jit
def _paged_key_at(cache_ptr, block, within, rows_per_block, D, FP8: tl.constexpr):
    """Where row ``within`` of ``block`` starts: FP8, its e4m3 codes (a block holds its rows' codes, then their
    float32 scales: ``D + 4`` bytes a row); else its ``D`` elements."""
    if FP8:
        at = cache_ptr + block * rows_per_block * (D + 4) + within * D
    else:
        at = cache_ptr + (block * rows_per_block + within) * D
    return at


@triton.jit
def _paged_scale_at(cache_ptr, block, within, rows_per_block, D):
    """Where row ``within`` of ``block`` keeps its float32 scale: after the block's rows of e4m3 codes."""
    base = block * rows_per_block * (D + 4)
    return (cache_ptr + base + rows_per_block * D + within * 4).to(tl.pointer_type(tl.float32))


@triton.jit
def _prefetch_step(cache_ptr, table, j0, seen, D, rows_per_block, num_blocks, BK: tl.constexpr, FP8: tl.constexpr,
                   ROW_BYTES: tl.constexpr, ELEMENT_BYTES: tl.constexpr, PREFETCH_POINTS: tl.constexpr):  # fmt: skip
    """L2 prefetch of logical rows ``j0 .. j0 + BK - 1`` (those below ``seen`` in a block inside the cache):
    each row's ``ROW_BYTES`` of keys and, for FP8 keys, its scale (``fast.l2``)."""
    block, found, within = _paged_row(table, j0 + tl.arange(0, BK), seen, rows_per_block, num_blocks)
    rows = _paged_key_at(cache_ptr, block, within, rows_per_block, D, FP8)
    l2.prefetch_row_lines(rows, ROW_BYTES, found, ELEMENT_BYTES, PREFETCH_POINTS)
    if FP8:
        l2.prefetch_l2(_paged_scale_at(cache_ptr, block, within, rows_per_block, D), found)


@triton.jit
def _paged_rows(cache_ptr, table, qt, w, lens, out_rows, query_ok, j_lo, seen, d, D, rows_per_block, num_blocks,
                BQ: tl.constexpr, HP: tl.constexpr, BK: tl.constexpr, FP8: tl.constexpr, Q8: tl.constexpr,
                F32: tl.constexpr, UPCAST: tl.constexpr, EVEN_D: tl.constexpr, NO_LICM: tl.constexpr,
                FOLDED: tl.constexpr, RELU_MAX: tl.constexpr, PREFETCH: tl.constexpr, ROW_BYTES: tl.constexpr,
                ELEMENT_BYTES: tl.constexpr, PREFETCH_POINTS: tl.constexpr):  # fmt: skip
    """The paged kernel's walk over logical rows ``j_lo .. seen - 1``, ``BK`` at a time through the block
    table; rows in a block outside the cache read as NaN."""
    for j0 in tl.range(j_lo, seen, BK, disable_licm=NO_LICM):
        if PREFETCH > 0:
            _prefetch_step(cache_ptr, table, j0 + PREFETCH * BK, seen, D, rows_per_block, num_blocks, BK, FP8,
                           ROW_BYTES, ELEMENT_BYTES, PREFETCH_POINTS)  # fmt: skip
        j = j0 + tl.arange(0, BK)
        live = j < seen
        block, ok, within = _paged_row(table, j, seen, rows_per_block, num_blocks)
        kmask = ok[:, None] & ((d[None, :] < D) | EVEN_D)
        rows = _paged_key_at(cache_ptr, block, within, rows_per_block, D, FP8)
        if FP8:
            keys = _fp8_keys(tl.load(rows[:, None] + d[None, :], mask=kmask, other=0), Q8, UPCAST)
            scale = tl.load(_paged_scale_at(cache_ptr, block, within, rows_per_block, D), mask=ok, other=0.0)
        else:
            keys = tl.load(rows[:, None] + d[None, :], mask=kmask, other=0.0)
        s = _dot(keys, qt, F32, UPCAST)
        if FP8:
            logit = _scaled_head_sum(s, scale, w, BK, BQ, HP, FOLDED, RELU_MAX)
        else:
            logit = _head_sum(s, w, BK, BQ, HP, RELU_MAX)
        logit = tl.where(ok[:, None], logit, float("nan"))
        logit = tl.where(j[:, None] < lens[None, :], logit, float("-inf"))
        tl.store(out_rows + j[:, None], logit, mask=live[:, None] & query_ok[None, :])


@triton.jit
def _paged_logits_kernel(
    q_ptr,
    qs_ptr,
    w_ptr,
    cache_ptr,
    table_ptr,
    len_ptr,
    out_ptr,
    T,
    H,
    D,
    W,
    table_width,
    num_blocks,
    rows_per_block,
    split,
    BQ: tl.constexpr,
    HP: tl.constexpr,
    DP: tl.constexpr,
    BK: tl.constexpr,
    FP8: tl.constexpr,
    Q8: tl.constexpr,
    F32: tl.constexpr,
    UPCAST: tl.constexpr,
    EVEN_D: tl.constexpr,
    NO_LICM: tl.constexpr,
    RELU_MAX: tl.constexpr,
    FOLD: tl.constexpr,
    SCALES_A_STEP: tl.constexpr,
    PREFETCH: tl.constexpr,
    ROW_BYTES: tl.constexpr,
    ELEMENT_BYTES: tl.constexpr,
    PREFETCH_POINTS: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    j_lo = tl.program_id(1) * split
    j_hi = tl.minimum(j_lo + split, W)
    col = tl.arange(0, BQ * HP)
    t = col // HP
    head = col % HP
    d = tl.arange(0, DP)
    qcol = (t < T) & (head < H)
    qt, w = _queries(q_ptr, qs_ptr, w_ptr, (b * T + t) * H + head, qcol, d, D, Q8, UPCAST)
    tq = tl.arange(0, BQ)
    lens = tl.load(len_ptr + b * T + tq, mask=tq < T, other=0).to(tl.int32)
    lens = tl.minimum(tl.maximum(lens, 0), tl.minimum(W, table_width * rows_per_block))
    seen = tl.minimum(tl.max(lens, 0), j_hi)
    out_rows = out_ptr + (b * T + tq)[None, :] * W
    table = table_ptr + b * table_width
    folded = 0  # as in the flat kernel: the scales of the rows this program reads, then one loop
    if FP8 & FOLD:
        folded = 1
        for j0 in range(j_lo, seen, SCALES_A_STEP):
            j = j0 + tl.arange(0, SCALES_A_STEP)
            block, found, within = _paged_row(table, j, seen, rows_per_block, num_blocks)
            scale = tl.load(_paged_scale_at(cache_ptr, block, within, rows_per_block, D), mask=found, other=0.0)
            folded = folded & _foldable(scale, found)
    if folded == 1:
        _paged_rows(cache_ptr, table, qt, w, lens, out_rows, tq < T, j_lo, seen, d, D, rows_per_block, num_blocks, BQ,
                    HP, BK, FP8, Q8, F32, UPCAST, EVEN_D, NO_LICM, True, RELU_MAX, PREFETCH, ROW_BYTES,
                    ELEMENT_BYTES, PREFETCH_POINTS)  # fmt: skip
    else:
        _paged_rows(cache_ptr, table, qt, w, lens, out_rows, tq < T, j_lo, seen, d, D, rows_per_block, num_blocks, BQ,
                    HP, BK, FP8, Q8, F32, UPCAST, EVEN_D, NO_LICM, False, RELU_MAX, PREFETCH, ROW_BYTES,
                    ELEMENT_BYTES, PREFETCH_POINTS)  # fmt: skip
    _hide_rest(out_rows, seen, j_lo, j_hi, tq < T, BK, BQ)


def _pow2(x: int, least: int) -> int:
    return max(least, 1 << max(0, (x - 1).bit_length()))


def _split(rows: int, tiles: int, block_k: int, device: torch.device, chosen: int) -> int:
    """Key rows per program: all of them, unless fewer than ~4 programs per SM would run."""
    if chosen:
        return max(block_k, chosen // block_k * block_k)
    sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4
    parts = max(1, min(-(-4 * sms // max(tiles, 1)), -(-rows // block_k)))
    per_part = -(-rows // parts)
    return max(block_k, -(-per_part // block_k) * block_k)


def _constants(
    cfg: LogitsConfig, tile: tuple[int, int, int], fp8: bool, dtype: torch.dtype, dim: int, q8: bool = False
) -> dict[str, Any]:
    """The kernels' compile-time constants (tile ``(BQ, HP, DP)``, key kind, dot precision) and launch
    options."""
    bq, hp, dp = tile
    return dict(
        BQ=bq,
        HP=hp,
        DP=dp,
        BK=cfg.block_k,
        FP8=fp8,
        Q8=q8,
        F32=dtype == torch.float32,
        UPCAST=v.interpreted(),
        EVEN_D=dim == dp,
        NO_LICM=not cfg.hoist,
        RELU_MAX=cfg.relu_max,
        FOLD=cfg.fold,
        SCALES_A_STEP=SCALES_A_STEP,
        num_warps=cfg.num_warps,
        num_stages=cfg.num_stages,
    )


def paged_prefetch_constants(prefetch: int, dim: int, element_bytes: int) -> dict[str, int]:
    """The paged kernel's prefetch constexprs: steps ahead (0 under the interpreter, which has no inline
    assembly), a key row's bytes, its element size and the addresses a row takes (``fast.l2``)."""
    return l2.constants(0 if v.interpreted() else prefetch, dim * element_bytes, element_bytes)


def _tile(heads: int, dim: int, queries: int, cfg: LogitsConfig, q8: bool = False) -> tuple[int, int, int]:
    """(BQ, HP, DP): heads and dimension padded to powers of two >= 16 (tl.dot's least size; an e4m3 dot's
    reduction dimension >= 32)."""
    hp, dp = _pow2(heads, 16), _pow2(dim, 32 if q8 else 16)
    bq = max(1, min(cfg.columns // hp, _pow2(queries, 1)))
    return bq, hp, dp


def index_logits(
    q: torch.Tensor,
    weights: torch.Tensor,
    k: torch.Tensor,
    lengths: torch.Tensor,
    *,
    k_scale: torch.Tensor | None = None,
    q_scale: torch.Tensor | None = None,
    validate: bool = True,
    config: LogitsConfig | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Gathered (prefill) index logits: f32[M, N], -inf at ``j >= lengths[m]``.

    q: bf16|f32[M, H, D]; weights: f32|bf16[M, H]; k: same dtype as q [N, D], or e4m3 codes
    (uint8|float8_e4m3fn)[N, D] with ``k_scale``: f32[N]; lengths: i32|i64[M] in [0, N]. FP8 queries: q holds
    e4m3 codes and ``q_scale``: f32[M, H] positive scales (query ``(m, h)`` is ``q_scale[m, h] * e4m3(q[m, h])``),
    against FP8 keys; the dot then runs on e4m3 operands.
    """
    a = v.check_logits(q, weights, k, lengths, k_scale=k_scale, q_scale=q_scale, validate=validate)
    v.backend_for("triton", q.device)
    out = v.output(out, (a.queries, a.rows), torch.float32, q.device)
    if a.queries == 0 or a.rows == 0:
        return out
    codes = k.view(torch.uint8) if a.fp8 else k

    def launch(cfg: LogitsConfig) -> None:
        bq, hp, dp = _tile(a.heads, a.dim, a.queries, cfg, a.q8)
        tiles = -(-a.queries // bq)
        split = _split(a.rows, tiles, cfg.block_k, q.device, cfg.split)
        _logits_kernel[(tiles, -(-a.rows // split))](
            q.view(torch.uint8) if a.q8 else q,
            a.q_scale if a.q8 else weights,
            weights,
            codes,
            k_scale if a.fp8 else lengths,
            lengths,
            out,
            a.queries,
            a.rows,
            a.heads,
            a.dim,
            split,
            **_constants(cfg, (bq, hp, dp), a.fp8, q.dtype, a.dim, a.q8),
        )

    chosen = config or default_config(a.fp8, a.q8)
    tile = _tile(a.heads, a.dim, a.queries, chosen, a.q8)
    key = ("index_logits", q.device, chosen, tile, a.dim, a.fp8, a.q8, q.dtype)
    fitting.first_fitting([chosen] if config else _fallbacks(chosen), launch, key)
    return out


def paged_index_logits(
    q: torch.Tensor,
    weights: torch.Tensor,
    cache: torch.Tensor,
    block_table: torch.Tensor,
    lengths: torch.Tensor,
    *,
    rows_per_block: int,
    width: int | None = None,
    q_scale: torch.Tensor | None = None,
    validate: bool = True,
    config: LogitsConfig | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Paged (decode) index logits: f32[B * next_n, W], query ``(b, t)`` at row ``b * next_n + t``.

    q: bf16[B, next_n, H, D]; weights: f32[B, next_n, H]; cache: bf16[num_blocks, Bc, D], or the FP8 index
    layout u8[num_blocks, Bc * (D + 4)] (a block's Bc rows of e4m3 codes, then their Bc float32 scales);
    block_table: i32[B, max_blocks]; lengths: i32[B, next_n]; W = ``width`` or ``max_blocks * Bc``. FP8
    queries: q holds e4m3 codes [B, next_n, H, D] and ``q_scale``: f32[B, next_n, H] positive scales, against the
    FP8 cache.
    """
    a = v.check_paged(
        q,
        weights,
        cache,
        block_table,
        lengths,
        rows_per_block=rows_per_block,
        width=width,
        q_scale=q_scale,
        validate=validate,
    )
    v.backend_for("triton", q.device)
    out = v.output(out, (a.requests * a.next_n, a.width), torch.float32, q.device)
    if out.numel() == 0:
        return out
    hp, dp = _pow2(a.heads, 16), _pow2(a.dim, 32 if a.q8 else 16)
    bq = _pow2(a.next_n, 1)

    def launch(cfg: LogitsConfig) -> None:
        split = _split(a.width, a.requests, cfg.block_k, q.device, cfg.split)
        _paged_logits_kernel[(a.requests, -(-a.width // split))](
            q.view(torch.uint8) if a.q8 else q,
            a.q_scale if a.q8 else weights,
            weights,
            cache,
            block_table,
            lengths,
            out,
            a.next_n,
            a.heads,
            a.dim,
            a.width,
            block_table.shape[1],
            a.num_blocks,
            rows_per_block,
            split,
            **_constants(cfg, (bq, hp, dp), a.fp8, q.dtype, a.dim, a.q8),
            **paged_prefetch_constants(cfg.prefetch, a.dim, cache.element_size()),
        )

    chosen = config or default_config(a.fp8, a.q8, paged=True)
    key = ("paged_index_logits", q.device, chosen, (bq, hp, dp), a.dim, a.fp8, a.q8, q.dtype)
    fitting.first_fitting([chosen] if config else _fallbacks(chosen, paged=True), launch, key)
    return out
