"""Scale rules, row formats and block layouts against an independent float emulation of the public
kernels (fp32 arithmetic as the kernels do it, torch / ml_dtypes casts), on BF16 inputs, which is what
the kernels quantize."""

from __future__ import annotations

import dataclasses
import itertools
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
import torch

from reference import scales
from reference.accounting import block_payload_bytes
from reference.cache_blocks import (
    BlockLayout,
    pack_block,
    page_offset,
    public_layout,
    slot_byte_offsets,
    unpack_block,
)
from reference.formats import (
    INDEX_FP4,
    INDEX_FP8,
    ROW_FORMATS,
    V4_MAIN_FP8,
    V41_MAIN_FP4,
    V41_MAIN_FP8,
    QuantizedRow,
    RowDtype,
    RowFormat,
    dequantize_row,
    quantize_row,
    row_format,
)
from reference.grids import FP32, decode, e4m3_encode
from reference.scales import fp4_e4m3_scale_code, fp4_ue8m0_scale_exponent, fp8_scale_exponent
from tests.refusals import worded_exactly

RNG = np.random.default_rng(7)


def _bf16_values(n: int, spread: float) -> np.ndarray:
    """``n`` float32 numbers that are exactly BF16 values."""
    x = (RNG.standard_normal(n) * spread).astype(np.float32)
    return np.asarray(torch.from_numpy(x).to(torch.bfloat16).to(torch.float32).numpy(), dtype=np.float32)


def _all_positive_bf16() -> np.ndarray:
    bits = np.arange(1, 0x7F80, dtype=np.uint32).astype(np.uint16)
    return np.asarray(bits.view(ml_dtypes.bfloat16), dtype=np.float32)


def _kernel_log2_ceil(x: np.float32) -> int:
    """The public kernels' ``fast_log2_ceil``: exponent field, plus one unless the mantissa is zero."""
    bits = int(np.array([x], dtype=np.float32).view(np.uint32)[0])
    return ((bits >> 23) & 0xFF) - 127 + (1 if bits & 0x7FFFFF else 0)


def _kernel_fp8_exponent(amax: np.float32) -> int:
    return _kernel_log2_ceil(np.float32(max(amax, np.float32(1e-4))) * np.float32(1 / 448))


def _kernel_fp4_exponent(amax: np.float32) -> int:
    return _kernel_log2_ceil(np.float32(max(amax, np.float32(6 * 2.0**-126))) * np.float32(1 / 6))


def _fp8_codes(x: np.ndarray, scale: float) -> bytes:
    t = torch.from_numpy((x / np.float32(scale)).astype(np.float32)).clamp(-448, 448)
    return bytes(t.to(torch.float8_e4m3fn).view(torch.uint8).tolist())


def _fp4_codes(x: np.ndarray, scale: float) -> list[int]:
    q = np.clip((x / np.float32(scale)).astype(np.float32), -6, 6)
    return [int(c) for c in q.astype(ml_dtypes.float4_e2m1fn).view(np.uint8)]


def _pack_low_first(codes: list[int]) -> bytes:
    return bytes(codes[i] | (codes[i + 1] << 4) for i in range(0, len(codes), 2))


def _emulate(fmt: RowFormat, x: np.ndarray) -> tuple[bytes, bytes]:
    """The stored data and scale bytes, computed the way the public kernels compute them."""
    data, scales, codes = b"", b"", []
    for g in range(fmt.groups):
        group = x[g * fmt.group_size : (g + 1) * fmt.group_size]
        amax = np.float32(np.abs(group).max())
        if fmt.scale_kind == "e4m3":
            # clamped before the cast, as the scale rule says (torch's cast of a value past 448 differs
            # between versions: NaN in some, saturation in others)
            s_t = (torch.tensor(max(amax, np.float32(6 * 2.0**-9))) / 6).clamp(max=448.0).to(torch.float8_e4m3fn)
            scales += bytes([int(s_t.view(torch.uint8).item())])
            codes += _fp4_codes(group, float(s_t.to(torch.float32)))
            continue
        e = _kernel_fp4_exponent(amax) if fmt.element == "e2m1" else _kernel_fp8_exponent(amax)
        scale = 2.0**e
        scales += bytes([e + 127]) if fmt.scale_kind == "ue8m0" else np.float32(scale).tobytes()
        if fmt.element == "e2m1":
            codes += _fp4_codes(group, scale)
        else:
            data += _fp8_codes(group, scale)
    if fmt.element == "e2m1":
        data = _pack_low_first(codes)
    if fmt.bf16_dims:
        tail = torch.from_numpy(x[fmt.quantized_dims :].copy()).to(torch.bfloat16)
        data += bytes(tail.view(torch.uint8).tolist())
    return data, scales + bytes(fmt.scale_pad_bytes)


# --- scale rules ------------------------------------------------------------------------------------


def test_fp8_scale_matches_the_kernel_bit_trick_for_every_positive_bf16_amax() -> None:
    for amax in _all_positive_bf16():
        assert fp8_scale_exponent(Fraction(float(amax))) == _kernel_fp8_exponent(amax)


