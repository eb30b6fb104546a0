"""Host-side checks and launch metadata shared by the torch and Triton compression backends.

``prepare`` validates every argument before anything runs on the device and returns a ``Plan``: the validated
tensors, the per-request counts read once to the host, the output size, and the ring's safe-size rule. A plan can
be built once per step and launched many times (the benchmark does that, as an engine would for every layer).

Conventions (docs/compression-kernels.md):

- Request ``b`` owns input rows ``cu_seqlens[b]:cu_seqlens[b+1]`` (``n_b`` new positions) starting at absolute
  position ``s_b = start_pos[b]``; ``e_b = s_b + n_b``.
- Prefill reserves ``max(1, nc_b)`` output rows, ``nc_b = e_b // r - s_b // r``; decode one per new position.
- The ring is read before it is written, and after a call it holds exactly what writing every new position in
  order would leave (the newest ``min(n_b, S)`` new positions are written), as ``reference.state`` models it.
- Safe ring size (``reference.state.min_safe_ring_size``, read_then_write): ``S >= W - 1``; a decode / verify
  step that may be rolled back (``rollback=True``) needs ``S >= W + q - 2`` for ``q`` = the most new positions
  of any request; ``W = 1`` needs no ring at all.

The checks of the call's contract arguments are ``fast.compression.checks.check_call``'s, with the ring rule
above and int32 positions; ``prepare`` adds the output dtype, rollback and the paged cache.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, fields
from typing import Any

import torch

from fast.compression.checks import CheckedCall, RingRule, check_call, dtype, placed, tensor
from reference.checks import fail, require, require_positive_int
from reference.layer import window_positions
from reference.state import READ_THEN_WRITE, min_safe_ring_size

FLOAT_OUT = (torch.float32, torch.bfloat16)


class Mode(enum.Enum):
    PREFILL = "prefill"
    DECODE = "decode"


@dataclass(frozen=True)
class Plan(CheckedCall):
    """A validated call (``CheckedCall``: the layer, the ring, the tensors and the per-request host ints) with
    its mode, output dtype, paged cache and output layout.

    block_table: i32[B, M] or None, with ``rows_per_block`` compressed rows per block; kv_cache: f32|bf16[rows,
    d] or None (rows are written at their store slots). kept: the new positions each request writes to its
    ring; row_counts: output rows per request; row_offsets: i32[B+1] on the device, first output row of each
    request (prefill: cumulative max(1, nc_b); decode: cu_seqlens); total_rows: R.
    """

    mode: Mode
    out_dtype: torch.dtype
    block_table: torch.Tensor | None
    rows_per_block: int
    kv_cache: torch.Tensor | None
    kept: tuple[int, ...]
    row_counts: tuple[int, ...]
    row_offsets: torch.Tensor
    total_rows: int

    @property
    def num_requests(self) -> int:
        return len(self.lengths)

    @property
    def total_inputs(self) -> int:
        return int(self.score.shape[0])

    @property
    def max_new(self) -> int:
        return max(self.lengths, default=0)


def completed_rows(start: int, length: int, ratio: int) -> int:
    """``nc = floor(e / r) - floor(s / r)``: groups whose last position lies in ``[s, e)``."""
    return (start + length) // ratio - start // ratio


def kept_positions(length: int, ring: int) -> int:
    """New positions a call writes to the ring: the newest ``min(n, S)`` (the others would be overwritten)."""
    return min(length, ring)


def min_ring_size(ratio: int, overlap: bool, lengths: list[int] | tuple[int, ...], rollback: bool = False) -> int:
    """The smallest ring a read_then_write call accepts: ``reference.state.min_safe_ring_size``, ``W - 1``, or
    ``W + q - 2`` when it may roll back (``q``: the most new positions of a request; no rollback without any)."""
    qmax = max(lengths, default=0)
    return min_safe_ring_size(ratio, overlap, max(qmax, 1), READ_THEN_WRITE, rollback and qmax > 0)


def read_then_write(mode: Mode, rollback: object) -> RingRule:
    """The ring rule of ``prepare``: :func:`min_ring_size`, for a call of ``mode`` that may roll back or not
    (checked with the rule: a bool, and only for decode)."""

    def rule(ratio: int, overlap: bool, lengths: tuple[int, ...]) -> tuple[int, str]:
        if not isinstance(rollback, bool):
            raise TypeError(f"rollback: must be a bool, got {type(rollback).__name__}")
        require(not rollback or mode is Mode.DECODE, "rollback", "only a decode / verify step can be rolled back")
        rolls_back = rollback and window_positions(ratio, overlap) > 1
        reckoned = "W + q - 2 (read_then_write, rollback)" if rolls_back else "W - 1 (read_then_write)"
        return min_ring_size(ratio, overlap, lengths, rollback), reckoned

    return rule


def check_backend_device(backend: str, device: torch.device) -> None:
    """Triton compiles for CUDA; on the CPU it runs only under TRITON_INTERPRET=1."""
    require(backend in ("torch", "triton"), "backend", f"must be 'torch' or 'triton', got {backend!r}")
    if backend == "triton" and device.type != "cuda":
        require(
            device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1",
            "score",
            f"the triton backend needs a CUDA tensor (or a CPU tensor with TRITON_INTERPRET=1), got {device}",
        )


def prepare(
    mode: Mode,
    *call: Any,
    out_dtype: torch.dtype = torch.float32,
    block_table: torch.Tensor | None = None,
    block_size: int | None = None,
    kv_cache: torch.Tensor | None = None,
    rollback: bool = False,
    **contract: Any,
) -> Plan:
    """Validate one call and compute its host metadata. Raises ValueError/TypeError naming the argument.

    ``call`` and ``contract``: the call's arguments, ``score, latent, cu_seqlens, start_pos, state, state_index``
    and ``ratio``, ``overlap``, ``ape`` (``fast.compression.checks.check_call``); the others as
    ``fast.compression.compress_prefill`` / ``compress_decode`` document them."""
    if out_dtype not in FLOAT_OUT:
        raise TypeError(f"out_dtype: must be torch.float32 or torch.bfloat16, got {out_dtype}")
    checked = check_call(*call, **contract, ring_rule=read_then_write(mode, rollback), int32_positions=True)
    device, r = checked.score.device, checked.ratio
    rows_per_block = 0
    if block_table is not None or block_size is not None:
        block_table, rows_per_block = _check_table(block_table, block_size, r, len(checked.lengths), device)
    if kv_cache is not None:
        kv_cache = _check_cache(kv_cache, block_table, checked.dim, device)
    if block_table is not None:
        _check_block_table(block_table, checked.starts, checked.lengths, r, rows_per_block, kv_cache)
    row_counts = _row_counts(mode, r, checked.starts, checked.lengths)
    offsets = [0]
    for count in row_counts:
        offsets.append(offsets[-1] + count)
    return Plan(
        **{f.name: getattr(checked, f.name) for f in fields(checked)},
        mode=mode,
        out_dtype=out_dtype,
        block_table=block_table,
        rows_per_block=rows_per_block,
        kv_cache=kv_cache,
        kept=tuple(kept_positions(n, checked.ring) for n in checked.lengths),
        row_counts=row_counts,
        row_offsets=checked.cu_seqlens if mode is Mode.DECODE else torch.tensor(offsets, dtype=torch.int32).to(device),
        total_rows=offsets[-1],
    )


def bounded_decode_plan(
    *tensors: torch.Tensor, max_new: int, out_dtype: torch.dtype = torch.float32, **options: Any
) -> Plan:
    """A decode plan built without reading a tensor back to the host, for a call inside a CUDA graph.

    Shapes, dtypes, devices and the ring's safe size for steps of up to ``max_new`` positions are checked; the
    per-request values are not (the Triton decode kernel reads offsets, starts and state slots on the device),
    so ``cu_seqlens``, ``start_pos`` and ``state_index`` must hold a valid call with no request longer than
    ``max_new``. In the plan, every request's ``lengths`` entry is that bound and its start ``ratio - 1`` (the
    start that completes the most rows), which only the tile sizes read; the torch backend cannot run it.
    """
    if out_dtype not in FLOAT_OUT:
        raise TypeError(f"out_dtype: must be torch.float32 or torch.bfloat16, got {out_dtype}")
    bound = require_positive_int(max_new, "max_new")
    rule = read_then_write(Mode.DECODE, False)
    checked = check_call(*tensors, ring_rule=rule, max_new=bound, **options)
    return Plan(
        **{f.name: getattr(checked, f.name) for f in fields(checked)},
        mode=Mode.DECODE,
        out_dtype=out_dtype,
        block_table=None,
        rows_per_block=0,
        kv_cache=None,
        kept=tuple(kept_positions(n, checked.ring) for n in checked.lengths),
        row_counts=checked.lengths,
        row_offsets=checked.cu_seqlens,
        total_rows=int(checked.score.shape[0]),
    )


def _row_counts(mode: Mode, ratio: int, starts: tuple[int, ...], lengths: tuple[int, ...]) -> tuple[int, ...]:
    """Output rows per request: prefill ``max(1, nc_b)``, decode one per new position."""
    if mode is Mode.PREFILL:
        return tuple(max(1, completed_rows(s, n, ratio)) for s, n in zip(starts, lengths, strict=True))
    return lengths


def _check_table(
    block_table: object, block_size: object, ratio: int, B: int, device: torch.device
) -> tuple[torch.Tensor, int]:
    """block_table (contiguous i32[B, blocks] on ``device``) and block_size (a multiple of the ratio) given
    together. Returns the table and the compressed rows per block."""
    require(block_table is not None, "block_table", "must be given with block_size")
    require(block_size is not None, "block_size", "must be given with block_table")
    bs = require_positive_int(block_size, "block_size")
    require(bs % ratio == 0, "block_size", f"must be a multiple of ratio {ratio}, got {bs}")
    table = tensor(block_table, "block_table")
    dtype(table, "block_table", torch.int32)
    require(table.dim() == 2 and table.shape[0] == B, "block_table", f"must be [B={B}, blocks]")
    placed(table, "block_table", device)
    return table, bs // ratio


def _check_cache(kv_cache: object, block_table: torch.Tensor | None, d: int, device: torch.device) -> torch.Tensor:
    """kv_cache: contiguous f32|bf16[rows, d] on ``device``, only with a block table to place its rows."""
    require(block_table is not None, "kv_cache", "needs block_table and block_size to place rows")
    cache = tensor(kv_cache, "kv_cache")
    dtype(cache, "kv_cache", *FLOAT_OUT)
    require(cache.dim() == 2 and cache.shape[1] == d, "kv_cache", f"must be [rows, {d}]")
    placed(cache, "kv_cache", device)
    return cache


def _check_block_table(
    block_table: torch.Tensor,
    starts: tuple[int, ...],
    lengths: tuple[int, ...],
    ratio: int,
    rows_per_block: int,
    kv_cache: torch.Tensor | None,
) -> None:
    """Every block a completed row lands in exists, is >= 0, and (with a cache) lies inside the cache."""
    table = block_table.tolist()
    width = int(block_table.shape[1])
    capacity = None if kv_cache is None else int(kv_cache.shape[0]) // rows_per_block
    for b, (s, n) in enumerate(zip(starts, lengths, strict=True)):
        first, end = s // ratio, (s + n) // ratio  # rows completed in this call: [first, end)
        if end <= first:
            continue
        need = (end - 1) // rows_per_block + 1
        require(width >= need, "block_table", f"is too short: request {b} needs {need} blocks, has {width}")
        for i in range(first // rows_per_block, need):
            block = table[b][i]
            if block < 0 or (capacity is not None and block >= capacity):
                bound = "inf" if capacity is None else capacity
                raise fail(
                    "block_table", f"entry [{b}, {i}] = {block} must name a block in [0, {bound}) for a stored row"
                )
