"""The project's kernels as ``torch.library`` custom operators, namespace ``csa`` (``torch.ops.csa.<name>``).

A model that calls these compiles with ``torch.compile(fullgraph=True)``: each operator is one opaque node with a
fake (meta) implementation that gives its outputs' shapes and dtypes, and declares the arguments it changes in
place (``state``, ``cache``). Every operator runs the Triton kernel where Triton can run it (CUDA tensors, or CPU
tensors under ``TRITON_INTERPRET=1``) and the torch twin otherwise.

``validate=False`` skips the checks that read tensor values back to the host (ranges, block ids), so a call
makes no host synchronisation and can be captured in a CUDA graph; shapes, dtypes and devices are always checked.
``compress_decode`` then needs ``max_new``, the most new positions of any request (an engine's speculative step
size), instead of reading the per-request counts: its kernel reads them on the device.
"""

from __future__ import annotations

import os

import torch
from torch.library import custom_op, register_fake

from reference.conventions import TOPK
from reference.topk import lane_layout

NAMESPACE = "csa"


def _backend(device: torch.device) -> str:
    return "triton" if device.type == "cuda" or os.environ.get("TRITON_INTERPRET") == "1" else "torch"


def _indexing(device: torch.device):  # type: ignore[no-untyped-def]
    """The indexing functions of ``device``'s backend (``fast.indexing.backends``)."""
    from fast.indexing import backends

    return backends.torch_backend() if _backend(device) == "torch" else backends.triton_backend()


# --- compression ---------------------------------------------------------------------------------------------


