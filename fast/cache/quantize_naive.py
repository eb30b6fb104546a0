"""Eager-torch quantize-and-store and gather-and-dequantize: the readable twin of ``quantize.py``.

    quantize_rows(rows: f32[R, d], fmt) -> (data: u8[R, data_bytes], scales: u8[R, scale_bytes])
    store_rows(StoreArgs(rows, slots: i64[R], cache: u8[num_blocks, block_bytes], fmt, rows_per_block))  in place
    gather_rows(GatherArgs(cache, slots, fmt, rows_per_block, out: f32[R, d], fill)) -> out

Same results as the Triton kernels, byte for byte, including the documented NaN / infinity handling (a group
holding one stores NaN scale and element codes; docs/cache-kernels.md). ``store_rows`` selects the rows with a
valid slot by a boolean mask, which synchronizes with the host; the rest does not.
"""

from __future__ import annotations

import torch

from fast.cache import rounding_naive as rn
from fast.cache.checks import GatherArgs, StoreArgs
from fast.cache.formats import SCALE_FP4_E4M3, SCALE_FP4_UE8M0, SCALE_FP8_FP32, CacheFormat


def _le_bytes(values: torch.Tensor, width: int) -> torch.Tensor:
    """Little-endian bytes of int32 ``values`` (any shape ``[..., n]``) -> u8 ``[..., n * width]``."""
    parts = [((values >> (8 * i)) & 0xFF) for i in range(width)]
    return torch.stack(parts, dim=-1).flatten(-2).to(torch.uint8)


def quantize_rows(rows: torch.Tensor, fmt: CacheFormat) -> tuple[torch.Tensor, torch.Tensor]:
    """The data and scale bytes of every row, as ``reference.formats.quantize_row`` lays them out."""
    R = rows.shape[0]
    quantized = rows[:, : fmt.groups * fmt.group_size].float().reshape(R, fmt.groups, fmt.group_size)
    amax = quantized.abs().amax(dim=-1)
    bad = ~torch.isfinite(amax)
    safe_amax = torch.where(bad, torch.zeros_like(amax), amax)
    bad3 = bad[..., None]
    if fmt.scale_rule == SCALE_FP4_E4M3:
        scale_codes = rn.fp4_e4m3_scale(safe_amax)
        codes = rn.e2m1_codes_scaled(quantized, rn.e4m3_value(scale_codes)[..., None])
        codes = torch.where(bad3, torch.zeros_like(codes), codes)
        scales = torch.where(bad, torch.full_like(scale_codes, 0x7F), scale_codes)
    elif fmt.scale_rule == SCALE_FP4_UE8M0:
        e = rn.fp4_ue8m0_exponent(safe_amax)
        codes = rn.e2m1_codes_pow2(quantized, e[..., None])
        codes = torch.where(bad3, torch.zeros_like(codes), codes)
        scales = torch.where(bad, rn.UE8M0_NAN, e + 127).to(torch.uint8)
    else:
        e = rn.fp8_exponent(safe_amax)
        codes = rn.e4m3_codes(quantized, e[..., None])
        codes = torch.where(bad3, torch.full_like(codes, rn.E4M3_NAN), codes)
        if fmt.scale_rule == SCALE_FP8_FP32:
            bits = torch.where(bad, 0x7FC00000, (e + 127) << 23).to(torch.int32)
            scales = _le_bytes(bits, 4)
        else:
            scales = torch.where(bad, rn.UE8M0_NAN, e + 127).to(torch.uint8)
    codes = codes.reshape(R, -1)
    if fmt.fp4:
        codes = codes[:, 0::2] | (codes[:, 1::2] << 4)
    parts = [codes]
    if fmt.tail_dims:
        parts.append(_le_bytes(rn.bf16_bits(rows[:, fmt.groups * fmt.group_size :].float()), 2))
    pad = fmt.scale_bytes - scales.shape[1]
    scale_parts = [scales] + ([torch.zeros(R, pad, dtype=torch.uint8, device=rows.device)] if pad else [])
    return torch.cat(parts, dim=1), torch.cat(scale_parts, dim=1)


