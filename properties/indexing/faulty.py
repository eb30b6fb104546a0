"""Small torch implementations of the indexing operations: the base of the shipped mutants.

Each function has the contract's signature (``properties.contract``) plus the convention it follows and a
``Faults`` value. With the default ``Faults()`` every function is correct (checked against every property in
``properties/indexing/test_support.py``); each changed field plants one realistic bug, and
``properties.indexing.mutants`` names them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from properties.ladder import ladder
from reference.conventions import parse
from reference.topk import MaskedLanes, lane_layout


@dataclass(frozen=True)
class Faults:
    """Each field, when changed from its default, is one planted bug."""

    visible_floor_p: bool = False  # visible rows floor(p / r) instead of floor((p + 1) / r)
    relu_after_head_sum: bool = False  # relu(sum_h w_h q_h . k) instead of sum_h w_h relu(q_h . k)
    ties_to_highest_index: bool = False  # among equal scores the highest index wins
    no_fill: bool = False  # lanes past the chosen rows keep whatever row the ranking put there
    offset_on_fill: bool = False  # the offset is added after the fill value is written
    rank_whole_row: bool = False  # ranks the whole row, then blanks rows past the valid end (reads the tail)
    rank_order_output: bool = False  # index-ordered conventions return the rank order
    pin_newest: bool = True  # False: the newest visible block is not forced to +inf
    flip_nan_policy: bool = False  # drop_nan keeps NaN blocks, propagate_nan drops them
    whole_blocks_only: bool = False  # block count floor(length / bs): the partial newest block is lost
    block_max_past_end: bool = False  # the block maximum reads rows past the valid end
    restore_unscaled: bool = False  # restored row = block + o % bs (block id not multiplied by bs)
    any_negative_padding: bool = False  # every negative candidate block is padding (-2 accepted, not refused)
    rows_per_block_is_block_size: bool = False  # Bc = block_size, the ratio forgotten
    int32_slots: bool = False  # slots computed in int32 (wrap past 2**31 - 1)
    slot_unscaled: bool = False  # slot = block id + j % Bc (block id not multiplied by Bc)
    ignore_lengths: bool = False  # slot translation translates lanes past the count guard
    offset_on_empty: bool = False  # the gathered offset is added to -1 lanes as well
    window_order: str | None = None  # decode lists empty lanes by this order ("v4" or "v4.1") whatever asked
    window_first_shift: int = 0  # prefill's first position max(0, i - W + 1 - shift)
    padding_as_unsigned: bool = False  # a length of -1 read as uint32: the padding row's whole width is read
    pin_truncates: bool = False  # newest block trunc((length - 1) / bs), pinned unless length == 0 (-1 pins 0)
    all_zero_unwritten: bool = False  # top-k returns early, its output zero-filled, when no row has a length > 0
    float16_keys: bool = False  # scores ranked (top-k) or block maxima taken (candidates) on a float16 copy
    release_keeps: str = "window_plus_step"  # window release keeps window + D - 1 ("window": only the window
    # counted back from the tentative length; "window_plus_step_minus_2": one position fewer; "all": never releases)
    count_per_step: bool = False  # every query of a step sees end_pos // ratio rows (the public V4.1 decode)
    compressed_floor_p: bool = False  # the query at p sees p // ratio rows: the row p completes is left out
    remap_given_order: bool = False  # remap columns walk the candidate blocks in their given order, not sorted
    remap_whole_blocks: bool = False  # a block whose first position is visible counts whole (end = blocks * bs)
    remap_past_length: bool = False  # blocks wholly at or past the length are not filtered out
    paged_first_query_count: bool = False  # every query of a request sees its first query's count of rows
    paged_table_of_request_0: bool = False  # every request reads its rows through request 0's table row
    fp8_one_query_scale: bool = False  # FP8 queries: head 0's scale used for every head of the query
    fp8_flush_subnormals: bool = False  # FP8 codes with exponent field 0 decoded as zero
    fp8_key_scale_after_relu: bool = False  # key scale applied after the relu (wrong for negative scales)
    fp8_cache_interleaved: bool = False  # FP8 index cache read with each row's scale after its codes (row by row)
    neg_inf_eligible: bool = False  # top-k chooses -inf rows of the valid prefix under neg_inf_excluded
    slot_via_block_size: bool = False  # slot = (block * block_size + (j % Bc) * ratio) // ratio: the product
    # block * block_size wraps in int32 although the slot fits
    ignores_strides: bool = False  # top-k reads scores as if row-major with unit stride, whatever its strides
    past_tile: str = ""  # one size bug: wrong only past the tile of the named dimension (``PAST_TILE``)


PAST_TILE = {
    "topk_width": "width",  # a row is ranked over its first tile of lanes only: a longer valid prefix loses its tail
    "index_heads": "heads",  # the heads past the first tile are dropped from the head sum
    "fp8_heads": "heads",  # the same in the FP8 index scores
    "candidate_blocks": "blocks",  # blocks past the first tile are never kept
    "restore_k": "k",  # offsets past the first tile of lanes come back -1
    "slot_lanes": "lanes",  # lanes past the first tile come back -1
    "gathered_requests": "requests",  # a request past the first tile gets the offset of the one a tile before it
    "window_lanes": "window",  # a window wider than the tile lists -1 past the tile's lanes
    "compressed_lanes": "lanes",  # lanes past the first tile come back -1
    "release_requests": "requests",  # requests past the first tile release nothing
    "paged_columns": "blocks",  # block table columns past the first tile read the column a tile before them
    "remap_blocks": "lanes",  # candidate blocks past the first tile (ascending) are dropped as if padding
}
"""The planted size bugs, each named after what it breaks, with the ladder (``properties.ladder``) whose tile it
breaks past."""


def tile(faults: Faults, bug: str) -> int | None:
    """The size past which ``faults`` plants ``bug``, or None when it does not."""
    return ladder(PAST_TILE[bug]).tile if faults.past_tile == bug else None


NO_FAULTS = Faults()


# --- index scores ------------------------------------------------------------------------------------------------


def visible_rows(positions: torch.Tensor, ratio: int, faults: Faults = NO_FAULTS) -> torch.Tensor:
    """Compressed rows each query sees: ``floor((p + 1) / ratio)`` (int64)."""
    p = positions.to(torch.int64)
    return p // ratio if faults.visible_floor_p else (p + 1) // ratio


def index_scores(
    q: torch.Tensor,
    weights: torch.Tensor,
    k: torch.Tensor,
    positions: torch.Tensor,
    *,
    ratio: int,
    faults: Faults = NO_FAULTS,
) -> torch.Tensor:
    """``sum_h w[m, h] relu(q[m, h] . k[j])`` in float32; lanes past a query's visible rows are -inf."""
    dots = torch.einsum("mhd,nd->mhn", q.float(), k.float())
    w = weights.float().unsqueeze(-1)
    if (heads := tile(faults, "index_heads")) is not None:
        w = torch.where(torch.arange(w.shape[1], device=w.device).unsqueeze(-1) < heads, w, 0.0)
    if faults.relu_after_head_sum:
        scores = (dots * w).sum(dim=1).clamp_min(0)
    else:
        scores = (dots.clamp_min(0) * w).sum(dim=1)
    lanes = torch.arange(k.shape[0], device=q.device)
    hidden = lanes >= visible_rows(positions, ratio, faults).unsqueeze(-1)
    return scores.masked_fill(hidden, float("-inf"))


