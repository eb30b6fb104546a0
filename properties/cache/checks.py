"""What the store and gather properties share: a store call expanded for a format, the poisoned cache it starts
from, the exact expected bytes and refusals, and byte-level comparison with a failure report that names the
block, row and part of the first differing byte (docs/cache-properties.md)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from properties.cache.common import (
    cache_layout,
    equals_float,
    is_float32,
    pad_offsets,
    reference_decode,
    reference_decode_f32,
    reference_row,
    store_options,
)
from properties.cache.strategies import (
    garbage_row,
    row_values,
)
from properties.compare import Lane, Mismatch
from properties.registry import Implementation
from reference.cache_blocks import BlockLayout, slot_byte_offsets
from reference.formats import RowDtype, RowFormat
from reference.scales import Arithmetic

SHOWN_VALUES = 8  # row values quoted in a failure report


@dataclass(frozen=True)
class StoreCase:
    """One quantize_store call, expanded for a format: into layer ``layer`` of a cache of ``layers`` layers;
    ``dtype`` and ``arithmetic``: the convention's options (``bf16_rows``: rows rounded to bf16 and passed as
    bf16; ``f32_scale``)."""

    fmt: str
    layout: BlockLayout
    rows: list[list[float]]
    slots: list[int]
    poison: bytes
    layers: int = 1
    layer: int = 0
    dtype: RowDtype = RowDtype.F32
    arithmetic: Arithmetic = Arithmetic.EXACT

    @property
    def rowfmt(self) -> RowFormat:
        return self.layout.fmt

    def offsets(self, slot: int, layer: int | None = None) -> tuple[int, int]:
        """Absolute byte offsets of a slot's data and scale parts in ``layer`` (default: the call's)."""
        return slot_byte_offsets(self.layout, slot, self.layers, self.layer if layer is None else layer)

    @property
    def stored(self) -> list[tuple[int, int]]:
        return [(i, s) for i, s in enumerate(self.slots) if s != -1]


def poison_bytes(seed: int, size: int) -> bytes:
    """A byte pattern no writer produces by accident over a whole row."""
    i = torch.arange(size, dtype=torch.int64)
    return bytes(((i * 97 + (i >> 8) * 29 + seed * 57 + 11) % 256).to(torch.uint8).tolist())


_EXPANDED: dict[tuple[str, str, str], Any] = {}


def memo(kind: str, example: dict[str, Any], fmt: str, build: Callable[[], Any]) -> Any:
    """Expansions are pure functions of (example, format) and every property and mutant replays the same
    derandomized examples, so each is built once (callers never mutate the result)."""
    key = (kind, repr(example), fmt)
    if key not in _EXPANDED:
        if len(_EXPANDED) > 4096:
            _EXPANDED.clear()
        _EXPANDED[key] = build()
    return _EXPANDED[key]


def store_case(example: dict[str, Any], convention: str) -> StoreCase:
    """The rows, slots and poisoned cache an example stands for under ``convention`` (memoized)."""
    return memo("store", example, convention, lambda: _store_case(example, convention))  # type: ignore[no-any-return]


def as_dtype(rows: list[list[float]], dtype: RowDtype) -> list[list[float]]:
    """``rows`` as a store of ``dtype`` receives them: bf16 rounds each value to nearest even (beyond bf16's range:
    an infinity, which a stored row may not hold)."""
    if dtype is RowDtype.F32 or not rows:
        return rows
    rounded: list[list[float]] = torch.tensor(rows, dtype=torch.float32).to(torch.bfloat16).float().tolist()
    return rounded


def torch_dtype(dtype: RowDtype) -> torch.dtype:
    return torch.bfloat16 if dtype is RowDtype.BF16 else torch.float32


def _store_case(example: dict[str, Any], convention: str) -> StoreCase:
    fmt, dtype, arithmetic = store_options(convention)
    layout = cache_layout(fmt, example["rows_per_block"])
    patterns = [row_values(p, layout.fmt) for p in example["patterns"]]
    rows = [
        patterns[p] if slot != -1 else garbage_row(garbage, patterns[p], k)
        for k, (p, slot, garbage) in enumerate(example["rows"])
    ]
    slots = [slot for _, slot, _ in example["rows"]]
    layers, layer = layers_of(example)
    poison = poison_bytes(example["poison"], example["num_blocks"] * layers * layout.block_bytes)
    return StoreCase(fmt, layout, as_dtype(rows, dtype), slots, poison, layers, layer, dtype, arithmetic)


def layers_of(example: dict[str, Any]) -> tuple[int, int]:
    """An example's cache layers and the layer its call uses (1 and 0 for examples drawn before layers)."""
    return int(example.get("layers", 1)), int(example.get("layer", 0))


