"""The two code paths of the V4 Compressor (seed 001), exactly: prefill from position 0 and one-token decode.

State: ``kv_state`` and ``score_state``, each ``[coff * r][coff * d]``. Scores are stored with APE already
applied; an unwritten score slot holds ``weighting.absent`` (-oo, or weight 0) and an unwritten kv slot 0.
Without overlap slot ``i`` holds the position at offset ``i`` of the current group. With overlap the first ``r``
slots hold the previous window and the last ``r`` the current one; a completed row reduces the first ``d``
channels of the previous window and the last ``d`` of the current one (the overlap transform), then the current
window rolls into the previous one. Both paths equal ``reference.compression.compress`` (tests/test_v4_paths.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reference.checks import require, require_int
from reference.compression import Row, normalize_positions
from reference.gated_mean import Scalar, Value, Weighting, gated_mean
from reference.layer import CompressedLayer

Slot = tuple[Scalar, ...]


@dataclass(frozen=True)
class V4State:
    """end: positions consumed; kv, score: ``[coff * r][coff * d]`` (scores with APE applied)."""

    end: int
    kv: tuple[Slot, ...]
    score: tuple[Slot, ...]


def v4_initial_state(layer: CompressedLayer, weighting: Weighting) -> V4State:
    """kv zeros, scores absent (the ``torch.full(..., -inf)`` of the seed)."""
    rows = layer.coff * layer.ratio
    return V4State(
        end=0,
        kv=((weighting.zero,) * layer.channels,) * rows,
        score=((weighting.absent,) * layer.channels,) * rows,
    )


def _with_ape(layer: CompressedLayer, p: int, scores: Slot, weighting: Weighting) -> Slot:
    """``score + ape[p % r]`` over all projected channels."""
    if layer.ape is None:
        return scores
    return tuple(
        weighting.with_ape(s, weighting.ape(layer.ape_at(p, c), f"ape[{p % layer.ratio}][{c}]"))
        for c, s in enumerate(scores)
    )


def _reduce(entries: Sequence[tuple[Slot, Slot, int]], layer: CompressedLayer, weighting: Weighting) -> Row:
    """Per latent channel, the gated mean over entries ``(score_slot, kv_slot, channel offset)``."""
    return tuple(
        gated_mean([s[base + c] for s, _, base in entries], [v[base + c] for _, v, base in entries], weighting)
        for c in range(layer.dim)
    )


def v4_prefill(
    layer: CompressedLayer, positions: Sequence[object], weighting: Weighting, buffers: V4State | None = None
) -> tuple[tuple[Row, ...], V4State]:
    """``Compressor.forward`` with ``start_pos == 0``: the rows of every complete group and the state.

    ``buffers``: the ``kv_state`` / ``score_state`` the prefill writes into. The seed writes them in place and
    never clears them, so a new request finds what the previous one left; ``None`` (the default, and what the
    contract assumes: docs/compression.md, "A new request starts fresh") is a fresh state. Only the slots the
    seed writes are replaced: with overlap and a prompt shorter than ``r`` the previous window keeps the
    previous request's last window, and its first row then mixes that request in (tests/test_v4_paths.py).
    """
    inputs = normalize_positions(layer, positions, weighting)
    require(len(inputs) > 0, "positions", "a prefill holds at least one position")
    r, d, n = layer.ratio, layer.dim, len(inputs)
    cutoff = n - n % r
    fresh = v4_initial_state(layer, weighting)
    state = fresh if buffers is None else _check_buffers(layer, buffers)
    kv, score = list(state.kv), list(state.score)
    scored = [_with_ape(layer, p, s, weighting) for p, (s, _) in enumerate(inputs)]
    if layer.overlap and cutoff >= r:
        for i, p in enumerate(range(cutoff - r, cutoff)):
            kv[i], score[i] = inputs[p][1], scored[p]
    offset = r if layer.overlap else 0
    for i, p in enumerate(range(cutoff, n)):
        kv[offset + i], score[offset + i] = inputs[p][1], scored[p]
    rows = []
    empty = (fresh.score[0], fresh.kv[0], 0)
    for g in range(cutoff // r):
        own = [(scored[p], inputs[p][1], d if layer.overlap else 0) for p in range(g * r, (g + 1) * r)]
        if layer.overlap:
            previous = [(scored[p], inputs[p][1], 0) for p in range((g - 1) * r, g * r)] if g else [empty] * r
            own = previous + own
        rows.append(_reduce(own, layer, weighting))
    return tuple(rows), V4State(end=n, kv=tuple(kv), score=tuple(score))


def _check_buffers(layer: CompressedLayer, buffers: V4State) -> V4State:
    if not isinstance(buffers, V4State):
        raise TypeError(f"buffers: must be a V4State, got {type(buffers).__name__}")
    rows = layer.coff * layer.ratio
    for name, slots in (("kv", buffers.kv), ("score", buffers.score)):
        require(len(slots) == rows, f"buffers.{name}", f"must have coff * ratio = {rows} slots, got {len(slots)}")
        for i, slot in enumerate(slots):
            require(len(slot) == layer.channels, f"buffers.{name}[{i}]", f"must have {layer.channels} channels")
    return buffers


def v4_decode(
    layer: CompressedLayer, state: V4State, start_pos: int, position: object, weighting: Weighting
) -> tuple[Row | None, V4State]:
    """``Compressor.forward`` with ``start_pos > 0`` and one token: the completed row (None if the group is
    still open) and the state after it."""
    require_int(start_pos, "start_pos")
    require(start_pos > 0, "start_pos", "the decode path runs at start_pos > 0 (position 0 is prefill)")
    require(start_pos == state.end, "start_pos", f"must be where the state ends ({state.end}), got {start_pos}")
    (inputs,) = normalize_positions(layer, [position], weighting, "position")
    r, d = layer.ratio, layer.dim
    latent: Slot = inputs[1]
    scored = _with_ape(layer, start_pos, inputs[0], weighting)
    complete = (start_pos + 1) % r == 0
    kv, score = list(state.kv), list(state.score)
    row: tuple[Value, ...] | None = None
    if layer.overlap:
        kv[r + start_pos % r], score[r + start_pos % r] = latent, scored
        if complete:
            pool = [(score[i], kv[i], 0) for i in range(r)] + [(score[r + i], kv[r + i], d) for i in range(r)]
            row = _reduce(pool, layer, weighting)
            kv[:r], score[:r] = kv[r:], score[r:]
    else:
        kv[start_pos % r], score[start_pos % r] = latent, scored
        if complete:
            row = _reduce([(score[i], kv[i], 0) for i in range(r)], layer, weighting)
    return row, V4State(end=start_pos + 1, kv=tuple(kv), score=tuple(score))