def _offsets(
    slots: torch.Tensor, fmt: CacheFormat, rows_per_block: int, block_bytes: int, page: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Byte offsets of each slot's data and scale parts: its block's row of the cache (``block_bytes`` wide,
    every layer's page), then the layer's page at ``page``, then the format's public layout inside it."""
    data_stride, scale_base, scale_stride = fmt.offsets(rows_per_block)
    block, row = slots // rows_per_block, slots % rows_per_block
    base = block * block_bytes + page
    data = base + row * data_stride
    scale = base + scale_base + row * scale_stride
    dev = slots.device
    return (
        data[:, None] + torch.arange(fmt.data_bytes, device=dev),
        scale[:, None] + torch.arange(fmt.scale_bytes, device=dev),
    )


def store_rows(call: StoreArgs) -> None:
    """Quantize ``call.rows`` and write them into ``call.cache`` at ``call.slots``; slots outside the cache are
    skipped."""
    rows, slots, cache, fmt, rows_per_block = call.rows, call.slots, call.cache, call.fmt, call.rows_per_block
    if rows.shape[0] == 0:
        return
    data, scales = quantize_rows(rows, fmt)
    keep = (slots >= 0) & (slots < cache.shape[0] * rows_per_block)
    data_at, scale_at = _offsets(slots[keep], fmt, rows_per_block, cache.shape[1], call.layer * call.page_bytes)
    flat = cache.view(-1)
    flat[data_at] = data[keep]
    flat[scale_at] = scales[keep]


def dequantize(data: torch.Tensor, scales: torch.Tensor, fmt: CacheFormat) -> torch.Tensor:
    """f32[R, d] from the data (u8[R, data_bytes]) and scale (u8[R, scale_bytes]) bytes."""
    R = data.shape[0]
    packed = data[:, : fmt.quantized_bytes]
    if fmt.fp4:
        codes = torch.stack([packed & 0x0F, packed >> 4], dim=-1).reshape(R, -1)
        values = rn.e2m1_value(codes)
    else:
        values = rn.e4m3_value(packed.contiguous())
    if fmt.scale_rule == SCALE_FP8_FP32:
        scale = scales[:, :4].contiguous().view(torch.int32).view(torch.float32)
    elif fmt.scale_rule == SCALE_FP4_E4M3:
        scale = rn.e4m3_value(scales[:, : fmt.groups].contiguous())
    else:
        scale = rn.ue8m0_value(scales[:, : fmt.groups])
    values = (values.reshape(R, fmt.groups, fmt.group_size) * scale[..., None]).reshape(R, -1)
    if fmt.tail_dims:
        tail = data[:, fmt.quantized_bytes :].contiguous().view(torch.bfloat16).float()
        values = torch.cat([values, tail], dim=1)
    return values


def gather_rows(call: GatherArgs) -> torch.Tensor:
    """Dequantize the rows at ``call.slots`` into ``call.out``; ``call.fill`` where the slot is outside the
    cache."""
    cache, slots, out = call.cache, call.slots, call.out
    if slots.shape[0] == 0:
        return out
    if cache.numel() == 0:  # no slot is inside, and there is no byte to index
        return out.fill_(call.fill)
    ok = (slots >= 0) & (slots < cache.shape[0] * call.rows_per_block)
    page = call.layer * call.page_bytes
    data_at, scale_at = _offsets(torch.where(ok, slots, 0), call.fmt, call.rows_per_block, cache.shape[1], page)
    flat = cache.view(-1)
    values = dequantize(flat[data_at], flat[scale_at], call.fmt)
    out.copy_(torch.where(ok[:, None], values, torch.full_like(values, call.fill)))
    return out
