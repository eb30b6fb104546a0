"""Which chosen items are a valid top-k answer, and in which lane order they may come (docs/indexing.md,
"Ties and lane order").

Top-k (rows) and candidate selection (blocks) both choose the best items of a list by a rank key (higher is
better; the keys of :func:`reference.score_values.rank_key`). The exact reference breaks ties by the lowest
index and lists the chosen items in its convention's order. Engines differ on both, so each is a named rule:

* ``Ties.LOWEST``: the chosen items are exactly the reference's (ties to the lowest index).
* ``Ties.ANY``: any valid top-k set: distinct items whose multiset of keys equals the reference's. Items of equal
  key are interchangeable, as ``torch.topk`` treats them; validity (an eligible item) is a property of the key,
  so an ineligible item never replaces an eligible one.
* ``Order.INDEX``: ascending item index. ``Order.RANK``: descending key; equal keys by ascending index under
  ``Ties.LOWEST``, in any order under ``Ties.ANY``. ``Order.ANY``: any order.

An answer is accepted iff it lists distinct items in the declared order and its canonical form equals the
reference's: :func:`canonical` replaces each group of chosen items of one key by the lowest-index items of that
key (``Ties.ANY`` only) and lists them in a canonical order, so the properties can compare an engine's answer
with the reference's exactly.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from reference.checks import fail, require_int


class _Ordered(Protocol):
    def __lt__(self, other: object, /) -> bool: ...


K = TypeVar("K", bound=Hashable)


class Ties(enum.Enum):
    """Which items of equal key are chosen."""

    LOWEST = "lowest"
    """The lowest indices (the reference's rule)."""
    ANY = "any"
    """Any of them: the chosen keys form the same multiset as the reference's."""


class Order(enum.Enum):
    """The lane order of the chosen items."""

    INDEX = "index"
    """Ascending item index."""
    RANK = "rank"
    """Descending key; equal keys by ascending index under ``Ties.LOWEST``, any order under ``Ties.ANY``."""
    ANY = "any"
    """Any order."""


@dataclass(frozen=True)
class Selection:
    """The tie rule and lane order one answer is judged by."""

    ties: Ties = Ties.LOWEST
    order: Order = Order.INDEX


def _items(keys: Sequence[object], chosen: Sequence[int], argument: str) -> list[int]:
    items = [require_int(c, f"{argument}[{i}]") for i, c in enumerate(chosen)]
    for i, c in enumerate(items):
        if not 0 <= c < len(keys):
            raise fail(f"{argument}[{i}]", f"must name one of the {len(keys)} items, got {c}")
    return items


def order_problem(keys: Sequence[K], chosen: Sequence[int], rule: Selection) -> str | None:
    """Why the chosen items (in lane order) are not distinct or not in ``rule``'s order, or None.

    ``keys[i]`` is item ``i``'s rank key; ``chosen`` must name items of ``keys`` (ValueError otherwise).
    """
    items = _items(keys, chosen, "chosen")
    twice = sorted({c for c in items if items.count(c) > 1})
    if twice:
        return f"item(s) {twice} chosen twice"
    for a, b in itertools.pairwise(items):
        ka, kb = keys[a], keys[b]
        if rule.order is Order.INDEX and not a < b:
            return f"not in ascending index order: {a} before {b}"
        if rule.order is Order.RANK:
            if _less(ka, kb):
                return f"not in rank order: {a} (key {ka}) before {b} (key {kb}), which ranks higher"
            if rule.ties is Ties.LOWEST and ka == kb and not a < b:
                return f"not in rank order: {a} before {b}, of equal key, ties by ascending index"
    return None


def _less(a: object, b: object) -> bool:
    return a < b  # type: ignore[operator,no-any-return]


def canonical(keys: Sequence[K], chosen: Sequence[int], rule: Selection, order: Order = Order.INDEX) -> list[int]:
    """The chosen items as the reference lists them: under ``Ties.ANY`` each group of ``c`` chosen items of one
    key replaced by the ``c`` lowest-index items of that key, then listed in ``order`` (``Order.INDEX`` or
    ``Order.RANK`` with ties by ascending index). Chosen items must be distinct (ValueError otherwise)."""
    items = _items(keys, chosen, "chosen")
    if len(set(items)) != len(items):
        raise fail("chosen", "must name distinct items")
    if order is Order.ANY:
        raise fail("order", "the canonical order must be INDEX or RANK")
    if rule.ties is Ties.ANY:
        wanted: dict[K, int] = {}
        for c in items:
            wanted[keys[c]] = wanted.get(keys[c], 0) + 1
        items = [i for key, count in wanted.items() for i in [j for j, k in enumerate(keys) if k == key][:count]]
    if order is Order.INDEX:
        return sorted(items)
    return sorted(items, key=lambda i: (_Desc(keys[i]), i))


@dataclass(frozen=True)
class _Desc:
    """A key sorted in descending order."""

    key: object

    def __lt__(self, other: _Desc) -> bool:
        return _less(other.key, self.key)


def accepted(keys: Sequence[K], expected: Sequence[int], chosen: Sequence[int], rule: Selection) -> str | None:
    """Why ``chosen`` (lane order) is not an answer ``rule`` accepts where the reference chose ``expected``
    (ties to the lowest index), or None."""
    problem = order_problem(keys, chosen, rule)
    if problem is not None:
        return problem
    got = canonical(keys, chosen, rule)
    want = canonical(keys, expected, Selection())
    if got != want:
        what = "keys" if rule.ties is Ties.ANY else "items"
        shown = sorted((keys[i] for i in chosen), key=_Desc) if rule.ties is Ties.ANY else sorted(chosen)
        wanted = sorted((keys[i] for i in expected), key=_Desc) if rule.ties is Ties.ANY else sorted(expected)
        return f"chosen {what} {shown}, the reference's are {wanted}"
    return None
