"""Properties of quantize_store and gather_dequantize: exact bytes, public layouts, -1 slots, untouched bytes, and
quantize-then-dequantize as the identity on grid values (docs/properties-formats.md).

Every check builds its tensors on ``impl.device``, fills the cache with a poison pattern so unwritten or wrongly
written bytes show, calls ``impl.fn`` with the contract signature and compares with the exact reference.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from properties.compare import Mismatch
from properties.formats_common import (
    cache_layout,
    equals_float,
    is_float32,
    pad_offsets,
    reference_decode,
    reference_decode_f32,
    reference_row,
)
from properties.registry import Implementation
from properties.runner import Property
from properties.strategies_formats import (
    garbage_row,
    grid_store_examples,
    grid_values_for,
    mix,
    raw_cache_examples,
    row_values,
    store_examples,
)
from reference.accounting import block_payload_bytes, page_bytes
from reference.cache_blocks import BlockLayout, slot_byte_offsets
from reference.formats import RowFormat

SHOWN_VALUES = 8  # row values quoted in a failure report


@dataclass(frozen=True)
class StoreCase:
    """One quantize_store call, expanded for a format."""

    fmt: str
    layout: BlockLayout
    rows: list[list[float]]
    slots: list[int]
    poison: bytes

    @property
    def rowfmt(self) -> RowFormat:
        return self.layout.fmt

    @property
    def stored(self) -> list[tuple[int, int]]:
        return [(i, s) for i, s in enumerate(self.slots) if s != -1]


def poison_bytes(seed: int, size: int) -> bytes:
    """A byte pattern no writer produces by accident over a whole row."""
    i = torch.arange(size, dtype=torch.int64)
    return bytes(((i * 97 + (i >> 8) * 29 + seed * 57 + 11) % 256).to(torch.uint8).tolist())


_EXPANDED: dict[tuple[str, str, str], Any] = {}


def _memo(kind: str, example: dict[str, Any], fmt: str, build: Callable[[], Any]) -> Any:
    """Expansions are pure functions of (example, format) and every property and mutant replays the same
    derandomized examples, so each is built once (callers never mutate the result)."""
    key = (kind, repr(example), fmt)
    if key not in _EXPANDED:
        if len(_EXPANDED) > 4096:
            _EXPANDED.clear()
        _EXPANDED[key] = build()
    return _EXPANDED[key]


def store_case(example: dict[str, Any], fmt: str) -> StoreCase:
    """The rows, slots and poisoned cache an example stands for in ``fmt`` (memoized)."""
    return _memo("store", example, fmt, lambda: _store_case(example, fmt))  # type: ignore[no-any-return]


def _store_case(example: dict[str, Any], fmt: str) -> StoreCase:
    layout = cache_layout(fmt, example["rows_per_block"])
    patterns = [row_values(p, layout.fmt) for p in example["patterns"]]
    rows = [
        patterns[p] if slot != -1 else garbage_row(garbage, patterns[p], k)
        for k, (p, slot, garbage) in enumerate(example["rows"])
    ]
    slots = [slot for _, slot, _ in example["rows"]]
    poison = poison_bytes(example["poison"], example["num_blocks"] * layout.block_bytes)
    return StoreCase(fmt, layout, rows, slots, poison)


def _tensors(
    rows: list[list[float]], slots: list[int], cache: bytes, layout: BlockLayout, device: str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    rows_t = torch.tensor(rows, dtype=torch.float32, device=device).reshape(len(rows), layout.fmt.dims)
    slots_t = torch.tensor(slots, dtype=torch.int64, device=device)
    cache_t = torch.tensor(list(cache), dtype=torch.uint8, device=device).reshape(-1, layout.block_bytes)
    return rows_t, slots_t, cache_t


def _store(impl: Implementation, case: StoreCase, rows: list[list[float]], slots: list[int], cache: bytes) -> bytes:
    """Run the implementation's quantize_store on a copy of ``cache``; the cache's bytes afterwards."""
    rows_t, slots_t, cache_t = _tensors(rows, slots, cache, case.layout, impl.device)
    impl.fn(rows_t, slots_t, cache_t, fmt=case.fmt, rows_per_block=case.layout.rows)
    if cache_t.dtype != torch.uint8 or cache_t.numel() != len(cache):
        raise Mismatch("quantize_store", detail="the cache tensor changed dtype or size")
    return bytes(cache_t.cpu().reshape(-1).tolist())


def describe(layout: BlockLayout, position: int) -> str:
    """Which part of the cache an absolute byte position belongs to."""
    fmt, rows = layout.fmt, layout.rows
    block, offset = divmod(position, layout.block_bytes)
    if offset >= layout.payload_bytes:
        return f"block {block} padding byte {offset - layout.payload_bytes}"
    if layout.arrangement == "sectioned":
        if offset < rows * fmt.data_bytes:
            row, part, at = offset // fmt.data_bytes, "data", offset % fmt.data_bytes
        else:
            rest = offset - rows * fmt.data_bytes
            row, part, at = rest // fmt.scale_bytes, "scale", rest % fmt.scale_bytes
    else:
        row, at = divmod(offset, fmt.row_bytes)
        part = "data" if at < fmt.data_bytes else "scale"
        at = at if part == "data" else at - fmt.data_bytes
    if part == "scale" and at >= fmt.scale_bytes - fmt.scale_pad_bytes:
        part = "pad"
    return f"slot {block * rows + row} (block {block} row {row}) {part} byte {at}"


def _shown(values: list[float]) -> str:
    more = f", ... ({len(values)} values)" if len(values) > SHOWN_VALUES else ""
    return "[" + ", ".join(repr(v) for v in values[:SHOWN_VALUES]) + more + "]"


def compare_cache(
    what: str,
    layout: BlockLayout,
    expected: bytes,
    got: bytes,
    *,
    free_bits: dict[int, int] | None = None,
    choices: dict[int, set[int]] | None = None,
    context: str = "",
) -> None:
    """Every byte equal, except bits in ``free_bits`` (either value allowed) and bytes with listed ``choices``."""
    if expected == got:
        return
    free_bits, choices = free_bits or {}, choices or {}
    lanes: list[tuple[tuple[int, ...], Any, Any]] = []
    for position, (e, g) in enumerate(zip(expected, got, strict=True)):
        if e == g or g in choices.get(position, ()) or not (e ^ g) & ~free_bits.get(position, 0):
            continue
        lanes.append(((position,), f"0x{e:02x}", f"0x{g:02x} at {describe(layout, position)}"))
    if lanes:
        first = describe(layout, lanes[0][0][0])
        raise Mismatch(what, lanes, detail=f"{len(lanes)} byte(s) differ, first at {first}{context}")


def _zero_sign_bits(fmt: RowFormat, values: list[float]) -> dict[int, int]:
    """Row data offset -> sign bits that may be set or clear, for -0.0 inputs (exact rationals have no -0)."""
    free: dict[int, int] = {}
    for j, v in enumerate(values):
        if v != 0 or math.copysign(1.0, v) > 0:
            continue
        if j >= fmt.quantized_dims:
            at, bit = fmt.quantized_bytes + 2 * (j - fmt.quantized_dims) + 1, 0x80
        elif fmt.element == "e4m3":
            at, bit = j, 0x80
        else:
            at, bit = j // 2, 0x8 << (4 * (j % 2))
        free[at] = free.get(at, 0) | bit
    return free


def row_refusal(fmt: str, values: list[float]) -> str | None:
    """Why the reference refuses to store a row (NaN, infinity, a RoPE value beyond bf16), or None."""
    if not all(math.isfinite(v) for v in values):
        return "holds NaN or infinity"
    try:
        reference_row(fmt, tuple(values))
    except ValueError as err:
        return str(err)
    return None


BF16_OVERFLOW = (2 - 2**-8) * 2.0**127  # float32 magnitudes from here on round to bf16 infinity


def cheap_refusal(fmt: RowFormat, values: list[float]) -> str | None:
    """``row_refusal`` without the reference: for float32 rows the reference refuses exactly NaN, infinity and a
    RoPE value that rounds to bf16 infinity (a float32 amax keeps every scale exponent within [-127, 127])."""
    if not all(math.isfinite(v) for v in values):
        return "holds NaN or infinity"
    if any(abs(v) >= BF16_OVERFLOW for v in values[fmt.quantized_dims :]):
        return "has a RoPE value that overflows bf16"
    return None


def refusal(case: StoreCase, *, cheap: bool = False) -> str | None:
    """Why the reference refuses the call (a stored row it cannot store), or None."""
    for i, _ in case.stored:
        why = cheap_refusal(case.rowfmt, case.rows[i]) if cheap else row_refusal(case.fmt, case.rows[i])
        if why is not None:
            return f"rows[{i}] is stored and {why}"
    return None


def expected_cache(case: StoreCase) -> tuple[bytes, dict[int, int], dict[int, set[int]]]:
    """The reference's cache after the call, with the sign bits of -0.0 inputs and the pad bytes left free."""
    out = bytearray(case.poison)
    free: dict[int, int] = {}
    choices: dict[int, set[int]] = {}
    for i, slot in case.stored:
        row = reference_row(case.fmt, tuple(case.rows[i]))
        data_at, scale_at = slot_byte_offsets(case.layout, slot)
        out[data_at : data_at + len(row.data)] = row.data
        out[scale_at : scale_at + len(row.scales)] = row.scales
        for at, bits in _zero_sign_bits(case.rowfmt, case.rows[i]).items():
            free[data_at + at] = bits
        for at in pad_offsets(case.layout):
            choices[scale_at + at] = {0, case.poison[scale_at + at]}
    return bytes(out), free, choices


