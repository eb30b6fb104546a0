"""Validation of a compression call with the contract's signature (``properties.contract``), shared by the
reference adapters and the small torch implementation behind the mutants.

Every check runs before the state is touched and raises ValueError / TypeError naming the argument. The ring
must be at least the safe size of the declared discipline for this call (docs/ring-safety.md): prefill and
read-then-write ``W - 1`` (0 when ``W = 1``), write-then-read ``W + q - 1`` with ``q`` the most new positions
of any request in the call. Rollback safety (``W + qmax - 2`` read-then-write) depends on the schedule, not on
one call, and is the caller's to size for.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from reference.checks import fail, require, require_positive_int
from reference.layer import OVERLAP_RATIO

PREFILL = "compression_prefill"
DECODE = "compression_decode"
WRITE_THEN_READ = "write_then_read"
READ_THEN_WRITE = "read_then_write"


def safe_ring(op: str, discipline: str | None, window: int, qmax: int) -> int:
    """The fewest ring slots one call of ``op`` accepts (see the module docstring)."""
    if op == DECODE and discipline == WRITE_THEN_READ:
        return window + qmax - 1
    return 0 if window == 1 else window - 1


@dataclass(frozen=True)
class Request:
    """One request of a call: state slot, first new position, and its rows ``[first, first + length)`` of the
    packed inputs."""

    slot: int
    start: int
    first: int
    length: int


@dataclass(frozen=True)
class Call:
    ratio: int
    dim: int
    overlap: bool
    channels: int
    window: int
    ring: int
    requests: tuple[Request, ...]


def _tensor(x: object, argument: str, dtype: torch.dtype, dims: int, device: torch.device | None) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{argument}: must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype != dtype:
        raise TypeError(f"{argument}: must have dtype {dtype}, got {x.dtype}")
    require(x.dim() == dims, argument, f"must be {dims}-D, got {x.dim()}-D")
    require(x.is_contiguous(), argument, "must be contiguous")
    require(device is None or x.device == device, argument, f"must be on {device} like score, got {x.device}")
    return x


def parse_call(
    op: str,
    discipline: str | None,
    score: object,
    latent: object,
    cu_seqlens: object,
    start_pos: object,
    state: object,
    state_index: object,
    ratio: object,
    overlap: object,
    ape: object,
    ring_rule: str = "safe",
) -> Call:
    """Check a call; ``ring_rule`` other than "safe" plants the mutants' wrong size checks:
    "one_short" (write-then-read ``W + q - 2``), "seed" (``r + q - 1`` whatever the overlap), "none"."""
    r = require_positive_int(ratio, "ratio")
    if not isinstance(overlap, bool):
        raise TypeError(f"overlap: must be a bool, got {type(overlap).__name__}")
    require(not overlap or r == OVERLAP_RATIO, "overlap", f"overlapping windows need ratio 4, got ratio {r}")
    score_t = _tensor(score, "score", torch.float32, 2, None)
    device = score_t.device
    latent_t = _tensor(latent, "latent", torch.float32, 2, device)
    require(latent_t.shape == score_t.shape, "latent", f"must have the shape of score {list(score_t.shape)}")
    total, c = (int(n) for n in score_t.shape)
    coff = 2 if overlap else 1
    require(c > 0 and c % coff == 0, "score", f"must have a positive number of channels divisible by {coff}")
    cu_t = _tensor(cu_seqlens, "cu_seqlens", torch.int32, 1, device)
    start_t = _tensor(start_pos, "start_pos", torch.int32, 1, device)
    index_t = _tensor(state_index, "state_index", torch.int32, 1, device)
    state_t = _tensor(state, "state", torch.float32, 4, device)
    n_slots, ring = int(state_t.shape[0]), int(state_t.shape[1])
    require(
        tuple(state_t.shape[2:]) == (2, c),
        "state",
        f"must be [N, S, 2, {c}] (score, latent), got {state_t.shape}",
    )
    if ape is not None:
        ape_t = _tensor(ape, "ape", torch.float32, 2, device)
        require(tuple(ape_t.shape) == (r, c), "ape", f"must be [{r}, {c}] (offset within group, channel)")
    require(cu_t.numel() >= 2, "cu_seqlens", "must hold B + 1 >= 2 offsets")
    b = cu_t.numel() - 1
    require(start_t.numel() == b, "start_pos", f"must hold one start per request ({b})")
    require(index_t.numel() == b, "state_index", f"must hold one state slot per request ({b})")
    cu = [int(v) for v in cu_t.tolist()]
    starts = [int(v) for v in start_t.tolist()]
    slots = [int(v) for v in index_t.tolist()]
    require(cu[0] == 0 and cu[-1] == total, "cu_seqlens", f"must run from 0 to the {total} input rows, got {cu}")
    lengths = [cu[i + 1] - cu[i] for i in range(b)]
    require(all(n >= 1 for n in lengths), "cu_seqlens", f"every request needs >= 1 new position, got {lengths}")
    require(all(s >= 0 for s in starts), "start_pos", f"must be >= 0, got {starts}")
    require(all(0 <= k < n_slots for k in slots), "state_index", f"must lie in [0, {n_slots}), got {slots}")
    require(len(set(slots)) == b, "state_index", f"requests must own distinct state slots, got {slots}")
    w = coff * r
    need = {
        "safe": safe_ring(op, discipline, w, max(lengths)),
        "one_short": safe_ring(op, discipline, w, max(lengths)) - 1,
        "seed": r + max(lengths) - 1,
        "none": 0,
    }.get(ring_rule)
    if need is None:
        raise fail("ring_rule", f"must be safe, one_short, seed or none, got {ring_rule!r}")
    require(ring >= need, "state", f"a ring of {ring} slots is below the safe {need} for W = {w} ({discipline})")
    requests = tuple(Request(slots[i], starts[i], cu[i], lengths[i]) for i in range(b))
    return Call(r, c // coff, bool(overlap), c, w, ring, requests)
