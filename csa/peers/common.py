"""What every peer adapter shares: the contract's cache page of one layer as the view an engine's kernel takes,
and a CPU tensor that answers ``is_cuda`` as a GPU one does."""

from __future__ import annotations

import torch

from reference.cache_blocks import public_layout
from reference.formats import row_format


def block_bytes(fmt: str, rows_per_block: int) -> int:
    return public_layout(row_format(fmt), rows_per_block).block_bytes


def layer_pages(cache: torch.Tensor, fmt: str, rows_per_block: int, layer: int) -> torch.Tensor:
    """Layer ``layer``'s pages of the contract's cache ``u8[num_blocks, layers * block_bytes]``: a view
    ``u8[num_blocks, block_bytes]`` whose row stride is the cache's (the engines index blocks by ``stride(0)``)."""
    page = block_bytes(fmt, rows_per_block)
    return cache[:, layer * page : (layer + 1) * page]


def token_records(pages: torch.Tensor, rows_per_block: int, record: int) -> torch.Tensor:
    """The same pages as ``u8[num_blocks, rows_per_block, record]`` over the same bytes, the shape vLLM's
    kernels read the record kind from (``shape[-1]``); only its data pointer and ``stride(0)`` are used."""
    return pages.as_strided((pages.shape[0], rows_per_block, record), (pages.stride(0), record, 1))


class CudaLooking(torch.Tensor):
    """A CPU tensor whose ``is_cuda`` is True: for an engine's host code that asserts ``x.is_cuda`` before
    launching a Triton kernel, which on a CPU runs in the interpreter on this tensor's memory."""

    @property
    def is_cuda(self) -> bool:  # type: ignore[override]
        return True


def cuda_looking(t: torch.Tensor) -> torch.Tensor:
    return t if t.is_cuda else t.as_subclass(CudaLooking)
