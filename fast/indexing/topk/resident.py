# mypy: disable-error-code="no-untyped-def,untyped-decorator"
"""The register-resident top-k for rows of at most ``TopKConfig.resident`` lanes (batches of short rows: the
4096-row prefill steps), and its launch.

One program per row holds the row's order keys in registers (``WPAD`` lanes, the width padded to a power of
two; lanes at or past the row's length hold key 0, below every score's key) and never writes a buffer:

1. n <= k: every visible lane is chosen (threshold 0).
2. Otherwise a threshold T that separates the k largest keys is found bit by bit, most significant first
   (``select._kth_registers``: at most 32 counts, each a compare and a sum over the registers, ending early at a
   candidate with exactly k keys at or above it), then G = the count of keys > T. A radix select costs a
   histogram per element and pass; here each step is one compare and one add per element.
3. Collect: every key > T, and the first k - G keys == T in index order (a prefix sum over the tie mask, only
   when some tie is left out); output positions are the prefix sums of the chosen mask, as in ``row.py``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fast.indexing.topk.config import Operands, TopKConfig, pow2
from fast.indexing.topk.select import _drop, _emit, _finish, _kth_registers, _order_keys


@triton.jit
def _topk_resident_kernel(
    scores_ptr,
    lengths_ptr,
    offsets_ptr,
    keep_ptr,
    table_ptr,
    out_ptr,
    rank_key_ptr,
    rank_val_ptr,
    width,
    k,
    lanes,
    fill,
    block_size,
    keep_stride,
    table_width,
    rows_per_block,
    HAS_OFFSETS: tl.constexpr,
    HAS_KEEP: tl.constexpr,
    TRANSLATE: tl.constexpr,
    RANK: tl.constexpr,
    DROP_NEG_INF: tl.constexpr,
    DROP_NAN: tl.constexpr,
    WPAD: tl.constexpr,
    KPAD: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """One program per row of at most ``WPAD`` lanes (steps in the module docstring)."""
    row = tl.program_id(0).to(tl.int64)
    n = tl.minimum(tl.maximum(tl.load(lengths_ptr + row).to(tl.int32), 0), width)
    want = tl.minimum(n, k)
    i = tl.arange(0, WPAD)
    valid = i < n
    x = tl.load(scores_ptr + row * width + i, mask=valid, other=0.0)
    key = tl.where(valid, _order_keys(x, keep_ptr + row * keep_stride, i, block_size, valid, HAS_KEEP), 0)
    threshold = (n * 0).to(tl.uint32)
    quota = n
    if n > k:
        threshold, above = _kth_registers(key, want)
        quota = want - above
    tie = valid & (key == threshold)
    chosen = valid & (key > threshold)
    if tl.sum(tie.to(tl.int32), 0) > quota:
        chosen = chosen | (tie & (tl.cumsum(tie.to(tl.int32), 0) <= quota))
    else:
        chosen = chosen | tie
    chosen = _drop(chosen, key, DROP_NEG_INF, DROP_NAN)
    pos = tl.cumsum(chosen.to(tl.int32), 0) - 1
    out_row = out_ptr + row * lanes
    dst = rank_val_ptr + row * KPAD if RANK else out_row
    # 32-bit rows: a row plus its offset fits the int32 output (checked on the host); slots are int64 in _emit
    offset = tl.load(offsets_ptr + row).to(tl.int32) if HAS_OFFSETS else 0
    _emit(dst, rank_key_ptr + row * KPAD, table_ptr + row * table_width, i, key, pos, chosen, offset,
          table_width, rows_per_block, TRANSLATE, RANK)  # fmt: skip
    _finish(out_row, dst, rank_key_ptr + row * KPAD, tl.sum(chosen.to(tl.int32), 0), lanes, fill, RANK, KPAD, BLOCK)


def resident_warps(wpad: int, keys: int) -> int:
    """Warps of a program over ``wpad`` lanes at ``keys`` keys a thread: 1 to 8 (more keys a thread past 8192
    lanes at 32: at 16384 lanes 8 warps of 64 keys ran 0.743 ms against 0.806 for 16 warps of 32 on the H200,
    4096 rows, k 2048; fewer block-wide sums wait on fewer warps)."""
    return max(1, min(8, wpad // (32 * keys)))


def launch_resident(ops: Operands, cfg: TopKConfig, kpad: int) -> torch.Tensor:
    """Launch :func:`_topk_resident_kernel`, one program per row, into ``ops.out`` (rows of at most
    ``cfg.resident`` lanes)."""
    wpad = max(16, pow2(ops.scores.shape[1]))
    _topk_resident_kernel[(ops.scores.shape[0],)](
        *ops.pointers(), *ops.rank_scratch(kpad), *ops.sizes(), **ops.flags(), WPAD=wpad, KPAD=kpad,
        BLOCK=max(16, min(cfg.block, pow2(ops.out.shape[1]))), num_warps=resident_warps(wpad, cfg.resident_keys),
    )  # fmt: skip
    return ops.out
