"""Between the indexing examples (plain Python floats and ints), torch tensors and the exact reference.

A drawn score is a Python float; the implementation sees it rounded to float32, so every exact comparison uses
the float32 value read back from the tensor: a number becomes its exact ``Fraction``, and NaN / +inf / -inf
become the reference's markers (``reference.score_values``). ``-0.0`` is the rational 0, as torch compares it.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import torch

from properties.compare import Mismatch
from reference.grids import FP32, round_to
from reference.padding import row_length
from reference.score_values import NAN, NEG_INF, POS_INF, Score


def exact_score(value: float) -> Score:
    """A float's exact score: NaN, +inf and -inf as markers, any other value as its exact rational."""
    if math.isnan(value):
        return NAN
    if math.isinf(value):
        return POS_INF if value > 0 else NEG_INF
    return Fraction(value)


def visible_count(length: int) -> int:
    """The entries a row of ``length`` has to read: ``length``, or 0 for a padding row (-1, ``reference.padding``)."""
    return row_length(length, "lengths")


def rank_key(value: float) -> tuple[int, float]:
    """The order torch.topk ranks floats in (-inf < numbers < +inf < NaN; -0.0 == 0.0), from Python's floats.

    Independent of ``reference.score_values.rank_key``: the properties use it as a second formulation.
    """
    return (1, 0.0) if math.isnan(value) else (0, value + 0.0)


def float32_rows(rows: list[list[float]], device: str) -> torch.Tensor:
    """A float32 matrix of the drawn rows (a row of width 0 keeps its shape)."""
    width = len(rows[0]) if rows else 0
    return torch.tensor(rows, dtype=torch.float32, device=device).reshape(len(rows), width)


def as_float32(rows: list[list[float]]) -> list[list[float]]:
    """The drawn rows as the float32 values an implementation receives."""
    return float32_rows(rows, "cpu").tolist()


def nearest_float32(value: Fraction) -> float:
    """The float32 nearest an exact value (ties to even), as a Python float (exactly representable)."""
    return float(round_to(FP32, value))


def index_tensor(rows: list[list[int]], dtype: torch.dtype, device: str) -> torch.Tensor:
    width = len(rows[0]) if rows else 0
    return torch.tensor(rows, dtype=dtype, device=device).reshape(len(rows), width)


def output_lanes(out: Any, dtype: torch.dtype, shape: tuple[int, ...], what: str) -> list[Any]:
    """An implementation's output as nested lists, after checking it is a tensor of the contract's dtype and shape."""
    if not isinstance(out, torch.Tensor):
        raise Mismatch(what, detail=f"expected a torch.Tensor, got {type(out).__name__}")
    if out.dtype != dtype:
        raise Mismatch(what, detail=f"dtype {out.dtype}, the contract asks for {dtype}")
    if tuple(out.shape) != shape:
        raise Mismatch(what, detail=f"shape {tuple(out.shape)}, expected {shape}")
    lanes: list[Any] = out.detach().cpu().tolist()
    return lanes
