"""The project's compression kernels (``fast.compression``) as implementations of the contract.

Prefill and decode, in torch and Triton (f32 rows; on CUDA, Triton also with bf16 rows, to check its rounding);
the Triton ones only where Triton is installed. Each adapter takes the contract's arguments and returns
``(rows, store_rows, positions)``: without a block table the store slot of a row is its compressed row index ``j``
(-1 for a placeholder), as the contract asks, and its position the kernel's RoPE position (``j r``, 0 for none).
Where they run is ``properties.devices``'s policy; the call is checked as the caller made it before a compiled
kernel's inputs are copied to the GPU.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from fast.compression import Mode, compress_decode, compress_prefill, prepare
from properties.devices import device_name, kernel_device, on_device
from properties.registry import Implementation

Adapter = Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
STATE = 4
"""Position of ``state`` (changed in place) among the contract's positional arguments."""


def compression_adapter(decode: bool, backend: str, out_dtype: torch.dtype) -> Adapter:
    """A contract-shaped callable for one (mode, backend, row dtype)."""
    fn = compress_decode if decode else compress_prefill

    def adapter(*call: Any, **contract: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        result = fn(*call, **contract, out_dtype=out_dtype, backend=backend)
        return result.rows, result.store_slots, result.positions

    check = partial(prepare, Mode.DECODE if decode else Mode.PREFILL, out_dtype=out_dtype)
    moved = on_device(adapter, backend, in_place=(STATE,), check=check)
    moved.__name__ = f"compress_{'decode' if decode else 'prefill'}_{backend}_{str(out_dtype).split('.')[-1]}"
    return moved


def _variants() -> list[tuple[str, torch.dtype]]:
    """torch and Triton with f32 rows; Triton with bf16 rows only where it compiles (CUDA), since the rounding
    routine is the same code in both modes (tests/test_fast_compression.py checks it bit for bit) and the
    interpreter is slow."""
    if importlib.util.find_spec("triton") is None:
        return [("torch", torch.float32)]
    compiled = kernel_device("triton") is not None
    return [("torch", torch.float32), ("triton", torch.float32), *([("triton", torch.bfloat16)] if compiled else [])]


IMPLEMENTATIONS = [
    Implementation(
        "compression_decode" if decode else "compression_prefill",
        backend if dtype == torch.float32 else f"{backend}_bf16",
        compression_adapter(decode, backend, dtype),
        convention="read_then_write" if decode else "reserve_max1",
        origin="fast",
        device=device_name(backend),
        note=f"fast.compression ({backend}, {str(dtype).split('.')[-1]} rows)",
    )
    for backend, dtype in _variants()
    for decode in (False, True)
]
