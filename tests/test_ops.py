"""The kernels as torch.library custom operators (``fast.ops``): ``torch.library.opcheck`` on every operator's
sample inputs, and a decode step built from them compiled with ``torch.compile(fullgraph=True)`` (on a GPU also
captured in a CUDA graph) against the same step run eagerly."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
import torch

from fast import ops

DEVICES = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def compression_call(
    device: str, decode: bool, lengths: tuple[int, int] = (3, 2)
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Two requests of ratio 4 (V4 overlap off), ``lengths`` new positions, a ring of 8 slots."""
    g = _generator(1)
    c, starts = 8, [5, 2]
    score = torch.randn(sum(lengths), c, generator=g)
    latent = torch.randn(sum(lengths), c, generator=g)
    cu = torch.tensor([0, lengths[0], sum(lengths)], dtype=torch.int32)
    start = torch.tensor(starts, dtype=torch.int32)
    state = torch.randn(3, 8, 2, c, generator=g)
    index = torch.tensor([2, 0], dtype=torch.int32)
    args = tuple(t.to(device) for t in (score, latent, cu, start, state, index))
    return (*args, 4, False, None), {}


def samples(device: str) -> dict[str, tuple[tuple[Any, ...], dict[str, Any]]]:
    """op name -> (args, kwargs): small valid calls."""
    g = _generator(0)

    def on(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(t.to(device) for t in tensors)

    scores = torch.randn(3, 20, generator=g)
    lengths = torch.tensor([20, 7, 0], dtype=torch.int32)
    rows = torch.tensor([[0, 5, -1, 9], [3, -1, -1, -1]], dtype=torch.int32)
    table = torch.tensor([[4, 1, 7], [2, 0, 3]], dtype=torch.int32)
    q, weights, k = torch.randn(3, 2, 8, generator=g), torch.rand(3, 2, generator=g), torch.randn(20, 8, generator=g)
    kv = torch.randn(12, 16, generator=g)
    indices = torch.tensor([[0, 3, -1, 11], [5, 5, 2, -1], [-1, -1, -1, -1]], dtype=torch.int32)
    sink = torch.tensor([0.5, -1.0])
    cache = torch.zeros(2, 4 * 528, dtype=torch.uint8)
    slots = torch.tensor([3, -1, 6], dtype=torch.int64)
    paged_table = torch.tensor([[4, 1], [2, -1], [0, 3]], dtype=torch.int32)
    paged_lengths = torch.tensor([[8], [3], [0]], dtype=torch.int32)
    angles = torch.rand(10, 32, generator=g)
    cos_sin, positions = torch.cat([angles.cos(), angles.sin()], dim=1), torch.tensor([9, 0, 4], dtype=torch.int64)
    return {
        "compress_prefill": compression_call(device, decode=False),
        "compress_decode": compression_call(device, decode=True),
        "index_logits": (on(q, weights, k, lengths), {}),
        "paged_index_logits": (
            (*on(q.reshape(3, 1, 2, 8), weights.reshape(3, 1, 2), k.reshape(5, 4, 8), paged_table, paged_lengths), 4),
            {},
        ),
        "topk": ((*on(scores, lengths, torch.tensor([0, 10, 3], dtype=torch.int32)), 4, "v4.1"), {}),
        "candidate_select": ((*on(scores, lengths), 4, 2), {}),
        "candidate_restore": ((*on(torch.tensor([[0, 5, -1]], dtype=torch.int32), table[:1]), 4), {}),
        "candidate_remap": (
            (*on(torch.tensor([[0, 5, -1], [2, 0, 1]], dtype=torch.int32), paged_table[:2], torch.tensor([7, 11])), 4),
            {},
        ),
        "slot_translation": ((*on(rows, table, torch.tensor([2, 1], dtype=torch.int32)), 4, "count"), {}),
        "gathered_rows": (on(rows, torch.tensor([10, 0], dtype=torch.int64)), {}),
        "decode_window_indices": ((*on(torch.tensor([0, 3, 9], dtype=torch.int32)), 4, "v4.1"), {}),
        "compressed_indices": ((128, 3, 254, 5, torch.device(device)), {}),
        "window_release": (
            (*on(torch.tensor([300, 9, 130], dtype=torch.int32), torch.tensor([2, 1, 8], dtype=torch.int32)), 128, 64),
            {},
        ),
        "quantize_store": ((*on(torch.randn(3, 512, generator=g), slots, cache), "v41_fp8_528", 4), {}),
        "norm_rope_store": (
            (
                *on(
                    torch.randn(3, 512, generator=g),
                    torch.rand(512, generator=g) + 0.5,
                    cos_sin,
                    positions,
                    slots,
                    cache,
                ),
                "v41_fp8_528",
                1e-6,
                64,
                4,
            ),
            {},
        ),
        "gather_dequantize": ((*on(cache, torch.tensor([3, 6], dtype=torch.int64)), "v41_fp8_528", 4), {}),
        "sparse_attention": ((*on(torch.randn(3, 2, 16, generator=g), kv, indices, sink), 0.25, 8), {}),
    }


def test_every_operator_has_samples() -> None:
    assert set(samples("cpu")) == set(ops.OPERATORS)
    assert all(hasattr(torch.ops.csa, name) for name in ops.OPERATORS)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ops.OPERATORS)
