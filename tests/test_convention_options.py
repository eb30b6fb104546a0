"""Every convention option passes a kernel that honours it and fails one that breaks it (docs/indexing.md, "Ties
and lane order"; docs/formats.md, "Store options"). The kernels are the torch implementations behind the shipped
mutants (``properties/indexing/faulty.py``, ``properties/cache/faulty_formats.py``) with no bug planted, each
declaring the option it follows or not."""

from __future__ import annotations

import math
from typing import Any

import pytest

from properties.cache.faulty_formats import NO_BUGS, FormatBugs, store_with
from properties.cache.frozen import F32_SCALE_BOUNDARY
from properties.cache.props_store import check_store_matches_reference
from properties.catalog import properties_for
from properties.compare import Mismatch
from properties.indexing import faulty
from properties.indexing.mutants import bound
from properties.indexing.props_addressing import check_slots_equal_reference
from properties.indexing.props_candidates import check_select_equals_reference
from properties.indexing.props_topk import check_equals_reference
from properties.registry import Implementation
from properties.runner import run_property
from reference.formats import RowDtype
from reference.scales import Arithmetic

EXAMPLES = 15


def indexing_kernel(op: str, convention: str, **faults: Any) -> Implementation:
    return Implementation(op, "torch", bound(op, convention, faulty.Faults(**faults)), convention, origin="fast")


def store_kernel(convention: str, dtype: RowDtype = RowDtype.F32, arithmetic: Arithmetic = Arithmetic.EXACT) -> Any:
    return Implementation("quantize_store", "torch", store_with(NO_BUGS, dtype, arithmetic), convention, origin="fast")


def passes_every_property(impl: Implementation, examples: int = EXAMPLES) -> None:
    for prop in properties_for(impl.op):
        if prop.group or not prop.applies_to(impl):
            continue
        outcome = run_property(prop, impl, max_examples=examples, derandomize=True, shrink=False)
        assert outcome.passed, f"{prop.name}: {outcome.error}"


def fails(check: Any, impl: Implementation, case: dict[str, Any], words: str) -> None:
    with pytest.raises(Mismatch) as caught:
        check(impl, case)
    assert words in str(caught.value)


RANK_AND_HIGHEST = {"ties_to_highest_index": True, "rank_order_output": True}
"""A kernel as torch.topk may behave: rank order, ties broken by the highest index."""
TIES = {"scores": [[1.0, 1.0, 1.0, 0.0]], "lengths": [4], "offsets": [0], "k": 2}
ORDER = {"scores": [[1.0, 3.0, 2.0]], "lengths": [3], "offsets": [0], "k": 3}
NEG_INF = {"scores": [[-math.inf, 1.0, -math.inf]], "lengths": [3], "offsets": [0], "k": 2}


@pytest.mark.parametrize(
    ("convention", "faults"),
    [
        ("v4.1+ties_any+order_rank", RANK_AND_HIGHEST),
        ("v4.1-clamped+ties_any+order_any", RANK_AND_HIGHEST),
        ("select+order_rank", {"rank_order_output": True}),
        ("v4-prefill+ties_any", {"ties_to_highest_index": True}),
        ("v4-decode+ties_any+order_any", {"ties_to_highest_index": True}),
        ("v4.1+neg_inf_excluded", {}),
        ("select-unsorted+ties_any+neg_inf_excluded", {"ties_to_highest_index": True}),
    ],
)
def test_topk_honouring_kernels_pass(convention: str, faults: dict[str, bool]) -> None:
    passes_every_property(indexing_kernel("topk", convention, **faults))


def test_topk_ties_any() -> None:
    highest = indexing_kernel("topk", "v4.1+ties_any", ties_to_highest_index=True)
    check_equals_reference(highest, TIES)
    fails(
        check_equals_reference, indexing_kernel("topk", "v4.1", ties_to_highest_index=True), TIES, "expected 0, got 1"
    )
    wrong_set = {**TIES, "scores": [[1.0, 1.0, 0.0, 1.0]]}
    check_equals_reference(highest, wrong_set)
    garbage = {**TIES, "scores": [[0.0, 1.0, 5.0, 5.0]], "lengths": [2], "k": 1}
    fails(check_equals_reference, indexing_kernel("topk", "v4.1+ties_any", rank_whole_row=True), garbage, "differ")


def test_topk_orders() -> None:
    rank = indexing_kernel("topk", "v4.1+order_rank", rank_order_output=True)
    check_equals_reference(rank, ORDER)
    check_equals_reference(indexing_kernel("topk", "v4.1+order_any", rank_order_output=True), ORDER)
    fails(check_equals_reference, indexing_kernel("topk", "v4.1", rank_order_output=True), ORDER, "expected 0, got 1")
    fails(
        check_equals_reference,
        indexing_kernel("topk", "v4.1+order_index", rank_order_output=True),
        ORDER,
        "expected 0, got 1",
    )
    fails(
        check_equals_reference,
        indexing_kernel("topk", "v4.1+ties_any+order_index", rank_order_output=True),
        ORDER,
        "not in ascending index order: 2 before 0",
    )
    fails(
        check_equals_reference,
        indexing_kernel("topk", "v4.1+order_rank"),
        ORDER,
        "not in rank order: 0 (key (0, 1.0)) before 1",
    )


