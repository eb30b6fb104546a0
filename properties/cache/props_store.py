"""Properties of quantize_store: exact bytes, public layouts, -1 slots, untouched bytes, and
quantize-then-dequantize as the identity on grid values (docs/cache-properties.md).

Every check builds its tensors on ``impl.device``, fills the cache with a poison pattern so unwritten or wrongly
written bytes show, calls ``impl.fn`` with the contract signature and compares with the exact reference.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from properties.cache.checks import (
    HUNT_EXAMPLES,
    StoreCase,
    as_dtype,
    cheap_refusal,
    compare_cache,
    compare_rows,
    decode_at,
    describe,
    expected_cache,
    layers_of,
    memo,
    poison_bytes,
    refusal,
    run_store,
    shown_values,
    storable,
    store_case,
)
from properties.cache.common import (
    cache_layout,
    pad_offsets,
    store_options,
)
from properties.cache.frozen import F32_SCALE_BOUNDARY, NO_ROWS, STORED_BF16_OVERFLOW, STORED_NAN
from properties.cache.strategies import (
    f32,
    grid_store_examples,
    grid_values_for,
    store_examples,
)
from properties.compare import Lane, Mismatch
from properties.registry import Implementation
from properties.runner import BAD_INPUT, Property
from reference.accounting import block_payload_bytes, page_bytes


def _check_refused(impl: Implementation, case: StoreCase, why: str) -> None:
    """A call the reference refuses: ValueError, and the cache as it was."""
    try:
        got = run_store(impl, case, case.rows, case.slots, case.poison)
    except ValueError:
        return
    compare_cache(
        "quantize_store changed the cache of a refused call", case.layout, case.poison, got, layers=case.layers
    )
    raise Mismatch("quantize_store", detail=f"expected ValueError ({why}); the call returned")


def check_store_refuses_bad_rows(impl: Implementation, example: dict[str, Any]) -> None:
    """A stored row the reference refuses (NaN, infinity, a RoPE value beyond bf16; the first stored row made NaN
    where the example has none): ValueError, and the cache as it was."""
    case = store_case(example, impl.convention or "")
    if refusal(case) is None and case.stored:
        first, _ = case.stored[0]
        rows = [list(r) for r in case.rows]
        rows[first][0] = math.nan
        case = replace(case, rows=rows)
    why = refusal(case)
    if why is not None:
        _check_refused(impl, case, why)


def check_store_matches_reference(impl: Implementation, example: dict[str, Any]) -> None:
    case = storable(store_case(example, impl.convention or ""))
    got = run_store(impl, case, case.rows, case.slots, case.poison)
    expected, free, choices = expected_cache(case)
    stored = "; ".join(f"slot {s}: {shown_values(case.rows[i])}" for i, s in case.stored)
    compare_cache(
        "quantize_store bytes",
        case.layout,
        expected,
        got,
        free_bits=free,
        choices=choices,
        context=f"; {stored} (layer {case.layer} of {case.layers})",
        layers=case.layers,
    )


def check_store_writes_only_its_rows(impl: Implementation, example: dict[str, Any]) -> None:
    """Run twice, on the poison and on its complement: a byte is written iff it ends equal in both runs."""
    case = storable(store_case(example, impl.convention or ""), cheap=True)
    layout, fmt = case.layout, case.rowfmt
    assert block_payload_bytes(fmt, layout.rows, 1) == layout.rows * fmt.data_bytes + layout.rows * fmt.scale_bytes
    assert page_bytes(fmt, layout.rows, 1) == layout.block_bytes
    first = run_store(impl, case, case.rows, case.slots, case.poison)
    second = run_store(impl, case, case.rows, case.slots, bytes(b ^ 0xFF for b in case.poison))
    written = {p for p, (a, b) in enumerate(zip(first, second, strict=True)) if a == b}
    required: set[int] = set()
    optional: set[int] = set()
    for _, slot in case.stored:
        data_at, scale_at = case.offsets(slot)
        required.update(range(data_at, data_at + fmt.data_bytes), range(scale_at, scale_at + fmt.scale_bytes))
        optional.update(scale_at + at for at in pad_offsets(layout))
    required -= optional
    if len(required | optional) != len(case.stored) * fmt.row_bytes:
        raise AssertionError("harness: stored rows' spans overlap or miss the accounted row bytes")
    outside = sorted(written - required - optional)
    missing = sorted(required - written)
    lanes: list[Lane] = [(describe(layout, p, case.layers), "untouched", "written") for p in outside]
    lanes += [(describe(layout, p, case.layers), "written", "untouched") for p in missing]
    if lanes:
        raise Mismatch(
            "quantize_store writes",
            lanes,
            detail=f"{len(outside)} byte(s) written outside the stored rows' {fmt.row_bytes}-byte public spans, "
            f"{len(missing)} byte(s) of them left unwritten (slots {case.slots}, {layout.arrangement} layout)",
        )


def check_store_skips_minus_one(impl: Implementation, example: dict[str, Any]) -> None:
    """Storing with rows at slot -1 (garbage: NaN, inf, huge) equals storing the other rows alone. Stored rows the
    reference refuses are left out; a NaN row at slot -1 is added where the example has none."""
    case = store_case(example, impl.convention or "")
    pairs = [
        (r, s) for r, s in zip(case.rows, case.slots, strict=True) if s == -1 or cheap_refusal(case.rowfmt, r) is None
    ]
    if all(s != -1 for _, s in pairs):
        pairs.insert(len(pairs) // 2, ([math.nan] * case.rowfmt.dims, -1))
    rows, slots = [r for r, _ in pairs], [s for _, s in pairs]
    try:
        with_padding = run_store(impl, case, rows, slots, case.poison)
    except ValueError as err:
        raise Mismatch(
            "quantize_store", detail=f"raised ValueError({err}) for rows at slot -1, which must not be read"
        ) from err
    kept = [i for i, s in enumerate(slots) if s != -1]
    alone = run_store(impl, case, [rows[i] for i in kept], [slots[i] for i in kept], case.poison)
    compare_cache(
        "quantize_store with -1 slots vs. without those rows",
        case.layout,
        alone,
        with_padding,
        context=f"; slots {slots}",
        layers=case.layers,
    )


def grid_case(example: dict[str, Any], fmt: str) -> StoreCase:
    return memo("grid", example, fmt, lambda: _grid_case(example, fmt))  # type: ignore[no-any-return]


def _grid_case(example: dict[str, Any], convention: str) -> StoreCase:
    fmt, dtype, arithmetic = store_options(convention)
    layout = cache_layout(fmt, example["rows_per_block"])
    rows = [grid_values_for(spec, layout.fmt) for spec, _ in example["rows"]]
    layers, layer = layers_of(example)
    poison = poison_bytes(example["poison"], example["num_blocks"] * layers * layout.block_bytes)
    slots = [slot for _, slot in example["rows"]]
    return StoreCase(fmt, layout, rows, slots, poison, layers, layer, dtype, arithmetic)


def check_store_grid_roundtrip(impl: Implementation, example: dict[str, Any]) -> None:
    """Grid values stored by the implementation decode (by the reference) to themselves."""
    case = grid_case(example, impl.convention or "")
    got = run_store(impl, case, case.rows, case.slots, case.poison)
    compare_rows(
        "quantize_store then reference decode: grid values do not come back",
        [decode_at(case, got, slot) for _, slot in case.stored],
        [case.rows[i] for i, _ in case.stored],
        f" (slots {case.slots})",
    )


def check_store_layers_do_not_alias(impl: Implementation, example: dict[str, Any]) -> None:
    """Every layer of a cache of several in turn gets its own rows (the example's, times ``layer + 1``) at the same
    slots: afterwards each layer's pages hold exactly its own rows' bytes and nothing else changed (a writer
    addressing any part of layer ``l`` in another layer's page overwrites that layer)."""
    case = store_case(example, impl.convention or "")
    usable = [i for i, _ in case.stored if cheap_refusal(case.rowfmt, case.rows[i]) is None]
    slots = [s if i in usable else -1 for i, s in enumerate(case.slots)]
    layered = replace(case, slots=slots)
    stores = [
        (layer, as_dtype([[f32(v * (layer + 1)) for v in row] for row in case.rows], case.dtype))
        for layer in range(case.layers)
    ]
    stores = [(layer, rows) for layer, rows in stores if refusal(replace(layered, rows=rows)) is None]
    cache = case.poison
    for layer, rows in stores:
        cache = run_store(impl, layered, rows, slots, cache, layer=layer)
    expected, free, choices = expected_cache(layered, stores)
    compare_cache(
        f"quantize_store into layers {[layer for layer, _ in stores]} of {case.layers} in turn",
        case.layout,
        expected,
        cache,
        free_bits=free,
        choices=choices,
        context=f"; slots {slots}",
        layers=case.layers,
    )


PROPERTIES = [
    Property(
        "quant_store_matches_reference",
        "quantize_store",
        store_examples(),
        check_store_matches_reference,
        examples=(NO_ROWS, F32_SCALE_BOUNDARY),
        doc="the whole cache after the call equals the reference's: stored rows' bytes at their public offsets, "
        "-1 rows skipped, every other byte untouched; arbitrary values (ties, subnormals, saturation, scale "
        "boundaries, the amax floor); rows the reference refuses are moved to slot -1",
        hunt_examples=HUNT_EXAMPLES,
    ),
    Property(
        "quant_store_refuses_bad_rows",
        "quantize_store",
        store_examples(),
        check_store_refuses_bad_rows,
        examples=(STORED_BF16_OVERFLOW, STORED_NAN),
        doc="a stored row with NaN/inf or a bf16-overflowing RoPE value: ValueError and the cache unchanged",
        hunt_examples=HUNT_EXAMPLES,
        group=BAD_INPUT,
    ),
    Property(
        "quant_store_grid_roundtrip",
        "quantize_store",
        grid_store_examples(),
        check_store_grid_roundtrip,
        doc="values on the format's grid times a representable scale decode (reference) to themselves",
        hunt_examples=HUNT_EXAMPLES,
    ),
    Property(
        "quant_store_writes_only_its_rows",
        "quantize_store",
        store_examples(),
        check_store_writes_only_its_rows,
        examples=(NO_ROWS, STORED_BF16_OVERFLOW, STORED_NAN),
        doc="the bytes written are exactly the stored rows' data and scale parts at the public layout offsets, "
        "the accounted row bytes each (pad byte optional); nothing else in the cache changes",
        hunt_examples=HUNT_EXAMPLES,
    ),
    Property(
        "quant_store_layers_do_not_alias",
        "quantize_store",
        store_examples(min_layers=2),
        check_store_layers_do_not_alias,
        doc="rows stored into every layer of a multi-layer cache in turn: each layer's pages hold exactly its own "
        "rows (data and scales), no layer's bytes land in another's",
        hunt_examples=HUNT_EXAMPLES,
    ),
    Property(
        "quant_store_skips_minus_one",
        "quantize_store",
        store_examples(),
        check_store_skips_minus_one,
        examples=(NO_ROWS,),
        doc="rows at slot -1 (NaN, inf or huge garbage) are neither read nor written; the call with them equals "
        "the call without them",
        hunt_examples=HUNT_EXAMPLES,
    ),
]
