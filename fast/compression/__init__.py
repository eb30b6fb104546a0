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

from fast.compression.naive import CompressionResult
from fast.compression.plan import Mode, Plan, bounded_decode_plan, check_backend_device, min_ring_size, prepare

__all__ = [
    "CompressionResult",
    "Mode",
    "Plan",
    "bounded_decode_plan",
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

        if sum(plan.row_counts) != plan.total_rows:
            raise ValueError("plan: a bounded decode plan (bounded_decode_plan) runs on the triton backend only")

        return naive.run(plan)
    from fast.compression import triton_kernels

    return triton_kernels.run(plan)


def compress_prefill(*call: Any, backend: str = "triton", **options: Any) -> CompressionResult:
    """Chunked prefill: ``max(1, nc_b)`` rows per request (a placeholder is a zero row with slot -1).

    score, latent: f32[T, C]; cu_seqlens: i32[B+1]; start_pos: i32[B]; state: f32[N, S, 2, C] (in place);
    state_index: i32[B]; ratio; overlap; ape: f32[ratio, C] (``checks.check_call``); out_dtype; block_table:
    i32[B, blocks] with block_size positions per block (store slots are then physical, else the compressed row
    index); kv_cache: f32|bf16[rows, d] (``prepare``).
    """
    return launch(prepare(Mode.PREFILL, *call, **options), backend)


def compress_decode(*call: Any, backend: str = "triton", **options: Any) -> CompressionResult:
    """Decode / verify: one row per new position, zero with slot -1 where the position completes no group.

    Same arguments as ``compress_prefill``, and ``rollback=False``: ``True`` declares that the step may later
    keep only a prefix of its positions; the ring must then hold ``W + q - 2`` positions (q = most new positions
    of a request) instead of ``W - 1``, so the inputs the shorter history needs survive the writes.
    """
    return launch(prepare(Mode.DECODE, *call, **options), backend)