def test_topk_neg_inf_excluded() -> None:
    check_equals_reference(indexing_kernel("topk", "v4.1+neg_inf_excluded"), NEG_INF)
    check_equals_reference(indexing_kernel("topk", "v4.1"), NEG_INF)
    fails(
        check_equals_reference,
        indexing_kernel("topk", "v4.1+neg_inf_excluded", neg_inf_eligible=True),
        NEG_INF,
        "expected -1, got 1",
    )
    excluding = indexing_kernel("topk", "select+neg_inf_excluded")
    fails(check_equals_reference, Implementation("topk", "t", excluding.fn, "select"), NEG_INF, "differ")


CANDIDATES = {"scores": [[1.0, 0.0, 5.0, 5.0, 2.0, 0.0, 5.0, 0.0]], "lengths": [8], "block_size": 2, "topk_blocks": 2}
"""Blocks score 1, 5, 2, 5; unpinned, the top two are blocks 1 and 3 (ties at 5)."""


@pytest.mark.parametrize(
    "convention",
    ["pinned+drop_nan+order_rank", "unpinned+propagate_nan+ties_any+order_any", "unpinned+drop_nan+ties_any"],
)
def test_candidate_honouring_kernels_pass(convention: str) -> None:
    passes_every_property(
        indexing_kernel(
            "candidate_select", convention, rank_order_output="order_rank" in convention or "order_any" in convention
        )
    )


def test_candidate_orders() -> None:
    case = {**CANDIDATES, "scores": [[1.0, 0.0, 5.0, 5.0, 2.0, 0.0, 6.0, 0.0]]}
    rank = indexing_kernel("candidate_select", "unpinned+drop_nan+order_rank", rank_order_output=True)
    check_select_equals_reference(rank, case)
    fails(
        check_select_equals_reference,
        indexing_kernel("candidate_select", "unpinned+drop_nan", rank_order_output=True),
        case,
        "expected 1, got 3",
    )
    fails(
        check_select_equals_reference,
        indexing_kernel("candidate_select", "unpinned+drop_nan+order_rank"),
        case,
        "not in rank order: 1 (key (0, 5.0)) before 3",
    )


def test_candidate_ties_any() -> None:
    def last_of_ties(scores: Any, lengths: Any, *, block_size: int, topk_blocks: int) -> Any:
        import torch

        return torch.tensor([[3]], dtype=torch.int32)

    case = {**CANDIDATES, "topk_blocks": 1}
    check_select_equals_reference(
        Implementation("candidate_select", "t", last_of_ties, "unpinned+drop_nan+ties_any"), case
    )
    fails(
        check_select_equals_reference,
        Implementation("candidate_select", "t", last_of_ties, "unpinned+drop_nan"),
        case,
        "expected 1, got 3",
    )


SLOTS = {"rows": [[0, 1, 2]], "holes": [[]], "lengths": [3], "garbage": [[-1, -1, -1]], "block_size": 2, "ratio": 1}


def test_int32_slots() -> None:
    """vLLM's case: block 2**30, two rows a block. Under int32_slots the block ids are shifted to the bound and an
    int32 kernel passes; without it the int32 kernel fails, the failure naming the overflow."""
    case = {**SLOTS, "block_tables": [[2**30, 2**30 + 1]]}
    int32 = indexing_kernel("slot_translation", "sentinel+int32_slots", int32_slots=True)
    check_slots_equal_reference(int32, case)
    fails(
        check_slots_equal_reference,
        indexing_kernel("slot_translation", "sentinel", int32_slots=True),
        case,
        "int32 overflow",
    )
    wide = indexing_kernel("slot_translation", "sentinel")
    check_slots_equal_reference(wide, case)
    fails(
        check_slots_equal_reference,
        Implementation("slot_translation", "t", wide.fn, "sentinel+int32_slots"),
        case,
        "the contract asks for torch.int32",
    )
    passes_every_property(int32)
    passes_every_property(indexing_kernel("slot_translation", "count+int32_slots", int32_slots=True))


def test_bf16_rows_and_f32_scale() -> None:
    both = store_kernel("v41_fp8_528+bf16_rows+f32_scale", RowDtype.BF16, Arithmetic.F32)
    passes_every_property(both, examples=6)
    f32 = store_kernel("v4_584+f32_scale", arithmetic=Arithmetic.F32)
    check_store_matches_reference(f32, F32_SCALE_BOUNDARY)
    exact = store_kernel("v4_584")
    check_store_matches_reference(exact, F32_SCALE_BOUNDARY)
    fails(
        check_store_matches_reference,
        Implementation("quantize_store", "t", f32.fn, "v4_584"),
        F32_SCALE_BOUNDARY,
        "byte(s) differ",
    )
    fails(
        check_store_matches_reference,
        Implementation("quantize_store", "t", exact.fn, "v4_584+f32_scale"),
        F32_SCALE_BOUNDARY,
        "byte(s) differ",
    )
    with pytest.raises(ValueError, match="rows: must be f32"):
        check_store_matches_reference(
            Implementation("quantize_store", "t", exact.fn, "v4_584+bf16_rows"), F32_SCALE_BOUNDARY
        )
    through_f16 = store_with(FormatBugs(rows_through_f16=True), RowDtype.BF16)
    small = {
        **F32_SCALE_BOUNDARY,
        "patterns": [{"seed": 1, "exp": -14, "bits": 8, "spread": 4, "anchored": False, "edits": []}],
    }
    check_store_matches_reference(store_kernel("v4_584+bf16_rows", RowDtype.BF16), small)
    fails(
        check_store_matches_reference,
        Implementation("quantize_store", "t", through_f16, "v4_584+bf16_rows"),
        small,
        "byte(s) differ",
    )
