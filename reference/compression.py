"""One-shot and chunked compression of a sequence, exactly (docs/compression.md).

A position's input is a pair ``(scores, latents)`` of ``layer.channels`` entries each (raw scores, before APE).
Row ``j`` is, per latent channel ``c``, the gated mean over its window: positions ``[j r, (j + 1) r)`` read at
channel ``c`` without overlap; with overlap, positions ``[(j - 1) r, j r)`` at channel ``c`` (absent for
``j = 0``) followed by positions ``[j r, (j + 1) r)`` at channel ``d + c``. APE is applied by each position's
offset within its own group. Row ``j`` is complete once position ``(j + 1) r - 1`` is present.

A chunk ``[s, e)`` completes ``nc = e // r - s // r`` rows. Prefill reserves ``max(1, nc)`` output rows per
request (a placeholder: position 0, store row -1, zero values); decode reserves one output row per new position
(zero and store row -1 where the position does not complete a group). Completed row ``j`` has RoPE position
``j r``. The state handed on holds the pending inputs ``[g, e)`` with ``g = e - e % r`` and, with overlap, the
previous window ``[g - r, g)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from reference.checks import require, require_int, require_length, require_nonnegative_int
from reference.gated_mean import Scalar, Value, Weighting, gated_mean
from reference.layer import CompressedLayer

Position = tuple[tuple[Scalar, ...], tuple[Scalar, ...]]
"""One position's input: ``(scores, latents)``, ``layer.channels`` entries each."""
Row = tuple[Value, ...]
"""One compressed row: ``layer.dim`` exact values."""
InputsAt = Callable[[int], Position]
"""Where a row computation reads the input of an absolute position from."""


def normalize_positions(
    layer: CompressedLayer, positions: Sequence[object], weighting: Weighting, argument: str = "positions"
) -> tuple[Position, ...]:
    """Check every position's shape and entries; return them as tuples of normalized exact numbers."""
    if isinstance(positions, str | bytes) or not isinstance(positions, Sequence):
        raise TypeError(f"{argument}: must be a sequence of (scores, latents) pairs, got {type(positions).__name__}")
    out = []
    for i, position in enumerate(positions):
        name = f"{argument}[{i}]"
        if not isinstance(position, Sequence) or isinstance(position, str | bytes):
            raise TypeError(f"{name}: must be a (scores, latents) pair, got {type(position).__name__}")
        require_length(position, 2, name, "a (scores, latents) pair")
        scores, latents = position
        for part, what in ((scores, "scores"), (latents, "latents")):
            if not isinstance(part, Sequence) or isinstance(part, str | bytes):
                raise TypeError(f"{name}.{what}: must be a sequence, got {type(part).__name__}")
            require_length(part, layer.channels, f"{name}.{what}", "layer.channels = coff * dim")
        out.append(
            (
                tuple(weighting.score(s, f"{name}.scores[{c}]") for c, s in enumerate(scores)),
                tuple(weighting.latent(v, f"{name}.latents[{c}]") for c, v in enumerate(latents)),
            )
        )
    return tuple(out)


@lru_cache(maxsize=64)
def _ape(layer: CompressedLayer, weighting: Weighting) -> tuple[tuple[Scalar, ...], ...] | None:
    if layer.ape is None:
        return None
    return tuple(
        tuple(weighting.ape(a, f"ape[{i}][{c}]") for c, a in enumerate(row)) for i, row in enumerate(layer.ape)
    )


def row_window(layer: CompressedLayer, index: int) -> range:
    """The positions row ``index`` reads: ``[(index + 1) r - W, (index + 1) r)`` clipped at 0."""
    require_nonnegative_int(index, "index")
    end = (index + 1) * layer.ratio
    return range(max(0, end - layer.window), end)


def compress_row(layer: CompressedLayer, index: int, inputs_at: InputsAt, weighting: Weighting) -> Row:
    """Row ``index`` from the inputs ``inputs_at(p)`` of the positions in its window (in position order)."""
    ape = _ape(layer, weighting)
    group_start = index * layer.ratio
    window = [(p, inputs_at(p)) for p in row_window(layer, index)]
    row = []
    for c in range(layer.dim):
        scores, values = [], []
        for p, (score, latent) in window:
            channel = layer.dim + c if layer.overlap and p >= group_start else c
            offset_ape = None if ape is None else ape[p % layer.ratio][channel]
            scores.append(weighting.with_ape(score[channel], offset_ape))
            values.append(latent[channel])
        row.append(gated_mean(scores, values, weighting))
    return tuple(row)


