"""Valid-prefix top-k in Triton: a sampled threshold, one compaction pass, a radix select on the few survivors,
and a collect pass that writes the chosen rows in ascending index order (docs/indexing-kernels.md).

    topk(scores, lengths, *, k, convention="v4.1", offsets=None, fill=None, block_table=None,
         rows_per_block=None, candidate_blocks=None, block_size=None, drop_neg_inf=False, drop_nan=False,
         validate=True, config=None) -> i32[M, lanes] (i64 slots with block_table)

One program per score row. Rows are ranked by a 32-bit order key (``select.py``): the float's bits made
monotone, NaN mapped above +inf and -0 onto +0, so equal keys are exactly equal scores. A threshold T with
count(> T) < k <= count(>= T) (the k-th largest key, or a value between it and the next larger key) and the
count G of keys above it determine the answer: every key > T, and the first k - G keys == T in index order (the
lowest index wins a tie). Steps per row of n visible lanes (lanes past n are never loaded):

1. n <= k: every visible lane is chosen (collect with T = 0).
2. Sample ``min(n, SAMPLE)`` lanes at stride ``n // SAMPLE``; a select over the sample held in registers (one
   bit a step, ``select._kth_registers``) gives a key t expected to have about ``OVERSAMPLE * k`` keys >= t.
3. One pass over the row compacts (key, index) of every key >= t into a per-row buffer, in index order, and
   counts the keys >= t and > t.
4. k <= count(>= t) <= CAP: select on the buffer (in registers up to 16384 entries, else four 8-bit radix
   passes), then collect from the buffer.
   count(> t) < k <= count(>= t): T = t, collect from the row.  Otherwise (a sample that misled): radix
   select over the whole row (four passes), then collect from the row. Every path gives the same answer.
5. Collect: prefix sums of the chosen mask give each chosen lane its output position; the lane's row (plus its
   offset, or translated to a slot through the block table in int64) is stored there. Rank-order conventions
   then sort the chosen lanes by (key descending, index ascending) with one bitonic sort.

Split-row path (few long rows, :func:`split_lanes_for`): step 2 in a per-row kernel, step 3 by programs over
(split, row) that count, then write each split's survivors at the prefix of the earlier splits' counts, and
steps 4-5 by the same kernel entered with ``PRESPLIT``: the same t, counts and buffer, the same output.

Register-resident path (rows of at most ``TopKConfig.resident`` lanes, 16384 compiled, that do not split): one
program holds the row's keys in registers and finds T bit by bit (at most 32 compare-and-count steps over the
registers), then collects as in step 5 (``resident.py``); no buffer, no sample.

Modules: ``config`` (launch constants, path choice), ``select`` (the shared jit steps: keys, compaction, radix
select, sampled threshold, emit, rank sort and fill), ``row`` (the one-program kernel, steps 1-5), ``resident``
(the register-resident kernel), ``split`` (the split-row kernels),
``small`` (rows of at most ``TopKConfig.pairwise`` lanes: each lane's rank by pairwise comparison, one launch).
"""

from __future__ import annotations

import torch

from fast.indexing import validate as v
from fast.indexing.topk.config import (
    COMPILED,
    INTERPRETED,
    Operands,
    TopKConfig,
    buffer_sizes,
    default_config,
    pow2,
    split_lanes_for,
    uses_resident,
    uses_split,
)
from fast.indexing.topk.resident import launch_resident
from fast.indexing.topk.row import launch_rows
from fast.indexing.topk.small import small_candidates, small_rows
from fast.indexing.topk.split import launch_split

__all__ = [
    "COMPILED",
    "INTERPRETED",
    "TopKConfig",
    "buffer_sizes",
    "default_config",
    "keep_map",
    "pow2",
    "small_candidates",
    "split_lanes_for",
    "topk",
    "uses_resident",
    "uses_split",
]


