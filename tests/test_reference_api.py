"""The reference's public API: every name in ``reference.__all__`` exists, no export hides a module of the same
name, and the conventions every layer uses are the reference's table."""

from __future__ import annotations

import importlib
import pkgutil
import re
import types

import pytest

import reference
from properties.contract import operation, require_convention
from reference import addressing, conventions, scales, selection, topk
from reference.conventions import CONVENTIONS
from tests.refusals import worded_exactly


def test_every_export_exists() -> None:
    missing = [name for name in reference.__all__ if not hasattr(reference, name)]
    assert not missing


def test_no_export_shadows_a_module() -> None:
    for info in pkgutil.iter_modules(reference.__path__):
        importlib.import_module(f"reference.{info.name}")
        assert isinstance(getattr(reference, info.name), types.ModuleType), f"reference.{info.name} is not a module"


def test_contract_conventions_are_the_references() -> None:
    from properties.contract import OPERATIONS

    assert set(OPERATIONS) == set(CONVENTIONS)
    for name, op in OPERATIONS.items():
        assert op.conventions == tuple(CONVENTIONS[name]), name


def test_fast_topk_layouts_are_the_references() -> None:
    from fast.indexing.validate import TOPK_MODES
    from reference.topk import lane_layout

    assert {name: lane_layout(c.rule) for name, c in CONVENTIONS["topk"].items()} == TOPK_MODES


def test_one_spelling_the_earlier_ones_refused_naming_the_new() -> None:
    import pytest

    from reference.formats import RENAMED, row_format
    from reference.state import min_safe_ring_size

    for old, new in RENAMED.items():
        assert row_format(new).name == new
        with pytest.raises(ValueError, match=f"'{old}' is now spelled '{new}'"):
            row_format(old)
    with pytest.raises(ValueError, match="'write-then-read' is now spelled 'write_then_read'"):
        min_safe_ring_size(2, False, 1, "write-then-read", False)
    assert set(CONVENTIONS["quantize_store"]) == {row_format(n).name for n in CONVENTIONS["quantize_store"]}
    assert set(CONVENTIONS["compression_decode"]) == {"write_then_read", "read_then_write"}


def test_rules_are_looked_up_by_name() -> None:
    assert conventions.rule("topk", "v4.1") is conventions.TOPK["v4.1"].rule
    assert conventions.rule("window_indices", "v4") is conventions.WINDOW_INDICES["v4"].rule
    assert conventions.lookup(conventions.TOPK, "select", "convention") is conventions.TOPK["select"].rule
    refusals = [
        (lambda: conventions.rule("top-k", "v4.1"), f"op: unknown operation 'top-k'; known: {', '.join(CONVENTIONS)}"),
        (
            lambda: conventions.rule("topk", "v5"),
            f"convention: unknown convention 'v5'; known: {', '.join(conventions.TOPK)}",
        ),
        (lambda: conventions.rule("index_scores", "x"), "convention: unknown convention 'x'; known: none"),
        (lambda: conventions.lookup({}, "x", "what"), "what: unknown convention 'x'; known: none"),
        (
            lambda: conventions.lookup(conventions.WINDOW_INDICES, "v5", "what"),
            "what: unknown convention 'v5'; known: v4, v4.1",
        ),
    ]
    for call, message in refusals:
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            call()


def test_options_parse_in_any_order_into_the_canonical_spelling() -> None:
    chosen = conventions.parse("topk", "v4.1+order_rank+ties_any")
    assert (chosen.base, chosen.options, chosen.name) == (
        "v4.1",
        ("ties_any", "order_rank"),
        "v4.1+ties_any+order_rank",
    )
    assert chosen.setting(selection.Ties, selection.Ties.LOWEST) is selection.Ties.ANY
    assert chosen.setting(selection.Order, selection.Order.INDEX) is selection.Order.RANK
    assert chosen.rule == conventions.TOPK["v4.1"].rule
    plain = conventions.parse("topk", "v4.1")
    assert plain.options == () and plain.setting(selection.Ties, selection.Ties.LOWEST) is selection.Ties.LOWEST
    assert conventions.parse("candidate_select", "pinned+drop_nan+ties_any").base == "pinned+drop_nan"
    store = conventions.parse("quantize_store", "v41_fp8_528+f32_scale+bf16_rows")
    assert store.name == "v41_fp8_528+bf16_rows+f32_scale"
    assert store.rule is conventions.FORMATS["v41_fp8_528"].rule
    assert store.setting(scales.Arithmetic, scales.Arithmetic.EXACT) is scales.Arithmetic.F32
    assert (
        conventions.parse("slot_translation", "count+int32_slots").setting(
            addressing.SlotWidth, addressing.SlotWidth.INT64
        )
        is addressing.SlotWidth.INT32
    )


