"""Tightness of the window release rule: keeping one position fewer than ``window + D - 1`` (or, as one engine did,
only the window counted back from the tentative length) frees a block a later read needs; ``hypothesis.find``
returns the schedule, replayed here through the property's own check."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import Phase, find, settings

from properties.compare import Mismatch
from properties.indexing.faulty import Faults, window_release
from properties.indexing.props_window_release import check_never_frees_a_needed_block
from properties.indexing.strategies import release_lives
from properties.registry import Implementation

FIND = settings(
    max_examples=2000, derandomize=True, database=None, deadline=None, phases=[Phase.generate, Phase.shrink]
)


def rule(keeps: str) -> Implementation:
    def fn(seq_lens: Any, step_lens: Any, *, window: int, block_size: int) -> Any:
        return window_release(
            seq_lens, step_lens, window=window, block_size=block_size, faults=Faults(release_keeps=keeps)
        )

    return Implementation("window_release", keeps, fn, origin="mutant")


def frees_a_needed_block(impl: Implementation, case: dict[str, Any]) -> bool:
    try:
        check_never_frees_a_needed_block(impl, case)
    except Mismatch:
        return True
    return False


@pytest.mark.parametrize("keeps", ["window_plus_step_minus_2", "window"])
def test_keeping_less_frees_a_needed_block(keeps: str) -> None:
    found = find(release_lives(), lambda case: frees_a_needed_block(rule(keeps), case), settings=FIND)
    print(f"keeping {keeps}: {found}")
    assert frees_a_needed_block(rule(keeps), found)
    assert not frees_a_needed_block(rule("window_plus_step"), found)


def test_the_documented_counterexamples() -> None:
    """Window 4, blocks of one position, a verify step of 3 from accepted length 5 (tentative length 8): the rule
    keeps 4 + 3 - 1 = 6 positions (releases 2 blocks); keeping 5 releases position 2, which the step's first
    query (position 5, reading 2..5) needs; the engine's rule keeps 4 and releases 4, and with only the sampled
    token accepted the next query (position 6, reading 3..6) needs position 3 as well."""
    case = {"window": 4, "block_size": 1, "requests": [{"start": 5, "steps": [[3, 1], [1, 1]]}]}
    assert frees_a_needed_block(rule("window_plus_step_minus_2"), case)
    assert frees_a_needed_block(rule("window"), case)
    assert not frees_a_needed_block(rule("window_plus_step"), case)
