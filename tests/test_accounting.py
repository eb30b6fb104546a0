"""Byte accounting: the seeds' figures recomputed, the presets checked against the configuration text, and
model totals against a second, per-layer formulation written out by hand."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace

import pytest

from reference import models
from reference.accounting import (
    Formats,
    block_payload_bytes,
    compressed_rows,
    dense_bf16_bytes,
    layer_bytes,
    layer_kind,
    model_bytes,
    page_bytes,
    paged_bytes,
    preset_formats,
    reference_cache_slots,
    rows_per_block,
    v4_state_bytes,
    v41_state_bytes,
    v41_state_ring_entries,
)
from reference.formats import INDEX_FP4, INDEX_FP8, V4_MAIN_FP8, V41_MAIN_FP4, V41_MAIN_FP8
from reference.models import MODELS, V4_FLASH, V4_PRO, V41_FLASH, model_preset
from tests.refusals import worded_exactly

M = 1 << 20
CONTEXT = 1_048_576


# --- seed 000 (appendix A.2, A.5) -------------------------------------------------------------------


def test_seed_000_block_and_state_bytes() -> None:
    assert rows_per_block(128, 2) == 64
    assert block_payload_bytes(V41_MAIN_FP8, 128, 2) == 64 * 528 == 33_792
    assert block_payload_bytes(V41_MAIN_FP4, 128, 2) == 64 * 288 == 18_432
    assert block_payload_bytes(INDEX_FP4, 128, 2) == 64 * 68 == 4_352
    # C2 ring with the default backtracking allowance of six: 2 + (6 - 1) = 7 entries
    assert v41_state_bytes(2, 512, 6) == 7 * 2 * 512 * 4 == 28_672


# --- seed 001 (chapter 3) ---------------------------------------------------------------------------


def test_completed_rows_round_down() -> None:
    # appendix A.1: seven inputs make three completed C2 pairs and one pending input
    assert compressed_rows(7, 2) == 3 and compressed_rows(1, 2) == 0 and compressed_rows(0, 4) == 0
    assert compressed_rows(CONTEXT - 1, 128) == 8_191


def test_seed_001_slots_and_dense_cache() -> None:
    assert reference_cache_slots(CONTEXT, 128, 4) == 128 + CONTEXT // 4 == 262_272
    assert reference_cache_slots(CONTEXT, 128, 128) == 128 + CONTEXT // 128 == 8_320
    assert reference_cache_slots(CONTEXT, 128, 0) == 128
    dense = dense_bf16_bytes(CONTEXT, 61, 512)
    assert dense == 61 * CONTEXT * 512 * 2 == 65_498_251_264
    assert round(dense / 10**9, 1) == 65.5  # the seed's "65.5 GB" is decimal
    assert dense == 61 * 2**30  # ... and exactly 61 GiB


def test_seed_001_per_sequence_table_is_mib_without_the_window() -> None:
    """30 x 256 + 30 x 8 + 1 x 1024 = 8,944: MiB of BF16 rows at d = 512, window slots dropped."""
    row = 512 * 2
    ratio4 = compressed_rows(CONTEXT, 4) * row
    ratio128 = compressed_rows(CONTEXT, 128) * row
    dense_layer = dense_bf16_bytes(CONTEXT, 1, 512)
    assert (ratio4, ratio128, dense_layer) == (256 * M, 8 * M, 1024 * M)
    assert 30 * ratio4 + 30 * ratio128 + dense_layer == 8_944 * M
    # with the 128 window slots that the reference code allocates, a ratio-4 layer is 256.125 MiB
    assert reference_cache_slots(CONTEXT, 128, 4) * row == 256 * M + 128 * 1024


def test_seed_001_claims_against_its_own_arithmetic() -> None:
    table = 8_944 * M
    dense = dense_bf16_bytes(CONTEXT, 61, 512)
    # "V4 is about 13% of V3": 8,944 MiB / 61 GiB is 14.3%; 13% mixes MiB with decimal GB (8.9 / 65.5 = 13.6%)
    assert round(100 * table / dense, 1) == 14.3
    # "8 x 8 = 64 GB at batch 8": eight sequences of the table's own 8,944 MiB are 75.0 GB (69.9 GiB)
    assert round(8 * table / 10**9, 1) == 75.0 and round(8 * table / 2**30, 1) == 69.9
    # "~2 GB per sequence, 32x below dense 64 GB" contradicts the 8,944 MiB table by a factor above 4
    assert table / (2 * 10**9) > 4.6
    # "61 layers at ratio 4: ~16 GB" is 61 x 256.125 MiB = 16.4 GB; only 30 real layers have ratio 4
    assert round(61 * reference_cache_slots(CONTEXT, 128, 4) * 1024 / 10**9, 1) == 16.4


def test_seed_001_ratio_list_against_the_real_v4_pro_config() -> None:
    counts = Counter(V4_PRO.compress_ratios)
    assert counts == {128: 31, 4: 30, 0: 1} and len(V4_PRO.compress_ratios) == 62
    assert V4_PRO.compress_ratios.index(0) == 61 == V4_PRO.num_layers  # the 0 belongs to the MTP layer
    backbone = Counter(V4_PRO.compress_ratios[:61])
    assert backbone == {128: 31, 4: 30}  # not the table's "30 x 4 + 30 x 128 + 1 x 0"
    # the seed's own BF16 assumption on the real list: 31 x 8,320 + 30 x 262,272 + 1 x 128 slots
    slots = sum(reference_cache_slots(CONTEXT, 128, r) for r in V4_PRO.compress_ratios)
    assert slots == 31 * 8_320 + 30 * 262_272 + 128 == 8_126_208
    assert slots * 1024 == 8_321_236_992


# --- presets ----------------------------------------------------------------------------------------


def test_presets_match_the_configuration_text() -> None:
    assert Counter(V4_FLASH.compress_ratios) == {4: 21, 128: 20, 0: 3}
    assert [i for i, r in enumerate(V4_FLASH.compress_ratios) if r == 0] == [0, 1, 43]
    assert list(V41_FLASH.compress_ratios) == [0, 0] + [2] * 18 + [1] * 20 + [0, 0, 0]
    assert (V4_PRO.index_topk, V4_FLASH.index_topk, V41_FLASH.index_topk) == (1024, 512, 512)
    assert (V4_PRO.index_n_heads, V4_FLASH.index_n_heads, V41_FLASH.index_n_heads) == (64, 64, 32)
    assert V41_FLASH.kv_source_layers == (2, 8, 14, 20)
    assert V41_FLASH.index_source_layers == (2, 8, 14, 20, 24, 28, 32, 36)
    assert (V41_FLASH.candidate_source_layer, V41_FLASH.candidate_block_size) == (20, 8)
    for m in MODELS.values():
        assert (m.window_size, m.head_dim, m.rope_head_dim, m.index_head_dim) == (128, 512, 64, 128)
        assert m.not_published  # every preset says what the configuration leaves open
    indexer_layers = [layer for layer in range(V4_FLASH.total_layers) if V4_FLASH.owns_index_keys(layer)]
    assert indexer_layers == list(range(2, 43, 2))  # the 21 ratio-4 layers carry the indexer weights
    with pytest.raises(ValueError, match=r"^model: unknown model 'v5'"):
        model_preset("v5")


# --- model totals against a by-hand formulation -----------------------------------------------------


def test_v41_flash_totals_by_hand() -> None:
    result = model_bytes(V41_FLASH, CONTEXT)
    c2_rows, c1_rows = CONTEXT // 2, CONTEXT
    assert result.per_sequence("window") == 43 * 128 * 528
    assert result.per_sequence("compressed") == 3 * c2_rows * 288 + c1_rows * 288
    assert result.per_sequence("index") == 3 * c2_rows * 68 + c1_rows * 68
    assert result.per_sequence("state") == 3 * 28_672
    assert model_bytes(V41_FLASH, CONTEXT, batch=3).total() == 3 * result.per_sequence("total")
    assert model_bytes(V41_FLASH, CONTEXT, include_mtp=False).per_sequence("window") == 40 * 128 * 528


def test_v4_pro_totals_by_hand() -> None:
    result = model_bytes(V4_PRO, CONTEXT)
    c4_rows, c128_rows = CONTEXT // 4, CONTEXT // 128
    assert result.per_sequence("window") == 62 * 128 * 584
    assert result.per_sequence("compressed") == (30 * c4_rows + 31 * c128_rows) * 584
    assert result.per_sequence("index") == 30 * c4_rows * 132
    # reference buffers: ratio 4 overlaps (8 entries x 1024 channels), ratio 128 does not; indexer d = 128
    main4, main128, index4 = 2 * 8 * 1024 * 4, 2 * 128 * 512 * 4, 2 * 8 * 256 * 4
    assert (v4_state_bytes(4, 512), v4_state_bytes(128, 512), v4_state_bytes(4, 128)) == (main4, main128, index4)
    assert result.per_sequence("state") == 30 * (main4 + index4) + 31 * main128
    kinds = {k.kind: k.count for k in result.kinds}
    assert kinds == {"C128 (HCA): KV": 31, "C4 (CSA): KV + index keys": 30, "MTP layer, window only": 1}


def test_format_overrides_and_paging() -> None:
    fp4_index = preset_formats(V4_PRO, index="index_fp4_68")
    assert model_bytes(V4_PRO, CONTEXT, formats=fp4_index).per_sequence("index") == 30 * (CONTEXT // 4) * 68
    # a 256-position page of ratio-4 V4 rows: 64 rows, 37,376 B padded to 65 x 576 = 37,440 B
    assert page_bytes(V4_MAIN_FP8, 256, 4) == 37_440
    assert page_bytes(INDEX_FP8, 256, 4) == 64 * 132
    pages = -(-1000 // 256)
    expected = pages * (30 * (37_440 + 64 * 132) + 31 * page_bytes(V4_MAIN_FP8, 256, 128))
    assert page_bytes(V4_MAIN_FP8, 256, 128) == 1 * 576 * 3  # 2 rows: 1,168 B padded to 1,728
    assert paged_bytes(V4_PRO, 1000, 256) == expected
    with pytest.raises(ValueError, match=r"^block_tokens: must be a multiple of the ratio 128"):
        paged_bytes(V4_PRO, 1000, 64)


def test_refusals() -> None:
    with pytest.raises(ValueError, match=r"^context: must be >= 0"):
        model_bytes(V4_PRO, -1)
    with pytest.raises(ValueError, match=r"^batch: must be a positive integer"):
        model_bytes(V4_PRO, 10, batch=0)
    with pytest.raises(TypeError, match=r"^context: must be an int"):
        compressed_rows(1.5, 4)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^ratio: must be a positive integer"):
        compressed_rows(10, 0)


# --- every refusal names its argument, and the small rules behind the totals (docs/mutation.md) ---------------

FMTS = preset_formats(V4_PRO)


test_every_refusal_names_its_argument = worded_exactly(
    [
        (lambda: compressed_rows(-1, 4), ValueError, "context: must be >= 0, got -1"),
        (lambda: compressed_rows(1, 0), ValueError, "ratio: must be a positive integer, got 0"),
        (lambda: rows_per_block(0, 4), ValueError, "block_tokens: must be a positive integer, got 0"),
        (lambda: rows_per_block(64, 0), ValueError, "ratio: must be a positive integer, got 0"),
        (lambda: rows_per_block(64, 128), ValueError, "block_tokens: must be a multiple of the ratio 128, got 64"),
        (lambda: v4_state_bytes(0, 512), ValueError, "ratio: must be a positive integer, got 0"),
        (lambda: v4_state_bytes(4, 0), ValueError, "latent_dim: must be a positive integer, got 0"),
        (lambda: v41_state_ring_entries(0, 1), ValueError, "ratio: must be a positive integer, got 0"),
        (lambda: v41_state_ring_entries(2, -1), ValueError, "backtrack_tokens: must be >= 0, got -1"),
        (lambda: v41_state_bytes(2, 0, 1), ValueError, "latent_dim: must be a positive integer, got 0"),
        (lambda: reference_cache_slots(10, -1, 4), ValueError, "window: must be >= 0, got -1"),
        (lambda: reference_cache_slots(10, 128, -1), ValueError, "ratio: must be >= 0, got -1"),
        (lambda: dense_bf16_bytes(-1, 1, 1), ValueError, "context: must be >= 0, got -1"),
        (lambda: dense_bf16_bytes(1, 0, 1), ValueError, "layers: must be a positive integer, got 0"),
        (lambda: dense_bf16_bytes(1, 1, 0), ValueError, "head_dim: must be a positive integer, got 0"),
        (lambda: layer_bytes(V4_PRO, 62, 10, FMTS), ValueError, "layer: must be in [0, 62), got 62"),
        (lambda: layer_bytes(V4_PRO, -1, 10, FMTS), ValueError, "layer: must be in [0, 62), got -1"),
        (lambda: layer_bytes(V4_PRO, 1.0, 10, FMTS), ValueError, "layer: must be in [0, 62), got 1.0"),  # type: ignore[arg-type]
        (lambda: layer_bytes(V4_PRO, 0, -1, FMTS), ValueError, "context: must be >= 0, got -1"),
        (lambda: model_bytes(V4_PRO, -1), ValueError, "context: must be >= 0, got -1"),
        (lambda: model_bytes(V4_PRO, 1, 0), ValueError, "batch: must be a positive integer, got 0"),
        (lambda: paged_bytes(V4_PRO, -1, 64), ValueError, "context: must be >= 0, got -1"),
        (lambda: paged_bytes(V4_PRO, 10, 0), ValueError, "page_tokens: must be a positive integer, got 0"),
    ]
)


def test_small_rules() -> None:
    # one token of backtracking adds no entry: the ring holds the group plus backtrack - 1 older positions
    assert [v41_state_ring_entries(2, b) for b in (0, 1, 2, 6)] == [2, 2, 3, 7]
    assert v41_state_ring_entries(1, 6) == 0
    assert reference_cache_slots(1000, 128, 0) == 128 and reference_cache_slots(1000, 128, 4) == 378
    named = preset_formats(V4_PRO, window=V41_MAIN_FP8.name, compressed=V41_MAIN_FP4.name, index=INDEX_FP8.name)
    assert named == Formats(V41_MAIN_FP8, V41_MAIN_FP4, INDEX_FP8)
    assert preset_formats(V4_PRO) == Formats(*V4_PRO.formats)
    one = layer_bytes(V4_PRO, 2, 1024, FMTS)
    assert (one.layer, one.ratio, one.kind) == (2, 4, "C4 (CSA): KV + index keys")
    totals = model_bytes(V4_PRO, 1024)
    assert (totals.model, totals.context, totals.batch) == ("v4-pro", 1024, 1)


def test_layer_kinds() -> None:
    assert [layer_kind(V41_FLASH, layer) for layer in (0, 41)] == ["ratio 0, window only", "MTP layer, window only"]
    kinds = {layer_kind(V41_FLASH, layer) for layer in range(V41_FLASH.total_layers)}
    assert {k for k in kinds if k.startswith("C")} == {
        "C2 source: KV + index keys",
        "C2 consumer: reads its source's rows",
        "C1 source: KV + index keys",
        "C1 consumer: reads its source's rows",
    }
    no_index = replace(V41_FLASH, index_source_layers=(2, 8, 14))
    assert layer_kind(no_index, 20) == "C1 source: KV"
    compressing_mtp = replace(V4_PRO, compress_ratios=(*V4_PRO.compress_ratios[:-1], 128))
    assert layer_kind(compressing_mtp, 61) == "MTP layer, ratio 128"


def test_the_grouping_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    """Layers of one kind must have equal bytes: with every layer given one kind, model_bytes refuses."""
    import reference.accounting as accounting

    monkeypatch.setattr(accounting, "layer_kind", lambda model, layer: "one kind")
    message = "model: layers of kind 'one kind' differ in bytes; the grouping is wrong"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        model_bytes(V4_PRO, 1024)


test_every_preset_refusal_is_worded_exactly = worded_exactly(
    [
        (lambda: model_preset("v5"), ValueError, "model: unknown model 'v5'; known: v4-flash, v4-pro, v4.1-flash"),
        (
            lambda: replace(V4_PRO, num_layers=60),
            ValueError,
            "compress_ratios: must have num_layers + mtp_layers = 61 entries, got 62",
        ),
        (
            lambda: replace(V41_FLASH, kv_source_layers=None),
            ValueError,
            "kv_source_layers: a V4.1 preset must list its KV and index source layers",
        ),
        (
            lambda: replace(V41_FLASH, index_source_layers=None),
            ValueError,
            "kv_source_layers: a V4.1 preset must list its KV and index source layers",
        ),
        (lambda: replace(V4_PRO, window_format="fp16"), ValueError, "format: unknown row format 'fp16'"),
        (lambda: replace(V4_PRO, index_format="index-fp2"), ValueError, "format: unknown row format 'index-fp2'"),
    ]
)


def test_layer_ownership() -> None:
    """Computed when a test asks, not at import: the presets' tuples are built once, when the module loads."""
    assert models._alternating(2, 7) == [4, 128, 4, 128, 4, 128]
    assert models._alternating(3, 3) == [128]
    compressing_mtp = replace(V4_PRO, compress_ratios=(*V4_PRO.compress_ratios[:-1], 4))
    assert compressing_mtp.is_mtp(61) and not compressing_mtp.is_mtp(60)
    assert not compressing_mtp.owns_compressed_kv(61) and not compressing_mtp.owns_index_keys(61)
    assert V4_PRO.owns_compressed_kv(60) and V4_PRO.owns_index_keys(60) and not V4_PRO.owns_index_keys(59)
    assert not V4_FLASH.owns_compressed_kv(0) and not V4_FLASH.owns_index_keys(1)
    assert [V41_FLASH.owns_compressed_kv(layer) for layer in (0, 2, 3, 20, 24)] == [False, True, False, True, False]
    assert [V41_FLASH.owns_index_keys(layer) for layer in (2, 24, 25)] == [True, False, False]