def test_index_fp4_scale_matches_the_kernel_bit_trick_for_every_positive_bf16_amax() -> None:
    for amax in _all_positive_bf16():
        assert fp4_ue8m0_scale_exponent(Fraction(float(amax))) == _kernel_fp4_exponent(amax)


def test_main_fp4_e4m3_scale_matches_torch_for_every_bf16_amax_up_to_6_times_448() -> None:
    amaxes = _all_positive_bf16()
    amaxes = amaxes[amaxes <= 6 * 448]
    clamped = torch.from_numpy(amaxes).clamp_min(6 * 2.0**-9) / 6
    expected = clamped.to(torch.float8_e4m3fn).view(torch.uint8).tolist()
    assert [fp4_e4m3_scale_code(Fraction(float(a))) for a in amaxes] == expected


def test_scale_floors_and_variants_by_hand() -> None:
    assert fp8_scale_exponent(0) == -22  # 2**-23 < 1e-4 / 448 <= 2**-22
    assert fp8_scale_exponent(448) == 0 and fp8_scale_exponent(449) == 1
    # 0.01 / 448 is about 2**-15.45; FlashMLA's test floors the quotient at 1e-4 (about 2**-13.29) instead
    assert fp8_scale_exponent(Fraction(1, 100)) == -15
    assert fp8_scale_exponent(Fraction(1, 100), floor_applies_to="quotient") == -13
    assert fp4_ue8m0_scale_exponent(0) == -126 and fp4_ue8m0_scale_exponent(6) == 0
    assert fp4_e4m3_scale_code(0) == 0x01  # 2**-9 is e4m3's smallest subnormal
    assert fp4_e4m3_scale_code(10**6) == 0x7E  # clamped to 448
    with pytest.raises(ValueError, match=r"^group_amax: must be >= 0"):
        fp8_scale_exponent(-1)


# --- rows -------------------------------------------------------------------------------------------


