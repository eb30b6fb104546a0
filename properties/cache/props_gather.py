"""Properties of gather_dequantize: every value read back equals the reference decoding of the stored bytes, in any
read order and with repeats (docs/cache-properties.md)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import torch

from properties.cache.checks import (
    HUNT_EXAMPLES,
    StoreCase,
    cache_tensor,
    compare_rows,
    decode_at,
    layers_of,
    memo,
    poison_bytes,
)
from properties.cache.common import (
    cache_layout,
)
from properties.cache.strategies import (
    mix,
    raw_cache_examples,
)
from properties.compare import Mismatch
from properties.registry import Implementation
from properties.runner import Property


def _gather(
    impl: Implementation, case: StoreCase, cache: bytes, reads: list[int], layer: int | None = None
) -> list[list[float]]:
    slots_t = torch.tensor(reads, dtype=torch.int64, device=impl.device)
    cache_t = cache_tensor(cache, case, impl.device)
    which = case.layer if layer is None else layer
    out = impl.fn(cache_t, slots_t, fmt=case.fmt, rows_per_block=case.layout.rows, layer=which)
    if bytes(cache_t.cpu().reshape(-1).tolist()) != cache:
        raise Mismatch("gather_dequantize", detail="the cache changed during a read")
    if not isinstance(out, torch.Tensor) or out.dtype != torch.float32:
        raise Mismatch("gather_dequantize", detail=f"must return f32[R, d], got {type(out).__name__} {out!r:.80}")
    if tuple(out.shape) != (len(reads), case.rowfmt.dims):
        raise Mismatch(
            "gather_dequantize", detail=f"shape {tuple(out.shape)}, expected {(len(reads), case.rowfmt.dims)}"
        )
    result: list[list[float]] = out.cpu().tolist()
    return result


def raw_cache(example: dict[str, Any], fmt: str) -> tuple[StoreCase, bytes]:
    """A cache of hashed bytes whose read slots hold finite codes and scales that keep values within float32."""
    return memo("raw", example, fmt, lambda: _raw_cache(example, fmt))  # type: ignore[no-any-return]


def _raw_cache(example: dict[str, Any], fmt: str) -> tuple[StoreCase, bytes]:
    layout = cache_layout(fmt, example["rows_per_block"])
    rowfmt, seed, span = layout.fmt, example["seed"], example["scale_span"]
    layers, layer = layers_of(example)
    cache = bytearray(poison_bytes(seed % 256, example["num_blocks"] * layers * layout.block_bytes))
    case = StoreCase(fmt, layout, [], [], bytes(cache), layers, layer)
    for page, slot in itertools.product(range(layers), sorted(set(example["reads"]))):
        data_at, scale_at = case.offsets(slot, page)
        h = [mix(seed, (page * 1024 + slot) * 4096 + j) for j in range(rowfmt.row_bytes)]
        data = bytearray(x & 0xFF for x in h[: rowfmt.data_bytes])
        if rowfmt.element == "e4m3":
            data = (
                bytearray(b ^ 1 if b & 0x7F == 0x7F else b for b in data[: rowfmt.quantized_bytes])
                + data[rowfmt.quantized_bytes :]
            )
        for j in range(rowfmt.bf16_dims):
            at = rowfmt.quantized_bytes + 2 * j + 1
            if (data[at] & 0x7F) == 0x7F and data[at - 1] & 0x80:
                data[at] &= 0xBF  # exponent all ones: clear one of its bits
        scales = bytearray(x & 0xFF for x in h[rowfmt.data_bytes :])
        for g in range(rowfmt.groups):
            pick = h[rowfmt.data_bytes + g] >> 8
            if rowfmt.scale_kind == "e4m3":
                scales[g] = pick % 0x7F
            elif rowfmt.scale_kind == "ue8m0":
                scales[g] = max(0, min(246, 127 + pick % (2 * span + 1) - span))
            else:
                k = max(-100, min(119, pick % (2 * span + 1) - span))
                scales[4 * g : 4 * g + 4] = (((k + 127) << 23) & 0xFFFFFFFF).to_bytes(4, "little")
        cache[data_at : data_at + rowfmt.data_bytes] = data
        cache[scale_at : scale_at + rowfmt.scale_bytes] = scales
    return replace(case, poison=bytes(cache)), bytes(cache)


def check_gather_matches_stored_bytes(impl: Implementation, example: dict[str, Any]) -> None:
    """Gather equals the reference decoding of whatever bytes the slots hold (pad and padding ignored)."""
    case, cache = raw_cache(example, impl.convention or "")
    got = _gather(impl, case, cache, example["reads"])
    expected = [decode_at(case, cache, slot) for slot in example["reads"]]
    compare_rows("gather_dequantize", expected, got, f" (slots {example['reads']})")


def check_gather_layers_do_not_alias(impl: Implementation, example: dict[str, Any]) -> None:
    """A cache of several layers, each holding its own bytes at the read slots: reading the slots from each layer
    gives that layer's decoding (a reader taking any part of a row from another layer's page reads that layer)."""
    case, cache = raw_cache(example, impl.convention or "")
    for layer in range(case.layers):
        got = _gather(impl, case, cache, example["reads"], layer)
        expected = [decode_at(case, cache, slot, layer) for slot in example["reads"]]
        compare_rows(
            f"gather_dequantize from layer {layer} of {case.layers}", expected, got, f" (slots {example['reads']})"
        )


PROPERTIES = [
    Property(
        "gather_matches_stored_bytes",
        "gather_dequantize",
        raw_cache_examples(),
        check_gather_matches_stored_bytes,
        doc="every gathered value equals the reference decoding of the slot's bytes, for any finite codes "
        "(including codes no quantizer writes), any read order and repeats",
        hunt_examples=HUNT_EXAMPLES,
    ),
    Property(
        "gather_layers_do_not_alias",
        "gather_dequantize",
        raw_cache_examples(min_layers=2),
        check_gather_layers_do_not_alias,
        doc="reading the same slots from every layer of a multi-layer cache gives each layer's own values",
        hunt_examples=HUNT_EXAMPLES,
    ),
]
