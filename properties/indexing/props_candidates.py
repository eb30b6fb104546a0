"""Properties of V4.1 candidate blocks (``candidate_select``) and of restoring candidate offsets to rows
(``candidate_restore``).

``candidate_select`` examples are ``{"scores", "lengths", "block_size", "topk_blocks"}``; block maxima, ranks
and the NaN policy are recomputed here from Python floats (NaN > +inf > numbers > -inf, -0.0 == 0.0, ties to
the lowest block), a second formulation beside the exact reference. ``candidate_restore`` examples are
``{"offsets", "candidate_blocks", "block_size"}``, and the round trip takes a top-k case.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from typing import Any

import torch
from hypothesis import strategies as st

from properties.compare import Mismatch, assert_exact
from properties.indexing.impls import visible_prefix
from properties.indexing.strategies import (
    candidate_cases,
    newest_block_cases,
    restore_cases,
    slots_for_every_block,
    two_level_cases,
)
from properties.indexing.values import as_float32, float32_rows, index_tensor, output_lanes, rank_key, visible_count
from properties.registry import Implementation
from properties.runner import BAD_INPUT, Property
from reference import candidates, padding, selection, topk
from reference.candidates import NanPolicy
from reference.conventions import parse
from reference.score_values import NEG_INF, Score

EVERY_ROW = topk.V41TopK(topk.Width.FIXED, topk.MaskedLanes.EXCLUDED)
"""The top-k the round trip compares: fixed width, -1 fill, -inf rows never chosen (a compact list lacks them)."""
ROUND_TRIP_K = 8


def run_select(impl: Implementation, scores: list[list[float]], case: dict[str, Any]) -> list[list[int]]:
    """The implementation's kept blocks per row, each row in its canonical form (``canonical_kept``)."""
    out = impl.fn(
        float32_rows(scores, impl.device),
        torch.tensor(case["lengths"], dtype=torch.int32, device=impl.device),
        block_size=case["block_size"],
        topk_blocks=case["topk_blocks"],
    )
    shape = (len(scores), case["topk_blocks"])
    got = output_lanes(out, torch.int32, shape, f"candidate_select[{impl.convention}] output")
    convention = impl.convention or ""
    values = as_float32(scores)
    return [
        canonical_kept(lanes, values[m], length, case["block_size"], convention, m)
        for m, (lanes, length) in enumerate(zip(got, case["lengths"], strict=True))
    ]


def canonical_kept(
    lanes: list[int], values: list[float], length: int, block_size: int, convention: str, m: int
) -> list[int]:
    """Under ``ties_any`` or an ``order_*`` option: the kept ids, checked distinct and in the declared order, in
    their canonical form (``reference.selection.canonical``: tied blocks replaced by the lowest-index blocks of
    their maximum, ascending), then the -1 lanes; the row as it is otherwise, or where a lane names no block."""
    chosen = parse("candidate_select", convention)
    rule = selection.Selection(
        chosen.setting(selection.Ties, selection.Ties.LOWEST), chosen.setting(selection.Order, selection.Order.INDEX)
    )
    if rule == selection.Selection():
        return lanes
    n = visible_count(length)
    maxima = block_maxima(values, n, block_size, pinned(convention))
    count = next((i for i, b in enumerate(lanes) if b == -1), len(lanes))
    ids = lanes[:count]
    if not all(0 <= b < len(maxima) for b in ids):
        return lanes
    keys = [rank_key(v) for v in maxima]
    problem = selection.order_problem(keys, ids, rule)
    if problem is not None:
        raise Mismatch(f"candidate_select[{convention}] row {m}: {problem}", detail=f"lanes {lanes}")
    return selection.canonical(keys, ids, rule, selection.Order.INDEX) + lanes[count:]


def kept_set(lanes: list[int], convention: str, m: int) -> list[int]:
    """The kept ids of one output row after checking the layout: ascending ids, then -1 lanes."""
    ids = [b for b in lanes if b != -1]
    if lanes[: len(ids)] != ids or not all(a < b for a, b in itertools.pairwise(ids)) or min(ids, default=0) < 0:
        raise Mismatch(f"candidate_select[{convention}] row {m}: not ascending block ids then -1", detail=f"{lanes}")
    return ids


def rule_of(convention: str) -> candidates.CandidateRule:
    """The reference rule of a candidate_select convention (its options are read by ``canonical_kept``)."""
    found: candidates.CandidateRule = parse("candidate_select", convention).rule
    return found


