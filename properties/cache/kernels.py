"""The project's cache kernels (``fast.cache``) as implementations of the contract.

For every format convention: ``quantize_store`` and ``gather_dequantize`` in torch ("cache_torch") and Triton
("cache_triton"); for every attention convention (``INVALID+EMPTY``): ``sparse_attention`` in torch and Triton
at ``precision="f64"``: the kernels' lane handling, online softmax, sink and empty-row logic with float64
arithmetic, rounded once to f32. The suite's rule (twice the worst of four float32 torch evaluations, lane by
lane) cannot be met by float32 arithmetic summed in another order on lanes where the output cancels; the f32
and bf16 modes are checked against their own stated tolerances in tests/test_fast_cache.py
(docs/cache-kernels.md). ``sparse_attention_bf16``: both backends at ``precision="bf16"`` (probabilities
rounded to bf16 once), the operation's own precision; its Triton one only where Triton compiles (CUDA: on an
sm_90 GPU the default path runs the paired-warp-group kernel for these shapes), since the interpreter's bf16
casts are not the GPU's; on an sm_90 GPU also ``cache_ws``, the warp-specialized kernel on the same BF16 rows
(``fast.cache.attention_ws``, the default on FP8 caches). The Triton ones exist only where Triton is installed;
where they run is ``properties.devices``'s policy (they declare that device, so the property suite builds its
tensors there).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import torch

from fast.cache import cache_format, gather_dequantize, norm_rope_store, quantize_store, sparse_attention
from properties.cache.common import (
    ATTENTION_CONVENTIONS,
    BF16_CONVENTIONS,
    FORMAT_CONVENTIONS,
    FP8_KV_CONVENTIONS,
    attention_convention,
    check_bf16_attention,
)
from properties.cache.faulty_fp8_kv import LANE_RULES
from properties.devices import device_name, kernel_device
from properties.registry import Implementation


def layers_of(cache: torch.Tensor, fmt: str, rows_per_block: int) -> int:
    """The layers a contract cache holds: its width over the format's public block (at least 1, so a width that
    is not a whole number of blocks reaches the kernel's own check)."""
    width = int(cache.shape[1]) if cache.dim() == 2 else 0
    return max(1, width // cache_format(fmt).block_bytes(rows_per_block))


def store_adapter(backend: str) -> Callable[..., None]:
    def quantize_store_impl(
        rows: torch.Tensor, slots: torch.Tensor, cache: torch.Tensor, *, fmt: str, rows_per_block: int, layer: int
    ) -> None:
        layers = layers_of(cache, fmt, rows_per_block)
        quantize_store(
            rows, slots, cache, fmt=fmt, rows_per_block=rows_per_block, layers=layers, layer=layer, backend=backend
        )

    quantize_store_impl.__name__ = f"quantize_store_{backend}"
    return quantize_store_impl


def gather_adapter(backend: str) -> Callable[..., torch.Tensor]:
    def gather_dequantize_impl(
        cache: torch.Tensor, slots: torch.Tensor, *, fmt: str, rows_per_block: int, layer: int
    ) -> torch.Tensor:
        layers = layers_of(cache, fmt, rows_per_block)
        return gather_dequantize(
            cache, slots, fmt=fmt, rows_per_block=rows_per_block, layers=layers, layer=layer, backend=backend
        )

    gather_dequantize_impl.__name__ = f"gather_dequantize_{backend}"
    return gather_dequantize_impl


def norm_rope_adapter(backend: str) -> Callable[..., None]:
    def norm_rope_store_impl(*tensors: torch.Tensor, **options: Any) -> None:
        cache = tensors[5]  # rows, weight, cos_sin, positions, slots, cache: the contract's order
        layers = layers_of(cache, options["fmt"], options["rows_per_block"])
        norm_rope_store(*tensors, layers=layers, backend=backend, **options)

    norm_rope_store_impl.__name__ = f"norm_rope_store_{backend}"
    return norm_rope_store_impl


def attention_adapter(backend: str, convention: str) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    invalid, empty = attention_convention(convention)

    def sparse_attention_impl(
        q: torch.Tensor, kv: torch.Tensor, indices: torch.Tensor, sink: torch.Tensor, *, scale: float, dv: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return sparse_attention(
            q, kv, indices, sink, scale=scale, dv=dv, empty_row=empty, invalid=invalid, precision="f64", backend=backend
        )

    sparse_attention_impl.__name__ = f"sparse_attention_{backend}_{invalid}_{empty}"
    return sparse_attention_impl


def fp8_kv_adapter(backend: str, fmt: str) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    invalid, empty = attention_convention(LANE_RULES)

    def sparse_attention_fp8_kv_impl(
        *tensors: torch.Tensor, scale: float, rows_per_block: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        q, cache, slots, sink = tensors  # the contract's order
        # fast's argument is `indices`, whose refusal of a view would not name the contract's `slots`: copied
        return sparse_attention(
            q, cache, slots.contiguous(), sink, scale=scale, dv=q.shape[2], kv_format=fmt,
            rows_per_block=rows_per_block, empty_row=empty, invalid=invalid, precision="f64", backend=backend,
        )  # fmt: skip

    sparse_attention_fp8_kv_impl.__name__ = f"sparse_attention_fp8_kv_{backend}_{fmt}"
    return sparse_attention_fp8_kv_impl


def bf16_adapter(
    backend: str, convention: str, config: object = None, kernel: str = ""
) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """``sparse_attention`` at bf16 probabilities on ``backend``, in ``config`` (None: the default kernel;
    ``kernel`` names another in the implementation's name)."""
    invalid, empty = attention_convention(convention)

    def sparse_attention_bf16_impl(
        q: torch.Tensor, kv: torch.Tensor, indices: torch.Tensor, sink: torch.Tensor, *, scale: float, dv: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        check_bf16_attention(q, kv, dv)
        return sparse_attention(
            q, kv, indices, sink, scale=scale, dv=dv, empty_row=empty, invalid=invalid, precision="bf16",
            backend=backend, config=config,
        )  # fmt: skip

    sparse_attention_bf16_impl.__name__ = f"sparse_attention_bf16_{kernel or backend}_{invalid}_{empty}"
    return sparse_attention_bf16_impl


def bf16_backends() -> list[str]:
    """torch; Triton only where it compiles (on the CPU it would run the ``tl`` kernel interpreted, not the
    kernels this operation exists for)."""
    compiled = importlib.util.find_spec("triton") is not None and kernel_device("triton") is not None
    return ["torch", *(["triton"] if compiled else [])]


def gluon_runs_here() -> bool:
    """Whether the Gluon kernels run here: Triton compiling for an sm_90 GPU."""
    return bf16_backends()[-1] == "triton" and torch.cuda.get_device_capability()[0] == 9


def _kernel(op: str, backend: str, fn: Callable[..., Any], convention: str) -> Implementation:
    return Implementation(
        op,
        f"cache_{backend}",
        fn,
        convention,
        origin="fast",
        device=device_name(backend),
        note=f"fast.cache ({backend})",
    )


IMPLEMENTATIONS = [
    impl
    for backend in ["torch"] + (["triton"] if importlib.util.find_spec("triton") is not None else [])
    for impl in (
        *(_kernel("quantize_store", backend, store_adapter(backend), fmt) for fmt in FORMAT_CONVENTIONS),
        *(_kernel("gather_dequantize", backend, gather_adapter(backend), fmt) for fmt in FORMAT_CONVENTIONS),
        *(_kernel("norm_rope_store", backend, norm_rope_adapter(backend), fmt) for fmt in FORMAT_CONVENTIONS),
        *(
            _kernel("sparse_attention", backend, attention_adapter(backend, convention), convention)
            for convention in ATTENTION_CONVENTIONS
        ),
        *(_kernel("sparse_attention_fp8_kv", backend, fp8_kv_adapter(backend, f), f) for f in FP8_KV_CONVENTIONS),
    )
] + [_kernel("sparse_attention_bf16", b, bf16_adapter(b, c), c) for b in bf16_backends() for c in BF16_CONVENTIONS]
if gluon_runs_here():
    from fast.cache.attention_ws import DEFAULT_TILES

    for c in BF16_CONVENTIONS:
        IMPLEMENTATIONS.append(
            Implementation("sparse_attention_bf16", "cache_ws", bf16_adapter("triton", c, DEFAULT_TILES[None], "ws"),
                           c, device="cuda", note="fast.cache.attention_ws (the warp-specialized kernel, sm_90)")
        )  # fmt: skip
