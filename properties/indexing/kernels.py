"""The project's indexing kernels (``fast.indexing``) as implementations of the contract.

For every indexing operation and each of its conventions (``reference.conventions``): a torch-eager
implementation (``fast.indexing.naive``) and a Triton one, where Triton is installed; where they run is
``properties.devices``'s policy.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import torch

from fast.indexing import naive, window
from fast.indexing.backends import triton_backend
from properties.devices import device_name, kernel_device, on_device
from properties.registry import Implementation
from reference import conventions
from reference.addressing import rows_per_block
from reference.candidates import NanPolicy
from reference.checks import require
from reference.padding import PADDING_LENGTH

Fn = Callable[..., torch.Tensor]


def visible_counts(positions: torch.Tensor, ratio: int) -> torch.Tensor:
    """Rows each query sees, ``(p + 1) // ratio``, the kernels' ``lengths`` (a padding query, -1, sees none)."""
    require(isinstance(ratio, int) and ratio > 0, "ratio", f"must be a positive int, got {ratio!r}")
    lowest = int(positions.min()) if positions.numel() else 0
    require(lowest >= PADDING_LENGTH, "positions", f"must be >= 0, or -1 for a padding query, got {lowest}")
    return (positions.to(torch.int64) + 1) // ratio


def _adapters(mod: Any) -> dict[tuple[str, str | None], Fn]:
    """Contract-shaped callables over one backend module (``naive`` or the Triton modules)."""

    def index_scores(q: torch.Tensor, weights: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, *, ratio: int):
        return mod.index_logits(q, weights, k, visible_counts(positions, ratio))

    def index_scores_fp8(*tensors: torch.Tensor, ratio: int) -> torch.Tensor:
        q, q_scale, weights, k, k_scale, positions = tensors  # the contract's order
        return mod.index_logits(q, weights, k, visible_counts(positions, ratio), k_scale=k_scale, q_scale=q_scale)

    out: dict[tuple[str, str | None], Fn] = {
        ("index_scores", None): index_scores,
        ("index_scores_fp8", None): index_scores_fp8,
    }

    def paged_index_scores(
        q: torch.Tensor, weights: torch.Tensor, cache: torch.Tensor, block_table: torch.Tensor, lengths: torch.Tensor
    ) -> torch.Tensor:
        rows = int(cache.shape[1]) if cache.dim() == 3 else 0  # a cache of another shape reaches the kernel's check
        return mod.paged_index_logits(q, weights, cache, block_table, lengths, rows_per_block=max(rows, 1))

    out[("paged_index_scores", None)] = paged_index_scores

    def paged_index_scores_fp8(*tensors: torch.Tensor, rows_per_block: int) -> torch.Tensor:
        q, q_scale, weights, cache, block_table, lengths = tensors  # the contract's order
        return mod.paged_index_logits(
            q, weights, cache, block_table, lengths, rows_per_block=rows_per_block, q_scale=q_scale
        )

    out[("paged_index_scores_fp8", None)] = paged_index_scores_fp8

    def topk_for(name: str) -> Fn:
        def topk(scores: torch.Tensor, lengths: torch.Tensor, offsets: torch.Tensor, *, k: int) -> torch.Tensor:
            return mod.topk(scores, lengths, k=k, convention=name, offsets=offsets)

        return topk

    for name in conventions.TOPK:
        out[("topk", name)] = topk_for(name)

    def candidates_for(pin: bool, drop: bool) -> Fn:
        def select(scores: torch.Tensor, lengths: torch.Tensor, *, block_size: int, topk_blocks: int) -> torch.Tensor:
            return mod.candidate_select(
                scores, lengths, block_size=block_size, topk_blocks=topk_blocks, pin_newest=pin, drop_nan=drop
            )

        return select

    for name, convention in conventions.CANDIDATE_SELECT.items():
        rule = convention.rule
        out[("candidate_select", name)] = candidates_for(rule.pin_newest, rule.nan_policy is NanPolicy.DROP)

    def restore(offsets: torch.Tensor, candidate_blocks: torch.Tensor, *, block_size: int) -> torch.Tensor:
        return mod.candidate_restore(offsets, candidate_blocks, block_size=block_size)

    out[("candidate_restore", None)] = restore

    def remap(
        columns: torch.Tensor, candidate_blocks: torch.Tensor, lengths: torch.Tensor, *, block_size: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return mod.candidate_remap(columns, candidate_blocks, lengths, block_size=block_size)

    out[("candidate_remap", None)] = remap  # type: ignore[assignment]

    def slots_for(guard: str) -> Fn:
        def slots(
            rows: torch.Tensor, block_table: torch.Tensor, lengths: torch.Tensor, *, block_size: int, ratio: int
        ) -> torch.Tensor:
            per_block = rows_per_block(block_size, ratio)
            return mod.slot_translation(rows, block_table, lengths, rows_per_block=per_block, guard=guard)

        return slots

    for guard in conventions.SLOT_TRANSLATION:
        out[("slot_translation", guard)] = slots_for(guard)

    def gathered(rows: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return mod.gathered_rows(rows, offsets)

    out[("gathered_rows", None)] = gathered

    def window_for(order: str) -> Fn:
        def window(*, window: int, seqlen: int, start_pos: int) -> torch.Tensor:
            device = kernel_device("triton") or torch.device("cpu")
            return mod.window_indices(
                window=window, seqlen=seqlen, start_pos=start_pos, order=order, device=device
            ).cpu()

        return window

    for order in conventions.WINDOW_INDICES:
        out[("window_indices", order)] = window_for(order)

    def compressed(*, ratio: int, seqlen: int, start_pos: int, offset: int) -> torch.Tensor:
        device = kernel_device("triton") or torch.device("cpu")
        return mod.compressed_indices(
            ratio=ratio, seqlen=seqlen, start_pos=start_pos, offset=offset, device=device
        ).cpu()

    out[("compressed_indices", None)] = compressed
    return out


def _implementations() -> list[Implementation]:
    backends: list[tuple[str, Any]] = [("torch", naive)]
    if importlib.util.find_spec("triton") is not None:
        backends.append(("triton", triton_backend()))
    kernels = [
        Implementation(op, backend, on_device(fn, backend), convention, origin="fast", device=device_name(backend))
        for backend, mod in backends
        for (op, convention), fn in _adapters(mod).items()
    ]
    release = on_device(window.window_release, "torch")  # torch only: a few elementwise operations
    return [*kernels, Implementation("window_release", "torch", release, None, device=device_name("torch"))]


IMPLEMENTATIONS = _implementations()
