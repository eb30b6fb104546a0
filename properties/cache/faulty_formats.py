"""A small torch implementation of quantize_store and gather_dequantize, bit-exact on float32 rows, with switches
that each plant one realistic bug (the shipped mutants, ``properties/cache/mutants.py``).

Exact without the reference: group maxima and scaled elements are float64 (a float32 value times a power of two is
exact; divided by an e4m3 scale it stays far from every rounding boundary of e2m1, docs/cache-properties.md);
the power-of-two exponent is a log2 estimate corrected by exact comparisons with ``c * 2**k``; the e4m3 scale and
the e2m1 elements are rounded to nearest even by hand, since torch casts float64 to float8 through float32.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch

from properties.cache.common import CacheShape, gather_call, store_call
from reference.formats import RowDtype, RowFormat
from reference.scales import Arithmetic

E4M3_MAX = 448.0
E4M3_SCALE_MIN = 2.0**-9
FP4_MAX = 6.0
FP8_AMAX_FLOOR = 1e-4  # no float32 value lies between this float64 and the exact 1/10000
FP4_UE8M0_AMAX_FLOOR = 6 * 2.0**-126
# e2m1 magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6: the midpoints, and whether a tie rounds up (to the even code)
E2M1_MIDPOINTS = ((0.25, False), (0.75, True), (1.25, False), (1.75, True), (2.5, False), (3.5, True), (5.0, False))
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


@dataclass(frozen=True)
class FormatBugs:
    """One planted bug per switch; the default is the correct implementation."""

    scale_floor: bool = False  # power-of-two scale 2**floor(log2(.)) instead of the ceiling
    nibbles_swapped: bool = False  # packed e2m1: element 2i in the high nibble (writer or reader)
    arrangement: Literal["sectioned", "interleaved"] | None = None  # arrangement used instead of the public one
    unpadded_blocks: bool = False  # block stride rows * row_bytes, ignoring the 576-byte alignment of V4 blocks
    minus_one_wraps: bool = False  # slot -1 indexes from the end: the row lands in the last slot of the cache
    e4m3_scale_nosat: bool = False  # main-FP4 scale amax / 6 not clamped at 448; the cast gives the NaN code
    rope_truncated: bool = False  # bf16 RoPE tail truncated to its top 16 bits instead of rounded to nearest even
    nonfinite_unchecked: bool = False  # NaN / inf in a stored row quantized instead of refused
    e4m3_scale_as_ue8m0: bool = False  # reader decodes the main-FP4 e4m3 scale bytes as UE8M0 exponents
    scales_alias_layer_0: bool = False  # every layer's scale part addressed in layer 0's page (an engine's bug)
    rows_through_f16: bool = False  # bf16 rows converted through float16 (range 65504, subnormals below 2**-14)
    scales_exact_under_f32: bool = False  # scales by the exact rule although f32_scale is declared


NO_BUGS = FormatBugs()


def _pow2(k: torch.Tensor) -> torch.Tensor:
    """``2.0**k`` in float64, exact for integer ``k`` in the float64 range."""
    return torch.ldexp(torch.ones_like(k, dtype=torch.float64), k)


def _exponent(a: torch.Tensor, c: float, *, floor: bool) -> torch.Tensor:
    """The smallest ``k`` with ``c * 2**k >= a`` (``floor``: the largest with ``c * 2**k <= a``); ``a > 0``."""
    k = torch.ceil(torch.log2(a / c)).to(torch.int64)
    k = k + (c * _pow2(k) < a).to(torch.int64)
    k = k - (c * _pow2(k - 1) >= a).to(torch.int64)
    if floor:
        k = k - (c * _pow2(k) > a).to(torch.int64)
    return k


def _round_e4m3(v: torch.Tensor) -> torch.Tensor:
    """Non-negative float64 values rounded to the e4m3 grid, ties to even, without saturation."""
    _, exp = torch.frexp(v)
    quantum = _pow2((exp.to(torch.int64) - 1).clamp(min=-6) - 3)
    return torch.round(v / quantum) * quantum


def _e2m1_codes(v: torch.Tensor) -> torch.Tensor:
    """e2m1 codes of float64 values: round to nearest even, saturate at 6, sign bit from the sign (also -0)."""
    mag = v.abs()
    code = torch.zeros(v.shape, dtype=torch.int64)
    for midpoint, up in E2M1_MIDPOINTS:
        code += (mag > midpoint) | ((mag == midpoint) & up)
    return code | (torch.signbit(v).to(torch.int64) << 3)


def _e4m3_bytes(v32: torch.Tensor) -> torch.Tensor:
    """e4m3 codes of float32 values already within [-448, 448] (torch's float32 cast rounds to nearest even)."""
    return v32.clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).view(torch.uint8)


def _exponent_f32(a: torch.Tensor, c: float, floor: float) -> torch.Tensor:
    """``ceil(fl(log2(fl(max(a, floor) / c))))`` in float32 arithmetic (``a``: float32 values held in float64): the
    quotient a float32 division, the logarithm taken in float64 and rounded once to float32."""
    q = a.to(torch.float32).clamp(min=torch.tensor(floor, dtype=torch.float32)) / torch.tensor(c, dtype=torch.float32)
    return torch.ceil(torch.log2(q.to(torch.float64)).to(torch.float32)).to(torch.int64)