def keep_map(candidate_blocks: torch.Tensor, width: int, block_size: int) -> torch.Tensor:
    """u8[M, ceil(width / bs)]: 1 where the row's candidate list names the block (-1 and ids past the row are
    ignored)."""
    m = candidate_blocks.shape[0]
    blocks = -(-width // block_size)
    ids = candidate_blocks.to(torch.int64)
    ok = (ids >= 0) & (ids < blocks)
    keep = torch.zeros(m, blocks + 1, dtype=torch.uint8, device=candidate_blocks.device)
    keep.scatter_(1, torch.where(ok, ids, blocks), 1)
    return keep[:, :blocks].contiguous() if blocks else keep[:, :1].contiguous()


def topk(
    scores: torch.Tensor,
    lengths: torch.Tensor,
    *,
    k: int,
    convention: str = "v4.1",
    offsets: torch.Tensor | None = None,
    fill: int | None = None,
    block_table: torch.Tensor | None = None,
    rows_per_block: int | None = None,
    candidate_blocks: torch.Tensor | None = None,
    block_size: int | None = None,
    drop_neg_inf: bool = False,
    drop_nan: bool = False,
    validate: bool = True,
    config: TopKConfig | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Top-k of each row's first ``lengths[m]`` scores under ``convention``.

    scores: f32[M, N] (lanes at or past ``lengths[m]`` are never read); lengths: i32[M] in [0, N], or -1 for a
    padding row (read as 0: every lane the fill; refused under ``v4-decode``).
    convention: ``v4.1`` (k lanes, ascending index, -1 fill), ``v4.1-clamped`` (min(k, N) lanes),
    ``v4-prefill`` / ``v4-decode`` (min(k, N) lanes, rank order, -1 fill; decode needs lengths == N),
    ``select`` (k lanes, ascending index, fill INT32_MAX), ``select-unsorted`` (select in rank order).
    offsets: i32|i64[M] added to lanes holding a row (never to fill lanes). fill: overrides the fill value.
    block_table (+ rows_per_block): the chosen rows are translated to physical slots
    ``block_table[m, j // Bc] * Bc + j % Bc`` in int64 (output i64, fill lanes keep the fill value).
    candidate_blocks (+ block_size): lanes outside the row's candidate blocks score -inf (the restricted
    second-level top-k; -inf lanes stay eligible). drop_neg_inf / drop_nan: chosen lanes scoring -inf / NaN
    become fill lanes (the kept rule of candidate blocks). out: written in place when given.
    """
    a = v.check_topk(
        scores,
        lengths,
        k=k,
        convention=convention,
        offsets=offsets,
        fill=fill,
        block_table=block_table,
        rows_per_block=rows_per_block,
        candidate_blocks=candidate_blocks,
        block_size=block_size,
        drop_neg_inf=drop_neg_inf,
        drop_nan=drop_nan,
        validate=validate,
    )
    v.backend_for("triton", scores.device)
    cfg = config or default_config()
    device = scores.device
    out = v.output(out, (a.rows, a.lanes), torch.int64 if a.translate else torch.int32, device)
    if a.rows == 0 or a.lanes == 0:
        return out
    if a.width == 0 or a.k == 0:
        return out.fill_(a.fill)
    keep: torch.Tensor | None = None
    bs = 1
    if candidate_blocks is not None and block_size is not None:
        keep, bs = keep_map(candidate_blocks, a.width, block_size), block_size
    ops = Operands(
        scores,
        lengths,
        out,
        min(a.k, a.width),
        a.fill,
        offsets=offsets,
        keep=keep,
        block_size=bs,
        block_table=block_table,
        rows_per_block=rows_per_block,
        rank=not a.mode.index_order,
        drop_neg_inf=drop_neg_inf,
        drop_nan=drop_nan,
    )
    split_lanes = split_lanes_for(cfg, a.rows, a.width)
    kpad, cap = buffer_sizes(cfg, a.k, a.width)
    if uses_resident(cfg, a.rows, a.width):
        return launch_resident(ops, cfg, kpad)
    if cfg.pairwise and a.width <= cfg.pairwise and not split_lanes:
        return small_rows(ops, a.width)
    buffers = (
        torch.empty(a.rows, cap, dtype=torch.int32, device=device),
        torch.empty(a.rows, cap, dtype=torch.int32, device=device),
    )
    split = launch_split(ops, cfg, split_lanes, buffers) if split_lanes else None
    return launch_rows(ops, cfg, buffers, kpad, split)
