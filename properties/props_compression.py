"""Compression properties: every implementation of compression_prefill and compression_decode against the
exact reference (docs/compression-properties.md names which mutant each one kills).

An example is plain data from ``properties.strategies_compression``; a check builds the tensors on the
implementation's device, replays the example's calls through ``impl.fn`` and compares with the reference
(``properties.compression_checks``): the one-shot rows of each whole sequence, the ring contents that any
later step may read, and the state slots of other requests.
"""

from __future__ import annotations

from typing import Any

import torch

from properties.compression_call import DECODE, PREFILL
from properties.compression_checks import (
    Entry,
    Expected,
    call,
    check_reserved,
    check_ring,
    check_untouched,
    new_state,
    pack,
    ring_size,
    write_positions,
)
from properties.compression_exact import LayerSpec, RawPosition, channels, exact_rows, window
from properties.registry import Implementation
from properties.request_life import replay_life
from properties.runner import Property
from properties.strategies_compression import (
    bad_calls,
    decode_batches,
    fresh_decode_batches,
    fresh_prefill_batches,
    prefill_batches,
    request_lives,
)


def _zero(spec: LayerSpec) -> RawPosition:
    c = channels(spec)
    return [[0.0] * c, [0.0] * c]


# --- prefill ------------------------------------------------------------------------------------------------


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


def prefill_partition_invariance(impl: Implementation, ex: dict[str, Any]) -> None:
    replay_prefill(impl, ex, rows=True, ring=False)


def prefill_ring_contents(impl: Implementation, ex: dict[str, Any]) -> None:
    replay_prefill(impl, ex, rows=False, ring=True)


def prefill_fresh_request(impl: Implementation, ex: dict[str, Any]) -> None:
    replay_prefill(impl, ex, rows=True, ring=False)