def _check_refused(impl: Implementation, case: StoreCase, why: str) -> None:
    """A call the reference refuses: ValueError, and the cache as it was."""
    try:
        got = _store(impl, case, case.rows, case.slots, case.poison)
    except ValueError:
        return
    compare_cache("quantize_store changed the cache of a refused call", case.layout, case.poison, got)
    raise Mismatch("quantize_store", detail=f"expected ValueError ({why}); the call returned")


def check_store_matches_reference(impl: Implementation, example: dict[str, Any]) -> None:
    case = store_case(example, impl.convention or "")
    why = refusal(case)
    if why is not None:
        _check_refused(impl, case, why)
        return
    got = _store(impl, case, case.rows, case.slots, case.poison)
    expected, free, choices = expected_cache(case)
    stored = "; ".join(f"slot {s}: {_shown(case.rows[i])}" for i, s in case.stored)
    compare_cache(
        "quantize_store bytes", case.layout, expected, got, free_bits=free, choices=choices, context=f"; {stored}"
    )


def check_store_writes_only_its_rows(impl: Implementation, example: dict[str, Any]) -> None:
    """Run twice, on the poison and on its complement: a byte is written iff it ends equal in both runs."""
    case = store_case(example, impl.convention or "")
    why = refusal(case, cheap=True)
    if why is not None:
        _check_refused(impl, case, why)
        return
    layout, fmt = case.layout, case.rowfmt
    assert block_payload_bytes(fmt, layout.rows, 1) == layout.rows * fmt.data_bytes + layout.rows * fmt.scale_bytes
    assert page_bytes(fmt, layout.rows, 1) == layout.block_bytes
    first = _store(impl, case, case.rows, case.slots, case.poison)
    second = _store(impl, case, case.rows, case.slots, bytes(b ^ 0xFF for b in case.poison))
    written = {p for p, (a, b) in enumerate(zip(first, second, strict=True)) if a == b}
    required: set[int] = set()
    optional: set[int] = set()
    for _, slot in case.stored:
        data_at, scale_at = slot_byte_offsets(layout, slot)
        required.update(range(data_at, data_at + fmt.data_bytes), range(scale_at, scale_at + fmt.scale_bytes))
        optional.update(scale_at + at for at in pad_offsets(layout))
    required -= optional
    if len(required | optional) != len(case.stored) * fmt.row_bytes:
        raise AssertionError("harness: stored rows' spans overlap or miss the accounted row bytes")
    outside = sorted(written - required - optional)
    missing = sorted(required - written)
    lanes: list[tuple[tuple[int, ...], Any, Any]] = [
        ((p,), "untouched", f"written at {describe(layout, p)}") for p in outside
    ]
    lanes += [((p,), "written", f"untouched at {describe(layout, p)}") for p in missing]
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
        with_padding = _store(impl, case, rows, slots, case.poison)
    except ValueError as err:
        raise Mismatch(
            "quantize_store", detail=f"raised ValueError({err}) for rows at slot -1, which must not be read"
        ) from err
    kept = [i for i, s in enumerate(slots) if s != -1]
    alone = _store(impl, case, [rows[i] for i in kept], [slots[i] for i in kept], case.poison)
    compare_cache(
        "quantize_store with -1 slots vs. without those rows",
        case.layout,
        alone,
        with_padding,
        context=f"; slots {slots}",
    )


