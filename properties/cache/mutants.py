"""Shipped mutants for quantize_store, gather_dequantize, norm_rope_store and sparse_attention: the torch
implementations of ``properties/cache/faulty_formats.py``, ``faulty_norm_rope.py`` and ``faulty_attention.py`` with
one realistic bug planted each.

Each is registered for the one format or convention where its bug shows; the suite must kill every one
(``properties/test_mutants.py``), and ``properties/cache/test_support.py`` checks the unmutated versions pass.
"""

from __future__ import annotations

from properties.cache.common import store_options
from properties.cache.faulty_attention import AttentionBugs, attention_with
from properties.cache.faulty_formats import FormatBugs, gather_with, store_with
from properties.cache.faulty_norm_rope import NormRopeBugs, norm_rope_with
from properties.ladder import ladder
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


MUTANTS: list[Implementation] = [
    _store(
        "store_ue8m0_floor", "v41_fp8_528", "UE8M0 scale 2^floor(log2(amax/448)): elements overflow", scale_floor=True
    ),
    _store("store_fp4_nibbles_swapped", "index_fp4_68", "even element in the high nibble", nibbles_swapped=True),
    _store(
        "store_index_fp8_interleaved",
        "index_fp8_132",
        "writer puts each row's scale right after its data; the index cache is sectioned",
        arrangement="interleaved",
    ),
    _store("store_minus_one_to_last_slot", "v41_fp4_288", "slot -1 indexes from the end", minus_one_wraps=True),
    _store(
        "store_e4m3_scale_overflow_nan",
        "v41_fp4_288",
        "main-FP4 scale amax/6 cast without clamping at 448: the NaN code for amax > 2688",
        e4m3_scale_nosat=True,
    ),
    _store("store_rope_bf16_truncated", "v4_584", "bf16 RoPE tail truncated, not rounded", rope_truncated=True),
    _store("store_v4_blocks_unpadded", "v4_584", "block stride rows * 584, not padded to 576", unpadded_blocks=True),
    _store("store_nan_not_refused", "index_fp8_132", "NaN / inf rows quantized silently", nonfinite_unchecked=True),
    _store(
        "store_bf16_rows_through_f16",
        "v41_fp8_528+bf16_rows",
        "bf16 rows converted through float16: beyond 65504 infinite, below 2**-14 rounded",
        rows_through_f16=True,
    ),
    _store(
        "store_exact_scale_under_f32_scale",
        "v4_584+f32_scale",
        "group scales by the exact rule where f32 arithmetic is declared: 2**5 for amax 7168 + 2**-10, not 2**4",
        scales_exact_under_f32=True,
    ),
    _gather(
        "gather_v41_fp8_sectioned",
        "v41_fp8_528",
        "reader expects all data parts before all scale parts; V4.1 rows interleave",
        arrangement="sectioned",
    ),
    _gather("gather_fp4_nibbles_swapped", "v41_fp4_288", "reader takes the high nibble first", nibbles_swapped=True),
    _gather(
        "gather_fp4_scale_as_ue8m0",
        "v41_fp4_288",
        "main-FP4 e4m3 scale bytes decoded as UE8M0 exponents",
        e4m3_scale_as_ue8m0=True,
    ),
    _gather("gather_v4_blocks_unpadded", "v4_584", "block stride rows * 584, not padded to 576", unpadded_blocks=True),
    _store(
        "store_scales_alias_layer_0",
        "v41_fp4_288",
        "every layer's scale parts written in layer 0's page (one engine's per-layer scale views all aliased layer 0)",
        scales_alias_layer_0=True,
    ),
    _gather(
        "gather_scales_alias_layer_0",
        "index_fp8_132",
        "every layer's scales read from layer 0's page",
        scales_alias_layer_0=True,
    ),
    _attention("attention_sink_dropped", "minus_one_only+empty_zero", "sink left out", sink="dropped"),
    _attention("attention_sink_twice", "out_of_range+empty_zero", "sink added twice", sink="twice"),
    _attention("attention_sink_in_lse", "minus_one_only+empty_nan", "sink folded into lse", sink="in_lse"),
    _attention(
        "attention_sink_exponent_clamped",
        "minus_one_only+empty_zero",
        "sink - m clamped to 80 before exp (kept finite in float32): a sink far above lse is understated",
        sink_exponent_clamp=80.0,
    ),
    _attention(
        "attention_minus_one_reads_last_row",
        "minus_one_only+empty_zero",
        "lane -1 gathers row N-1",
        minus_one_wraps=True,
    ),
    _attention(
        "attention_stops_at_first_minus_one",
        "out_of_range+empty_nan",
        "valid lanes assumed to come first",
        stop_at_minus_one=True,
    ),
    _attention(
        "attention_unguarded_invalid_tile",
        "minus_one_only+empty_nan",
        "all-invalid tile: exp(-inf - (-inf))",
        unguarded_tile=True,
    ),
    _attention(
        "attention_empty_row_nan_under_zero",
        "out_of_range+empty_zero",
        "empty row gives NaN under empty_zero",
        empty_nan_under_zero=True,
    ),
    _attention(
        "attention_invalid_lanes_score_zero",
        "out_of_range+empty_nan",
        "invalid lanes masked to score 0",
        invalid_score_zero=True,
    ),
    _attention(
        "attention_out_of_range_clamped",
        "out_of_range+empty_zero",
        "lanes >= N clamped to N-1",
        clamp_out_of_range=True,
    ),
    _store(
        "store_blocks_past_tile",
        "v4_584",
        f"a row stored into a block past {ladder('blocks').tile} lands a tile of blocks lower",
        blocks_past_tile=True,
    ),
    _gather(
        "gather_rows_past_tile",
        "v41_fp8_528",
        f"a row read past the first {ladder('rows').tile} of a call reads the slot a tile earlier",
        rows_past_tile=True,
    ),
    _attention(
        "attention_dim_past_tile",
        "minus_one_only+empty_zero",
        f"the dot products stop after {ladder('dim').tile} dims",
        dim_past_tile=True,
    ),
    _norm_rope(
        "norm_rope_rotate_half",
        "v4_584",
        "RoPE pairs (i, i + rope_dim / 2), the rotate-half layout, instead of interleaved pairs",
        rotate_half=True,
    ),
    _norm_rope("norm_rope_weight_ignored", "index_fp4_68", "the RMSNorm weight not applied", weight_ignored=True),
    _norm_rope("norm_rope_eps_dropped", "v41_fp8_528", "1 / sqrt(mean(x^2)): eps left out", eps_dropped=True),
    _norm_rope(
        "norm_rope_rows_past_tile",
        "v41_fp8_528",
        f"a row past the first {ladder('rows').tile} of a call rotated by the position of the row a tile before it",
        rows_past_tile=True,
    ),
]
