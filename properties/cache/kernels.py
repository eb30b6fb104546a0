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
(``fast.cache.attention_ws``, the default on FP8 caches), and the Gluon kernels on FP8 caches holding the
examples' rows exactly (``bf16_adapter``'s ``kv_format``): ``cache_ws_v4`` / ``cache_ws_v41`` (the default path
there) and ``cache_pair_v4`` / ``cache_pair_v41`` (``fast.cache.attention_pair``), in two conventions. The Triton ones
exist only where Triton is installed; where they run is ``properties.devices``'s policy (they declare that
device, so the property suite builds its tensors there).
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
    backend: str, convention: str, config: object = None, kernel: str = "", kv_format: str | None = None
) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """``sparse_attention`` at bf16 probabilities on ``backend``, in ``config`` (None: the default kernel;
    ``kernel`` names another in the implementation's name); with ``kv_format``, on the example's rows stored into
    a cache of that format (``fp8_cache_holding``), judged by the same rule."""
    invalid, empty = attention_convention(convention)

    def sparse_attention_bf16_impl(
        q: torch.Tensor, kv: torch.Tensor, indices: torch.Tensor, sink: torch.Tensor, *, scale: float, dv: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        check_bf16_attention(q, kv, dv)
        cache: dict[str, Any] = {}
        if kv_format is not None:
            kv, rows_per_block = fp8_cache_holding(kv, kv_format)
            cache = dict(kv_format=kv_format, rows_per_block=rows_per_block)
        return sparse_attention(
            q, kv, indices, sink, scale=scale, dv=dv, empty_row=empty, invalid=invalid, precision="bf16",
            backend=backend, config=config, **cache,
        )  # fmt: skip

    on = f"_{kv_format}" if kv_format else ""
    sparse_attention_bf16_impl.__name__ = f"sparse_attention_bf16_{kernel or backend}{on}_{invalid}_{empty}"
    return sparse_attention_bf16_impl


def fp8_cache_holding(rows: torch.Tensor, kv_format: str) -> tuple[torch.Tensor, int]:
    """A ``kv_format`` cache holding ``rows`` (bf16[n, 512]) at slots 0 .. n - 1 and no other slot, and its rows a
    block (the largest power of two up to 64 that divides n), stored by the torch twin of ``quantize_store``. The
    properties' rows (the 1/4 grid within +-2) are e4m3 codes times a power of two, which every FP8 format holds
    exactly; rows a cache would not hold exactly are refused (ValueError naming kv), so that a kernel judged on the
    cache answers for the rows it holds."""
    rows = rows.contiguous()  # a view's values are what the cache holds (the contract's rule 8)
    n = rows.shape[0]
    rows_per_block = min(64, n & -n) if n else 1
    fmt = cache_format(kv_format)
    cache = torch.zeros(n // rows_per_block, fmt.block_bytes(rows_per_block), dtype=torch.uint8, device=rows.device)
    slots = torch.arange(n, device=rows.device)
    quantize_store(rows.float(), slots, cache, fmt=kv_format, rows_per_block=rows_per_block, backend="torch")
    held = gather_dequantize(cache, slots, fmt=kv_format, rows_per_block=rows_per_block, backend="torch")
    if not torch.equal(held, rows.float()):
        raise ValueError(f"kv: rows a {kv_format} cache does not hold exactly (this implementation judges a "
                         "kernel on an FP8 cache by the rows it holds)")  # fmt: skip
    return cache, rows_per_block


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
FP8_CACHES = {"v41_fp8_528": "v41", "v4_584": "v4"}
"""The FP8 caches the Gluon kernels serve, and the word for each in an implementation's name."""
FP8_CACHE_CONVENTIONS = ("out_of_range+empty_zero", "minus_one_only+empty_nan")
"""The conventions the Gluon kernels are judged in on FP8 caches: both lane rules, both empty-row rules."""
if gluon_runs_here():
    from fast.cache.attention_ws import DEFAULT_TILES

    for c in BF16_CONVENTIONS:
        IMPLEMENTATIONS.append(
            Implementation("sparse_attention_bf16", "cache_ws", bf16_adapter("triton", c, DEFAULT_TILES[None], "ws"),
                           c, device="cuda", note="fast.cache.attention_ws (the warp-specialized kernel, sm_90)")
        )  # fmt: skip
    from fast.cache.attention_pair import Pair

    for c in FP8_CACHE_CONVENTIONS:
        for kv_format, short in FP8_CACHES.items():
            IMPLEMENTATIONS += [
                Implementation("sparse_attention_bf16", f"cache_ws_{short}",
                               bf16_adapter("triton", c, None, "ws", kv_format), c, device="cuda",
                               note=f"the default path on a {kv_format} cache (the warp-specialized kernel, sm_90)"),
                Implementation("sparse_attention_bf16", f"cache_pair_{short}",
                               bf16_adapter("triton", c, Pair(), "pair", kv_format), c, device="cuda",
                               note=f"fast.cache.attention_pair on a {kv_format} cache (sm_90)"),
            ]  # fmt: skip