def pinned(convention: str) -> bool:
    return rule_of(convention).pin_newest


def drops_nan(convention: str) -> bool:
    return rule_of(convention).nan_policy is NanPolicy.DROP


def block_maxima(values: list[float], length: int, block_size: int, pin: bool) -> list[float]:
    """Each block's maximum over its visible rows (NaN if one is NaN); with ``pin`` the newest block is +inf."""
    count = -(-length // block_size)
    maxima = []
    for b in range(count):
        block = values[b * block_size : min((b + 1) * block_size, length)]
        maxima.append(math.nan if any(math.isnan(v) for v in block) else max(block))
    if pin and count:
        maxima[-1] = math.inf
    return maxima


def beats(a: int, b: int, maxima: list[float]) -> bool:
    ka, kb = rank_key(maxima[a]), rank_key(maxima[b])
    return ka > kb or (ka == kb and a < b)


def keepable(score: float, drop_nan: bool) -> bool:
    return score != -math.inf and not (math.isnan(score) and drop_nan)


def check_select_equals_reference(impl: Implementation, case: dict[str, Any]) -> None:
    convention = impl.convention or ""
    got = run_select(impl, case["scores"], case)
    rule = rule_of(convention)
    expected = []
    for row, n in zip(as_float32(case["scores"]), case["lengths"], strict=True):
        kept = list(padding.candidate_row(visible_prefix(row, n), n, case["topk_blocks"], case["block_size"], rule))
        expected.append(kept + [-1] * (case["topk_blocks"] - len(kept)))
    assert_exact(expected, got, f"candidate_select[{convention}] kept blocks vs the exact reference")


def check_newest_block(impl: Implementation, case: dict[str, Any]) -> None:
    """Pinned: the newest visible block scores +inf whatever it holds, so it is kept unless the blocks that
    outrank it (NaN, or +inf with a lower index) fill every slot, and its rows never change the result.
    Unpinned: it is kept iff fewer than ``topk_blocks`` blocks outrank it and its score is keepable."""
    convention = impl.convention or ""
    got = run_select(impl, case["scores"], case)
    values = as_float32(case["scores"])
    size, slots = case["block_size"], case["topk_blocks"]
    for m, (lanes, length) in enumerate(zip(got, case["lengths"], strict=True)):
        n = visible_count(length)
        if n == 0:
            continue
        kept = kept_set(lanes, convention, m)
        maxima = block_maxima(values[m], n, size, pinned(convention))
        newest = len(maxima) - 1
        rank = sum(1 for b in range(len(maxima)) if beats(b, newest, maxima))
        expected = rank < slots and keepable(maxima[newest], drops_nan(convention))
        if (newest in kept) != expected:
            raise Mismatch(
                f"candidate_select[{convention}] row {m}: newest block {newest} (valid {n}, block size {size}) "
                f"{'not ' if expected else ''}expected among the kept",
                detail=f"block maxima {maxima}, {slots} slots, kept {kept}",
            )
    if pinned(convention):
        changed = []
        for row, length, fresh in zip(case["scores"], case["lengths"], case["newest_values"], strict=True):
            n = visible_count(length)
            start = (n - 1) // size * size if n else 0
            changed.append(row[:start] + fresh[: n - start] + row[n:])
        again = run_select(impl, changed, case)
        assert_exact(got, again, f"candidate_select[{convention}] after changing the pinned newest block's rows")


def selected_rows(impl: Implementation, case: dict[str, Any]) -> Iterator[tuple[int, int, list[int], list[float]]]:
    """Each row of ``impl``'s answer: its index, valid length, kept blocks and the block maxima it was chosen by."""
    convention = impl.convention or ""
    got = run_select(impl, case["scores"], case)
    values = as_float32(case["scores"])
    for m, (lanes, length) in enumerate(zip(got, case["lengths"], strict=True)):
        n = visible_count(length)
        yield m, n, kept_set(lanes, convention, m), block_maxima(values[m], n, case["block_size"], pinned(convention))


def check_nan_policy(impl: Implementation, case: dict[str, Any]) -> None:
    """drop_nan: no block holding a visible NaN is kept (a pinned newest block excepted). propagate_nan: the
    lowest min(topk_blocks, count) such blocks are kept, since NaN outranks every other score."""
    convention = impl.convention or ""
    for m, _, kept, maxima in selected_rows(impl, case):
        nan_blocks = [b for b, v in enumerate(maxima) if math.isnan(v)]
        if drops_nan(convention):
            wrong = sorted(set(nan_blocks) & set(kept))
            rule = "dropped"
        else:
            wrong = sorted(set(nan_blocks[: case["topk_blocks"]]) - set(kept))
            rule = "kept"
        if wrong:
            raise Mismatch(
                f"candidate_select[{convention}] row {m}: NaN blocks {wrong} must be {rule}",
                detail=f"block maxima {maxima}, kept {kept}",
            )


def check_every_block_kept(impl: Implementation, case: dict[str, Any]) -> None:
    """With a slot for every block, each keepable block is kept, and top-k restricted to them is unrestricted."""
    convention = impl.convention or ""
    values = as_float32(case["scores"])
    for m, n, kept, maxima in selected_rows(impl, case):
        expected = [b for b, v in enumerate(maxima) if keepable(v, drops_nan(convention))]
        if kept != expected:
            raise Mismatch(
                f"candidate_select[{convention}] row {m}: {case['topk_blocks']} slots for {len(maxima)} blocks",
                [((m,), expected, kept)],
                detail=f"block maxima {maxima}",
            )
        if len(kept) == len(maxima):
            prefix = visible_prefix(values[m], n)
            restricted = candidates.topk_within_blocks(prefix, n, ROUND_TRIP_K, kept, case["block_size"])
            unrestricted = topk.topk(prefix, n, ROUND_TRIP_K, topk.V41TopK())
            assert_exact(unrestricted, restricted, f"row {m}: top-{ROUND_TRIP_K} within every block vs unrestricted")


def check_select_tail_never_matters(impl: Implementation, case: dict[str, Any]) -> None:
    convention = impl.convention or ""
    first = run_select(impl, case["scores"], case)
    swapped = [
        row[: visible_count(n)] + tail
        for row, n, tail in zip(case["scores"], case["lengths"], case["other_tails"], strict=True)
    ]
    second = run_select(impl, swapped, case)
    assert_exact(first, second, f"candidate_select[{convention}] after replacing the garbage past the valid end")


# --- restoration ---------------------------------------------------------------------------------------------------


def run_restore(impl: Implementation, offsets: list[list[int]], blocks: list[list[int]], size: int) -> list[list[int]]:
    out = impl.fn(
        index_tensor(offsets, torch.int32, impl.device), index_tensor(blocks, torch.int32, impl.device), block_size=size
    )
    shape = (len(offsets), len(offsets[0]) if offsets else 0)
    return output_lanes(out, torch.int32, shape, "candidate_restore output")


def check_restore_equals_reference(impl: Implementation, case: dict[str, Any]) -> None:
    got = run_restore(impl, case["offsets"], case["candidate_blocks"], case["block_size"])
    expected = [
        list(candidates.restore_offsets(o, b, case["block_size"]))
        for o, b in zip(case["offsets"], case["candidate_blocks"], strict=True)
    ]
    assert_exact(expected, got, "candidate_restore rows vs the exact reference")


def check_restored_rows_in_blocks(impl: Implementation, case: dict[str, Any]) -> None:
    """A restored row lies in a candidate block at the offset's place in it; -1 and padding offsets give -1;
    distinct offsets give distinct rows."""
    size = case["block_size"]
    got = run_restore(impl, case["offsets"], case["candidate_blocks"], size)
    for m, (rows, offsets, blocks) in enumerate(zip(got, case["offsets"], case["candidate_blocks"], strict=True)):
        real = {b for b in blocks if b >= 0}
        for i, (row, o) in enumerate(zip(rows, offsets, strict=True)):
            empty = o == -1 or blocks[o // size] == -1
            ok = row == -1 if empty else (row >= 0 and row // size in real and row % size == o % size)
            if not ok:
                where = "-1" if empty else f"a row of blocks {sorted(real)} at position {o % size} in its block"
                raise Mismatch(
                    f"candidate_restore row {m}", [((m, i), where, row)], detail=f"offset {o}, blocks {blocks}"
                )
        pairs = {(o, r) for o, r in zip(offsets, rows, strict=True) if r != -1}
        if len({r for _, r in pairs}) != len(pairs):
            raise Mismatch(f"candidate_restore row {m}: two offsets restore to one row", detail=f"{offsets} -> {rows}")


BAD_PADDING = (-2, -3, -129, -(2**31))


@st.composite
def bad_padding_cases(draw: st.DrawFn) -> dict[str, Any]:
    """A restore case with one candidate block below -1 (padding is exactly -1)."""
    case = draw(restore_cases())
    blocks = [list(b) for b in case["candidate_blocks"]]
    if not blocks[0]:
        blocks = [[*b, -1] for b in blocks]
    m = draw(st.integers(0, len(blocks) - 1))
    blocks[m][draw(st.integers(0, len(blocks[m]) - 1))] = draw(st.sampled_from(BAD_PADDING))
    return {**case, "candidate_blocks": blocks}


def check_restore_refuses_bad_padding(impl: Implementation, case: dict[str, Any]) -> None:
    """A candidate block below -1 is no block and no padding: the call raises ValueError."""
    try:
        got = run_restore(impl, case["offsets"], case["candidate_blocks"], case["block_size"])
    except ValueError:
        return
    bad = sorted({b for row in case["candidate_blocks"] for b in row if b < -1})
    raise Mismatch(
        f"candidate_restore accepted candidate block(s) {bad}: padding is exactly -1, anything lower must raise",
        detail=f"candidate_blocks {case['candidate_blocks']} -> {got}",
    )


def check_round_trip(impl: Implementation, case: dict[str, Any]) -> None:
    """Every block a candidate (ascending, then padding): top-k over the compact candidate list, restored, equals
    top-k over the whole valid prefix."""
    size, k = case["block_size"], case["k"]
    values = as_float32(case["scores"])
    offsets, blocks, expected = [], [], []
    for row, length in zip(values, case["lengths"], strict=True):
        n = visible_count(length)
        ids = list(range(-(-n // size))) + [-1] * case["padding"]
        prefix = visible_prefix(row, n)
        compact: list[Score | None] = [
            NEG_INF if b < 0 or b * size + i >= n else prefix[b * size + i] for b in ids for i in range(size)
        ]
        offsets.append(list(topk.topk(compact, len(compact), k, EVERY_ROW)))
        blocks.append(ids)
        expected.append(list(topk.topk(prefix, n, k, EVERY_ROW)))
    width = max(len(b) for b in blocks)
    blocks = [b + [-1] * (width - len(b)) for b in blocks]
    got = run_restore(impl, offsets, blocks, size)
    assert_exact(expected, got, "restored candidate top-k vs top-k over the whole valid prefix")


PROPERTIES = [
    Property(
        "candidate_select_equals_reference",
        "candidate_select",
        candidate_cases(),
        check_select_equals_reference,
        doc="the kept blocks equal the exact reference of the convention (pinning, NaN policy)",
    ),
    Property(
        "candidate_newest_block",
        "candidate_select",
        newest_block_cases(),
        check_newest_block,
        doc="pinned: the newest visible block is kept whatever it holds; unpinned: it competes on its maximum",
    ),
    Property(
        "candidate_nan_policy",
        "candidate_select",
        candidate_cases(),
        check_nan_policy,
        doc="drop_nan: a NaN block is never kept; propagate_nan: NaN blocks outrank all and are kept",
    ),
    Property(
        "candidate_every_block_kept",
        "candidate_select",
        slots_for_every_block(),
        check_every_block_kept,
        doc="with a slot per block every keepable block is kept, and top-k within them equals unrestricted top-k",
    ),
    Property(
        "candidate_tail_never_matters",
        "candidate_select",
        candidate_cases(with_other_tails=True),
        check_select_tail_never_matters,
        doc="the kept blocks are the same with the garbage past the valid end replaced",
    ),
    Property(
        "candidate_restore_equals_reference",
        "candidate_restore",
        restore_cases(),
        check_restore_equals_reference,
        doc="restored rows equal the exact reference; -1 and padding blocks give -1",
    ),
    Property(
        "candidate_restored_rows_in_blocks",
        "candidate_restore",
        restore_cases(),
        check_restored_rows_in_blocks,
        doc="each restored row lies in a candidate block, at its offset's place; distinct offsets, distinct rows",
    ),
    Property(
        "candidate_restore_refuses_bad_padding",
        "candidate_restore",
        bad_padding_cases(),
        check_restore_refuses_bad_padding,
        examples=({"offsets": [[0, 2]], "candidate_blocks": [[3, -2]], "block_size": 2},),
        doc="a candidate block below -1 (padding is exactly -1) raises ValueError",
        group=BAD_INPUT,
    ),
    Property(
        "candidate_round_trip_every_block",
        "candidate_restore",
        two_level_cases(),
        check_round_trip,
        doc="with every block a candidate, compact top-k restored equals top-k over the whole valid prefix",
    ),
]
