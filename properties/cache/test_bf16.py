"""sparse_attention_bf16's machinery: its examples keep every score a bf16 value, its baselines round only the
probabilities, its adapters refuse calls off the signature by name, and its Triton kernel is registered only
where it compiles."""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import pytest
import torch
from hypothesis import given, settings

from properties.cache.common import BF16_DIMS, AttentionCall, check_bf16_attention
from properties.cache.faulty_attention import NO_BF16_BUGS, bf16_attention_with, bf16_baselines, dense_attention
from properties.cache.kernels import bf16_adapter
from properties.cache.props_bf16 import key_rows, lanes_for, query_rows
from properties.cache.strategies import BF16_SCORE_BOUND, bf16_attention_examples
from properties.devices import kernel_device
from properties.registry import Implementation, discover

CONVENTION = "out_of_range+empty_zero"


@settings(max_examples=30)
@given(bf16_attention_examples())
def test_every_score_is_a_bf16_value(example):  # type: ignore[no-untyped-def]
    q = query_rows(example).double()
    kv = key_rows(example["kv_seed"], example["n"]).double()
    scores = torch.einsum("mhd,nd->mhn", q, kv)
    assert bool((scores.abs() <= BF16_SCORE_BOUND).all())
    assert torch.equal(scores.float().to(torch.bfloat16).double(), scores)
    assert torch.equal(q.to(torch.bfloat16).double(), q) and torch.equal(kv.to(torch.bfloat16).double(), kv)


@settings(max_examples=10)
@given(bf16_attention_examples(empty_rows=True))
def test_empty_rows_have_no_valid_lane(example):  # type: ignore[no-untyped-def]
    for convention in ("minus_one_only+empty_zero", "out_of_range+empty_nan"):
        rows = lanes_for(example, convention)
        for m in example["empty"]:
            assert all(not 0 <= j < example["n"] for j in rows[m])
        if convention.startswith("minus_one_only"):
            assert all(j == -1 or 0 <= j < example["n"] for row in rows for j in row)


def _call() -> AttentionCall:
    g = torch.Generator().manual_seed(7)
    q = torch.zeros(2, 3, BF16_DIMS)
    q[:, :, :4] = torch.randint(-4, 5, (2, 3, 4), generator=g).float() / 4
    kv = torch.randint(-8, 9, (9, BF16_DIMS), generator=g).float() / 4
    indices = torch.tensor([[0, 3, -1, 8, 5, 5, 2], [7, 1, 4, 9, 6, -2, 0]], dtype=torch.int32)
    sink = torch.tensor([0.5, -math.inf, 2.0])
    return AttentionCall(q.bfloat16(), kv.bfloat16(), indices, sink, 0.5, BF16_DIMS, CONVENTION)


def test_the_baselines_round_only_the_probabilities() -> None:
    """The bf16 baselines' lse is the float32 baselines' (the sums keep the unrounded probabilities), and their out
    is the weighted sum of the probabilities rounded to bf16 over the float32 denominator."""
    call = _call()
    plain, stepwise = bf16_baselines(call)
    f32_out, f32_lse = dense_attention(call)
    assert torch.equal(plain[1], f32_lse)
    assert torch.equal(stepwise[1], dense_attention(call, reverse=True, stepwise=True)[1])
    valid = (call.indices >= 0) & (call.indices < call.kv.shape[0])
    rows = call.kv.float()[torch.where(valid, call.indices, 0).long()]
    scores = (call.scale * torch.einsum("mhd,mkd->mhk", call.q.float(), rows)).masked_fill(~valid[:, None], -math.inf)
    top = scores.amax(-1, keepdim=True)
    p = torch.exp(scores - top)
    by_hand = torch.einsum("mhk,mkd->mhd", p.bfloat16().float(), rows)
    by_hand = by_hand / (p.sum(-1) + torch.exp(call.sink[None, :] - top[..., 0]))[..., None]
    assert torch.equal(plain[0], by_hand)
    assert not torch.equal(plain[0], f32_out), "no probability was rounded: the case checks nothing"


def test_the_unmutated_twin_is_within_the_rounding_of_the_probabilities() -> None:
    call = _call()
    twin = bf16_attention_with(NO_BF16_BUGS, CONVENTION)
    out, lse = twin(call.q, call.kv, call.indices, call.sink, scale=call.scale, dv=BF16_DIMS)
    exact_out, exact_lse = dense_attention(call, dtype=torch.float64)
    magnitude = call.kv.double().abs().amax()
    assert bool(((out.double() - exact_out).abs() <= 2.0**-8 * magnitude).all())
    assert torch.allclose(lse.double(), exact_lse, rtol=2.0**-22, atol=0.0)


