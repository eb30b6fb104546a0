"""The exact indexing reference as implementations of the contract's operations, one per convention.

Each adapter has the contract's torch signature (``properties.contract``). It reads its tensors into exact
values (``properties.indexing.values``), hands the reference only what the operation may read (a score row's
valid prefix, followed by ``None`` where garbage lies, which the reference would refuse if it touched it),
and writes the reference's answer back as the contract's tensor. Index scores are rounded from their exact
values to the nearest float32; lanes past a query's visible rows are NaN (not compared).
"""

from __future__ import annotations

import struct
from fractions import Fraction

import torch

from properties.indexing.values import exact_score, index_tensor, nearest_float32
from properties.registry import Implementation, collect
from reference import addressing, candidates, compressed_list, conventions, indexing, padding, window_release
from reference import window as indexing_window
from reference.checks import require_nonnegative_int
from reference.score_values import Score

IMPLEMENTATIONS: list[Implementation] = []


def visible_prefix(row: list[float], length: int) -> list[Score | None]:
    """The valid prefix as exact scores; ``None`` (never read by the reference) for the rest of the row. A
    padding row (length -1, ``reference.padding``) has no valid prefix."""
    n = padding.row_length(length, "lengths")
    return [exact_score(v) for v in row[:n]] + [None] * (len(row) - n)


def _exact(values: list[float]) -> list[Fraction]:
    return [Fraction(v) for v in values]


@collect(IMPLEMENTATIONS, "index_scores", "reference", origin="reference")
def reference_index_scores(
    q: torch.Tensor, weights: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, *, ratio: int
) -> torch.Tensor:
    keys = k.tolist()
    out = torch.full((q.shape[0], k.shape[0]), float("nan"), dtype=torch.float32)
    for m, (heads, w, p) in enumerate(zip(q.tolist(), weights.tolist(), positions.tolist(), strict=True)):
        seen = padding.query_visible_rows(p, ratio)
        exact = indexing.index_scores([_exact(h) for h in heads], _exact(w), [_exact(r) for r in keys[:seen]])
        out[m, :seen] = torch.tensor([nearest_float32(s) for s in exact], dtype=torch.float32)
    return out.to(q.device)