def cache_tensor(cache: bytes, case: StoreCase, device: str) -> torch.Tensor:
    """The cache bytes as the contract's ``u8[num_blocks, layers * block_bytes]``."""
    width = case.layers * case.layout.block_bytes
    return torch.tensor(list(cache), dtype=torch.uint8, device=device).reshape(-1, width)


def run_store(
    impl: Implementation,
    case: StoreCase,
    rows: list[list[float]],
    slots: list[int],
    cache: bytes,
    layer: int | None = None,
) -> bytes:
    """Run the implementation's quantize_store on a copy of ``cache`` (into ``layer``, default the case's); the
    cache's bytes afterwards."""
    rows_t = torch.tensor(rows, dtype=torch.float32).to(torch_dtype(case.dtype)).to(impl.device)
    rows_t = rows_t.reshape(len(rows), case.rowfmt.dims)
    slots_t = torch.tensor(slots, dtype=torch.int64, device=impl.device)
    cache_t = cache_tensor(cache, case, impl.device)
    which = case.layer if layer is None else layer
    impl.fn(rows_t, slots_t, cache_t, fmt=case.fmt, rows_per_block=case.layout.rows, layer=which)
    if cache_t.dtype != torch.uint8 or cache_t.numel() != len(cache):
        raise Mismatch("quantize_store", detail="the cache tensor changed dtype or size")
    return bytes(cache_t.cpu().reshape(-1).tolist())


def describe(layout: BlockLayout, position: int, layers: int = 1) -> str:
    """Which part of the cache (of ``layers`` layers) an absolute byte position belongs to."""
    fmt, rows = layout.fmt, layout.rows
    page, offset = divmod(position, layout.block_bytes)
    block, layer = divmod(page, layers)
    where = f"layer {layer} " if layers > 1 else ""
    if offset >= layout.payload_bytes:
        return f"{where}block {block} padding byte {offset - layout.payload_bytes}"
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
    return f"{where}slot {block * rows + row} (block {block} row {row}) {part} byte {at}"


def shown_values(values: list[float]) -> str:
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
    layers: int = 1,
) -> None:
    """Every byte equal, except bits in ``free_bits`` (either value allowed) and bytes with listed ``choices``."""
    if expected == got:
        return
    free_bits, choices = free_bits or {}, choices or {}
    lanes: list[Lane] = []
    for position, (e, g) in enumerate(zip(expected, got, strict=True)):
        if e == g or g in choices.get(position, ()) or not (e ^ g) & ~free_bits.get(position, 0):
            continue
        lanes.append((describe(layout, position, layers), f"0x{e:02x}", f"0x{g:02x}"))
    if lanes:
        raise Mismatch(what, lanes, detail=f"{len(lanes)} byte(s) differ, first at {lanes[0][0]}{context}")


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


def row_refusal(
    fmt: str, values: list[float], dtype: RowDtype = RowDtype.F32, arithmetic: Arithmetic = Arithmetic.EXACT
) -> str | None:
    """Why the reference refuses to store a row (NaN, infinity, a RoPE value beyond bf16), or None."""
    if not all(math.isfinite(v) for v in values):
        return "holds NaN or infinity"
    try:
        reference_row(fmt, tuple(values), dtype, arithmetic)
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
        why = refused_row(case, i, cheap)
        if why is not None:
            return f"rows[{i}] is stored and {why}"
    return None


def refused_row(case: StoreCase, i: int, cheap: bool = False) -> str | None:
    """Why the reference refuses to store ``case.rows[i]``, or None."""
    if cheap:
        return cheap_refusal(case.rowfmt, case.rows[i])
    return row_refusal(case.fmt, case.rows[i], case.dtype, case.arithmetic)


