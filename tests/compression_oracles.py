"""Independent formulations and inputs for the compression tests (not imported by reference/)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from fractions import Fraction

from reference.compression import CompletedRow, CompressionState, prefill_chunk
from reference.gated_mean import Weighting
from reference.layer import CompressedLayer
from tests import labs

RawPosition = tuple[tuple[int, ...], tuple[int, ...]]


def oracle_row(layer: CompressedLayer, positions: Sequence[RawPosition], j: int) -> tuple[Fraction, ...]:
    """Row j under rational weights, written straight from the definition in docs/compression.md.

    Channel c: the entries are positions [(j-1) r, j r) at channel c (overlap, j >= 1) and positions
    [j r, (j+1) r) at channel c (no overlap) or d + c (overlap); weight = score x APE factor of the position's
    offset within its own group.
    """
    r, d = layer.ratio, layer.dim
    row = []
    for c in range(d):
        entries = []
        if layer.overlap and j >= 1:
            entries += [(p, c) for p in range((j - 1) * r, j * r)]
        entries += [(p, d + c if layer.overlap else c) for p in range(j * r, (j + 1) * r)]
        numerator, denominator = Fraction(0), Fraction(0)
        for p, channel in entries:
            factor = 1 if layer.ape is None else layer.ape[p % r][channel]
            weight = Fraction(positions[p][0][channel]) * factor
            numerator += weight * positions[p][1][channel]
            denominator += weight
        row.append(numerator / denominator)
    return tuple(row)


def oracle_rows(layer: CompressedLayer, positions: Sequence[RawPosition]) -> list[tuple[Fraction, ...]]:
    """Every complete row of the sequence (``oracle_row``)."""
    return [oracle_row(layer, positions, j) for j in range(len(positions) // layer.ratio)]


def random_positions(rng: random.Random, layer: CompressedLayer, n: int) -> list[RawPosition]:
    """n positions with positive integer weights and integer latents."""
    return [
        (
            tuple(rng.randint(1, 9) for _ in range(layer.channels)),
            tuple(rng.randint(-20, 20) for _ in range(layer.channels)),
        )
        for _ in range(n)
    ]


def random_ape(rng: random.Random, ratio: int, channels: int) -> tuple[tuple[int, ...], ...]:
    """A positive integer APE factor table ``[ratio][channels]``."""
    return tuple(tuple(rng.randint(1, 5) for _ in range(channels)) for _ in range(ratio))


def random_composition(rng: random.Random, n: int, cuts: int) -> list[int]:
    points = sorted(rng.sample(range(1, n), min(cuts, n - 1)))
    bounds = [0, *points, n]
    return [b - a for a, b in itertools.pairwise(bounds)]


def prefill_in_chunks(
    layer: CompressedLayer, positions: Sequence[RawPosition], lengths: Sequence[int], weighting: Weighting
) -> tuple[list[CompletedRow], list[int], CompressionState]:
    """Rows, reserved-row counts and the final state of prefilling ``positions`` in chunks of ``lengths``."""
    state = CompressionState()
    rows: list[CompletedRow] = []
    reserved: list[int] = []
    for length in lengths:
        start = state.end
        result = prefill_chunk(layer, state, start, positions[start : start + length], weighting)
        rows.extend(result.rows)
        reserved.append(len(result.reserved))
        for out in result.reserved:
            if out.store_row == -1:
                assert not result.rows
                assert out.position == 0 and all(v == 0 for v in out.values)
            else:
                assert out.position == out.store_row * layer.ratio
        state = result.state
    return rows, reserved, state


compositions = labs.load("26_compression").compositions
"""Every way to cut n >= 1 positions into nonempty chunks: the lab's own enumeration."""
