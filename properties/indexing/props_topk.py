"""Properties of the valid-prefix top-k (operation ``topk``), for every convention of the contract.

An example is ``{"scores", "lengths", "offsets", "k"}`` (``properties.indexing.strategies.topk_cases``). Under
``v4-decode`` a row holds exactly its visible rows, so the check uses ``lengths[m] = N`` for every row.
Selection is judged on the float32 values the implementation received, ranked as torch ranks them
(NaN > +inf > numbers > -inf, -0.0 == 0.0), ties to the lowest index.

Options (``reference.conventions.OPTIONS["topk"]``): under ``ties_any`` or an ``order_*`` option, each output row
is first checked for distinct rows in the declared order and then read in its canonical form
(``reference.selection.canonical``: tied rows replaced by the lowest-index rows of their score, listed in the
base convention's order), so every property below judges it as it judges the base convention.
``neg_inf_excluded`` is folded into the rule (``MaskedLanes.EXCLUDED``): -inf rows count as not eligible.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import torch

from properties.compare import Mismatch, assert_exact
from properties.indexing.impls import visible_prefix
from properties.indexing.strategies import topk_cases
from properties.indexing.values import as_float32, float32_rows, output_lanes, rank_key, visible_count
from properties.registry import Implementation
from properties.runner import Property
from reference import padding, selection
from reference import topk as reference_topk
from reference.conventions import parse


def rule_of(convention: str) -> reference_topk.TopKConvention:
    """The reference rule of a top-k convention, options folded in."""
    found: reference_topk.TopKConvention = parse("topk", convention).rule
    return found


def layout(convention: str) -> reference_topk.LaneLayout:
    return reference_topk.lane_layout(rule_of(convention))


def selection_of(convention: str) -> tuple[selection.Selection, selection.Order]:
    """The tie rule and lane order ``convention`` declares, and its base convention's order (the canonical one)."""
    chosen = parse("topk", convention)
    base = selection.Order.INDEX if layout(convention).index_order else selection.Order.RANK
    ties = chosen.setting(selection.Ties, selection.Ties.LOWEST)
    return selection.Selection(ties, chosen.setting(selection.Order, base)), base


def excludes_neg_inf(convention: str) -> bool:
    found = rule_of(convention)
    return getattr(found, "masked_lanes", None) is reference_topk.MaskedLanes.EXCLUDED


def eligible_count(values: list[float], n: int, convention: str) -> int:
    """The valid rows that can be chosen: all of them, or those not -inf under ``neg_inf_excluded``."""
    return sum(1 for v in values[:n] if not (excludes_neg_inf(convention) and v == -math.inf))


def canonical_lanes(
    lanes: list[int], values: list[float], length: int, offset: int, convention: str, m: int
) -> list[int]:
    """One output row in its canonical form (module docstring); a row whose lanes are not distinct or not in the
    declared order raises Mismatch. Lanes that do not name valid rows are left as they are (the properties
    report them)."""
    rule, base = selection_of(convention)
    if rule == selection.Selection(selection.Ties.LOWEST, base):
        return lanes
    n = visible_count(length)
    fill = fill_value(convention)
    count = next((i for i, lane in enumerate(lanes) if lane == fill), len(lanes))
    rows = [lane - offset for lane in lanes[:count]]
    if not all(0 <= r < n for r in rows):
        return lanes
    keys = [rank_key(v) for v in values[:n]]
    problem = selection.order_problem(keys, rows, rule)
    if problem is not None:
        raise Mismatch(f"topk[{convention}] row {m}: {problem}", detail=f"lanes {lanes} (offset {offset})")
    return [r + offset for r in selection.canonical(keys, rows, rule, base)] + lanes[count:]


def fill_value(convention: str) -> int | None:
    """The value of a lane holding no row (None: v4-decode has no such lane)."""
    found = layout(convention)
    return None if found.whole_row else found.fill


def lane_count(convention: str, k: int, width: int) -> int:
    return layout(convention).lanes(k, width)


def lengths_of(case: dict[str, Any], convention: str) -> list[int]:
    width = len(case["scores"][0])
    return [width] * len(case["lengths"]) if layout(convention).whole_row else list(case["lengths"])


def run_topk(
    impl: Implementation, scores: list[list[float]], case: dict[str, Any], raw: bool = False
) -> list[list[int]]:
    """Call ``impl`` on ``scores`` with the case's lengths (``raw``: as given, else as the convention reads them),
    offsets and k; check dtype and shape."""
    convention = impl.convention or ""
    lengths = list(case["lengths"]) if raw else lengths_of(case, convention)
    width = len(scores[0])
    out = impl.fn(
        float32_rows(scores, impl.device),
        torch.tensor(lengths, dtype=torch.int32, device=impl.device),
        torch.tensor(case["offsets"], dtype=torch.int32, device=impl.device),
        k=case["k"],
    )
    shape = (len(scores), lane_count(convention, case["k"], width))
    got = output_lanes(out, torch.int32, shape, f"topk[{convention}] output")
    values = as_float32(scores)
    return [
        canonical_lanes(row, v, n, offset, convention, m)
        for m, (row, v, n, offset) in enumerate(zip(got, values, lengths, case["offsets"], strict=True))
    ]