def compress(layer: CompressedLayer, positions: Sequence[object], weighting: Weighting) -> tuple[Row, ...]:
    """One-shot compression: every complete row of the sequence, ``len(positions) // r`` of them."""
    inputs = normalize_positions(layer, positions, weighting)
    return tuple(compress_row(layer, j, inputs.__getitem__, weighting) for j in range(len(inputs) // layer.ratio))


@dataclass(frozen=True)
class CompletedRow:
    """A completed compressed row: its index ``j``, RoPE position ``j r`` and values."""

    index: int
    position: int
    values: Row


@dataclass(frozen=True)
class OutputRow:
    """One reserved output row: RoPE position, store row (the compressed row index, -1: not stored), values."""

    position: int
    store_row: int
    values: Row


def placeholder(layer: CompressedLayer, weighting: Weighting) -> OutputRow:
    """The row reserved where nothing completes: position 0, store row -1, zero values."""
    return OutputRow(position=0, store_row=-1, values=(weighting.zero,) * layer.dim)


def as_output(row: CompletedRow) -> OutputRow:
    """The reserved output row of a completed row: position ``j r``, store row ``j``."""
    return OutputRow(position=row.position, store_row=row.index, values=row.values)


@dataclass(frozen=True)
class CompressionState:
    """What a request hands from one chunk to the next.

    end: positions consumed so far (the next chunk must start here).
    pending: inputs of positions ``[g, end)``, ``g = end - end % r``: the incomplete group.
    previous: with overlap and ``g >= r``, inputs of positions ``[g - r, g)``; else empty.
    """

    end: int = 0
    pending: tuple[Position, ...] = ()
    previous: tuple[Position, ...] = ()


def check_state(layer: CompressedLayer, state: CompressionState) -> None:
    """Raise ValueError naming ``state`` unless its buffers have the lengths its ``end`` implies."""
    if not isinstance(state, CompressionState):
        raise TypeError(f"state: must be a CompressionState, got {type(state).__name__}")
    end = require_nonnegative_int(state.end, "state.end")
    require_length(state.pending, end % layer.ratio, "state.pending", "end % ratio inputs of the incomplete group")
    group_start = end - end % layer.ratio
    previous = layer.ratio if layer.overlap and group_start >= layer.ratio else 0
    require_length(state.previous, previous, "state.previous", "the previous window (overlap, end >= ratio)")


def state_inputs(layer: CompressedLayer, state: CompressionState) -> dict[int, Position]:
    """The inputs a state holds, by absolute position."""
    group_start = state.end - state.end % layer.ratio
    held = {group_start + i: x for i, x in enumerate(state.pending)}
    held.update({group_start - len(state.previous) + i: x for i, x in enumerate(state.previous)})
    return held


def handed_on(layer: CompressedLayer, end: int, inputs_at: InputsAt) -> CompressionState:
    """The state after ``end`` positions, reading the inputs it keeps through ``inputs_at``."""
    group_start = end - end % layer.ratio
    previous_start = group_start - layer.ratio if layer.overlap and group_start >= layer.ratio else group_start
    return CompressionState(
        end=end,
        pending=tuple(inputs_at(p) for p in range(group_start, end)),
        previous=tuple(inputs_at(p) for p in range(previous_start, group_start)),
    )


def state_after(layer: CompressedLayer, positions: Sequence[object], weighting: Weighting) -> CompressionState:
    """The state after consuming a whole sequence from position 0."""
    inputs = normalize_positions(layer, positions, weighting)
    return handed_on(layer, len(inputs), inputs.__getitem__)


def completed_count(ratio: int, start: int, end: int) -> int:
    """``nc = end // r - start // r``: rows completed by the chunk ``[start, end)``."""
    return end // ratio - start // ratio


def _reader(layer: CompressedLayer, state: CompressionState, start: int, new: Sequence[Position]) -> InputsAt:
    held = state_inputs(layer, state)

    def inputs_at(p: int) -> Position:
        return new[p - start] if p >= start else held[p]

    return inputs_at


def _begin(
    layer: CompressedLayer, state: CompressionState, start: int, positions: Sequence[object], weighting: Weighting
) -> tuple[tuple[Position, ...], InputsAt]:
    check_state(layer, state)
    require_int(start, "start")
    require(start == state.end, "start", f"a chunk must start where the state ends ({state.end}), got {start}")
    new = normalize_positions(layer, positions, weighting)
    require(len(new) > 0, "positions", "a chunk or step must hold at least one position")
    return new, _reader(layer, state, start, new)


def _rows(
    layer: CompressedLayer, start: int, end: int, inputs_at: InputsAt, weighting: Weighting
) -> list[CompletedRow]:
    r = layer.ratio
    return [
        CompletedRow(index=j, position=j * r, values=compress_row(layer, j, inputs_at, weighting))
        for j in range(start // r, end // r)
    ]


@dataclass(frozen=True)
class ChunkResult:
    """Rows completed (and accepted), the reserved output rows, and the state handed on."""

    rows: tuple[CompletedRow, ...]
    reserved: tuple[OutputRow, ...]
    state: CompressionState


def prefill_chunk(
    layer: CompressedLayer, state: CompressionState, start: int, positions: Sequence[object], weighting: Weighting
) -> ChunkResult:
    """Prefill the chunk ``[start, start + len(positions))`` from ``state`` (``start`` must equal ``state.end``)."""
    new, inputs_at = _begin(layer, state, start, positions, weighting)
    end = start + len(new)
    rows = _rows(layer, start, end, inputs_at, weighting)
    reserved = tuple(as_output(row) for row in rows) or (placeholder(layer, weighting),)
    return ChunkResult(rows=tuple(rows), reserved=reserved, state=handed_on(layer, end, inputs_at))


def decode_step(
    layer: CompressedLayer,
    state: CompressionState,
    start: int,
    positions: Sequence[object],
    weighting: Weighting,
    accepted: int | None = None,
) -> ChunkResult:
    """A decode / verify step of ``q = len(positions)`` new positions from ``state``.

    reserved: one output row per new position, the row it completes or zero with store row -1 (computed for
    all ``q``, as a kernel does before acceptance is known). accepted: how many of the new positions are kept
    (``1 <= accepted <= q``, default all); rows and the state handed on cover only those.
    """
    new, inputs_at = _begin(layer, state, start, positions, weighting)
    q = len(new)
    kept = q if accepted is None else require_int(accepted, "accepted")
    require(1 <= kept <= q, "accepted", f"must be between 1 and the step's {q} positions, got {kept}")
    rows = _rows(layer, start, start + q, inputs_at, weighting)
    by_end = {(row.index + 1) * layer.ratio - 1: row for row in rows}
    reserved = tuple(
        as_output(by_end[p]) if p in by_end else placeholder(layer, weighting) for p in range(start, start + q)
    )
    accepted_rows = tuple(row for row in rows if (row.index + 1) * layer.ratio <= start + kept)
    return ChunkResult(rows=accepted_rows, reserved=reserved, state=handed_on(layer, start + kept, inputs_at))


@dataclass(frozen=True)
class BatchResult:
    """Several requests prefilled together.

    results: per request, what ``prefill_chunk`` returns for it alone.
    reserved: every request's reserved rows, request after request (``sum_b max(1, nc_b)`` rows).
    row_offsets: request ``b`` owns ``reserved[row_offsets[b]:row_offsets[b + 1]]``.
    """

    results: tuple[ChunkResult, ...]
    reserved: tuple[OutputRow, ...]
    row_offsets: tuple[int, ...]


def prefill_batch(
    layer: CompressedLayer,
    states: Sequence[CompressionState],
    starts: Sequence[int],
    chunks: Sequence[Sequence[object]],
    weighting: Weighting,
) -> BatchResult:
    """Prefill several requests' chunks as one packed token stream (a second formulation of ``prefill_chunk``).

    Tokens are packed request after request (``cu_seqlens``); each token that completes a group emits its row,
    reading earlier positions of its own request from the packed stream or from that request's state.
    """
    require(len(starts) == len(states), "starts", f"must have one entry per state ({len(states)}), got {len(starts)}")
    require(len(chunks) == len(states), "chunks", f"must have one entry per state ({len(states)}), got {len(chunks)}")
    packed: list[Position] = []
    cu_seqlens = [0]
    for b, (state, start, chunk) in enumerate(zip(states, starts, chunks, strict=True)):
        check_state(layer, state)
        require_int(start, f"starts[{b}]")
        require(start == state.end, f"starts[{b}]", f"must equal request {b}'s state end {state.end}, got {start}")
        new = normalize_positions(layer, chunk, weighting, f"chunks[{b}]")
        require(len(new) > 0, f"chunks[{b}]", "a prefill chunk must hold at least one position")
        packed.extend(new)
        cu_seqlens.append(len(packed))

    def reader(b: int) -> InputsAt:
        held = state_inputs(layer, states[b])
        return lambda p: packed[cu_seqlens[b] + p - starts[b]] if p >= starts[b] else held[p]

    readers = [reader(b) for b in range(len(states))]

    emitted: list[list[CompletedRow]] = [[] for _ in states]
    b = 0
    for token in range(len(packed)):
        while token >= cu_seqlens[b + 1]:
            b += 1
        p = starts[b] + token - cu_seqlens[b]
        if p % layer.ratio == layer.ratio - 1:
            j = p // layer.ratio
            values = compress_row(layer, j, readers[b], weighting)
            emitted[b].append(CompletedRow(index=j, position=j * layer.ratio, values=values))
    results: list[ChunkResult] = []
    reserved: list[OutputRow] = []
    offsets = [0]
    for b, rows in enumerate(emitted):
        own = tuple(as_output(row) for row in rows) or (placeholder(layer, weighting),)
        end = starts[b] + cu_seqlens[b + 1] - cu_seqlens[b]
        results.append(ChunkResult(rows=tuple(rows), reserved=own, state=handed_on(layer, end, readers[b])))
        reserved.extend(own)
        offsets.append(len(reserved))
    return BatchResult(results=tuple(results), reserved=tuple(reserved), row_offsets=tuple(offsets))
