"""compression_decode against the exact reference: equality with one-shot compression, ring contents and fresh
requests, under each ring discipline (docs/compression-properties.md)."""

from __future__ import annotations

from typing import Any

from properties.compression import checks
from properties.compression.call import DECODE
from properties.compression.exact import LayerSpec, RawPosition, channels, exact_rows, window
from properties.compression.frozen import DECODE_FRESH_REORDER, DECODE_LONG_SUM
from properties.compression.strategies import decode_batches, fresh_decode_batches
from properties.registry import Implementation
from properties.runner import Property


def _zero(spec: LayerSpec) -> RawPosition:
    c = channels(spec)
    return [[0.0] * c, [0.0] * c]


def _decode_schedule(ex: dict[str, Any]) -> list[list[tuple[int, int, int]]]:
    """Calls as lists of (request, step start, step end)."""
    calls: dict[int, list[tuple[int, int, int]]] = {}
    for b, request in enumerate(ex["requests"]):
        s = request["start"]
        for i, q in enumerate(request["steps"]):
            calls.setdefault(request["delay"] + i, []).append((b, s, s + q))
            s += q
    return [calls[c] for c in sorted(calls)]


def _needed_after_step(start: int, end: int, w: int, size: int) -> range:
    """Positions some acceptance of the step ``[start, end)`` lets the next step read, among those a ring of
    ``size`` still holds: ``[start - W + 2, end - 1]`` from ``end - S`` on (none when ``W = 1``)."""
    if w == 1:
        return range(0)
    return range(max(0, start - w + 2, end - size), end)


def replay_decode(impl: Implementation, ex: dict[str, Any], *, rows: bool, ring: bool) -> None:
    spec = ex["layer"]
    r, w = int(spec["ratio"]), window(spec)
    requests = ex["requests"]
    qmax = max(q for request in requests for q in request["steps"])
    size = checks.ring_size(DECODE, impl, spec, qmax, ex["ring_extra"])
    state = checks.new_state(spec, ex["slots"], size, ex["fill"], impl.device)
    sequences = [[_zero(spec)] * q["first"] + list(q["positions"]) for q in requests]
    for q, seq in zip(requests, sequences, strict=True):
        if size:
            history = range(max(q["first"], q["start"] - size), q["start"])
            checks.write_positions(state, q["slot"], {p: seq[p] for p in history})
    exact = []
    if rows:
        for q, seq in zip(requests, sequences, strict=True):
            groups = [(p + 1) // r - 1 for p in range(q["start"], len(seq)) if (p + 1) % r == 0]
            exact.append(exact_rows(spec, seq, groups))
    for number, steps in enumerate(_decode_schedule(ex)):
        what = f"call {number}"
        entries = [checks.Entry(requests[b]["slot"], s, sequences[b][s:e]) for b, s, e in steps]
        before = state.clone()
        got = checks.call(impl, *checks.pack(spec, entries, state, impl.device))
        if rows:
            expected = [
                checks.Expected(j, exact[b][j], sequences[b], j) if (p + 1) % r == 0 else checks.Expected(-1)
                for b, s, e in steps
                for p in range(s, e)
                for j in [(p + 1) // r - 1]
            ]
            checks.check_reserved(spec, got, expected, what)
        if ring:
            needed = lambda s, e: _needed_after_step(s, e, w, size)  # noqa: E731
            checks.check_rings_after(state, before, [q["slot"] for q in requests], steps, sequences, needed, what)


DOCS = {
    "equals_one_shot": (
        "Decode / verify steps of 1..qmax positions per request, several requests from different starts "
        "in one call, the ring at the safe size of the declared discipline: each new position gets one "
        "row, the one-shot row j where it completes group j, else a zero row with store row -1."
    ),
    "ring_contents": (
        "After every step the ring holds, bit for bit, every position that a later step may read after "
        "any acceptance (start - W + 2 .. end - 1) and that the ring can still hold (from end - S on); "
        "state slots of no request in the call are untouched."
    ),
    "fresh_request": "Decode from position 0 over a ring of leftovers and garbage: rows equal one-shot compression.",
}


def _replay(name: str, strategy: Any, **compared: Any) -> Property:
    return checks.replay_property(f"compression_decode_{name}", DECODE, strategy, replay_decode, DOCS[name], **compared)


PROPERTIES = [
    _replay("equals_one_shot", decode_batches(), rows=True, examples=(DECODE_LONG_SUM,)),
    _replay("ring_contents", decode_batches(), ring=True),
    _replay("fresh_request", fresh_decode_batches(), rows=True, examples=(DECODE_FRESH_REORDER,)),
]
