"""The checks of a compression call: the contract's arguments and the ring's safe size, before anything runs.

    check_call(score, latent, cu_seqlens, start_pos, state, state_index, *, ratio, overlap=False, ape=None,
               ring_rule, empty_requests=True) -> CheckedCall

``fast.compression.plan.prepare`` builds its plan on it, with the read_then_write rule of ``min_ring_size``;
the property suite's contract (``properties.compression.call.parse_call``) passes the rule of the declared
discipline (or a mutant's wrong one) and asks every request for at least one new position. Each check raises
TypeError (a wrong type or dtype) or ValueError, its message starting with the argument's name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import torch

from reference.checks import INT32_MAX, require
from reference.layer import window_positions

RingRule = Callable[[int, bool, tuple[int, ...]], tuple[int, str]]
"""``(ratio, overlap, lengths) -> (the fewest ring positions the call accepts, how that size is reckoned)``."""


@dataclass(frozen=True)
class CheckedCall:
    """A checked call: the layer (ratio ``r``, overlap, latent dim ``d``, channels ``C``, window ``W``), the ring
    (``N`` state slots of ``S`` positions), the tensors, and per request (host ints, read once) its first input
    row, first new position, number of new positions and state slot."""

    ratio: int
    overlap: bool
    dim: int
    channels: int
    window: int
    states: int
    ring: int
    score: torch.Tensor
    latent: torch.Tensor
    cu_seqlens: torch.Tensor
    start_pos: torch.Tensor
    state: torch.Tensor
    state_index: torch.Tensor
    ape: torch.Tensor | None
    firsts: tuple[int, ...]
    starts: tuple[int, ...]
    lengths: tuple[int, ...]
    slots: tuple[int, ...]


def check_call(
    score: torch.Tensor,
    latent: torch.Tensor,
    cu_seqlens: torch.Tensor,
    start_pos: torch.Tensor,
    state: torch.Tensor,
    state_index: torch.Tensor,
    *,
    ratio: int,
    overlap: bool = False,
    ape: torch.Tensor | None = None,
    ring_rule: RingRule,
    empty_requests: bool = True,
    int32_positions: bool = False,
    max_new: int | None = None,
) -> CheckedCall:
    """Check one call (shapes in ``fast.compression``'s docstring). ``ring_rule``: the safe ring size the call
    must meet; ``empty_requests``: whether a request may come without new positions (its state slot is then
    not read); otherwise every request needs at least one and there is at least one request;
    ``int32_positions``: every request ends by position 2**31 - 1 (the kernels compute positions in int32);
    ``max_new``: a bound on every request's new positions that stands in for reading the per-request values back
    to the host (``fast.compression.plan.bounded_decode_plan``), which are then not checked."""
    window = window_positions(cast(int, ratio), cast(bool, overlap))  # checks ratio, then overlap
    r = cast(int, ratio)
    score, latent, T, C = _check_inputs(score, latent, overlap)
    device = score.device
    _check_offsets(cu_seqlens, start_pos, state_index, device, 1 if empty_requests else 2)
    N, S = _check_state(state, C, device)
    if ape is not None:
        ape = _check_ape(ape, r, C, device)
    if max_new is None:
        firsts, lengths, starts, slots = _read_requests(
            cu_seqlens, start_pos, state_index, T, N, empty_requests, int32_positions
        )
    else:
        lengths, firsts, slots = (max_new,) * (int(cu_seqlens.numel()) - 1), (), ()
        starts = (r - 1,) * len(lengths)
    need, rule = ring_rule(r, overlap, lengths)
    require(
        S >= need,
        "state",
        f"a ring of {S} positions is below the safe size {need} = {rule} for W = {window} window positions",
    )
    return CheckedCall(
        r, overlap, C // (2 if overlap else 1), C, window, N, S, score, latent, cu_seqlens, start_pos, state,
        state_index, ape, firsts, starts, lengths, slots,
    )  # fmt: skip


def tensor(x: object, argument: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{argument}: must be a torch.Tensor, got {type(x).__name__}")
    return x


def dtype(x: torch.Tensor, argument: str, *dtypes: torch.dtype) -> None:
    if x.dtype not in dtypes:
        names = " or ".join(str(d).removeprefix("torch.") for d in dtypes)
        raise TypeError(f"{argument}: must have dtype {names}, got {str(x.dtype).removeprefix('torch.')}")


def shape(x: torch.Tensor, argument: str, expected: tuple[int, ...], meaning: str) -> None:
    require(tuple(x.shape) == expected, argument, f"must have shape {list(expected)} ({meaning}), got {list(x.shape)}")


def placed(x: torch.Tensor, argument: str, device: torch.device) -> None:
    """``x`` contiguous and on ``device`` (score's)."""
    require(x.is_contiguous(), argument, "must be contiguous")
    require(x.device == device, argument, f"must be on {device} like score, got {x.device}")


def _check_inputs(score: object, latent: object, overlap: bool) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    """score and latent: contiguous f32[T, C] on one device, C a positive multiple of the halves (2 with
    overlap). Returns them and ``(T, C)``."""
    score = tensor(score, "score")
    latent = tensor(latent, "latent")
    for name, x in (("score", score), ("latent", latent)):
        dtype(x, name, torch.float32)
        require(x.dim() == 2, name, f"must be 2-D [T, C], got {x.dim()}-D")
        placed(x, name, score.device)
    shape(latent, "latent", tuple(score.shape), "same as score")
    T, C = (int(n) for n in score.shape)
    halves = 2 if overlap else 1
    require(C > 0 and C % halves == 0, "score", f"must have a positive channel count divisible by {halves}, got {C}")
    return score, latent, T, C


def _check_offsets(
    cu_seqlens: object, start_pos: object, state_index: object, device: torch.device, least: int
) -> None:
    """cu_seqlens i32[B+1] with at least ``least`` entries, start_pos i32[B], state_index i32[B]: contiguous,
    on ``device``."""
    offsets = tensor(cu_seqlens, "cu_seqlens")
    starts = tensor(start_pos, "start_pos")
    slots = tensor(state_index, "state_index")
    for name, x in (("cu_seqlens", offsets), ("start_pos", starts), ("state_index", slots)):
        dtype(x, name, torch.int32)
        require(x.dim() == 1, name, f"must be 1-D, got {x.dim()}-D")
        placed(x, name, device)
    require(offsets.numel() >= least, "cu_seqlens", f"must hold B + 1 >= {least} offsets")
    B = int(offsets.numel()) - 1
    shape(starts, "start_pos", (B,), "one start per request")
    shape(slots, "state_index", (B,), "one state slot per request")


def _check_state(state: object, C: int, device: torch.device) -> tuple[int, int]:
    """state: contiguous f32[N, S, 2, C] on ``device`` with N >= 1. Returns ``(N, S)``."""
    state = tensor(state, "state")
    dtype(state, "state", torch.float32)
    require(state.dim() == 4, "state", f"must be 4-D [N, S, 2, C], got {state.dim()}-D")
    placed(state, "state", device)
    N, S = int(state.shape[0]), int(state.shape[1])
    shape(state, "state", (N, S, 2, C), "state slots, ring positions, score/latent, channels")
    require(N >= 1, "state", f"must have at least one state slot, got {list(state.shape)}")
    return N, S


def _check_ape(ape: object, ratio: int, C: int, device: torch.device) -> torch.Tensor:
    """ape: contiguous f32[ratio, C] on ``device``."""
    ape = tensor(ape, "ape")
    dtype(ape, "ape", torch.float32)
    shape(ape, "ape", (ratio, C), "one row per offset within the group")
    placed(ape, "ape", device)
    return ape


def _read_requests(
    cu_seqlens: torch.Tensor,
    start_pos: torch.Tensor,
    state_index: torch.Tensor,
    T: int,
    N: int,
    empty: bool,
    int32_positions: bool,
) -> tuple[tuple[int, ...], ...]:
    """The per-request host values (one device-to-host copy each), checked: ``cu_seqlens`` runs from 0 to T
    without decreasing (rising at every request unless ``empty``), starts are >= 0 (and requests end by
    position 2**31 - 1 with ``int32_positions``), and the requests with new positions own distinct state slots
    in [0, N). Returns ``(firsts, lengths, starts, slots)``."""
    cu = tuple(int(v) for v in cu_seqlens.tolist())
    starts = tuple(int(v) for v in start_pos.tolist())
    slots = tuple(int(v) for v in state_index.tolist())
    require(cu[0] == 0, "cu_seqlens", f"must start at 0, got {cu[0]}")
    lengths = tuple(cu[b + 1] - cu[b] for b in range(len(starts)))
    for b, n in enumerate(lengths):
        require(n >= 0, "cu_seqlens", f"must be non-decreasing (request {b} has length {n})")
        require(empty or n > 0, "cu_seqlens", f"every request needs >= 1 new position (request {b} has none)")
    require(cu[-1] == T, "cu_seqlens", f"must end at the number of input rows {T}, got {cu[-1]}")
    for b, (s, n) in enumerate(zip(starts, lengths, strict=True)):
        require(s >= 0, "start_pos", f"must be >= 0, got {s} for request {b}")
        require(not int32_positions or s + n <= INT32_MAX, "start_pos", f"request {b} ends past position 2**31 - 1")
    live = [b for b, n in enumerate(lengths) if n > 0]
    for b in live:
        require(0 <= slots[b] < N, "state_index", f"must lie in [0, {N}), got {slots[b]} for request {b}")
    used = [slots[b] for b in live]
    require(len(set(used)) == len(used), "state_index", "requests with new positions must own distinct state slots")
    return cu[:-1], lengths, starts, slots
