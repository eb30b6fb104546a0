"""Properties of sparse_attention: the exact reference within the twice-torch rule, lane order, invalid lanes per
convention anywhere in a row, both empty-row conventions, the sink applied exactly once (docs/cache-properties.md).

The allowed error of a lane is twice the worst error of two same-precision (float32) torch evaluations on that
lane (``properties.cache.faulty_attention.baselines``), or ``compare.ULP_FLOOR`` ulps of the magnitude the lane's
rounding is proportional to (``term_scales``: the sum of the terms' magnitudes, where they cancel).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import torch

from properties.cache.checks import HUNT_EXAMPLES
from properties.cache.common import (
    AttentionCall,
    attention_convention,
    exact_attention,
    to_float,
)
from properties.cache.faulty_attention import baselines, term_scales
from properties.cache.frozen import CANCELLING_OUT, LSE_NEAR_ONE
from properties.cache.strategies import attention_examples, f32, mix, out_of_range_lane
from properties.compare import Mismatch, assert_within_twice_baseline, errors
from properties.registry import Implementation
from properties.runner import Property

FLOAT32_MANTISSA = 23
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def _invalid_lane(invalid: str, n: int, position: int) -> int:
    """The invalid lane a forced position gets: -1, or under out_of_range alternately -1 and past the end."""
    return -1 if invalid == "minus_one_only" or position % 2 == 0 else n + position


def lanes_for(example: dict[str, Any], convention: str) -> list[list[int]]:
    """The index rows of an example under ``convention`` (out-of-range lanes become -1 under minus_one_only)."""
    invalid, _ = attention_convention(convention)
    n = len(example["kv"])
    rows = []
    for m, row in enumerate(example["lanes"]):
        lanes = []
        for position, (kind, value) in enumerate(row):
            if m in example["empty"] or position < example["leading"]:
                lanes.append(_invalid_lane(invalid, n, position))
            elif kind == "valid":
                lanes.append(value)
            elif kind == "minus_one" or invalid == "minus_one_only":
                lanes.append(-1)
            else:
                lanes.append(out_of_range_lane(value, n))
        rows.append(lanes)
    return rows


def permuted(lanes: list[list[int]], seed: int) -> list[list[int]]:
    """Each row shuffled (Fisher-Yates driven by ``mix``)."""
    out = []
    for m, row in enumerate(lanes):
        row = list(row)
        for i in range(len(row) - 1, 0, -1):
            j = mix(seed, m * 64 + i) % (i + 1)
            row[i], row[j] = row[j], row[i]
        out.append(row)
    return out


def _lse64(example: dict[str, Any], lanes: list[int], head: int) -> float:
    """A float64 estimate of one head's lse on one row (0 for an empty row): where a sink matters most."""
    n = len(example["kv"])
    q = example["q"][0][head]
    scores = [
        example["scale"] * sum(a * b for a, b in zip(q, example["kv"][j], strict=True)) for j in lanes if 0 <= j < n
    ]
    if not scores:
        return 0.0
    top = max(scores)
    return top + math.log(sum(math.exp(s - top) for s in scores))


def sinks_for(example: dict[str, Any], lanes: list[list[int]]) -> list[float]:
    """The sink of each head: as drawn, or the first row's lse plus the drawn offset."""
    offsets = example["sink_offsets"]
    if offsets is None:
        return [float(s) for s in example["sinks"]]
    return [o if math.isinf(o) else f32(_lse64(example, lanes[0], h) + o) for h, o in enumerate(offsets)]


def _worst(exact: list[Any], candidates: list[list[float]]) -> list[float]:
    """Lane by lane, the candidate value farthest from the exact one (ignoring NaN disagreements)."""
    worst = list(candidates[0])
    worst_err = [e if math.isfinite(e) else -1.0 for e in errors(exact, worst)]
    for values in candidates[1:]:
        for i, err in enumerate(errors(exact, values)):
            if math.isfinite(err) and err > worst_err[i]:
                worst[i], worst_err[i] = values[i], err
    return worst


def _flat(x: torch.Tensor) -> list[float]:
    values: list[float] = x.detach().to(torch.float32).cpu().reshape(-1).tolist()
    return values


def run_attention(impl: Implementation, example: dict[str, Any], lanes: list[list[int]]) -> None:
    """Call the implementation on ``lanes`` and compare out and lse with the exact reference."""
    convention = impl.convention or ""
    dtype = DTYPES[example["dtype"]]
    heads, d, dv = len(example["q"][0]), len(example["q"][0][0]), example["dv"]
    m = len(example["q"])
    sinks = sinks_for(example, lanes)
    q = torch.tensor(example["q"], dtype=dtype, device=impl.device)
    kv = torch.tensor(example["kv"], dtype=dtype, device=impl.device).reshape(len(example["kv"]), d)
    indices = torch.tensor(lanes, dtype=torch.int32, device=impl.device).reshape(m, -1)
    sink = torch.tensor(sinks, dtype=torch.float32, device=impl.device)
    tensors = {"q": q, "kv": kv, "indices": indices, "sink": sink}
    out, lse = call_unchanged(impl, tensors, (m, heads, dv), scale=example["scale"], dv=dv)
    call = AttentionCall(q, kv, indices, sink, example["scale"], dv, convention)
    compare_with_exact(call, out, lse, f" (lanes {lanes}, sinks {sinks}, {example['dtype']})")


