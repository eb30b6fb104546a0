"""reference.candidates: V4.1 candidate blocks, the restricted second level, and offset restoration."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from reference.candidates import (
    CandidateRule,
    NanPolicy,
    block_scores,
    candidate_mask,
    candidate_rows,
    kept_blocks,
    kept_positions,
    remap_columns,
    restore_offsets,
    restrict_to_blocks,
    topk_within_blocks,
)
from reference.score_values import NAN, NEG_INF, POS_INF
from reference.topk import MaskedLanes, SelectTopK, V41TopK, Width, topk
from tests.indexing_oracles import Poison, chosen_set, extended
from tests.refusals import worded_exactly

BOOK_SCORES = [2, 6, 3, 0, 300]
RULES = [CandidateRule(pin, policy) for pin in (True, False) for policy in NanPolicy]

# --- an independent transcription of the public V4.1 select_candidate_blocks, in torch ------------------------


def _as_float(value: object) -> float:
    if value is NAN:
        return float("nan")
    return float(extended(value))


def torch_kept_blocks(
    scores: Sequence[object], valid: int, topk_blocks: int, block_size: int, rule: CandidateRule
) -> tuple[int, ...]:
    """Pad with -inf to whole blocks, amax per block, pin the newest visible block, topk, keep by the policy."""
    logits = torch.tensor([_as_float(s) for s in scores[:valid]] + [0.0] * (len(scores) - valid), dtype=torch.float64)
    logits[valid:] = float("-inf")  # the public prefill masks rows past the visible count before selecting
    padded = torch.cat([logits, torch.full((-len(scores) % block_size,), float("-inf"), dtype=torch.float64)])
    per_block = padded.view(-1, block_size).amax(dim=-1)
    if rule.pin_newest and valid > 0:
        per_block[(valid - 1) // block_size] = float("inf")
    top = per_block.topk(min(topk_blocks, per_block.numel()))
    if rule.nan_policy is NanPolicy.DROP:
        keep = top.values > float("-inf")
    else:
        keep = top.values != float("-inf")
    return tuple(sorted(top.indices[keep].tolist()))


@st.composite
def distinct_rows(draw: st.DrawFn) -> tuple[list[object], int]:
    """Distinct finite scores (so torch's choice is unique), some masked to -inf, at most one NaN."""
    width = draw(st.integers(0, 12))
    values: list[object] = list(draw(st.permutations(range(-20, -20 + width))))
    for i in draw(st.sets(st.integers(0, max(width - 1, 0)), max_size=3)):
        if i < width:
            values[i] = NEG_INF
    if width and draw(st.booleans()):
        values[draw(st.integers(0, width - 1))] = NAN
    valid = draw(st.integers(0, width))
    return values, valid


@given(distinct_rows(), st.integers(0, 6), st.integers(1, 4), st.sampled_from(RULES))
def test_kept_blocks_match_the_public_reference_in_torch(
    row: tuple[list[object], int], topk_blocks: int, block_size: int, rule: CandidateRule
) -> None:
    scores, valid = row
    expected = torch_kept_blocks(scores, valid, topk_blocks, block_size, rule)
    assert kept_blocks(scores, valid, topk_blocks, block_size, rule) == expected


# --- a brute-force oracle that also covers ties -----------------------------------------------------------------

tie_values = st.one_of(st.integers(0, 2), st.integers(0, 2), st.just(NEG_INF), st.just(NAN), st.just(POS_INF))


def oracle_block_scores(scores: Sequence[object], valid: int, block_size: int, pin: bool) -> list[object]:
    out: list[object] = []
    for b in range(-(-valid // block_size)):
        members = [scores[i] for i in range(b * block_size, min((b + 1) * block_size, valid))]
        if any(m is NAN for m in members):
            out.append(NAN)
        else:
            best = max(extended(m) for m in members)
            out.append(NEG_INF if best == float("-inf") else POS_INF if best == float("inf") else best)
    if pin and out:
        out[-1] = POS_INF
    return out


@given(st.lists(tie_values, max_size=9), st.data(), st.integers(0, 5), st.integers(1, 3), st.sampled_from(RULES))
def test_kept_blocks_brute_force_with_ties(
    values: list[object], data: st.DataObject, topk_blocks: int, block_size: int, rule: CandidateRule
) -> None:
    valid = data.draw(st.integers(0, len(values)))
    scores = values[:valid] + [Poison()] * (len(values) - valid)
    per_block = oracle_block_scores(scores, valid, block_size, rule.pin_newest)
    assert block_scores(scores, valid, block_size, rule.pin_newest) == per_block
    slots = chosen_set(per_block, len(per_block), topk_blocks)
    expected = sorted(
        b
        for b in slots
        if per_block[b] is not NEG_INF and not (per_block[b] is NAN and rule.nan_policy is NanPolicy.DROP)
    )
    assert list(kept_blocks(scores, valid, topk_blocks, block_size, rule)) == expected


# --- the book's example and the named choices -------------------------------------------------------------------


def test_book_block_scores_and_retained_block() -> None:
    # Seed 000: blocks of two keys score [6, 3]; retaining one block keeps block 0.
    assert block_scores(BOOK_SCORES, 4, 2, pin_newest=False) == [6, 3]
    assert kept_blocks(BOOK_SCORES, 4, 1, 2, CandidateRule(pin_newest=False)) == (0,)
    # Pinned, block 1 holds the newest visible row (row 3) and takes the only slot instead.
    assert block_scores(BOOK_SCORES, 4, 2) == [6, POS_INF]
    assert kept_blocks(BOOK_SCORES, 4, 1, 2) == (1,)


def test_book_topk_within_retained_block_differs_from_unrestricted() -> None:
    assert topk_within_blocks(BOOK_SCORES, 4, 2, (0,), 2) == (0, 1)
    assert topk(BOOK_SCORES, 4, 2, V41TopK()) == (1, 2)


def test_padding_to_whole_blocks_uses_only_visible_rows() -> None:
    # Visible rows 0..4 in blocks of 4: block 1 holds row 4 only; the 300 at row 5 is past the visible count.
    assert block_scores([1, 2, 3, 4, -9, 300, 300, 300], 5, 4, pin_newest=False) == [4, -9]


def test_nan_block_takes_a_slot_then_drop_or_propagate() -> None:
    # Blocks of two: [1, 2] [NaN, 0] [5, 5]; NaN ranks above every number, as torch.topk orders it.
    scores = [1, 2, NAN, 0, 5, 5]
    unpinned_drop = CandidateRule(pin_newest=False, nan_policy=NanPolicy.DROP)
    unpinned_keep = CandidateRule(pin_newest=False, nan_policy=NanPolicy.PROPAGATE)
    assert block_scores(scores, 6, 2, pin_newest=False) == [2, NAN, 5]
    assert kept_blocks(scores, 6, 2, 2, unpinned_drop) == (2,)
    assert kept_blocks(scores, 6, 2, 2, unpinned_keep) == (1, 2)
    # NaN outranks even the pinned newest block: with one slot the public reference keeps nothing at all.
    assert kept_blocks(scores, 6, 1, 2, CandidateRule(nan_policy=NanPolicy.DROP)) == ()
    assert kept_blocks(scores, 6, 1, 2, CandidateRule(nan_policy=NanPolicy.PROPAGATE)) == (1,)


def test_pin_overrides_nan_in_the_newest_block() -> None:
    assert kept_blocks([4, 4, 1, NAN], 4, 1, 2, CandidateRule(nan_policy=NanPolicy.DROP)) == (1,)


def test_neg_inf_blocks_are_never_kept() -> None:
    scores = [NEG_INF, NEG_INF, 3, NEG_INF, NEG_INF]
    for rule in RULES:
        kept = kept_blocks(scores, 5, 5, 2, rule)
        assert 0 not in kept
        assert (2 in kept) == rule.pin_newest  # block 2 holds only -inf unless pinned


def test_all_invalid_and_zero_slots() -> None:
    for rule in RULES:
        assert block_scores([Poison(), Poison()], 0, 2, rule.pin_newest) == []
        assert kept_blocks([Poison(), Poison()], 0, 3, 2, rule) == ()
        assert kept_blocks(BOOK_SCORES, 4, 0, 2, rule) == ()


def test_more_slots_than_blocks_keeps_every_live_block() -> None:
    assert kept_blocks([1, 2, 3, 4, 5], 5, 10, 2, CandidateRule(pin_newest=False)) == (0, 1, 2)


@given(distinct_rows(), st.integers(1, 4), st.integers(0, 14))
def test_candidate_mask_matches_repeat_interleave(row: tuple[list[object], int], block_size: int, width: int) -> None:
    scores, valid = row
    kept = kept_blocks(scores, valid, 3, block_size)
    assume(all(b * block_size < width for b in kept) or not kept)
    flags = torch.zeros(-(-width // block_size), dtype=torch.bool)
    for b in kept:
        flags[b] = True
    expected = tuple(flags.repeat_interleave(block_size)[:width].tolist())
    assert candidate_mask(kept, block_size, width) == expected


# --- second level -----------------------------------------------------------------------------------------------


@given(distinct_rows(), st.integers(1, 3), st.integers(0, 8), st.integers(0, 3), st.integers(0, 9))
def test_second_level_matches_the_public_reference_in_torch(
    row: tuple[list[object], int], block_size: int, k: int, topk_blocks: int, offset: int
) -> None:
    scores, valid = row
    assume(all(s is not NAN for s in scores[:valid]))
    kept = kept_blocks(scores, valid, topk_blocks, block_size)
    restricted = restrict_to_blocks(scores, valid, kept, block_size)
    finite = sum(1 for s in restricted[:valid] if s is not NEG_INF)
    assume(k <= finite)  # beyond that torch picks among tied -inf rows in an unspecified order
    logits = torch.tensor([_as_float(s) for s in scores[:valid]] + [0.0] * (len(scores) - valid), dtype=torch.float64)
    logits[valid:] = float("-inf")
    mask = torch.tensor(candidate_mask(kept, block_size, len(scores)), dtype=torch.bool)
    logits = logits.masked_fill(~mask, float("-inf"))
    idxs = logits.topk(min(k, len(scores)), sorted=False).indices.sort().values
    expected = torch.where(idxs < valid, idxs + offset, -1).tolist()
    assert list(topk_within_blocks(scores, valid, k, kept, block_size, offset=offset)) == expected


@given(st.lists(tie_values, max_size=9), st.data(), st.integers(1, 3), st.integers(0, 10))
def test_second_level_brute_force(values: list[object], data: st.DataObject, block_size: int, k: int) -> None:
    valid = data.draw(st.integers(0, len(values)))
    scores = values[:valid] + [Poison()] * (len(values) - valid)
    kept = data.draw(st.sets(st.integers(0, 4)).map(sorted))
    masked = [s if i // block_size in kept else NEG_INF for i, s in enumerate(scores[:valid])]
    for excluded in (False, True):
        convention = V41TopK(Width.FIXED, MaskedLanes.EXCLUDED if excluded else MaskedLanes.ELIGIBLE)
        lanes = topk_within_blocks(scores, valid, k, kept, block_size, convention)
        real = {lane for lane in lanes if lane != -1}
        assert real == chosen_set(masked, valid, k, exclude_neg_inf=excluded)
        if excluded:
            assert all(r // block_size in kept for r in real)


def test_outside_rows_fill_lanes_when_k_exceeds_the_candidates() -> None:
    # Kept block 0 (rows 0, 1); k = 3. The public reference still picks a masked visible row (lowest index here).
    assert topk_within_blocks(BOOK_SCORES, 4, 3, (0,), 2) == (0, 1, 2)
    excluded = V41TopK(masked_lanes=MaskedLanes.EXCLUDED)
    assert topk_within_blocks(BOOK_SCORES, 4, 3, (0,), 2, excluded) == (0, 1, -1)


@given(st.lists(st.integers(-5, 5), max_size=10), st.data(), st.integers(1, 3), st.integers(0, 11))
def test_keeping_every_block_equals_unrestricted_topk(
    values: list[object], data: st.DataObject, block_size: int, k: int
) -> None:
    valid = data.draw(st.integers(0, len(values)))
    every = tuple(range(-(-valid // block_size)))
    for convention in (V41TopK(), SelectTopK(fill=-1, sorted_index=False)):
        assert topk_within_blocks(values, valid, k, every, block_size, convention) == topk(values, valid, k, convention)


def test_restrict_passes_storage_past_the_end_through_unread() -> None:
    poison = Poison()
    out = restrict_to_blocks([1, 2, 3, poison], 3, (1,), 2)
    assert out[:3] == [NEG_INF, NEG_INF, 3]
    assert out[3] is poison


# --- restoring compact offsets ----------------------------------------------------------------------------------


def walk_restore(offset: int, blocks: Sequence[int], block_size: int) -> int:
    """Brute force: walk the candidate blocks row by row, counting compact positions."""
    position = 0
    for b in blocks:
        for i in range(block_size):
            if position == offset:
                return -1 if b == -1 else b * block_size + i
            position += 1
    raise AssertionError("offset past the candidate list")


@given(
    st.lists(st.integers(0, 9), unique=True, max_size=4).flatmap(
        lambda blocks: st.tuples(st.just(blocks), st.lists(st.just(-1), max_size=2))
    ),
    st.integers(1, 4),
    st.data(),
)
def test_restore_matches_walking_the_candidates(
    blocks_and_padding: tuple[list[int], list[int]], block_size: int, data: st.DataObject
) -> None:
    real, padding = blocks_and_padding
    blocks = real + padding
    span = len(blocks) * block_size
    offsets = data.draw(st.lists(st.integers(-1, span - 1) if span else st.just(-1), max_size=6))
    expected = tuple(-1 if o == -1 else walk_restore(o, blocks, block_size) for o in offsets)
    assert restore_offsets(offsets, blocks, block_size) == expected
    compact = candidate_rows(blocks, block_size)
    assert expected == tuple(-1 if o == -1 else compact[o] for o in offsets)


def test_restore_formula_and_visible_cutoff() -> None:
    # o -> kept[o // bs] * bs + o % bs: blocks [3, 0] of size 4; offset 5 is row 1 of block 0.
    assert restore_offsets([0, 3, 5, -1], [3, 0], 4) == (12, 15, 1, -1)
    # Rows at or past the visible count restore to -1 (the newest block is only partly visible).
    assert restore_offsets([0, 1, 2, 3], [1], 4, visible=6) == (4, 5, -1, -1)


@given(st.lists(st.integers(-5, 5), max_size=12), st.data(), st.integers(1, 3), st.integers(0, 6))
def test_consumer_over_the_compact_list_agrees_with_the_masked_row(
    values: list[object], data: st.DataObject, block_size: int, k: int
) -> None:
    # A consumer scores only the kept blocks' rows, picks its top-k there, and restores the offsets.
    valid = data.draw(st.integers(0, len(values)))
    kept = kept_blocks(values, valid, 2, block_size)
    compact = candidate_rows(kept, block_size)
    compact_scores = [values[r] for r in compact if r < valid]  # ascending kept blocks: visible rows come first
    offsets = topk(compact_scores, len(compact_scores), k, SelectTopK(fill=-1))
    restored = restore_offsets(offsets, kept, block_size, visible=valid)
    excluded = V41TopK(Width.FIXED, MaskedLanes.EXCLUDED)
    assert restored == topk_within_blocks(values, valid, k, kept, block_size, excluded)


def test_padding_is_exactly_minus_one() -> None:
    """A padding candidate block is -1 and nothing else; -1 may repeat, as a padded list of blocks does."""
    assert candidate_rows([2, -1, -1], 2) == (4, 5, -1, -1, -1, -1)
    assert restore_offsets([1, 2, 5, -1], [2, -1, -1], 2) == (5, -1, -1, -1)
    message = "candidate_blocks[1]: must be a block index or -1 (padding), got -2"
    for call in (lambda: candidate_rows([2, -2], 2), lambda: restore_offsets([0], [2, -2], 2)):
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            call()


def test_candidate_mask_and_restriction_take_real_blocks_only() -> None:
    """The kept blocks of candidate_mask and restrict_to_blocks come from kept_blocks: no padding there."""
    assert candidate_mask((0, 2), 2, 5) == (True, True, False, False, True)
    message = "kept[1]: must be a block index >= 0, got -1"
    for call in (lambda: candidate_mask((0, -1), 2, 5), lambda: restrict_to_blocks([1, 2, 3], 3, (0, -1), 2)):
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            call()
    with pytest.raises(ValueError, match=r"^kept: must not name a block twice$"):
        candidate_mask((2, 2), 2, 5)


# --- bad input --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "argument"),
    [
        (lambda: block_scores([1, 2], 3, 2), ValueError, "valid"),
        (lambda: block_scores([1, 2], 2, 0), ValueError, "block_size"),
        (lambda: kept_blocks([1, 2], 2, -1, 2), ValueError, "topk_blocks"),
        (lambda: kept_blocks([1, 0.5], 2, 1, 2), TypeError, r"scores\[1\]"),
        (lambda: restrict_to_blocks([1, 2], 2, (0, 0), 2), ValueError, "kept"),
        (lambda: restrict_to_blocks([1, 2], 2, (-1,), 2), ValueError, r"kept\[0\]"),
        (lambda: candidate_mask((0,), 2, -1), ValueError, "width"),
        (lambda: restore_offsets([8], [1, 2], 4), ValueError, r"offsets\[0\]"),
        (lambda: restore_offsets([-2], [1, 2], 4), ValueError, r"offsets\[0\]"),
        (lambda: restore_offsets([0], [1, 1], 4), ValueError, "candidate_blocks"),
        (lambda: restore_offsets([0], [-3], 4), ValueError, r"candidate_blocks\[0\]"),
        (lambda: restore_offsets([0], [-2], 4), ValueError, r"candidate_blocks\[0\]"),
        (lambda: restore_offsets([4], [1, -2], 4), ValueError, r"candidate_blocks\[1\]"),
        (lambda: candidate_rows([0, -2], 2), ValueError, r"candidate_blocks\[1\]"),
        (lambda: candidate_mask((-1,), 2, 4), ValueError, r"kept\[0\]"),
        (lambda: candidate_mask((0, -1), 2, 4), ValueError, r"kept\[1\]"),
        (lambda: candidate_mask((1, 1), 2, 4), ValueError, "kept"),
        (lambda: restore_offsets([0], [1], 4, visible=-1), ValueError, "visible"),
        (lambda: topk_within_blocks([1, 2], 2, -1, (0,), 2), ValueError, "k"),
    ],
)
def test_bad_input_names_the_argument(call: Callable[[], object], error: type[Exception], argument: str) -> None:
    with pytest.raises(error, match=f"^{argument}"):
        call()


test_every_refusal_is_worded_exactly = worded_exactly(
    [
        (lambda: candidate_mask((0,), 0, 4), ValueError, "block_size: must be a positive integer, got 0"),
        (lambda: candidate_mask((0.5,), 2, 4), TypeError, "kept[0]: must be an int, got float"),  # type: ignore[arg-type]
        (lambda: restrict_to_blocks([1, 2], 2, (0,), 0), ValueError, "block_size: must be a positive integer, got 0"),
        (lambda: candidate_rows([0], 0), ValueError, "block_size: must be a positive integer, got 0"),
        (lambda: candidate_rows([0, 1.5], 2), TypeError, "candidate_blocks[1]: must be an int, got float"),  # type: ignore[list-item]
        (lambda: restore_offsets([0], [1], 0), ValueError, "block_size: must be a positive integer, got 0"),
        (lambda: restore_offsets([0, 1.5], [1], 4), TypeError, "offsets[1]: must be an int, got float"),  # type: ignore[list-item]
        (
            lambda: restore_offsets([0, 4], [1], 4),
            ValueError,
            "offsets[1]: must be -1 or in [0, 4) (len(candidate_blocks) * block_size), got 4",
        ),
        (
            lambda: restore_offsets([-2], [1], 4),
            ValueError,
            "offsets[0]: must be -1 or in [0, 4) (len(candidate_blocks) * block_size), got -2",
        ),
        (lambda: restore_offsets([0], [1], 4, visible=-1), ValueError, "visible: must be >= 0, got -1"),
        (lambda: block_scores([1, 2], 2, 0), ValueError, "block_size: must be a positive integer, got 0"),
        (lambda: kept_blocks([1, 2], 2, -1, 2), ValueError, "topk_blocks: must be >= 0, got -1"),
        (lambda: kept_positions([0], -1, 4), ValueError, "length: must be >= 0, got -1"),
        (lambda: kept_positions([0], 4, 0), ValueError, "block_size: must be a positive integer, got 0"),
        (
            lambda: kept_positions([0, -2], 4, 4),
            ValueError,
            "candidate_blocks[1]: must be a block index or -1 (padding), got -2",
        ),
        (lambda: kept_positions([1, 1], 8, 4), ValueError, "candidate_blocks: must not name a block twice"),
        (lambda: remap_columns([0, 1.5], [1], 8, 4), TypeError, "columns[1]: must be an int, got float"),  # type: ignore[list-item]
        (
            lambda: remap_columns([0, 3], [1], 7, 4),
            ValueError,
            "columns[1]: must be -1 or in [0, 3) (the row's valid columns), got 3",
        ),
        (
            lambda: remap_columns([-2], [1], 8, 4),
            ValueError,
            "columns[0]: must be -1 or in [0, 4) (the row's valid columns), got -2",
        ),
    ]
)


# --- the sparse consumer's columns ---------------------------------------------------------------------------------


def test_kept_positions_sort_blocks_and_cut_at_the_length() -> None:
    # blocks in rank order with padding between them; block 9 lies wholly past the length, block 3 in part
    assert kept_positions([3, -1, 0, 9], 30, 8) == (*range(8), *range(24, 30))
    assert kept_positions([3, -1, 0, 9], 32, 8) == (*range(8), *range(24, 32))
    assert kept_positions([3, -1, 0, 9], 24, 8) == tuple(range(8))
    assert kept_positions([3, -1, 0, 9], 73, 8) == (*range(8), *range(24, 32), 72)
    assert kept_positions([-1, -1], 9, 2) == ()
    assert kept_positions([], 9, 2) == ()
    assert kept_positions([1, 0], 0, 2) == ()


def test_remap_columns_index_the_kept_positions() -> None:
    assert remap_columns([0, 8, 13, -1, 7], [3, -1, 0, 9], 30, 8) == ((0, 24, 29, -1, 7), 14)
    assert remap_columns([], [2], 5, 2) == ((), 1)
    assert remap_columns([-1, 0], [2], 5, 2) == ((-1, 4), 1)
    assert remap_columns([-1], [], 5, 2) == ((-1,), 0)


def test_remap_differs_from_restore_only_by_order_padding_and_length() -> None:
    """Ascending real blocks, no padding, every position visible: remapping a column is restoring an offset."""
    blocks, size = [1, 4, 6], 4
    offsets = list(range(len(blocks) * size))
    assert remap_columns(offsets, [6, -1, 1, 4], 28, size)[0] == restore_offsets(offsets, blocks, size)
