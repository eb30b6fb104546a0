"""Small, composable Hypothesis strategies. Values sit on exact grids (small dyadic rationals that float32 holds
exactly), so a structural bug shows as a gross error, never as rounding noise."""

from __future__ import annotations

from hypothesis import strategies as st

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
