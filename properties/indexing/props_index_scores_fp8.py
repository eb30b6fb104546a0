"""Properties of the FP8 index scores (operations ``index_scores_fp8`` and ``paged_index_scores_fp8``): e4m3
queries and keys with their scales, within the e4m3 dot's bound of the exact scores
(``reference.indexing.E4M3_DOT_BOUND``), on exactly the rows each query sees: in prefill and in decode, and
through block tables over the FP8 index cache.

An example is ``{"q", "q_scale", "weights", "k", "k_scale", "positions", "ratio"}``
(``properties.indexing.strategies.fp8_index_score_cases``): codes as ints, scales and weights as floats. Lane
``j`` of query ``m`` is compared iff ``j < (positions[m] + 1) // ratio``; key rows no query sees hold NaN codes
and garbage scales.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

import torch

from properties.compare import assert_within_magnitude
from properties.indexing.faulty import fp8_index_cache
from properties.indexing.strategies import fp8_index_score_cases, paged_fp8_score_cases
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


def _assert_query(
    got: list[float], codes: list[list[int]], q_scales: list[float], weights: list[float], keys: list[list[int]],
    key_scales: list[float], context: str,
) -> None:  # fmt: skip
    """One query's lanes against the exact FP8 index scores of ``keys``, within the e4m3 dot's bound."""
    qs, w, ks = _exact(q_scales), _exact(weights), _exact(key_scales)
    exact = indexing.quantized_index_scores(codes, qs, w, keys, ks)
    magnitude = indexing.quantized_index_scores(
        _unsigned(codes), qs, [abs(x) for x in w], _unsigned(keys), [abs(x) for x in ks]
    )
    assert_within_magnitude(exact, got, magnitude, indexing.E4M3_DOT_BOUND, context)


def check_within_bound(impl: Implementation, case: dict[str, Any]) -> None:
    args = tensors(case)
    q, k = args[0], args[3]
    out = impl.fn(*(t.to(impl.device) for t in args), ratio=case["ratio"])
    got = output_lanes(out, torch.float32, (q.shape[0], k.shape[0]), "index_scores_fp8 output")
    for m, p in enumerate(case["positions"]):
        seen = padding.query_visible_rows(p, case["ratio"])
        _assert_query(
            got[m][:seen], case["q"][m], case["q_scale"][m], case["weights"][m], case["k"][:seen],
            case["k_scale"][:seen],
            f"index_scores_fp8 query {m} at position {p} (ratio {case['ratio']}, sees {seen} rows)",
        )  # fmt: skip


def check_paged_within_bound(impl: Implementation, case: dict[str, Any]) -> None:
    """Each query's lanes j < lengths[b, t] against the exact FP8 scores of the rows its request's table names."""
    per_block = case["rows_per_block"]
    q = torch.tensor(case["q"], dtype=torch.uint8)
    requests, next_n, _, dim = q.shape
    args = (
        q,
        torch.tensor(case["q_scale"], dtype=torch.float32),
        torch.tensor(case["weights"], dtype=torch.float32),
        fp8_index_cache(
            torch.tensor(case["codes"], dtype=torch.uint8).reshape(len(case["codes"]), per_block, dim),
            torch.tensor(case["scales"], dtype=torch.float32).reshape(len(case["scales"]), per_block),
        ),
        torch.tensor(case["block_table"], dtype=torch.int32).reshape(requests, -1),
        torch.tensor(case["lengths"], dtype=torch.int32),
    )
    out = impl.fn(*(t.to(impl.device) for t in args), rows_per_block=per_block)
    shape = (requests * next_n, args[4].shape[1] * per_block)
    got = output_lanes(out, torch.float32, shape, "paged_index_scores_fp8 output")
    for b, t in itertools.product(range(requests), range(next_n)):
        seen, table = case["lengths"][b][t], case["block_table"][b]
        where = [(table[j // per_block], j % per_block) for j in range(seen)]
        _assert_query(
            got[b * next_n + t][:seen], case["q"][b][t], case["q_scale"][b][t], case["weights"][b][t],
            [case["codes"][i][r] for i, r in where], [case["scales"][i][r] for i, r in where],
            f"paged_index_scores_fp8 request {b} query {t} of {next_n} (sees {seen} rows, {per_block} a block, "
            f"table {table})",
        )  # fmt: skip


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
    Property(
        "paged_index_scores_fp8_decode",
        "paged_index_scores_fp8",
        paged_fp8_score_cases("decode"),
        check_paged_within_bound,
        doc="FP8 queries against the FP8 index cache through block tables, one query a request: lanes j < "
        "lengths[b, t] within the e4m3 dot's bound; unread rows hold NaN codes and garbage scales",
    ),
    Property(
        "paged_index_scores_fp8_next_n",
        "paged_index_scores_fp8",
        paged_fp8_score_cases("next_n"),
        check_paged_within_bound,
        doc="the same with 2 or 3 speculative queries a request, each its own count of rows",
    ),
]
