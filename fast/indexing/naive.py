"""Torch-eager twins of the indexing kernels: same names and arguments as the Triton modules, readable formulas.

    index_logits(q, weights, k, lengths, *, k_scale=None, precision="float32")          -> f32[M, N]
    paged_index_logits(q, weights, cache, block_table, lengths, *, rows_per_block, width=None) -> f32[B*T, W]
    topk(scores, lengths, *, k, convention="v4.1", offsets=None, fill=None, block_table=None,
         rows_per_block=None, candidate_blocks=None, block_size=None)                  -> i32 | i64[M, lanes]
    block_scores(scores, lengths, *, block_size, pin_newest=True)                       -> f32[M, ceil(N / bs)]
    candidate_select(scores, lengths, *, block_size, topk_blocks, pin_newest, drop_nan) -> i32[M, topk_blocks]
    candidate_restore(offsets, candidate_blocks, *, block_size, visible=None)          -> i32[M, k]
    candidate_remap(columns, candidate_blocks, lengths, *, block_size)                 -> (i32[M, k], i32[M])
    slot_translation(rows, block_table, lengths, *, rows_per_block, guard="sentinel")   -> i64[M, K]
    gathered_rows(rows, offsets)                                                        -> i64[M, K]
    window_indices(*, window, seqlen, start_pos, order)                                 -> i32[R, W]
    decode_window_indices(positions, *, window, order)                                  -> i32[B, window]
    compressed_indices(*, ratio, seqlen, start_pos, offset=0)                           -> i32[seqlen, W]

Every function runs the same host checks as its Triton twin (``fast.indexing.validate``). The twins of the long
signatures (``index_logits``, ``paged_index_logits``, ``topk``, ``candidate_select``, ``candidate_restore``,
``slot_translation``) take ``(*tensors, **options)`` and hand them to that check, whose signature is the Triton
function's (less its ``config`` and ``out``) and which returns the checked call as one record: the arguments,
their defaults and every error are written once, in ``validate``.

Lanes past a query's visible count are -inf in logits. Top-k ranks by the order key of :func:`order_keys`
(NaN > +inf > numbers > -inf, -0 == +0), ties to the lowest index (docs/indexing.md).
"""

from __future__ import annotations

from typing import Any

import torch

from fast.indexing import validate as v

NEG_INF = float("-inf")


# --- index logits -------------------------------------------------------------------------------------------------


def fp8_values(codes: torch.Tensor) -> torch.Tensor:
    """e4m3fn codes (uint8 or float8_e4m3fn) as float32 values."""
    return codes.view(torch.float8_e4m3fn).to(torch.float32)


