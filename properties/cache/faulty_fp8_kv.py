"""sparse_attention_fp8_kv in torch, for the shipped mutants and their unmutated control: the gather of
``faulty_formats`` reads each lane's row from the paged cache, then the tiled attention of ``faulty_attention``
runs on those rows; either step, or the paging between them, may carry one planted bug."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from properties.cache.faulty_attention import AttentionBugs, tiled_attention
from properties.cache.faulty_formats import FormatBugs, gather_dequantize

LANE_RULES = "out_of_range+empty_zero"
"""The one lane convention of sparse_attention_fp8_kv (the contract's signature)."""


@dataclass(frozen=True)
class PagedBugs:
    """The paging step's own bug switches, beside the gather's and the attention's."""

    slots_wrap: bool = False  # slots at or past the capacity read modulo the capacity (only -1 and < 0 skipped)
    gather: FormatBugs = field(default_factory=FormatBugs)
    attention: AttentionBugs = field(default_factory=AttentionBugs)


NO_BUGS = PagedBugs()


def paged_rows(
    cache: torch.Tensor, slots: torch.Tensor, *, rows_per_block: int, fmt: str, dims: int, bugs: PagedBugs = NO_BUGS
) -> tuple[torch.Tensor, torch.Tensor]:
    """sparse_attention's view of a paged call: kv f32[M * K, dims] (CPU), lane (m, j)'s row what the gather reads
    at its slot (zeros for an invalid slot, which is never read), and lanes i32[M, K] naming that row, or -1."""
    m, k = slots.shape
    capacity = cache.shape[0] * rows_per_block
    s = slots.to(torch.int64)
    valid = (s >= 0) & ((s < capacity) | bugs.slots_wrap)
    read = valid.reshape(-1)
    rows = torch.zeros(m * k, dims, dtype=torch.float32)
    if bool(read.any()):
        wanted = s.reshape(-1)[read] % capacity
        rows[read.cpu()] = gather_dequantize(
            cache, wanted, fmt=fmt, rows_per_block=rows_per_block, layer=0, bugs=bugs.gather
        ).cpu()
    position = torch.arange(m * k, dtype=torch.int64, device=slots.device).reshape(m, k)
    return rows, torch.where(valid, position, -1).to(torch.int32)


def paged_attention(
    *tensors: torch.Tensor, scale: float, rows_per_block: int, fmt: str, bugs: PagedBugs = NO_BUGS
) -> tuple[torch.Tensor, torch.Tensor]:
    """(out f32[M, H, 512], lse f32[M, H]) over the rows the slots name; invalid slots are never read."""
    q, cache, slots, sink = tensors  # the contract's order
    rows, lanes = paged_rows(cache, slots, rows_per_block=rows_per_block, fmt=fmt, dims=q.shape[2], bugs=bugs)
    kv = rows.to(device=q.device, dtype=q.dtype)
    return tiled_attention(q, kv, lanes, sink, scale=scale, dv=kv.shape[1], convention=LANE_RULES, bugs=bugs.attention)


def paged_with(bugs: PagedBugs, fmt: str) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """The composed implementation with ``bugs`` planted, as a contract-shaped callable for format ``fmt``."""
    return functools.partial(paged_attention, fmt=fmt, bugs=bugs)
