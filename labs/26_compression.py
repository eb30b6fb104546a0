"""Lab 26: a C2 layer's completed rows, chunk boundaries, pending state and the state ring.

Every printed value comes from ``reference/``. Seven positions with two latent channels each, positive rational
weights standing in for the exponentials. The lab compresses them in one shot, in the chunks [0,1), [1,4),
[4,7) and in all 64 ways to cut them into chunks; runs the six-position decode step (position 0 old, positions
1-6 new) through a write_then_read ring of the safe size and of one slot less; and prints the default state
payload. It exits 1 if any check fails. The same lines are written to results/26_compression.txt.
"""

from __future__ import annotations

import itertools
import pathlib
import sys
from collections.abc import Sequence

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from reference.compression import (  # noqa: E402
    CompressionState,
    Row,
    compress,
    prefill_chunk,
    state_after,
)
from reference.gated_mean import Weighting  # noqa: E402
from reference.layer import v41_layer  # noqa: E402
from reference.state import (  # noqa: E402
    FP32_BYTES,
    SCORE_LATENT,
    WRITE_THEN_READ,
    min_safe_ring_size,
    new_ring,
    ring_prefill,
    ring_step,
    state_payload_bytes,
)

RATIO = 2
LATENT_DIM = 2  # the lab's two channels
DEFAULT_LATENT_DIM = 512  # the model's latent dimension, for the payload line
WEIGHTING = Weighting.RATIONAL
# (weights, values) per position. Pair (0, 1) gives (6, 8); (2, 3) gives (8, 3); (4, 5) gives (3, 5). Position 6
# (weights (2, 1), values (9, 14)) stays pending; read in place of position 0 it turns pair (0, 1) into
# ((2 * 9 + 3 * 8) / 5, (1 * 14 + 1 * 2) / 2) = (42/5, 8).
POSITIONS = [
    ((1, 3), (0, 10)),
    ((3, 1), (8, 2)),
    ((1, 2), (6, 1)),
    ((2, 1), (9, 7)),
    ((1, 1), (0, 8)),
    ((3, 1), (4, 2)),
    ((2, 1), (9, 14)),
]
CHUNK_LENGTHS = (1, 3, 3)
OLD_POSITIONS = 1  # position 0 was written before the decode step
NEXTN = 5  # draft tokens per verify step; a step carries them and the sampled token
QMAX = NEXTN + 1
NUMBER_WORDS = ("Zero", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine", "Ten")
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth")

RESULTS = ROOT / "results" / "26_compression.txt"


def shown(row: Row) -> tuple[str, ...]:
    return tuple(str(value) for value in row)


def chunked(lengths: Sequence[int]) -> tuple[list[Row], list[tuple[int, int]], CompressionState, list[str]]:
    """Prefill POSITIONS in chunks of the given lengths: rows, (valid, reserved) per chunk, state, bounds."""
    layer = v41_layer(RATIO, LATENT_DIM)
    state = CompressionState()
    rows: list[Row] = []
    counts: list[tuple[int, int]] = []
    bounds: list[str] = []
    for length in lengths:
        start = state.end
        result = prefill_chunk(layer, state, start, POSITIONS[start : start + length], WEIGHTING)
        rows.extend(row.values for row in result.rows)
        counts.append((len(result.rows), len(result.reserved)))
        bounds.append(f"[{start},{start + length})")
        state = result.state
    return rows, counts, state, bounds


def compositions(n: int) -> list[list[int]]:
    """Every way to cut n positions into nonempty chunks: 2^(n - 1) lists of chunk lengths."""
    out = []
    for cuts in itertools.product((False, True), repeat=n - 1):
        lengths, current = [], 1
        for cut in cuts:
            if cut:
                lengths.append(current)
                current = 0
            current += 1
        out.append([*lengths, current])
    return out


def decode_through_ring(size: int) -> list[Row]:
    """Rows of the six-position decode step through a write_then_read ring of ``size`` slots."""
    layer = v41_layer(RATIO, LATENT_DIM)
    ring = ring_prefill(new_ring(layer, size, WRITE_THEN_READ), 0, POSITIONS[:OLD_POSITIONS], WEIGHTING).ring
    step = ring_step(ring, OLD_POSITIONS, POSITIONS[OLD_POSITIONS:], WEIGHTING)
    return [row.values for row in step.rows]


def run() -> tuple[list[str], list[str]]:
    """The printed lines and the failed checks."""
    layer = v41_layer(RATIO, LATENT_DIM)
    failures: list[str] = []
    one_shot = list(compress(layer, POSITIONS, WEIGHTING))
    final = state_after(layer, POSITIONS, WEIGHTING)

    rows, counts, state, bounds = chunked(CHUNK_LENGTHS)
    if rows != one_shot or state != final:
        failures.append(f"chunks {CHUNK_LENGTHS} differ from one-shot compression")
    pending = list(range(state.end - len(state.pending), state.end))

    agreeing = 0
    for lengths in compositions(len(POSITIONS)):
        rows_p, _, state_p, _ = chunked(lengths)
        if rows_p == one_shot and state_p == final:
            agreeing += 1
        else:
            failures.append(f"chunk lengths {lengths} differ from one-shot compression")

    step = len(POSITIONS) - OLD_POSITIONS
    if step != QMAX:
        failures.append(f"the decode step has {step} positions, not qmax = {QMAX}")
    safe = min_safe_ring_size(RATIO, layer.overlap, QMAX, WRITE_THEN_READ, rollback=True)
    if decode_through_ring(safe) != one_shot:
        failures.append(f"ring {safe} does not preserve every completed pair")
    undersized = decode_through_ring(safe - 1)
    corrupted = [j for j, (got, want) in enumerate(zip(undersized, one_shot, strict=True)) if got != want]
    if not corrupted:
        failures.append(f"ring {safe - 1} did not corrupt any pair")
        corrupted = [0]
    first = corrupted[0]

    payload = state_payload_bytes(safe, DEFAULT_LATENT_DIM)
    if payload != safe * SCORE_LATENT * DEFAULT_LATENT_DIM * FP32_BYTES:
        failures.append("state payload is not slots x 2 x dim x 4")

    lines = [
        f"C{RATIO} rows (before BF16/norm/RoPE): {[shown(row) for row in one_shot]}",
        f"Chunks {', '.join(bounds)}: valid/reserved rows {counts}",
        f"Pending token positions: {pending}",
        f"{NUMBER_WORDS[step]}-position decode: ring {safe} preserves every completed pair",
        f"Ring {safe - 1} corrupts {ORDINALS[first]} pair: {shown(undersized[first])}",
        f"Checks: {agreeing} chunk partitions agree exactly; undersized ring fails",
        f"Default C{RATIO} state payload: {safe} * {SCORE_LATENT} * {DEFAULT_LATENT_DIM} * {FP32_BYTES} "
        f"= {payload} bytes",
    ]
    return lines, failures


def main() -> int:
    lines, failures = run()
    for failure in failures:
        print(f"check failed: {failure}", file=sys.stderr)
    if failures:
        return 1
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
