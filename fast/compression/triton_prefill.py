# mypy: disable-error-code="no-untyped-def,untyped-decorator"
"""The compression prefill kernels (``triton_kernels.py`` launches them).

- ``_prefill_rows_kernel``: one program per (tile of one request's output rows, block of channels), channel
  blocks fastest. The tile's request data is one host-built record (``prefill_tiles``), so addresses are
  scalars plus aranges; ring loads happen only in tiles that read before the request's start. One request (the
  usual long prefill): its start, length and state slot are launch arguments instead (``ONE_REQUEST``).
- The ring after a prefill holds each request's newest ``min(n, S)`` positions: what writing every position
  in order would leave. Only the first ``W / r`` rows of a request read its ring, so when they share the
  request's first tile, that tile's programs write the ring themselves after a barrier (``KEEP``; one launch in
  all). Otherwise (tiles of one row with overlap) ``_keep_kernel`` writes it in a second launch, on the same
  stream, so after every ring read.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fast.compression.plan import Plan
from fast.compression.triton_common import (
    _first_read,
    _keep_newest,
    _program,
    _read_channels,
    _request_fields,
    _store_rows,
    _window_mean,
)

TILE_FIELDS = 8
"""A prefill tile's int32 record: request, first row (within the request), start, first input row, state slot,
completed rows, first output row, reserved rows."""


@triton.jit
def _prefill_rows_kernel(
    score_ptr,
    latent_ptr,
    ape_ptr,
    state_ptr,
    tiles_ptr,
    table_ptr,
    table_stride,
    out_ptr,
    slot_ptr,
    pos_ptr,
    cache_ptr,
    R: tl.constexpr,
    D: tl.constexpr,
    C: tl.constexpr,
    OVERLAP: tl.constexpr,
    HAS_APE: tl.constexpr,
    S: tl.constexpr,
    ROWS_PER_BLOCK: tl.constexpr,
    HAS_TABLE: tl.constexpr,
    WRITE_CACHE: tl.constexpr,
    OUT_BF16: tl.constexpr,
    CACHE_BF16: tl.constexpr,
    W: tl.constexpr,
    BLOCK_R: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_C: tl.constexpr,
    POLY_EXP: tl.constexpr,
    EVICT: tl.constexpr,
    cu_ptr,
    one_start,
    one_length,
    one_slot,
    one_completed,
    one_reserved,
    ONE_REQUEST: tl.constexpr,
    KEEP: tl.constexpr,
    BLOCK_P: tl.constexpr,
):
    """One (tile of a request's output rows, block of channels). The tile's request data is one record of
    ``tiles_ptr`` (``TILE_FIELDS``), or, for a call of ``ONE_REQUEST``, launch arguments (no load to wait for),
    so every address below is a scalar plus an arange. ``KEEP``: a request's first tile, the only one that reads
    its ring, also writes it, after its reads (a barrier between), for the channels it read."""
    tile, pid_c, cols, col_ok = _program(D, BLOCK_C)
    if ONE_REQUEST:
        request = 0
        row0 = tile * BLOCK_R
        start = one_start
        cu0 = 0
        slot = one_slot
        completed = one_completed
        out0 = 0
        reserved = one_reserved
    else:
        record = tiles_ptr + tile * 8  # TILE_FIELDS
        request = tl.load(record)
        row0 = tl.load(record + 1)
        start = tl.load(record + 2)
        cu0 = tl.load(record + 3)
        slot = tl.load(record + 4)
        completed = tl.load(record + 5)
        out0 = tl.load(record + 6)
        reserved = tl.load(record + 7)
    local = row0 + tl.arange(0, BLOCK_R)
    valid = local < completed
    group = start // R + local
    first_read = _first_read(start // R + row0, R, OVERLAP)
    acc = _window_mean(
        score_ptr, latent_ptr, ape_ptr, state_ptr, start, cu0, slot, group, valid, first_read < start, cols,
        col_ok, R, D, C, OVERLAP, HAS_APE, S, W, BLOCK_K, POLY_EXP, EVICT,
    )  # fmt: skip
    _store_rows(
        out_ptr, slot_ptr, pos_ptr, cache_ptr, table_ptr, table_stride, out0 + local, local < reserved, valid,
        request, group, cols, col_ok, acc, pid_c, R, D, ROWS_PER_BLOCK, HAS_TABLE, WRITE_CACHE, OUT_BF16,
        CACHE_BF16,
    )  # fmt: skip
    if KEEP:
        if row0 == 0:
            if ONE_REQUEST:
                length = one_length
            else:
                length = tl.load(cu_ptr + request + 1) - cu0
            kept = tl.minimum(length, S)
            channels, channel_ok = _read_channels(cols, col_ok, D, OVERLAP)
            tl.debug_barrier()  # every ring read of this program happens before any of its ring writes
            _keep_newest(
                score_ptr, latent_ptr, state_ptr, cu0, start, slot, length, kept, 0, channels, channel_ok, C, S,
                BLOCK_P,
            )  # fmt: skip


@triton.jit
def _keep_kernel(
    score_ptr,
    latent_ptr,
    state_ptr,
    state_index_ptr,
    cu_ptr,
    start_ptr,
    C: tl.constexpr,
    S: tl.constexpr,
    BLOCK_P: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    """Prefill: the newest min(n, S) positions of each request into its ring (all C channels)."""
    request, _, cols, col_ok = _program(C, BLOCK_C)
    start, cu0, length, slot = _request_fields(cu_ptr, start_ptr, state_index_ptr, request)
    kept = tl.minimum(length, S)
    _keep_newest(
        score_ptr, latent_ptr, state_ptr, cu0, start, slot, length, kept, 0, cols[None, :], col_ok[None, :], C, S,
        BLOCK_P,
    )  # fmt: skip


def prefill_tiles(plan: Plan, block_r: int) -> torch.Tensor:
    """i32[tiles, TILE_FIELDS] on the plan's device: each request's reserved rows cut into tiles of block_r."""
    reserved = torch.tensor(plan.row_counts, dtype=torch.int64)
    per_request = (reserved + block_r - 1) // block_r
    request = torch.repeat_interleave(torch.arange(plan.num_requests), per_request)
    first_tile = torch.cumsum(per_request, 0) - per_request
    row0 = (torch.arange(request.numel()) - first_tile[request]) * block_r
    starts = torch.tensor(plan.starts, dtype=torch.int64)
    lengths = torch.tensor(plan.lengths, dtype=torch.int64)
    cu = torch.cumsum(lengths, 0) - lengths
    slots = torch.tensor(plan.slots, dtype=torch.int64)
    completed = (starts + lengths) // plan.ratio - starts // plan.ratio
    out0 = torch.cumsum(reserved, 0) - reserved
    fields = [request, row0, starts[request], cu[request], slots[request], completed[request], out0[request],
              reserved[request]]  # fmt: skip
    return torch.stack(fields, dim=1).to(torch.int32).to(plan.score.device)
