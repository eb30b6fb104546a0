"""Small, composable Hypothesis strategies. Values sit on exact grids (small dyadic rationals that float32 holds
exactly), so a structural bug shows as a gross error, never as rounding noise."""

from __future__ import annotations

from hypothesis import strategies as st

INT32_MAX = 2**31 - 1
GARBAGE = (float("nan"), float("inf"), float("-inf"), 3.0e38, -3.0e38, 1.0e30)


def grid_values(lo: int = -8, hi: int = 8, denominator: int = 4) -> st.SearchStrategy[float]:
    """Multiples of 1/denominator in [lo, hi]: exact in float32, bfloat16 for small ranges, and Fraction."""
    return st.integers(lo * denominator, hi * denominator).map(lambda n: n / denominator)


def garbage() -> st.SearchStrategy[float]:
    """What unwritten or out-of-range storage may hold."""
    return st.sampled_from(GARBAGE) | grid_values(-1000, 1000, 1)


def partitions(n: int, max_parts: int | None = None) -> st.SearchStrategy[list[int]]:
    """Cut points 0 = c0 < c1 < ... < ck = n of range(n): chunk i is [c_i, c_{i+1})."""
    if n == 0:
        return st.just([0, 0])
    inner = st.sets(st.integers(1, n - 1), max_size=max_parts - 1 if max_parts else None) if n > 1 else st.just(set())
    return inner.map(lambda cuts: [0, *sorted(cuts), n])


@st.composite
def score_row(draw: st.DrawFn, width: int, valid: int, *, with_ties: bool = True) -> list[float]:
    """A row of `width` scores whose first `valid` lanes are on a small grid (ties likely) and the rest garbage."""
    values = grid_values(-4, 4, 2) if with_ties else grid_values(-64, 64, 16)
    head = draw(st.lists(values, min_size=valid, max_size=valid))
    tail = draw(st.lists(garbage(), min_size=width - valid, max_size=width - valid))
    return head + tail


@st.composite
def block_table(draw: st.DrawFn, blocks: int, pool: int | None = None) -> list[int]:
    """`blocks` distinct physical block ids drawn from a pool (a request never owns a block twice)."""
    size = pool if pool is not None else max(blocks * 2, 4)
    return draw(st.lists(st.integers(0, size - 1), min_size=blocks, max_size=blocks, unique=True))


@st.composite
def lengths_for(draw: st.DrawFn, rows: int, width: int, min_len: int = 0) -> list[int]:
    """Per-row valid lengths in [min_len, width], with the edge cases 0 and width favoured."""
    edge = st.sampled_from(sorted({min_len, width}))
    return draw(st.lists(edge | st.integers(min_len, width), min_size=rows, max_size=rows))


def one_of_conventions(conventions: tuple[str, ...]) -> st.SearchStrategy[str]:
    return st.sampled_from(conventions)
