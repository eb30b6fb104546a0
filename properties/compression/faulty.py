"""A small torch implementation of compression_prefill and compression_decode: the base of the shipped
mutants.

One call: list every reserved output row and the ``W`` window entries it reads (position, channel half, and
where the inputs are: a packed input row or a ring slot), gather them from ``cat(inputs, ring)``, and reduce
``sum softmax(score + ape) * latent`` in float32. The ring is read before it is written, except in a
write_then_read decode, which writes every new position first and reads whole windows from the ring.

``Faults`` plants one bug each (all off: a correct implementation, checked in
properties/compression/test_support.py); ``properties.compression.mutants`` names them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from properties.compression.baseline import sequential, softmax, torch_softmax
from properties.compression.call import DECODE, PREFILL, WRITE_THEN_READ, Call, Request, parse_call
from properties.ladder import ladder


@dataclass(frozen=True)
class Faults:
    """Each field, when changed from its default, is one planted bug.

    ring_rule: the size check; "one_short", "seed" or "none" accept rings below the safe size.
    slot_shift: position p is written at slot (p + shift) % S, still read at p % S.
    drop_ape: the APE table is ignored.
    swap_halves: overlap; the own group reads channels [0, d), the previous group [d, 2d).
    read_before_start: window positions < 0 are read from the ring (wrapping) instead of being absent.
    placeholder_store_row: the store row of a prefill placeholder.
    reserve_placeholder: prefill reserves max(1, nc) rows (False: nc rows).
    use_state_index: False: request b uses state slot b.
    complete_partial_group: prefill also emits the trailing incomplete group, reading past the chunk.
    write_first: a read_then_write decode that writes before it reads.
    idle_store_row: the decode row of a position completing nothing: "minus_one" or "group" (p // r).
    completes_at_group_start: decode completes a row at p % r == 0 instead of (p + 1) % r == 0.
    window_writes_only: only the newest W - 1 new positions are written to the ring.
    ring_holds_ape: the ring stores score + ape (V4's score_state habit) and APE is added again on reading.
    bf16_weights: the softmax weights are rounded to bfloat16 before the weighted sum.
    ring_write_limit: only the first this many new positions of a request's call are written to the ring (an
    engine wrote only the first 4 of D > 4 drafts).
    rope: the RoPE position of completed row j: "group_start" (j r), "group_end" (j r + r - 1, the position
    completing the row), "row_index" (j, the ratio forgotten).
    channels_past_tile, requests_past_tile: size bugs, wrong only past a tile of ``properties.ladder``.
    """

    ring_rule: str = "safe"
    slot_shift: int = 0
    drop_ape: bool = False
    swap_halves: bool = False
    read_before_start: bool = False
    placeholder_store_row: int = -1
    reserve_placeholder: bool = True
    use_state_index: bool = True
    complete_partial_group: bool = False
    write_first: bool = False
    idle_store_row: str = "minus_one"
    completes_at_group_start: bool = False
    window_writes_only: bool = False
    ring_holds_ape: bool = False
    bf16_weights: bool = False
    ring_write_limit: int | None = None
    rope: str = "group_start"
    channels_past_tile: bool = False  # channels past the channels ladder's tile are compressed without APE
    requests_past_tile: bool = False  # requests past the requests ladder's tile use state slot b, not state_index


@dataclass(frozen=True)
class Target:
    """One reserved output row: its request (and its index ``b``), compressed row ``j`` (None: a zero row) and
    store row."""

    request: Request
    b: int
    group: int | None
    store_row: int


def _targets(op: str, call: Call, faults: Faults) -> list[Target]:
    r = call.ratio
    out: list[Target] = []
    for b, request in enumerate(call.requests):
        s, e = request.start, request.start + request.length
        if op == PREFILL:
            last = -(-e // r) if faults.complete_partial_group else e // r
            groups = range(s // r, last)
            out += [Target(request, b, j, j) for j in groups]
            if not groups and faults.reserve_placeholder:
                out.append(Target(request, b, None, faults.placeholder_store_row))
            continue
        for p in range(s, e):
            ends = p % r == 0 if faults.completes_at_group_start else (p + 1) % r == 0
            j = p // r if faults.completes_at_group_start else (p + 1) // r - 1
            if ends:
                out.append(Target(request, b, j, j))
            else:
                out.append(Target(request, b, None, -1 if faults.idle_store_row == "minus_one" else p // r))
    return out


def _slot(request: Request, faults: Faults, b: int) -> int:
    if faults.requests_past_tile and b >= ladder("requests").tile:
        return b
    return request.slot if faults.use_state_index else b


def _write(
    call: Call,
    state: torch.Tensor,
    stored: torch.Tensor,
    latent: torch.Tensor,
    faults: Faults,
    slots: list[int],
) -> None:
    """Write each request's new positions in order (only the newest that survive), at slot ``(p + shift) %
    S``."""
    if call.ring == 0:
        return
    for request, k in zip(call.requests, slots, strict=True):
        keep = min(request.length, call.ring)
        if faults.window_writes_only:
            keep = min(keep, call.window - 1)
        limit = request.length if faults.ring_write_limit is None else faults.ring_write_limit
        news = range(request.length - keep, min(request.length, limit))
        ring_slots = [(request.start + i + faults.slot_shift) % call.ring for i in news]
        rows = [request.first + i for i in news]
        state[k, ring_slots] = torch.stack([stored[rows], latent[rows]], dim=1)


def _with_ape(call: Call, score: torch.Tensor, ape: torch.Tensor | None, first_position: torch.Tensor) -> torch.Tensor:
    """``score + ape[p % r]`` for packed input rows whose positions are ``first_position``."""
    if ape is None:
        return score
    return score + ape[first_position % call.ratio]


def run(
    op: str,
    discipline: str | None,
    faults: Faults,
    *call_args: Any,
    precision: torch.dtype = torch.float32,
    formulation: str = "divide",
    **contract: Any,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One call of ``op`` with the contract's arguments (``properties.contract``), with ``faults`` planted;
    ``precision``: the dtype the softmax and the weighted sum are evaluated in (float64: the oracle of large
    shapes); ``formulation``: one of ``properties.compression.baseline.FORMULATIONS`` (the same-precision
    baselines of the twice-the-error rule)."""
    call = parse_call(op, discipline, *call_args, ring_rule=faults.ring_rule, **contract)
    score, latent, state, ape, overlap = call.score, call.latent, call.state, call.ape, call.overlap
    r, d, w, size = call.ratio, call.dim, call.window, call.ring
    device = score.device
    slots = [_slot(q, faults, b) for b, q in enumerate(call.requests)]
    positions = torch.tensor(
        [q.start + i for q in call.requests for i in range(q.length)], dtype=torch.int64, device=device
    )
    stored = _with_ape(call, score, ape, positions) if faults.ring_holds_ape else score
    read_all_from_ring = op == DECODE and discipline == WRITE_THEN_READ
    if read_all_from_ring or faults.write_first:
        _write(call, state, stored, latent, faults, slots)
    total = int(score.shape[0])
    ring_flat = state.reshape(-1, 2, call.channels)
    src_score = torch.cat([score, ring_flat[:, 0]])
    src_latent = torch.cat([latent, ring_flat[:, 1]])
    targets = _targets(op, call, faults)
    index, half, offset, present = [], [], [], []
    for target in targets:
        request = target.request
        k = slots[target.b]
        j = 0 if target.group is None else target.group
        for t in range((j + 1) * r - w, (j + 1) * r):
            own = not overlap or t >= j * r
            half.append(int(own == (not faults.swap_halves)) if overlap else 0)
            offset.append(t % r)
            readable = target.group is not None and (t >= 0 or faults.read_before_start)
            present.append(readable)
            from_input = t >= request.start and not read_all_from_ring
            row = request.first + t - request.start
            if from_input and row < total:
                index.append(row)
            else:
                index.append(total + k * size + t % size if size else 0)
    h = 2 if overlap else 1
    count = len(targets)
    idx = torch.tensor(index, dtype=torch.int64, device=device).reshape(count, w)
    hh = torch.tensor(half, dtype=torch.int64, device=device).reshape(count, w)
    x = src_score.reshape(-1, h, d)[idx, hh].to(precision)
    v = src_latent.reshape(-1, h, d)[idx, hh].to(precision)
    if ape is not None and not faults.drop_ape:
        off = torch.tensor(offset, dtype=torch.int64, device=device).reshape(count, w)
        added = ape.reshape(r, h, d)[off, hh].to(precision)
        if faults.channels_past_tile:
            added[..., ladder("channels").tile :] = 0.0
        x = x + added
    mask = torch.tensor(present, dtype=torch.bool, device=device).reshape(count, w, 1)
    x = torch.where(mask, x, float("-inf"))
    v = torch.where(mask, v, 0.0)
    if formulation == "sequential":
        rows = sequential(x, v)
    else:
        weights = torch_softmax(x) if formulation == "torch" else softmax(x, dim=1, how=formulation)
        if faults.bf16_weights:
            weights = weights.to(torch.bfloat16).float()
        rows = (weights * v).sum(dim=1)
    valid = torch.tensor([t.group is not None for t in targets], dtype=torch.bool, device=device)
    rows = torch.where(valid[:, None], rows, 0.0)
    if not (read_all_from_ring or faults.write_first):
        _write(call, state, stored, latent, faults, slots)
    store = torch.tensor([t.store_row for t in targets], dtype=torch.int64, device=device)
    group = torch.tensor([-1 if t.group is None else t.group for t in targets], dtype=torch.int64, device=device)
    at = {"group_start": group * r, "group_end": group * r + r - 1, "row_index": group}[faults.rope]
    return rows, store, torch.where(group >= 0, at, 0)
