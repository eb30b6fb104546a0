"""Compression in plain torch: the readable twin of the Triton kernels (eager, float32, vectorized).

Names and shapes (shared with ``triton_kernels.py`` and ``reference.layer``):

    T  input rows (new positions of all requests, packed)     B  requests        R  output rows
    r  ratio      d  latent dim      C = d or 2d (overlap)    W = r or 2r        N, S  state slots, ring size
    score, latent   f32[T, C]         state  f32[N, S, 2, C]  (position p of a request at [slot, p % S])
    row_request     i64[R]  request of each output row         row_group  i64[R]  compressed row j
    row_valid       bool[R] the row completes a group (else zero row, store slot -1, position 0)
    entries         W window entries of row j: (group j + shift, offset k within it, channel half h)

Row j, channel c is ``sum_w softmax_w(x_w) v_w`` over the W entries, where entry w is position
``t = (j + shift_w) r + k_w`` with score ``x_w = score[t, h_w d + c] + ape[k_w, h_w d + c]`` and latent
``v_w = latent[t, h_w d + c]``; entries with ``t < 0`` are absent. A position before the request's start is read
from the ring, a new one from the inputs. Without overlap ``shift = 0, h = 0``; with overlap (r = 4) the current
group uses the second half (h = 1), the previous group (shift = -1) the first.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from fast.compression.plan import Mode, Plan


class CompressionResult(NamedTuple):
    """rows: f32|bf16[R, d]; store_slots: i64[R] (physical slot with a block table, else the compressed row j;
    -1 where no row); positions: i64[R] (``j * r``, 0 where no row)."""

    rows: torch.Tensor
    store_slots: torch.Tensor
    positions: torch.Tensor


def window_entries(ratio: int, overlap: bool, device: torch.device) -> tuple[torch.Tensor, ...]:
    """(shift, offset, half): i64[W] each, current group first."""
    k = torch.arange(ratio, device=device)
    if not overlap:
        zero = torch.zeros_like(k)
        return zero, k, zero
    return (
        torch.cat([torch.zeros_like(k), -torch.ones_like(k)]),
        torch.cat([k, k]),
        torch.cat([torch.ones_like(k), torch.zeros_like(k)]),
    )


class RowTargets(NamedTuple):
    """Which row each output row is: request i64[R], group j i64[R], valid bool[R]."""

    request: torch.Tensor
    group: torch.Tensor
    valid: torch.Tensor


def row_targets(plan: Plan) -> RowTargets:
    """Output row -> (request, compressed row j, completes?) without a device-to-host copy."""
    device = plan.score.device
    B, R, r = plan.num_requests, plan.total_rows, plan.ratio
    counts = torch.tensor(plan.row_counts, dtype=torch.int64, device=device)
    request = torch.repeat_interleave(torch.arange(B, device=device), counts, output_size=R)
    offsets = plan.row_offsets.to(torch.int64)
    local = torch.arange(R, device=device) - offsets[request]
    start = plan.start_pos.to(torch.int64)[request]
    if plan.mode is Mode.PREFILL:
        length = (plan.cu_seqlens[1:] - plan.cu_seqlens[:-1]).to(torch.int64)[request]
        completed = torch.div(start + length, r, rounding_mode="floor") - torch.div(start, r, rounding_mode="floor")
        return RowTargets(request, torch.div(start, r, rounding_mode="floor") + local, local < completed)
    position = start + local
    return RowTargets(request, torch.div(position, r, rounding_mode="floor"), (position + 1) % r == 0)


class StepInputs(NamedTuple):
    """The tensors of one call: score, latent f32[T, C]; state f32[N, S, 2, C]; ape f32[r, C] or None;
    cu_seqlens i32[B+1]; start_pos, state_index i32[B]."""

    score: torch.Tensor
    latent: torch.Tensor
    state: torch.Tensor
    ape: torch.Tensor | None
    cu_seqlens: torch.Tensor
    start_pos: torch.Tensor
    state_index: torch.Tensor


def step_inputs(plan: Plan) -> StepInputs:
    return StepInputs(plan.score, plan.latent, plan.state, plan.ape, plan.cu_seqlens, plan.start_pos, plan.state_index)


def gather_window(
    inputs: StepInputs, targets: RowTargets, *, ratio: int, overlap: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scores (APE added, -inf where absent) and latents (0 where absent) of every row's window: f32[R, W, d]."""
    score, latent, state, ape, cu_seqlens, start_pos, state_index = inputs
    T, C = score.shape
    S = state.shape[1]
    H = 2 if overlap else 1
    d = C // H
    shift, offset, half = window_entries(ratio, overlap, score.device)
    request, group, valid = targets
    t = (group[:, None] + shift[None, :]) * ratio + offset[None, :]  # [R, W] positions
    start = start_pos.to(torch.int64)[request][:, None]
    present = valid[:, None] & (t >= 0)
    from_input = t >= start
    input_row = (cu_seqlens.to(torch.int64)[request][:, None] + t - start).clamp(0, max(T - 1, 0))
    if T == 0:  # nothing to read from the inputs; keep the gather well-formed
        score = latent = torch.zeros(1, C, dtype=score.dtype, device=score.device)
    if S == 0:  # W = 1 without a ring: every entry is a new position
        state, S = torch.zeros(1, 1, 2, C, dtype=score.dtype, device=score.device), 1
    ring = state.view(-1, 2, H, d)
    ring_row = (state_index.to(torch.int64)[request][:, None] * S + t.remainder(S)).clamp(0, ring.shape[0] - 1)
    half_w = half[None, :].expand_as(t)
    x = torch.where(from_input[..., None], score.view(-1, H, d)[input_row, half_w], ring[ring_row, 0, half_w])
    v = torch.where(from_input[..., None], latent.view(-1, H, d)[input_row, half_w], ring[ring_row, 1, half_w])
    if ape is not None:
        x = x + ape.view(ratio, H, d)[offset, half][None]
    x = torch.where(present[..., None], x, float("-inf"))
    v = torch.where(present[..., None], v, 0.0)
    return x, v


