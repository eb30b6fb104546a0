"""What quantize_store, gather_dequantize and sparse_attention share: the contract's format and convention names,
the cache layout of a format, and memoized calls into the exact reference (docs/cache-properties.md).

A cache is ``u8[num_blocks, layers * block_bytes]`` with ``block_bytes = public_layout(fmt, rows_per_block)
.block_bytes``: block ``b`` holds one page per layer, in layer order (``reference.cache_blocks.page_offset``);
physical slot ``s`` of layer ``l`` is row ``s % rows_per_block`` of layer ``l``'s page of block
``s // rows_per_block``.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from fractions import Fraction

import torch

from reference.attention import EmptyRow, HeadResult, InvalidLanes, Sink, valid_lanes
from reference.attention import sparse_attention as reference_attention
from reference.cache_blocks import BlockLayout, public_layout, slot_byte_offsets
from reference.conventions import BF16_ATTENTION, FORMATS, FP8_KV_ATTENTION, SPARSE_ATTENTION, lookup, parse
from reference.formats import QuantizedRow, RowDtype, RowFormat, dequantize_row, quantize_row
from reference.grids import FP32, encode
from reference.scales import Arithmetic
from reference.score_values import NAN, NEG_INF, POS_INF

FORMAT_CONVENTIONS: tuple[str, ...] = tuple(FORMATS)
ATTENTION_CONVENTIONS: tuple[str, ...] = tuple(SPARSE_ATTENTION)
FP8_KV_CONVENTIONS: tuple[str, ...] = tuple(FP8_KV_ATTENTION)
BF16_CONVENTIONS: tuple[str, ...] = tuple(BF16_ATTENTION)


def row_format_of(fmt: str) -> RowFormat:
    """The reference row format a contract format name stands for."""
    return lookup(FORMATS, fmt, "fmt")


def store_options(convention: str) -> tuple[str, RowDtype, Arithmetic]:
    """A quantize_store convention (``v41_fp8_528+bf16_rows+f32_scale``) as its format name (the kernel's
    ``fmt``), the dtype of its rows and the arithmetic of its scales."""
    chosen = parse("quantize_store", convention)
    return chosen.base, chosen.setting(RowDtype, RowDtype.F32), chosen.setting(Arithmetic, Arithmetic.EXACT)


def cache_layout(fmt: str, rows_per_block: int) -> BlockLayout:
    """The public block layout of ``fmt`` with ``rows_per_block`` rows (arrangement and padding)."""
    if isinstance(rows_per_block, bool) or not isinstance(rows_per_block, int) or rows_per_block < 1:
        raise ValueError(f"rows_per_block: must be an int >= 1, got {rows_per_block!r}")
    return public_layout(row_format_of(fmt), rows_per_block)


@dataclass(frozen=True)
class CacheShape:
    """A checked cache tensor: its block layout, slots per layer and layers, and the layer a call reads or
    writes."""

    layout: BlockLayout
    capacity: int
    layers: int
    layer: int

    def offsets(self, slot: int) -> tuple[int, int]:
        """Absolute byte offsets of the slot's data and scale parts in the call's layer."""
        return slot_byte_offsets(self.layout, slot, self.layers, self.layer)


def cache_shape(cache: object, layout: BlockLayout, layer: object) -> CacheShape:
    """A cache tensor checked: ``u8[num_blocks, layers * layout.block_bytes]``, contiguous, ``0 <= layer <
    layers``; ValueError naming the argument otherwise."""
    import torch

    wanted = f"u8[num_blocks, layers * {layout.block_bytes}]"
    if not isinstance(cache, torch.Tensor) or cache.dtype != torch.uint8 or cache.dim() != 2:
        raise ValueError(f"cache: must be {wanted}, got {_described(cache)}")
    width = int(cache.shape[1])
    if width == 0 or width % layout.block_bytes:
        raise ValueError(f"cache: must be {wanted}, got {_described(cache)}")
    if not cache.is_contiguous():
        raise ValueError("cache: must be contiguous")
    layers = width // layout.block_bytes
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < layers:
        raise ValueError(f"layer: must be an int in [0, {layers}) (the cache's layers), got {layer!r}")
    return CacheShape(layout, int(cache.shape[0]) * layout.rows, layers, layer)


def _described(x: object) -> str:
    return f"{x.dtype}{list(x.shape)}" if hasattr(x, "dtype") and hasattr(x, "shape") else type(x).__name__


def store_call(
    rows: object,
    slots: object,
    cache: object,
    fmt: str,
    rows_per_block: int,
    layer: object,
    dtype: RowDtype = RowDtype.F32,
) -> tuple[CacheShape, RowFormat]:
    """A quantize_store call's cache shape and row format (rows of ``dtype``); ValueError naming a malformed
    argument."""
    import torch

    layout = cache_layout(fmt, rows_per_block)
    rowfmt = row_format_of(fmt)
    shape = cache_shape(cache, layout, layer)
    want, name = (torch.bfloat16, "bf16") if dtype is RowDtype.BF16 else (torch.float32, "f32")
    if not isinstance(rows, torch.Tensor) or rows.dtype != want or rows.dim() != 2:
        raise ValueError(f"rows: must be {name}[R, {rowfmt.dims}], got {_described(rows)}")
    if rows.shape[1] != rowfmt.dims:
        raise ValueError(f"rows: must be {name}[R, {rowfmt.dims}], got {_described(rows)}")
    if not isinstance(slots, torch.Tensor) or slots.dtype != torch.int64 or slots.shape != (rows.shape[0],):
        raise ValueError(f"slots: must be i64[{rows.shape[0]}], got {_described(slots)}")
    return shape, rowfmt


def gather_call(
    cache: object, slots: object, fmt: str, rows_per_block: int, layer: object
) -> tuple[CacheShape, RowFormat]:
    """A gather_dequantize call's cache shape and row format; ValueError naming a malformed argument."""
    import torch

    layout = cache_layout(fmt, rows_per_block)
    rowfmt = row_format_of(fmt)
    shape = cache_shape(cache, layout, layer)
    if not isinstance(slots, torch.Tensor) or slots.dtype != torch.int64 or slots.dim() != 1:
        raise ValueError(f"slots: must be i64[R], got {_described(slots)}")
    return shape, rowfmt


