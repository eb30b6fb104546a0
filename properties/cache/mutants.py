"""Shipped mutants for quantize_store, gather_dequantize, norm_rope_store, sparse_attention,
sparse_attention_fp8_kv and sparse_attention_bf16: the torch implementations of
``properties/cache/faulty_formats.py``, ``faulty_norm_rope.py``, ``faulty_attention.py`` (its float64 twin, and
its bf16-probability twin) and ``faulty_fp8_kv.py`` (the gather, then the attention) with one realistic bug
planted each.

Each is registered for the one format or convention where its bug shows; the suite must kill every one
(``properties/test_mutants.py``), and ``properties/cache/test_support.py`` checks the unmutated versions pass.
"""

from __future__ import annotations

from collections.abc import Callable

from properties.cache.common import store_options
from properties.cache.faulty_attention import AttentionBugs, Bf16Bugs, attention_with, bf16_attention_with
from properties.cache.faulty_formats import FormatBugs, gather_with, store_with
from properties.cache.faulty_fp8_kv import PagedBugs, paged_with
from properties.cache.faulty_norm_rope import NormRopeBugs, norm_rope_with
from properties.mutants import catalogue
from properties.registry import Implementation


def _store(name: str, fmt: str, note: str, **bug: object) -> Implementation:
    """A store mutant under convention ``fmt`` (a format, optionally with options it honours but for its bug)."""
    _, dtype, arithmetic = store_options(fmt)
    fn = store_with(FormatBugs(**bug), dtype, arithmetic)  # type: ignore[arg-type]
    return Implementation("quantize_store", name, fn, fmt, "mutant", note=note)


def _gather(name: str, fmt: str, note: str, **bug: object) -> Implementation:
    return Implementation("gather_dequantize", name, gather_with(FormatBugs(**bug)), fmt, "mutant", note=note)  # type: ignore[arg-type]


def _norm_rope(name: str, fmt: str, note: str, **bug: bool) -> Implementation:
    return Implementation("norm_rope_store", name, norm_rope_with(NormRopeBugs(**bug)), fmt, "mutant", note=note)


def _attention(name: str, convention: str, note: str, **bug: object) -> Implementation:
    fn = attention_with(AttentionBugs(**bug), convention)  # type: ignore[arg-type]
    return Implementation("sparse_attention", name, fn, convention, "mutant", note=note)


def _fp8_kv(name: str, fmt: str, note: str, **bug: object) -> Implementation:
    """A sparse_attention_fp8_kv mutant: ``bug`` holds PagedBugs' own switches, or ``gather`` / ``attention``:
    the fields of the FormatBugs / AttentionBugs of that step."""
    parts = {
        "gather": FormatBugs(**bug.pop("gather", {})),  # type: ignore[arg-type]
        "attention": AttentionBugs(**bug.pop("attention", {})),  # type: ignore[arg-type]
    }
    fn = paged_with(PagedBugs(**parts, **bug), fmt)  # type: ignore[arg-type]
    return Implementation("sparse_attention_fp8_kv", name, fn, fmt, "mutant", note=note)


def _bf16(name: str, convention: str, note: str, **bug: bool) -> Implementation:
    fn = bf16_attention_with(Bf16Bugs(**bug), convention)
    return Implementation("sparse_attention_bf16", name, fn, convention, "mutant", note=note)


FACTORIES: dict[str, Callable[..., Implementation]] = {
    "quantize_store": _store,
    "gather_dequantize": _gather,
    "norm_rope_store": _norm_rope,
    "sparse_attention": _attention,
    "sparse_attention_fp8_kv": _fp8_kv,
    "sparse_attention_bf16": _bf16,
}
"""Each operation's mutant from a catalogue entry."""

MUTANTS: list[Implementation] = [
    FACTORIES[p.op](p.name, p.convention or "", p.note, **p.bug) for p in catalogue(__file__)
]
"""The catalogue ``mutants.json``, in order: each entry's ``bug`` holds the fields of its operation's bug record
(``FormatBugs``, ``NormRopeBugs``, ``AttentionBugs``, ``PagedBugs``, ``Bf16Bugs``) it changes."""
