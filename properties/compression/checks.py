"""Calling a compression implementation with the contract's signature, and comparing what it did with the
exact reference: reserved rows, store rows, and ring contents.

Comparison rules (``properties.compare``): the number of reserved rows, store rows, zero rows and ring
contents exact (ring entries bit for bit); a completed row within twice the error of the worst float32 torch
formulation on that lane (``properties.compression.baseline``), or 4 units of the lane's ``sum p |v|`` (the
magnitude its rounding scales with), with 23 mantissa bits for float32 rows and 7 for bfloat16, or ``W`` units
of ``2^-23 sum p |v|`` (``reorder_bound``: what summing the window's ``W`` terms in another order may move).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import partial
from typing import Any

import torch

from properties.compare import Mismatch, assert_exact, assert_within_twice_baseline, errors
from properties.compression.baseline import baseline_rows
from properties.compression.call import safe_ring
from properties.compression.exact import LayerSpec, RawPosition, channels, window
from properties.registry import Implementation
from properties.runner import Property
from reference.rope import row_position

MANTISSA = {torch.float32: 23, torch.bfloat16: 7}


def ring_size(op: str, impl: Implementation, spec: LayerSpec, qmax: int, extra: int) -> int:
    """The safe size of ``impl``'s declared discipline for steps of at most ``qmax`` positions, plus
    ``extra``."""
    w = int(spec["ratio"]) * (2 if spec["overlap"] else 1)
    return safe_ring(op, impl.convention, w, qmax) + extra


def new_state(spec: LayerSpec, slots: int, ring: int, fill: Any, device: str) -> torch.Tensor:
    """f32[slots, ring, 2, C] holding ``fill``: one value everywhere, or ``{"leftover": [[[s], [v]], ...]}``
    cycled over every (slot, ring slot, channel)."""
    c = channels(spec)
    if not isinstance(fill, dict):
        return torch.full((slots, ring, 2, c), float(fill), dtype=torch.float32, device=device)
    items = fill["leftover"]
    count = slots * ring * c
    score = [float(items[m % len(items)][0][0]) for m in range(count)]
    latent = [float(items[m % len(items)][1][0]) for m in range(count)]
    pairs = torch.tensor([score, latent], dtype=torch.float32).reshape(2, slots, ring, c)
    return pairs.permute(1, 2, 0, 3).contiguous().to(device)


def write_positions(state: torch.Tensor, slot: int, positions: dict[int, RawPosition]) -> None:
    """Write positions into ``state[slot]`` at ``p % S`` as writing them in increasing order leaves them (the
    newest ``S`` of them)."""
    size = int(state.shape[1])
    order = sorted(positions)[-size:] if size else []
    if order:
        values = torch.tensor([positions[p] for p in order], dtype=torch.float32, device=state.device)
        state[slot, [p % size for p in order]] = values


@dataclass(frozen=True)
class Entry:
    """One request of a call: its state slot, first new position and new positions."""

    slot: int
    start: int
    new: Sequence[RawPosition]


def pack(
    spec: LayerSpec, entries: Sequence[Entry], state: torch.Tensor, device: str
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The contract's arguments for one call: packed inputs in request order."""
    c = channels(spec)
    flat = [p for e in entries for p in e.new]
    score = torch.tensor([p[0] for p in flat], dtype=torch.float32, device=device).reshape(len(flat), c)
    latent = torch.tensor([p[1] for p in flat], dtype=torch.float32, device=device).reshape(len(flat), c)
    bounds = [0]
    for e in entries:
        bounds.append(bounds[-1] + len(e.new))
    cu = torch.tensor(bounds, dtype=torch.int32, device=device)
    start = torch.tensor([e.start for e in entries], dtype=torch.int32, device=device)
    index = torch.tensor([e.slot for e in entries], dtype=torch.int32, device=device)
    ape = None if spec["ape"] is None else torch.tensor(spec["ape"], dtype=torch.float32, device=device)
    keywords = {"ratio": int(spec["ratio"]), "overlap": bool(spec["overlap"]), "ape": ape}
    return (score, latent, cu, start, state, index), keywords