def chosen_rows(lanes: list[int], offset: int, convention: str) -> list[int]:
    """The rows a lane list names (offset removed, fill lanes dropped), in lane order."""
    fill = fill_value(convention)
    return [lane - offset for lane in lanes if lane != fill]


def wins(i: int, j: int, values: list[float]) -> bool:
    """Row i is preferred to row j: it ranks higher, or ranks equal with a lower index."""
    a, b = rank_key(values[i]), rank_key(values[j])
    return a > b or (a == b and i < j)


def check_equals_reference(impl: Implementation, case: dict[str, Any]) -> None:
    convention = impl.convention or ""
    got = run_topk(impl, case["scores"], case)
    rule = rule_of(convention)
    expected = [
        list(padding.topk_row(visible_prefix(row, n), n, case["k"], rule, offset))
        for row, n, offset in zip(
            as_float32(case["scores"]), lengths_of(case, convention), case["offsets"], strict=True
        )
    ]
    assert_exact(expected, got, f"topk[{convention}] lanes vs the exact reference")


def check_valid_prefix_only(impl: Implementation, case: dict[str, Any]) -> None:
    """Every lane is the fill value or a row below the visible count plus the row's offset; no row twice."""
    convention = impl.convention or ""
    got = run_topk(impl, case["scores"], case)
    for m, (lanes, n, offset) in enumerate(zip(got, lengths_of(case, convention), case["offsets"], strict=True)):
        rows = chosen_rows(lanes, offset, convention)
        outside = [
            (i, lane) for i, lane in enumerate(lanes) if lane != fill_value(convention) and not 0 <= lane - offset < n
        ]
        if outside:
            raise Mismatch(
                f"topk[{convention}] row {m}: lanes name rows outside the valid prefix [0, {n}) (offset {offset})",
                [((m, i), f"a row in [{offset}, {offset + n}) or the fill", lane) for i, lane in outside],
            )
        if len(set(rows)) != len(rows):
            raise Mismatch(f"topk[{convention}] row {m}: a row is chosen twice", detail=f"lanes {lanes}")


def check_chosen_set_optimal(impl: Implementation, case: dict[str, Any]) -> None:
    """Exactly min(k, valid) distinct valid rows are named, and each beats every unchosen valid row (exact scores,
    lowest index on ties)."""
    convention = impl.convention or ""
    got = run_topk(impl, case["scores"], case)
    values = as_float32(case["scores"])
    for m, (lanes, length, offset) in enumerate(zip(got, lengths_of(case, convention), case["offsets"], strict=True)):
        n = visible_count(length)
        count = min(case["k"], eligible_count(values[m], n, convention))
        rows = chosen_rows(lanes, offset, convention)
        if len(rows) != count or len(set(rows)) != len(rows) or not all(0 <= r < n for r in rows):
            raise Mismatch(
                f"topk[{convention}] row {m}: the lanes must name exactly min(k, eligible) = {count} "
                f"distinct valid rows",
                detail=f"lanes {lanes} (offset {offset}, valid {n})",
            )
        unchosen = [u for u in range(n) if u not in set(rows) and rank_key(values[m][u]) != rank_key(-math.inf)]
        if not excludes_neg_inf(convention):
            unchosen = [u for u in range(n) if u not in set(rows)]
        losers = [(c, u) for c in rows for u in unchosen if not wins(c, u, values[m])]
        if losers:
            c, u = losers[0]
            raise Mismatch(
                f"topk[{convention}] row {m}: chosen row {c} (score {values[m][c]!r}) does not beat unchosen row {u} "
                f"(score {values[m][u]!r})",
                detail=f"{len(losers)} such pairs; lanes {lanes}",
            )


def check_lane_layout(impl: Implementation, case: dict[str, Any]) -> None:
    """Width, then the row lanes first in the convention's order, then exactly the fill value, never offset."""
    convention = impl.convention or ""
    got = run_topk(impl, case["scores"], case)
    values = as_float32(case["scores"])
    fill = fill_value(convention)
    for m, (lanes, length, offset) in enumerate(zip(got, lengths_of(case, convention), case["offsets"], strict=True)):
        n = visible_count(length)
        count = min(case["k"], eligible_count(values[m], n, convention))
        head, tail = lanes[:count], lanes[count:]
        if fill in head or any(lane != fill for lane in tail):
            expected = f"{count} row lanes then {len(tail)} lanes of {fill}"
            raise Mismatch(
                f"topk[{convention}] row {m}: fill lanes", detail=f"{expected}, got {lanes} (offset {offset})"
            )
        rows = [lane - offset for lane in head]
        if layout(convention).index_order:
            ordered = all(a < b for a, b in itertools.pairwise(rows))
            order = "ascending index"
        else:
            ordered = all(0 <= a < n and 0 <= b < n and wins(a, b, values[m]) for a, b in itertools.pairwise(rows))
            order = "rank order (descending score, ties by ascending index)"
        if not ordered:
            raise Mismatch(f"topk[{convention}] row {m}: row lanes not in {order}", detail=f"rows {rows}")