def grid_case(example: dict[str, Any], fmt: str) -> StoreCase:
    return _memo("grid", example, fmt, lambda: _grid_case(example, fmt))  # type: ignore[no-any-return]


def _grid_case(example: dict[str, Any], fmt: str) -> StoreCase:
    layout = cache_layout(fmt, example["rows_per_block"])
    rows = [grid_values_for(spec, layout.fmt) for spec, _ in example["rows"]]
    poison = poison_bytes(example["poison"], example["num_blocks"] * layout.block_bytes)
    return StoreCase(fmt, layout, rows, [slot for _, slot in example["rows"]], poison)


def _decode_at(case: StoreCase, cache: bytes, slot: int) -> tuple[float, ...] | str:
    """The reference decoding of a slot's bytes as floats, or why it has none."""
    fmt = case.rowfmt
    data_at, scale_at = slot_byte_offsets(case.layout, slot)
    data, scales = cache[data_at : data_at + fmt.data_bytes], cache[scale_at : scale_at + fmt.scale_bytes]
    try:
        values = reference_decode_f32(case.fmt, data, scales)
    except ValueError as err:
        return str(err)
    if values is None:
        exact = reference_decode(case.fmt, data, scales)
        wide = [float(v) for v in exact if not equals_float(v, float(v)) or not is_float32(float(v))]
        return f"decodes to values float32 cannot hold, such as {wide[:3]}"
    return values


