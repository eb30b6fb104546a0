# mypy: disable-error-code="no-untyped-def,untyped-decorator"
"""Sliding-window index rows in Triton (docs/indexing.md, "Window order"), and the window's block release in torch
(docs/indexing.md, "Window block release").

    window_indices(*, window, seqlen, start_pos, order, device="cpu")  -> i32[R, W]
    decode_window_indices(positions, *, window, order)                 -> i32[B, window]
    window_release(seq_lens, step_lens, *, window, block_size)         -> i32[B]

Prefill (``start_pos == 0``): R = seqlen rows of W = min(window, seqlen) lanes; query i lists positions
``max(0, i - window + 1) .. i`` oldest first, then -1. Decode: one row of ``window`` ring slots per query at
position p (position t lives in slot ``t % window``), oldest first; while the ring fills (``p < window - 1``)
the empty lanes come last (``order="v4"``) or first (``"v4.1"``). One program per tile of rows x lanes.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fast.indexing import validate as v


@triton.jit
def _prefill_kernel(out_ptr, seqlen, lanes, window, BR: tl.constexpr, BL: tl.constexpr):
    i = tl.program_id(0) * BR + tl.arange(0, BR)
    c = tl.program_id(1) * BL + tl.arange(0, BL)
    first = tl.maximum(i - window + 1, 0)
    pos = first[:, None] + c[None, :]
    value = tl.where(pos <= i[:, None], pos, -1)
    tl.store(
        out_ptr + i.to(tl.int64)[:, None] * lanes + c[None, :], value, mask=(i < seqlen)[:, None] & (c < lanes)[None, :]
    )


@triton.jit
def _decode_kernel(positions_ptr, out_ptr, requests, window, V41: tl.constexpr, BR: tl.constexpr, BL: tl.constexpr):
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    c = tl.program_id(1) * BL + tl.arange(0, BL)
    p = tl.load(positions_ptr + r, mask=r < requests, other=0).to(tl.int64)
    filled = tl.minimum(p + 1, window)
    if V41:
        lane = c[None, :] - (window - filled)[:, None]
    else:
        lane = c[None, :] + tl.zeros_like(filled)[:, None]
    live = (lane >= 0) & (lane < filled[:, None])
    t = p[:, None] - filled[:, None] + 1 + lane
    value = tl.where(live, t % window, -1).to(tl.int32)
    tl.store(
        out_ptr + r.to(tl.int64)[:, None] * window + c[None, :],
        value,
        mask=(r < requests)[:, None] & (c < window)[None, :],
    )


def window_indices(
    *, window: int, seqlen: int, start_pos: int, order: str, device: str | torch.device = "cpu"
) -> torch.Tensor:
    """Prefill rows (``start_pos == 0``) or the one decode row of the query at ``start_pos`` (see above)."""
    w, n, p = v.check_window(window, seqlen, start_pos, order)
    dev = torch.device(device)
    v.backend_for("triton", dev)
    if p > 0:
        return decode_window_indices(torch.tensor([p], dtype=torch.int32, device=dev), window=w, order=order)
    lanes = min(w, n)
    out = torch.empty(n, lanes, dtype=torch.int32, device=dev)
    if out.numel() == 0:
        return out
    br, bl = v.lane_tiles()
    _prefill_kernel[(-(-n // br), -(-lanes // bl))](out, n, lanes, w, BR=br, BL=bl, num_warps=4)
    return out


def decode_window_indices(positions: torch.Tensor, *, window: int, order: str, validate: bool = True) -> torch.Tensor:
    """One row of ``window`` ring slots per request at ``positions[b]`` (>= 0): i32[B, window]."""
    pos = v.tensor(positions, "positions", v.INDEX_DTYPES, 1)
    v.check_window(window, 1, 0, order)
    if validate and pos.numel():
        lo, hi = (int(x) for x in torch.stack([pos.min(), pos.max()]).tolist())
        v.require(lo >= 0, "positions", f"must be >= 0, got {lo}")
        v.require(hi <= v.INT32_MAX, "positions", f"must fit int32, got {hi}")
    v.backend_for("triton", pos.device)
    out = torch.empty(pos.shape[0], window, dtype=torch.int32, device=pos.device)
    if out.numel() == 0:
        return out
    br, bl = v.lane_tiles()
    _decode_kernel[(-(-pos.shape[0] // br), -(-window // bl))](
        pos, out, pos.shape[0], window, V41=order == "v4.1", BR=br, BL=bl, num_warps=4
    )
    return out


def window_release(
    seq_lens: torch.Tensor, step_lens: torch.Tensor, *, window: int, block_size: int, validate: bool = True
) -> torch.Tensor:
    """Leading blocks of ``block_size`` positions each request may have released once a step of ``step_lens[b]``
    positions is scheduled, ``seq_lens[b]`` its tentative length counting them: ``max(0, S - (window + D - 1)) //
    block_size`` (the newest ``window + D - 1`` positions stay reserved until verification). i32[B], in int64
    arithmetic (torch: a few elementwise operations, no kernel of its own)."""
    a = v.check_release(seq_lens, step_lens, window=window, block_size=block_size, validate=validate)
    keep = a.step_lens.to(torch.int64) + (a.window - 1)
    return ((a.seq_lens.to(torch.int64) - keep).clamp_min(0) // a.block_size).to(torch.int32)