@custom_op(f"{NAMESPACE}::compress_prefill", mutates_args=("state",))
def compress_prefill(
    score: torch.Tensor,
    latent: torch.Tensor,
    cu_seqlens: torch.Tensor,
    start_pos: torch.Tensor,
    state: torch.Tensor,
    state_index: torch.Tensor,
    ratio: int,
    overlap: bool,
    ape: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(rows f32[R, d], store rows i64[R], RoPE positions i64[R]); R = sum over requests of max(1, completed
    rows)."""
    from fast import compression

    call = (score, latent, cu_seqlens, start_pos, state, state_index)
    result = compression.compress_prefill(*call, ratio=ratio, overlap=overlap, ape=ape, backend=_backend(score.device))
    return result.rows, result.store_slots, result.positions


@register_fake(f"{NAMESPACE}::compress_prefill")
def _(score, latent, cu_seqlens, start_pos, state, state_index, ratio, overlap, ape):  # type: ignore[no-untyped-def]
    rows = torch.library.get_ctx().new_dynamic_size()
    d = score.shape[1] // (2 if overlap else 1)
    return score.new_empty(rows, d), score.new_empty(rows, dtype=torch.int64), score.new_empty(rows, dtype=torch.int64)


@custom_op(f"{NAMESPACE}::compress_decode", mutates_args=("state",))
def compress_decode(
    score: torch.Tensor,
    latent: torch.Tensor,
    cu_seqlens: torch.Tensor,
    start_pos: torch.Tensor,
    state: torch.Tensor,
    state_index: torch.Tensor,
    ratio: int,
    overlap: bool,
    ape: torch.Tensor | None,
    max_new: int = 0,
    validate: bool = True,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(rows f32[T, d], store rows i64[T], RoPE positions i64[T]): one row per new position."""
    from fast import compression

    call = (score, latent, cu_seqlens, start_pos, state, state_index)
    backend = _backend(score.device)
    if validate:
        result = compression.compress_decode(*call, ratio=ratio, overlap=overlap, ape=ape, backend=backend)
    else:
        plan = compression.bounded_decode_plan(*call, ratio=ratio, overlap=overlap, ape=ape, max_new=max_new)
        result = compression.launch(plan, backend)
    return result.rows, result.store_slots, result.positions


@register_fake(f"{NAMESPACE}::compress_decode")
def _(score, latent, cu_seqlens, start_pos, state, state_index, ratio, overlap, ape, max_new=0, validate=True):  # type: ignore[no-untyped-def]
    d, t = score.shape[1] // (2 if overlap else 1), score.shape[0]
    return score.new_empty(t, d), score.new_empty(t, dtype=torch.int64), score.new_empty(t, dtype=torch.int64)


# --- indexing ------------------------------------------------------------------------------------------------


@custom_op(f"{NAMESPACE}::index_logits", mutates_args=())
def index_logits(
    q: torch.Tensor,
    weights: torch.Tensor,
    k: torch.Tensor,
    lengths: torch.Tensor,
    k_scale: torch.Tensor | None = None,
    validate: bool = True,
) -> torch.Tensor:
    """f32[M, N]: sum_h w[m, h] relu(q[m, h] . k[j]) for j < lengths[m], -inf past it."""
    return _indexing(q.device).index_logits(q, weights, k, lengths, k_scale=k_scale, validate=validate)


@register_fake(f"{NAMESPACE}::index_logits")
def _(q, weights, k, lengths, k_scale=None, validate=True):  # type: ignore[no-untyped-def]
    return q.new_empty(q.shape[0], k.shape[0], dtype=torch.float32)


@custom_op(f"{NAMESPACE}::topk", mutates_args=())
def topk(
    scores: torch.Tensor,
    lengths: torch.Tensor,
    offsets: torch.Tensor | None,
    k: int,
    convention: str = "v4.1",
    validate: bool = True,
) -> torch.Tensor:
    """i32[M, lanes]: the valid-prefix top-k of each row under ``convention`` (reference.conventions.TOPK)."""
    return _indexing(scores.device).topk(
        scores, lengths, k=k, convention=convention, offsets=offsets, validate=validate
    )


@register_fake(f"{NAMESPACE}::topk")
def _(scores, lengths, offsets, k, convention="v4.1", validate=True):  # type: ignore[no-untyped-def]
    if convention not in TOPK:
        raise ValueError(f"convention: must be one of {', '.join(TOPK)}, got {convention!r}")
    lanes = lane_layout(TOPK[convention].rule).lanes(k, scores.shape[1])
    return scores.new_empty(scores.shape[0], lanes, dtype=torch.int32)


@custom_op(f"{NAMESPACE}::candidate_select", mutates_args=())
def candidate_select(
    scores: torch.Tensor,
    lengths: torch.Tensor,
    block_size: int,
    topk_blocks: int,
    pin_newest: bool = True,
    drop_nan: bool = True,
    validate: bool = True,
) -> torch.Tensor:
    """i32[M, topk_blocks]: the kept candidate blocks, ascending, -1 fill."""
    return _indexing(scores.device).candidate_select(
        scores, lengths, block_size=block_size, topk_blocks=topk_blocks, pin_newest=pin_newest, drop_nan=drop_nan,
        validate=validate,
    )  # fmt: skip


@register_fake(f"{NAMESPACE}::candidate_select")
def _(scores, lengths, block_size, topk_blocks, pin_newest=True, drop_nan=True, validate=True):  # type: ignore[no-untyped-def]
    return scores.new_empty(scores.shape[0], topk_blocks, dtype=torch.int32)


@custom_op(f"{NAMESPACE}::candidate_restore", mutates_args=())
def candidate_restore(
    offsets: torch.Tensor, candidate_blocks: torch.Tensor, block_size: int, validate: bool = True
) -> torch.Tensor:
    """i32 like ``offsets``: candidate-relative offsets restored to logical rows (-1 stays -1)."""
    return _indexing(offsets.device).candidate_restore(
        offsets, candidate_blocks, block_size=block_size, validate=validate
    )


@register_fake(f"{NAMESPACE}::candidate_restore")
def _(offsets, candidate_blocks, block_size, validate=True):  # type: ignore[no-untyped-def]
    return torch.empty_like(offsets, dtype=torch.int32)


@custom_op(f"{NAMESPACE}::slot_translation", mutates_args=())
def slot_translation(
    rows: torch.Tensor,
    block_table: torch.Tensor,
    lengths: torch.Tensor,
    rows_per_block: int,
    guard: str = "count",
    validate: bool = True,
) -> torch.Tensor:
    """i64 like ``rows``: logical compressed rows to paged slots (reference.conventions.SLOT_TRANSLATION)."""
    return _indexing(rows.device).slot_translation(
        rows, block_table, lengths, rows_per_block=rows_per_block, guard=guard, validate=validate
    )


@register_fake(f"{NAMESPACE}::slot_translation")
def _(rows, block_table, lengths, rows_per_block, guard="count", validate=True):  # type: ignore[no-untyped-def]
    return torch.empty_like(rows, dtype=torch.int64)


@custom_op(f"{NAMESPACE}::gathered_rows", mutates_args=())
def gathered_rows(rows: torch.Tensor, offsets: torch.Tensor, validate: bool = True) -> torch.Tensor:
    """i64 like ``rows``: each request's offset added to its row lanes, -1 kept."""
    return _indexing(rows.device).gathered_rows(rows, offsets, validate=validate)


@register_fake(f"{NAMESPACE}::gathered_rows")
def _(rows, offsets, validate=True):  # type: ignore[no-untyped-def]
    return torch.empty_like(rows, dtype=torch.int64)


@custom_op(f"{NAMESPACE}::decode_window_indices", mutates_args=())
def decode_window_indices(
    positions: torch.Tensor, window: int, order: str = "v4.1", validate: bool = True
) -> torch.Tensor:
    """i32[B, window]: the ring slots the decode query at each position attends to (reference.window)."""
    return _indexing(positions.device).decode_window_indices(positions, window=window, order=order, validate=validate)


@register_fake(f"{NAMESPACE}::decode_window_indices")
def _(positions, window, order="v4.1", validate=True):  # type: ignore[no-untyped-def]
    return positions.new_empty(positions.shape[0], window, dtype=torch.int32)


@custom_op(f"{NAMESPACE}::compressed_indices", mutates_args=())
def compressed_indices(ratio: int, seqlen: int, start_pos: int, offset: int, device: torch.device) -> torch.Tensor:
    """i32[seqlen, (start_pos + seqlen) // ratio]: every compressed row each query sees, plus ``offset``, then -1
    (the index list of a V4 layer without an indexer)."""
    call = {"ratio": ratio, "seqlen": seqlen, "start_pos": start_pos, "offset": offset, "device": device}
    return _indexing(torch.device(device)).compressed_indices(**call)


@register_fake(f"{NAMESPACE}::compressed_indices")
def _(ratio, seqlen, start_pos, offset, device):  # type: ignore[no-untyped-def]
    return torch.empty(seqlen, (start_pos + seqlen) // ratio, dtype=torch.int32, device=device)


@custom_op(f"{NAMESPACE}::window_release", mutates_args=())
def window_release(
    seq_lens: torch.Tensor, step_lens: torch.Tensor, window: int, block_size: int, validate: bool = True
) -> torch.Tensor:
    """i32[B]: the leading sliding-window blocks each request may release once a step is scheduled (torch)."""
    from fast.indexing.window import window_release as release

    return release(seq_lens, step_lens, window=window, block_size=block_size, validate=validate)


@register_fake(f"{NAMESPACE}::window_release")
def _(seq_lens, step_lens, window, block_size, validate=True):  # type: ignore[no-untyped-def]
    return torch.empty_like(seq_lens, dtype=torch.int32)


# --- cache ---------------------------------------------------------------------------------------------------


@custom_op(f"{NAMESPACE}::quantize_store", mutates_args=("cache",))
def quantize_store(
    rows: torch.Tensor,
    slots: torch.Tensor,
    cache: torch.Tensor,
    fmt: str,
    rows_per_block: int,
    layers: int = 1,
    layer: int = 0,
) -> None:
    """Quantize ``rows`` into layer ``layer``'s pages of the paged ``cache`` at ``slots`` (-1 skipped), in the
    format's block layout."""
    from fast import cache as kernels

    kernels.quantize_store(
        rows, slots, cache, fmt=fmt, rows_per_block=rows_per_block, layers=layers, layer=layer,
        backend=_backend(rows.device),
    )  # fmt: skip


@register_fake(f"{NAMESPACE}::quantize_store")
def _(rows, slots, cache, fmt, rows_per_block, layers=1, layer=0):  # type: ignore[no-untyped-def]
    return None


@custom_op(f"{NAMESPACE}::gather_dequantize", mutates_args=())
def gather_dequantize(
    cache: torch.Tensor, slots: torch.Tensor, fmt: str, rows_per_block: int, layers: int = 1, layer: int = 0
) -> torch.Tensor:
    """f32[R, d]: the rows stored at ``slots`` of layer ``layer``, dequantized."""
    from fast import cache as kernels

    return kernels.gather_dequantize(
        cache, slots, fmt=fmt, rows_per_block=rows_per_block, layers=layers, layer=layer,
        backend=_backend(cache.device),
    )  # fmt: skip


@register_fake(f"{NAMESPACE}::gather_dequantize")
def _(cache, slots, fmt, rows_per_block, layers=1, layer=0):  # type: ignore[no-untyped-def]
    from reference.conventions import FORMATS

    return cache.new_empty(slots.shape[0], FORMATS[fmt].rule.dims, dtype=torch.float32)


@custom_op(f"{NAMESPACE}::sparse_attention", mutates_args=())
def sparse_attention(
    q: torch.Tensor,
    kv: torch.Tensor,
    indices: torch.Tensor,
    sink: torch.Tensor | None,
    scale: float,
    dv: int,
    empty_row: str = "zero",
    invalid: str = "out_of_range",
) -> tuple[torch.Tensor, torch.Tensor]:
    """(out f32[M, H, dv], lse f32[M, H]): sparse MQA attention with a sink over the lanes ``indices``."""
    from fast import cache as kernels

    return kernels.sparse_attention(
        q, kv, indices, sink, scale=scale, dv=dv, empty_row=empty_row, invalid=invalid, backend=_backend(q.device)
    )


@register_fake(f"{NAMESPACE}::sparse_attention")
def _(q, kv, indices, sink, scale, dv, empty_row="zero", invalid="out_of_range"):  # type: ignore[no-untyped-def]
    m, h = q.shape[0], q.shape[1]
    return q.new_empty(m, h, dv, dtype=torch.float32), q.new_empty(m, h, dtype=torch.float32)


OPERATORS = (
    "compress_prefill",
    "compress_decode",
    "index_logits",
    "topk",
    "candidate_select",
    "candidate_restore",
    "slot_translation",
    "gathered_rows",
    "decode_window_indices",
    "compressed_indices",
    "window_release",
    "quantize_store",
    "gather_dequantize",
    "sparse_attention",
)
"""Every operator this module registers, as ``torch.ops.csa.<name>``."""
