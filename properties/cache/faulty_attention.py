"""Sparse MQA attention with a sink in torch eager, float32: a tiled online-softmax implementation with switches
that each plant one realistic bug (the mutants' base), and the same-precision baselines the comparison rule uses;
sparse_attention_bf16's twin (bf16 probabilities, ``tiled_bf16_attention``) and baselines beside them.

The tiled version walks the lanes ``TILE`` at a time (in at most ``MAX_TILES`` tiles: a long row takes wider
tiles, as a kernel's tiles of a 1024-lane row are), keeping a running maximum, sum and output as flash kernels
do; a tile whose lanes are all invalid leaves the running maximum at -inf, which the correct version guards.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch

from properties.cache.common import AttentionCall, attention_convention, check_bf16_attention
from properties.ladder import ladder

TILE = 4
MAX_TILES = 16
"""Each tile rescales the running output once, one rounding each: 257 tiles of 4 over 1025 lanes would round
more often than any kernel does."""
NEG_INF = float("-inf")


@dataclass(frozen=True)
class AttentionBugs:
    """One planted bug per switch; the default is the correct implementation."""

    sink: Literal["once", "dropped", "twice", "in_lse"] = "once"
    minus_one_wraps: bool = False  # lane -1 gathers row N-1 (negative indexing) and counts as valid
    stop_at_minus_one: bool = False  # the first -1 ends the row, as if valid lanes always came first
    unguarded_tile: bool = False  # no guard for an all-invalid tile: exp(-inf - (-inf)) poisons the row with NaN
    empty_nan_under_zero: bool = False  # an empty row gives NaN even under the empty_zero convention
    invalid_score_zero: bool = False  # invalid lanes masked to score 0 (not -inf): each still weighs e^0
    clamp_out_of_range: bool = False  # lanes >= N clamped to row N-1 instead of skipped
    sink_exponent_clamp: float | None = None  # sink - m clamped to this before exp, to keep e^{sink - m} finite
    dim_past_tile: bool = False  # the dot products stop at the dim ladder's tile (``properties.ladder``)


NO_BUGS = AttentionBugs()


def _validate(
    q: torch.Tensor, kv: torch.Tensor, indices: torch.Tensor, sink: torch.Tensor, dv: int, invalid: str
) -> None:
    if q.dim() != 3 or kv.dim() != 2 or q.shape[2] != kv.shape[1]:
        raise ValueError(f"q, kv: must be [M, H, D] and [N, D], got {list(q.shape)} and {list(kv.shape)}")
    if indices.dim() != 2 or indices.shape[0] != q.shape[0] or indices.dtype != torch.int32:
        raise ValueError(f"indices: must be i32[{q.shape[0]}, K], got {indices.dtype}{list(indices.shape)}")
    if sink.shape != (q.shape[1],):
        raise ValueError(f"sink: must be f32[{q.shape[1]}], got {list(sink.shape)}")
    if not 1 <= dv <= q.shape[2]:
        raise ValueError(f"dv: must be in [1, {q.shape[2]}], got {dv}")
    if invalid == "minus_one_only":
        lanes = indices.to(torch.int64)
        wrong = (lanes != -1) & ((lanes < 0) | (lanes >= kv.shape[0]))
        if wrong.any():
            raise ValueError(f"indices: under minus_one_only every lane is -1 or in [0, {kv.shape[0]})")


def _lanes(indices: torch.Tensor, n: int, invalid: str, bugs: AttentionBugs) -> tuple[torch.Tensor, torch.Tensor]:
    """(row gathered for each lane, whether the lane counts)."""
    lanes = indices.to(torch.int64)
    if bugs.clamp_out_of_range:
        lanes = torch.where(lanes >= n, n - 1, lanes)
    if invalid == "out_of_range":
        valid = (lanes >= 0) & (lanes < n)
    else:
        valid = lanes != -1
    if bugs.minus_one_wraps:
        valid = valid | ((lanes == -1) & (n > 0))
        lanes = torch.where(lanes == -1, n - 1, lanes)
    if bugs.stop_at_minus_one:
        valid = valid & (torch.cumprod((lanes != -1).to(torch.int64), dim=1) > 0)
    return torch.where(valid, lanes, 0), valid


def _scores(
    q: torch.Tensor, kv: torch.Tensor, rows: torch.Tensor, scale: float, dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scores [M, H, K] and gathered cache rows [M, K, D], in ``dtype``."""
    kv32 = kv.to(dtype)
    if kv32.shape[0] == 0:
        gathered = torch.zeros((*rows.shape, kv32.shape[1]), dtype=dtype, device=kv.device)
    else:
        gathered = kv32[rows]
    return scale * torch.einsum("mhd,mkd->mhk", q.to(dtype), gathered), gathered


