"""Properties of sparse_attention_bf16: bf16 q and kv at D = dv = 512, each probability rounded to bf16 once
before ``p @ v`` as FlashMLA-style kernels do, equal the exact attention within the rule of its own precision
(docs/cache-properties.md).

out: within twice the worst error of two torch evaluations that round the probabilities to bf16 once (f32 scores,
sums and accumulation; plain and reversed stepwise, ``faulty_attention.bf16_baselines``), or ``ULP_FLOOR`` ulps
at ``BF16_OUT_MANTISSA`` fraction bits of the lane's magnitude (``term_scales``), or what flushing subnormals to
zero moves the lane by (``flush_scales``). lse: sparse_attention's float32 rule, since the sums keep the unrounded
probabilities.

Scores are bf16 values (``strategies.BF16_SCORE_BOUND``), so where a kernel rounds them does not matter; the
probabilities' rounding is what the rule is sized for.
"""

from __future__ import annotations

from typing import Any

import torch

from properties.cache.checks import HUNT_EXAMPLES
from properties.cache.common import BF16_DIMS, AttentionCall, attention_convention
from properties.cache.faulty_attention import bf16_baselines, flush_scales
from properties.cache.frozen import BF16_SUBNORMAL_PROBABILITY
from properties.cache.props_attention import call_unchanged, compare_with_exact
from properties.cache.strategies import bf16_attention_examples, out_of_range_lane
from properties.registry import Implementation
from properties.runner import Property

BF16_OUT_MANTISSA = 8
"""out's ulp floor: ``ULP_FLOOR`` ulps at 8 fraction bits, more than 2^-7 and at most 2^-6 of the lane's magnitude
``sum_j p_j |v_j| / (e^sink + sum_j p_j)``. Rounding each probability to bf16 moves a lane by at most 2^-8 of it,
and rounding the product ``p @ v`` to bf16 (torch's bf16 matmul) by at most 2^-8 more: both fit; probabilities
in e4m3, a wrong row, a lost rescale or sink do not."""

FLOAT32_SMALLEST_NORMAL = 2.0**-126
"""out's absolute floor is this times ``faulty_attention.flush_scales``: kernels may flush subnormal
probabilities and products to zero (``ex2.approx.ftz``, bf16 matmuls)."""


def key_rows(seed: int, n: int) -> torch.Tensor:
    """The example's cache, f32[n, 512]: values on the 1/4 grid within +-2 (bf16 values) from ``seed``."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-8, 9, (n, BF16_DIMS), generator=g).float() / 4


def query_rows(example: dict[str, Any]) -> torch.Tensor:
    """The example's sparse query heads as f32[M, H, 512]."""
    q = torch.zeros(len(example["q"]), len(example["q"][0]), BF16_DIMS)
    for r, heads in enumerate(example["q"]):
        for h, pairs in enumerate(heads):
            for position, value in pairs:
                q[r, h, position] = value
    return q


def lanes_for(example: dict[str, Any], convention: str) -> list[list[int]]:
    """The index rows under ``convention``: out-of-range lanes become -1 under minus_one_only; an empty row's
    lanes are -1, under out_of_range alternately -1 and past the end."""
    invalid, _ = attention_convention(convention)
    n = example["n"]
    rows = []
    for m, row in enumerate(example["lanes"]):
        if m in example["empty"]:
            rows.append([-1 if invalid == "minus_one_only" or p % 2 == 0 else n + p for p in range(len(row))])
            continue
        rows.append(
            [
                value
                if kind == "valid"
                else -1
                if kind == "minus_one" or invalid == "minus_one_only"
                else out_of_range_lane(value, n)
                for kind, value in row
            ]
        )
    return rows


def check_matches_reference(impl: Implementation, example: dict[str, Any]) -> None:
    """Call the implementation on the example's bf16 tensors; out and lse within the rule of this module, every
    input unchanged."""
    convention = impl.convention or ""
    lanes = lanes_for(example, convention)
    m, heads = len(example["q"]), len(example["q"][0])
    q = query_rows(example).to(device=impl.device, dtype=torch.bfloat16)
    kv = key_rows(example["kv_seed"], example["n"]).to(device=impl.device, dtype=torch.bfloat16)
    indices = torch.tensor(lanes, dtype=torch.int32, device=impl.device).reshape(m, -1)
    sink = torch.tensor(example["sinks"], dtype=torch.float32, device=impl.device)
    tensors = {"q": q, "kv": kv, "indices": indices, "sink": sink}
    out, lse = call_unchanged(impl, tensors, (m, heads, BF16_DIMS), scale=example["scale"], dv=BF16_DIMS)
    call = AttentionCall(q, kv, indices, sink, example["scale"], BF16_DIMS, convention)
    context = f" (lanes {lanes}, sinks {example['sinks']}, scale {example['scale']}, bf16 probabilities)"
    floor = [FLOAT32_SMALLEST_NORMAL * f for f in flush_scales(call)]
    runs = bf16_baselines(call)
    compare_with_exact(call, out, lse, context, runs=runs, out_mantissa=BF16_OUT_MANTISSA, out_floor=floor)


PROPERTIES = [
    Property(
        "bf16_attention_matches_reference",
        "sparse_attention_bf16",
        bf16_attention_examples(),
        check_matches_reference,
        doc="out within twice the error of torch rounding the probabilities to bf16 once (floor: 2^-7 to 2^-6 of "
        "the lane's magnitude), lse within twice the float32 error, of the exact reference; rows of up to 140 "
        "lanes over up to 200 cache rows, -1 and out-of-range lanes, sinks finite or +-inf, scores up to one-hot",
        examples=(BF16_SUBNORMAL_PROBABILITY,),
        hunt_examples=HUNT_EXAMPLES,
    ),
    Property(
        "bf16_attention_empty_rows",
        "sparse_attention_bf16",
        bf16_attention_examples(empty_rows=True),
        check_matches_reference,
        doc="a row with no valid lane gives out 0 and lse +inf (empty_zero) or NaN and NaN (empty_nan), next to "
        "ordinary rows, also with an empty cache",
        hunt_examples=HUNT_EXAMPLES,
    ),
]
