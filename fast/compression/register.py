"""Compression's fast implementations, registered with the contract (``properties.contract``) on import.

Prefill and decode, in torch and Triton (f32 rows; on CUDA, Triton also with bf16 rows, to check its
rounding); the Triton ones only where Triton is installed.
Each adapter has the contract's signature and returns ``(rows, store_rows)``: without a block table the store
slot of a row is its compressed row index ``j`` (-1 for a placeholder), as the contract asks.

The property suite builds CPU tensors. On a CUDA machine the Triton adapters check the call as given, copy the
inputs to the GPU, run there, and copy the results and the state (modified in place) back, so the suite checks
the compiled kernels.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from typing import Any

import torch

from fast.compression import Mode, compress_decode, compress_prefill, prepare
from properties.registry import REGISTRY, Implementation

Adapter = Callable[..., tuple[torch.Tensor, torch.Tensor]]


def _device_for(backend: str) -> torch.device | None:
    """Where to run: None (the inputs' own device) unless Triton must leave the CPU to compile."""
    if backend == "triton" and os.environ.get("TRITON_INTERPRET") != "1" and torch.cuda.is_available():
        return torch.device("cuda")
    return None


def compression_adapter(decode: bool, backend: str, out_dtype: torch.dtype) -> Adapter:
    """A contract-shaped callable for one (mode, backend, row dtype)."""
    fn = compress_decode if decode else compress_prefill

    def adapter(
        score: torch.Tensor,
        latent: torch.Tensor,
        cu_seqlens: torch.Tensor,
        start_pos: torch.Tensor,
        state: torch.Tensor,
        state_index: torch.Tensor,
        *,
        ratio: int,
        overlap: bool,
        ape: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        device = _device_for(backend)
        args = (score, latent, cu_seqlens, start_pos, state, state_index)
        if device is None or not isinstance(state, torch.Tensor) or state.device == device:
            result = fn(*args, ratio=ratio, overlap=overlap, ape=ape, out_dtype=out_dtype, backend=backend)
            return result.rows, result.store_slots
        # check the call as given (mixed devices, strides, dtypes), then run it on the GPU
        prepare(Mode.DECODE if decode else Mode.PREFILL, *args, ratio=ratio, overlap=overlap, ape=ape,
                out_dtype=out_dtype)  # fmt: skip
        move: Callable[[Any], Any] = lambda t: t.to(device) if isinstance(t, torch.Tensor) else t  # noqa: E731
        on_device = move(state)
        result = fn(move(score), move(latent), move(cu_seqlens), move(start_pos), on_device, move(state_index),
                    ratio=ratio, overlap=overlap, ape=move(ape), out_dtype=out_dtype, backend=backend)  # fmt: skip
        state.copy_(on_device.to(state.device))
        return result.rows.to(state.device), result.store_slots.to(state.device)

    adapter.__name__ = f"compress_{'decode' if decode else 'prefill'}_{backend}_{str(out_dtype).split('.')[-1]}"
    return adapter


VARIANTS = (("torch", torch.float32), ("triton", torch.float32), ("triton", torch.bfloat16))


def register() -> None:
    """torch and Triton with f32 rows; Triton with bf16 rows only where it compiles (CUDA), since the rounding
    routine is the same code in both modes (tests/test_fast_compression.py checks it bit for bit) and the
    interpreter is slow."""
    has_triton = importlib.util.find_spec("triton") is not None
    compiled = os.environ.get("TRITON_INTERPRET") != "1" and torch.cuda.is_available()
    for backend, dtype in VARIANTS:
        if backend == "triton" and not has_triton:
            continue
        if dtype == torch.bfloat16 and not compiled:
            continue
        name = backend if dtype == torch.float32 else f"{backend}_bf16"
        for decode in (False, True):
            op = "compression_decode" if decode else "compression_prefill"
            REGISTRY.register(
                Implementation(
                    op,
                    name,
                    compression_adapter(decode, backend, dtype),
                    convention="read_then_write" if decode else "reserve_max1",
                    origin="fast",
                    note=f"fast.compression ({backend}, {str(dtype).split('.')[-1]} rows)",
                )
            )


register()