def paged_index_scores(
    q: torch.Tensor,
    weights: torch.Tensor,
    cache: torch.Tensor,
    block_table: torch.Tensor,
    lengths: torch.Tensor,
    *,
    faults: Faults = NO_FAULTS,
) -> torch.Tensor:
    """Query (b, t) reads row j at ``cache[block_table[b, j // Bc], j % Bc]`` for ``j < lengths[b, t]`` and scores
    it as ``index_scores`` does; -inf past its rows. f32[B * T, max_blocks * Bc]."""
    requests, next_n = q.shape[:2]
    per_block = cache.shape[1]
    width = block_table.shape[1] * per_block
    counts = lengths.to(torch.int64)
    if faults.paged_first_query_count:
        counts = counts[:, :1].expand(-1, next_n)
    table = block_table.to(torch.int64)
    if faults.paged_table_of_request_0:
        table = table[:1].expand(requests, -1)
    lanes = torch.arange(width, device=q.device)
    hidden = lanes >= counts.unsqueeze(-1)
    if cache.shape[0] == 0:
        return torch.full((requests * next_n, width), float("-inf"), device=q.device)
    read = lanes < counts.amax(dim=1, keepdim=True)
    column = lanes // per_block
    if (cut := tile(faults, "paged_columns")) is not None:
        column = torch.where(column >= cut, column - cut, column)
    ids = torch.where(read, table[:, column], 0).clamp(0, cache.shape[0] - 1)
    keys = cache[ids, lanes % per_block].float()
    dots = torch.einsum("bthd,bnd->bthn", q.float(), keys)
    scores = (dots.clamp_min(0) * weights.float().unsqueeze(-1)).sum(dim=2)
    return scores.masked_fill(hidden, float("-inf")).reshape(requests * next_n, width)