def _q(dtype: torch.dtype = torch.bfloat16, d: int = BF16_DIMS) -> torch.Tensor:
    return torch.zeros(1, 2, d, dtype=dtype)


REFUSALS: list[tuple[Callable[[], object], type[Exception], str]] = [
    (
        lambda: check_bf16_attention(_q(torch.float32), _q()[0], BF16_DIMS),
        ValueError,
        "q: must be bf16[M, H, 512], got torch.float32[1, 2, 512]",
    ),
    (
        lambda: check_bf16_attention(_q(d=64), _q(d=64)[0], 64),
        ValueError,
        "q: must be bf16[M, H, 512], got torch.bfloat16[1, 2, 64]",
    ),
    (
        lambda: check_bf16_attention(_q(), _q(torch.float32)[0], BF16_DIMS),
        ValueError,
        "kv: must be bf16[N, 512], got torch.float32[2, 512]",
    ),
    (
        lambda: check_bf16_attention(_q(), _q(), BF16_DIMS),
        ValueError,
        "kv: must be bf16[N, 512], got torch.bfloat16[1, 2, 512]",
    ),
    (
        lambda: check_bf16_attention(_q(), _q()[0], 256),
        ValueError,
        "dv: must be 512 (the whole row is the value), got 256",
    ),
    (lambda: check_bf16_attention(_q(), _q()[0], 512.0), TypeError, "dv: must be an int, got float"),
    (
        lambda: bf16_adapter("torch", CONVENTION)(
            _q(torch.float32),
            _q(torch.float32)[0],
            torch.zeros(1, 1, dtype=torch.int32),
            torch.zeros(2),
            scale=1.0,
            dv=BF16_DIMS,
        ),
        ValueError,
        "q: must be bf16[M, H, 512], got torch.float32[1, 2, 512]",
    ),
    (
        lambda: bf16_attention_with(NO_BF16_BUGS, CONVENTION)(
            _q(), _q()[0], torch.zeros(1, 1, dtype=torch.int32), torch.zeros(2), scale=1.0, dv=128
        ),
        ValueError,
        "dv: must be 512 (the whole row is the value), got 128",
    ),
]
"""Calls off the signature, the error each raises and its whole message."""