def pad_offsets(layout: BlockLayout) -> range:
    """Offsets, within a row's scale part, of the pad bytes a writer may leave unwritten or write as 0."""
    fmt = layout.fmt
    return range(fmt.scale_bytes - fmt.scale_pad_bytes, fmt.scale_bytes)


BF16_DIMS = 512
"""sparse_attention_bf16's D and dv."""


def check_bf16_attention(q: object, kv: object, dv: object) -> None:
    """sparse_attention_bf16's own arguments: q bf16[M, H, 512], kv bf16[N, 512], dv 512; a ValueError (a
    TypeError for a dv that is no int) naming the first that is not."""
    for name, tensor, dims in (("q", q, 3), ("kv", kv, 2)):
        if (
            not isinstance(tensor, torch.Tensor)
            or tensor.dtype != torch.bfloat16
            or tensor.dim() != dims
            or tensor.shape[-1] != BF16_DIMS
        ):
            shape = "[M, H, 512]" if dims == 3 else "[N, 512]"
            raise ValueError(f"{name}: must be bf16{shape}, got {_described(tensor)}")
    if isinstance(dv, bool) or not isinstance(dv, int):
        raise TypeError(f"dv: must be an int, got {type(dv).__name__}")
    if dv != BF16_DIMS:
        raise ValueError(f"dv: must be {BF16_DIMS} (the whole row is the value), got {dv}")


def attention_convention(convention: str) -> tuple[InvalidLanes, EmptyRow]:
    """``"out_of_range+empty_nan"`` -> ``("out_of_range", "nan")``."""
    found = lookup(SPARSE_ATTENTION, convention, "convention")
    return found.invalid, found.empty_row


# Memoized reference calls: the reference adapter and a property's check ask for the same rows.


@functools.lru_cache(maxsize=8192)
def reference_row(
    fmt: str, values: tuple[float, ...], dtype: RowDtype = RowDtype.F32, arithmetic: Arithmetic = Arithmetic.EXACT
) -> QuantizedRow:
    """The exact stored bytes of one row of finite float values (``Fraction(x)`` is exact): a row of ``dtype``,
    scales in ``arithmetic``."""
    return quantize_row(row_format_of(fmt), [Fraction(v) for v in values], dtype=dtype, arithmetic=arithmetic)


@functools.lru_cache(maxsize=8192)
def reference_decode(fmt: str, data: bytes, scales: bytes) -> tuple[Fraction, ...]:
    """The exact values stored bytes stand for."""
    return dequantize_row(row_format_of(fmt), QuantizedRow(data, scales))


@functools.lru_cache(maxsize=8192)
def reference_decode_f32(fmt: str, data: bytes, scales: bytes) -> tuple[float, ...] | None:
    """``reference_decode`` as floats, when every value is exactly a float32 (else None): compared with a
    float32 result by plain float equality, which is then exact."""
    exact = reference_decode(fmt, data, scales)
    floats = tuple(float(v) for v in exact)
    if all(is_float32(f) and equals_float(v, f) for v, f in zip(exact, floats, strict=True)):
        return floats
    return None


