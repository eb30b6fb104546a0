"""A compressed layer: ratio, latent dimension, overlap and optional APE table (docs/compression.md).

Ratio ``r`` groups positions ``[j r, (j + 1) r)`` into compressed row ``j``. Each position projects ``channels``
score/latent pairs: ``d`` of them without overlap, ``2 d`` with overlap (V4, ``r = 4``), where the first ``d``
feed the next group and the last ``d`` the position's own group, so a row reads a window of ``2 r`` positions.
The APE table ``ape[i][c]`` (shape ``[r][channels]``) is added to the score of channel ``c`` of every position
at offset ``i`` within its own group (a factor under rational weights; see reference.gated_mean).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import sympy

from reference.checks import require, require_length, require_positive_int

V4_RATIOS: tuple[int, ...] = (0, 4, 128)
"""Per-layer ratios of V4; 0 is a layer without compression (no compressor, no state)."""
V41_RATIOS: tuple[int, ...] = (0, 1, 2)
"""Per-layer ratios of V4.1; 0 is a layer without compression."""
OVERLAP_RATIO = 4
"""The only ratio with overlapping windows (V4)."""

ApeTable = tuple[tuple[Any, ...], ...]
"""``[r][channels]`` exact entries: int, Fraction or an exact sympy expression (checked where weighted)."""


def window_positions(ratio: int, overlap: bool) -> int:
    """Positions one compressed row reads: ``r``, or ``2 r`` with overlap (the ``W`` of docs/ring-safety.md)."""
    require_positive_int(ratio, "ratio")
    _require_overlap(ratio, overlap)
    return 2 * ratio if overlap else ratio


def _require_overlap(ratio: int, overlap: object) -> None:
    if not isinstance(overlap, bool):
        raise TypeError(f"overlap: must be a bool, got {type(overlap).__name__}")
    require(
        not overlap or ratio == OVERLAP_RATIO,
        "overlap",
        f"overlapping windows exist only for ratio {OVERLAP_RATIO}, got ratio {ratio}",
    )


@dataclass(frozen=True)
class CompressedLayer:
    """One compressed layer.

    ratio: positions per compressed row (any positive int).
    dim: latent dimension ``d`` of a compressed row.
    overlap: overlapping windows (only ``ratio == 4``); doubles the projected channels.
    ape: optional ``[ratio][channels]`` table, by offset within the group.
    """

    ratio: int
    dim: int
    overlap: bool = False
    ape: ApeTable | None = None

    def __post_init__(self) -> None:
        require_positive_int(self.ratio, "ratio")
        require_positive_int(self.dim, "dim")
        _require_overlap(self.ratio, self.overlap)
        if self.ape is not None:
            object.__setattr__(self, "ape", _ape_table(self.ape, self.ratio, self.channels))

    @property
    def coff(self) -> int:
        """Channel multiplier: 2 with overlap, else 1."""
        return 2 if self.overlap else 1

    @property
    def channels(self) -> int:
        """Score/latent pairs one position projects: ``coff * dim``."""
        return self.coff * self.dim

    @property
    def window(self) -> int:
        """Positions one row reads: ``ratio``, or ``2 * ratio`` with overlap."""
        return self.coff * self.ratio

    def ape_at(self, position: int, channel: int) -> Any | None:
        """The APE entry for ``channel`` of ``position`` (offset ``position % ratio``), None without a table."""
        if self.ape is None:
            return None
        return self.ape[position % self.ratio][channel]


def _ape_table(ape: Sequence[Sequence[Any]], ratio: int, channels: int) -> ApeTable:
    if isinstance(ape, str | bytes) or not isinstance(ape, Sequence):
        raise TypeError(f"ape: must be a sequence of {ratio} rows, got {type(ape).__name__}")
    require_length(ape, ratio, "ape", "one row per offset within the group")
    rows = []
    for i, row in enumerate(ape):
        if isinstance(row, str | bytes) or not isinstance(row, Sequence):
            raise TypeError(f"ape[{i}]: must be a sequence of {channels} entries, got {type(row).__name__}")
        require_length(row, channels, f"ape[{i}]", "one entry per projected channel")
        for c, entry in enumerate(row):
            if isinstance(entry, bool) or not isinstance(entry, int | Fraction | sympy.Basic):
                raise TypeError(f"ape[{i}][{c}]: must be an int, Fraction or sympy number, got {type(entry).__name__}")
        rows.append(tuple(row))
    return tuple(rows)


def v4_layer(ratio: int, dim: int, ape: Sequence[Sequence[Any]] | None = None) -> CompressedLayer:
    """A V4 compressed layer: ratio 4 (with overlap) or 128 (without), with an optional APE table."""
    require_positive_int(ratio, "ratio")
    require(
        ratio in V4_RATIOS,
        "ratio",
        f"V4 compresses with ratio 4 or 128 (0 is an uncompressed layer with no compressor), got {ratio}",
    )
    table = None if ape is None else tuple(tuple(row) for row in ape)
    return CompressedLayer(ratio=ratio, dim=dim, overlap=ratio == OVERLAP_RATIO, ape=table)


def v41_layer(ratio: int, dim: int) -> CompressedLayer:
    """A V4.1 compressed layer: ratio 1 or 2, no overlap, no APE."""
    require_positive_int(ratio, "ratio")
    require(
        ratio in V41_RATIOS,
        "ratio",
        f"V4.1 compresses with ratio 1 or 2 (0 is an uncompressed layer with no compressor), got {ratio}",
    )
    return CompressedLayer(ratio=ratio, dim=dim)
