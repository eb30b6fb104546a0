"""Every named convention of the contract, written once: its name, the exact rule the reference follows, and a
one-line summary of its lanes, fill and order.

Where the public implementations disagree (docs/indexing.md, docs/ring-safety.md, docs/attention.md), each
choice is a named convention. The contract's operations, the fast kernels' validators, the property tables and
the registrations all take their convention names and rules from :data:`CONVENTIONS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from reference import addressing, attention, candidates, formats, padding, state, topk, window

R = TypeVar("R")


@dataclass(frozen=True)
class Convention(Generic[R]):
    """One named convention: ``rule`` is the object the reference's functions take for it."""

    name: str
    rule: R
    summary: str


def _table(*conventions: Convention[R]) -> dict[str, Convention[R]]:
    return {c.name: c for c in conventions}


RESERVE_MAX1: Final = "max(1, nc) rows per request"
"""Prefill's reservation (seed 000, A.1.1): a request completing no row still reserves a zero placeholder row."""

COMPRESSION_PREFILL = _table(
    Convention("reserve_max1", RESERVE_MAX1, "max(1, nc) rows a request; a placeholder is a zero row stored at -1"),
)
COMPRESSION_DECODE = _table(
    Convention(state.WRITE_THEN_READ, state.WRITE_THEN_READ, "writes every new position, then reads whole windows"),
    Convention(state.READ_THEN_WRITE, state.READ_THEN_WRITE, "reads old positions from the ring, then writes"),
)
TOPK: dict[str, Convention[topk.TopKConvention]] = _table(
    Convention("v4.1", topk.V41TopK(width=topk.Width.FIXED), "k lanes, ascending index, -1 fill"),
    Convention("v4.1-clamped", topk.V41TopK(width=topk.Width.CLAMPED), "min(k, N) lanes, ascending index, -1 fill"),
    Convention("v4-prefill", topk.V4TopK(topk.Phase.PREFILL), "min(k, N) lanes, rank order, -1 fill"),
    Convention("v4-decode", topk.V4TopK(topk.Phase.DECODE), "lengths == N, min(k, N) lanes, rank order, no fill"),
    Convention("select", topk.SelectTopK(), "k lanes, ascending index, INT32_MAX fill"),
    Convention("select-unsorted", topk.SelectTopK(sorted_index=False), "k lanes, rank order, INT32_MAX fill"),
)
_DROP, _KEEP = candidates.NanPolicy.DROP, candidates.NanPolicy.PROPAGATE
CANDIDATE_SELECT = _table(
    Convention("pinned+drop_nan", candidates.CandidateRule(True, _DROP), "newest block pinned to +inf, NaN dropped"),
    Convention("unpinned+drop_nan", candidates.CandidateRule(False, _DROP), "no pinned block, NaN blocks dropped"),
    Convention("pinned+propagate_nan", candidates.CandidateRule(True, _KEEP), "newest block pinned, NaN blocks kept"),
    Convention("unpinned+propagate_nan", candidates.CandidateRule(False, _KEEP), "no pinned block, NaN blocks kept"),
)
SLOT_TRANSLATION = _table(
    Convention("sentinel", addressing.LaneGuard.SENTINEL, "lengths == K; a -1 lane anywhere stays -1"),
    Convention("count", addressing.LaneGuard.COUNT, "lanes below lengths[m] hold rows; the rest are not read"),
)
WINDOW_INDICES = _table(
    Convention("v4", window.WindowOrder.V4, "decode: occupied slots first, -1 lanes last"),
    Convention("v4.1", window.WindowOrder.V41, "decode: -1 lanes first, then the occupied slots"),
)
FORMATS = _table(
    Convention(
        formats.V4_MAIN_FP8.name, formats.V4_MAIN_FP8, "V4 main: 448 e4m3 + 64 bf16, 7 UE8M0 scales + 1 pad (584 B)"
    ),
    Convention(formats.V41_MAIN_FP8.name, formats.V41_MAIN_FP8, "V4.1 main FP8: 512 e4m3, 16 UE8M0 scales (528 B)"),
    Convention(
        formats.V41_MAIN_FP4.name, formats.V41_MAIN_FP4, "V4.1 main FP4: 256 B packed e2m1, 32 E4M3 scales (288 B)"
    ),
    Convention(formats.INDEX_FP4.name, formats.INDEX_FP4, "index FP4: 64 B packed e2m1, 4 UE8M0 scales (68 B)"),
    Convention(formats.INDEX_FP8.name, formats.INDEX_FP8, "index FP8: 128 e4m3, one fp32 power-of-two scale (132 B)"),
)
SPARSE_ATTENTION = _table(
    *(
        Convention(
            f"{invalid}+empty_{empty}",
            attention.LaneRules(invalid, empty),
            f"{'only -1 skipped' if invalid == 'minus_one_only' else 'lanes < 0 or >= N skipped'}; "
            f"an empty row gives {'out 0, lse +inf' if empty == 'zero' else 'NaN'}",
        )
        for invalid in ("minus_one_only", "out_of_range")
        for empty in ("zero", "nan")
    )
)

PADDING_ROWS = _table(
    Convention(
        "padding_row",
        padding.PADDING_ROW,
        "length -1: a CUDA-graph padding row, answered as length 0 (every lane empty); v4-decode refuses it",
    ),
)
"""How every operation that takes per-row lengths reads a length of -1 (``reference.padding``): one rule for all
of them, not a choice between implementations, so it is not among any operation's conventions below."""
PADDED_OPERATIONS: Final = ("index_scores", "topk", "candidate_select", "slot_translation")
"""The operations ``PADDING_ROWS`` applies to (index scores: a query at position -1)."""

CONVENTIONS: dict[str, Mapping[str, Convention[Any]]] = {
    "compression_prefill": COMPRESSION_PREFILL,
    "compression_decode": COMPRESSION_DECODE,
    "index_scores": {},
    "paged_index_scores": {},
    "topk": TOPK,
    "candidate_select": CANDIDATE_SELECT,
    "candidate_restore": {},
    "candidate_remap": {},
    "slot_translation": SLOT_TRANSLATION,
    "gathered_rows": {},
    "window_indices": WINDOW_INDICES,
    "window_release": {},
    "compressed_indices": {},
    "quantize_store": FORMATS,
    "gather_dequantize": FORMATS,
    "norm_rope_store": FORMATS,
    "sparse_attention": SPARSE_ATTENTION,
}
"""Operation name -> its conventions, by name (an operation the public code agrees on has none)."""


def lookup(table: Mapping[str, Convention[R]], name: str, what: str) -> R:
    """The rule of convention ``name`` in ``table``; ValueError naming the known ones otherwise."""
    if name not in table:
        raise ValueError(f"{what}: unknown convention {name!r}; known: {', '.join(table) or 'none'}")
    return table[name].rule


def rule(op: str, name: str) -> object:
    """The reference rule of convention ``name`` of operation ``op``."""
    if op not in CONVENTIONS:
        raise ValueError(f"op: unknown operation {op!r}; known: {', '.join(CONVENTIONS)}")
    return lookup(CONVENTIONS[op], name, "convention")