def _weighted_relu(dots: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``sum_h w[.., h] * relu(dots[.., h, n])`` in float32; dots: [.., H, N], weights: [.., H]."""
    return (dots.float().relu() * weights.float().unsqueeze(-1)).sum(dim=-2)


def _query_values(q: torch.Tensor, q_scale: torch.Tensor | None) -> torch.Tensor:
    """The queries as given, or FP8 queries as float32 values ``q_scale * e4m3(q)``."""
    return q if q_scale is None else fp8_values(q) * q_scale.unsqueeze(-1)


def index_logits(*tensors: torch.Tensor, precision: str = "float32", **options: Any) -> torch.Tensor:
    """``I[m, j] = sum_h w[m, h] relu(q[m, h] . k[j])`` for ``j < lengths[m]``, -inf elsewhere.

    Arguments: those of :func:`fast.indexing.logits.index_logits` (``q, weights, k, lengths, *, k_scale=None,
    q_scale=None, validate=True``; checked by ``validate.check_logits``). Key row j is ``k[j]``, or
    ``k_scale[j] * e4m3(k[j])``; query ``(m, h)`` is ``q[m, h]``, or ``q_scale[m, h] * e4m3(q[m, h])``.
    ``precision="float32"``: dots of the upcast operands in float32 (the twin of the kernels);
    ``"input"``: the public reference's einsum in the input dtype (bf16 dots rounded to bf16), then float32.
    """
    a = v.check_logits(*tensors, **options)
    q, k, lengths = _query_values(a.q, a.q_scale), a.k, a.lengths
    seen = max(0, int(lengths.max())) if lengths.numel() else 0  # a padding row (-1) reads nothing
    if a.k_scale is not None:
        keys = fp8_values(k[:seen]) * a.k_scale[:seen].unsqueeze(-1)
        keys = keys.to(q.dtype) if precision == "input" else keys
    else:
        keys = k[:seen]
    if precision == "input":
        dots = torch.einsum("mhd,nd->mhn", q, keys)
    else:
        dots = torch.einsum("mhd,nd->mhn", q.float(), keys.float())
    scores = torch.full((a.queries, a.rows), NEG_INF, dtype=torch.float32, device=q.device)
    visible = torch.arange(seen, device=q.device) < lengths.to(torch.int64).unsqueeze(-1)
    scores[:, :seen] = torch.where(visible, _weighted_relu(dots, a.weights), NEG_INF)
    return scores


def paged_rows(
    cache: torch.Tensor, block_table: torch.Tensor, rows: int, rows_per_block: int, dim: int
) -> torch.Tensor:
    """Key rows ``0 .. rows - 1`` of every request, read through its block table: f32[B, rows, D].

    cache: bf16|f32[num_blocks, Bc, D], or the FP8 layout u8[num_blocks, Bc * (D + 4)] (all rows' e4m3 codes,
    then all rows' float32 scales, little-endian). Rows whose table entry is outside the cache are NaN.
    """
    j = torch.arange(rows, device=cache.device)
    ids = block_table.to(torch.int64)[:, j // rows_per_block]
    ok = (ids >= 0) & (ids < cache.shape[0])
    ids = torch.where(ok, ids, 0)
    within = (j % rows_per_block).expand_as(ids)
    if cache.dtype == torch.uint8:
        data = cache[:, : rows_per_block * dim].reshape(cache.shape[0], rows_per_block, dim)
        scales = cache[:, rows_per_block * dim :].contiguous().view(torch.float32)
        keys = fp8_values(data[ids, within]) * scales[ids, within].unsqueeze(-1)
    else:
        keys = cache[ids, within].float()
    return torch.where(ok.unsqueeze(-1), keys, float("nan"))


def paged_index_logits(*tensors: torch.Tensor, **options: Any) -> torch.Tensor:
    """Decode logits through block tables: f32[B * next_n, W], query ``(b, t)`` at row ``b * next_n + t``.

    Arguments: those of :func:`fast.indexing.logits.paged_index_logits` (``q, weights, cache, block_table,
    lengths, *, rows_per_block, width=None, q_scale=None, validate=True``; checked by ``validate.check_paged``);
    FP8 queries as in :func:`index_logits`; cache: see
    :func:`paged_rows`. Lanes at or past a query's length are -inf.
    """
    a = v.check_paged(*tensors, **options)
    q, lengths = _query_values(a.q, a.q_scale), a.lengths
    seen = min(max(0, int(lengths.max())) if lengths.numel() else 0, a.width)
    keys = paged_rows(a.cache, a.block_table, seen, a.rows_per_block, a.dim)
    dots = torch.einsum("bthd,bnd->bthn", q.float(), keys)
    scores = torch.full((a.requests, a.next_n, a.width), NEG_INF, dtype=torch.float32, device=q.device)
    visible = torch.arange(seen, device=q.device) < lengths.to(torch.int64).unsqueeze(-1)
    scores[:, :, :seen] = torch.where(visible, _weighted_relu(dots, a.weights), NEG_INF)
    return scores.reshape(a.requests * a.next_n, a.width)


# --- top-k --------------------------------------------------------------------------------------------------------


def order_keys(scores: torch.Tensor) -> torch.Tensor:
    """int64 keys in [0, 2**32) whose order is torch's ranking order: -inf < numbers < +inf < NaN, -0 == +0."""
    bits = scores.contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    key = torch.where(bits >= 2**31, 0xFFFFFFFF - bits, bits + 2**31)
    key = torch.where(scores == 0, 2**31, key)
    return torch.where(scores.isnan(), 0xFFFFFFFF, key)


def rank_lanes(scores: torch.Tensor, lengths: torch.Tensor, take: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``take`` lanes of each row in rank order and whether each holds a visible row.

    A composite ``key * 2**31 + (2**31 - 1 - index)`` orders by key, then by lowest index; rows past the
    visible count get -1, below every real composite, and are never read.
    """
    n = scores.shape[1]
    lanes = torch.arange(n, device=scores.device)
    visible = lanes < lengths.to(torch.int64).unsqueeze(-1)
    safe = torch.where(visible, scores, 0.0)
    composite = order_keys(safe) * 2**31 + (2**31 - 1 - lanes)
    composite = torch.where(visible, composite, -1)
    top = composite.topk(take, dim=1, sorted=True).values if take else composite[:, :0]
    holds = top >= 0
    index = 2**31 - 1 - (top % 2**31)
    return torch.where(holds, index, n), holds


def topk(*tensors: torch.Tensor, **options: Any) -> torch.Tensor:
    """Valid-prefix top-k under ``convention``: the twin of :func:`fast.indexing.topk.topk`, whose arguments it
    takes (less ``config`` / ``out``; checked by ``validate.check_topk``)."""
    a = v.check_topk(*tensors, **options)
    scores = a.scores
    if a.candidate_blocks is not None and a.block_size is not None:
        scores = restrict_to_blocks(scores, a.candidate_blocks, block_size=a.block_size)
    take = min(a.k, a.width)
    index, holds = rank_lanes(scores, a.lengths, take)
    drops = a.drop_neg_inf or a.drop_nan
    if drops:
        chosen_keys = order_keys(scores.gather(1, index.clamp(max=max(a.width - 1, 0))))
        if a.drop_neg_inf:
            holds &= chosen_keys != 0x007FFFFF
        if a.drop_nan:
            holds &= chosen_keys != 0xFFFFFFFF
        index = torch.where(holds, index, a.width)
    if a.mode.index_order or drops:
        index = torch.where(holds, index, a.width).sort(dim=1).values
        holds = index < a.width
    if a.block_table is not None and a.rows_per_block is not None:
        rows = torch.where(holds, index, -1)
        count = holds.sum(dim=1)
        out = slot_translation(rows, a.block_table, count, rows_per_block=a.rows_per_block, validate=False)
        out = torch.where(holds, out, a.fill)
        dtype = torch.int64
    else:
        shift = a.offsets.to(torch.int64).unsqueeze(-1) if a.offsets is not None else 0
        out = torch.where(holds, index + shift, a.fill)
        dtype = torch.int32
    pad = torch.full((a.rows, a.lanes - take), a.fill, dtype=torch.int64, device=scores.device)
    return torch.cat([out.to(torch.int64), pad], dim=1).to(dtype)


def restrict_to_blocks(scores: torch.Tensor, candidate_blocks: torch.Tensor, *, block_size: int) -> torch.Tensor:
    """``scores`` with every lane outside the candidate blocks set to -inf (-1 entries name no block)."""
    m, n = scores.shape
    blocks = -(-n // block_size)
    ids = candidate_blocks.to(torch.int64)
    ok = (ids >= 0) & (ids < blocks)
    keep = torch.zeros(m, blocks + 1, dtype=torch.bool, device=scores.device)
    keep.scatter_(1, torch.where(ok, ids, blocks), True)
    lane_keep = keep[:, torch.arange(n, device=scores.device) // block_size]
    return torch.where(lane_keep, scores, NEG_INF)


# --- candidate blocks ---------------------------------------------------------------------------------------


def block_scores(
    scores: torch.Tensor, lengths: torch.Tensor, *, block_size: int, pin_newest: bool = True
) -> torch.Tensor:
    """Per block of ``block_size`` rows: the max over visible rows (NaN if any is NaN; rows past the visible
    count are -inf); with ``pin_newest`` the block holding row ``lengths - 1`` is +inf. f32[M, ceil(N / bs)]."""
    m, n = scores.shape
    blocks = -(-n // block_size)
    padded = torch.full((m, blocks * block_size), NEG_INF, dtype=torch.float32, device=scores.device)
    lanes = torch.arange(n, device=scores.device)
    lens = lengths.to(torch.int64).unsqueeze(-1)
    padded[:, :n] = torch.where(lanes < lens, scores, NEG_INF)
    best = padded.view(m, blocks, block_size).amax(dim=2)
    if pin_newest:
        newest = torch.div(lens - 1, block_size, rounding_mode="floor")
        pinned = (torch.arange(blocks, device=scores.device) == newest) & (lens > 0)
        best = torch.where(pinned, float("inf"), best)
    return best


def candidate_select(*tensors: torch.Tensor, **options: Any) -> torch.Tensor:
    """Kept candidate blocks, ascending, -1 fill: i32[M, topk_blocks] (V4.1 level one, docs/indexing.md).
    Arguments: those of :func:`fast.indexing.candidates.candidate_select` (checked by
    ``validate.check_candidates``)."""
    a = v.check_candidates(*tensors, **options)
    best = block_scores(a.scores, a.lengths, block_size=a.block_size, pin_newest=a.pin_newest)
    counts = (-(-a.lengths.to(torch.int64) // a.block_size)).to(torch.int32)
    return topk(
        best, counts, k=a.topk_blocks, convention="v4.1", drop_neg_inf=True, drop_nan=a.drop_nan, validate=False
    )


def candidate_restore(*tensors: torch.Tensor, **options: Any) -> torch.Tensor:
    """``o -> candidate_blocks[m, o // bs] * bs + o % bs``; -1, offsets into padding blocks, offsets outside
    the candidate list and (with ``visible``) rows ``>= visible[m]`` give -1. i32[M, k]. Arguments: those of
    :func:`fast.indexing.candidates.candidate_restore` (checked by ``validate.check_restore``)."""
    a = v.check_restore(*tensors, **options)
    size = a.block_size
    o = a.offsets.to(torch.int64)
    span = a.candidate_blocks.shape[1] * size
    ok = (o >= 0) & (o < span)
    if span == 0:
        return torch.full_like(a.offsets, -1, dtype=torch.int32)
    block = a.candidate_blocks.to(torch.int64).gather(1, torch.where(ok, o, 0) // size)
    row = block * size + torch.where(ok, o, 0) % size
    ok &= block >= 0
    if a.visible is not None:
        ok &= row < a.visible.to(torch.int64).unsqueeze(-1)
    return torch.where(ok, row, -1).to(torch.int32)


def candidate_remap(*tensors: torch.Tensor, **options: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Column ``c`` of row m -> the c-th position below ``lengths[m]`` of its candidate blocks, ascending (the
    blocks sorted, -1 padding dropped); -1 and columns at or past the count give -1; with the counts. (i32[M, k],
    i32[M]). Arguments: those of :func:`fast.indexing.candidates.candidate_remap` (``validate.check_remap``)."""
    a = v.check_remap(*tensors, **options)
    size, rows = a.block_size, a.columns.shape[0]
    blocks = a.candidate_blocks.to(torch.int64).sort(dim=1).values
    starts = (blocks * size).unsqueeze(-1)
    positions = (starts + torch.arange(size, device=blocks.device)).reshape(rows, -1)
    ok = (positions < a.lengths.to(torch.int64).unsqueeze(-1)) & (blocks >= 0).repeat_interleave(size, dim=1)
    compact = positions.gather(1, (~ok).to(torch.int8).sort(dim=1, stable=True).indices)
    counts = ok.sum(dim=1)
    c = a.columns.to(torch.int64)
    valid = (c >= 0) & (c < counts.unsqueeze(-1))
    picked = compact.gather(1, torch.where(valid, c, 0)) if compact.shape[1] else torch.zeros_like(c)
    return torch.where(valid, picked, -1).to(torch.int32), counts.to(torch.int32)


# --- addresses ----------------------------------------------------------------------------------------------


def slot_translation(*tensors: torch.Tensor, **options: Any) -> torch.Tensor:
    """``slot = block_table[m, j // Bc] * Bc + j % Bc`` in int64; lane i is -1 when ``rows[m, i] == -1`` or
    ``i >= lengths[m]`` (lanes past the count are not read). i64[M, K]. Arguments: those of
    :func:`fast.indexing.addressing.slot_translation` (checked by ``validate.check_slots``)."""
    a = v.check_slots(*tensors, **options)
    rows, per_block = a.rows, a.rows_per_block
    j = rows.to(torch.int64)
    lanes = torch.arange(rows.shape[1], device=rows.device)
    live = (lanes < a.lengths.to(torch.int64).unsqueeze(-1)) & (j >= 0)
    nblocks = a.block_table.shape[1]
    live &= j // per_block < nblocks
    if nblocks == 0:
        return torch.full(rows.shape, -1, dtype=torch.int64, device=rows.device)
    safe = torch.where(live, j, 0)
    block = a.block_table.to(torch.int64).gather(1, safe // per_block)
    live &= block >= 0
    return torch.where(live, block * per_block + safe % per_block, -1)


def gathered_rows(rows: torch.Tensor, offsets: torch.Tensor, *, validate: bool = True) -> torch.Tensor:
    """Prefill's gathered layout: ``rows[m, i] + offsets[m]`` for row lanes, -1 kept. i64[M, K]."""
    v.check_gathered(rows, offsets, validate)
    r = rows.to(torch.int64)
    return torch.where(r >= 0, r + offsets.to(torch.int64).unsqueeze(-1), -1)


# --- window indices -----------------------------------------------------------------------------------------


def window_indices(
    *, window: int, seqlen: int, start_pos: int, order: str, device: str | torch.device = "cpu"
) -> torch.Tensor:
    """Prefill (``start_pos == 0``): i32[seqlen, min(window, seqlen)], query i lists positions
    ``max(0, i - window + 1) .. i`` oldest first, -1 after. Decode: i32[1, window] ring slots of the query at
    ``start_pos``, oldest first; empty lanes last (``"v4"``) or first (``"v4.1"``)."""
    w, n, p = v.check_window(window, seqlen, start_pos, order)
    if p == 0:
        i = torch.arange(n, device=device).unsqueeze(1)
        idx = (i - w + 1).clamp_min(0) + torch.arange(min(w, n), device=device)
        return torch.where(idx > i, -1, idx).to(torch.int32)
    return decode_window_indices(torch.tensor([p], dtype=torch.int32, device=device), window=w, order=order)


def decode_window_indices(positions: torch.Tensor, *, window: int, order: str, validate: bool = True) -> torch.Tensor:
    """One decode row per request at ``positions[b]`` (>= 0): i32[B, window] (see :func:`window_indices`)."""
    v.tensor(positions, "positions", v.INDEX_DTYPES, 1)
    v.check_window(window, 1, 0, order)
    if validate and positions.numel():
        v.require(int(positions.min()) >= 0, "positions", f"must be >= 0, got {int(positions.min())}")
    p = positions.to(torch.int64).unsqueeze(1)
    c = torch.arange(window, device=positions.device)
    filled = torch.clamp(p + 1, max=window)
    empty = window - filled
    if order == "v4":
        t = p - filled + 1 + c
        live = c < filled
    else:
        t = p - filled + 1 + (c - empty)
        live = c >= empty
    return torch.where(live, t % window, -1).to(torch.int32)


# --- compressed index list of a layer without an indexer ------------------------------------------------------


def compressed_indices(
    *, ratio: int, seqlen: int, start_pos: int, offset: int = 0, device: str | torch.device = "cpu"
) -> torch.Tensor:
    """Every compressed row each query sees (V4 ratio 128): i32[seqlen, (start_pos + seqlen) // ratio]; the query
    at position p lists rows ``0 .. (p + 1) // ratio - 1`` plus ``offset``, then -1."""
    r, n, p, o = v.check_compressed(ratio, seqlen, start_pos, offset)
    seen = (torch.arange(p, p + n, device=device, dtype=torch.int64) + 1) // r
    lane = torch.arange((p + n) // r, device=device, dtype=torch.int64)
    return torch.where(lane < seen.unsqueeze(1), lane + o, -1).to(torch.int32)