def storable(case: StoreCase, *, cheap: bool = False) -> StoreCase:
    """``case`` with every stored row the reference refuses moved to slot -1 (where a row may hold anything): a
    call the contract accepts. Refusals have their own property (``quant_store_refuses_bad_rows``)."""
    slots = [-1 if s != -1 and refused_row(case, i, cheap) is not None else s for i, s in enumerate(case.slots)]
    return case if slots == case.slots else dataclasses.replace(case, slots=slots)


def expected_cache(
    case: StoreCase, stores: list[tuple[int, list[list[float]]]] | None = None
) -> tuple[bytes, dict[int, int], dict[int, set[int]]]:
    """The reference's cache after the call (or after ``stores``: ``(layer, rows)`` stored in turn at the case's
    slots), with the sign bits of -0.0 inputs and the pad bytes left free."""
    out = bytearray(case.poison)
    free: dict[int, int] = {}
    choices: dict[int, set[int]] = {}
    for layer, rows in stores if stores is not None else [(case.layer, case.rows)]:
        _expected_layer(case, layer, rows, out, free, choices)
    return bytes(out), free, choices


def _expected_layer(
    case: StoreCase,
    layer: int,
    rows: list[list[float]],
    out: bytearray,
    free: dict[int, int],
    choices: dict[int, set[int]],
) -> None:
    for i, slot in case.stored:
        row = reference_row(case.fmt, tuple(rows[i]), case.dtype, case.arithmetic)
        data_at, scale_at = case.offsets(slot, layer)
        out[data_at : data_at + len(row.data)] = row.data
        out[scale_at : scale_at + len(row.scales)] = row.scales
        for at, bits in _zero_sign_bits(case.rowfmt, case.rows[i]).items():
            free[data_at + at] = bits
        for at in pad_offsets(case.layout):
            choices[scale_at + at] = {0, case.poison[scale_at + at]}


def decode_at(case: StoreCase, cache: bytes, slot: int, layer: int | None = None) -> tuple[float, ...] | str:
    """The reference decoding of a slot's bytes (in ``layer``, default the case's) as floats, or why it has
    none."""
    fmt = case.rowfmt
    data_at, scale_at = case.offsets(slot, layer)
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


def lane_rows(case: StoreCase, cache: bytes, slots: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """sparse_attention's view of a paged call: kv f32[M * K, d], lane (m, j)'s row the reference decoding of
    its slot (zeros for an invalid slot, which is never read), and indices i32[M, K] naming that row, or -1."""
    capacity, dims = case.layout.rows * (len(cache) // case.layout.block_bytes), case.rowfmt.dims
    flat = [s for row in slots for s in row]
    rows: list[tuple[float, ...]] = []
    for slot in flat:
        if not 0 <= slot < capacity:
            rows.append((0.0,) * dims)
            continue
        values = decode_at(case, cache, slot)
        if isinstance(values, str):
            raise ValueError(f"slots: slot {slot} must hold finite codes within float32's range: {values}")
        rows.append(values)
    kv = torch.tensor(rows, dtype=torch.float32).reshape(len(flat), dims)
    lanes = [i if 0 <= s < capacity else -1 for i, s in enumerate(flat)]
    return kv, torch.tensor(lanes, dtype=torch.int32).reshape(len(slots), -1)


def compare_rows(what: str, expected: list[Any], got: list[list[float]], context: str) -> None:
    """Rows of floats equal lane by lane (-0.0 == 0.0); an expected row may be a reason it has no value."""
    lanes: list[tuple[tuple[int, ...], Any, Any]] = []
    for r, (e_row, g_row) in enumerate(zip(expected, got, strict=True)):
        if isinstance(e_row, str):
            lanes.append(((r,), "decodable bytes", e_row))
        elif list(e_row) != list(g_row):
            lanes.extend(((r, j), e, g) for j, (e, g) in enumerate(zip(e_row, g_row, strict=True)) if not e == g)
    if lanes:
        raise Mismatch(what, lanes, detail=f"{len(lanes)} value(s) differ{context}")


HUNT_EXAMPLES = 100
"""Examples per mutant in the mutation hunt: every shipped mutant dies within a few dozen where it dies at all."""
