"""The indexing area's shipped mutants: the torch implementations of ``properties.indexing.faulty`` with one
planted bug each (a ``Faults`` field), under the convention where the bug shows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from properties.indexing import faulty as ti
from properties.ladder import ladder
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


MUTANTS = [
    mutant(
        "index_scores",
        "index_scores_visible_floor_p_over_r",
        None,
        "floor(p / r) rows visible, not floor((p + 1) / r)",
        visible_floor_p=True,
    ),
    mutant(
        "index_scores",
        "index_scores_relu_after_head_sum",
        None,
        "relu(sum_h w_h q_h.k) for sum_h w_h relu(q_h.k)",
        relu_after_head_sum=True,
    ),
    mutant(
        "index_scores_fp8",
        "index_scores_fp8_one_query_scale",
        None,
        "head 0's query scale used for every head",
        fp8_one_query_scale=True,
    ),
    mutant(
        "index_scores_fp8",
        "index_scores_fp8_subnormals_flushed",
        None,
        "e4m3 subnormal codes decoded as zero",
        fp8_flush_subnormals=True,
    ),
    mutant(
        "index_scores_fp8",
        "index_scores_fp8_key_scale_after_relu",
        None,
        "the key scale multiplies relu(q . k), not q . k (negative scales)",
        fp8_key_scale_after_relu=True,
    ),
    mutant(
        "topk",
        "topk_ties_to_highest_index",
        "v4-prefill",
        "equal scores: the highest index wins",
        ties_to_highest_index=True,
    ),
    mutant("topk", "topk_missing_minus_one_fill", "v4.1", "lanes past the chosen rows are not set to -1", no_fill=True),
    mutant("topk", "topk_offset_on_fill_lanes", "v4.1", "the offset is added to -1 lanes too", offset_on_fill=True),
    mutant(
        "topk", "topk_reads_past_valid_end", "select", "ranks the whole row, garbage tail included", rank_whole_row=True
    ),
    mutant("topk", "topk_sorted_by_score", "v4.1-clamped", "rank order instead of index order", rank_order_output=True),
    mutant(
        "topk",
        "topk_ties_any_rank_order",
        "v4.1+ties_any",
        "ties broken by the highest index (allowed), the rows listed in rank order (not)",
        ties_to_highest_index=True,
        rank_order_output=True,
    ),
    mutant(
        "topk",
        "topk_neg_inf_chosen",
        "select+neg_inf_excluded",
        "chooses -inf rows of the valid prefix",
        neg_inf_eligible=True,
    ),
    mutant(
        "candidate_select",
        "candidates_newest_not_pinned",
        "pinned+drop_nan",
        "the newest block is not forced to +inf",
        pin_newest=False,
    ),
    mutant(
        "candidate_select",
        "candidates_nan_policy_flipped",
        "pinned+drop_nan",
        "NaN blocks kept under drop_nan",
        flip_nan_policy=True,
    ),
    mutant(
        "candidate_select",
        "candidates_partial_block_dropped",
        "unpinned+drop_nan",
        "floor(valid / bs) blocks",
        whole_blocks_only=True,
    ),
    mutant(
        "candidate_select",
        "candidates_block_max_reads_past_end",
        "unpinned+propagate_nan",
        "no -inf padding past the valid end",
        block_max_past_end=True,
    ),
    mutant(
        "candidate_select",
        "candidates_ascending_under_order_rank",
        "pinned+drop_nan+ties_any+order_rank",
        "kept blocks listed by ascending id where the convention declares rank order",
    ),
    mutant("candidate_restore", "restore_block_id_not_scaled", None, "row = block + o % bs", restore_unscaled=True),
    mutant(
        "candidate_restore",
        "restore_accepts_minus_two_padding",
        None,
        "any negative candidate block is padding: -2 restores to -1 instead of raising",
        any_negative_padding=True,
    ),
    mutant(
        "slot_translation",
        "slots_wrong_rows_per_block",
        "sentinel",
        "Bc = block_size (ratio forgotten)",
        rows_per_block_is_block_size=True,
    ),
    mutant("slot_translation", "slots_int32_slot_overflow", "count", "slots computed in int32", int32_slots=True),
    mutant(
        "slot_translation",
        "slots_int32_block_times_block_size",
        "sentinel+int32_slots",
        "int32 slots through block * block_size, which wraps for block ids the option allows",
        int32_slots=True,
        slot_via_block_size=True,
    ),
    mutant("slot_translation", "slots_block_id_not_scaled", "sentinel", "slot = block + j % Bc", slot_unscaled=True),
    mutant(
        "slot_translation",
        "slots_lanes_past_count_translated",
        "count",
        "the count guard is ignored",
        ignore_lengths=True,
    ),
    mutant(
        "gathered_rows", "gathered_offset_on_empty_lanes", None, "-1 lanes get the offset too", offset_on_empty=True
    ),
    mutant(
        "topk",
        "topk_padding_row_reads_whole_row",
        "v4.1",
        "a padding row's length -1 read as uint32: the whole row is ranked",
        padding_as_unsigned=True,
    ),
    mutant(
        "topk",
        "topk_all_zero_batch_unwritten",
        "v4.1",
        "returns early, output zero-filled, when no row has a length > 0",
        all_zero_unwritten=True,
    ),
    mutant("topk", "topk_ranks_in_float16", "select", "ranks a float16 copy of the scores", float16_keys=True),
    mutant(
        "candidate_select",
        "candidates_padding_row_pins_block_0",
        "pinned+drop_nan",
        "newest block trunc((length - 1) / bs), pinned unless the length is 0: a padding row pins block 0",
        pin_truncates=True,
    ),
    mutant(
        "candidate_select",
        "candidates_block_max_in_float16",
        "unpinned+propagate_nan",
        "block maxima of a float16 copy of the scores",
        float16_keys=True,
    ),
    mutant(
        "slot_translation",
        "slots_padding_row_translated",
        "count",
        "a padding row's length -1 read as uint32: every lane translated",
        padding_as_unsigned=True,
    ),
    mutant(
        "window_release",
        "release_keeps_window_only",
        None,
        "keeps the window counted back from the tentative length: frees blocks before verification",
        release_keeps="window",
    ),
    mutant(
        "window_release",
        "release_one_position_short",
        None,
        "keeps window + D - 2 positions",
        release_keeps="window_plus_step_minus_2",
    ),
    mutant("window_release", "release_never", None, "never releases a block (a leak)", release_keeps="all"),
    mutant("window_indices", "window_order_swapped", "v4.1", "v4.1 decode pads -1 at the end", window_order="v4"),
    mutant("window_indices", "window_off_by_one", "v4", "prefill starts one position early", window_first_shift=1),
    mutant(
        "compressed_indices",
        "compressed_one_count_per_step",
        None,
        "every query of a step sees end_pos // ratio rows (the public V4.1 decode's count)",
        count_per_step=True,
    ),
    mutant(
        "compressed_indices",
        "compressed_not_all_visible_rows",
        None,
        "the query at p sees p // ratio rows, not (p + 1) // ratio: the row its position completes is missing",
        compressed_floor_p=True,
    ),
    mutant(
        "topk",
        "topk_ignores_strides",
        "v4.1",
        "scores read as row-major with unit stride whatever their strides (a transposed or sliced view)",
        ignores_strides=True,
    ),
    *[
        mutant(op, f"{bug}_past_tile", convention, f"{what} (past {ladder(ti.PAST_TILE[bug]).tile})", past_tile=bug)
        for op, bug, convention, what in (
            ("topk", "topk_width", "v4.1", "ranks only the first tile of a row's lanes"),
            ("index_scores", "index_heads", None, "drops the heads past the first tile"),
            ("index_scores_fp8", "fp8_heads", None, "drops the heads past the first tile"),
            ("candidate_select", "candidate_blocks", "pinned+drop_nan", "never keeps a block past the first tile"),
            ("candidate_restore", "restore_k", None, "offsets past the first tile of lanes restore to -1"),
            ("slot_translation", "slot_lanes", "count", "lanes past the first tile come back -1"),
            ("gathered_rows", "gathered_requests", None, "a request past the tile takes the offset a tile before it"),
            ("window_indices", "window_lanes", "v4.1", "a wider window lists -1 past the tile"),
            ("compressed_indices", "compressed_lanes", None, "lanes past the first tile come back -1"),
            ("window_release", "release_requests", None, "requests past the first tile release nothing"),
            (
                "paged_index_scores",
                "paged_columns",
                None,
                "table columns past the first tile read the one a tile before",
            ),
            ("candidate_remap", "remap_blocks", None, "candidate blocks past the first tile (ascending) are dropped"),
        )
    ],
    mutant(
        "candidate_remap",
        "remap_blocks_in_given_order",
        None,
        "columns walk the candidate blocks in their given (rank) order, not ascending",
        remap_given_order=True,
    ),
    mutant(
        "candidate_remap",
        "remap_partial_block_counted_whole",
        None,
        "the newest block counts all its positions (end = blocks * bs, not the visible fill)",
        remap_whole_blocks=True,
    ),
    mutant(
        "candidate_remap",
        "remap_blocks_past_length_kept",
        None,
        "blocks wholly at or past the length are not filtered out",
        remap_past_length=True,
    ),
    mutant(
        "paged_index_scores",
        "paged_next_n_first_query_count",
        None,
        "every speculative query of a request sees the first query's count of rows",
        paged_first_query_count=True,
    ),
    mutant(
        "paged_index_scores",
        "paged_table_of_request_0",
        None,
        "every request reads its rows through request 0's block table row",
        paged_table_of_request_0=True,
    ),
]
