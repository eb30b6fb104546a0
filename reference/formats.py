"""Cache row formats: quantize one row of exact values into its stored bytes and decode it back.

A row is ``dims`` values. Its stored form is a data part (quantized elements, then any BF16 tail) and a
scale part (one scale per group, then padding). ``docs/formats.md`` gives each layout and its source.

| name            | dims | elements                        | group | scale          | data | scales | row |
|-----------------|------|---------------------------------|-------|----------------|------|--------|-----|
| v4_584          | 512  | 448 e4m3 + 64 bf16 (RoPE tail)  | 64    | ue8m0 (+1 pad) | 576  | 8      | 584 |
| v41_fp8_528     | 512  | 512 e4m3                        | 32    | ue8m0          | 512  | 16     | 528 |
| v41_fp4_288     | 512  | 512 e2m1, two per byte          | 16    | e4m3           | 256  | 32     | 288 |
| index_fp4_68    | 128  | 128 e2m1, two per byte          | 32    | ue8m0          | 64   | 4      | 68  |
| index_fp8_132   | 128  | 128 e4m3                        | 128   | fp32 power of 2| 128  | 4      | 132 |

Packed e2m1: byte ``i`` holds element ``2i`` in its low nibble and element ``2i + 1`` in its high nibble
(the order of torch's ``float4_e2m1fn_x2`` and NVIDIA's ``__nv_fp4x2_e2m1``). BF16 and FP32 values are
stored little-endian. The pad byte of v4_584 is written as 0 and ignored when reading.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from reference.checks import fail, require, require_exact, require_length
from reference.grids import (
    BF16,
    FP32,
    classify,
    decode,
    e2m1_decode,
    e2m1_encode,
    e4m3_decode,
    e4m3_encode,
    encode,
    power_of_two,
    ue8m0_decode,
    ue8m0_encode,
)
from reference.scales import Arithmetic, amax, fp4_e4m3_scale_code, fp4_ue8m0_scale_exponent, fp8_scale_exponent


class RowDtype(enum.Enum):
    """The dtype of the rows a store takes (the convention option ``bf16_rows``)."""

    F32 = "f32"
    """float32 rows (the contract's default); the reference takes any exact value."""
    BF16 = "bf16"
    """bf16 rows, as the engines pass K: every value must be a finite bf16 value (bf16's range and grid)."""


def require_row_dtype(values: Sequence[Fraction], dtype: RowDtype) -> None:
    """ValueError naming the first value a ``dtype`` row cannot hold (bf16: off bf16's grid or beyond its range)."""
    if not isinstance(dtype, RowDtype):
        raise TypeError(f"dtype: must be a RowDtype, got {type(dtype).__name__}")
    if dtype is RowDtype.BF16:
        for i, v in enumerate(values):
            bits = encode(BF16, v)
            require(
                classify(BF16, bits) == "finite" and decode(BF16, bits) == v,
                f"values[{i}]",
                f"{v} is not a finite bf16 value (bf16_rows: rows are bf16)",
            )


Element = Literal["e4m3", "e2m1"]
ScaleKind = Literal["ue8m0", "e4m3", "fp32_pow2"]


@dataclass(frozen=True)
class RowFormat:
    """One cache row format; the byte counts follow from the fields."""

    name: str
    dims: int
    quantized_dims: int
    element: Element
    group_size: int
    scale_kind: ScaleKind
    scale_pad_bytes: int

    @property
    def bf16_dims(self) -> int:
        return self.dims - self.quantized_dims

    @property
    def groups(self) -> int:
        return self.quantized_dims // self.group_size

    @property
    def quantized_bytes(self) -> int:
        return self.quantized_dims if self.element == "e4m3" else self.quantized_dims // 2

    @property
    def data_bytes(self) -> int:
        return self.quantized_bytes + 2 * self.bf16_dims

    @property
    def scale_size(self) -> int:
        return 4 if self.scale_kind == "fp32_pow2" else 1

    @property
    def scale_bytes(self) -> int:
        return self.groups * self.scale_size + self.scale_pad_bytes

    @property
    def row_bytes(self) -> int:
        return self.data_bytes + self.scale_bytes


V4_MAIN_FP8 = RowFormat("v4_584", 512, 448, "e4m3", 64, "ue8m0", 1)
V41_MAIN_FP8 = RowFormat("v41_fp8_528", 512, 512, "e4m3", 32, "ue8m0", 0)
V41_MAIN_FP4 = RowFormat("v41_fp4_288", 512, 512, "e2m1", 16, "e4m3", 0)
INDEX_FP4 = RowFormat("index_fp4_68", 128, 128, "e2m1", 32, "ue8m0", 0)
INDEX_FP8 = RowFormat("index_fp8_132", 128, 128, "e4m3", 128, "fp32_pow2", 0)

ROW_FORMATS: dict[str, RowFormat] = {f.name: f for f in (V4_MAIN_FP8, V41_MAIN_FP8, V41_MAIN_FP4, INDEX_FP4, INDEX_FP8)}


RENAMED: dict[str, str] = {
    "v4-main-fp8": "v4_584",
    "v41-main-fp8": "v41_fp8_528",
    "v41-main-fp4": "v41_fp4_288",
    "index-fp4": "index_fp4_68",
    "index-fp8": "index_fp8_132",
}
"""Earlier spellings of the format names; each is refused with a message naming the one spelling now used."""


def row_format(name: str) -> RowFormat:
    """Look a format up by name; ``ValueError`` naming the known formats otherwise."""
    if name in RENAMED:
        raise fail("name", f"the row format {name!r} is now spelled {RENAMED[name]!r}")
    if name not in ROW_FORMATS:
        raise fail("name", f"unknown row format {name!r}; known: {', '.join(sorted(ROW_FORMATS))}")
    return ROW_FORMATS[name]


@dataclass(frozen=True)
class QuantizedRow:
    """The stored bytes of one row: ``data`` (``fmt.data_bytes``) and ``scales`` (``fmt.scale_bytes``)."""

    data: bytes
    scales: bytes

    def joined(self) -> bytes:
        """Data then scales: the row as it sits in a per-row (interleaved) layout."""
        return self.data + self.scales


def _group_scale(
    fmt: RowFormat, group: Sequence[Fraction], g: int, arithmetic: Arithmetic = Arithmetic.EXACT
) -> tuple[Fraction, bytes]:
    """The scale of group ``g`` as an exact value and as its stored bytes."""
    group_amax = amax(group)
    if fmt.scale_kind == "e4m3":
        code = fp4_e4m3_scale_code(group_amax, arithmetic)
        return e4m3_decode(code), bytes([code])
    if fmt.element == "e2m1":
        exponent = fp4_ue8m0_scale_exponent(group_amax, arithmetic)
    else:
        exponent = fp8_scale_exponent(group_amax, arithmetic=arithmetic)
    require(
        -127 <= exponent <= 127,
        "values",
        f"group {g} (amax {group_amax}) needs scale 2**{exponent}, outside the ue8m0 range [-127, 127]",
    )
    scale = power_of_two(exponent)
    if fmt.scale_kind == "ue8m0":
        return scale, bytes([ue8m0_encode(scale)])
    return scale, encode(FP32, scale).to_bytes(4, "little")


def _pack_nibbles(codes: Sequence[int]) -> bytes:
    return bytes(codes[i] | (codes[i + 1] << 4) for i in range(0, len(codes), 2))


def _unpack_nibbles(data: bytes) -> list[int]:
    codes: list[int] = []
    for byte in data:
        codes.extend((byte & 0x0F, byte >> 4))
    return codes


def quantize_row(
    fmt: RowFormat,
    values: Sequence[int | Fraction],
    *,
    dtype: RowDtype = RowDtype.F32,
    arithmetic: Arithmetic = Arithmetic.EXACT,
) -> QuantizedRow:
    """Quantize ``fmt.dims`` exact values into the row's data and scale bytes: a row of ``dtype``, its group scales
    evaluated in ``arithmetic`` (``reference.scales``)."""
    require_length(values, fmt.dims, "values", f"{fmt.name} rows have {fmt.dims} values")
    exact = [require_exact(v, f"values[{i}]") for i, v in enumerate(values)]
    require_row_dtype(exact, dtype)
    codes: list[int] = []
    scale_bytes = bytearray()
    for g in range(fmt.groups):
        group = exact[g * fmt.group_size : (g + 1) * fmt.group_size]
        scale, stored = _group_scale(fmt, group, g, arithmetic)
        scale_bytes += stored
        encode_element = e4m3_encode if fmt.element == "e4m3" else e2m1_encode
        codes.extend(encode_element(v / scale) for v in group)
    data = bytes(codes) if fmt.element == "e4m3" else _pack_nibbles(codes)
    tail = bytearray()
    for i in range(fmt.quantized_dims, fmt.dims):
        bits = encode(BF16, exact[i])
        require(classify(BF16, bits) == "finite", f"values[{i}]", f"{exact[i]} overflows bf16")
        tail += bits.to_bytes(2, "little")
    scale_bytes += bytes(fmt.scale_pad_bytes)
    return QuantizedRow(data + bytes(tail), bytes(scale_bytes))


def _stored_scale(fmt: RowFormat, scales: bytes, g: int) -> Fraction:
    if fmt.scale_kind == "fp32_pow2":
        bits = int.from_bytes(scales[4 * g : 4 * g + 4], "little")
        if classify(FP32, bits) != "finite":
            raise fail("scales", f"group {g} holds the fp32 bit pattern 0x{bits:08x}, not a finite scale")
        return decode(FP32, bits)
    code = scales[g]
    if fmt.scale_kind == "ue8m0":
        if code == 0xFF:
            raise fail("scales", f"group {g} holds the ue8m0 NaN code 0xff")
        return ue8m0_decode(code)
    if code & 0x7F == 0x7F:
        raise fail("scales", f"group {g} holds the e4m3 NaN code 0x{code:02x}")
    return e4m3_decode(code)


def dequantize_row(fmt: RowFormat, row: QuantizedRow) -> tuple[Fraction, ...]:
    """The exact values a stored row represents (element times its group scale; BF16 tail as is)."""
    require(len(row.data) == fmt.data_bytes, "row.data", f"must be {fmt.data_bytes} bytes, got {len(row.data)}")
    require(
        len(row.scales) == fmt.scale_bytes,
        "row.scales",
        f"must be {fmt.scale_bytes} bytes, got {len(row.scales)}",
    )
    quantized = row.data[: fmt.quantized_bytes]
    codes = list(quantized) if fmt.element == "e4m3" else _unpack_nibbles(quantized)
    values: list[Fraction] = []
    for g in range(fmt.groups):
        scale = _stored_scale(fmt, row.scales, g)
        for i in range(g * fmt.group_size, (g + 1) * fmt.group_size):
            if fmt.element == "e4m3":
                if codes[i] & 0x7F == 0x7F:
                    raise fail("row.data", f"element {i} holds the e4m3 NaN code 0x{codes[i]:02x}")
                values.append(e4m3_decode(codes[i]) * scale)
            else:
                values.append(e2m1_decode(codes[i]) * scale)
    tail = row.data[fmt.quantized_bytes :]
    for j in range(fmt.bf16_dims):
        bits = int.from_bytes(tail[2 * j : 2 * j + 2], "little")
        if classify(BF16, bits) != "finite":
            raise fail("row.data", f"bf16 value {fmt.quantized_dims + j} is not finite (0x{bits:04x})")
        values.append(decode(BF16, bits))
    return tuple(values)
