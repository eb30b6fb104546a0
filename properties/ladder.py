"""Shape ladders: how large the inputs of a property get, one ladder per kind of dimension.

Most draws stay small (fast shrinking, readable counterexamples). A fixed share of draws, ``BOUNDARY_SHARE``
of them, lands on a tile boundary a kernel crosses (one below, at and past a power of two: 1023 / 1024 / 1025,
k 257 / 513, 65 lanes, 17 heads), and on a GPU run the production sizes of the V4 / V4.1 presets
(``reference.models``) join them. Which sizes a run may draw is its shape tier (:func:`tier`):

- ``ci``: the small sizes and the boundaries up to each ladder's ``ci_cap``, one large dimension an example
  (the ``ci`` and ``replay`` profiles on a CPU: ``make check``'s budget);
- ``tile``: every boundary, two large dimensions an example (``dev`` and ``deep`` on a CPU);
- ``production``: every boundary and the production sizes (a CUDA device with compiled kernels, or
  ``CSA_SHAPES=production``).

``CSA_SHAPES`` (``ci``, ``tile`` or ``production``) overrides the tier. The planted size bugs of the shipped
mutants (``properties/<area>/mutants.py``) break past :attr:`Ladder.tile`, which every tier crosses.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
from hypothesis import strategies as st

from properties.profiles import profile_name
from reference.conventions import CONVENTIONS
from reference.models import MODELS

TIERS = ("ci", "tile", "production")
BOUNDARY_SHARE = 4
"""One draw in this many is a boundary (or production) size; the others are small."""
LARGE_DIMENSIONS = {"ci": 1, "tile": 2, "production": 2}
"""The most dimensions of one example past their small range, per tier."""


@dataclass(frozen=True)
class Ladder:
    """``small``: the inclusive range most draws come from; ``boundary``: sizes at tile boundaries;
    ``ci_cap``: the largest boundary the ``ci`` tier draws; ``tile``: the boundary the planted size bugs break
    past (every tier draws a size above it); ``production``: the sizes V4 / V4.1 run."""

    kind: str
    small: tuple[int, int]
    boundary: tuple[int, ...]
    ci_cap: int
    tile: int
    production: tuple[int, ...]

    def __post_init__(self) -> None:
        if not any(self.tile < b <= self.ci_cap for b in self.boundary):
            raise ValueError(f"ci_cap: the {self.kind} ladder's ci tier must draw a size past its tile {self.tile}")

    def sizes(self, shape_tier: str) -> tuple[int, ...]:
        """The large sizes ``shape_tier`` draws."""
        if shape_tier == "ci":
            return tuple(b for b in self.boundary if b <= self.ci_cap)
        if shape_tier == "tile":
            return self.boundary
        return (*self.boundary, *self.production)


def tier() -> str:
    """The shape tier of this run (see the module docstring)."""
    chosen = os.environ.get("CSA_SHAPES")
    if chosen:
        if chosen not in TIERS:
            raise ValueError(f"CSA_SHAPES: must be one of {TIERS}, got {chosen!r}")
        return chosen
    if os.environ.get("TRITON_INTERPRET") != "1" and torch.cuda.is_available():
        return "production"
    return "ci" if profile_name() in ("ci", "replay") else "tile"


def _presets(field: str) -> tuple[int, ...]:
    return tuple(sorted({int(v) for m in MODELS.values() if (v := getattr(m, field)) is not None}))


TOPK = _presets("index_topk")
WINDOWS = _presets("window_size")
HEAD_DIMS = _presets("head_dim")
INDEX_DIMS = _presets("index_head_dim")
INDEX_HEADS = _presets("index_n_heads")
CANDIDATE_SLOTS = _presets("candidate_topk_blocks")
ROPE_DIMS = _presets("rope_head_dim")

LADDERS: dict[str, Ladder] = {
    ladder.kind: ladder
    for ladder in (
        Ladder("rows", (1, 4), (16, 17, 65, 129), 17, 16, (128, 256)),
        Ladder("width", (0, 32), (1023, 1024, 1025, 4097), 1025, 1024, (16384, 65536, 262144)),
        Ladder("k", (0, 8), (255, 256, 257, 512, 513, 1025, 2049), 513, 256, (*TOPK, *CANDIDATE_SLOTS)),
        Ladder(
            "lanes",
            (0, 8),
            (63, 64, 65, 129, 1025),
            65,
            64,
            (*CANDIDATE_SLOTS, *(t + w for t in TOPK for w in WINDOWS)),
        ),
        Ladder("heads", (1, 4), (16, 17, 33), 17, 16, (*INDEX_HEADS, 128)),
        Ladder("dim", (1, 8), (63, 64, 65, 129), 65, 64, (*INDEX_DIMS, *HEAD_DIMS)),
        Ladder("blocks", (1, 3), (255, 256, 257, 1025), 257, 256, (4096, 32768)),
        Ladder("requests", (1, 4), (16, 17, 65), 17, 16, (128,)),
        Ladder("channels", (1, 4), (32, 33, 64, 65, 129), 65, 64, (*INDEX_DIMS, *HEAD_DIMS)),
        Ladder("window", (1, 12), (63, 64, 65), 65, 64, WINDOWS),
    )
}


def ladder(kind: str) -> Ladder:
    if kind not in LADDERS:
        raise ValueError(f"kind: no ladder {kind!r}; known: {', '.join(LADDERS)}")
    return LADDERS[kind]


def size(draw: st.DrawFn, kind: str, low: int | None = None, large: bool = True) -> int:
    """One size of ``kind``'s ladder: small most of the time (shrinking goes there), a boundary or production
    size in one draw of ``BOUNDARY_SHARE`` where ``large`` allows; at least ``low`` when given."""
    rung = ladder(kind)
    small_low, small_high = rung.small
    if low is not None:
        small_low, small_high = max(small_low, low), max(small_high, low)
    if not large or draw(st.integers(0, BOUNDARY_SHARE - 1)) < BOUNDARY_SHARE - 1:
        return draw(st.integers(small_low, small_high))
    sizes = [s for s in rung.sizes(tier()) if low is None or s >= low]
    return draw(st.sampled_from(sizes)) if sizes else small_high


def generator(case: dict[str, Any]) -> torch.Generator:
    """The generator an example's values are expanded from (its ``seed``)."""
    return torch.Generator().manual_seed(case["seed"])


