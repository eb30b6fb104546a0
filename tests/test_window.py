"""reference.window: sliding-window index lists in the V4 and V4.1 orders."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from reference.window import WindowOrder, decode_window, prefill_window
from tests.refusals import worded_exactly


def seed_002_decode(window_size: int, start_pos: int) -> tuple[int, ...]:
    """Seed 002's get_window_topk_idxs decode branch, read line by line and written as plain Python:
    oldest = start_pos % W + 1; list oldest..W-1 then 0..oldest-1; any index above start_pos becomes -1."""
    oldest = start_pos % window_size + 1
    idxs = list(range(oldest, window_size)) + list(range(oldest))
    return tuple(-1 if i > start_pos else i for i in idxs)


def public_v4_decode(window_size: int, start_pos: int) -> tuple[int, ...]:
    """The public V4 get_window_topk_idxs decode branches: a full ring rotated oldest first; a filling ring lists
    0..start_pos then pads -1 at the end."""
    if start_pos >= window_size - 1:
        s = start_pos % window_size
        return tuple(list(range(s + 1, window_size)) + list(range(s + 1)))
    return tuple(list(range(start_pos + 1)) + [-1] * (window_size - start_pos - 1))


def simulate_ring(window_size: int, position: int) -> list[int | None]:
    """Brute force: write positions 0..position into slot t % W; return slot -> position held (None if empty)."""
    ring: list[int | None] = [None] * window_size
    for t in range(position + 1):
        ring[t % window_size] = t
    return ring


WINDOWS = [1, 2, 3, 4, 8]


@pytest.mark.parametrize("w", WINDOWS)
def test_v41_decode_matches_seed_002(w: int) -> None:
    for p in range(1, 4 * w + 3):  # the seed's decode branch runs for start_pos > 0
        assert decode_window(w, p, WindowOrder.V41) == seed_002_decode(w, p)


@pytest.mark.parametrize("w", WINDOWS)
def test_v4_decode_matches_public_v4(w: int) -> None:
    for p in range(1, 4 * w + 3):
        assert decode_window(w, p, WindowOrder.V4) == public_v4_decode(w, p)


@pytest.mark.parametrize("w", WINDOWS)
@pytest.mark.parametrize("order", list(WindowOrder))
def test_decode_lists_the_ring_oldest_first(w: int, order: WindowOrder) -> None:
    for p in range(0, 4 * w + 3):
        ring = simulate_ring(w, p)
        lanes = decode_window(w, p, order)
        assert len(lanes) == w
        slots = [s for s in lanes if s != -1]
        assert [ring[s] for s in slots] == sorted(t for t in ring if t is not None)
        assert lanes.count(-1) == ring.count(None)
        empty = [-1] * ring.count(None)
        if order is WindowOrder.V4:
            assert list(lanes) == slots + empty
        else:
            assert list(lanes) == empty + slots


def test_orders_agree_once_the_ring_is_full() -> None:
    for w in WINDOWS:
        for p in range(w - 1, 3 * w):
            assert decode_window(w, p, WindowOrder.V4) == decode_window(w, p, WindowOrder.V41)


def test_filling_ring_examples() -> None:
    assert decode_window(4, 1, WindowOrder.V4) == (0, 1, -1, -1)
    assert decode_window(4, 1, WindowOrder.V41) == (-1, -1, 0, 1)
    assert decode_window(4, 5, WindowOrder.V41) == (2, 3, 0, 1)  # positions 2, 3, 4, 5


def seed_prefill(window_size: int, seqlen: int) -> tuple[tuple[int, ...], ...]:
    """Seed 002 / public V4 prefill, as plain Python: row i = max(0, i - W + 1) + c for c < min(seqlen, W),
    -1 where that exceeds i."""
    lanes = min(seqlen, window_size)
    return tuple(
        tuple(-1 if max(0, i - window_size + 1) + c > i else max(0, i - window_size + 1) + c for c in range(lanes))
        for i in range(seqlen)
    )


@pytest.mark.parametrize("w", WINDOWS)
def test_prefill_matches_seed_and_brute_force(w: int) -> None:
    for seqlen in range(0, 3 * w + 2):
        rows = prefill_window(w, seqlen)
        assert rows == seed_prefill(w, seqlen)
        for i, row in enumerate(rows):
            # Brute force: the positions within the window of query i, oldest first, -1 padding at the end.
            positions = [t for t in range(seqlen) if i - w < t <= i]
            assert list(row) == positions + [-1] * (min(seqlen, w) - len(positions))


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: prefill_window(0, 3), "window_size"),
        (lambda: prefill_window(4, -1), "seqlen"),
        (lambda: decode_window(4, -1, WindowOrder.V4), "position"),
        (lambda: decode_window(0, 3, WindowOrder.V41), "window_size"),
        (lambda: decode_window(4, 3, "v4"), "order"),  # type: ignore[arg-type]
    ],
)
def test_bad_input_names_the_argument(call: Callable[[], object], argument: str) -> None:
    with pytest.raises(ValueError, match=f"^{argument}"):
        call()


# --- every refusal worded exactly (docs/mutation.md) ------------------------------------------------------------


test_every_refusal_is_worded_exactly = worded_exactly(
    [
        (lambda: prefill_window(0, 3), ValueError, "window_size: must be a positive integer, got 0"),
        (lambda: prefill_window(2, -1), ValueError, "seqlen: must be >= 0, got -1"),
        (lambda: decode_window(0, 3, WindowOrder.V4), ValueError, "window_size: must be a positive integer, got 0"),
        (lambda: decode_window(2, -1, WindowOrder.V4), ValueError, "position: must be >= 0, got -1"),
        (lambda: decode_window(2, 3, "v4"), ValueError, "order: must be WindowOrder.V4 or WindowOrder.V41, got 'v4'"),  # type: ignore[arg-type]
    ]
)
