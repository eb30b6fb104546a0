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


def declaring(impl: Implementation | Any, convention: str, op: str | None = None) -> Implementation:
    """The same kernel (an implementation's, or a plain callable of ``op``) declaring ``convention``."""
    if isinstance(impl, Implementation):
        return Implementation(impl.op, "t", impl.fn, convention)
    assert op is not None
    return Implementation(op, "t", impl, convention)


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


def judged(check: Any, case: dict[str, Any], *verdicts: tuple[Implementation, str | None]) -> None:
    """``check`` on ``case``, kernel by kernel: one given with None passes, any other fails naming its words."""
    for impl, words in verdicts:
        if words is None:
            check(impl, case)
        else:
            fails(check, impl, case, words)


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
    lowest_only = indexing_kernel("topk", "v4.1", ties_to_highest_index=True)
    judged(check_equals_reference, TIES, (highest, None), (lowest_only, "expected 0, got 1"))
    judged(check_equals_reference, {**TIES, "scores": [[1.0, 1.0, 0.0, 1.0]]}, (highest, None))
    garbage = {**TIES, "scores": [[0.0, 1.0, 5.0, 5.0]], "lengths": [2], "k": 1}
    judged(check_equals_reference, garbage, (indexing_kernel("topk", "v4.1+ties_any", rank_whole_row=True), "differ"))


def test_topk_orders() -> None:
    judged(
        check_equals_reference,
        ORDER,
        (indexing_kernel("topk", "v4.1+order_rank", rank_order_output=True), None),
        (indexing_kernel("topk", "v4.1+order_any", rank_order_output=True), None),
        (indexing_kernel("topk", "v4.1", rank_order_output=True), "expected 0, got 1"),
        (indexing_kernel("topk", "v4.1+order_index", rank_order_output=True), "expected 0, got 1"),
        (
            indexing_kernel("topk", "v4.1+ties_any+order_index", rank_order_output=True),
            "not in ascending index order: 2 before 0",
        ),
        (indexing_kernel("topk", "v4.1+order_rank"), "not in rank order: 0 (key (0, 1.0)) before 1"),
    )


def test_topk_neg_inf_excluded() -> None:
    judged(
        check_equals_reference,
        NEG_INF,
        (indexing_kernel("topk", "v4.1+neg_inf_excluded"), None),
        (indexing_kernel("topk", "v4.1"), None),
        (indexing_kernel("topk", "v4.1+neg_inf_excluded", neg_inf_eligible=True), "expected -1, got 1"),
        (declaring(indexing_kernel("topk", "select+neg_inf_excluded"), "select"), "differ"),
    )


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
    judged(
        check_select_equals_reference,
        {**CANDIDATES, "scores": [[1.0, 0.0, 5.0, 5.0, 2.0, 0.0, 6.0, 0.0]]},
        (indexing_kernel("candidate_select", "unpinned+drop_nan+order_rank", rank_order_output=True), None),
        (indexing_kernel("candidate_select", "unpinned+drop_nan", rank_order_output=True), "expected 1, got 3"),
        (
            indexing_kernel("candidate_select", "unpinned+drop_nan+order_rank"),
            "not in rank order: 1 (key (0, 5.0)) before 3",
        ),
    )


def test_candidate_ties_any() -> None:
    def last_of_ties(scores: Any, lengths: Any, *, block_size: int, topk_blocks: int) -> Any:
        import torch

        return torch.tensor([[3]], dtype=torch.int32)

    judged(
        check_select_equals_reference,
        {**CANDIDATES, "topk_blocks": 1},
        (declaring(last_of_ties, "unpinned+drop_nan+ties_any", "candidate_select"), None),
        (declaring(last_of_ties, "unpinned+drop_nan", "candidate_select"), "expected 1, got 3"),
    )


SLOTS = {"rows": [[0, 1, 2]], "holes": [[]], "lengths": [3], "garbage": [[-1, -1, -1]], "block_size": 2, "ratio": 1}


def test_int32_slots() -> None:
    """vLLM's case: block 2**30, two rows a block. Under int32_slots the block ids are shifted to the bound and an
    int32 kernel passes; without it the int32 kernel fails, the failure naming the overflow."""
    int32 = indexing_kernel("slot_translation", "sentinel+int32_slots", int32_slots=True)
    wide = indexing_kernel("slot_translation", "sentinel")
    judged(
        check_slots_equal_reference,
        {**SLOTS, "block_tables": [[2**30, 2**30 + 1]]},
        (int32, None),
        (indexing_kernel("slot_translation", "sentinel", int32_slots=True), "int32 overflow"),
        (wide, None),
        (declaring(wide, "sentinel+int32_slots"), "the contract asks for torch.int32"),
    )
    passes_every_property(int32)
    passes_every_property(indexing_kernel("slot_translation", "count+int32_slots", int32_slots=True))


def test_bf16_rows_and_f32_scale() -> None:
    both = store_kernel("v41_fp8_528+bf16_rows+f32_scale", RowDtype.BF16, Arithmetic.F32)
    passes_every_property(both, examples=6)
    f32 = store_kernel("v4_584+f32_scale", arithmetic=Arithmetic.F32)
    exact = store_kernel("v4_584")
    judged(
        check_store_matches_reference,
        F32_SCALE_BOUNDARY,
        (f32, None),
        (exact, None),
        (declaring(f32, "v4_584"), "byte(s) differ"),
        (declaring(exact, "v4_584+f32_scale"), "byte(s) differ"),
    )
    with pytest.raises(ValueError, match="rows: must be f32"):
        check_store_matches_reference(declaring(exact, "v4_584+bf16_rows"), F32_SCALE_BOUNDARY)
    through_f16 = store_with(FormatBugs(rows_through_f16=True), RowDtype.BF16)
    small = {
        **F32_SCALE_BOUNDARY,
        "patterns": [{"seed": 1, "exp": -14, "bits": 8, "spread": 4, "anchored": False, "edits": []}],
    }
    judged(
        check_store_matches_reference,
        small,
        (store_kernel("v4_584+bf16_rows", RowDtype.BF16), None),
        (declaring(through_f16, "v4_584+bf16_rows", "quantize_store"), "byte(s) differ"),
    )