def _quantize(
    x: torch.Tensor, fmt: RowFormat, bugs: FormatBugs, arithmetic: Arithmetic = Arithmetic.EXACT
) -> tuple[torch.Tensor, torch.Tensor]:
    """Data and scale bytes of float32 rows ``x`` [R, dims], the scales in ``arithmetic``."""
    rows = x.shape[0]
    x64 = x.to(torch.float64)
    groups = x64[:, : fmt.quantized_dims].reshape(rows, fmt.groups, fmt.group_size)
    amax = groups.abs().amax(-1)
    f32 = arithmetic is Arithmetic.F32 and not bugs.scales_exact_under_f32
    if fmt.scale_kind == "e4m3":
        quotient = (amax.to(torch.float32) / torch.tensor(FP4_MAX)).to(torch.float64) if f32 else amax / FP4_MAX
        wanted = quotient.clamp(min=E4M3_SCALE_MIN)
        if not bugs.e4m3_scale_nosat:
            wanted = wanted.clamp(max=E4M3_MAX)
        scale = _round_e4m3(wanted)
        over = scale > E4M3_MAX
        scale_bytes = _e4m3_bytes(scale.to(torch.float32))
        scale_bytes = torch.where(over, torch.tensor(0x7F, dtype=torch.uint8), scale_bytes)
        scale = torch.where(over, torch.full_like(scale, float("nan")), scale)
        codes = _e2m1_codes(groups / scale[..., None])
    else:
        if fmt.element == "e2m1" and f32:
            k = _exponent_f32(amax, FP4_MAX, FP4_UE8M0_AMAX_FLOOR)
        elif fmt.element == "e2m1":
            k = _exponent(amax.clamp(min=FP4_UE8M0_AMAX_FLOOR), FP4_MAX, floor=bugs.scale_floor)
        elif f32:
            k = _exponent_f32(amax, E4M3_MAX, FP8_AMAX_FLOOR)
        else:
            k = _exponent(amax.clamp(min=FP8_AMAX_FLOOR), E4M3_MAX, floor=bugs.scale_floor)
        scaled = groups * _pow2(-k)[..., None]
        if fmt.element == "e4m3":
            codes = _e4m3_bytes(scaled.to(torch.float32)).to(torch.int64)
        else:
            codes = _e2m1_codes(scaled)
        if fmt.scale_kind == "ue8m0":
            scale_bytes = (k + 127).to(torch.uint8)
        else:
            scale_bytes = _pow2(k).to(torch.float32).view(torch.uint8)
    codes = codes.reshape(rows, fmt.quantized_dims)
    if fmt.element == "e4m3":
        elements = codes.to(torch.uint8)
    else:
        low, high = codes[:, 0::2], codes[:, 1::2]
        if bugs.nibbles_swapped:
            low, high = high, low
        elements = (low | (high << 4)).to(torch.uint8)
    tail = x[:, fmt.quantized_dims :].contiguous()
    if bugs.rope_truncated:
        tail_bytes = (tail.view(torch.int32) >> 16).to(torch.int16).view(torch.uint8)
    else:
        tail_bytes = tail.to(torch.bfloat16).view(torch.uint8)
    pad = torch.zeros((rows, fmt.scale_pad_bytes), dtype=torch.uint8)
    data = torch.cat([elements, tail_bytes], dim=1)
    return data, torch.cat([scale_bytes.reshape(rows, fmt.groups * fmt.scale_size), pad], dim=1)


def _offsets(shape: CacheShape, slots: torch.Tensor, bugs: FormatBugs) -> tuple[torch.Tensor, torch.Tensor]:
    """Absolute byte offsets of each slot's data and scale parts, in the call's layer."""
    layout = shape.layout
    fmt, rows = layout.fmt, layout.rows
    page = rows * fmt.row_bytes if bugs.unpadded_blocks else layout.block_bytes
    block, row = slots // rows, slots % rows
    data_base = (block * shape.layers + shape.layer) * page
    scale_base = block * shape.layers * page if bugs.scales_alias_layer_0 else data_base
    if (bugs.arrangement or layout.arrangement) == "sectioned":
        return data_base + row * fmt.data_bytes, scale_base + rows * fmt.data_bytes + row * fmt.scale_bytes
    return data_base + row * fmt.row_bytes, scale_base + row * fmt.row_bytes + fmt.data_bytes


