"""The exact reference as an implementation of compression_prefill and compression_decode (both disciplines).

Each adapter has the contract's signature (``properties.contract``): packed float32 inputs, the ring tensor
``state[N, S, 2, C]`` (position ``p`` of a request in slot ``p % S``, raw score in ``[.., 0, :]``, latent in
``[.., 1, :]``) updated in place. Per request it reads its ring into ``reference.state.Ring``, runs
``ring_prefill`` or ``ring_step`` there (the reference decides every read, write and row), writes the new
positions back in order, and returns the reserved rows as float32 (each rounded from its exact value, see
``properties.compression.exact``) with their store rows.

A ring slot whose contents are not finite grid-sized numbers is handed to the reference as never written:
reading it raises, so the adapter never turns garbage into a row.
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction
from functools import partial
from typing import Any

import torch

from properties.compression.call import DECODE, PREFILL, READ_THEN_WRITE, WRITE_THEN_READ, Call, parse_call
from properties.compression.exact import WEIGHTING, exp_weight, weighted, weighted_layer
from properties.registry import Implementation
from reference import state as ring_model
from reference.compression import Position
from reference.layer import CompressedLayer

READABLE_SCORE = 1024.0
"""Ring scores beyond this magnitude are garbage (their exponential is not worth forming)."""


def spec_of(call: Call, ape: torch.Tensor | None) -> dict[str, Any]:
    table = None if ape is None else ape.tolist()
    return {"ratio": call.ratio, "dim": call.dim, "overlap": call.overlap, "ape": table}


def read_slot(values: list[list[float]]) -> Position | None:
    """A ring slot ``[scores, latents]`` as a reference position, None when it holds garbage."""
    scores, latents = values
    if not all(math.isfinite(s) and abs(s) <= READABLE_SCORE for s in scores):
        return None
    if not all(math.isfinite(v) for v in latents):
        return None
    return tuple(exp_weight(s) for s in scores), tuple(Fraction(v) for v in latents)


def ring_of(layer: CompressedLayer, state: torch.Tensor, slot: int, start: int, discipline: str) -> ring_model.Ring:
    """The reference ring of one request, ending at ``start``, read from ``state[slot]``."""
    size = int(state.shape[1])
    held = [read_slot(v) for v in state[slot].tolist()] if size else [None]
    empty = ring_model.new_ring(layer, max(size, 1), discipline)
    return replace(empty, end=start, slots=tuple(held))


def run(
    op: str, discipline: str | None, *call_args: Any, **contract: Any
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One call of ``op`` with the contract's arguments (``properties.contract``), through the reference."""
    call = parse_call(op, discipline, *call_args, **contract)
    score, latent, state, ape = call.score, call.latent, call.state, call.ape
    layer = weighted_layer(spec_of(call, ape))
    scores, latents = score.tolist(), latent.tolist()
    model = discipline or READ_THEN_WRITE
    values: list[list[float]] = []
    store_rows: list[int] = []
    positions: list[int] = []
    for request in call.requests:
        rows = range(request.first, request.first + request.length)
        new = [weighted((scores[i], latents[i])) for i in rows]
        ring = ring_of(layer, state, request.slot, request.start, model)
        if op == PREFILL:
            result = ring_model.ring_prefill(ring, request.start, new, WEIGHTING)
        else:
            result = ring_model.ring_step(ring, request.start, new, WEIGHTING)
        for out in result.reserved:
            values.append([float(v) for v in out.values])
            store_rows.append(out.store_row)
            positions.append(out.position)
        if call.ring:  # the newest min(n, S) positions, each in its own slot: what writing all in order leaves
            news = range(max(request.length - call.ring, 0), request.length)
            written = [request.first + i for i in news]
            ring_slots = [(request.start + i) % call.ring for i in news]
            state[request.slot, ring_slots] = torch.stack([score[written], latent[written]], dim=1)
    device = score.device
    rows_out = torch.tensor(values, dtype=torch.float32, device=device).reshape(len(values), call.dim)
    as_i64 = partial(torch.tensor, dtype=torch.int64, device=device)
    return rows_out, as_i64(store_rows), as_i64(positions)


_ADAPTERS = (
    (PREFILL, None, "reserve_max1", "``reference.state.ring_prefill`` per request: ``max(1, nc)`` reserved rows each."),
    (
        DECODE,
        WRITE_THEN_READ,
        WRITE_THEN_READ,
        "``reference.state.ring_step``, write_then_read (needs ``S >= W + q - 1``): a row per new position.",
    ),
    (
        DECODE,
        READ_THEN_WRITE,
        READ_THEN_WRITE,
        "``reference.state.ring_step``, read_then_write (needs ``S >= W - 1``): a row per new position.",
    ),
)
IMPLEMENTATIONS = [
    Implementation(op, "reference", partial(run, op, discipline), convention, origin="reference", note=doc)
    for op, discipline, convention, doc in _ADAPTERS
]
