"""Properties of the FP8 index scores (operation ``index_scores_fp8``): e4m3 queries and keys with their scales,
within the e4m3 dot's bound of the exact scores (``reference.indexing.E4M3_DOT_BOUND``), on exactly the rows each
query sees, in prefill and in decode.

An example is ``{"q", "q_scale", "weights", "k", "k_scale", "positions", "ratio"}``
(``properties.indexing.strategies.fp8_index_score_cases``): codes as ints, scales and weights as floats. Lane
``j`` of query ``m`` is compared iff ``j < (positions[m] + 1) // ratio``; key rows no query sees hold NaN codes
and garbage scales.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import torch

from properties.compare import assert_within_magnitude
from properties.indexing.strategies import fp8_index_score_cases
from properties.indexing.values import output_lanes
from properties.registry import Implementation
from properties.runner import Property
from reference import indexing, padding

SIGN_BIT = 0x80


def tensors(case: dict[str, Any]) -> tuple[torch.Tensor, ...]:
    """The example's arguments: q u8[M, H, D], q_scale f32[M, H], weights f32[M, H], k u8[N, D], k_scale f32[N],
    positions i32[M]."""
    dim = len(case["q"][0][0])
    return (
        torch.tensor(case["q"], dtype=torch.uint8),
        torch.tensor(case["q_scale"], dtype=torch.float32),
        torch.tensor(case["weights"], dtype=torch.float32),
        torch.tensor(case["k"], dtype=torch.uint8).reshape(len(case["k"]), dim),
        torch.tensor(case["k_scale"], dtype=torch.float32),
        torch.tensor(case["positions"], dtype=torch.int32),
    )


def _exact(values: list[float]) -> list[Fraction]:
    return [Fraction(v) for v in values]


def _unsigned(rows: list[list[int]]) -> list[list[int]]:
    return [[c & ~SIGN_BIT for c in row] for row in rows]


def check_within_bound(impl: Implementation, case: dict[str, Any]) -> None:
    args = tensors(case)
    q, k = args[0], args[3]
    out = impl.fn(*(t.to(impl.device) for t in args), ratio=case["ratio"])
    got = output_lanes(out, torch.float32, (q.shape[0], k.shape[0]), "index_scores_fp8 output")
    for m, p in enumerate(case["positions"]):
        seen = padding.query_visible_rows(p, case["ratio"])
        keys, key_scales = case["k"][:seen], _exact(case["k_scale"][:seen])
        q_scales, weights = _exact(case["q_scale"][m]), _exact(case["weights"][m])
        exact = indexing.quantized_index_scores(case["q"][m], q_scales, weights, keys, key_scales)
        magnitude = indexing.quantized_index_scores(
            _unsigned(case["q"][m]), q_scales, [abs(w) for w in weights], _unsigned(keys), [abs(s) for s in key_scales]
        )
        assert_within_magnitude(
            exact,
            got[m][:seen],
            magnitude,
            indexing.E4M3_DOT_BOUND,
            f"index_scores_fp8 query {m} at position {p} (ratio {case['ratio']}, sees {seen} rows)",
        )


SUBNORMAL_HEAD: dict[str, Any] = {
    "q": [[[0x01, 0x02, 0x03, 0x07], [0x38, 0x40, 0xC8, 0x00]]],
    "q_scale": [[4.0, 0.5]],
    "weights": [[1.0, -0.5]],
    "k": [[0x05, 0x06, 0x01, 0x04], [0x38, 0xB8, 0x38, 0xB8], [0x7F, 0x7F, 0x7F, 0x7F]],
    "k_scale": [2.0, -1.5, float("nan")],
    "positions": [3],
    "ratio": 2,
}
"""Head 0 all subnormal codes (its scores are lost when subnormals flush to zero); a negative key scale; the third
key row, which the query at position 3 with ratio 2 does not see, holds NaN codes and a NaN scale."""

PROPERTIES = [
    Property(
        "index_scores_fp8_prefill",
        "index_scores_fp8",
        fp8_index_score_cases("prefill"),
        check_within_bound,
        examples=(SUBNORMAL_HEAD,),
        doc="FP8 queries and keys, a prefill chunk: lanes j < floor((p + 1) / r) within the e4m3 dot's bound",
    ),
    Property(
        "index_scores_fp8_decode",
        "index_scores_fp8",
        fp8_index_score_cases("decode"),
        check_within_bound,
        doc="FP8 queries and keys, one query per request at its own position: lanes within the e4m3 dot's bound",
    ),
]
