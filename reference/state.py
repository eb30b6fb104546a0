"""The compression state as a ring of S slots, and the steps that go through it (docs/ring-safety.md).

Position ``p`` lives in slot ``p % S``; a slot holds one position's raw FP32 score/latent pair (all
``layer.channels`` of each; APE is applied when a row is reduced). Nothing else is recorded, so a slot that a
later position has taken returns that position's inputs: an undersized ring yields a corrupted row, as a kernel
would.

A decode / verify step of ``q`` new positions follows one of two disciplines:

* ``WRITE_THEN_READ`` (the seed's decode): write all ``q`` inputs, then compute every completed row reading its
  whole window from the ring.
* ``READ_THEN_WRITE``: compute every completed row reading old positions from the ring and new ones from the
  step's inputs, then write the ``q`` inputs.

A verify step may accept only ``a <= q`` of its positions; the rest roll back (the ring's end moves to
``start + a``) but their writes stay in the slots. Prefill through a ring always reads before it writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from reference.checks import require, require_int, require_nonnegative_int, require_positive_int
from reference.compression import (
    CompletedRow,
    OutputRow,
    Position,
    as_output,
    compress_row,
    normalize_positions,
    placeholder,
)
from reference.gated_mean import Weighting
from reference.layer import CompressedLayer, window_positions

WRITE_THEN_READ = "write_then_read"
READ_THEN_WRITE = "read_then_write"
DISCIPLINES: tuple[str, ...] = (WRITE_THEN_READ, READ_THEN_WRITE)
SCORE_LATENT = 2
"""The axis of length two in a state slot: score, then latent."""
FP32_BYTES = 4
"""Bytes of one FP32 state entry."""


def _require_discipline(discipline: object) -> str:
    if isinstance(discipline, str) and discipline.replace("-", "_") in DISCIPLINES and discipline not in DISCIPLINES:
        raise ValueError(f"discipline: {discipline!r} is now spelled {discipline.replace('-', '_')!r}")
    if not isinstance(discipline, str) or discipline not in DISCIPLINES:
        raise ValueError(f"discipline: must be one of {', '.join(DISCIPLINES)}, got {discipline!r}")
    return discipline


def _require_bool(value: object, argument: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{argument}: must be a bool, got {type(value).__name__}")
    return value


def min_safe_ring_size(ratio: int, overlap: bool, qmax: int, discipline: str, rollback: bool) -> int:
    """The fewest slots with which no schedule of steps of at most ``qmax`` positions reads a lost input.

    With ``W`` = positions per row (``r``, or ``2 r`` with overlap), derived in docs/ring-safety.md:
    write_then_read ``W + qmax - 1`` (with or without rollback); read_then_write ``W - 1`` without rollback and
    ``W + qmax - 2`` with it; 0 (no state at all) when ``W = 1`` under read_then_write.
    """
    window = window_positions(ratio, overlap)
    require_positive_int(qmax, "qmax")
    _require_discipline(discipline)
    _require_bool(rollback, "rollback")
    if discipline == WRITE_THEN_READ:
        return window + qmax - 1
    if window == 1:
        return 0
    return window + qmax - 2 if rollback else window - 1


def state_payload_bytes(slots: int, channels: int) -> int:
    """Bytes of one request's ring: ``slots x 2 (score, latent) x channels x 4 (FP32)``."""
    require_nonnegative_int(slots, "slots")
    require_positive_int(channels, "channels")
    return slots * SCORE_LATENT * channels * FP32_BYTES


@dataclass(frozen=True)
class Ring:
    """One request's compression ring (build it with ``new_ring``).

    size: slots ``S``; discipline: how decode steps order writes and reads.
    qmax, rollback, strict: in strict mode the ring is at least ``min_safe_ring_size(...)`` and steps of more
    than ``qmax`` positions, or partial acceptance without ``rollback``, are refused.
    end: positions accepted so far; slots: the inputs last written to each slot (None: never written).
    """

    layer: CompressedLayer
    size: int
    discipline: str
    qmax: int | None
    rollback: bool
    strict: bool
    end: int
    slots: tuple[Position | None, ...]


def new_ring(
    layer: CompressedLayer,
    size: int,
    discipline: str,
    *,
    qmax: int | None = None,
    rollback: bool = False,
    strict: bool = False,
) -> Ring:
    """An empty ring of ``size`` slots. ``strict`` needs ``qmax`` and refuses a size below the safe minimum."""
    if not isinstance(layer, CompressedLayer):
        raise TypeError(f"layer: must be a CompressedLayer, got {type(layer).__name__}")
    require_positive_int(size, "size")
    _require_discipline(discipline)
    _require_bool(rollback, "rollback")
    _require_bool(strict, "strict")
    if qmax is not None:
        require_positive_int(qmax, "qmax")
    if strict:
        require(qmax is not None, "qmax", "strict mode needs the largest step size qmax")
        assert qmax is not None
        safe = min_safe_ring_size(layer.ratio, layer.overlap, qmax, discipline, rollback)
        require(
            size >= safe,
            "size",
            f"a {discipline} ring for ratio {layer.ratio}{' with overlap' if layer.overlap else ''}, qmax {qmax}"
            f"{' and rollback' if rollback else ''} needs at least {safe} slots, got {size}",
        )
    return Ring(layer, size, discipline, qmax, rollback, strict, 0, (None,) * size)