def check_tail_never_matters(impl: Implementation, case: dict[str, Any]) -> None:
    """The same lanes whatever lies at or past each row's valid end."""
    convention = impl.convention or ""
    first = run_topk(impl, case["scores"], case)
    lengths = lengths_of(case, convention)
    swapped = [
        row[: visible_count(n)] + (tail if not layout(convention).whole_row else [])
        for row, n, tail in zip(case["scores"], lengths, case["other_tails"], strict=True)
    ]
    second = run_topk(impl, swapped, case)
    assert_exact(first, second, f"topk[{convention}] lanes after replacing the garbage past the valid end")


def check_padding_rows(impl: Implementation, case: dict[str, Any]) -> None:
    """Row 0 and every row of length -1 made padding rows (``reference.padding``): each answers with fill lanes
    only, and the other rows answer as in a call without them. v4-decode has no fill lane: a call holding a
    padding row is refused with ValueError."""
    convention = impl.convention or ""
    lengths = lengths_of(case, convention)
    padded = [m == 0 or n == -1 for m, n in enumerate(case["lengths"])]
    with_padding = {**case, "lengths": [-1 if p else n for p, n in zip(padded, lengths, strict=True)]}
    if layout(convention).whole_row:
        try:
            run_topk(impl, case["scores"], with_padding, raw=True)
        except ValueError:
            return
        raise Mismatch(f"topk[{convention}]: a padding row (length -1) must be refused: v4-decode has no fill lane")
    got = run_topk(impl, case["scores"], with_padding)
    fill = fill_value(convention)
    for m, lanes in enumerate(got):
        if padded[m] and any(lane != fill for lane in lanes):
            raise Mismatch(f"topk[{convention}] padding row {m}: every lane must be the fill {fill}", detail=f"{lanes}")
    rest = [m for m in range(len(padded)) if not padded[m]]
    if rest:
        alone = {key: [case[key][m] for m in rest] for key in ("scores", "lengths", "offsets")}
        expected = run_topk(impl, alone["scores"], {**case, **alone})
        assert_exact(expected, [got[m] for m in rest], f"topk[{convention}] rows beside padding rows vs without them")


LAB_27 = {"scores": [[2.0, 6.0, 3.0, 0.0, 300.0]], "lengths": [4], "offsets": [0], "k": 2}
"""The book's lab 27: scores [2, 6, 3, 0, 300], valid prefix 4; top-2 over valid rows is [1, 2]."""
LAB_27_ONE_ROW = {"scores": [[5.0, float("nan"), float("inf")]], "lengths": [1], "offsets": [0], "k": 3}
"""One valid row, three output lanes: [0, -1, -1] under V4.1 (fixed width)."""
LAB_27_OFFSET = {"scores": [[2.0, 6.0, 3.0, 0.0, 300.0]], "lengths": [4], "offsets": [10], "k": 2}
"""Prefill at gathered offset 10: rows [1, 2] become [11, 12]."""

PROPERTIES = [
    Property(
        "topk_equals_reference",
        "topk",
        topk_cases(),
        check_equals_reference,
        examples=(LAB_27, LAB_27_ONE_ROW, LAB_27_OFFSET),
        doc="every lane equals the exact reference of the implementation's convention",
    ),
    Property(
        "topk_valid_prefix_only",
        "topk",
        topk_cases(),
        check_valid_prefix_only,
        examples=(LAB_27_ONE_ROW,),
        doc="nothing at or past the visible count is chosen; no row twice; offsets only on row lanes",
    ),
    Property(
        "topk_chosen_set_optimal",
        "topk",
        topk_cases(),
        check_chosen_set_optimal,
        examples=(LAB_27,),
        doc="min(k, valid) rows, each beating every unchosen valid row by exact score, ties to the lowest index",
    ),
    Property(
        "topk_lane_layout",
        "topk",
        topk_cases(),
        check_lane_layout,
        examples=(LAB_27_OFFSET,),
        doc="row lanes first in the convention's order (index or rank), then exactly the fill value, never offset",
    ),
    Property(
        "topk_padding_rows",
        "topk",
        topk_cases(),
        check_padding_rows,
        doc="a padding row (length -1) answers with fill lanes only and leaves the other rows alone; v4-decode "
        "refuses it",
    ),
    Property(
        "topk_tail_never_matters",
        "topk",
        topk_cases(with_other_tails=True),
        check_tail_never_matters,
        doc="the lanes are the same with the garbage past the valid end replaced by other garbage (NaN, +inf, huge)",
    ),
]
