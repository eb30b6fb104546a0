"""The two implementations of the indexing operations under one set of names: ``naive`` (torch) and the Triton
modules, so a caller picks a backend once and calls ``index_logits``, ``paged_index_logits``, ``topk``,
``candidate_select``, ``candidate_restore``, ``candidate_remap``, ``slot_translation``, ``gathered_rows``,
``window_indices`` and ``decode_window_indices`` and ``compressed_indices`` on it."""

from __future__ import annotations

from types import ModuleType, SimpleNamespace

NAMES = (
    "index_logits",
    "paged_index_logits",
    "topk",
    "candidate_select",
    "candidate_restore",
    "candidate_remap",
    "slot_translation",
    "gathered_rows",
    "window_indices",
    "decode_window_indices",
    "compressed_indices",
)


def torch_backend() -> ModuleType:
    from fast.indexing import naive

    return naive


def triton_backend() -> SimpleNamespace:
    """The Triton functions under the torch twins' names (imports Triton)."""
    from fast.indexing import addressing, candidates, compressed, logits, topk, window

    return SimpleNamespace(
        index_logits=logits.index_logits,
        paged_index_logits=logits.paged_index_logits,
        topk=topk.topk,
        candidate_select=candidates.candidate_select,
        candidate_restore=candidates.candidate_restore,
        candidate_remap=candidates.candidate_remap,
        slot_translation=addressing.slot_translation,
        gathered_rows=addressing.gathered_rows,
        window_indices=window.window_indices,
        decode_window_indices=window.decode_window_indices,
        compressed_indices=compressed.compressed_indices,
    )
