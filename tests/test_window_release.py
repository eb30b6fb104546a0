"""Window block release (reference.window_release) against a brute-force oracle: every position that a query of
the scheduled step, or of the next step after any acceptance, reads; the rule is safe, tight and never decreases."""

from __future__ import annotations

import itertools

import pytest

from reference.window_release import oldest_needed, positions_read, released_blocks
from tests.refusals import worded_exactly


def needed(start: int, step: int, window: int) -> set[int]:
    """Positions read by the step's queries and by the first query of the next step, for every acceptance."""
    reads = set(positions_read(start, step, window))
    for accepted in range(1, step + 1):
        reads |= set(positions_read(start + accepted, 1, window))
    return reads


def safe_release(start: int, step: int, window: int, block_size: int) -> int:
    """The most leading blocks no needed position lies in."""
    return min(needed(start, step, window)) // block_size


CASES = list(itertools.product(range(0, 20), range(1, 7), range(1, 9), range(1, 6)))


@pytest.mark.parametrize("window", range(1, 9))
def test_equals_the_most_that_is_safe(window: int) -> None:
    for start, step, _, block_size in (c for c in CASES if c[2] == window):
        got = released_blocks(start + step, step, window, block_size)
        assert got == safe_release(start, step, window, block_size), (start, step, window, block_size)
        assert oldest_needed(start + step, step, window) == start - window + 1


def test_one_block_more_frees_a_needed_position() -> None:
    for start, step, window, block_size in CASES:
        n = released_blocks(start + step, step, window, block_size)
        if start - window + 1 >= 0:
            assert any(p < (n + 1) * block_size for p in needed(start, step, window))


def test_keeping_window_plus_step_minus_two_or_the_window_alone_is_unsafe() -> None:
    """Keeping one position fewer (W + D - 2), or only the window from the tentative length (an engine's rule),
    frees a position this step's first query reads (and, after a rejected draft, the next step's)."""
    short = [(s, d, w, b) for s, d, w, b in CASES if max(0, s + 2 - w) // b > safe_release(s, d, w, b)]
    assert (5, 2, 4, 1) in short
    engine = [(s, d, w, b) for s, d, w, b in CASES if max(0, s + d - w) // b > safe_release(s, d, w, b)]
    assert (5, 3, 4, 1) in engine and all(d >= 2 for _, d, _, _ in engine)


def test_never_decreases_over_a_life() -> None:
    for window, block_size in itertools.product(range(1, 6), range(1, 4)):
        for steps in itertools.product([(1, 1), (3, 1), (3, 3), (5, 2)], repeat=3):
            start, last = 7, 0
            for step, accepted in steps:
                n = released_blocks(start + step, step, window, block_size)
                assert n >= last
                last, start = n, start + accepted


def test_refusals() -> None:
    with pytest.raises(ValueError, match=r"^step: must be a positive integer"):
        released_blocks(4, 0, 2, 2)
    with pytest.raises(ValueError, match=r"^seq_len: must be >= the step's 5 positions"):
        released_blocks(4, 5, 2, 2)
    with pytest.raises(ValueError, match=r"^block_size: must be a positive integer"):
        released_blocks(4, 1, 2, 0)
    with pytest.raises(ValueError, match=r"^window: must be a positive integer"):
        released_blocks(4, 1, 0, 2)


test_every_refusal_is_worded_exactly = worded_exactly(
    [
        (lambda: positions_read(0, 1, 0), ValueError, "window: must be a positive integer, got 0"),
        (lambda: positions_read(0, 1, 2.0), TypeError, "window: must be an int, got float"),  # type: ignore[arg-type]
        (lambda: positions_read(0, 0, 2), ValueError, "step: must be a positive integer, got 0"),
        (lambda: positions_read(0, -1, 2), ValueError, "step: must be a positive integer, got -1"),
        (lambda: positions_read(-1, 1, 2), ValueError, "start: must be >= 0, got -1"),
        (lambda: oldest_needed(0, 1, 2), ValueError, "seq_len: must be a positive integer, got 0"),
        (lambda: oldest_needed(None, 1, 2), TypeError, "seq_len: must be an int, got NoneType"),  # type: ignore[arg-type]
        (lambda: released_blocks(0, 1, 2, 2), ValueError, "seq_len: must be a positive integer, got 0"),
        (
            lambda: released_blocks(4, 5, 2, 2),
            ValueError,
            "seq_len: must be >= the step's 5 positions (it counts them), got 4",
        ),
        (lambda: released_blocks(4, 1, 0, 2), ValueError, "window: must be a positive integer, got 0"),
        (lambda: released_blocks(4, 0, 2, 2), ValueError, "step: must be a positive integer, got 0"),
        (lambda: released_blocks(4, 1, 2, 0), ValueError, "block_size: must be a positive integer, got 0"),
    ]
)


def test_positions_read_at_the_start_of_the_sequence() -> None:
    """From position 0 nothing before it is read: a step of 3 reads 0..2; from 5 with a window of 4, 2..7."""
    assert positions_read(0, 3, 4) == range(0, 3)
    assert positions_read(5, 3, 4) == range(2, 8)
    assert positions_read(2, 1, 8) == range(0, 3)