def _compare_rows(what: str, expected: list[Any], got: list[list[float]], context: str) -> None:
    """Rows of floats equal lane by lane (-0.0 == 0.0); an expected row may be a reason it has no value."""
    lanes: list[tuple[tuple[int, ...], Any, Any]] = []
    for r, (e_row, g_row) in enumerate(zip(expected, got, strict=True)):
        if isinstance(e_row, str):
            lanes.append(((r,), "decodable bytes", e_row))
        elif list(e_row) != list(g_row):
            lanes.extend(((r, j), e, g) for j, (e, g) in enumerate(zip(e_row, g_row, strict=True)) if not e == g)
    if lanes:
        raise Mismatch(what, lanes, detail=f"{len(lanes)} value(s) differ{context}")


def check_store_grid_roundtrip(impl: Implementation, example: dict[str, Any]) -> None:
    """Grid values stored by the implementation decode (by the reference) to themselves."""
    case = grid_case(example, impl.convention or "")
    got = _store(impl, case, case.rows, case.slots, case.poison)
    _compare_rows(
        "quantize_store then reference decode: grid values do not come back",
        [_decode_at(case, got, slot) for _, slot in case.stored],
        [case.rows[i] for i, _ in case.stored],
        f" (slots {case.slots})",
    )


def _gather(impl: Implementation, case: StoreCase, cache: bytes, reads: list[int]) -> list[list[float]]:
    slots_t = torch.tensor(reads, dtype=torch.int64, device=impl.device)
    cache_t = torch.tensor(list(cache), dtype=torch.uint8, device=impl.device).reshape(-1, case.layout.block_bytes)
    out = impl.fn(cache_t, slots_t, fmt=case.fmt, rows_per_block=case.layout.rows)
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
    return _memo("raw", example, fmt, lambda: _raw_cache(example, fmt))  # type: ignore[no-any-return]


