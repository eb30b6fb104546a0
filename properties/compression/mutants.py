"""Shipped compression mutants: the small torch implementation (``properties.compression.faulty``) with one
planted bug each. ``properties/test_mutants.py`` asserts every one is killed; the property expected to kill
each is named in ``note`` (the hunt reports all that do)."""

from __future__ import annotations

from functools import partial

from properties.compression.call import DECODE, PREFILL, READ_THEN_WRITE, WRITE_THEN_READ
from properties.compression.faulty import Faults, run
from properties.ladder import ladder
from properties.registry import Implementation


def _mutant(op: str, name: str, convention: str | None, note: str, **faults: object) -> Implementation:
    discipline = convention if op == DECODE else None
    fn = partial(run, op, discipline, Faults(**faults))  # type: ignore[arg-type]
    return Implementation(op, name, fn, convention or "reserve_max1", origin="mutant", note=note)


MUTANTS = [
    _mutant(PREFILL, "prefill_ring_slot_off_by_one", None, "ring contents", slot_shift=1),
    _mutant(PREFILL, "prefill_ape_dropped", None, "partition invariance", drop_ape=True),
    _mutant(PREFILL, "prefill_overlap_halves_swapped", None, "partition invariance", swap_halves=True),
    _mutant(PREFILL, "prefill_placeholder_store_row_0", None, "partition invariance", placeholder_store_row=0),
    _mutant(PREFILL, "prefill_reserves_nc_rows", None, "partition invariance", reserve_placeholder=False),
    _mutant(PREFILL, "prefill_reads_leftovers_at_start", None, "fresh request", read_before_start=True),
    _mutant(PREFILL, "prefill_ignores_state_index", None, "ring contents", use_state_index=False),
    _mutant(PREFILL, "prefill_reads_past_chunk_end", None, "partition invariance", complete_partial_group=True),
    _mutant(PREFILL, "prefill_no_ring_size_check", None, "rejects bad input", ring_rule="none"),
    _mutant(PREFILL, "prefill_bf16_weights", None, "partition invariance", bf16_weights=True),
    _mutant(PREFILL, "prefill_rope_row_index", None, "partition invariance (positions j, not j r)", rope="row_index"),
    _mutant(DECODE, "decode_wtr_ring_one_short", WRITE_THEN_READ, "rejects bad input", ring_rule="one_short"),
    _mutant(
        DECODE,
        "decode_wtr_seed_bound_r_plus_q_minus_1",
        WRITE_THEN_READ,
        "rejects bad input",
        ring_rule="seed",
    ),
    _mutant(DECODE, "decode_wtr_ring_slot_off_by_one", WRITE_THEN_READ, "equals one-shot", slot_shift=1),
    _mutant(DECODE, "decode_rtw_writes_before_reading", READ_THEN_WRITE, "equals one-shot", write_first=True),
    _mutant(DECODE, "decode_missing_minus_one", READ_THEN_WRITE, "equals one-shot", idle_store_row="group"),
    _mutant(
        DECODE,
        "decode_completes_at_group_start",
        READ_THEN_WRITE,
        "equals one-shot",
        completes_at_group_start=True,
    ),
    _mutant(DECODE, "decode_reads_leftovers_at_start", READ_THEN_WRITE, "fresh request", read_before_start=True),
    _mutant(DECODE, "decode_writes_window_only", READ_THEN_WRITE, "ring contents", window_writes_only=True),
    _mutant(DECODE, "decode_ring_holds_ape_scores", WRITE_THEN_READ, "ring contents", ring_holds_ape=True),
    _mutant(
        DECODE,
        "decode_rope_at_group_end",
        READ_THEN_WRITE,
        "equals one-shot (positions j r + r - 1, the completing position, not j r)",
        rope="group_end",
    ),
    _mutant(
        DECODE,
        "decode_writes_first_4_drafts",
        WRITE_THEN_READ,
        "equals one-shot, ring contents (steps of q > 4)",
        ring_write_limit=4,
    ),
    _mutant(
        PREFILL,
        "prefill_channels_past_tile",
        None,
        f"channels past {ladder('channels').tile} are compressed without APE",
        channels_past_tile=True,
    ),
    _mutant(
        DECODE,
        "decode_requests_past_tile",
        READ_THEN_WRITE,
        f"requests past {ladder('requests').tile} use state slot b, not state_index[b]",
        requests_past_tile=True,
    ),
]
