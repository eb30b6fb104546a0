"""Properties of norm_rope_store, the tail of the fused compressor path: RMSNorm, RoPE, then quantize and store
(docs/cache-properties.md).

The norm's inverse square root is irrational, and a float32 kernel may round the normed row to bf16 before
quantizing it, so stored bytes are compared with ``reference.norm_rope.faithful`` rather than byte for byte: each
stored scale, element and bf16 value must be what quantizing some row within ``SLACK`` of the exact one gives.
Every other byte of the cache must be as it was.
"""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import Any

import torch

from properties.cache.checks import HUNT_EXAMPLES, StoreCase, cache_tensor, describe, memo, store_case
from properties.cache.strategies import cos_sin_table, norm_rope_examples, norm_weights
from properties.compare import Mismatch
from properties.registry import Implementation
from properties.runner import Property
from reference.formats import QuantizedRow
from reference.norm_rope import faithful, norm_rope_row

ROPE_DIM = 64
"""The RoPE dimensions of every DeepSeek V4 / V4.1 cache row (the last 64 of 512 or 128)."""


def norm_case(example: dict[str, Any], fmt: str) -> tuple[StoreCase, list[float], list[list[float]]]:
    """The store case, the weights and the cos / sin table an example stands for in ``fmt`` (memoized)."""

    def build() -> tuple[StoreCase, list[float], list[list[float]]]:
        case = store_case(example, fmt)
        return (
            case,
            norm_weights(example["weight_seed"], case.rowfmt.dims),
            cos_sin_table(example["table_seed"], ROPE_DIM),
        )

    return memo("norm_rope", example, fmt, build)  # type: ignore[no-any-return]


def check_norm_rope_faithful(impl: Implementation, example: dict[str, Any]) -> None:
    case, weight, table = norm_case(example, impl.convention or "")
    fmt, layout = case.rowfmt, case.layout
    cache = cache_tensor(case.poison, case, impl.device)
    impl.fn(
        torch.tensor(case.rows, dtype=torch.float32, device=impl.device).reshape(len(case.rows), fmt.dims),
        torch.tensor(weight, dtype=torch.float32, device=impl.device),
        torch.tensor(table, dtype=torch.float32, device=impl.device),
        torch.tensor(example["positions"], dtype=torch.int64, device=impl.device),
        torch.tensor(case.slots, dtype=torch.int64, device=impl.device),
        cache,
        fmt=case.fmt,
        rows_per_block=layout.rows,
        layer=case.layer,
        eps=example["eps"],
        rope_dim=ROPE_DIM,
    )
    got = bytes(cache.cpu().reshape(-1).tolist())
    written: set[int] = set()
    for i, slot in case.stored:
        data_at, scale_at = case.offsets(slot)
        written.update(range(data_at, data_at + fmt.data_bytes), range(scale_at, scale_at + fmt.scale_bytes))
        row = QuantizedRow(got[data_at : data_at + fmt.data_bytes], got[scale_at : scale_at + fmt.scale_bytes])
        why = memo(
            "norm_rope_verdict",
            example,
            f"{case.fmt} {i} {row.joined().hex()}",
            functools.partial(_verdict, case, example, weight, table, i, row),
        )
        if why is not None:
            raise Mismatch(
                f"norm_rope_store slot {slot} (row {i}, position {example['positions'][i]}, eps {example['eps']})",
                detail=f"{why}; not what quantizing a row within 2^-7 of the exact normed and rotated row gives",
            )
    changed = [
        (describe(layout, at, case.layers), f"0x{case.poison[at]:02x}", f"0x{got[at]:02x}")
        for at in range(len(got))
        if got[at] != case.poison[at] and at not in written
    ]
    if changed:
        raise Mismatch("norm_rope_store wrote outside the stored rows", changed, detail=f"slots {case.slots}")


def _verdict(
    case: StoreCase, example: dict[str, Any], weight: list[float], table: list[list[float]], i: int, row: QuantizedRow
) -> str | None:
    """``faithful`` of one stored row against the exact normed and rotated row ``i`` (memoized per bytes)."""
    y, sizes = memo("norm_rope_exact", example, f"{case.fmt} {i}", lambda: _exact(case, example, weight, table, i))
    try:
        return faithful(case.rowfmt, row, y, sizes)
    except ValueError as err:
        return f"the stored bytes do not decode: {err}"


def _exact(
    case: StoreCase, example: dict[str, Any], weight: list[float], table: list[list[float]], i: int
) -> tuple[list[Fraction], list[Fraction]]:
    return exact_row(case.rows[i], weight, example["eps"], table[example["positions"][i]])


def exact_row(
    values: list[float], weight: list[float], eps: float, cos_sin: list[float]
) -> tuple[list[Fraction], list[Fraction]]:
    """The exact normed and rotated row of float ``values`` (``reference.norm_rope.norm_rope_row``) and each
    value's magnitude, ``cos_sin`` the row's position's entry of the table (cos, then sin)."""
    return norm_rope_row(
        [Fraction(v) for v in values],
        [Fraction(w) for w in weight],
        Fraction(eps),
        [Fraction(c) for c in cos_sin[: ROPE_DIM // 2]],
        [Fraction(s) for s in cos_sin[ROPE_DIM // 2 :]],
        ROPE_DIM,
    )


PROPERTIES = [
    Property(
        "norm_rope_store_faithful",
        "norm_rope_store",
        norm_rope_examples(),
        check_norm_rope_faithful,
        doc="each stored row is a faithful quantization of the exact RMSNorm-then-RoPE row (scales, elements and "
        "bf16 values within 2^-7 of it, rotated values relative to their terms); rows at slot -1 (garbage) are "
        "neither read nor written, and no other byte changes",
        hunt_examples=HUNT_EXAMPLES,
    ),
]