def _raw_cache(example: dict[str, Any], fmt: str) -> tuple[StoreCase, bytes]:
    layout = cache_layout(fmt, example["rows_per_block"])
    rowfmt, seed, span = layout.fmt, example["seed"], example["scale_span"]
    cache = bytearray(poison_bytes(seed % 256, example["num_blocks"] * layout.block_bytes))
    for slot in sorted(set(example["reads"])):
        data_at, scale_at = slot_byte_offsets(layout, slot)
        h = [mix(seed, slot * 4096 + j) for j in range(rowfmt.row_bytes)]
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
    return StoreCase(fmt, layout, [], [], bytes(cache)), bytes(cache)


def check_gather_matches_stored_bytes(impl: Implementation, example: dict[str, Any]) -> None:
    """Gather equals the reference decoding of whatever bytes the slots hold (pad and padding ignored)."""
    case, cache = raw_cache(example, impl.convention or "")
    got = _gather(impl, case, cache, example["reads"])
    expected = [_decode_at(case, cache, slot) for slot in example["reads"]]
    _compare_rows("gather_dequantize", expected, got, f" (slots {example['reads']})")


# Failures found while building the suite, replayed first on every implementation.
ZERO_SPEC = {"seed": 0, "exp": 0, "bits": 0, "spread": 0, "anchored": False, "edits": []}
NO_ROWS = {"rows_per_block": 1, "num_blocks": 1, "patterns": [ZERO_SPEC], "rows": [], "poison": 0}
"""R = 0: the torch twin's reshape of zero rows failed."""
STORED_BF16_OVERFLOW = {
    "rows_per_block": 1,
    "num_blocks": 1,
    "patterns": [{**ZERO_SPEC, "edits": [[448, "bf16_overflow", 0, False]]}],
    "rows": [[0, 0, ""]],
    "poison": 0,
}
"""A stored V4 row whose RoPE value rounds to bf16 infinity: the call is refused (first seen in the writes check)."""
STORED_NAN = {**STORED_BF16_OVERFLOW, "patterns": [{**ZERO_SPEC, "edits": [[0, "nan", 0, False]]}]}
"""A stored row holding NaN: the call is refused in every format (a mutant that quantized it lived through 100
generated examples on one machine)."""

# Examples per mutant in the mutation hunt: every shipped mutant dies within a few dozen where it dies at all.
HUNT_EXAMPLES = 100

PROPERTIES = [
    Property(
        "quant_store_matches_reference",
        "quantize_store",
        store_examples(),
        check_store_matches_reference,
        examples=(NO_ROWS, STORED_BF16_OVERFLOW, STORED_NAN),
        doc="the whole cache after the call equals the reference's: stored rows' bytes at their public offsets, "
        "-1 rows skipped, every other byte untouched; arbitrary values (ties, subnormals, saturation, scale "
        "boundaries, the amax floor); a stored row with NaN/inf or a bf16-overflowing RoPE value: ValueError "
        "and the cache unchanged",
        hunt_examples=HUNT_EXAMPLES,
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
        "quant_store_skips_minus_one",
        "quantize_store",
        store_examples(),
        check_store_skips_minus_one,
        examples=(NO_ROWS,),
        doc="rows at slot -1 (NaN, inf or huge garbage) are neither read nor written; the call with them equals "
        "the call without them",
        hunt_examples=HUNT_EXAMPLES,
    ),
    Property(
        "gather_matches_stored_bytes",
        "gather_dequantize",
        raw_cache_examples(),
        check_gather_matches_stored_bytes,
        doc="every gathered value equals the reference decoding of the slot's bytes, for any finite codes "
        "(including codes no quantizer writes), any read order and repeats",
        hunt_examples=HUNT_EXAMPLES,
    ),
]
