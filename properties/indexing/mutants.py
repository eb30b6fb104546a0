"""The indexing area's shipped mutants: the torch implementations of ``properties.indexing.faulty`` with one
planted bug each (a ``Faults`` field), under the convention where the bug shows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from properties.indexing import faulty as ti
from properties.mutants import catalogue
from properties.registry import Implementation
from reference.addressing import SlotWidth
from reference.conventions import parse

CONVENTION_RULES = {
    "pinned+drop_nan": (True, True),
    "unpinned+drop_nan": (False, True),
    "pinned+propagate_nan": (True, False),
    "unpinned+propagate_nan": (False, False),
}


def bound(op: str, convention: str | None, faults: ti.Faults) -> Callable[..., Any]:
    """A contract-shaped callable of ``op`` under ``convention`` with ``faults`` planted."""
    if op == "index_scores":
        return lambda q, weights, k, positions, *, ratio: ti.index_scores(
            q, weights, k, positions, ratio=ratio, faults=faults
        )
    if op == "paged_index_scores":
        return lambda q, weights, cache, block_table, lengths: ti.paged_index_scores(
            q, weights, cache, block_table, lengths, faults=faults
        )
    if op == "paged_index_scores_fp8":
        return lambda q, q_scale, weights, cache, block_table, lengths, *, rows_per_block: ti.paged_index_scores_fp8(
            q, q_scale, weights, cache, block_table, lengths, rows_per_block=rows_per_block, faults=faults
        )
    if op == "index_scores_fp8":
        return lambda q, q_scale, weights, k, k_scale, positions, *, ratio: ti.index_scores_fp8(
            q, q_scale, weights, k, k_scale, positions, ratio=ratio, faults=faults
        )
    if op == "topk":
        return lambda scores, lengths, offsets, *, k: ti.topk(
            scores, lengths, offsets, k=k, convention=convention or "", faults=faults
        )
    if op == "candidate_select":
        pin, drop = CONVENTION_RULES[parse(op, convention or "").base]
        return lambda scores, lengths, *, block_size, topk_blocks: ti.candidate_select(
            scores,
            lengths,
            block_size=block_size,
            topk_blocks=topk_blocks,
            pin_newest=pin,
            drop_nan=drop,
            faults=faults,
        )
    if op == "candidate_restore":
        return lambda offsets, candidate_blocks, *, block_size: ti.candidate_restore(
            offsets, candidate_blocks, block_size=block_size, faults=faults
        )
    if op == "candidate_remap":
        return lambda columns, candidate_blocks, lengths, *, block_size: ti.candidate_remap(
            columns, candidate_blocks, lengths, block_size=block_size, faults=faults
        )
    if op == "slot_translation":
        narrow = parse(op, convention or "").setting(SlotWidth, SlotWidth.INT64) is SlotWidth.INT32
        dtype = torch.int32 if narrow else torch.int64
        return lambda rows, block_table, lengths, *, block_size, ratio: ti.slot_translation(
            rows, block_table, lengths, block_size=block_size, ratio=ratio, faults=faults, out_dtype=dtype
        )
    if op == "gathered_rows":
        return lambda rows, offsets: ti.gathered_rows(rows, offsets, faults=faults)
    if op == "window_indices":
        return lambda *, window, seqlen, start_pos: ti.window_indices(
            window=window, seqlen=seqlen, start_pos=start_pos, convention=convention or "", faults=faults
        )
    if op == "window_release":
        return lambda seq_lens, step_lens, *, window, block_size: ti.window_release(
            seq_lens, step_lens, window=window, block_size=block_size, faults=faults
        )
    if op == "compressed_indices":
        return lambda *, ratio, seqlen, start_pos, offset: ti.compressed_indices(
            ratio=ratio, seqlen=seqlen, start_pos=start_pos, offset=offset, faults=faults
        )
    raise ValueError(f"op: no torch implementation of {op!r}")


def mutant(op: str, name: str, convention: str | None, note: str, **fault: Any) -> Implementation:
    return Implementation(op, name, bound(op, convention, ti.Faults(**fault)), convention, origin="mutant", note=note)


MUTANTS = [mutant(p.op, p.name, p.convention, p.note, **p.bug) for p in catalogue(__file__)]
"""The catalogue ``mutants.json``, in order: each entry's ``bug`` holds the ``Faults`` fields it changes."""