@dataclass(frozen=True)
class Reserved:
    """What a call returned, on the CPU: the reserved rows, their store rows and their RoPE positions."""

    rows: torch.Tensor
    store: torch.Tensor
    positions: torch.Tensor


def call(impl: Implementation, args: tuple[Any, ...], keywords: dict[str, Any]) -> Reserved:
    """Run ``impl``; its ``(rows, store_rows, positions)`` on the CPU, after checking their types."""
    result = impl.fn(*args, **keywords)
    try:
        if len(result) != 3:
            raise IndexError
        rows, store, positions = result[0], result[1], result[2]
    except (TypeError, IndexError) as err:
        raise Mismatch("result", detail=f"must be (rows, store_rows, positions), got {type(result).__name__}") from err
    for name, t in (("rows", rows), ("store_rows", store), ("positions", positions)):
        if not isinstance(t, torch.Tensor):
            raise Mismatch(name, detail=f"must be a torch.Tensor, got {type(t).__name__}")
    if rows.dtype not in MANTISSA:
        raise Mismatch("rows", detail=f"dtype must be float32 or bfloat16, got {rows.dtype}")
    for name, t in (("store_rows", store), ("positions", positions)):
        if t.dtype != torch.int64:
            raise Mismatch(name, detail=f"dtype must be int64, got {t.dtype}")
    return Reserved(rows.detach().cpu(), store.detach().cpu(), positions.detach().cpu())


@dataclass(frozen=True)
class Expected:
    """One reserved row: its store row and, for a completed row, its exact values and where its inputs are
    (``sequence``: the request's positions by absolute index, ``group``: j); a zero row has ``exact`` None.
    ``position``: its RoPE position where a second formulation gives it, else ``reference.rope.row_position``."""

    store_row: int
    exact: tuple[Fraction, ...] | None = None
    sequence: Sequence[RawPosition] = ()
    group: int = 0
    position: int | None = None


def check_reserved(spec: LayerSpec, got: Reserved, expected: list[Expected], what: str) -> None:
    """Row count, store rows, RoPE positions and zero rows exact; completed rows within twice the baseline's
    error."""
    d, r = int(spec["dim"]), int(spec["ratio"])
    rows = got.rows
    if tuple(rows.shape) != (len(expected), d):
        raise Mismatch(f"{what}: rows", detail=f"shape {list(rows.shape)}, expected [{len(expected)}, {d}] reserved")
    assert_exact([e.store_row for e in expected], got.store, f"{what}: store_rows")
    positions = [row_position(e.store_row, r) if e.position is None else e.position for e in expected]
    assert_exact(positions, got.positions, f"{what}: RoPE positions (j * r for row j, 0 where nothing is stored)")
    values = rows.float()
    zero = [i for i, e in enumerate(expected) if e.exact is None]
    assert_exact([[0.0] * d for _ in zero], values[zero], f"{what}: zero rows {zero}")
    done = [i for i, e in enumerate(expected) if e.exact is not None]
    if not done:
        return
    base = baseline_rows(spec, [(expected[i].sequence, expected[i].group) for i in done])
    variants = base.rows if rows.dtype == torch.float32 else base.rows.to(rows.dtype).float()
    exact = [v for i in done for v in expected[i].exact or ()]
    where = f"{what}: completed rows {[expected[i].group for i in done]} at output rows {done}"
    baseline = worst_lanes(exact, [variant.flatten().tolist() for variant in variants])
    got_done = values[done].flatten().tolist()
    scale = base.scale.flatten().tolist()
    floor = [reorder_bound(window(spec)) * s for s in scale]
    assert_within_twice_baseline(exact, got_done, baseline, MANTISSA[rows.dtype], where, scale=scale, floor=floor)