def choice(g: torch.Generator, n: int) -> int:
    """An integer in [0, n) from ``g``."""
    return int(torch.randint(n, (), generator=g))


def sample(case: dict[str, Any], n: int, count: int) -> torch.Tensor:
    """The indices of the rows (of ``n``) a judge checks: all of them up to ``count``, else the first, the last
    and ``count - 2`` others drawn from the example's seed (an exact check on sampled rows keeps production
    shapes affordable)."""
    if n <= count:
        return torch.arange(n)
    inner = torch.randperm(n - 2, generator=torch.Generator().manual_seed(case["seed"] + 1))[: count - 2] + 1
    return torch.cat([torch.tensor([0, n - 1]), inner]).sort().values


@st.composite
def shapes(draw: st.DrawFn, **kinds: str) -> dict[str, Any]:
    """``{name: size}`` for each ``name=kind`` given, drawn from the kind's ladder, and a ``seed`` from which a
    property expands the example's values (large examples stay small to print and to shrink). At most
    ``LARGE_DIMENSIONS[tier]`` dimensions of an example are large: one under ``ci`` keeps a CPU run's cost linear
    in the ladder, two elsewhere keep a production example within one device's memory and seconds (64 heads of
    dim 512 over 262144 keys and 256 queries at once would not be)."""
    most = LARGE_DIMENSIONS[tier()]
    out: dict[str, Any] = {}
    for name, kind in kinds.items():
        grown = sum(out[n] > ladder(k).small[1] for n, k in kinds.items() if n in out)
        out[name] = size(draw, kind, large=grown < most)
    out["seed"] = draw(st.integers(0, 2**31 - 1))
    return out


def base_conventions(op: str) -> tuple[str, ...] | None:
    """The conventions a ladder property judges: the operation's base conventions, without options (``ties_any``,
    ``order_*``, ``bf16_rows``, ...), whose answers the torch oracles do not bring to one canonical form; None
    where the operation has no convention. Option conventions are judged by the operation's other properties."""
    return tuple(CONVENTIONS[op]) or None