def gated_rows(x: torch.Tensor, v: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """``sum_w softmax_w(x) v`` per row and channel: f32[R, W, d] twice -> f32[R, d], zero where not valid."""
    rows = (torch.softmax(x, dim=1) * v).sum(dim=1)
    return torch.where(valid[:, None], rows, 0.0)


def store_slots(
    targets: RowTargets, block_table: torch.Tensor | None, rows_per_block: int, ratio: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(store slot i64[R], position i64[R]); -1 / 0 where no row. slot = table[j // Bc] * Bc + j % Bc."""
    request, group, valid = targets
    if block_table is None:
        slot = group
    else:
        column = torch.div(group, rows_per_block, rounding_mode="floor").clamp(0, block_table.shape[1] - 1)
        slot = block_table.to(torch.int64)[request, column] * rows_per_block + group % rows_per_block
    minus_one = torch.full_like(slot, -1)
    return torch.where(valid, slot, minus_one), torch.where(valid, group * ratio, torch.zeros_like(group))


def kept_pairs(plan: Plan) -> tuple[torch.Tensor, torch.Tensor]:
    """Input rows of the newest min(n_b, S) positions of each request (what the ring keeps) and their ring rows
    in ``state.view(N * S, 2, C)``: i64[K]."""
    device = plan.score.device
    K = sum(plan.kept)
    if K == 0:
        empty = torch.zeros(0, dtype=torch.int64, device=device)
        return empty, empty
    kept = torch.tensor(plan.kept, dtype=torch.int64, device=device)
    request = torch.repeat_interleave(torch.arange(plan.num_requests, device=device), kept, output_size=K)
    first = torch.cumsum(kept, 0) - kept
    i = torch.arange(K, device=device) - first[request]
    n = (plan.cu_seqlens[1:] - plan.cu_seqlens[:-1]).to(torch.int64)[request]
    local = n - kept[request] + i  # the newest kept_b positions
    position = plan.start_pos.to(torch.int64)[request] + local
    source = plan.cu_seqlens.to(torch.int64)[request] + local
    return source, plan.state_index.to(torch.int64)[request] * plan.ring + position % plan.ring


def write_ring(
    state: torch.Tensor, score: torch.Tensor, latent: torch.Tensor, source: torch.Tensor, ring_row: torch.Tensor
) -> None:
    """state[slot, p % S] = (score, latent) of each kept position; call after every read of the ring."""
    N, S, _, C = state.shape
    flat = state.view(N * S, 2, C)
    flat[ring_row, 0] = score[source]
    flat[ring_row, 1] = latent[source]


def compress_step(
    inputs: StepInputs,
    targets: RowTargets,
    kept_source: torch.Tensor,
    kept_ring_row: torch.Tensor,
    block_table: torch.Tensor | None,
    kv_cache: torch.Tensor | None,
    *,
    ratio: int,
    overlap: bool,
    rows_per_block: int,
    out_dtype: torch.dtype,
) -> CompressionResult:
    """One call on precomputed indices. Without a cache there is no host synchronisation (the benchmark
    compiles this function); the cache write selects the rows that have a slot on the host."""
    x, v = gather_window(inputs, targets, ratio=ratio, overlap=overlap)
    rows = gated_rows(x, v, targets.valid)
    write_ring(inputs.state, inputs.score, inputs.latent, kept_source, kept_ring_row)
    slots, positions = store_slots(targets, block_table, rows_per_block, ratio)
    if kv_cache is not None:
        write_cache(kv_cache, rows, slots)
    return CompressionResult(rows.to(out_dtype), slots, positions)


def run(plan: Plan) -> CompressionResult:
    """Compression of a validated call in torch: rows, store slots, positions; the ring and cache updated."""
    targets = row_targets(plan)
    source, ring_row = kept_pairs(plan)
    return compress_step(
        step_inputs(plan),
        targets,
        source,
        ring_row,
        plan.block_table,
        plan.kv_cache,
        ratio=plan.ratio,
        overlap=plan.overlap,
        rows_per_block=plan.rows_per_block,
        out_dtype=plan.out_dtype,
    )


def write_cache(kv_cache: torch.Tensor, rows: torch.Tensor, slots: torch.Tensor) -> None:
    """kv_cache[slot] = row for every row with a slot (>= 0), rounded from f32 to the cache dtype."""
    keep = slots >= 0
    kv_cache[slots[keep]] = rows[keep].to(kv_cache.dtype)
