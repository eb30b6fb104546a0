"""reference.selection: valid top-k sets under each tie rule, lane orders, canonical forms."""

from __future__ import annotations

import pytest

from reference.selection import Order, Selection, Ties, accepted, canonical, order_problem
from tests.refusals import worded_exactly

KEYS = [5, 7, 7, 3, 7, 1]
"""Items 1, 2 and 4 tie at 7; the reference's top-2 is [1, 2] (lowest indices)."""

LOWEST_INDEX = Selection(Ties.LOWEST, Order.INDEX)
ANY_RANK = Selection(Ties.ANY, Order.RANK)


@pytest.mark.parametrize(
    ("chosen", "rule", "problem"),
    [
        ([1, 2], LOWEST_INDEX, None),
        ([2, 1], LOWEST_INDEX, "not in ascending index order: 2 before 1"),
        ([1, 4], Selection(Ties.ANY, Order.INDEX), None),
        ([4, 1], Selection(Ties.ANY, Order.INDEX), "not in ascending index order: 4 before 1"),
        ([4, 1, 0], ANY_RANK, None),
        ([4, 0, 1], ANY_RANK, "not in rank order: 0 (key 5) before 1 (key 7), which ranks higher"),
        ([1, 2, 0], Selection(Ties.LOWEST, Order.RANK), None),
        (
            [2, 1, 0],
            Selection(Ties.LOWEST, Order.RANK),
            "not in rank order: 2 before 1, of equal key, ties by ascending index",
        ),
        ([0, 3, 1], Selection(Ties.LOWEST, Order.ANY), None),
        ([1, 1], Selection(Ties.ANY, Order.ANY), "item(s) [1] chosen twice"),
        ([], LOWEST_INDEX, None),
    ],
)
def test_order_problem(chosen: list[int], rule: Selection, problem: str | None) -> None:
    assert order_problem(KEYS, chosen, rule) == problem


@pytest.mark.parametrize(
    ("chosen", "rule", "order", "expected"),
    [
        ([4, 2], Selection(Ties.ANY, Order.RANK), Order.INDEX, [1, 2]),
        ([4, 0], Selection(Ties.ANY, Order.ANY), Order.RANK, [1, 0]),
        ([4, 0], Selection(Ties.LOWEST, Order.ANY), Order.RANK, [4, 0]),
        ([5, 4, 3], Selection(Ties.LOWEST, Order.ANY), Order.INDEX, [3, 4, 5]),
        ([4, 2, 1, 0], Selection(Ties.ANY, Order.ANY), Order.RANK, [1, 2, 4, 0]),
    ],
)
def test_canonical(chosen: list[int], rule: Selection, order: Order, expected: list[int]) -> None:
    assert canonical(KEYS, chosen, rule, order) == expected


@pytest.mark.parametrize(
    ("chosen", "rule", "problem"),
    [
        ([1, 2], LOWEST_INDEX, None),
        ([1, 4], LOWEST_INDEX, "chosen items [1, 4], the reference's are [1, 2]"),
        ([1, 4], Selection(Ties.ANY, Order.INDEX), None),
        ([4, 2], ANY_RANK, None),
        ([4, 0], ANY_RANK, "chosen keys [7, 5], the reference's are [7, 7]"),
        ([2, 4], ANY_RANK, None),
        ([4, 2], Selection(Ties.ANY, Order.INDEX), "not in ascending index order: 4 before 2"),
    ],
)
def test_accepted(chosen: list[int], rule: Selection, problem: str | None) -> None:
    assert accepted(KEYS, [1, 2], chosen, rule) == problem


def test_default_selection_is_the_references() -> None:
    assert Selection() == Selection(Ties.LOWEST, Order.INDEX)
    assert canonical(KEYS, [4, 0, 2], ANY_RANK) == [0, 1, 2]


def test_a_rejected_set_shows_the_keys_best_first() -> None:
    rule = Selection(Ties.ANY, Order.ANY)
    assert accepted(KEYS, [0, 1], [3, 1], rule) == "chosen keys [7, 3], the reference's are [7, 5]"


test_refusals = worded_exactly(
    [
        (lambda: order_problem(KEYS, [6], LOWEST_INDEX), ValueError, "chosen[0]: must name one of the 6 items, got 6"),
        (
            lambda: order_problem(KEYS, [0, -1], LOWEST_INDEX),
            ValueError,
            "chosen[1]: must name one of the 6 items, got -1",
        ),
        (lambda: order_problem(KEYS, [True], LOWEST_INDEX), TypeError, "chosen[0]: must be an int, got bool"),
        (lambda: canonical(KEYS, [1, 1], ANY_RANK, Order.INDEX), ValueError, "chosen: must name distinct items"),
        (lambda: canonical(KEYS, [0, 9], ANY_RANK), ValueError, "chosen[1]: must name one of the 6 items, got 9"),
        (
            lambda: canonical(KEYS, [1], ANY_RANK, Order.ANY),
            ValueError,
            "order: the canonical order must be INDEX or RANK",
        ),
    ]
)
