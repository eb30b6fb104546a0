"""Independent oracles for the indexing tests: brute force by enumeration, written without reference/ helpers.

Score order follows torch.topk's documented order on floats: -inf < numbers < +inf < NaN. Here it is computed
from Python's own Fraction/float comparison rather than from reference.score_values.rank_key.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from fractions import Fraction

from reference.score_values import NAN, NEG_INF, POS_INF


class Poison:
    """A value that fails loudly if anything inspects it: stands for storage that must never be read."""

    def _boom(self, *args: object) -> bool:
        raise AssertionError("a score past the valid end was read")

    __eq__ = __lt__ = __le__ = __gt__ = __ge__ = __bool__ = __index__ = __int__ = _boom
    __hash__ = None  # type: ignore[assignment]


def extended(value: object) -> Fraction | float:
    """A score as a Python number (markers become float infinities); NaN is handled by the callers."""
    if value is NEG_INF:
        return float("-inf")
    if value is POS_INF:
        return float("inf")
    assert isinstance(value, int | Fraction) and not isinstance(value, bool), value
    return Fraction(value)


def beats(a: object, b: object) -> bool:
    """a ranks strictly above b."""
    if a is NAN:
        return b is not NAN
    if b is NAN:
        return False
    return extended(a) > extended(b)


def ties(a: object, b: object) -> bool:
    if a is NAN or b is NAN:
        return a is NAN and b is NAN
    return extended(a) == extended(b)


def wins(i: int, j: int, scores: Sequence[object]) -> bool:
    """Row i is preferred to row j: higher score, or an equal score and a lower index."""
    return beats(scores[i], scores[j]) or (ties(scores[i], scores[j]) and i < j)


def chosen_set(scores: Sequence[object], valid: int, k: int, exclude_neg_inf: bool = False) -> frozenset[int]:
    """The unique size-min(k, eligible) subset of eligible valid rows that every unchosen eligible row loses to.

    Found by enumerating every subset of that size; asserts exactly one qualifies.
    """
    eligible = [i for i in range(valid) if not (exclude_neg_inf and scores[i] is NEG_INF)]
    size = min(k, len(eligible))
    found = [
        frozenset(subset)
        for subset in itertools.combinations(eligible, size)
        if all(wins(i, j, scores) for i in subset for j in eligible if j not in subset)
    ]
    assert len(found) == 1, (scores[:valid], k, found)
    return found[0]


def in_rank_order(rows: Sequence[int], scores: Sequence[object]) -> bool:
    """Each row is preferred to the next one."""
    return all(wins(a, b, scores) for a, b in itertools.pairwise(rows))
