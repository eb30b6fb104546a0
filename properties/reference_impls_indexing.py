"""The exact indexing reference as implementations of the contract's operations, one per convention.

Each adapter has the contract's torch signature (``properties.contract``). It reads its tensors into exact
values (``properties.indexing_values``), hands the reference only what the operation may read (a score row's
valid prefix, followed by ``None`` where garbage lies, which the reference would refuse if it touched it),
and writes the reference's answer back as the contract's tensor. Index scores are rounded from their exact
values to the nearest float32; lanes past a query's visible rows are NaN (not compared).
"""

from __future__ import annotations

from fractions import Fraction

import torch

from properties.indexing_values import exact_score, index_tensor, nearest_float32
from properties.registry import implementation
from reference import addressing, candidates, indexing, topk
from reference import window as indexing_window
from reference.score_values import Score

TOPK_CONVENTIONS: dict[str, topk.TopKConvention] = {
    "v4.1": topk.V41TopK(width=topk.Width.FIXED),
    "v4.1-clamped": topk.V41TopK(width=topk.Width.CLAMPED),
    "v4-prefill": topk.V4TopK(topk.Phase.PREFILL),
    "v4-decode": topk.V4TopK(topk.Phase.DECODE),
    "select": topk.SelectTopK(fill=topk.INT32_MAX, sorted_index=True),
    "select-unsorted": topk.SelectTopK(fill=topk.INT32_MAX, sorted_index=False),
}

CANDIDATE_RULES: dict[str, candidates.CandidateRule] = {
    "pinned+drop_nan": candidates.CandidateRule(True, candidates.NanPolicy.DROP),
    "unpinned+drop_nan": candidates.CandidateRule(False, candidates.NanPolicy.DROP),
    "pinned+propagate_nan": candidates.CandidateRule(True, candidates.NanPolicy.PROPAGATE),
    "unpinned+propagate_nan": candidates.CandidateRule(False, candidates.NanPolicy.PROPAGATE),
}

WINDOW_ORDERS = {"v4": indexing_window.WindowOrder.V4, "v4.1": indexing_window.WindowOrder.V41}


def visible_prefix(row: list[float], length: int) -> list[Score | None]:
    """The valid prefix as exact scores; ``None`` (never read by the reference) for the rest of the row."""
    return [exact_score(v) for v in row[:length]] + [None] * (len(row) - length)


def _exact(values: list[float]) -> list[Fraction]:
    return [Fraction(v) for v in values]


@implementation("index_scores", "reference", origin="reference")
def reference_index_scores(
    q: torch.Tensor, weights: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, *, ratio: int
) -> torch.Tensor:
    keys = k.tolist()
    out = torch.full((q.shape[0], k.shape[0]), float("nan"), dtype=torch.float32)
    for m, (heads, w, p) in enumerate(zip(q.tolist(), weights.tolist(), positions.tolist(), strict=True)):
        seen = indexing.visible_rows(p, ratio)
        exact = indexing.index_scores([_exact(h) for h in heads], _exact(w), [_exact(r) for r in keys[:seen]])
        out[m, :seen] = torch.tensor([nearest_float32(s) for s in exact], dtype=torch.float32)
    return out.to(q.device)


def _topk_adapter(name: str) -> None:
    convention = TOPK_CONVENTIONS[name]

    @implementation("topk", "reference", convention=name, origin="reference")
    def reference_topk(scores: torch.Tensor, lengths: torch.Tensor, offsets: torch.Tensor, *, k: int) -> torch.Tensor:
        lanes = [
            list(topk.topk(visible_prefix(row, n), n, k, convention, offset))
            for row, n, offset in zip(scores.tolist(), lengths.tolist(), offsets.tolist(), strict=True)
        ]
        return index_tensor(lanes, torch.int32, str(scores.device))


def _candidate_adapter(name: str) -> None:
    rule = CANDIDATE_RULES[name]

    @implementation("candidate_select", "reference", convention=name, origin="reference")
    def reference_candidate_select(
        scores: torch.Tensor, lengths: torch.Tensor, *, block_size: int, topk_blocks: int
    ) -> torch.Tensor:
        lanes = []
        for row, n in zip(scores.tolist(), lengths.tolist(), strict=True):
            kept = list(candidates.kept_blocks(visible_prefix(row, n), n, topk_blocks, block_size, rule))
            lanes.append(kept + [-1] * (topk_blocks - len(kept)))
        return index_tensor(lanes, torch.int32, str(scores.device))


@implementation("candidate_restore", "reference", origin="reference")
def reference_candidate_restore(
    offsets: torch.Tensor, candidate_blocks: torch.Tensor, *, block_size: int
) -> torch.Tensor:
    lanes = [
        list(candidates.restore_offsets(o, blocks, block_size))
        for o, blocks in zip(offsets.tolist(), candidate_blocks.tolist(), strict=True)
    ]
    return index_tensor(lanes, torch.int32, str(offsets.device))


def _slot_adapter(name: str) -> None:
    @implementation("slot_translation", "reference", convention=name, origin="reference")
    def reference_slot_translation(
        rows: torch.Tensor, block_table: torch.Tensor, lengths: torch.Tensor, *, block_size: int, ratio: int
    ) -> torch.Tensor:
        lanes = []
        for r, table, n in zip(rows.tolist(), block_table.tolist(), lengths.tolist(), strict=True):
            if name == "count":  # the count guard: lanes past n are not read
                lanes.append(list(addressing.rows_to_slots(r, table, block_size, ratio, valid_lanes=n)))
            else:  # the sentinel guard, over the lanes below n
                live = r[:n] + [-1] * (len(r) - n)
                lanes.append(list(addressing.rows_to_slots(live, table, block_size, ratio)))
        return index_tensor(lanes, torch.int64, str(rows.device))


@implementation("gathered_rows", "reference", origin="reference")
def reference_gathered_rows(rows: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    lanes = [list(addressing.gathered_rows(r, o)) for r, o in zip(rows.tolist(), offsets.tolist(), strict=True)]
    return index_tensor(lanes, torch.int64, str(rows.device))


def _window_adapter(name: str) -> None:
    order = WINDOW_ORDERS[name]

    @implementation("window_indices", "reference", convention=name, origin="reference")
    def reference_window_indices(*, window: int, seqlen: int, start_pos: int) -> torch.Tensor:
        if start_pos == 0:
            rows = [list(r) for r in indexing_window.prefill_window(window, seqlen)]
            return torch.tensor(rows, dtype=torch.int32).reshape(seqlen, min(window, seqlen))
        if seqlen != 1:
            raise ValueError(f"seqlen: a decode step (start_pos > 0) has one query, got {seqlen}")
        return torch.tensor([list(indexing_window.decode_window(window, start_pos, order))], dtype=torch.int32)


for _name in TOPK_CONVENTIONS:
    _topk_adapter(_name)
for _name in CANDIDATE_RULES:
    _candidate_adapter(_name)
for _name in ("sentinel", "count"):
    _slot_adapter(_name)
for _name in WINDOW_ORDERS:
    _window_adapter(_name)
