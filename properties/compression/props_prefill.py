"""compression_prefill against the exact reference: chunk-partition invariance, ring contents and fresh
requests (docs/compression-properties.md names which mutant each one kills)."""

from __future__ import annotations

from functools import partial
from typing import Any

from properties.compression.call import PREFILL
from properties.compression.checks import (
    HUNT_EXAMPLES,
    HUNT_EXAMPLES_QUICK,
    Entry,
    Expected,
    call,
    check_reserved,
    check_ring,
    check_untouched,
    new_state,
    pack,
    ring_size,
)
from properties.compression.exact import exact_rows, window
from properties.compression.frozen import (
    PREFILL_CANCELLATION,
    PREFILL_SMALL_WEIGHT,
)
from properties.compression.strategies import (
    fresh_prefill_batches,
    prefill_batches,
)
from properties.registry import Implementation
from properties.runner import Property


def _prefill_schedule(ex: dict[str, Any]) -> list[list[tuple[int, int, int]]]:
    """Calls as lists of (request, chunk start, chunk end); request b's chunk i goes to call delay_b + i."""
    calls: dict[int, list[tuple[int, int, int]]] = {}
    for b, request in enumerate(ex["requests"]):
        cuts = request["cuts"]
        for i in range(len(cuts) - 1):
            calls.setdefault(request["delay"] + i, []).append((b, cuts[i], cuts[i + 1]))
    return [calls[c] for c in sorted(calls)]


def replay_prefill(impl: Implementation, ex: dict[str, Any], *, rows: bool, ring: bool) -> None:
    spec = ex["layer"]
    r, w = int(spec["ratio"]), window(spec)
    size = ring_size(PREFILL, impl, spec, 1, ex["ring_extra"])
    state = new_state(spec, ex["slots"], size, ex["fill"], impl.device)
    requests = ex["requests"]
    exact = [exact_rows(spec, q["positions"]) for q in requests] if rows else []
    for number, chunks in enumerate(_prefill_schedule(ex)):
        what = f"call {number}"
        entries = [Entry(requests[b]["slot"], s, requests[b]["positions"][s:e]) for b, s, e in chunks]
        before = state.clone()
        got_rows, got_store = call(impl, *pack(spec, entries, state, impl.device))
        if rows:
            expected: list[Expected] = []
            for b, s, e in chunks:
                seq = requests[b]["positions"]
                done = [Expected(j, exact[b][j], seq, j) for j in range(s // r, e // r)]
                expected += done or [Expected(-1)]
            check_reserved(spec, got_rows, got_store, expected, what)
        if ring:
            state_now = state.cpu()
            for b, _, e in chunks:
                seq = requests[b]["positions"]
                check_ring(state_now, requests[b]["slot"], seq, range(max(0, e - w + 1), e), what)
            check_untouched(before.cpu(), state_now, [requests[b]["slot"] for b, _, _ in chunks], what)


PROPERTIES = [
    Property(
        "compression_prefill_partition_invariance",
        PREFILL,
        prefill_batches(),
        partial(replay_prefill, rows=True, ring=False),
        doc="Several requests of different lengths, each cut into chunks at any points, packed into calls: "
        "the completed rows equal one-shot compression, store rows are j (-1 for a placeholder), each "
        "request reserves max(1, nc) rows and a placeholder is a zero row. Every ratio, overlap and APE.",
        examples=(PREFILL_CANCELLATION, PREFILL_SMALL_WEIGHT),
        hunt_examples=HUNT_EXAMPLES,
    ),
    Property(
        "compression_prefill_ring_contents",
        PREFILL,
        prefill_batches(),
        partial(replay_prefill, rows=False, ring=True),
        doc="After every call each request's ring holds its newest W - 1 positions (raw score, latent) at "
        "p % S, bit for bit, and state slots of no request in the call are untouched.",
        hunt_examples=HUNT_EXAMPLES_QUICK,
    ),
    Property(
        "compression_prefill_fresh_request",
        PREFILL,
        fresh_prefill_batches(),
        partial(replay_prefill, rows=True, ring=False),
        doc="A request starting at position 0 in a ring full of an earlier request's leftovers (and garbage) "
        "reads none of it: its rows equal one-shot compression.",
        hunt_examples=HUNT_EXAMPLES,
    ),
]