@pytest.mark.parametrize(("call", "error", "message"), REFUSALS)
def test_calls_off_the_signature_are_refused(call: Callable[[], object], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        call()


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_kernels_registered_where_they_run(backend: str) -> None:
    """The torch kernel for every convention; the Triton one only where it compiles (CUDA), not interpreted."""
    ids = {i.id for i in discover().find(op="sparse_attention_bf16", origin="fast")}
    registered = {
        c for c in ("minus_one_only+empty_zero", CONVENTION) if f"sparse_attention_bf16:cache_{backend}[{c}]" in ids
    }
    compiled = backend == "torch" or kernel_device("triton") is not None
    assert registered == ({"minus_one_only+empty_zero", CONVENTION} if compiled else set())


def test_a_sink_that_outweighs_every_lane_may_flush_out_to_zero() -> None:
    """A shape-ladder case (scale 64, one cache row) where the sink outweighs every lane: out is float32-subnormal
    (about 1e-39) and torch's bf16 path returns 0; the floor of ``flush_scales`` allows it (without its ``1 +``
    for a subnormal result, 923 lanes fail)."""
    from properties.cache import props_shapes
    from properties.cache.kernels import IMPLEMENTATIONS

    impl = next(i for i in IMPLEMENTATIONS if i.id == "sparse_attention_bf16:cache_torch[out_of_range+empty_nan]")
    layouts = dict.fromkeys(("q", "kv", "indices", "sink"), "contiguous")
    props_shapes.check_bf16(impl, {"rows": 3, "heads": 16, "lanes": 3, "seed": 1, "layouts": layouts})


def test_the_twin_takes_a_first_maximum_below_exp_range() -> None:
    """One lane scored -728, a sink of 0: the twin's rows stay finite (e^{728} overflows float64, so a running
    maximum that started at 0 rescaled its empty sums by inf and made them NaN) and equal the dense float64 result
    (e^{-728} of the value: 0 in float32)."""
    example = {"n": 1, "kv_seed": 0, "scale": 64.0, "q": [[[[257, 6.5]]]], "lanes": [[["valid", 0]]], "sinks": [0.0]}
    q = query_rows(example).to(torch.bfloat16)
    kv = key_rows(0, 1).to(torch.bfloat16)
    score = 64.0 * float(q[0, 0].double() @ kv[0].double())
    assert score < -709  # the example is the case it names
    indices = torch.zeros((1, 1), dtype=torch.int32)
    sink = torch.zeros(1)
    out, lse = bf16_attention_with(NO_BF16_BUGS, CONVENTION)(q, kv, indices, sink, scale=64.0, dv=BF16_DIMS)
    dense_out, dense_lse = dense_attention(AttentionCall(q, kv, indices, sink, 64.0, BF16_DIMS, CONVENTION),
                                           dtype=torch.float64)  # fmt: skip
    assert torch.equal(out, dense_out.float()) and torch.equal(lse, dense_lse.float()), (out[0, 0, :4], lse)


def _on_fp8_cache(kv_format: str, convention: str = CONVENTION) -> Implementation:
    """The torch twin behind ``bf16_adapter`` on a cache: the adapter's own logic (the store, its exactness check,
    the blocks) on any device; on an sm_90 GPU the registry runs the Gluon kernels behind it."""
    fn = bf16_adapter("torch", convention, kv_format=kv_format)
    return Implementation("sparse_attention_bf16", f"cache_torch_{kv_format}", fn, convention, device="cpu")


@pytest.mark.parametrize("kv_format", ["v41_fp8_528", "v4_584"])
@settings(max_examples=8, deadline=None)
@given(example=bf16_attention_examples(empty_rows=True))
def test_an_fp8_cache_holding_the_examples_rows_passes_the_properties(kv_format: str, example) -> None:  # type: ignore[no-untyped-def]
    """The properties' rows stored into an FP8 cache (blocks of the rows' largest power-of-two divisor, up to 64;
    an empty cache too) and attended there by the torch twin meet the bf16 rule: the adapter loses nothing that
    the judgment of the Gluon kernels on FP8 caches would then blame on them."""
    from properties.cache.props_bf16 import check_matches_reference

    for convention in ("minus_one_only+empty_nan", CONVENTION):
        check_matches_reference(_on_fp8_cache(kv_format, convention), example)


@pytest.mark.parametrize("kv_format", ["v41_fp8_528", "v4_584"])
@pytest.mark.parametrize("layout", ["transposed", "sliced"])
def test_an_fp8_cache_stores_rows_given_as_a_view(kv_format: str, layout: str) -> None:
    """kv as a non-contiguous view (the ladder properties pass one): the cache holds its values, so the call gives
    the contiguous rows' result, as the contract's rule 8 asks, not a refusal naming the store's own argument."""
    from properties.strided import view_of

    kv = (torch.arange(4 * BF16_DIMS).reshape(4, BF16_DIMS) % 17 - 8).float().div(4).bfloat16()
    indices = torch.tensor([[0, 3, 1, -1]], dtype=torch.int32)
    impl = _on_fp8_cache(kv_format)
    args = dict(scale=0.125, dv=BF16_DIMS)
    want = impl.fn(_q(), kv, indices, torch.zeros(2), **args)
    got = impl.fn(_q(), view_of(kv, layout), indices, torch.zeros(2), **args)
    assert not view_of(kv, layout).is_contiguous()
    assert all(torch.equal(w, g) for w, g in zip(want, got, strict=True))


@pytest.mark.parametrize("kv_format", ["v41_fp8_528", "v4_584"])
def test_an_fp8_cache_refuses_rows_it_would_not_hold(kv_format: str) -> None:
    kv = torch.full((3, BF16_DIMS), 1 / 3).bfloat16()
    impl = _on_fp8_cache(kv_format)
    with pytest.raises(ValueError, match=f"^kv: rows a {kv_format} cache does not hold exactly"):
        impl.fn(_q(), kv, torch.zeros(1, 1, dtype=torch.int32), torch.zeros(2), scale=1.0, dv=BF16_DIMS)
    with pytest.raises(ValueError, match=r"^q: must be bf16\[M, H, 512\]"):
        impl.fn(_q(torch.float32), kv, torch.zeros(1, 1, dtype=torch.int32), torch.zeros(2), scale=1.0, dv=512)
