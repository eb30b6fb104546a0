"""Launch constants of the top-k kernels and the choice between the one-program and the split-row paths."""

from __future__ import annotations

from dataclasses import dataclass

from fast.indexing import validate as v


@dataclass(frozen=True)
class TopKConfig:
    """Launch constants: lanes per chunk, warps, sample size, the expected candidates per chosen row
    (``oversample``) and the candidate buffer's size as a multiple of k (``cap_factor``, a power of two).

    Split-row path (:func:`split_lanes_for`): lanes per split program (``split_lanes``, 0: never split), lanes
    per chunk within it (``split_block``) and its warps; taken for at most ``split_max_rows`` rows of at least
    ``split_min_width`` lanes; splits are halved (not below ``split_block``) until the grid has at least
    ``split_min_programs`` programs."""

    block: int = 4096
    num_warps: int = 16
    sample: int = 4096
    oversample: int = 2
    cap_factor: int = 8
    min_cap: int = 0
    direct: int = 4096
    pairwise: int = 0
    split_lanes: int = 8192
    split_block: int = 1024
    split_warps: int = 4
    split_min_width: int = 32768
    split_max_rows: int = 512
    split_min_programs: int = 264


COMPILED = TopKConfig()
INTERPRETED = TopKConfig(
    block=64,
    num_warps=1,
    sample=16,
    oversample=2,
    cap_factor=4,
    direct=8,
    pairwise=64,
    split_lanes=8,
    split_block=8,
    split_warps=1,
    split_min_width=24,
    split_max_rows=8,
    split_min_programs=0,
)
"""The interpreter pays per operation, not per element: rows of 24 lanes or more (at most 8 rows) take the
split-row path with 8-lane splits, so the property suite's rows exercise it; other rows up to 64 lanes take
the pairwise-rank path."""


def split_lanes_for(cfg: TopKConfig, rows: int, width: int) -> int:
    """Lanes per split program of the split-row path for ``rows`` rows of ``width`` lanes, 0 for the
    one-program path. The split-row path is for few long rows: one program per row leaves SMs idle (or each
    streaming one long row alone) while ``rows <= split_max_rows``, and splitting pays only once a row spans
    several splits (``width >= split_min_width``, a multiple of ``split_lanes``). The split starts at
    ``split_lanes`` and is halved, not below ``split_block``, while ``rows * ceil(width / split)`` is under
    ``split_min_programs`` (two waves on 132 SMs by default). Rows are the grid's second axis: at most 65535."""
    if cfg.split_lanes <= 0 or width < cfg.split_min_width or not 0 < rows <= min(cfg.split_max_rows, 65535):
        return 0
    lanes = cfg.split_lanes
    while lanes // 2 >= cfg.split_block and rows * -(-width // lanes) < cfg.split_min_programs:
        lanes //= 2
    return lanes


def uses_split(cfg: TopKConfig, rows: int, width: int) -> bool:
    """Whether :func:`fast.indexing.topk.topk` takes the split-row path (:func:`split_lanes_for`)."""
    return split_lanes_for(cfg, rows, width) > 0


def default_config() -> TopKConfig:
    return INTERPRETED if v.interpreted() else COMPILED


def pow2(x: int) -> int:
    """The least power of two >= ``x`` (1 for ``x <= 1``)."""
    return 1 << max(0, (x - 1).bit_length())


def buffer_sizes(cfg: TopKConfig, k: int, width: int) -> tuple[int, int]:
    """``(KPAD, CAP)``: k padded to a power of two (the rank-order sort's width), and the per-row candidate
    buffer: ``cap_factor * KPAD`` rounded to a power of two, at least ``min_cap``, at most the padded row."""
    kpad = pow2(min(k, width))
    cap = max(pow2(cfg.cap_factor * kpad), cfg.min_cap)
    return kpad, min(cap, max(pow2(width), 1))