def _finish(
    acc: torch.Tensor,
    total: torch.Tensor,
    top: torch.Tensor,
    sink: torch.Tensor,
    empty: torch.Tensor,
    empty_row: str,
    bugs: AttentionBugs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Divide by the sum plus the sink, take lse, apply the empty-row convention."""
    safe_top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    exponent = sink.to(top.dtype)[None, :] - safe_top
    if bugs.sink_exponent_clamp is not None:
        exponent = torch.where(torch.isfinite(exponent), exponent.clamp(max=bugs.sink_exponent_clamp), exponent)
    sink_weight = torch.exp(exponent)
    factor = {"once": 1.0, "dropped": 0.0, "twice": 2.0, "in_lse": 1.0}[bugs.sink]
    out = acc / (total + factor * sink_weight)[..., None]
    lse = safe_top + torch.log(total + (sink_weight if bugs.sink == "in_lse" else 0.0))
    empty = empty[:, None].expand_as(lse)
    if empty_row == "nan" or bugs.empty_nan_under_zero:
        out = torch.where(empty[..., None], float("nan"), out)
        lse = torch.where(empty, float("nan"), lse)
    else:
        out = torch.where(empty[..., None], 0.0, out)
        lse = torch.where(empty, float("inf"), lse)
    return out, lse


def tiled_attention(
    q: torch.Tensor,
    kv: torch.Tensor,
    indices: torch.Tensor,
    sink: torch.Tensor,
    *,
    scale: float,
    dv: int,
    convention: str,
    tile: int | None = None,
    bugs: AttentionBugs = NO_BUGS,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Online softmax over tiles of ``tile`` lanes (default ``TILE``, wider where that makes more than
    ``MAX_TILES`` tiles); returns (out f32[M, H, dv], lse f32[M, H]). It runs in float64 and rounds once: as the
    mutants' host and their unmutated control it shows the properties' mechanics (each planted bug, not float32
    rounding, is what a property must see); an online softmax's float32 error is judged on the kernels
    themselves, and in float32 this twin's own tile rescaling can exceed the four-ulp floor."""
    invalid, empty_row = attention_convention(convention)
    _validate(q, kv, indices, sink, dv, invalid)
    rows, valid = _lanes(indices, kv.shape[0], invalid, bugs)
    f64 = torch.float64
    scores, gathered = _scores(q, kv, rows, scale, f64)
    if bugs.dim_past_tile:
        cut = ladder("dim").tile
        scores = _scores(q[..., :cut], kv[:, :cut], rows, scale, f64)[0]
    fill = 0.0 if bugs.invalid_score_zero else NEG_INF
    scores = scores.masked_fill(~valid[:, None, :], fill)
    m, h = scores.shape[:2]
    if tile is None:
        tile = max(TILE, -(-scores.shape[2] // MAX_TILES))
    top = torch.full((m, h), NEG_INF, dtype=f64, device=q.device)
    total = torch.zeros((m, h), dtype=f64, device=q.device)
    acc = torch.zeros((m, h, dv), dtype=f64, device=q.device)
    for start in range(0, scores.shape[2], tile):
        block = scores[..., start : start + tile]
        new_top = torch.maximum(top, block.amax(-1))
        shift = new_top if bugs.unguarded_tile else torch.where(torch.isinf(new_top), 0.0, new_top)
        rescale = torch.exp(top - shift)
        weights = torch.exp(block - shift[..., None])
        values = gathered[:, start : start + tile, :dv]
        total = total * rescale + weights.sum(-1)
        acc = acc * rescale[..., None] + torch.einsum("mhk,mkd->mhd", weights, values)
        top = new_top
    counted = valid if not bugs.invalid_score_zero else torch.ones_like(valid)
    empty = ~counted.any(dim=1)
    out, lse = _finish(acc, total, top, sink, empty, empty_row, bugs)
    return out.float(), lse.float()


def dense_attention(
    call: AttentionCall,
    *,
    reverse: bool = False,
    stepwise: bool = False,
    dtype: torch.dtype = torch.float32,
    probabilities: torch.dtype | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One softmax over all lanes at once, in ``dtype`` (float32: a same-precision baseline; float64: the
    oracle of large shapes); lanes reversed first if ``reverse``. ``stepwise`` forms each weight as an online
    kernel does, ``e^{s_j - m_j} * e^{m_j - m}`` with ``m_j`` the running maximum. ``probabilities`` (bf16: the
    baseline of sparse_attention_bf16): ``e^{s_j - m}`` (stepwise: ``e^{s_j - m_j}``) rounded to it once before
    ``p @ v``; the sum, hence the denominator and lse, keeps the unrounded weights."""
    q, kv, indices, sink, scale, dv = call.q, call.kv, call.indices, call.sink, call.scale, call.dv
    invalid, empty_row = attention_convention(call.convention)
    _validate(q, kv, indices, sink, dv, invalid)
    if reverse:
        indices = indices.flip(1)
    rows, valid = _lanes(indices, kv.shape[0], invalid, NO_BUGS)
    scores, gathered = _scores(q, kv, rows, scale, dtype)
    scores = scores.masked_fill(~valid[:, None, :], NEG_INF)
    if scores.shape[2] == 0:
        top = torch.full(scores.shape[:2], NEG_INF, dtype=dtype, device=q.device)
    else:
        top = scores.amax(-1)
    safe_top = torch.where(torch.isinf(top), 0.0, top)
    if stepwise and scores.shape[2]:
        running = torch.cummax(scores, dim=-1).values
        running = torch.where(torch.isinf(running), 0.0, running)
        local, carry = torch.exp(scores - running), torch.exp(running - safe_top[..., None])
    else:
        local, carry = torch.exp(scores - safe_top[..., None]), torch.ones((), dtype=dtype, device=q.device)
    weights = local * carry
    rounded = local if probabilities is None else local.to(probabilities).to(dtype)
    acc = torch.einsum("mhk,mkd->mhd", rounded * carry, gathered[..., :dv])
    return _finish(acc, weights.sum(-1), top, sink, ~valid.any(dim=1), empty_row, NO_BUGS)


def baselines(call: AttentionCall) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Two same-precision evaluations: plain weights in lane order, stepwise weights in reversed lane order.

    The comparison rule takes, lane by lane, the worst of their errors as what float32 torch can be off by.
    """
    return [dense_attention(call), dense_attention(call, reverse=True, stepwise=True)]


def bf16_baselines(call: AttentionCall) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``baselines`` with each probability rounded to bf16 once before ``p @ v`` (f32 scores, sums and
    accumulation): sparse_attention_bf16's same-precision evaluations."""
    return [
        dense_attention(call, probabilities=torch.bfloat16),
        dense_attention(call, reverse=True, stepwise=True, probabilities=torch.bfloat16),
    ]


def term_scales(call: AttentionCall) -> tuple[list[float], list[float]]:
    """Per lane, the magnitude float32 rounding is proportional to, in float64: ``sum_j w_j |v_j| / denominator``
    for out (its terms may cancel to far less); for lse = m + ln sum_j w_j, ``max(|m|, |ln sum_j w_j|, 1)``: the
    logarithm turns the relative error of the sum into an absolute one, which does not shrink with ``ln``."""
    q, kv, indices, sink, scale, dv = call.q, call.kv, call.indices, call.sink, call.scale, call.dv
    invalid, _ = attention_convention(call.convention)
    rows, valid = _lanes(indices, kv.shape[0], invalid, NO_BUGS)
    kv64 = kv.to(torch.float64)
    gathered = (
        kv64[rows]
        if kv64.shape[0]
        else torch.zeros((*rows.shape, kv64.shape[1]), dtype=torch.float64, device=kv.device)
    )
    scores = scale * torch.einsum("mhd,mkd->mhk", q.to(torch.float64), gathered)
    scores = scores.masked_fill(~valid[:, None, :], NEG_INF)
    top = (
        scores.amax(-1)
        if scores.shape[2]
        else torch.full(scores.shape[:2], NEG_INF, dtype=torch.float64, device=scores.device)
    )
    safe_top = torch.where(torch.isinf(top), 0.0, top)
    weights = torch.exp(scores - safe_top[..., None])
    total = weights.sum(-1)
    denominator = total + torch.exp(sink.to(torch.float64)[None, :] - safe_top)
    magnitude = torch.einsum("mhk,mkd->mhd", weights, gathered[..., :dv].abs()) / denominator[..., None]
    lse = torch.maximum(torch.maximum(safe_top.abs(), torch.log(total).abs()), torch.ones_like(total))
    finite = lambda t: torch.where(torch.isfinite(t), t, 0.0).reshape(-1).tolist()  # noqa: E731
    return finite(magnitude), finite(lse)


def flush_scales(call: AttentionCall) -> list[float]:
    """Per out lane, in float64, ``1 + (1 + sum_j |v_j|) / (e^{sink - m} + sum_j e^{s_j - m})``: times float32's
    smallest normal 2^-126, a bound on what flushing subnormal probabilities, a subnormal ``p @ v`` and a subnormal
    result (a sink that outweighs every lane) to zero (as approximate exponentials and bf16 products do) moves the
    lane by."""
    q, kv, indices, sink, scale, dv = call.q, call.kv, call.indices, call.sink, call.scale, call.dv
    invalid, _ = attention_convention(call.convention)
    rows, valid = _lanes(indices, kv.shape[0], invalid, NO_BUGS)
    scores, gathered = _scores(q, kv, rows, scale, torch.float64)
    scores = scores.masked_fill(~valid[:, None, :], NEG_INF)
    top = (
        scores.amax(-1)
        if scores.shape[2]
        else torch.full(scores.shape[:2], NEG_INF, dtype=torch.float64, device=scores.device)
    )
    safe_top = torch.where(torch.isinf(top), 0.0, top)
    denominator = torch.exp(scores - safe_top[..., None]).sum(-1) + torch.exp(
        sink.to(torch.float64)[None, :] - safe_top
    )
    values = (gathered[..., :dv].abs() * valid[..., None]).sum(1)
    flushed = 1 + (1 + values[:, None, :]) / denominator[..., None]
    return torch.where(torch.isfinite(flushed), flushed, 0.0).reshape(-1).tolist()  # type: ignore[no-any-return]


def attention_with(bugs: AttentionBugs, convention: str) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """The tiled implementation with ``bugs`` planted, as a contract-shaped callable for ``convention``."""
    return functools.partial(tiled_attention, convention=convention, bugs=bugs)


def float64_attention(convention: str) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """The large shapes' oracle (``dense_attention`` in float64) as a contract-shaped callable, its results
    rounded to float32: ``test_support.py`` runs every attention property on it against the exact reference."""

    def attention(
        q: torch.Tensor, kv: torch.Tensor, indices: torch.Tensor, sink: torch.Tensor, *, scale: float, dv: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        call = AttentionCall(q, kv, indices, sink, scale, dv, convention)
        out, lse = dense_attention(call, dtype=torch.float64)
        return out.to(torch.float32), lse.to(torch.float32)

    return attention


BF16_TILE = 32
"""Lanes a tile of the bf16 twin: a warp-specialized kernel's smaller tile, so rows past 32 lanes cross tiles."""


@dataclass(frozen=True)
class Bf16Bugs:
    """One planted bug per switch of ``tiled_bf16_attention``; the default is the correct implementation."""

    sink_in_lse: bool = False  # the sink folded into lse as well as into the denominator
    max_not_subtracted: bool = False  # p = e^s in float32: no running maximum subtracted (e^s overflows past 88)
    stale_tile: bool = False  # p @ v reads the previous tile's rows: a ring stage refilled before its reader ran
    unscaled_accumulator: bool = False  # the accumulator not rescaled by e^{m_old - m_new} when the maximum grows
    fp8_probabilities: bool = False  # probabilities rounded to e4m3 instead of bf16


NO_BF16_BUGS = Bf16Bugs()


def tiled_bf16_attention(
    q: torch.Tensor,
    kv: torch.Tensor,
    indices: torch.Tensor,
    sink: torch.Tensor,
    *,
    scale: float,
    dv: int,
    convention: str,
    bugs: Bf16Bugs = NO_BF16_BUGS,
) -> tuple[torch.Tensor, torch.Tensor]:
    """sparse_attention_bf16 as a FlashMLA-style kernel runs it: ``BF16_TILE`` lanes at a time, a running
    maximum ``m``, each tile's ``e^{s - m}`` rounded to bf16 once before ``p @ v``, the running sum of the
    unrounded ones. Scores, sums and the accumulator are float64, rounded once to f32 at the end, so that the
    probabilities' rounding (and a planted bug) is all that moves it off the exact result."""
    check_bf16_attention(q, kv, dv)
    invalid, empty_row = attention_convention(convention)
    _validate(q, kv, indices, sink, dv, invalid)
    rows, valid = _lanes(indices, kv.shape[0], invalid, NO_BUGS)
    f64 = torch.float64
    scores, gathered = _scores(q, kv, rows, scale, f64)
    scores = scores.masked_fill(~valid[:, None, :], NEG_INF)
    m, h = scores.shape[:2]
    top = torch.full((m, h), NEG_INF, dtype=f64, device=q.device)
    # the running maximum starts at -inf, as the kernels' does, so that the first rescale is e^{-inf} = 0: from 0,
    # e^{0 - m} overflows for a first maximum below -709 and 0 x inf poisons the sums (0 under the bug that never
    # subtracts a maximum, whose shift stays put)
    shift = torch.full((m, h), 0.0 if bugs.max_not_subtracted else NEG_INF, dtype=f64, device=q.device)
    total = torch.zeros((m, h), dtype=f64, device=q.device)
    acc = torch.zeros((m, h, dv), dtype=f64, device=q.device)
    rounding = torch.float8_e4m3fn if bugs.fp8_probabilities else torch.bfloat16
    for start in range(0, scores.shape[2], BF16_TILE):
        block = scores[..., start : start + BF16_TILE]
        top = torch.maximum(top, block.amax(-1))
        new_shift = shift if bugs.max_not_subtracted else torch.where(torch.isinf(top), 0.0, top)
        rescale = torch.exp(shift - new_shift)
        if bugs.max_not_subtracted:
            local = torch.exp(block.float()).to(f64)
        else:
            local = torch.exp(block - new_shift[..., None])
        rounded = local.float().to(rounding).to(f64)
        first = max(0, start - BF16_TILE) if bugs.stale_tile else start
        values = gathered[:, first : first + block.shape[2], :dv]
        total = total * rescale + local.sum(-1)
        kept = acc if bugs.unscaled_accumulator else acc * rescale[..., None]
        acc = kept + torch.einsum("mhk,mkd->mhd", rounded, values)
        shift = new_shift
    sink_rule = AttentionBugs(sink="in_lse" if bugs.sink_in_lse else "once")
    out, lse = _finish(acc, total, shift, sink, ~valid.any(dim=1), empty_row, sink_rule)
    return out.float(), lse.float()


def bf16_attention_with(bugs: Bf16Bugs, convention: str) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """The bf16 twin with ``bugs`` planted, as a contract-shaped callable for ``convention``."""
    return functools.partial(tiled_bf16_attention, convention=convention, bugs=bugs)
