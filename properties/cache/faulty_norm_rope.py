"""A small torch implementation of norm_rope_store with fault switches: the base of its shipped mutants.

It norms and rotates the rows in float32 and hands them to the unmutated torch ``quantize_store`` of
``properties.cache.faulty_formats``; with ``NO_NORM_BUGS`` it passes every norm_rope_store property
(``properties/cache/test_support.py``), and each field of ``NormRopeBugs`` plants one bug.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch

from properties.cache.faulty_formats import quantize_store
from properties.ladder import ladder


@dataclass(frozen=True)
class NormRopeBugs:
    rotate_half: bool = False  # RoPE pairs (i, i + rope_dim / 2), the rotate-half layout, not interleaved pairs
    weight_ignored: bool = False  # the RMSNorm weight is not applied
    eps_dropped: bool = False  # 1 / sqrt(mean(x^2)), eps left out
    rows_past_tile: bool = False  # a row past the rows ladder's tile takes the position of the row a tile before


NO_NORM_BUGS = NormRopeBugs()


def norm_rope_store(
    *tensors: torch.Tensor,
    fmt: str,
    rows_per_block: int,
    layer: int,
    eps: float,
    rope_dim: int,
    bugs: NormRopeBugs = NO_NORM_BUGS,
) -> None:
    rows, weight, cos_sin, positions, slots, cache = tensors  # the contract's order
    mean = rows.square().mean(dim=1, keepdim=True)
    y = rows * torch.rsqrt(mean if bugs.eps_dropped else mean + eps)
    if not bugs.weight_ignored:
        y = y * weight
    half = rope_dim // 2
    if bugs.rows_past_tile:
        n, tile = positions.shape[0], ladder("rows").tile
        positions = positions[torch.arange(n) - torch.where(torch.arange(n) >= tile, tile, 0)]
    table = cos_sin[positions.clamp(0, cos_sin.shape[0] - 1)]
    cos, sin = table[:, :half], table[:, half:]
    head, tail = y[:, : y.shape[1] - rope_dim], y[:, y.shape[1] - rope_dim :]
    if bugs.rotate_half:
        first, second = tail[:, :half], tail[:, half:]
        rotated = torch.cat([first * cos - second * sin, second * cos + first * sin], dim=1)
    else:
        even, odd = tail[:, 0::2], tail[:, 1::2]
        rotated = torch.stack([even * cos - odd * sin, odd * cos + even * sin], dim=-1).reshape(tail.shape)
    normed = torch.cat([head, rotated], dim=1).contiguous()
    quantize_store(normed, slots, cache, fmt=fmt, rows_per_block=rows_per_block, layer=layer)


def norm_rope_with(bugs: NormRopeBugs) -> Callable[..., None]:
    """norm_rope_store with ``bugs`` planted, as a contract-shaped callable."""
    return functools.partial(norm_rope_store, bugs=bugs)
