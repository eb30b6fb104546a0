"""Exact expected rows for floating compression kernels, from the reference (docs/compression-properties.md).

A layer is described by a plain dict (``LayerSpec``) and a position by ``[scores, latents]``, lists of floats
on exact grids, so an example stays printable. ``exact_rows`` asks ``reference.compression`` for the rows.

The exponentials. A kernel weighs an entry by ``exp(s + a)``. ``Weighting.EXP`` keeps that symbolic (sympy),
which costs milliseconds per value; here each ``exp`` of a float32 score or APE entry is evaluated once by
mpmath at ``PRECISION`` bits and converted exactly to a Fraction, and the reference's ``Weighting.RATIONAL``
does everything else exactly (a score is the weight ``exp(s)``, an APE entry the factor ``exp(a)``). Which
positions, channel halves and APE offsets make a row is the reference's own; only the exponentials carry a
relative error below ``2**-(PRECISION - 1)``, far below a float32 or bfloat16 unit.
properties/compression/test_support.py checks this against ``Weighting.EXP`` evaluated to 40 digits.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from functools import cache, lru_cache
from typing import Any

import mpmath

from reference.compression import Position, Row, compress_row, normalize_positions
from reference.gated_mean import Weighting
from reference.layer import CompressedLayer

PRECISION = 192
"""Bits of every mpmath exponential."""
WEIGHTING = Weighting.RATIONAL
LayerSpec = dict[str, Any]
"""``{"ratio": int, "dim": int, "overlap": bool, "ape": [[float] * channels] * ratio or None}``."""
RawPosition = Sequence[Sequence[float]]
"""``[scores, latents]``: ``channels`` floats each (raw scores, before APE)."""

_MP = mpmath.MPContext()
_MP.prec = PRECISION


def channels(spec: LayerSpec) -> int:
    return int(spec["dim"]) * (2 if spec["overlap"] else 1)


def window(spec: LayerSpec) -> int:
    """Positions one row reads: ``W = r``, or ``2 r`` with overlap."""
    return int(spec["ratio"]) * (2 if spec["overlap"] else 1)


@cache
def exp_weight(x: float) -> Fraction:
    """``exp(x)`` at ``PRECISION`` bits, as the exact Fraction of that binary value."""
    mantissa, exponent = _MP.exp(_MP.mpf(x)).man_exp
    return Fraction(mantissa) * Fraction(2) ** exponent


def _key(spec: LayerSpec) -> tuple[Any, ...]:
    ape = spec.get("ape")
    table = None if ape is None else tuple(tuple(float(a) for a in row) for row in ape)
    return (int(spec["ratio"]), int(spec["dim"]), bool(spec["overlap"]), table)


@lru_cache(maxsize=256)
def _layer(key: tuple[Any, ...]) -> CompressedLayer:
    ratio, dim, overlap, table = key
    ape = None if table is None else tuple(tuple(exp_weight(a) for a in row) for row in table)
    return CompressedLayer(ratio=ratio, dim=dim, overlap=overlap, ape=ape)


def weighted_layer(spec: LayerSpec) -> CompressedLayer:
    """The reference layer whose APE factors are ``exp(ape)``."""
    return _layer(_key(spec))


def weighted(position: RawPosition) -> Position:
    """A position as the reference's RATIONAL input: weights ``exp(score)``, exact latents."""
    scores, latents = position
    return tuple(exp_weight(float(s)) for s in scores), tuple(Fraction(float(v)) for v in latents)


def weighted_positions(spec: LayerSpec, positions: Sequence[RawPosition]) -> tuple[Position, ...]:
    return normalize_positions(weighted_layer(spec), [weighted(p) for p in positions], WEIGHTING)


def exact_rows(
    spec: LayerSpec, positions: Sequence[RawPosition], groups: Sequence[int] | None = None
) -> dict[int, Row]:
    """One-shot compression of a whole sequence: row ``j`` (Fractions) for each of ``groups`` (default: every
    complete row, ``range(len // r)``), by ``reference.compression.compress_row`` as ``compress`` forms
    them."""
    layer = weighted_layer(spec)
    inputs = weighted_positions(spec, positions)
    wanted = range(len(inputs) // layer.ratio) if groups is None else groups
    return {j: compress_row(layer, j, inputs.__getitem__, WEIGHTING) for j in wanted}
