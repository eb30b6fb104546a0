"""Properties of the index scores (operation ``index_scores``): exact within the twice-torch rule, on exactly the
rows each query sees, floor((p + 1) / r), in prefill (one chunk, consecutive positions) and in decode (one query
per request).

An example is ``{"q", "weights", "k", "positions", "ratio", "dtype"}``
(``properties.indexing.strategies.index_score_cases``); ``q`` and ``k`` are built in ``dtype`` (float32 or
bfloat16), ``weights`` in float32. Lane ``j`` of query ``m`` is compared iff ``j < (positions[m] + 1) // ratio``;
key rows no query sees hold NaN or inf.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

import torch

from properties.compare import assert_within_twice_baseline
from properties.indexing.strategies import index_score_cases, paged_score_cases
from properties.indexing.values import output_lanes
from properties.registry import Implementation
from properties.runner import Property
from reference import indexing, padding

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
FLOAT32_MANTISSA_BITS = 23


def baseline(q: torch.Tensor, weights: torch.Tensor, k: torch.Tensor) -> list[list[float]]:
    """The same-precision torch formula: the head dot products by einsum in the inputs' dtype, the rest in float32."""
    dots = torch.einsum("mhd,nd->mhn", q, k).float()
    result: list[list[float]] = (dots.clamp_min(0) * weights.unsqueeze(-1)).sum(dim=1).tolist()
    return result


def check_within_rule(impl: Implementation, case: dict[str, Any]) -> None:
    dtype = DTYPES[case["dtype"]]
    dim = len(case["q"][0][0])
    q = torch.tensor(case["q"], dtype=dtype)
    k = torch.tensor(case["k"], dtype=dtype).reshape(len(case["k"]), dim)
    weights = torch.tensor(case["weights"], dtype=torch.float32)
    positions = torch.tensor(case["positions"], dtype=torch.int32)
    out = impl.fn(
        q.to(impl.device), weights.to(impl.device), k.to(impl.device), positions.to(impl.device), ratio=case["ratio"]
    )
    got = output_lanes(out, torch.float32, (q.shape[0], k.shape[0]), "index_scores output")
    base = baseline(q, weights, k)
    q_exact, k_exact = q.float().tolist(), k.float().tolist()
    for m, p in enumerate(case["positions"]):
        seen = padding.query_visible_rows(p, case["ratio"])
        exact = indexing.index_scores(
            [[Fraction(x) for x in head] for head in q_exact[m]],
            [Fraction(w) for w in case["weights"][m]],
            [[Fraction(x) for x in row] for row in k_exact[:seen]],
        )
        assert_within_twice_baseline(
            exact,
            got[m][:seen],
            base[m][:seen],
            FLOAT32_MANTISSA_BITS,
            f"index_scores query {m} at position {p} (ratio {case['ratio']}, sees {seen} rows, {case['dtype']})",
        )


def check_paged_within_rule(impl: Implementation, case: dict[str, Any]) -> None:
    """Each query's lanes j < lengths[b, t] against the exact scores of the rows its request's table names."""
    dtype = DTYPES[case["dtype"]]
    q = torch.tensor(case["q"], dtype=dtype)
    requests, next_n, _, dim = q.shape
    per_block = len(case["cache"][0]) if case["cache"] else 1
    cache = torch.tensor(case["cache"], dtype=dtype).reshape(len(case["cache"]), per_block, dim)
    weights = torch.tensor(case["weights"], dtype=torch.float32)
    table = torch.tensor(case["block_table"], dtype=torch.int32).reshape(requests, -1)
    lengths = torch.tensor(case["lengths"], dtype=torch.int32)
    out = impl.fn(*(x.to(impl.device) for x in (q, weights, cache, table, lengths)))
    shape = (requests * next_n, table.shape[1] * per_block)
    got = output_lanes(out, torch.float32, shape, "paged_index_scores output")
    for b, t in itertools.product(range(requests), range(next_n)):
        seen = case["lengths"][b][t]
        ids = [case["block_table"][b][j // per_block] for j in range(seen)]
        keys = cache[ids, [j % per_block for j in range(seen)]].reshape(seen, dim)
        exact = indexing.index_scores(
            [[Fraction(x) for x in head] for head in q[b, t].float().tolist()],
            [Fraction(w) for w in case["weights"][b][t]],
            [[Fraction(x) for x in row] for row in keys.float().tolist()],
        )
        assert_within_twice_baseline(
            exact,
            got[b * next_n + t][:seen],
            baseline(q[b, t : t + 1], weights[b, t : t + 1], keys)[0] if seen else [],
            FLOAT32_MANTISSA_BITS,
            f"paged_index_scores request {b} query {t} of {next_n} (sees {seen} rows, {per_block} a block, "
            f"table {case['block_table'][b]}, {case['dtype']})",
        )


LAB_27: dict[str, Any] = {
    "q": [[[1.0, 0.0], [0.0, 1.0]]],
    "weights": [[1.0, 2.0]],
    "k": [[2.0, 0.0], [0.0, 3.0], [1.0, 1.0], [-1.0, -2.0], [100.0, 100.0]],
    "positions": [7],
    "ratio": 2,
    "dtype": "float32",
}
"""Lab 27: heads (1, 0) and (0, 1) with weights 1 and 2 score the keys 2, 6, 3, 0 (and 300); the query at position
7 with ratio 2 sees 4 rows."""
LAB_27_DECODE = {
    **LAB_27,
    "q": [[[1.0, 0.0], [0.0, 1.0]]] * 2,
    "weights": [[1.0, 2.0]] * 2,
    "positions": [9, 7],
}
"""Lab 27's decode query at position 9 sees all five rows; a second request at position 7 sees four."""

PROPERTIES = [
    Property(
        "index_scores_prefill",
        "index_scores",
        index_score_cases("prefill"),
        check_within_rule,
        examples=(LAB_27,),
        doc="a prefill chunk: query at position p has lanes j < floor((p + 1) / r) within twice the torch error",
    ),
    Property(
        "index_scores_decode",
        "index_scores",
        index_score_cases("decode"),
        check_within_rule,
        examples=(LAB_27_DECODE,),
        doc="decode, one query per request at its own position: lanes j < floor((p + 1) / r) within the rule",
    ),
    Property(
        "paged_index_scores_decode",
        "paged_index_scores",
        paged_score_cases("decode"),
        check_paged_within_rule,
        doc="one query a request through its block table: lanes j < lengths[b] within twice the torch error; "
        "zero lengths, garbage table entries and cache rows past what is read",
    ),
    Property(
        "paged_index_scores_next_n",
        "paged_index_scores",
        paged_score_cases("next_n"),
        check_paged_within_rule,
        doc="2 or 3 speculative queries a request, each with its own count of rows: lanes j < lengths[b, t] "
        "within the rule",
    ),
]
