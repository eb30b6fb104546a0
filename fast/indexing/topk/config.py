"""Launch constants of the top-k kernels, the choice between the one-program and the split-row paths, and the
operands every top-k kernel takes."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import torch

from fast.indexing import validate as v

REGISTER_KEYS = 16384
"""The most keys one program holds in registers (32 a thread at 16 warps): the widest resident row, and the
largest bounded count ``select._kth_key`` selects in registers."""


@dataclass(frozen=True)
class TopKConfig:
    """Launch constants: lanes per chunk, warps, sample size, the expected candidates per chosen row
    (``oversample``) and the candidate buffer's size as a multiple of k (``cap_factor``, a power of two).

    Register-resident path (``resident.py``): rows of at most ``resident`` lanes that do not split (0: never),
    ``resident_keys`` keys a thread (1 to 8 warps a program, more keys a thread past that).

    Split-row path (:func:`split_lanes_for`): lanes per split program (``split_lanes``, 0: never split), lanes
    per chunk within it (``split_block``) and its warps; taken for at most ``split_max_rows`` rows of at least
    ``split_min_width`` lanes; splits are halved (not below ``split_block``) until the grid has at least
    ``split_min_programs`` programs. ``split_launches``: the launches of the split-row path's threshold, count
    and compaction (``split.py``): 3, 2 (the count and compaction fused) or 1 (all three fused); 3 by default
    until the H200 benchmark times the fused forms against it."""

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
    resident: int = REGISTER_KEYS
    resident_keys: int = 32
    split_launches: int = 3

    def __post_init__(self) -> None:
        for name in ("block", "sample", "direct", "split_block"):
            value = getattr(self, name)
            if value < 0 or value & (value - 1):
                raise ValueError(f"{name}: must be 0 or a power of two (a tile of the kernels), got {value}")
        if not 0 <= self.resident <= REGISTER_KEYS:
            raise ValueError(f"resident: must be in [0, {REGISTER_KEYS}] (a row held in one program's registers), "
                             f"got {self.resident}")  # fmt: skip
        if self.split_launches not in (1, 2, 3):
            raise ValueError(f"split_launches: must be 1, 2 or 3, got {self.split_launches}")
        if self.resident_keys < 1 or self.resident_keys & (self.resident_keys - 1):
            raise ValueError(f"resident_keys: must be a power of two (keys a thread), got {self.resident_keys}")


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
    resident=16,
)
"""The interpreter pays per operation, not per element: rows of 24 lanes or more (at most 8 rows) take the
split-row path with 8-lane splits, rows of at most 16 lanes the register-resident path, so the property suite's
rows (at most 32 lanes) exercise both; other rows up to 64 lanes take the pairwise-rank path."""


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


def uses_resident(cfg: TopKConfig, rows: int, width: int) -> bool:
    """Whether :func:`fast.indexing.topk.topk` takes the register-resident path: rows of at most
    ``cfg.resident`` lanes that the split-row rule leaves whole."""
    return 0 < width <= cfg.resident and not split_lanes_for(cfg, rows, width)


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


_STAND_INS: dict[torch.device, torch.Tensor] = {}


def stand_in(device: torch.device) -> torch.Tensor:
    """One 1-element i32 tensor a device, made once: the pointer a kernel takes for an absent operand (no kernel
    reads or writes it), so a call allocates nothing for it."""
    held = _STAND_INS.get(device)
    if held is None:
        held = _STAND_INS[device] = torch.zeros(1, dtype=torch.int32, device=device)
    return held


@dataclass(frozen=True)
class Operands:
    """A checked top-k call as its kernels take it: score rows f32[M, N], their visible counts, the output
    (i32|i64[M, lanes]), ``k`` (at most N), the fill value, and the optional offsets, keep map
    (``fast.indexing.topk.keep_map`` of candidate blocks of ``block_size`` rows; 1 without) and block table with
    its rows per block; ``rank``: rank-order lanes; ``drop_neg_inf`` / ``drop_nan``: chosen -inf / NaN lanes
    become fill lanes."""

    scores: torch.Tensor
    lengths: torch.Tensor
    out: torch.Tensor
    k: int
    fill: int
    offsets: torch.Tensor | None = None
    keep: torch.Tensor | None = None
    block_size: int = 1
    block_table: torch.Tensor | None = None
    rows_per_block: int | None = None
    rank: bool = False
    drop_neg_inf: bool = False
    drop_nan: bool = False

    @functools.cached_property
    def stand_in(self) -> torch.Tensor:
        """A 1-element i32 tensor on the scores' device, passed in place of each absent tensor (never read)."""
        return stand_in(self.scores.device)

    def rank_scratch(self, kpad: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-row scratch of ``kpad`` keys and lanes for the rank-order sort (``select._finish``); the stand-in
        for both outside rank order, where no kernel touches them."""
        if not self.rank:
            return self.stand_in, self.stand_in
        rows, device = self.scores.shape[0], self.scores.device
        return (
            torch.empty(rows, kpad, dtype=torch.int32, device=device),
            torch.empty(rows, kpad, dtype=self.out.dtype, device=device),
        )

    def pointers(self) -> tuple[torch.Tensor, ...]:
        """scores, lengths, offsets, keep map, block table, out: the stand-in for each one absent."""
        absent = self.stand_in
        offsets, keep, table = (absent if x is None else x for x in (self.offsets, self.keep, self.block_table))
        return (self.scores, self.lengths, offsets, keep, table, self.out)

    def sizes(self) -> tuple[int, ...]:
        """width, k, lanes, fill, block_size, keep-map row stride, block-table width, rows per block."""
        keep_stride = self.keep.shape[-1] if self.keep is not None else 0
        table_width = self.block_table.shape[1] if self.block_table is not None else 0
        width, lanes = self.scores.shape[1], self.out.shape[1]
        return (width, self.k, lanes, self.fill, self.block_size, keep_stride, table_width, self.rows_per_block or 1)

    def flags(self) -> dict[str, Any]:
        """The compile-time flags of the optional operands and the output rules."""
        return dict(
            HAS_OFFSETS=self.offsets is not None,
            HAS_KEEP=self.keep is not None,
            TRANSLATE=self.block_table is not None,
            RANK=self.rank,
            DROP_NEG_INF=self.drop_neg_inf,
            DROP_NAN=self.drop_nan,
        )