def test_opcheck(name: str, device: str) -> None:
    args, kwargs = samples(device)[name]
    torch.library.opcheck(getattr(torch.ops.csa, name).default, args, kwargs)


def decode_step(ratio: int, k: int, validate: bool = False) -> Callable[..., tuple[torch.Tensor, ...]]:
    """compress -> index logits -> top-k -> sparse attention, all through the ``csa`` operators, value checks off
    by default (no host reads, as inside a CUDA graph)."""

    def step(
        score: torch.Tensor,
        latent: torch.Tensor,
        cu: torch.Tensor,
        start: torch.Tensor,
        state: torch.Tensor,
        index: torch.Tensor,
        kv: torch.Tensor,
        q_index: torch.Tensor,
        weights: torch.Tensor,
        keys: torch.Tensor,
        lengths: torch.Tensor,
        q: torch.Tensor,
        sink: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        call = (score, latent, cu, start, state, index)
        rows, store, positions = torch.ops.csa.compress_decode(*call, ratio, False, None, 3, validate)
        cache = torch.cat([kv, rows])
        logits = torch.ops.csa.index_logits(q_index, weights, keys, lengths, None, None, False)
        chosen = torch.ops.csa.topk(logits, lengths, None, k, "v4.1", False)
        out, lse = torch.ops.csa.sparse_attention(q, cache, chosen, sink, 0.125, cache.shape[1] // 2)
        return rows, store, positions, chosen, out, lse

    return step


def step_inputs(device: str) -> tuple[torch.Tensor, ...]:
    g = _generator(7)
    # the shorter request first: a step that assumed every request as long as the longest would misplace rows
    (score, latent, cu, start, state, index, *_), _ = compression_call(device, decode=True, lengths=(2, 3))
    kv = torch.randn(11, 8, generator=g)
    q_index, weights = torch.randn(2, 4, 16, generator=g), torch.rand(2, 4, generator=g)
    keys = torch.randn(16, 16, generator=g)
    lengths = torch.tensor([16, 9], dtype=torch.int32)
    q, sink = torch.randn(2, 4, 8, generator=g), torch.tensor([0.0, 1.0, -2.0, 0.5])
    rest = tuple(t.to(device) for t in (kv, q_index, weights, keys, lengths, q, sink))
    return (score, latent, cu, start, state, index, *rest)


def _run(fn: Callable[..., tuple[torch.Tensor, ...]], inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    fresh = tuple(t.clone() for t in inputs)  # the state is changed in place
    return (*fn(*fresh), fresh[4])


@pytest.mark.parametrize("interpret", ["1", "0"], ids=["triton-backend", "torch-backend"])
@pytest.mark.parametrize("device", DEVICES)
def test_decode_step_compiles_fullgraph_and_matches_eager(
    device: str, interpret: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the CPU, ``TRITON_INTERPRET`` picks the backend of every operator (``fast.ops._backend``)."""
    if device == "cuda" and interpret == "0":
        pytest.skip("on a GPU the operators always run the Triton kernels")
    if device == "cpu" and interpret == "1" and os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("Triton's interpreter is off in this process (kernels are compiled for the GPU)")
    if device == "cpu":
        monkeypatch.setenv("TRITON_INTERPRET", interpret)
    torch._dynamo.reset()
    step, inputs = decode_step(4, 5), step_inputs(device)
    eager = _run(step, inputs)
    checked = _run(decode_step(4, 5, validate=True), inputs)
    compiled = _run(torch.compile(step, fullgraph=True), inputs)
    for e, v, c in zip(eager, checked, compiled, strict=True):
        torch.testing.assert_close(e, v, rtol=0, atol=0, equal_nan=True)
        torch.testing.assert_close(c, e, rtol=0, atol=0, equal_nan=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA device")
def test_decode_step_captured_in_a_cuda_graph_matches_eager() -> None:
    torch._dynamo.reset()
    step, inputs = decode_step(4, 5), step_inputs("cuda")
    eager = _run(step, inputs)
    compiled = torch.compile(step, fullgraph=True)
    static = tuple(t.clone() for t in inputs)
    state_before = static[4].clone()
    _run(compiled, inputs)  # compile and warm up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = compiled(*static)
    static[4].copy_(state_before)
    graph.replay()
    torch.cuda.synchronize()
    for e, c in zip(eager, (*captured, static[4]), strict=True):
        torch.testing.assert_close(c, e, rtol=0, atol=0, equal_nan=True)