def attention_results(op: str, result: object, shape: tuple[int, int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(out, lse)`` as the contract returns them, f32[M, H, dv] and f32[M, H] for ``shape`` (M, H, dv); a
    Mismatch naming ``op`` otherwise."""
    if not (isinstance(result, tuple | list) and len(result) == 2):
        raise Mismatch(op, detail=f"must return (out, lse), got {type(result).__name__}")
    for name, tensor, want in (("out", result[0], shape), ("lse", result[1], shape[:2])):
        if not isinstance(tensor, torch.Tensor) or tensor.dtype != torch.float32 or tuple(tensor.shape) != want:
            got = f"{tensor.dtype}{list(tensor.shape)}" if isinstance(tensor, torch.Tensor) else type(tensor).__name__
            raise Mismatch(op, detail=f"{name} must be f32{list(want)}, got {got}")
    return result[0], result[1]


def call_unchanged(
    impl: Implementation, tensors: dict[str, torch.Tensor], shape: tuple[int, int, int], **settings: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """Call ``impl`` on copies of ``tensors`` (in the contract's order); its ``(out, lse)`` of ``shape`` (M, H,
    dv), each input holding the same values after the call."""
    inputs = [t.clone() for t in tensors.values()]
    result = attention_results(impl.op, impl.fn(*inputs, **settings), shape)
    for (name, before), after in zip(tensors.items(), inputs, strict=True):
        if not torch.equal(before, after):
            raise Mismatch(impl.op, detail=f"the call modified its input {name}")
    return result


def compare_with_exact(
    call: AttentionCall,
    out: torch.Tensor,
    lse: torch.Tensor,
    context: str,
    *,
    runs: list[tuple[torch.Tensor, torch.Tensor]] | None = None,
    out_mantissa: int = FLOAT32_MANTISSA,
    out_floor: list[float] | None = None,
) -> None:
    """out and lse against the exact attention of ``call`` under the twice-torch rule of this module: the
    baselines ``runs`` (default ``baselines(call)``), out's ulp floor at ``out_mantissa`` fraction bits and its
    absolute ``out_floor`` per lane, if any."""
    exact_out: list[Fraction | float] = []
    exact_lse: list[Fraction | float] = []
    for heads_result in exact_attention(call):
        for head in heads_result:
            exact_out.extend(v if isinstance(v, Fraction) else to_float(v) for v in head.out)
            exact_lse.append(head.lse if isinstance(head.lse, Fraction) else to_float(head.lse))
    runs = baselines(call) if runs is None else runs
    out_scale, lse_scale = term_scales(call)
    for name, exact, got, baseline, scale, mantissa, floor in (
        ("out", exact_out, out, [o for o, _ in runs], out_scale, out_mantissa, out_floor),
        ("lse", exact_lse, lse, [s for _, s in runs], lse_scale, FLOAT32_MANTISSA, None),
    ):
        worst = _worst(exact, [_flat(b) for b in baseline])
        assert_within_twice_baseline(exact, _flat(got), worst, mantissa, name + context, scale=scale, floor=floor)


def check_matches_reference(impl: Implementation, example: dict[str, Any]) -> None:
    run_attention(impl, example, lanes_for(example, impl.convention or ""))


def check_lane_order(impl: Implementation, example: dict[str, Any]) -> None:
    """The call with each row's lanes shuffled, then reversed: both within the rule of the (order-free) exact
    result, so valid lanes first, -1 lanes first and any mixture are all handled."""
    lanes = lanes_for(example, impl.convention or "")
    shuffled = permuted(lanes, example["perm_seed"])
    run_attention(impl, example, shuffled)
    run_attention(impl, example, [row[::-1] for row in shuffled])


def _attention(name: str, strategy: Any, check: Any, doc: str, examples: tuple[Any, ...] = ()) -> Property:
    hunt = HUNT_EXAMPLES
    return Property(
        f"attention_{name}", "sparse_attention", strategy, check, examples=examples, doc=doc, hunt_examples=hunt
    )


PROPERTIES = [
    _attention(
        "matches_reference",
        attention_examples(),
        check_matches_reference,
        "out and lse equal the exact reference within twice the float32 torch error, f32 and bf16 inputs, "
        "sinks finite or +-inf, duplicate, -1 and out-of-range lanes",
        examples=(CANCELLING_OUT,),
    ),
    _attention(
        "lane_order",
        attention_examples(permutation=True),
        check_lane_order,
        "shuffling or reversing a row's lanes (invalid ones included) keeps the result on the exact value",
        examples=(LSE_NEAR_ONE,),
    ),
    _attention(
        "invalid_lanes_anywhere",
        attention_examples(invalid_share=3, leading_invalid=True),
        check_matches_reference,
        "-1 lanes (and under out_of_range, lanes < 0 or >= N) anywhere in a row, including a whole leading "
        "block of them, are skipped",
    ),
    _attention(
        "empty_rows",
        attention_examples(min_kv=0, empty_rows=True),
        check_matches_reference,
        "a row with no valid lane gives out 0 and lse +inf (empty_zero) or NaN and NaN (empty_nan), "
        "next to ordinary rows, also with an empty cache",
    ),
    _attention(
        "sink_once",
        attention_examples(sink_offsets=True),
        check_matches_reference,
        "sinks placed within a few units of the row's lse (and +-inf), where dropping the sink, adding it "
        "twice or folding it into lse moves the result far beyond the rule",
    ),
]