@dataclass(frozen=True)
class RingResult:
    """rows: completed (and accepted) rows; reserved: output rows; ring: the ring after the step;
    ring_reads: positions whose inputs were read from ring slots, ascending."""

    rows: tuple[CompletedRow, ...]
    reserved: tuple[OutputRow, ...]
    ring: Ring
    ring_reads: tuple[int, ...]


def _written(ring: Ring, start: int, new: Sequence[Position]) -> tuple[Position | None, ...]:
    slots = list(ring.slots)
    for i, inputs in enumerate(new):
        slots[(start + i) % ring.size] = inputs
    return tuple(slots)


def _compute(
    ring: Ring, start: int, new: Sequence[Position], weighting: Weighting, read_new_from_ring: bool
) -> tuple[list[CompletedRow], tuple[Position | None, ...], tuple[int, ...]]:
    """Rows completed by ``new`` and the slots after writing it, in the ring's order of reads and writes."""
    after = _written(ring, start, new)
    source = after if read_new_from_ring else ring.slots
    reads: set[int] = set()

    def inputs_at(p: int) -> Position:
        if p >= start and not read_new_from_ring:
            return new[p - start]
        reads.add(p)
        held = source[p % ring.size]
        if held is None:
            raise RuntimeError(f"position {p}: its ring slot was never written (end {ring.end})")
        return held

    r = ring.layer.ratio
    rows = [
        CompletedRow(index=j, position=j * r, values=compress_row(ring.layer, j, inputs_at, weighting))
        for j in range(start // r, (start + len(new)) // r)
    ]
    return rows, after, tuple(sorted(reads))


def _begin(ring: Ring, start: int, positions: Sequence[object], weighting: Weighting) -> tuple[Position, ...]:
    if not isinstance(ring, Ring):
        raise TypeError(f"ring: must be a Ring, got {type(ring).__name__}")
    require_int(start, "start")
    require(start == ring.end, "start", f"a step must start where the ring ends ({ring.end}), got {start}")
    new = normalize_positions(ring.layer, positions, weighting)
    require(len(new) > 0, "positions", "a step must hold at least one position")
    return new


def ring_prefill(ring: Ring, start: int, positions: Sequence[object], weighting: Weighting) -> RingResult:
    """Prefill chunk ``[start, start + n)`` through the ring: read old positions from it, then write all n.

    reserved: ``max(1, nc)`` rows (a placeholder when nothing completes).
    """
    new = _begin(ring, start, positions, weighting)
    rows, slots, reads = _compute(ring, start, new, weighting, read_new_from_ring=False)
    reserved = tuple(as_output(row) for row in rows) or (placeholder(ring.layer, weighting),)
    after = replace(ring, end=start + len(new), slots=slots)
    return RingResult(rows=tuple(rows), reserved=reserved, ring=after, ring_reads=reads)


def ring_step(
    ring: Ring, start: int, positions: Sequence[object], weighting: Weighting, accepted: int | None = None
) -> RingResult:
    """A decode / verify step of ``q`` positions under the ring's discipline; ``accepted`` of them are kept.

    reserved: one row per new position (zero, store row -1 where it completes no group), computed before
    acceptance is known. rows: the completed rows of accepted positions. The ring's end moves to
    ``start + accepted``; rejected positions' writes stay in their slots.
    """
    new = _begin(ring, start, positions, weighting)
    q = len(new)
    kept = q if accepted is None else require_int(accepted, "accepted")
    require(1 <= kept <= q, "accepted", f"must be between 1 and the step's {q} positions, got {kept}")
    if ring.strict:
        assert ring.qmax is not None
        require(q <= ring.qmax, "positions", f"a strict ring takes at most qmax = {ring.qmax} per step, got {q}")
        require(kept == q or ring.rollback, "accepted", f"a strict ring without rollback keeps all {q} positions")
    rows, slots, reads = _compute(ring, start, new, weighting, read_new_from_ring=ring.discipline == WRITE_THEN_READ)
    r = ring.layer.ratio
    by_end = {(row.index + 1) * r - 1: row for row in rows}
    reserved = tuple(
        as_output(by_end[p]) if p in by_end else placeholder(ring.layer, weighting) for p in range(start, start + q)
    )
    accepted_rows = tuple(row for row in rows if (row.index + 1) * r <= start + kept)
    after = replace(ring, end=start + kept, slots=slots)
    return RingResult(rows=accepted_rows, reserved=reserved, ring=after, ring_reads=reads)