# --- decode -------------------------------------------------------------------------------------------------


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
    size = ring_size(DECODE, impl, spec, qmax, ex["ring_extra"])
    state = new_state(spec, ex["slots"], size, ex["fill"], impl.device)
    sequences = [[_zero(spec)] * q["first"] + list(q["positions"]) for q in requests]
    for q, seq in zip(requests, sequences, strict=True):
        if size:
            history = range(max(q["first"], q["start"] - size), q["start"])
            write_positions(state, q["slot"], {p: seq[p] for p in history})
    exact = []
    if rows:
        for q, seq in zip(requests, sequences, strict=True):
            groups = [(p + 1) // r - 1 for p in range(q["start"], len(seq)) if (p + 1) % r == 0]
            exact.append(exact_rows(spec, seq, groups))
    for number, steps in enumerate(_decode_schedule(ex)):
        what = f"call {number}"
        entries = [Entry(requests[b]["slot"], s, sequences[b][s:e]) for b, s, e in steps]
        before = state.clone()
        got_rows, got_store = call(impl, *pack(spec, entries, state, impl.device))
        if rows:
            expected = [
                Expected(j, exact[b][j], sequences[b], j) if (p + 1) % r == 0 else Expected(-1)
                for b, s, e in steps
                for p in range(s, e)
                for j in [(p + 1) // r - 1]
            ]
            check_reserved(spec, got_rows, got_store, expected, what)
        if ring:
            state_now = state.cpu()
            for b, s, e in steps:
                check_ring(state_now, requests[b]["slot"], sequences[b], _needed_after_step(s, e, w, size), what)
            check_untouched(before.cpu(), state_now, [requests[b]["slot"] for b, _, _ in steps], what)


def decode_equals_one_shot(impl: Implementation, ex: dict[str, Any]) -> None:
    replay_decode(impl, ex, rows=True, ring=False)


def decode_ring_contents(impl: Implementation, ex: dict[str, Any]) -> None:
    replay_decode(impl, ex, rows=False, ring=True)


def decode_fresh_request(impl: Implementation, ex: dict[str, Any]) -> None:
    replay_decode(impl, ex, rows=True, ring=False)


# --- bad input ----------------------------------------------------------------------------------------------


def _faulty_call(
    op: str, impl: Implementation, ex: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any], torch.Tensor]:
    """The drawn call with its fault applied; the fault falls back to a wrong score dtype where it cannot
    apply."""
    spec = dict(ex["layer"])
    requests = ex["requests"]
    qmax = max(len(q["positions"]) for q in requests)
    size = ring_size(op, impl, spec, qmax, ex["ring_extra"])
    fault = ex["fault"]
    if fault == "ring_short":
        if size - ex["ring_extra"] == 0:
            fault = "score_dtype"
        else:
            size -= ex["ring_extra"] + 1
    state = new_state(spec, ex["slots"], size, ex["fill"], impl.device)
    entries = [Entry(q["slot"], q["start"], q["positions"]) for q in requests]
    args, kw = pack(spec, entries, state, impl.device)
    score, latent, cu, start, state, index = args
    total, c = score.shape
    if fault == "state_index_duplicate" and len(requests) < 2:
        fault = "state_index_range"
    if fault == "score_noncontiguous" and (total < 2 or c < 1):
        fault = "score_dtype"
    if fault == "overlap_without_ratio_4" and spec["ratio"] == 4:
        fault = "ratio_zero"
    if fault == "score_dtype":
        score = score.double()
    elif fault == "score_noncontiguous":
        wide = torch.zeros(total, 2 * c, dtype=torch.float32, device=score.device)
        wide[:, ::2] = score
        score = wide[:, ::2]
    elif fault == "latent_shape":
        latent = torch.cat([latent, latent[:, :1]], dim=1)
    elif fault == "state_channels":
        state = torch.zeros(*state.shape[:3], c + 1, dtype=torch.float32, device=state.device)
    elif fault == "state_dtype":
        state = state.double()
    elif fault == "cu_seqlens_start":
        cu = cu.clone()
        cu[0] = 1
    elif fault == "cu_seqlens_end":
        cu = cu.clone()
        cu[-1] += 1
    elif fault == "cu_seqlens_dtype":
        cu = cu.long()
    elif fault == "start_negative":
        start = start.clone()
        start[0] = -1
    elif fault == "state_index_range":
        index = index.clone()
        index[0] = ex["slots"]
    elif fault == "state_index_negative":
        index = index.clone()
        index[0] = -1
    elif fault == "state_index_duplicate":
        index = index.clone()
        index[1] = index[0]
    elif fault == "ape_shape":
        kw["ape"] = torch.zeros(int(spec["ratio"]) + 1, c, dtype=torch.float32, device=score.device)
    elif fault == "overlap_without_ratio_4":
        kw["overlap"] = True
    elif fault == "ratio_zero":
        kw["ratio"] = 0
    elif fault == "ratio_float":
        kw["ratio"] = float(spec["ratio"])
    return (score, latent, cu, start, state, index), kw, state


def _rejects(op: str) -> Any:
    def check(impl: Implementation, ex: dict[str, Any]) -> None:
        args, kw, state = _faulty_call(op, impl, ex)
        before = state.detach().cpu().clone()
        try:
            impl.fn(*args, **kw)
        except (ValueError, TypeError):
            pass
        except Exception as err:
            raise AssertionError(
                f"{ex['fault']}: raised {type(err).__name__} ({err}), not ValueError/TypeError naming the argument"
            ) from err
        else:
            raise AssertionError(f"{ex['fault']}: the call was accepted; it must raise ValueError or TypeError")
        after = state.detach().cpu()
        same = before.dtype == after.dtype and before.shape == after.shape
        if not same or before.view(torch.uint8).flatten().tolist() != after.view(torch.uint8).flatten().tolist():
            raise AssertionError(f"{ex['fault']}: the state changed although the call was refused")

    return check


# --- request life -------------------------------------------------------------------------------------------


def request_life(impl: Implementation, ex: dict[str, Any]) -> None:
    replay_life(impl, ex)


# --- frozen examples ----------------------------------------------------------------------------------------
# Failures the fast kernels showed under the first float rule (one baseline formulation, floor at the row's
# own size): each a legitimate float32 evaluation that one baseline beat by luck
# (docs/compression-properties.md).

PREFILL_CANCELLATION = {
    "layer": {"ratio": 8, "dim": 2, "overlap": False, "ape": None},
    "ring_extra": 1,
    "slots": 1,
    "fill": float("nan"),
    "requests": [
        {
            "slot": 0,
            "positions": [
                [[s, 0.0], [v, 0.0]]
                for s, v in zip(
                    [0.0, 0.25, 0.25, -0.5, 1.5, 2.5, -2.5, 3.25],
                    [0.0, 0.0, 0.0, 0.0, 0.0, -3.5, 0.0, 2.5],
                    strict=True,
                )
            ],
            "cuts": [0, 8],
            "delay": 0,
        }
    ],
}
"""Torch backend, ratio 8: terms -0.94 and +1.40 cancel to 0.47; its error was 5.7 units of the row."""
PREFILL_SMALL_WEIGHT = {
    "layer": {"ratio": 3, "dim": 2, "overlap": False, "ape": None},
    "ring_extra": 1,
    "slots": 1,
    "fill": float("nan"),
    "requests": [
        {
            "slot": 0,
            "positions": [[[0.0, 0.0], [0.0, 0.0]], [[2.0, 0.0], [0.0, 0.0]], [[-3.75, 0.0], [1.25, 0.0]]],
            "cuts": [0, 3],
            "delay": 0,
        }
    ],
}
"""Triton, ratio 3: the row is the weight exp(-5.75 + ...) of one entry, which exp2 of a scaled argument gets
4.2 units off."""
DECODE_LONG_SUM = {
    "layer": {"ratio": 128, "dim": 1, "overlap": False, "ape": None},
    "ring_extra": 1,
    "slots": 1,
    "fill": float("nan"),
    "requests": [
        {
            "slot": 0,
            "start": 127,
            "first": 0,
            "positions": [[[0.5 * (i % 2)], [0.25 * (i % 2)]] for i in range(129)],
            "steps": [2],
            "delay": 0,
        }
    ],
}
"""Torch backend, ratio 128: a 128-term float32 sum, 5.4 units off."""
DECODE_OVERLAP_RING_SHORT = {
    "layer": {"ratio": 4, "dim": 1, "overlap": True, "ape": None},
    "ring_extra": 0,
    "slots": 1,
    "fill": float("nan"),
    "requests": [{"slot": 0, "start": 5, "positions": [[[0.0, 0.0], [0.0, 0.0]]]}],
    "fault": "ring_short",
}
"""V4 overlap, one new position, a ring one short of the discipline's safe size (write-then-read: 7 < 8): a
bound of r + q - 1 (4) would accept it. A hunt of generated calls found this only by luck of the seed."""
LIFE_CANCELLATION = {
    "layer": {"ratio": 3, "dim": 4, "overlap": False, "ape": None},
    "qmax": 1,
    "ring_extra": 0,
    "slots": 1,
    "fill": float("nan"),
    "ops": [
        {"op": "new", "slot": 0},
        {
            "op": "prefill",
            "calls": [
                {
                    "slot": 0,
                    "positions": [
                        [[0.0, 4.0, -2.25, 2.0], [7.75, -5.5, 1.0, 4.0]],
                        [[3.75, 1.25, -1.5, 1.75], [6.5, -4.25, 0.75, 4.5]],
                        [[3.5, -2.75, -1.75, -1.75], [-5.25, -1.75, 2.75, -5.0]],
                        [[-2.75, -3.75, 2.25, 0.25], [-6.0, 2.0, -4.75, 6.75]],
                        [[3.75, -3.0, 1.25, 2.5], [-1.25, 5.25, -2.0, -1.0]],
                        [[1.5, 1.75, 1.75, -2.25], [-6.5, -3.25, -3.25, 1.25]],
                    ],
                }
            ],
        },
    ],
}
"""Triton, ratio 3: row 1, channel 3 cancels (6.75 and -1.0 weighted) to -0.249; 5.9 units of the row."""

# --- the catalogue ------------------------------------------------------------------------------------------

HUNT_EXAMPLES = 60
"""Examples per mutant in the mutation hunt: each example replays several calls, and every kill of the shipped
mutants comes well within this many (derandomized, so the hunt is the same on every run). The ring and
bad-input properties find theirs within a dozen and get fewer."""
HUNT_EXAMPLES_QUICK = 25

PROPERTIES = [
    Property(
        "compression_prefill_partition_invariance",
        PREFILL,
        prefill_batches(),
        prefill_partition_invariance,
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
        prefill_ring_contents,
        doc="After every call each request's ring holds its newest W - 1 positions (raw score, latent) at "
        "p % S, bit for bit, and state slots of no request in the call are untouched.",
        hunt_examples=HUNT_EXAMPLES_QUICK,
    ),
    Property(
        "compression_prefill_fresh_request",
        PREFILL,
        fresh_prefill_batches(),
        prefill_fresh_request,
        doc="A request starting at position 0 in a ring full of an earlier request's leftovers (and garbage) "
        "reads none of it: its rows equal one-shot compression.",
        hunt_examples=HUNT_EXAMPLES,
    ),
    Property(
        "compression_prefill_rejects_bad_input",
        PREFILL,
        bad_calls(),
        _rejects(PREFILL),
        doc="A ring below W - 1 slots, a wrong dtype, shape, contiguity, offset, start, slot, APE table or "
        "ratio raises ValueError or TypeError, and the state is untouched.",
        hunt_examples=HUNT_EXAMPLES_QUICK,
    ),
    Property(
        "compression_prefill_request_life",
        PREFILL,
        request_lives(),
        request_life,
        doc="A whole schedule (new requests over used slots, prefill chunks, verify steps with rollback) "
        "through this prefill and its decode twin (or the reference's): rows and rings equal the exact "
        "model after every call (properties/request_life.py).",
        examples=(LIFE_CANCELLATION,),
        hunt_examples=HUNT_EXAMPLES,
    ),
    Property(
        "compression_decode_equals_one_shot",
        DECODE,
        decode_batches(),
        decode_equals_one_shot,
        doc="Decode / verify steps of 1..qmax positions per request, several requests from different starts "
        "in one call, the ring at the safe size of the declared discipline: each new position gets one "
        "row, the one-shot row j where it completes group j, else a zero row with store row -1.",
        examples=(DECODE_LONG_SUM,),
        hunt_examples=HUNT_EXAMPLES,
    ),
    Property(
        "compression_decode_ring_contents",
        DECODE,
        decode_batches(),
        decode_ring_contents,
        doc="After every step the ring holds, bit for bit, every position that a later step may read after "
        "any acceptance (start - W + 2 .. end - 1) and that the ring can still hold (from end - S on); "
        "state slots of no request in the call are untouched.",
        hunt_examples=HUNT_EXAMPLES_QUICK,
    ),
    Property(
        "compression_decode_fresh_request",
        DECODE,
        fresh_decode_batches(),
        decode_fresh_request,
        doc="Decode from position 0 over a ring of leftovers and garbage: rows equal one-shot compression.",
        hunt_examples=HUNT_EXAMPLES,
    ),
    Property(
        "compression_decode_rejects_bad_input",
        DECODE,
        bad_calls(),
        _rejects(DECODE),
        examples=(DECODE_OVERLAP_RING_SHORT,),
        doc="A ring below the declared discipline's safe size (write-then-read W + q - 1, read-then-write "
        "W - 1) or any malformed argument raises ValueError or TypeError before the state is touched.",
        hunt_examples=HUNT_EXAMPLES_QUICK,
    ),
    Property(
        "compression_decode_request_life",
        DECODE,
        request_lives(),
        request_life,
        doc="As compression_prefill_request_life, driving this decode (and its prefill twin or the reference's).",
        hunt_examples=HUNT_EXAMPLES,
    ),
]
