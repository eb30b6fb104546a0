"""The exact reference as implementations of quantize_store, gather_dequantize and the sparse attention
operations, with the contract's torch signatures (origin "reference"): every format, every attention convention.
sparse_attention_bf16 has none: its exact result is sparse_attention's on the same bf16 values (every property
compares with it), and judging that result against itself would double the operation's share of the CI time.

They convert tensors to exact rationals (``Fraction(x)`` of a float is exact), call ``reference/`` and write the
results back: bytes as they are, attention results rounded once to float32.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import torch

from properties.cache.common import (
    ATTENTION_CONVENTIONS,
    FORMAT_CONVENTIONS,
    FP8_KV_CONVENTIONS,
    AttentionCall,
    CacheShape,
    cache_layout,
    exact_attention,
    gather_call,
    reference_decode_f32,
    reference_row,
    store_call,
    store_options,
    to_float32,
)
from properties.registry import Implementation
from reference.formats import QuantizedRow, quantize_row
from reference.norm_rope import norm_rope_row


def reference_store(convention: str) -> Callable[..., None]:
    """The exact quantize_store of ``convention`` (a format, optionally with ``bf16_rows`` / ``f32_scale``)."""
    _, dtype, arithmetic = store_options(convention)

    def reference_quantize_store(
        rows: torch.Tensor, slots: torch.Tensor, cache: torch.Tensor, *, fmt: str, rows_per_block: int, layer: int
    ) -> None:
        """Every row at a slot other than -1, quantized by ``reference.formats`` and placed at its public offsets
        in layer ``layer``'s pages."""
        shape, _ = store_call(rows, slots, cache, fmt, rows_per_block, layer, dtype)
        capacity = shape.capacity
        stored: list[tuple[int, QuantizedRow]] = []
        seen: set[int] = set()
        for i, slot in enumerate(slots.tolist()):
            if slot == -1:
                continue
            if not 0 <= slot < capacity:
                raise ValueError(f"slots[{i}]: must be -1 or in [0, {capacity}), got {slot}")
            if slot in seen:
                raise ValueError(f"slots[{i}]: slot {slot} is stored twice")
            seen.add(slot)
            values = tuple(rows[i].float().tolist())
            if not all(math.isfinite(v) for v in values):
                raise ValueError(f"rows[{i}]: holds NaN or infinity; no cache format stores them")
            try:
                stored.append((slot, reference_row(fmt, values, dtype, arithmetic)))
            except ValueError as err:
                raise ValueError(f"rows[{i}]: {err}") from err
        flat = cache.view(-1)
        for slot, row in stored:
            data_at, scale_at = shape.offsets(slot)
            flat[data_at : data_at + len(row.data)] = torch.tensor(list(row.data), dtype=torch.uint8)
            flat[scale_at : scale_at + len(row.scales)] = torch.tensor(list(row.scales), dtype=torch.uint8)

    return reference_quantize_store


reference_quantize_store = reference_store(FORMAT_CONVENTIONS[0])
"""The exact quantize_store of the contract's default options (float32 rows, exact scales), for every format."""


def _place(cache: torch.Tensor, shape: CacheShape, stored: list[tuple[int, QuantizedRow]]) -> None:
    """Write each stored row's data and scale parts at its slot's offsets."""
    flat = cache.view(-1)
    for slot, row in stored:
        data_at, scale_at = shape.offsets(slot)
        flat[data_at : data_at + len(row.data)] = torch.tensor(list(row.data), dtype=torch.uint8)
        flat[scale_at : scale_at + len(row.scales)] = torch.tensor(list(row.scales), dtype=torch.uint8)