def quantize_store(
    rows: torch.Tensor,
    slots: torch.Tensor,
    cache: torch.Tensor,
    *,
    fmt: str,
    rows_per_block: int,
    layer: int,
    bugs: FormatBugs = NO_BUGS,
    dtype: RowDtype = RowDtype.F32,
    arithmetic: Arithmetic = Arithmetic.EXACT,
) -> None:
    """Quantize ``rows`` (f32[R, d], or bf16 under ``dtype``) into layer ``layer`` of ``cache`` at ``slots`` (i64[R],
    -1 skipped), in place; the scales in ``arithmetic``."""
    shape, rowfmt = store_call(rows, slots, cache, fmt, rows_per_block, layer, dtype)
    rows = rows.to(torch.float16).to(torch.float32) if bugs.rows_through_f16 else rows.to(torch.float32)
    capacity = shape.capacity
    slots = slots.cpu()
    if bugs.minus_one_wraps:
        slots = torch.where(slots == -1, capacity - 1, slots)
    keep = slots != -1
    kept = slots[keep]
    if ((kept < 0) | (kept >= capacity)).any():
        raise ValueError(f"slots: every slot must be -1 or in [0, {capacity}), got {kept.tolist()}")
    if kept.unique().numel() != kept.numel():
        raise ValueError(f"slots: valid slots must be distinct, got {kept.tolist()}")
    x = rows.cpu()[keep]
    if not bugs.nonfinite_unchecked:
        bad = (~torch.isfinite(x)).any(dim=1)
        if bad.any():
            which = torch.nonzero(keep).flatten()[bad].tolist()
            raise ValueError(f"rows: rows {which} are stored but hold NaN or infinity, which no format stores")
        tail = x[:, rowfmt.quantized_dims :].to(torch.bfloat16)
        if torch.isinf(tail).any():
            raise ValueError("rows: a RoPE value overflows bf16")
    data, scales = _quantize(x, rowfmt, bugs, arithmetic)
    data_at, scale_at = _offsets(shape, kept, bugs)
    flat = cache.view(-1)
    device_data = (data_at[:, None] + torch.arange(rowfmt.data_bytes)).to(cache.device)
    device_scales = (scale_at[:, None] + torch.arange(rowfmt.scale_bytes)).to(cache.device)
    flat[device_data] = data.to(cache.device)
    flat[device_scales] = scales.to(cache.device)


def gather_dequantize(
    cache: torch.Tensor,
    slots: torch.Tensor,
    *,
    fmt: str,
    rows_per_block: int,
    layer: int,
    bugs: FormatBugs = NO_BUGS,
) -> torch.Tensor:
    """The values stored at ``slots`` (i64[R], each in [0, capacity)) of layer ``layer`` as f32[R, d]."""
    shape, rowfmt = gather_call(cache, slots, fmt, rows_per_block, layer)
    capacity = shape.capacity
    slots = slots.cpu()
    if ((slots < 0) | (slots >= capacity)).any():
        raise ValueError(f"slots: every slot must be in [0, {capacity}), got {slots.tolist()}")
    n = slots.shape[0]
    data_at, scale_at = _offsets(shape, slots, bugs)
    flat = cache.view(-1).cpu()
    data = flat[data_at[:, None] + torch.arange(rowfmt.data_bytes)]
    scales = flat[scale_at[:, None] + torch.arange(rowfmt.scale_bytes)]
    packed = data[:, : rowfmt.quantized_bytes].contiguous()
    if rowfmt.element == "e4m3":
        elements = packed.view(torch.float8_e4m3fn).to(torch.float64)
    else:
        low, high = packed.to(torch.int64) & 0xF, packed.to(torch.int64) >> 4
        if bugs.nibbles_swapped:
            low, high = high, low
        codes = torch.stack([low, high], dim=-1).reshape(n, rowfmt.quantized_dims)
        lut = torch.tensor([*E2M1_VALUES, *(-v for v in E2M1_VALUES)], dtype=torch.float64)
        elements = lut[codes]
    scale_part = scales[:, : rowfmt.groups * rowfmt.scale_size].contiguous()
    if rowfmt.scale_kind == "fp32_pow2":
        scale = scale_part.view(torch.float32).to(torch.float64)
    elif rowfmt.scale_kind == "ue8m0" or bugs.e4m3_scale_as_ue8m0:
        scale = _pow2(scale_part.to(torch.int64) - 127)
    else:
        scale = scale_part.view(torch.float8_e4m3fn).to(torch.float64)
    values = (elements.reshape(n, rowfmt.groups, rowfmt.group_size) * scale[..., None]).reshape(n, -1)
    tail = data[:, rowfmt.quantized_bytes :].contiguous().view(torch.bfloat16).to(torch.float64)
    return torch.cat([values, tail], dim=1).to(torch.float32).to(cache.device)


def store_with(
    bugs: FormatBugs, dtype: RowDtype = RowDtype.F32, arithmetic: Arithmetic = Arithmetic.EXACT
) -> Callable[..., None]:
    """quantize_store with ``bugs`` planted, as a contract-shaped callable taking rows of ``dtype`` and computing
    scales in ``arithmetic`` (the options ``bf16_rows`` and ``f32_scale``)."""
    return functools.partial(quantize_store, bugs=bugs, dtype=dtype, arithmetic=arithmetic)


def gather_with(bugs: FormatBugs) -> Callable[..., torch.Tensor]:
    """gather_dequantize with ``bugs`` planted, as a contract-shaped callable."""
    return functools.partial(gather_dequantize, bugs=bugs)