def as_sink(value: float) -> Sink:
    """A float sink as the reference takes it: -inf is no sink, +inf is a sink that zeroes the output."""
    if value != value:
        raise ValueError("sink: NaN has no defined result")
    if value == float("-inf"):
        return NEG_INF
    if value == float("inf"):
        return POS_INF
    return Fraction(value)


@dataclass(frozen=True)
class AttentionCall:
    """One sparse_attention call: the contract's arguments and the implementation's convention."""

    q: torch.Tensor
    kv: torch.Tensor
    indices: torch.Tensor
    sink: torch.Tensor
    scale: float
    dv: int
    convention: str


def exact_attention(call: AttentionCall) -> list[tuple[HeadResult, ...]]:
    """Every query row's exact result per head; values are the first ``dv`` entries of each cache row.

    The memo is keyed on a row's valid lanes, sorted, as the reference's own ``valid_lanes`` finds them, and on
    the cache rows they read, renumbered in ascending order: the reference skips invalid lanes and sums valid
    ones in ascending order, which the renumbering keeps, so a row's result depends on nothing else (bit for
    bit), and calls that differ only in lane order, in how they mark invalid lanes or in rows no lane reads
    share it.
    """
    invalid, empty_row = attention_convention(call.convention)
    keys = call.kv.to(torch.float32).tolist()
    sinks = tuple(call.sink.to(torch.float32).tolist())
    results = []
    for heads, lanes in zip(call.q.to(torch.float32).tolist(), call.indices.tolist(), strict=True):
        valid = valid_lanes(lanes, len(keys), invalid)
        read = sorted(set(valid))
        renumbered = {j: i for i, j in enumerate(read)}
        rows = tuple(tuple(keys[j]) for j in read)
        query = tuple(tuple(h) for h in heads)
        empty = empty_row if not valid else "zero"
        lanes_read = tuple(renumbered[j] for j in valid)
        results.append(_attention_row(query, rows, lanes_read, float(call.scale), sinks, call.dv, empty))
    return results


@functools.lru_cache(maxsize=8192)
def _attention_row(
    q: tuple[tuple[float, ...], ...],
    kv: tuple[tuple[float, ...], ...],
    lanes: tuple[int, ...],
    scale: float,
    sinks: tuple[float, ...],
    dv: int,
    empty_row: EmptyRow,
) -> tuple[HeadResult, ...]:
    keys = [[Fraction(x) for x in row] for row in kv]
    values = [row[:dv] for row in keys] if keys else None
    heads = reference_attention(
        [[Fraction(x) for x in head] for head in q],
        keys,
        list(lanes),
        scale=Fraction(scale),
        sinks=[as_sink(s) for s in sinks],
        values=values,
        invalid="out_of_range",
        empty_row=empty_row,
    )
    # With no cache row the reference cannot know dv and returns len(q[0]) entries, all 0 or NaN.
    return tuple(HeadResult(h.out[:dv], h.lse) for h in heads)


def to_float(value: object) -> float:
    """An exact reference value as the nearest float64 (+inf and NaN for the markers)."""
    if value is POS_INF:
        return float("inf")
    if value is NEG_INF:
        return float("-inf")
    if value is NAN:
        return float("nan")
    assert isinstance(value, Fraction)
    return float(value)


def to_float32(value: object) -> float:
    """An exact reference value rounded once, to nearest even, to float32 (returned as a Python float)."""
    if not isinstance(value, Fraction):
        return to_float(value)
    (result,) = struct.unpack("<f", encode(FP32, value).to_bytes(4, "little"))
    return float(result)


def is_float32(x: float) -> bool:
    """Whether a float is exactly a float32 value (infinities and NaN included)."""
    if x != x or x in (float("inf"), float("-inf")):
        return True
    try:
        return float(struct.unpack("<f", struct.pack("<f", x))[0]) == x
    except OverflowError:
        return False


def equals_float(exact: Fraction, x: float) -> bool:
    """Whether the exact rational equals the float ``x`` (fast: integer bit tests, no Fraction arithmetic)."""
    if x != x or x in (float("inf"), float("-inf")):
        return False
    d = exact.denominator
    if d & (d - 1):
        return False  # not dyadic, so no float
    return float(exact) == x and _bits_fit_float64(exact)


def _bits_fit_float64(exact: Fraction) -> bool:
    n = abs(exact.numerator)
    if n == 0:
        return True
    lowest = (n & -n).bit_length() - exact.denominator.bit_length()
    highest = n.bit_length() - exact.denominator.bit_length()
    return highest - lowest <= 52 and lowest >= -1074