@collect(IMPLEMENTATIONS, "paged_index_scores", "reference", origin="reference")
def reference_paged_index_scores(
    q: torch.Tensor, weights: torch.Tensor, cache: torch.Tensor, block_table: torch.Tensor, lengths: torch.Tensor
) -> torch.Tensor:
    """Each query's rows read through its request's block table (``reference.addressing.rows_to_slots``), then
    ``reference.indexing.index_scores``; NaN past a query's rows."""
    per_block, requests, next_n = cache.shape[1], q.shape[0], q.shape[1]
    rows = cache.reshape(-1, cache.shape[2]).tolist()
    out = torch.full((requests * next_n, block_table.shape[1] * per_block), float("nan"), dtype=torch.float32)
    for b, (table, counts) in enumerate(zip(block_table.tolist(), lengths.tolist(), strict=True)):
        for t, n in enumerate(counts):
            seen = require_nonnegative_int(n, f"lengths[{b}][{t}]")
            slots = addressing.rows_to_slots(list(range(seen)), table[: -(-seen // per_block)], per_block, 1)
            keys = [_exact(rows[s]) for s in slots]
            exact = indexing.index_scores([_exact(h) for h in q[b, t].tolist()], _exact(weights[b, t].tolist()), keys)
            out[b * next_n + t, :seen] = torch.tensor([nearest_float32(v) for v in exact], dtype=torch.float32)
    return out.to(q.device)


@collect(IMPLEMENTATIONS, "index_scores_fp8", "reference", origin="reference")
def reference_index_scores_fp8(*tensors: torch.Tensor, ratio: int) -> torch.Tensor:
    q, q_scale, weights, k, k_scale, positions = tensors  # the contract's order
    keys, key_scales = k.tolist(), k_scale.tolist()
    out = torch.full((q.shape[0], k.shape[0]), float("nan"), dtype=torch.float32)
    rows = zip(q.tolist(), q_scale.tolist(), weights.tolist(), positions.tolist(), strict=True)
    for m, (codes, scales, w, p) in enumerate(rows):
        seen = padding.query_visible_rows(p, ratio)
        exact = indexing.quantized_index_scores(
            codes, _exact(scales), _exact(w), keys[:seen], _exact(key_scales[:seen])
        )
        out[m, :seen] = torch.tensor([nearest_float32(s) for s in exact], dtype=torch.float32)
    return out.to(q.device)


@collect(IMPLEMENTATIONS, "paged_index_scores_fp8", "reference", origin="reference")
def reference_paged_index_scores_fp8(*tensors: torch.Tensor, rows_per_block: int) -> torch.Tensor:
    """Each query's rows read through its request's block table from the FP8 index cache (a block's rows of
    codes, then their float32 scales), then ``reference.indexing.quantized_index_scores``; NaN past its rows."""
    q, q_scale, weights, cache, block_table, lengths = tensors  # the contract's order
    requests, next_n, _, dim = q.shape
    per_block = require_nonnegative_int(rows_per_block, "rows_per_block")
    blocks = cache.cpu().tolist()
    codes = [[row[r * dim : (r + 1) * dim] for r in range(per_block)] for row in blocks]
    scales = [list(struct.unpack(f"<{per_block}f", bytes(row[per_block * dim :]))) for row in blocks]
    out = torch.full((requests * next_n, block_table.shape[1] * per_block), float("nan"), dtype=torch.float32)
    for b, (table, counts) in enumerate(zip(block_table.tolist(), lengths.tolist(), strict=True)):
        for t, n in enumerate(counts):
            seen = require_nonnegative_int(n, f"lengths[{b}][{t}]")
            slots = addressing.rows_to_slots(list(range(seen)), table[: -(-seen // per_block)], per_block, 1)
            keys = [codes[s // per_block][s % per_block] for s in slots]
            key_scales = [scales[s // per_block][s % per_block] for s in slots]
            exact = indexing.quantized_index_scores(
                q[b, t].tolist(), _exact(q_scale[b, t].tolist()), _exact(weights[b, t].tolist()), keys,
                _exact(key_scales),
            )  # fmt: skip
            out[b * next_n + t, :seen] = torch.tensor([nearest_float32(v) for v in exact], dtype=torch.float32)
    return out.to(q.device)


def _topk_adapter(name: str) -> None:
    convention = conventions.TOPK[name].rule

    @collect(IMPLEMENTATIONS, "topk", "reference", convention=name, origin="reference")
    def reference_topk(scores: torch.Tensor, lengths: torch.Tensor, offsets: torch.Tensor, *, k: int) -> torch.Tensor:
        lanes = [
            list(padding.topk_row(visible_prefix(row, n), n, k, convention, offset))
            for row, n, offset in zip(scores.tolist(), lengths.tolist(), offsets.tolist(), strict=True)
        ]
        return index_tensor(lanes, torch.int32, str(scores.device))


def _candidate_adapter(name: str) -> None:
    rule = conventions.CANDIDATE_SELECT[name].rule

    @collect(IMPLEMENTATIONS, "candidate_select", "reference", convention=name, origin="reference")
    def reference_candidate_select(
        scores: torch.Tensor, lengths: torch.Tensor, *, block_size: int, topk_blocks: int
    ) -> torch.Tensor:
        lanes = []
        for row, n in zip(scores.tolist(), lengths.tolist(), strict=True):
            kept = list(padding.candidate_row(visible_prefix(row, n), n, topk_blocks, block_size, rule))
            lanes.append(kept + [-1] * (topk_blocks - len(kept)))
        return index_tensor(lanes, torch.int32, str(scores.device))


@collect(IMPLEMENTATIONS, "candidate_restore", "reference", origin="reference")
def reference_candidate_restore(
    offsets: torch.Tensor, candidate_blocks: torch.Tensor, *, block_size: int
) -> torch.Tensor:
    lanes = [
        list(candidates.restore_offsets(o, blocks, block_size))
        for o, blocks in zip(offsets.tolist(), candidate_blocks.tolist(), strict=True)
    ]
    return index_tensor(lanes, torch.int32, str(offsets.device))


@collect(IMPLEMENTATIONS, "candidate_remap", "reference", origin="reference")
def reference_candidate_remap(
    columns: torch.Tensor, candidate_blocks: torch.Tensor, lengths: torch.Tensor, *, block_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    rows = [
        candidates.remap_columns(c, blocks, n, block_size)
        for c, blocks, n in zip(columns.tolist(), candidate_blocks.tolist(), lengths.tolist(), strict=True)
    ]
    device = str(columns.device)
    counts = torch.tensor([count for _, count in rows], dtype=torch.int32, device=device)
    return index_tensor([list(p) for p, _ in rows], torch.int32, device), counts


def _slot_adapter(name: str) -> None:
    @collect(IMPLEMENTATIONS, "slot_translation", "reference", convention=name, origin="reference")
    def reference_slot_translation(
        rows: torch.Tensor, block_table: torch.Tensor, lengths: torch.Tensor, *, block_size: int, ratio: int
    ) -> torch.Tensor:
        count = conventions.SLOT_TRANSLATION[name].rule is addressing.LaneGuard.COUNT  # lanes past n are not read
        lanes = [
            list(padding.slot_row(r, table, block_size, ratio, n, count))
            for r, table, n in zip(rows.tolist(), block_table.tolist(), lengths.tolist(), strict=True)
        ]
        return index_tensor(lanes, torch.int64, str(rows.device))


@collect(IMPLEMENTATIONS, "gathered_rows", "reference", origin="reference")
def reference_gathered_rows(rows: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    lanes = [list(addressing.gathered_rows(r, o)) for r, o in zip(rows.tolist(), offsets.tolist(), strict=True)]
    return index_tensor(lanes, torch.int64, str(rows.device))


def _window_adapter(name: str) -> None:
    order = conventions.WINDOW_INDICES[name].rule

    @collect(IMPLEMENTATIONS, "window_indices", "reference", convention=name, origin="reference")
    def reference_window_indices(*, window: int, seqlen: int, start_pos: int) -> torch.Tensor:
        if start_pos == 0:
            rows = [list(r) for r in indexing_window.prefill_window(window, seqlen)]
            return torch.tensor(rows, dtype=torch.int32).reshape(seqlen, min(window, seqlen))
        if seqlen != 1:
            raise ValueError(f"seqlen: a decode step (start_pos > 0) has one query, got {seqlen}")
        return torch.tensor([list(indexing_window.decode_window(window, start_pos, order))], dtype=torch.int32)


@collect(IMPLEMENTATIONS, "window_release", "reference", origin="reference")
def reference_window_release(
    seq_lens: torch.Tensor, step_lens: torch.Tensor, *, window: int, block_size: int
) -> torch.Tensor:
    counts = [
        window_release.released_blocks(s, d, window, block_size)
        for s, d in zip(seq_lens.tolist(), step_lens.tolist(), strict=True)
    ]
    return torch.tensor(counts, dtype=torch.int32, device=seq_lens.device)


@collect(IMPLEMENTATIONS, "compressed_indices", "reference", origin="reference")
def reference_compressed_indices(*, ratio: int, seqlen: int, start_pos: int, offset: int) -> torch.Tensor:
    rows = [list(r) for r in compressed_list.compressed_indices(ratio, seqlen, start_pos, offset)]
    return torch.tensor(rows, dtype=torch.int32).reshape(seqlen, (start_pos + seqlen) // ratio)


for _name in conventions.TOPK:
    _topk_adapter(_name)
for _name in conventions.CANDIDATE_SELECT:
    _candidate_adapter(_name)
for _name in conventions.SLOT_TRANSLATION:
    _slot_adapter(_name)
for _name in conventions.WINDOW_INDICES:
    _window_adapter(_name)