def e4m3_values(codes: torch.Tensor, faults: Faults = NO_FAULTS) -> torch.Tensor:
    """e4m3fn codes (uint8) as float32 values."""
    values = codes.view(torch.float8_e4m3fn).float()
    if faults.fp8_flush_subnormals:
        values = torch.where((codes & 0x78) == 0, 0.0, values)
    return values


def fp8_index_cache(codes: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """The FP8 index cache u8[num_blocks, Bc * (D + 4)] of ``codes`` u8[num_blocks, Bc, D] and ``scales``
    f32[num_blocks, Bc]: a block's Bc rows of codes, then their float32 scales (the inverse of ``fp8_index_keys``)."""
    blocks, bc, dim = codes.shape
    scale_bytes = scales.to(torch.float32).contiguous().view(torch.uint8)
    return torch.cat([codes.reshape(blocks, bc * dim), scale_bytes.reshape(blocks, 4 * bc)], dim=1).contiguous()


def fp8_index_keys(cache: torch.Tensor, rows_per_block: int, dim: int, faults: Faults = NO_FAULTS) -> torch.Tensor:
    """The FP8 index cache u8[num_blocks, Bc * (D + 4)] as float32 key rows [num_blocks, Bc, D]: a block's Bc rows
    of D e4m3 codes, then their Bc float32 scales."""
    blocks, bc = cache.shape[0], rows_per_block
    if faults.fp8_cache_interleaved:
        rows = cache.reshape(blocks, bc, dim + 4)
        codes, scale_bytes = rows[..., :dim], rows[..., dim:]
    else:
        codes, scale_bytes = cache[:, : bc * dim].reshape(blocks, bc, dim), cache[:, bc * dim :]
    scales = scale_bytes.contiguous().view(torch.float32).reshape(blocks, bc)
    return e4m3_values(codes.contiguous(), faults) * scales.unsqueeze(-1)


def paged_index_scores_fp8(
    q: torch.Tensor,
    q_scale: torch.Tensor,
    weights: torch.Tensor,
    cache: torch.Tensor,
    block_table: torch.Tensor,
    lengths: torch.Tensor,
    *,
    rows_per_block: int,
    faults: Faults = NO_FAULTS,
) -> torch.Tensor:
    """The FP8 queries and cache rows as float32 values, then ``paged_index_scores``."""
    keys = fp8_index_keys(cache, rows_per_block, q.shape[-1], faults)
    qs = q_scale[..., :1].expand_as(q_scale) if faults.fp8_one_query_scale else q_scale
    queries = e4m3_values(q, faults) * qs.unsqueeze(-1)
    return paged_index_scores(queries, weights, keys, block_table, lengths, faults=faults)


def index_scores_fp8(
    q: torch.Tensor,
    q_scale: torch.Tensor,
    weights: torch.Tensor,
    k: torch.Tensor,
    k_scale: torch.Tensor,
    positions: torch.Tensor,
    *,
    ratio: int,
    faults: Faults = NO_FAULTS,
) -> torch.Tensor:
    """``sum_h w[m, h] relu(q_scale[m, h] e4m3(q[m, h]) . k_scale[j] e4m3(k[j]))`` in float32; lanes past a
    query's visible rows are -inf."""
    qs = q_scale[:, :1].expand_as(q_scale) if faults.fp8_one_query_scale else q_scale
    dots = torch.einsum("mhd,nd->mhn", e4m3_values(q, faults), e4m3_values(k, faults)) * qs.unsqueeze(-1)
    key_scale = k_scale.view(1, 1, -1)
    w = weights.float().unsqueeze(-1)
    if (heads := tile(faults, "fp8_heads")) is not None:
        w = torch.where(torch.arange(w.shape[1], device=w.device).unsqueeze(-1) < heads, w, 0.0)
    if faults.fp8_key_scale_after_relu:
        scores = (dots.clamp_min(0) * key_scale * w).sum(dim=1)
    else:
        scores = ((dots * key_scale).clamp_min(0) * w).sum(dim=1)
    lanes = torch.arange(k.shape[0], device=q.device)
    hidden = lanes >= visible_rows(positions, ratio, faults).unsqueeze(-1)
    return scores.masked_fill(hidden, float("-inf"))


# --- top-k -------------------------------------------------------------------------------------------------------


def _stable_descending(key: torch.Tensor) -> torch.Tensor:
    """Lane order by descending key (NaN first), ties in lane order."""
    return torch.sort(key, dim=1, descending=True, stable=True).indices


def unsigned_lengths(lengths: torch.Tensor, width: int, faults: Faults) -> torch.Tensor:
    """int64 lengths; with ``padding_as_unsigned`` a -1 is read as 2**32 - 1, clamped to the row's width."""
    wide = lengths.to(torch.int64)
    return torch.where(wide < 0, width, wide) if faults.padding_as_unsigned else wide


def rank_lanes(
    scores: torch.Tensor, lengths: torch.Tensor, faults: Faults = NO_FAULTS, exclude_neg_inf: bool = False
) -> torch.Tensor:
    """Every lane of each row: eligible lanes first (valid; not -inf under ``exclude_neg_inf``), best first (NaN,
    +inf, numbers, -inf; ties by lowest index)."""
    width = scores.shape[1]
    lanes = torch.arange(width, device=scores.device)
    valid = lanes < lengths.to(torch.int64).unsqueeze(-1)
    if exclude_neg_inf:
        valid &= scores != float("-inf")
    key = (scores.half().float() if faults.float16_keys else scores) + 0.0  # -0.0 becomes 0.0
    if faults.rank_whole_row:
        return _stable_descending(key)
    key = torch.where(valid, key, torch.zeros_like(key))
    if faults.ties_to_highest_index:
        order = width - 1 - _stable_descending(key.flip(1))
    else:
        order = _stable_descending(key)
    valid_first = _stable_descending(valid.gather(1, order).to(torch.int8))
    return order.gather(1, valid_first)


def topk(
    scores: torch.Tensor,
    lengths: torch.Tensor,
    offsets: torch.Tensor,
    *,
    k: int,
    convention: str,
    faults: Faults = NO_FAULTS,
) -> torch.Tensor:
    """The lanes of ``convention`` (see the contract): chosen rows plus offset, then fill lanes."""
    rows, width = scores.shape
    if faults.ignores_strides:
        scores = scores.as_strided(scores.shape, (width, 1))
    rule = parse("topk", convention).rule
    layout = lane_layout(rule)
    lanes_out, fill = layout.lanes(k, width), layout.fill
    exclude = getattr(rule, "masked_lanes", None) is MaskedLanes.EXCLUDED and not faults.neg_inf_eligible
    if layout.whole_row and bool((lengths != width).any()):
        raise ValueError(f"lengths: v4-decode scores exactly the visible rows: each must be {width}")
    if faults.all_zero_unwritten and rows and int(lengths.max()) <= 0:
        return torch.zeros((rows, lanes_out), dtype=torch.int32, device=scores.device)
    take = min(k, width)
    lengths64 = unsigned_lengths(lengths, width, faults)
    if (lanes_read := tile(faults, "topk_width")) is not None:
        lengths64 = lengths64.clamp(max=lanes_read)
    order = rank_lanes(scores, lengths64, faults, exclude)[:, :take]
    eligible = lengths64
    if exclude:
        live = torch.arange(width, device=scores.device) < lengths64.unsqueeze(-1)
        eligible = (live & (scores != float("-inf"))).sum(dim=1)
    count = eligible.clamp(max=k).unsqueeze(-1)
    lane = torch.arange(take, device=scores.device)
    if faults.rank_whole_row:
        holds_row = order < lengths64.unsqueeze(-1)
    else:
        holds_row = lane < count
    if layout.index_order and not faults.rank_order_output:
        if faults.no_fill:
            order = order.sort(dim=1).values
        else:
            order = torch.where(holds_row, order, width).sort(dim=1).values
            holds_row = order < width
    shift = offsets.to(torch.int64).unsqueeze(-1)
    if faults.no_fill:
        out = order + shift
    elif faults.offset_on_fill:
        out = torch.where(holds_row, order, fill) + shift
    else:
        out = torch.where(holds_row, order + shift, fill)
    pad = torch.full((rows, lanes_out - take), fill, dtype=torch.int64, device=scores.device)
    return torch.cat([out, pad], dim=1).to(torch.int32)


# --- candidate blocks ----------------------------------------------------------------------------------------------


def candidate_select(
    scores: torch.Tensor,
    lengths: torch.Tensor,
    *,
    block_size: int,
    topk_blocks: int,
    pin_newest: bool,
    drop_nan: bool,
    faults: Faults = NO_FAULTS,
) -> torch.Tensor:
    """Kept block ids ascending (``rank_order_output``: in rank order), -1 fill, ``topk_blocks`` lanes."""
    rows, width = scores.shape
    blocks = -(-width // block_size)
    lengths64 = lengths.to(torch.int64).unsqueeze(-1)
    padded = torch.full((rows, blocks * block_size), float("-inf"), device=scores.device)
    padded[:, :width] = scores.half().float() if faults.float16_keys else scores
    lanes = torch.arange(blocks * block_size, device=scores.device)
    if faults.whole_blocks_only:
        lengths64 = lengths64 // block_size * block_size
    if not faults.block_max_past_end:
        padded = torch.where(lanes < lengths64, padded, float("-inf"))
    block_max = padded.view(rows, blocks, block_size).amax(dim=2)
    if (seen := tile(faults, "candidate_blocks")) is not None:
        block_max[:, seen:] = float("-inf")
    if pin_newest and faults.pin_newest:
        rounding = "trunc" if faults.pin_truncates else "floor"
        newest = torch.div(lengths64 - 1, block_size, rounding_mode=rounding)
        present = lengths64 != 0 if faults.pin_truncates else lengths64 > 0
        pinned = (torch.arange(blocks, device=scores.device) == newest) & present
        block_max = torch.where(pinned, float("inf"), block_max)
    order = _stable_descending(block_max)[:, :topk_blocks]
    value = block_max.gather(1, order)
    drop = drop_nan != faults.flip_nan_policy
    keep = value > float("-inf") if drop else value != float("-inf")
    if faults.rank_order_output:
        kept = torch.where(keep, order, blocks)
        kept = kept.gather(1, _stable_descending((kept != blocks).to(torch.int8)))
    else:
        kept = torch.where(keep, order, blocks).sort(dim=1).values
    kept = torch.where(kept == blocks, -1, kept)
    pad = torch.full((rows, topk_blocks - kept.shape[1]), -1, dtype=torch.int64, device=scores.device)
    return torch.cat([kept, pad], dim=1).to(torch.int32)


def candidate_restore(
    offsets: torch.Tensor, candidate_blocks: torch.Tensor, *, block_size: int, faults: Faults = NO_FAULTS
) -> torch.Tensor:
    """``o -> candidate_blocks[o // bs] * bs + o % bs``; -1 and offsets into padding blocks give -1. A candidate
    block below -1 raises ValueError (padding is exactly -1)."""
    if not faults.any_negative_padding and candidate_blocks.numel() and int(candidate_blocks.min()) < -1:
        raise ValueError("candidate_blocks: must hold block ids >= 0 or -1 (padding)")
    o = offsets.to(torch.int64)
    if candidate_blocks.shape[1] == 0:
        return torch.full_like(offsets, -1)
    safe = o.clamp_min(0)
    block = candidate_blocks.to(torch.int64).gather(1, safe // block_size)
    scale = 1 if faults.restore_unscaled else block_size
    row = block * scale + safe % block_size
    out = torch.where((o == -1) | (block < 0), -1, row).to(torch.int32)
    if (written := tile(faults, "restore_k")) is not None:
        out[:, written:] = -1
    return out


def candidate_remap(
    columns: torch.Tensor,
    candidate_blocks: torch.Tensor,
    lengths: torch.Tensor,
    *,
    block_size: int,
    faults: Faults = NO_FAULTS,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Column c -> the c-th position below the length of the candidate blocks, ascending; -1 stays -1; with each
    row's count of such positions."""
    blocks = candidate_blocks.to(torch.int64)
    if not faults.remap_given_order:
        blocks = blocks.sort(dim=1).values
    if (cut := tile(faults, "remap_blocks")) is not None:
        blocks = torch.where(torch.arange(blocks.shape[1], device=blocks.device) < cut, blocks, -1)
    rows = blocks.shape[0]
    starts = (blocks * block_size).unsqueeze(-1)
    positions = (starts + torch.arange(block_size, device=blocks.device)).reshape(rows, -1)
    limit = lengths.to(torch.int64).unsqueeze(-1)
    if faults.remap_past_length:
        seen = torch.ones_like(positions, dtype=torch.bool)
    elif faults.remap_whole_blocks:
        seen = (starts < limit.unsqueeze(-1)).expand(-1, -1, block_size).reshape(rows, -1)
    else:
        seen = positions < limit
    ok = seen & (blocks >= 0).repeat_interleave(block_size, dim=1)
    order = (~ok).to(torch.int8).sort(dim=1, stable=True).indices
    compact = torch.cat([positions.gather(1, order), torch.full((rows, 1), -1, device=blocks.device)], dim=1)
    c = columns.to(torch.int64)
    picked = compact.gather(1, torch.where(c < 0, compact.shape[1] - 1, c))
    return picked.to(torch.int32), ok.sum(dim=1).to(torch.int32)


# --- addresses ---------------------------------------------------------------------------------------------------


def slot_translation(
    rows: torch.Tensor,
    block_table: torch.Tensor,
    lengths: torch.Tensor,
    *,
    block_size: int,
    ratio: int,
    faults: Faults = NO_FAULTS,
    out_dtype: torch.dtype = torch.int64,
) -> torch.Tensor:
    """``block_table[j // Bc] * Bc + j % Bc`` in int64; -1 for -1 lanes and lanes past ``lengths``; the result
    as ``out_dtype`` (int32 under the option int32_slots)."""
    per_block = block_size if faults.rows_per_block_is_block_size else block_size // ratio
    wide = torch.int32 if faults.int32_slots else torch.int64
    j = rows.to(wide)
    lane = torch.arange(rows.shape[1], device=rows.device)
    live = j != -1
    if not faults.ignore_lengths:
        live &= lane < unsigned_lengths(lengths, rows.shape[1], faults).unsqueeze(-1)
    if block_table.shape[1] == 0:
        return torch.full(rows.shape, -1, dtype=out_dtype, device=rows.device)
    last = block_table.shape[1] - 1
    safe = torch.where(live, j, 0)
    block = block_table.to(wide).gather(1, (safe // per_block).clamp(0, last).to(torch.int64))
    scale = 1 if faults.slot_unscaled else per_block
    slot = block * scale + safe % per_block
    if faults.slot_via_block_size:
        narrow = block.to(torch.int32) * block_size + (safe % per_block).to(torch.int32) * (block_size // per_block)
        slot = torch.div(narrow, block_size // per_block, rounding_mode="floor").to(wide)
    if (written := tile(faults, "slot_lanes")) is not None:
        live &= lane < written
    return torch.where(live, slot, -1).to(out_dtype)


def gathered_rows(rows: torch.Tensor, offsets: torch.Tensor, faults: Faults = NO_FAULTS) -> torch.Tensor:
    """Each row lane plus its request's offset; -1 stays -1 (int64)."""
    r = rows.to(torch.int64)
    shift = offsets.to(torch.int64)
    if (requests := tile(faults, "gathered_requests")) is not None:
        shift = shift[torch.arange(len(shift)) - torch.where(torch.arange(len(shift)) >= requests, requests, 0)]
    shifted = r + shift.unsqueeze(-1)
    return shifted if faults.offset_on_empty else torch.where(r == -1, -1, shifted)


def window_indices(
    *, window: int, seqlen: int, start_pos: int, convention: str, faults: Faults = NO_FAULTS
) -> torch.Tensor:
    """Prefill rows (start_pos 0) or the one decode row of ring slots, int32, -1 for empty lanes."""
    if start_pos == 0:
        i = torch.arange(seqlen).unsqueeze(1)
        first = (i - window + 1 - faults.window_first_shift).clamp_min(0)
        idx = first + torch.arange(min(window, seqlen))
        return _window_tile(torch.where(idx > i, -1, idx).to(torch.int32), faults)
    t = torch.arange(start_pos - window + 1, start_pos + 1)
    slots = torch.where(t >= 0, t % window, -1)
    order = faults.window_order or convention
    if order == "v4":
        slots = torch.cat([slots[t >= 0], slots[t < 0]])
    return _window_tile(slots.to(torch.int32).unsqueeze(0), faults)


def _window_tile(lanes: torch.Tensor, faults: Faults) -> torch.Tensor:
    if (written := tile(faults, "window_lanes")) is not None:
        lanes[:, written:] = -1
    return lanes


def window_release(
    seq_lens: torch.Tensor, step_lens: torch.Tensor, *, window: int, block_size: int, faults: Faults = NO_FAULTS
) -> torch.Tensor:
    """Leading blocks released: ``max(0, S - kept) // block_size`` with ``kept = window + D - 1`` positions."""
    seq, step = seq_lens.to(torch.int64), step_lens.to(torch.int64)
    kept = {
        "window_plus_step": step + window - 1,
        "window": torch.full_like(step, window),
        "window_plus_step_minus_2": step + window - 2,
        "all": seq,
    }[faults.release_keeps]
    released = ((seq - kept).clamp_min(0) // block_size).to(torch.int32)
    if (requests := tile(faults, "release_requests")) is not None:
        released[requests:] = 0
    return released


def compressed_indices(
    *, ratio: int, seqlen: int, start_pos: int, offset: int, faults: Faults = NO_FAULTS
) -> torch.Tensor:
    """Every compressed row each query sees: the query at p lists rows ``0 .. (p + 1) // ratio - 1`` plus
    ``offset``, then -1, over ``(start_pos + seqlen) // ratio`` lanes (int32)."""
    p = torch.arange(start_pos, start_pos + seqlen, dtype=torch.int64)
    seen = p // ratio if faults.compressed_floor_p else (p + 1) // ratio
    if faults.count_per_step:
        seen = torch.full_like(seen, (start_pos + seqlen) // ratio)
    lane = torch.arange((start_pos + seqlen) // ratio, dtype=torch.int64)
    if (written := tile(faults, "compressed_lanes")) is not None:
        seen = seen.clamp(max=written)
    return torch.where(lane < seen.unsqueeze(1), lane + offset, -1).to(torch.int32)
