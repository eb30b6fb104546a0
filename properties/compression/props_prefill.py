"""compression_prefill against the exact reference: chunk-partition invariance, ring contents and fresh
requests (docs/compression-properties.md names which mutant each one kills)."""

from __future__ import annotations

from typing import Any

from properties.compression import checks
from properties.compression.call import PREFILL
from properties.compression.exact import exact_rows, window
from properties.compression.frozen import PREFILL_CANCELLATION, PREFILL_SMALL_WEIGHT
from properties.compression.strategies import fresh_prefill_batches, prefill_batches
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
    size = checks.ring_size(PREFILL, impl, spec, 1, ex["ring_extra"])
    state = checks.new_state(spec, ex["slots"], size, ex["fill"], impl.device)
    requests = ex["requests"]
    exact = [exact_rows(spec, q["positions"]) for q in requests] if rows else []
    for number, chunks in enumerate(_prefill_schedule(ex)):
        what = f"call {number}"
        entries = [checks.Entry(requests[b]["slot"], s, requests[b]["positions"][s:e]) for b, s, e in chunks]
        before = state.clone()
        got = checks.call(impl, *checks.pack(spec, entries, state, impl.device))
        if rows:
            expected: list[checks.Expected] = []
            for b, s, e in chunks:
                seq = requests[b]["positions"]
                done = [checks.Expected(j, exact[b][j], seq, j) for j in range(s // r, e // r)]
                expected += done or [checks.Expected(-1)]
            checks.check_reserved(spec, got, expected, what)
        if ring:
            slots, sequences = [q["slot"] for q in requests], [q["positions"] for q in requests]
            newest = lambda s, e: range(max(0, e - w + 1), e)  # noqa: E731
            checks.check_rings_after(state, before, slots, chunks, sequences, newest, what)


DOCS = {
    "partition_invariance": (
        "Several requests of different lengths, each cut into chunks at any points, packed into calls: "
        "the completed rows equal one-shot compression, store rows are j (-1 for a placeholder), each "
        "request reserves max(1, nc) rows and a placeholder is a zero row. Every ratio, overlap and APE."
    ),
    "ring_contents": (
        "After every call each request's ring holds its newest W - 1 positions (raw score, latent) at "
        "p % S, bit for bit, and state slots of no request in the call are untouched."
    ),
    "fresh_request": (
        "A request starting at position 0 in a ring full of an earlier request's leftovers (and garbage) "
        "reads none of it: its rows equal one-shot compression."
    ),
}


def _replay(name: str, strategy: Any, **compared: Any) -> Property:
    return checks.replay_property(
        f"compression_prefill_{name}", PREFILL, strategy, replay_prefill, DOCS[name], **compared
    )


PROPERTIES = [
    _replay(
        "partition_invariance", prefill_batches(), rows=True, examples=(PREFILL_CANCELLATION, PREFILL_SMALL_WEIGHT)
    ),
    _replay("ring_contents", prefill_batches(), ring=True),
    _replay("fresh_request", fresh_prefill_batches(), rows=True),
]