def reorder_bound(w: int) -> float:
    """How far, relative to the lane's ``sum_t p_t |v_t|``, two float32 evaluations of ``sum_t softmax_t(x) v_t``
    over ``w`` terms may lie apart when they add in different orders: each order's error is at most ``(w - 1) u``
    of the weighted sum's terms and ``(w - 1) u`` of the softmax denominator's (relative, moving every weight),
    plus ``2 u`` for the exponential and the division, so ``2 w u`` with ``u = 2^-24``: ``w`` units of ``2^-23``."""
    return w * 2.0**-23


def worst_lanes(exact: Sequence[Fraction], variants: Sequence[Sequence[float]]) -> list[float]:
    """Lane by lane, the baseline value farthest from the exact one (NaN, never expected here, counts as
    farthest)."""
    spread = [errors(exact, values) for values in variants]
    out = []
    for lane in range(len(exact)):
        worst = max(range(len(variants)), key=lambda k: math.inf if math.isnan(spread[k][lane]) else spread[k][lane])
        out.append(variants[worst][lane])
    return out


def bits(t: torch.Tensor) -> list[Any]:
    """The float32 bit patterns of ``t`` (NaN payloads and signed zeros included)."""
    return t.detach().cpu().contiguous().view(torch.int32).tolist()


def check_ring(
    state: torch.Tensor, slot: int, sequence: Sequence[RawPosition], needed: Iterable[int], what: str
) -> None:
    """Each needed position ``p`` sits in ``state[slot, p % S]`` bit for bit: raw scores, then latents."""
    size = int(state.shape[1])
    wanted = sorted(needed)
    if not wanted:
        return
    expected = torch.tensor([sequence[p] for p in wanted], dtype=torch.float32)
    got = state[slot, [p % size for p in wanted]]
    if bits(got) != bits(expected):
        lanes: list[tuple[tuple[int, ...], Any, Any]] = [
            ((p,), sequence[p], got[i].tolist()) for i, p in enumerate(wanted) if bits(got[i]) != bits(expected[i])
        ]
        raise Mismatch(f"{what}: ring of state slot {slot} (position: [scores, latents])", lanes, "positions lost")


def check_untouched(before: torch.Tensor, after: torch.Tensor, touched: Iterable[int], what: str) -> None:
    """State slots of no request in the call are unchanged, bit for bit."""
    others = [k for k in range(int(before.shape[0])) if k not in set(touched)]
    if others and bits(before[others]) != bits(after[others]):
        raise Mismatch(f"{what}: state slots {others} belong to no request of the call but changed")


def check_rings_after(
    state: torch.Tensor,
    before: torch.Tensor,
    slots: Sequence[int],
    calls: Sequence[tuple[int, int, int]],
    sequences: Sequence[Sequence[RawPosition]],
    needed: Callable[[int, int], Iterable[int]],
    what: str,
) -> None:
    """After a call of (request, start, end) entries: each request's ring holds ``needed(start, end)`` of its
    sequence bit for bit, and the state slots of no request in the call are untouched."""
    now, then = state.cpu(), before.cpu()
    for b, s, e in calls:
        check_ring(now, slots[b], sequences[b], needed(s, e), what)
    check_untouched(then, now, [slots[b] for b, _, _ in calls], what)


HUNT_EXAMPLES = 60
"""Examples per mutant in the mutation hunt: each example replays several calls, and every kill of the shipped
mutants comes well within this many (derandomized, so the hunt is the same on every run). The ring and
bad-input properties find theirs within a dozen and get fewer."""
HUNT_EXAMPLES_QUICK = 25


def replay_property(
    name: str,
    op: str,
    strategy: Any,
    replay: Callable[..., None],
    doc: str,
    *,
    rows: bool = False,
    ring: bool = False,
    examples: tuple[Any, ...] = (),
) -> Property:
    """A property whose check replays an example's calls through ``replay``, comparing the rows, the ring
    contents, or both; a ring check needs fewer hunt examples."""
    check = partial(replay, rows=rows, ring=ring)
    hunt = HUNT_EXAMPLES if rows else HUNT_EXAMPLES_QUICK
    return Property(name, op, strategy, check, doc=doc, examples=examples, hunt_examples=hunt)
