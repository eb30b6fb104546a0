"""Indexing's fast implementations, registered with the contract (``properties.contract``) on import.

For every indexing operation and each convention the contract names: a torch-eager implementation
(``fast.indexing.naive``) and a Triton one. The property suite builds CPU tensors; under ``TRITON_INTERPRET=1``
the Triton kernels run on them in the interpreter, and on a CUDA machine the Triton adapters copy the inputs to
the GPU, run the compiled kernels there and copy the results back. A convention the contract does not (yet)
name is not registered.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch

from fast.indexing import naive
from properties.contract import OPERATIONS
from properties.registry import REGISTRY, Implementation
from reference.checks import require

Fn = Callable[..., torch.Tensor]


def _device() -> torch.device | None:
    """Where the Triton adapters run: the GPU when one is present and Triton is not interpreted."""
    if os.environ.get("TRITON_INTERPRET") != "1" and torch.cuda.is_available():
        return torch.device("cuda")
    return None


def _on_device(fn: Fn) -> Fn:
    """``fn`` run on the GPU (inputs copied there, the result copied back) where one is present."""

    def moved(*args: Any, **kwargs: Any) -> torch.Tensor:
        device = _device()
        if device is None:
            return fn(*args, **kwargs)
        home = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
        move: Callable[[Any], Any] = lambda t: t.to(device) if isinstance(t, torch.Tensor) else t  # noqa: E731
        out = fn(*(move(a) for a in args), **{k: move(x) for k, x in kwargs.items()})
        return out.to(home)

    return moved


def _rows_per_block(block_size: int, ratio: int) -> int:
    require(ratio > 0 and block_size % ratio == 0, "ratio", f"must divide block_size = {block_size}, got {ratio}")
    return block_size // ratio


def _adapters(mod: Any) -> dict[tuple[str, str | None], Fn]:
    """Contract-shaped callables over one backend module (``naive`` or the Triton modules)."""

    def index_scores(q: torch.Tensor, weights: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, *, ratio: int):
        require(isinstance(ratio, int) and ratio > 0, "ratio", f"must be a positive int, got {ratio!r}")
        lengths = (positions.to(torch.int64) + 1) // ratio
        return mod.index_logits(q, weights, k, lengths)

    out: dict[tuple[str, str | None], Fn] = {("index_scores", None): index_scores}

    def topk_for(name: str) -> Fn:
        def topk(scores: torch.Tensor, lengths: torch.Tensor, offsets: torch.Tensor, *, k: int) -> torch.Tensor:
            return mod.topk(scores, lengths, k=k, convention=name, offsets=offsets)

        return topk

    for name in ("v4.1", "v4.1-clamped", "v4-prefill", "v4-decode", "select", "select-unsorted"):
        out[("topk", name)] = topk_for(name)

    def candidates_for(pin: bool, drop: bool) -> Fn:
        def select(scores: torch.Tensor, lengths: torch.Tensor, *, block_size: int, topk_blocks: int) -> torch.Tensor:
            return mod.candidate_select(
                scores, lengths, block_size=block_size, topk_blocks=topk_blocks, pin_newest=pin, drop_nan=drop
            )

        return select

    for pin in (True, False):
        for drop in (True, False):
            rule = f"{'pinned' if pin else 'unpinned'}+{'drop_nan' if drop else 'propagate_nan'}"
            out[("candidate_select", rule)] = candidates_for(pin, drop)

    def restore(offsets: torch.Tensor, candidate_blocks: torch.Tensor, *, block_size: int) -> torch.Tensor:
        return mod.candidate_restore(offsets, candidate_blocks, block_size=block_size)

    out[("candidate_restore", None)] = restore

    def slots_for(guard: str) -> Fn:
        def slots(
            rows: torch.Tensor, block_table: torch.Tensor, lengths: torch.Tensor, *, block_size: int, ratio: int
        ) -> torch.Tensor:
            per_block = _rows_per_block(block_size, ratio)
            return mod.slot_translation(rows, block_table, lengths, rows_per_block=per_block, guard=guard)

        return slots

    for guard in ("sentinel", "count"):
        out[("slot_translation", guard)] = slots_for(guard)

    def gathered(rows: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return mod.gathered_rows(rows, offsets)

    out[("gathered_rows", None)] = gathered

    def window_for(order: str) -> Fn:
        def window(*, window: int, seqlen: int, start_pos: int) -> torch.Tensor:
            device = _device() or torch.device("cpu")
            return mod.window_indices(
                window=window, seqlen=seqlen, start_pos=start_pos, order=order, device=device
            ).cpu()

        return window

    for order in ("v4", "v4.1"):
        out[("window_indices", order)] = window_for(order)
    return out


class _TritonBackend:
    """The Triton modules under the naive module's names."""

    def __init__(self) -> None:
        from fast.indexing import addressing, candidates, logits, topk, window

        self.index_logits = logits.index_logits
        self.topk = topk.topk
        self.candidate_select = candidates.candidate_select
        self.candidate_restore = candidates.candidate_restore
        self.slot_translation = addressing.slot_translation
        self.gathered_rows = addressing.gathered_rows
        self.window_indices = window.window_indices


def _known(op: str, convention: str | None) -> bool:
    if op not in OPERATIONS:
        return False
    conventions = OPERATIONS[op].conventions
    return convention in conventions if convention is not None else not conventions


def register() -> None:
    backends: list[tuple[str, Any, bool]] = [("torch", naive, False)]
    try:
        backends.append(("triton", _TritonBackend(), True))
    except ModuleNotFoundError as err:
        if err.name != "triton":
            raise
    for backend, mod, moves in backends:
        for (op, convention), fn in _adapters(mod).items():
            if _known(op, convention):
                impl = _on_device(fn) if moves else fn
                device = "cuda" if moves and _device() is not None else "cpu"
                REGISTRY.register(Implementation(op, backend, impl, convention, origin="fast", device=device))


register()
