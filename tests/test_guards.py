"""Guarded calls (``properties.guards``): a kernel that changes an input, garbage lanes included, or writes one
element outside an argument fails, naming the argument and the first changed element; in-place arguments may
change and reach the caller; strides and dtypes are what the caller passed."""

from __future__ import annotations

import importlib.util
import os
import pathlib
from types import ModuleType
from typing import Any

import pytest
import torch

from properties.catalog import properties_for
from properties.compare import Mismatch
from properties.guards import PATTERN, guarded, guarded_call
from properties.registry import Implementation
from properties.runner import run_property

ROOT = pathlib.Path(__file__).resolve().parents[1]
COMPILED = torch.device("cuda") if os.environ.get("TRITON_INTERPRET") != "1" and torch.cuda.is_available() else None
"""Where the Triton kernels below run: compiled on the GPU where there is one, else interpreted on the CPU."""


def misbehaving() -> ModuleType:
    spec = importlib.util.spec_from_file_location("misbehaving_for_tests", ROOT / "examples" / "misbehaving.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def topk_args() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    scores = torch.tensor([[2.0, 6.0, 3.0, 0.0, 300.0], [1.0, 2.0, float("nan"), 4.0, 5.0]])
    return scores, torch.tensor([4, 2], dtype=torch.int32), torch.tensor([0, 10], dtype=torch.int32)


@pytest.mark.parametrize(
    ("kernel", "argument", "first"),
    [
        ("zeroes_scores", "scores", "at scores[0, 0]: expected 2.0, got 0.0"),
        ("zeroes_lengths", "lengths", "at lengths[0]: expected 4, got 0"),
        ("shifts_offsets", "offsets", "at offsets[0]: expected 0, got 7"),
        ("clears_garbage", "scores", "at scores[0, 4]: expected 300.0, got -inf"),
    ],
)
def test_a_kernel_that_changes_an_input_fails_naming_it(kernel: str, argument: str, first: str) -> None:
    fn = getattr(misbehaving(), kernel)
    with pytest.raises(Mismatch) as caught:
        guarded_call(fn, "topk", topk_args(), {"k": 2})
    text = str(caught.value)
    assert f"modified its input(s) {argument} " in text and first in text, text


@pytest.mark.parametrize("kernel", ["zeroes_scores", "zeroes_lengths", "shifts_offsets", "clears_garbage"])
def test_input_mutating_kernels_fail_the_property_suite(kernel: str) -> None:
    """Each of them returns the right lanes: only the input comparison can catch it."""
    fn = guarded(getattr(misbehaving(), kernel), "topk")
    impl = Implementation("topk", "user", fn, "v4.1", origin="user")
    (prop,) = [p for p in properties_for("topk") if p.name == "topk_equals_reference"]
    outcome = run_property(prop, impl, max_examples=10, derandomize=True, shrink=False)
    assert not outcome.passed and "modified its input(s)" in str(outcome.error), outcome.error


def test_a_kernel_writing_one_byte_past_its_output_fails() -> None:
    """quantize_store's output is ``cache`` (in place): a Triton copy into it with ``offs <= n`` writes one byte
    past its end, which lands in the guard bytes (interpreted on a CPU, compiled on a GPU)."""
    rows = torch.zeros(1, 512, dtype=torch.float32)
    cache = torch.zeros(2, 528, dtype=torch.uint8)
    with pytest.raises(Mismatch) as caught:
        guarded_call(
            misbehaving().store_past_end,
            "quantize_store",
            (rows, torch.tensor([0]), cache),
            {"fmt": "v41_fp8_528", "rows_per_block": 1, "layer": 0},
            COMPILED,
        )
    text = str(caught.value)
    assert "wrote outside its argument(s) cache" in text, text
    assert f"at byte 0 past the end of cache: expected {PATTERN[0]:02x} (guard), got 00" in text, text


def test_writes_before_the_start_and_between_elements_are_located() -> None:
    def scribbles(scores: torch.Tensor, lengths: torch.Tensor, offsets: torch.Tensor, *, k: int) -> Any:
        storage = scores.untyped_storage()
        start = scores.storage_offset() * 4
        storage[start - 2] = 0  # two bytes before scores
        offsets.as_strided((1,), (1,), offsets.storage_offset() + 1)[0] = 5  # the gap after offsets[0]
        return torch.zeros(2, k, dtype=torch.int32)

    wide = torch.tensor([0, 99, 10, 99], dtype=torch.int32)
    scores, lengths, _ = topk_args()
    with pytest.raises(Mismatch) as caught:
        guarded_call(scribbles, "topk", (scores, lengths, wide[::2]), {"k": 2})
    text = str(caught.value)
    assert "at byte 2 before the start of scores" in text, text
    assert "at bytes 4..7 of offsets, between its elements" in text, text


def test_in_place_arguments_may_change_and_reach_the_caller() -> None:
    from fast.cache import quantize_store

    rows = torch.ones(1, 512, dtype=torch.float32)
    cache = torch.zeros(2, 528, dtype=torch.uint8)
    guarded_call(
        quantize_store,
        "quantize_store",
        (rows, torch.tensor([1]), cache),
        {"fmt": "v41_fp8_528", "rows_per_block": 1, "backend": "torch"},
    )
    assert cache[0].sum() == 0 and cache[1].sum() > 0


def test_the_kernel_sees_the_callers_strides_dtype_and_values_inside_guards() -> None:
    seen: dict[str, Any] = {}

    def look(scores: torch.Tensor, lengths: torch.Tensor, offsets: torch.Tensor, *, k: int) -> torch.Tensor:
        seen.update(stride=scores.stride(), dtype=scores.dtype, values=scores.tolist(), expanded=offsets.stride())
        base = scores.untyped_storage()
        seen["guarded"] = base.nbytes() > scores.numel() * scores.element_size()
        return torch.zeros(2, k, dtype=torch.int32)

    wide = torch.arange(20, dtype=torch.bfloat16).reshape(2, 10)
    offsets = torch.tensor([3], dtype=torch.int32).expand(2)
    guarded_call(look, "topk", (wide[:, ::2], torch.tensor([5, 5], dtype=torch.int32), offsets), {"k": 2})
    assert seen == {
        "stride": (10, 2),
        "dtype": torch.bfloat16,
        "values": wide[:, ::2].tolist(),
        "expanded": (0,),
        "guarded": True,
    }


def test_a_correct_kernel_passes_guarded() -> None:
    from fast.indexing.entry_points import topk_v41

    impl = Implementation("topk", "user", guarded(topk_v41, "topk", COMPILED), "v4.1", origin="user")
    for prop in properties_for("topk"):
        outcome = run_property(prop, impl, max_examples=3, derandomize=True, shrink=False)
        assert outcome.passed, (prop.name, outcome.error)