def test_row_byte_counts() -> None:
    sizes = {name: (f.data_bytes, f.scale_bytes, f.row_bytes) for name, f in ROW_FORMATS.items()}
    assert sizes == {
        "v4_584": (448 + 64 * 2, 7 + 1, 584),
        "v41_fp8_528": (512, 512 // 32, 528),
        "v41_fp4_288": (512 // 2, 512 // 16, 288),
        "index_fp4_68": (128 // 2, 128 // 32, 68),
        "index_fp8_132": (128, 4, 132),
    }


@pytest.mark.parametrize("fmt", list(ROW_FORMATS.values()), ids=lambda f: f.name)
@pytest.mark.parametrize("spread", [1e-6, 0.01, 1.0, 300.0])
def test_quantized_bytes_match_the_kernel_emulation(fmt: RowFormat, spread: float) -> None:
    for _ in range(4):
        x = _bf16_values(fmt.dims, spread)
        x[RNG.integers(fmt.dims)] *= 64  # one outlier per row
        x = torch.from_numpy(x).to(torch.bfloat16).to(torch.float32).numpy()
        row = quantize_row(fmt, [Fraction(float(v)) for v in x])
        assert (row.data, row.scales) == _emulate(fmt, x)


@pytest.mark.parametrize("fmt", list(ROW_FORMATS.values()), ids=lambda f: f.name)
def test_dequantized_values_are_codes_times_scales(fmt: RowFormat) -> None:
    x = _bf16_values(fmt.dims, 2.0)
    row = quantize_row(fmt, [Fraction(float(v)) for v in x])
    got = dequantize_row(fmt, row)
    codes = list(row.data[: fmt.quantized_bytes])
    if fmt.element == "e2m1":
        codes = [n for b in codes for n in (b & 15, b >> 4)]
        elements = np.array(codes, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float64)
    else:
        elements = np.array(codes, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    for i in range(fmt.quantized_dims):
        g = i // fmt.group_size
        if fmt.scale_kind == "ue8m0":
            scale = Fraction(2) ** (row.scales[g] - 127)
        elif fmt.scale_kind == "e4m3":
            scale = Fraction(float(np.array([row.scales[g]], np.uint8).view(ml_dtypes.float8_e4m3fn)[0]))
        else:
            scale = Fraction(float(np.frombuffer(row.scales[4 * g : 4 * g + 4], dtype="<f4")[0]))
        assert got[i] == Fraction(float(elements[i])) * scale
    assert got[fmt.quantized_dims :] == tuple(Fraction(float(v)) for v in x[fmt.quantized_dims :])


def test_fp4_nibble_order_low_nibble_is_the_even_element() -> None:
    values = [Fraction(6), Fraction(1, 2)] + [Fraction(0)] * 126  # amax 6 gives scale 1 for index_fp4_68
    row = quantize_row(INDEX_FP4, values)
    assert row.data[0] == 0x7 | (0x1 << 4)
    assert row.scales[0] == 127


def test_v4_main_layout_within_a_row() -> None:
    values = [Fraction(i % 7 - 3, 4) for i in range(448)] + [Fraction(1, 8) * (j + 1) for j in range(64)]
    row = quantize_row(V4_MAIN_FP8, values)
    assert len(row.data) == 576 and len(row.scales) == 8 and row.scales[7] == 0
    rope = np.frombuffer(row.data[448:], dtype="<u2").astype(np.uint16).view(ml_dtypes.bfloat16)
    assert [Fraction(float(v)) for v in rope.astype(np.float64)] == values[448:]


def test_row_refusals() -> None:
    with pytest.raises(ValueError, match=r"^values: must have length 128"):
        quantize_row(INDEX_FP8, [Fraction(0)] * 127)
    with pytest.raises(TypeError, match=r"^values\[3\]: must be an int or Fraction, got float"):
        quantize_row(INDEX_FP8, [0, 0, 0, 0.5] + [0] * 124)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^values\[448\]: .* overflows bf16"):
        quantize_row(V4_MAIN_FP8, [0] * 448 + [Fraction(2) ** 200] + [0] * 63)
    with pytest.raises(ValueError, match=r"^values: group 0 .* outside the ue8m0 range"):
        quantize_row(V41_MAIN_FP8, [Fraction(2) ** 140] + [0] * 511)
    good = quantize_row(V41_MAIN_FP8, [Fraction(1)] * 512)
    with pytest.raises(ValueError, match=r"^scales: group 2 holds the ue8m0 NaN code"):
        dequantize_row(V41_MAIN_FP8, QuantizedRow(good.data, good.scales[:2] + b"\xff" + good.scales[3:]))
    with pytest.raises(ValueError, match=r"^row.data: element 5 holds the e4m3 NaN code"):
        dequantize_row(V41_MAIN_FP8, QuantizedRow(good.data[:5] + b"\x7f" + good.data[6:], good.scales))
    with pytest.raises(ValueError, match=r"^name: unknown row format"):
        row_format("fp6")


# --- blocks -----------------------------------------------------------------------------------------


def _rows(fmt: RowFormat, n: int) -> list[QuantizedRow]:
    return [quantize_row(fmt, [Fraction(float(v)) for v in _bf16_values(fmt.dims, 1.0)]) for _ in range(n)]


def test_v4_block_is_data_rows_then_scale_rows_padded_to_576() -> None:
    """The FlashMLA V4 test quantizer's view: [rows * 576 data | rows * 8 scales | pad to 576]."""
    rows = _rows(V4_MAIN_FP8, 64)
    layout = public_layout(V4_MAIN_FP8, 64)
    block = pack_block(layout, rows)
    assert layout.block_bytes == (64 * 584 + 575) // 576 * 576 == 37440
    expected = b"".join(r.data for r in rows) + b"".join(r.scales for r in rows)
    assert block == expected + bytes(37440 - len(expected))
    assert unpack_block(layout, block) == tuple(rows)


def test_v41_block_is_row_after_row() -> None:
    for fmt in (V41_MAIN_FP8, V41_MAIN_FP4):
        rows = _rows(fmt, 8)
        layout = public_layout(fmt, 8)
        assert pack_block(layout, rows) == b"".join(r.data + r.scales for r in rows)
        assert layout.block_bytes == 8 * fmt.row_bytes


def test_index_fp8_offsets_follow_the_vllm_cache_kernel() -> None:
    """vLLM: value at block_offset * head_dim, fp32 scale at block_size * head_dim + block_offset * 4."""
    layout = public_layout(INDEX_FP8, 64)
    for row in range(64):
        assert layout.data_offset(row) == row * 128
        assert layout.scale_offset(row) == 64 * 128 + row * 4
    assert layout.block_bytes == 64 * 132


def test_unwritten_rows_and_padding_are_zero_and_slots_do_not_wrap() -> None:
    layout = BlockLayout(INDEX_FP4, 4, "sectioned", 64)
    row = _rows(INDEX_FP4, 1)[0]
    block = pack_block(layout, [None, row])
    assert layout.block_bytes == 320 and block[:64] == bytes(64) and block[64:128] == row.data
    assert block[4 * 64 + 4 : 4 * 64 + 8] == row.scales and block[4 * 68 :] == bytes(320 - 4 * 68)
    big = (2**31 + 5) * 4 + 3
    assert slot_byte_offsets(layout, big) == ((2**31 + 5) * 320 + 3 * 64, (2**31 + 5) * 320 + 256 + 3 * 4)
    with pytest.raises(ValueError, match=r"^row: must be in \[0, 4\)"):
        layout.data_offset(4)
    with pytest.raises(ValueError, match=r"^rows: at most 4 rows"):
        pack_block(layout, [row] * 5)


def test_layers_have_their_own_pages_data_and_scales() -> None:
    """A cache of three layers: block b holds layer 0's, 1's and 2's pages in turn; each layer's data and scale
    parts of a slot lie in its own page, and no two (layer, slot) pairs share a byte."""
    layout = public_layout(INDEX_FP8, 4)
    assert page_offset(layout, 0, 3, 2) == 2 * layout.block_bytes
    assert page_offset(layout, 5, 3, 1) == (5 * 3 + 1) * layout.block_bytes
    assert slot_byte_offsets(layout, 9, 1, 0) == slot_byte_offsets(layout, 9)
    spans: dict[int, tuple[int, int]] = {}
    for layer in range(3):
        for slot in range(12):
            data, scales = slot_byte_offsets(layout, slot, 3, layer)
            page = page_offset(layout, slot // 4, 3, layer)
            assert page <= data < scales < page + layout.block_bytes
            for at in [*range(data, data + 128), *range(scales, scales + 4)]:
                assert at not in spans, (at, spans[at], (layer, slot))
                spans[at] = (layer, slot)
    assert len(spans) == 3 * 12 * 132
    with pytest.raises(ValueError, match=r"^layer: must be in \[0, 3\)"):
        slot_byte_offsets(layout, 0, 3, 3)
    with pytest.raises(ValueError, match=r"^layers: must be a positive integer"):
        page_offset(layout, 0, 0, 0)


def test_seed_000_table_row_and_block_bytes() -> None:
    """Appendix A.5: 528 / 288 / 68 B rows; a 128-position C2 block has 64 rows."""
    assert (V41_MAIN_FP8.row_bytes, V41_MAIN_FP4.row_bytes, INDEX_FP4.row_bytes) == (528, 288, 68)
    assert block_payload_bytes(V41_MAIN_FP8, 128, 2) == 33_792
    assert block_payload_bytes(V41_MAIN_FP4, 128, 2) == 18_432
    assert block_payload_bytes(INDEX_FP4, 128, 2) == 4_352


# --- every refusal worded exactly, and the paths no other test reaches (docs/mutation.md) ----------------------

L = public_layout(V41_MAIN_FP8, 2)
UNKNOWN = dataclasses.replace(INDEX_FP8, name="custom")


test_every_refusal_is_worded_exactly = worded_exactly(
    [
        (lambda: BlockLayout(V41_MAIN_FP8, 0, "interleaved"), ValueError, "rows: must be a positive integer, got 0"),
        (
            lambda: BlockLayout(V41_MAIN_FP8, 2, "interleaved", 0),
            ValueError,
            "alignment: must be a positive integer, got 0",
        ),
        (
            lambda: BlockLayout(V41_MAIN_FP8, 2, "zigzag"),  # type: ignore[arg-type]
            ValueError,
            "arrangement: must be 'sectioned' or 'interleaved', got 'zigzag'",
        ),
        (lambda: public_layout(UNKNOWN, 2), ValueError, "fmt: no public layout is recorded for 'custom'"),
        (lambda: pack_block(L, [None, None, None]), ValueError, "rows: at most 2 rows fit one block, got 3"),
        (
            lambda: pack_block(L, [QuantizedRow(bytes(512), bytes(15))]),
            ValueError,
            "rows[0]: must have 512 data and 16 scale bytes",
        ),
        (
            lambda: pack_block(L, [None, QuantizedRow(bytes(511), bytes(16))]),
            ValueError,
            "rows[1]: must have 512 data and 16 scale bytes",
        ),
        (lambda: unpack_block(L, bytes(10)), ValueError, "block: must be 1056 bytes, got 10"),
        (lambda: slot_byte_offsets(L, -1), ValueError, "slot: must be an int >= 0, got -1"),
        (lambda: slot_byte_offsets(L, 1.5), ValueError, "slot: must be an int >= 0, got 1.5"),  # type: ignore[arg-type]
        (lambda: page_offset(L, -1), ValueError, "block: must be an int >= 0, got -1"),
        (lambda: page_offset(L, 1.5), ValueError, "block: must be an int >= 0, got 1.5"),  # type: ignore[arg-type]
        (lambda: page_offset(L, 0, 2, 2), ValueError, "layer: must be in [0, 2), got 2"),
        (lambda: L.data_offset(2), ValueError, "row: must be in [0, 2), got 2"),
        (lambda: L.scale_offset(-1), ValueError, "row: must be in [0, 2), got -1"),
        (
            lambda: row_format("v9"),
            ValueError,
            "name: unknown row format 'v9'; known: index_fp4_68, index_fp8_132, v41_fp4_288, v41_fp8_528, v4_584",
        ),
        (
            lambda: row_format("v4-main-fp8"),
            ValueError,
            "name: the row format 'v4-main-fp8' is now spelled 'v4_584'",
        ),
        (
            lambda: row_format("v41-main-fp8"),
            ValueError,
            "name: the row format 'v41-main-fp8' is now spelled 'v41_fp8_528'",
        ),
        (
            lambda: row_format("v41-main-fp4"),
            ValueError,
            "name: the row format 'v41-main-fp4' is now spelled 'v41_fp4_288'",
        ),
        (
            lambda: row_format("index-fp4"),
            ValueError,
            "name: the row format 'index-fp4' is now spelled 'index_fp4_68'",
        ),
        (
            lambda: row_format("index-fp8"),
            ValueError,
            "name: the row format 'index-fp8' is now spelled 'index_fp8_132'",
        ),
        (
            lambda: quantize_row(V41_MAIN_FP8, [0] * 3),
            ValueError,
            "values: must have length 512 (v41_fp8_528 rows have 512 values), got 3",
        ),
        (
            lambda: quantize_row(V41_MAIN_FP8, [0.5] * 512),  # type: ignore[list-item]
            TypeError,
            "values[0]: must be an int or Fraction, got float",
        ),
        (
            lambda: quantize_row(V4_MAIN_FP8, [0] * 448 + [2**200] + [0] * 63),
            ValueError,
            "values[448]: 1606938044258990275541962092341162602522202993782792835301376 overflows bf16",
        ),
        (
            lambda: quantize_row(V41_MAIN_FP8, [448 * 2**128] + [0] * 511),
            ValueError,
            f"values: group 0 (amax {448 * 2**128}) needs scale 2**128, outside the ue8m0 range [-127, 127]",
        ),
        (
            lambda: quantize_row(INDEX_FP4, [6 * 2**128] + [0] * 127),
            ValueError,
            f"values: group 0 (amax {6 * 2**128}) needs scale 2**128, outside the ue8m0 range [-127, 127]",
        ),
        (
            lambda: dequantize_row(V41_MAIN_FP8, QuantizedRow(bytes(511), bytes(16))),
            ValueError,
            "row.data: must be 512 bytes, got 511",
        ),
        (
            lambda: dequantize_row(V41_MAIN_FP8, QuantizedRow(bytes(512), bytes(17))),
            ValueError,
            "row.scales: must be 16 bytes, got 17",
        ),
        (
            lambda: dequantize_row(INDEX_FP8, QuantizedRow(bytes(128), (0x7F800000).to_bytes(4, "little"))),
            ValueError,
            "scales: group 0 holds the fp32 bit pattern 0x7f800000, not a finite scale",
        ),
        (
            lambda: dequantize_row(INDEX_FP4, QuantizedRow(bytes(64), bytes([0xFF, 0, 0, 0]))),
            ValueError,
            "scales: group 0 holds the ue8m0 NaN code 0xff",
        ),
        (
            lambda: dequantize_row(V41_MAIN_FP4, QuantizedRow(bytes(256), bytes([0x7F]) + bytes(31))),
            ValueError,
            "scales: group 0 holds the e4m3 NaN code 0x7f",
        ),
        (
            lambda: dequantize_row(V41_MAIN_FP4, QuantizedRow(bytes(256), bytes(31) + bytes([0xFF]))),
            ValueError,
            "scales: group 31 holds the e4m3 NaN code 0xff",
        ),
        (
            lambda: dequantize_row(V41_MAIN_FP8, QuantizedRow(bytes([0x7F]) + bytes(511), bytes(16))),
            ValueError,
            "row.data: element 0 holds the e4m3 NaN code 0x7f",
        ),
        (
            lambda: dequantize_row(V4_MAIN_FP8, QuantizedRow(bytes(448) + bytes(126) + bytes([0x80, 0x7F]), bytes(8))),
            ValueError,
            "row.data: bf16 value 511 is not finite (0x7f80)",
        ),
        (
            lambda: dequantize_row(V4_MAIN_FP8, QuantizedRow(bytes(448) + bytes([0x80, 0x7F]) + bytes(126), bytes(8))),
            ValueError,
            "row.data: bf16 value 448 is not finite (0x7f80)",
        ),
    ]
)


def test_page_offset_defaults_to_a_one_layer_cache() -> None:
    """Without ``layers`` / ``layer`` the cache has one layer and the page is layer 0's: block b's page starts at
    ``b * block_bytes`` (1056 B for two 528 B rows); with two layers, layer 0's page of block 3 is the 7th page."""
    assert L.block_bytes == 2 * 528
    assert page_offset(L, 0) == 0
    assert page_offset(L, 3) == 3 * 1056 == page_offset(L, 3, 1, 0)
    assert page_offset(L, 3, 2) == 6 * 1056 == page_offset(L, 3, 2, 0)
    assert page_offset(L, 3, 2, 1) == 7 * 1056


def test_public_layouts_exactly() -> None:
    assert public_layout(V41_MAIN_FP4, 3) == BlockLayout(V41_MAIN_FP4, 3, "interleaved", 1)
    assert public_layout(INDEX_FP4, 3) == BlockLayout(INDEX_FP4, 3, "sectioned", 1)
    assert public_layout(V4_MAIN_FP8, 3) == BlockLayout(V4_MAIN_FP8, 3, "sectioned", 576)
    assert slot_byte_offsets(L, 0) == (0, 512) and slot_byte_offsets(L, 3) == (1056 + 528, 1056 + 528 + 512)
    row = QuantizedRow(b"\x01\x02", b"\x03")
    assert row.joined() == b"\x01\x02\x03"


def test_scale_exponent_127_is_the_largest_stored() -> None:
    """A group whose scale is 2**127 is stored (ue8m0 byte 254; fp32 2**127); 2**128 is refused (above)."""
    for fmt, top in ((V41_MAIN_FP8, 448), (INDEX_FP4, 6), (INDEX_FP8, 448)):
        values = [top * 2**127] + [0] * (fmt.dims - 1)
        assert dequantize_row(fmt, quantize_row(fmt, values)) == tuple(Fraction(v) for v in values)


def test_several_fp32_scales_in_one_row() -> None:
    """A format with several fp32 power-of-two scales (none public has more than one): each group reads its own
    four bytes, the middle one included."""
    fmt = RowFormat("three-fp32-groups", 12, 12, "e4m3", 4, "fp32_pow2", 0)
    values = [Fraction(v) for v in (448, 1, 2, 3, 0, 0, 0, 0, 2**40, 0, 0, -(2**41))]
    values[4] = Fraction(7, 2**20)
    row = quantize_row(fmt, values)
    assert len(row.scales) == 12 and len({row.scales[0:4], row.scales[4:8], row.scales[8:12]}) == 3
    assert dequantize_row(fmt, row) == tuple(Fraction(v) for v in values)
    # a stored scale need not be a power of two: the third group's 1 + 2**-23 has a nonzero low byte, next to the
    # second group's four bytes
    odd = row.scales[:8] + (0x3F800001).to_bytes(4, "little")
    got = dequantize_row(fmt, QuantizedRow(row.data, odd))
    assert got[:8] == tuple(Fraction(v) for v in values[:8])
    old_scale = decode(FP32, int.from_bytes(row.scales[8:12], "little"))
    new_scale = decode(FP32, 0x3F800001)
    assert got[8:] == tuple(Fraction(v) / old_scale * new_scale for v in values[8:])


test_every_scale_refusal_is_worded_exactly = worded_exactly(
    [
        (lambda: scales.amax([]), ValueError, "values: must be a non-empty group"),
        (lambda: scales.amax([1, 0.5]), TypeError, "values[1]: must be an int or Fraction, got float"),  # type: ignore[list-item]
        (lambda: fp8_scale_exponent(0.5), TypeError, "group_amax: must be an int or Fraction, got float"),  # type: ignore[arg-type]
        (lambda: fp8_scale_exponent(-1), ValueError, "group_amax: must be >= 0, got -1"),
        (
            lambda: fp8_scale_exponent(1, floor_applies_to="group"),  # type: ignore[arg-type]
            ValueError,
            "floor_applies_to: must be 'amax' or 'quotient', got 'group'",
        ),
        (lambda: fp4_e4m3_scale_code(0.5), TypeError, "group_amax: must be an int or Fraction, got float"),  # type: ignore[arg-type]
        (lambda: fp4_e4m3_scale_code(Fraction(-1, 2)), ValueError, "group_amax: must be >= 0, got -1/2"),
        (lambda: fp4_ue8m0_scale_exponent(True), TypeError, "group_amax: must be an int or Fraction, got bool"),
        (lambda: fp4_ue8m0_scale_exponent(-6), ValueError, "group_amax: must be >= 0, got -6"),
    ]
)


def test_amax_of_one_value() -> None:
    assert scales.amax([-3]) == 3 and scales.amax([Fraction(1, 2), -2, 1]) == 2


# --- scales in float32 arithmetic (the option f32_scale) and bf16 rows (bf16_rows) --------------------------------

F32 = scales.Arithmetic.F32
BOUNDARY = 7168 + Fraction(1, 2**10)
"""The float32 nearest 7168 * (1 + 2**-23): amax / 448 rounds to 16 * (1 + 2**-23), whose float32 log2 is 4.0."""


def _f32_scale_by_numpy(amax: float, c: float, floor: float) -> int:
    """The same rule as a float32 kernel computes it, log2 taken in float64 and rounded once to float32."""
    q = np.maximum(np.float32(amax), np.float32(floor)) / np.float32(c)
    return int(np.ceil(np.float32(np.log2(np.float64(q)))))


def test_f32_scale_boundary() -> None:
    assert fp8_scale_exponent(BOUNDARY) == 5
    assert fp8_scale_exponent(BOUNDARY, arithmetic=F32) == 4
    assert fp8_scale_exponent(BOUNDARY + Fraction(1, 2**10), arithmetic=F32) == 5
    assert fp8_scale_exponent(7168, arithmetic=F32) == fp8_scale_exponent(7168) == 4


@pytest.mark.parametrize("e", [-30, -22, -10, -5, -4, -3, -1, 0, 1, 3, 4, 5, 10, 60, 100])
@pytest.mark.parametrize("ulps", [-2, -1, 0, 1, 2, 3, 5])
def test_f32_scales_agree_with_float32_arithmetic(e: int, ulps: int) -> None:
    """Around every boundary 448 * 2**e (6 * 2**e), the exact evaluation of the float32 roundings equals the float32
    computation; the exact rule differs where the quotient's float32 log2 rounds down."""
    for c, floor, rule in (
        (448.0, 1e-4, lambda a, ar: fp8_scale_exponent(a, arithmetic=ar)),
        (6.0, 6 * 2.0**-126, fp4_ue8m0_scale_exponent),
    ):
        base = np.float32(c * 2.0**e)
        amax = float(np.nextafter(base, np.float32(np.inf)) if ulps > 0 else base)
        for _ in range(abs(ulps) - (1 if ulps > 0 else 0)):
            amax = float(np.nextafter(np.float32(amax), np.float32(np.inf if ulps > 0 else 0)))
        assert rule(Fraction(amax), F32) == _f32_scale_by_numpy(amax, c, floor), (c, e, ulps, amax)


def test_f32_e4m3_scale_is_the_exact_one() -> None:
    """amax / 6 rounded to float32 and then to e4m3 gives the exact rule's code: checked with float32 arithmetic at
    every e4m3 midpoint times 6 and its float32 neighbours."""
    values = sorted({float(v) for v in torch.arange(0x7F, dtype=torch.uint8).view(torch.float8_e4m3fn).float()})
    for lo, hi in itertools.pairwise(values):
        centre = np.float32(6 * (lo + hi) / 2)
        for amax in (np.nextafter(centre, np.float32(0)), centre, np.nextafter(centre, np.float32(np.inf))):
            quotient = np.clip(np.float32(amax) / np.float32(6), np.float32(2**-9), np.float32(448))
            by_float32 = torch.tensor([float(quotient)]).to(torch.float8_e4m3fn).view(torch.uint8).item()
            assert fp4_e4m3_scale_code(Fraction(float(amax)), F32) == fp4_e4m3_scale_code(Fraction(float(amax)))
            assert fp4_e4m3_scale_code(Fraction(float(amax)), F32) == by_float32, (lo, hi, float(amax))
    assert fp4_e4m3_scale_code(Fraction(13, 2), F32) == e4m3_encode(Fraction(13, 12))


def test_log2_exceeds() -> None:
    assert scales.log2_exceeds(Fraction(3, 2), Fraction(1, 2))
    assert not scales.log2_exceeds(Fraction(3, 2), Fraction(3, 5))
    assert scales.log2_exceeds(1 + Fraction(1, 2**23), Fraction(1, 2**23))
    assert not scales.log2_exceeds(1 + Fraction(1, 2**23), Fraction(1, 2**22))


def test_f32_ceil_log2() -> None:
    assert scales.f32_ceil_log2(16) == 4
    assert scales.f32_ceil_log2(16 * (1 + Fraction(1, 2**23))) == 4
    assert scales.f32_ceil_log2(16 * (1 + Fraction(2, 2**23))) == 5
    assert scales.f32_ceil_log2(1 + Fraction(1, 2**23)) == 1
    assert scales.f32_ceil_log2(Fraction(1, 32) * (1 + Fraction(1, 2**23))) == -5
    assert scales.f32_ceil_log2(Fraction(1, 16) * (1 + Fraction(1, 2**23))) == -3


def test_bf16_rows() -> None:
    fmt = row_format("v41_fp8_528")
    row = [Fraction(3, 2)] * 511 + [Fraction(2**100)]
    assert quantize_row(fmt, row, dtype=RowDtype.BF16) == quantize_row(fmt, row)


test_f32_and_bf16_refusals = worded_exactly(
    [
        (
            lambda: fp8_scale_exponent(7168 * (1 + Fraction(1, 2**23)), arithmetic=F32),
            ValueError,
            "group_amax: must be a float32 value under f32 arithmetic, got 58720263/8192",
        ),
        (
            lambda: fp8_scale_exponent(1, floor_applies_to="quotient", arithmetic=F32),
            ValueError,
            "floor_applies_to: f32 arithmetic floors amax",
        ),
        (lambda: fp8_scale_exponent(1, arithmetic="f32"), TypeError, "arithmetic: must be an Arithmetic, got str"),  # type: ignore[arg-type]
        (
            lambda: fp4_ue8m0_scale_exponent(Fraction(1, 3), F32),
            ValueError,
            "group_amax: must be a float32 value under f32 arithmetic, got 1/3",
        ),
        (
            lambda: fp4_e4m3_scale_code(Fraction(1, 3), F32),
            ValueError,
            "group_amax: must be a float32 value under f32 arithmetic, got 1/3",
        ),
        (lambda: scales.f32_ceil_log2(0), ValueError, "q: must be a positive float32 value, got 0"),
        (lambda: scales.f32_ceil_log2(Fraction(1, 3)), ValueError, "q: must be a positive float32 value, got 1/3"),
        (lambda: scales.log2_exceeds(Fraction(2), Fraction(1)), ValueError, "m: must lie in (1, 2), got 2"),
        (lambda: scales.log2_exceeds(Fraction(1), Fraction(1)), ValueError, "m: must lie in (1, 2), got 1"),
        (
            lambda: quantize_row(row_format("index_fp8_132"), [Fraction(1, 3)] + [0] * 127, dtype=RowDtype.BF16),
            ValueError,
            "values[0]: 1/3 is not a finite bf16 value (bf16_rows: rows are bf16)",
        ),
        (
            lambda: quantize_row(row_format("index_fp8_132"), [0] * 127 + [2**128], dtype=RowDtype.BF16),
            ValueError,
            f"values[127]: {2**128} is not a finite bf16 value (bf16_rows: rows are bf16)",
        ),
        (
            lambda: quantize_row(row_format("index_fp8_132"), [0] * 128, dtype="bf16"),  # type: ignore[arg-type]
            TypeError,
            "dtype: must be a RowDtype, got str",
        ),
    ]
)


@pytest.mark.parametrize("x", [Fraction(3, 2), Fraction(2), 1 + Fraction(1, 2**23), Fraction(7, 4), Fraction(5)])
@pytest.mark.parametrize("terms", [1, 4, 16])
def test_ln_bounds_enclose_the_logarithm_tightly(x: Fraction, terms: int) -> None:
    import math

    low, high = scales._ln_bounds(x, terms)
    exact = math.log(float(x))
    y = float((x - 1) / (x + 1))
    assert float(low) <= exact <= float(high)
    assert low < high
    assert float(high - low) <= 2 * y ** (2 * terms + 1) / ((2 * terms + 1) * (1 - y * y)) * (1 + 1e-12)
    assert float(low) >= exact - 2 * y ** (2 * terms + 1) / ((2 * terms + 1) * (1 - y * y)) * (1 + 1e-12)


def test_f32_floors() -> None:
    assert scales.FP8_AMAX_FLOOR_F32 == Fraction(float(np.float32(1e-4)))
    assert fp8_scale_exponent(0, arithmetic=F32) == -22
    assert fp8_scale_exponent(Fraction(float(np.float32(1e-4))), arithmetic=F32) == -22
    assert fp4_ue8m0_scale_exponent(0, F32) == fp4_ue8m0_scale_exponent(0) == -126
    tiny = 6 * Fraction(1, 2**126) * (1 + Fraction(1, 2**22))  # log2(amax / 6) = -126 + 5.7e-7, a float32 -126
    assert (fp4_ue8m0_scale_exponent(tiny, F32), fp4_ue8m0_scale_exponent(tiny)) == (-126, -125)
    assert fp4_e4m3_scale_code(0, F32) == fp4_e4m3_scale_code(0)


def test_log2_exceeds_refines_until_the_bounds_separate() -> None:
    """Close to the threshold the first bounds overlap; the refinement still decides."""
    h = Fraction(1, 2**22)
    just_above = 1 + Fraction(3, 2**24)  # log2 = 2.58e-7 > 2**-22 = 2.38e-7
    just_below = 1 + Fraction(5, 2**25)  # log2 = 2.15e-7 < 2**-22
    assert scales.log2_exceeds(just_above, h)
    assert not scales.log2_exceeds(just_below, h)
    assert scales.log2_exceeds(Fraction(3, 2), Fraction(58, 100))  # log2(1.5) = 0.58496
    assert not scales.log2_exceeds(Fraction(3, 2), Fraction(585, 1000))


def test_log2_exceeds_where_the_first_bounds_overlap() -> None:
    """log2(1.99) against a threshold 1e-6 below and above it: the first bounds (4 terms) cannot tell, the refined
    ones can."""
    import math

    m = Fraction(199, 100)
    low, high = scales._ln_bounds(m, 4)
    assert float(high - low) > 1e-6
    below, above = Fraction(math.log2(1.99) - 1e-6), Fraction(math.log2(1.99) + 1e-6)
    assert scales.log2_exceeds(m, below)
    assert not scales.log2_exceeds(m, above)


def test_log2_exceeds_gives_up_past_its_term_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scales, "MAX_LOG_TERMS", 4)
    assert scales.log2_exceeds(Fraction(3, 2), Fraction(1, 2))
    import math

    h = Fraction(math.log2(1.99) - 1e-6)
    with pytest.raises(ValueError, match=rf"^h: log2\(199/100\) and {h} not separated within 4 terms$"):
        scales.log2_exceeds(Fraction(199, 100), h)


def test_quantize_row_passes_the_arithmetic_to_every_scale_rule() -> None:
    v4 = row_format("v4_584")
    boundary_row = [BOUNDARY] + [Fraction(0)] * 511
    assert quantize_row(v4, boundary_row, arithmetic=F32).scales[0] == 127 + 4
    assert quantize_row(v4, boundary_row).scales[0] == 127 + 5
    index_fp4 = row_format("index_fp4_68")
    tiny = 6 * Fraction(1, 2**126) * (1 + Fraction(1, 2**22))
    assert quantize_row(index_fp4, [tiny] + [Fraction(0)] * 127, arithmetic=F32).scales[0] == 127 - 126
    assert quantize_row(index_fp4, [tiny] + [Fraction(0)] * 127).scales[0] == 127 - 125
    with pytest.raises(ValueError, match="must be a float32 value under f32 arithmetic"):
        quantize_row(row_format("v41_fp4_288"), [Fraction(1, 3)] + [Fraction(0)] * 511, arithmetic=F32)
    assert quantize_row(row_format("v41_fp4_288"), [Fraction(1, 3)] + [Fraction(0)] * 511).scales


def test_f32_ceil_log2_names_its_argument() -> None:
    with pytest.raises(TypeError, match=r"^q: must be an int or Fraction, got float$"):
        scales.f32_ceil_log2(0.5)  # type: ignore[arg-type]
