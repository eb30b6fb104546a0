"""Properties of sparse_attention_fp8_kv: attention read in place from an FP8 paged cache equals the exact
attention over the rows the reference decodes at the lanes' slots, within sparse_attention's twice-torch rule
(docs/cache-properties.md).

The cache holds hashed bytes (finite codes, scales of 2^-2 .. 2^2, V4's bf16 values within 2^-6 .. 2^4) at every
slot a lane reads and a poison pattern elsewhere, so a reader that takes a row, a scale or a block from the wrong
place reads other values; the slots beyond the capacity and below -1 must be skipped without a read."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from properties.cache.checks import HUNT_EXAMPLES, StoreCase, cache_tensor, lane_rows, memo
from properties.cache.common import AttentionCall
from properties.cache.faulty_fp8_kv import LANE_RULES
from properties.cache.props_attention import DTYPES, call_unchanged, compare_with_exact
from properties.cache.props_gather import raw_cache
from properties.cache.strategies import fp8_kv_attention_examples, mix, out_of_range_lane
from properties.registry import Implementation
from properties.runner import Property


def attention_cache(example: dict[str, Any], fmt: str) -> tuple[StoreCase, bytes]:
    """``raw_cache``'s bytes with each read row's bf16 values (V4's 64 RoPE values, hashed over bf16's whole
    range there) redrawn within 2^-6 .. 2^4 in magnitude, so every score stays within a few hundred."""
    return memo("fp8_kv", example, fmt, lambda: _attention_cache(example, fmt))  # type: ignore[no-any-return]


def _attention_cache(example: dict[str, Any], fmt: str) -> tuple[StoreCase, bytes]:
    case, cache = raw_cache(example, fmt)
    rowfmt = case.rowfmt
    out = bytearray(cache)
    for slot in sorted(set(example["reads"])):
        data_at, _ = case.offsets(slot)
        for j in range(rowfmt.bf16_dims):
            h = mix(example["seed"], (slot + 1) * 8192 + j)
            bits = (h & 0x8000) | ((121 + (h >> 16) % 11) << 7) | ((h >> 8) & 0x7F)
            at = data_at + rowfmt.quantized_bytes + 2 * j
            out[at : at + 2] = bits.to_bytes(2, "little")
    return replace(case, poison=bytes(out)), bytes(out)


def slots_for(example: dict[str, Any], capacity: int) -> list[list[int]]:
    """The slot rows of an example: valid lanes name slots; -1 and out-of-range lanes as drawn; an empty row's
    lanes alternate -1 and a slot past the capacity."""
    rows = []
    for m, row in enumerate(example["lanes"]):
        if m in example["empty"]:
            rows.append([-1 if p % 2 == 0 else capacity + p for p in range(len(row))])
            continue
        rows.append(
            [
                value if kind == "valid" else -1 if kind == "minus_one" else out_of_range_lane(value, capacity)
                for kind, value in row
            ]
        )
    return rows


def check_matches_reference(impl: Implementation, example: dict[str, Any]) -> None:
    """Call the implementation on the example's cache and slots; compare with the exact attention over the
    decoded rows, and require every input unchanged."""
    case, cache = attention_cache(example, impl.convention or "")
    capacity = example["rows_per_block"] * example["num_blocks"]
    slots = slots_for(example, capacity)
    m, heads = len(example["q"]), len(example["q"][0])
    dtype = DTYPES[example["dtype"]]
    q = torch.tensor(example["q"], dtype=dtype, device=impl.device)
    cache_t = cache_tensor(cache, case, impl.device)
    slots_t = torch.tensor(slots, dtype=torch.int32, device=impl.device).reshape(m, -1)
    sink = torch.tensor(example["sinks"], dtype=torch.float32, device=impl.device)
    tensors = {"q": q, "cache": cache_t, "slots": slots_t, "sink": sink}
    shape = (m, heads, case.rowfmt.dims)
    out, lse = call_unchanged(impl, tensors, shape, scale=example["scale"], rows_per_block=example["rows_per_block"])
    kv, lanes = lane_rows(case, cache, slots)
    kv, lanes = kv.to(device=impl.device, dtype=dtype), lanes.to(impl.device)
    call = AttentionCall(q, kv, lanes, sink, example["scale"], case.rowfmt.dims, LANE_RULES)
    compare_with_exact(call, out, lse, f" (slots {slots}, sinks {example['sinks']}, {example['dtype']})")


PROPERTIES = [
    Property(
        "fp8_kv_attention_matches_reference",
        "sparse_attention_fp8_kv",
        fp8_kv_attention_examples(),
        check_matches_reference,
        doc="out and lse equal the exact attention over the reference decoding of the slots' rows within twice "
        "the float32 torch error; f32 and bf16 queries, -1 and out-of-range slots skipped, sinks finite or +-inf",
        hunt_examples=HUNT_EXAMPLES,
    ),
    Property(
        "fp8_kv_attention_empty_rows",
        "sparse_attention_fp8_kv",
        fp8_kv_attention_examples(empty_rows=True),
        check_matches_reference,
        doc="a row whose every slot is -1 or past the capacity gives out 0 and lse +inf, next to ordinary rows",
        hunt_examples=HUNT_EXAMPLES,
    ),
]