def test_an_option_that_is_a_field_of_the_rule_is_folded_in() -> None:
    rule = conventions.rule("topk", "select-unsorted+neg_inf_excluded")
    assert rule == topk.SelectTopK(sorted_index=False, masked_lanes=topk.MaskedLanes.EXCLUDED)
    assert conventions.TOPK["select-unsorted"].rule == topk.SelectTopK(sorted_index=False)


def test_every_option_is_an_enum_rule_of_the_reference() -> None:
    assert set(conventions.OPTIONS) <= set(conventions.CONVENTIONS)
    for op, options in conventions.OPTIONS.items():
        assert {o.name for o in options.values()} == set(options)
        for option in options.values():
            assert option.bases is None or set(option.bases) <= set(conventions.CONVENTIONS[op])
            assert operation(op).options == tuple(options)
    assert conventions.OPTIONS["topk"]["neg_inf_excluded"].bases == (
        "v4.1",
        "v4.1-clamped",
        "select",
        "select-unsorted",
    )


test_option_refusals = worded_exactly(
    [
        (
            lambda: conventions.parse("topk", "v4.1+nope"),
            ValueError,
            "convention: topk has no option 'nope' (after 'v4.1'); known options: ties_any, order_index, order_rank, "
            "order_any, neg_inf_excluded",
        ),
        (
            lambda: conventions.parse("topk", "v4-decode+neg_inf_excluded"),
            ValueError,
            "convention: option 'neg_inf_excluded' combines only with v4.1, v4.1-clamped, select, select-unsorted, "
            "not 'v4-decode'",
        ),
        (
            lambda: conventions.parse("topk", "v4.1+order_rank+order_any"),
            ValueError,
            "convention: options 'order_rank' and 'order_any' exclude each other",
        ),
        (
            lambda: conventions.parse("topk", "v4.1+ties_any+ties_any"),
            ValueError,
            "convention: option 'ties_any' given twice",
        ),
        (
            lambda: conventions.parse("window_indices", "v4+ties_any"),
            ValueError,
            "convention: window_indices has no option 'ties_any' (after 'v4'); known options: none",
        ),
        (
            lambda: conventions.parse("topk", "ties_any"),
            ValueError,
            "convention: unknown convention 'ties_any'; known: v4.1, v4.1-clamped, v4-prefill, v4-decode, select, "
            "select-unsorted",
        ),
        (
            lambda: conventions.parse("top-k", "v4.1"),
            ValueError,
            f"op: unknown operation 'top-k'; known: {', '.join(CONVENTIONS)}",
        ),
        (
            lambda: require_convention("topk", "v5+ties_any"),
            ValueError,
            "convention: topk has no convention 'v5+ties_any'; known: v4.1, v4.1-clamped, v4-prefill, v4-decode, "
            "select, select-unsorted",
        ),
        (
            lambda: require_convention("topk", "v4.1+order_index+order_rank"),
            ValueError,
            "convention: options 'order_index' and 'order_rank' exclude each other",
        ),
        (
            lambda: require_convention("gathered_rows", "x"),
            ValueError,
            "convention: gathered_rows has no convention 'x'; known: none",
        ),
    ]
)


def test_the_fp8_operations_conventions() -> None:
    """sparse_attention_fp8_kv reads the two FP8 main formats, the same records quantize_store writes; the paged
    FP8 index scores have no convention to choose."""
    from fast.cache.checks import ATTENTION_KV_FORMATS

    assert set(CONVENTIONS["sparse_attention_fp8_kv"]) == {"v4_584", "v41_fp8_528"}
    for name, convention in CONVENTIONS["sparse_attention_fp8_kv"].items():
        assert convention is CONVENTIONS["quantize_store"][name]
    assert ATTENTION_KV_FORMATS == ("v4_584", "v41_fp8_528")
    assert dict(CONVENTIONS["paged_index_scores_fp8"]) == {}
