"""Compression of packed requests through their state rings, in torch or Triton (docs/compression-kernels.md).

    compress_prefill(score, latent, cu_seqlens, start_pos, state, state_index, *, ratio, overlap=False,
                     ape=None, out_dtype=torch.float32, block_table=None, block_size=None, kv_cache=None,
                     backend="triton") -> CompressionResult(rows, store_slots, positions)
    compress_decode(...same..., rollback=False)  -> one output row per new position

Every argument is checked before anything runs (ValueError / TypeError naming the argument). ``prepare`` and
``launch`` split a call into the host part (validation, per-request counts: one small device-to-host copy) and
the device part, so a step's plan can be reused.
"""

from __future__ import annotations

from typing import Any

import torch

from fast.compression.naive import CompressionResult
from fast.compression.plan import Mode, Plan, check_backend_device, min_ring_size, prepare

__all__ = [
    "CompressionResult",
    "Mode",
    "Plan",
    "compress_decode",
    "compress_prefill",
    "launch",
    "min_ring_size",
    "prepare",
]


def launch(plan: Plan, backend: str = "triton") -> CompressionResult:
    """Run a validated call on ``backend`` ("triton" or "torch")."""
    check_backend_device(backend, plan.score.device)
    if backend == "torch":
        from fast.compression import naive

        return naive.run(plan)
    from fast.compression import triton_kernels

    return triton_kernels.run(plan)


def _call(mode: Mode, backend: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> CompressionResult:
    plan = prepare(mode, *args, **kwargs)
    return launch(plan, backend)


def compress_prefill(
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
    out_dtype: torch.dtype = torch.float32,
    block_table: torch.Tensor | None = None,
    block_size: int | None = None,
    kv_cache: torch.Tensor | None = None,
    backend: str = "triton",
) -> CompressionResult:
    """Chunked prefill: ``max(1, nc_b)`` rows per request (a placeholder is a zero row with slot -1).

    score, latent: f32[T, C]; cu_seqlens: i32[B+1]; start_pos: i32[B]; state: f32[N, S, 2, C] (in place);
    state_index: i32[B]; ape: f32[ratio, C]; block_table: i32[B, blocks] with block_size positions per block
    (store slots are then physical, else the compressed row index); kv_cache: f32|bf16[rows, d].
    """
    return _call(
        Mode.PREFILL,
        backend,
        (score, latent, cu_seqlens, start_pos, state, state_index),
        dict(
            ratio=ratio,
            overlap=overlap,
            ape=ape,
            out_dtype=out_dtype,
            block_table=block_table,
            block_size=block_size,
            kv_cache=kv_cache,
        ),
    )


def compress_decode(
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
    out_dtype: torch.dtype = torch.float32,
    block_table: torch.Tensor | None = None,
    block_size: int | None = None,
    kv_cache: torch.Tensor | None = None,
    rollback: bool = False,
    backend: str = "triton",
) -> CompressionResult:
    """Decode / verify: one row per new position, zero with slot -1 where the position completes no group.

    Same arguments as ``compress_prefill``. ``rollback=True`` declares that the step may later keep only a
    prefix of its positions; the ring must then hold ``W + q - 2`` positions (q = most new positions of a
    request) instead of ``W - 1``, so the inputs the shorter history needs survive the writes.
    """
    return _call(
        Mode.DECODE,
        backend,
        (score, latent, cu_seqlens, start_pos, state, state_index),
        dict(
            ratio=ratio,
            overlap=overlap,
            ape=ape,
            out_dtype=out_dtype,
            block_table=block_table,
            block_size=block_size,
            kv_cache=kv_cache,
            rollback=rollback,
        ),
    )
