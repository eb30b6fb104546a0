"""The mutants' unmutated bases (the bf16-probability twin included) pass every format and attention property, so
a killed mutant died of its planted bug; the float64 attention the shape ladder judges by passes them too (against
the exact reference, on small shapes); and the names the contract lists match the formats and conventions these
modules know."""

from __future__ import annotations

import pytest
from hypothesis import settings

from properties.cache.common import ATTENTION_CONVENTIONS, BF16_CONVENTIONS, FORMAT_CONVENTIONS, FP8_KV_CONVENTIONS
from properties.cache.faulty_attention import NO_BF16_BUGS, attention_with, bf16_attention_with, float64_attention
from properties.cache.faulty_attention import NO_BUGS as NO_ATTENTION_BUGS
from properties.cache.faulty_formats import gather_dequantize, quantize_store
from properties.cache.faulty_fp8_kv import NO_BUGS as NO_PAGED_BUGS
from properties.cache.faulty_fp8_kv import paged_with
from properties.cache.faulty_norm_rope import norm_rope_store
from properties.catalog import all_properties
from properties.contract import operation
from properties.registry import Implementation
from properties.runner import hypothesis_test

TWINS = [
    *(Implementation("quantize_store", "torch_twin", quantize_store, f, "fast") for f in FORMAT_CONVENTIONS),
    *(Implementation("gather_dequantize", "torch_twin", gather_dequantize, f, "fast") for f in FORMAT_CONVENTIONS),
    *(Implementation("norm_rope_store", "torch_twin", norm_rope_store, f, "fast") for f in FORMAT_CONVENTIONS),
    *(
        Implementation("sparse_attention", "torch_twin", attention_with(NO_ATTENTION_BUGS, c), c, "fast")
        for c in ATTENTION_CONVENTIONS
    ),
    *(
        Implementation("sparse_attention", "float64_oracle", float64_attention(c), c, "fast")
        for c in ("minus_one_only+empty_zero", "out_of_range+empty_nan")
    ),
    *(
        Implementation("sparse_attention_fp8_kv", "torch_twin", paged_with(NO_PAGED_BUGS, f), f, "fast")
        for f in FP8_KV_CONVENTIONS
    ),
    *(
        Implementation("sparse_attention_bf16", "torch_twin", bf16_attention_with(NO_BF16_BUGS, c), c, "fast")
        for c in ("minus_one_only+empty_zero", "out_of_range+empty_nan")
    ),
]
PAIRS = [(p, i) for p in all_properties() for i in TWINS if p.applies_to(i)]


@pytest.mark.parametrize(("prop", "impl"), PAIRS, ids=[f"{p.name}-{i.id}" for p, i in PAIRS])
def test_unmutated_format_twin(prop, impl):  # type: ignore[no-untyped-def]
    """A third of the profile's examples: the twins are controls, the reference adapters carry the full count."""
    examples = max(10, settings.default.max_examples // 3)
    settings(settings.default, max_examples=examples)(hypothesis_test(prop, impl))()


def test_format_conventions_match_the_contract() -> None:
    assert set(operation("quantize_store").conventions) == set(FORMAT_CONVENTIONS)
    assert set(operation("gather_dequantize").conventions) == set(FORMAT_CONVENTIONS)
    assert set(operation("norm_rope_store").conventions) == set(FORMAT_CONVENTIONS)
    assert set(operation("sparse_attention").conventions) == set(ATTENTION_CONVENTIONS)
    assert set(operation("sparse_attention_fp8_kv").conventions) == set(FP8_KV_CONVENTIONS)
    assert set(operation("sparse_attention_bf16").conventions) == set(BF16_CONVENTIONS)