def reference_norm_rope_store(
    *tensors: torch.Tensor, fmt: str, rows_per_block: int, layer: int, eps: float, rope_dim: int
) -> None:
    """Every row at a slot other than -1 normed and rotated by ``reference.norm_rope`` (exact but for the stated
    rounding of the inverse root), quantized by ``reference.formats`` and placed as quantize_store places it."""
    rows, weight, cos_sin, positions, slots, cache = tensors  # the contract's order
    shape, rowfmt = store_call(rows, slots, cache, fmt, rows_per_block, layer)
    w = [Fraction(v) for v in weight.tolist()]
    table = cos_sin.tolist()
    if len(w) != rowfmt.dims:
        raise ValueError(f"weight: must have {rowfmt.dims} values (one per row value), got {len(w)}")
    stored: list[tuple[int, QuantizedRow]] = []
    seen: set[int] = set()
    for i, (slot, p) in enumerate(zip(slots.tolist(), positions.tolist(), strict=True)):
        if slot == -1:
            continue
        if not 0 <= slot < shape.capacity or slot in seen:
            raise ValueError(f"slots[{i}]: must be -1 or a distinct slot in [0, {shape.capacity}), got {slot}")
        seen.add(slot)
        if not 0 <= p < len(table):
            raise ValueError(f"positions[{i}]: must be in [0, {len(table)}) (the rows of cos_sin), got {p}")
        values = rows[i].tolist()
        if not all(math.isfinite(v) for v in values):
            raise ValueError(f"rows[{i}]: holds NaN or infinity; no cache format stores them")
        cos = [Fraction(c) for c in table[p][: rope_dim // 2]]
        sin = [Fraction(c) for c in table[p][rope_dim // 2 :]]
        y, _ = norm_rope_row([Fraction(v) for v in values], w, Fraction(eps), cos, sin, rope_dim)
        stored.append((slot, quantize_row(rowfmt, y)))
    _place(cache, shape, stored)


def reference_gather_dequantize(
    cache: torch.Tensor, slots: torch.Tensor, *, fmt: str, rows_per_block: int, layer: int
) -> torch.Tensor:
    """The exact values of each slot's stored bytes in layer ``layer``, as float32 (``ValueError`` if one is not a
    float32)."""
    shape, rowfmt = gather_call(cache, slots, fmt, rows_per_block, layer)
    capacity = shape.capacity
    flat = bytes(cache.view(-1).tolist())
    out = []
    for i, slot in enumerate(slots.tolist()):
        if not 0 <= slot < capacity:
            raise ValueError(f"slots[{i}]: must be in [0, {capacity}), got {slot}")
        data_at, scale_at = shape.offsets(slot)
        row = reference_decode_f32(
            fmt, flat[data_at : data_at + rowfmt.data_bytes], flat[scale_at : scale_at + rowfmt.scale_bytes]
        )
        if row is None:
            raise ValueError(f"cache: slot {slot} stores a value that float32 cannot hold exactly")
        out.append(list(row))
    return torch.tensor(out, dtype=torch.float32).reshape(len(out), rowfmt.dims)


def reference_sparse_attention(*tensors: Any, **settings: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """``reference.attention`` on each query row, rounded once to float32; the contract's arguments and the
    convention bind as ``AttentionCall`` names them."""
    call = AttentionCall(*tensors, **settings)
    q, kv, indices, sink, dv = call.q, call.kv, call.indices, call.sink, call.dv
    if q.dim() != 3 or kv.dim() != 2 or indices.dim() != 2 or sink.shape != (q.shape[1],):
        raise ValueError("q, kv, indices, sink: must be [M, H, D], [N, D], i32[M, K] and f32[H]")
    outs, lses = [], []
    for result in exact_attention(call):
        outs.append([[to_float32(v) for v in head.out] for head in result])
        lses.append([to_float32(head.lse) for head in result])
    heads_n = q.shape[1]
    return (
        torch.tensor(outs, dtype=torch.float32).reshape(q.shape[0], heads_n, dv),
        torch.tensor(lses, dtype=torch.float32).reshape(q.shape[0], heads_n),
    )


def reference_sparse_attention_fp8_kv(
    *tensors: torch.Tensor, scale: float, rows_per_block: int, convention: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """``reference.formats`` decodes each valid slot's row of the one-layer cache (format ``convention``), then
    ``reference_sparse_attention`` runs on those rows under the operation's lane rules."""
    from properties.cache.checks import StoreCase, lane_rows
    from properties.cache.faulty_fp8_kv import LANE_RULES

    q, cache, slots, sink = tensors  # the contract's order
    layout = cache_layout(convention, rows_per_block)
    if cache.dim() != 2 or cache.dtype != torch.uint8 or cache.shape[1] != layout.block_bytes:
        raise ValueError(f"cache: must be u8[num_blocks, {layout.block_bytes}], got {cache.dtype}{list(cache.shape)}")
    data = bytes(cache.cpu().reshape(-1).tolist())
    case = StoreCase(convention, layout, [], [], data)
    kv, lanes = lane_rows(case, data, slots.cpu().tolist())
    return reference_sparse_attention(
        q.cpu(), kv.to(q.dtype), lanes, sink.cpu(), scale=scale, dv=kv.shape[1], convention=LANE_RULES
    )


def _named(fn: Callable[..., object], name: str, **fixed: object) -> Callable[..., object]:
    bound = functools.partial(fn, **fixed) if fixed else fn
    functools.update_wrapper(bound, fn)  # type: ignore[arg-type]
    bound.__name__ = name  # type: ignore[attr-defined]
    return bound


IMPLEMENTATIONS = [
    *(
        Implementation("quantize_store", "reference", reference_quantize_store, f, "reference")
        for f in FORMAT_CONVENTIONS
    ),
    *(
        Implementation("gather_dequantize", "reference", reference_gather_dequantize, f, "reference")
        for f in FORMAT_CONVENTIONS
    ),
    *(
        Implementation("norm_rope_store", "reference", reference_norm_rope_store, f, "reference")
        for f in FORMAT_CONVENTIONS
    ),
    *(
        Implementation(op, "reference", _named(fn, f"reference_{op}_{c}", convention=c), c, "reference")
        for op, fn, conventions in (
            ("sparse_attention", reference_sparse_attention, ATTENTION_CONVENTIONS),
            ("sparse_attention_fp8_kv", reference_sparse_attention_fp8_kv, FP8_KV_CONVENTIONS),
        )
        for c in conventions
    ),
]
