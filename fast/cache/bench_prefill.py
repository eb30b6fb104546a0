"""Sparse prefill benchmark cases with a sink, registered with ``fast.bench`` (``CASE_MODULES``); run them with

    python -m fast.cache.bench_cases --out results/cache --only cache/prefill

One request of ``s_q`` = 4096 query rows (the last 4096 positions of a context of ``s_kv`` KV rows), h heads,
D = dv = 512, one KV head:

* ``cache/prefill_{bf16|fp8}_sq4096_kv{8K|64K}_h{64|128}_k2048``: each query row reads top-k 2048 distinct rows
  of the s_kv (drawn at random), BF16 KV or a V4 584-byte FP8 cache.
* ``cache/prefill_fp8v41_sq4096_kv64K_h64_k2048``: the same reading a V4.1 528-byte FP8 cache (one shape: the
  V4.1 FP8 tiles are chosen on it and on the decode cases).
* ``cache/prefill_bf16_sq4096_kv8K_h64_k128w512``: the V4 shape, top-k 128 distinct rows of the s_kv plus the
  512 rows of the query's sliding window (the rows ending at its position), 640 lanes, BF16 KV.

Models as the decode cases (``bench_cases``): FLOPs = 2 M h lanes (D + dv); bytes = every lane's KV row (1024 B
bf16, 584 B or 528 B fp8) and its 4-byte index + q (bf16) + out and lse (f32). A KV row is read by many query rows, so
most of those row reads hit L2: the bytes are the decode model's, an upper bound on DRAM traffic here.

Baselines: ``torch_eager`` and ``torch_compile`` of the torch twin (``attention_naive``, bf16 matmuls on gathered
rows). Its gather of every lane's row (4096 x 2048 rows of 512 bf16: 8.6 GB) and its ``[M, h, lanes]`` f32
scores would exceed ``TWIN_BYTES`` in most cases; there both run the query rows in equal slices, one after the
other, each slice small enough (``twin_rows``), and the case's notes say so. The timed callable covers all the
rows, so the times are those of the whole call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from fast import bench
from fast.bench import Built, Case
from fast.cache import attention, attention_naive, dispatch
from fast.cache.bench_cases import (
    DEFAULT_PATH,
    DEVICE,
    DIM,
    GLUON_CHECKED,
    GLUON_COMPANIONS,
    KV_KINDS,
    KV_WORDS,
    attention_model,
    gluon_companions,
    kv_inputs,
)
from fast.cache.checks import AttentionArgs

S_Q = 4096
TOPK = 2048
TWIN_BYTES = 20e9
"""The most memory a torch baseline may take at once (bytes): above it, it runs on slices of the query rows."""
CHECK_ROWS = 8
"""Query rows checked against the f64 mode."""
RANDOM_BYTES = 1 << 26
"""The random keys sorted at once to draw the top-k lanes (rows of them per step: RANDOM_BYTES / (4 s_kv))."""


@dataclass(frozen=True)
class Prefill:
    """One prefill shape: ``s_q`` query rows, ``h`` heads, ``s_kv`` KV rows, each row reading ``topk`` distinct
    rows at random and the ``window`` rows ending at its position, KV in ``kv_format`` (None: BF16 rows)."""

    s_q: int
    h: int
    s_kv: int
    topk: int
    window: int = 0
    kv_format: str | None = None

    @property
    def lanes(self) -> int:
        return self.topk + self.window

    @property
    def name(self) -> str:
        kv = f"{self.s_kv // 1024}K" if self.s_kv % 1024 == 0 else str(self.s_kv)
        window = f"w{self.window}" if self.window else ""
        return f"cache/prefill_{KV_KINDS[self.kv_format]}_sq{self.s_q}_kv{kv}_h{self.h}_k{self.topk}{window}"


CASES = (
    *(
        Prefill(S_Q, h, s_kv, TOPK, 0, kv_format)
        for kv_format in (None, "v4_584")
        for s_kv in (8192, 65536)
        for h in (64, 128)
    ),
    Prefill(S_Q, 64, 65536, TOPK, 0, "v41_fp8_528"),
    Prefill(S_Q, 64, 8192, 128, 512),
)


def prefill_inputs(p: Prefill, device: str | torch.device = DEVICE) -> dict[str, Any]:
    """q bf16[s_q, h, 512], sink f32[h], indices i32[s_q, lanes] (``topk`` distinct random rows of the s_kv,
    then the window: query row m sits at position ``s_kv - s_q + m`` and reads rows ``position - window + 1 ..
    position``; a row before 0 is lane -1) and the KV (``kv_inputs``). Built on ``device``; the random lanes
    ``RANDOM_BYTES`` of sort keys at a time."""
    g = torch.Generator(device=device).manual_seed(2)
    q = (torch.randn(p.s_q, p.h, DIM, device=device, generator=g) * 0.5).to(torch.bfloat16)
    sink = torch.randn(p.h, device=device, generator=g)
    indices = torch.empty(p.s_q, p.lanes, dtype=torch.int32, device=device)
    step = max(1, RANDOM_BYTES // (4 * p.s_kv))
    for start in range(0, p.s_q, step):
        keys = torch.rand(min(step, p.s_q - start), p.s_kv, device=device, generator=g)
        indices[start : start + keys.shape[0], : p.topk] = keys.argsort(dim=1)[:, : p.topk]
    if p.window:
        position = p.s_kv - p.s_q + torch.arange(p.s_q, device=device)
        window = position[:, None] - torch.arange(p.window - 1, -1, -1, device=device)
        indices[:, p.topk :] = torch.where(window >= 0, window, -1)
    return {"q": q, "sink": sink, "indices": indices, **kv_inputs(p.kv_format, p.s_kv, g, device)}


def twin_bytes(p: Prefill, rows: int) -> int:
    """The torch twin's memory on ``rows`` query rows (bytes, an upper estimate): per (row, lane) the gathered
    bf16 row (2 D) and its int64 and int32 index and mask (16 B), a dequantized FP8 row with the twin's int64
    byte offsets and decoding temporaries (24 KiB), and about 14 bytes per head (the bf16 and f32 scores,
    their difference and the exponentials alive at once)."""
    per_lane = 2 * DIM + 16 + (24 * 1024 if p.kv_format else 0) + 14 * p.h
    return rows * p.lanes * per_lane


def twin_rows(p: Prefill) -> int:
    """Query rows per torch-twin call: ``s_q`` halved until ``twin_bytes`` fits ``TWIN_BYTES`` (at least 1)."""
    rows = p.s_q
    while rows > 1 and rows % 2 == 0 and twin_bytes(p, rows) > TWIN_BYTES:
        rows //= 2
    return rows


def prefill_case(p: Prefill, device: str | torch.device = DEVICE) -> Callable[[bool], Built]:
    def build(with_compile: bool) -> Built:
        x = prefill_inputs(p, device)
        scale = DIM**-0.5
        out = torch.empty(p.s_q, p.h, DIM, device=device)
        lse = torch.empty(p.s_q, p.h, device=device)
        twin_out, twin_lse = torch.empty_like(out), torch.empty_like(lse)
        kv, idx, q, sink, kv_cache = x["kv"], x["indices"], x["q"], x["sink"], x["kv_cache"]

        def call(o: torch.Tensor, s: torch.Tensor, precision: str, rows: slice = slice(None)) -> AttentionArgs:
            """The prefill call on query rows ``rows``, results into ``o[rows]`` and ``s[rows]``."""
            return AttentionArgs(q[rows], kv, idx[rows], sink, scale, DIM, False, o[rows], s[rows], kv_cache, precision)

        launch = call(out, lse, "bf16")
        per = twin_rows(p)
        slices = [call(twin_out, twin_lse, "bf16", slice(a, a + per)) for a in range(0, p.s_q, per)]

        def over_slices(fn: Callable[[AttentionArgs], object]) -> Callable[[], object]:
            def run() -> None:
                for piece in slices:
                    fn(piece)

            return run

        impls: dict[str, Callable[[], object]] = {
            "triton": lambda: dispatch.run(launch),  # the default path (fast.cache.dispatch)
            "triton_tl": lambda: attention.sparse_attention(launch),
            "torch_eager": over_slices(attention_naive.sparse_attention),
        }
        beside, gluon_tiles = gluon_companions(launch, p.kv_format, True)  # swept tiles: none under --no-sweep
        impls |= beside
        if with_compile:
            impls["torch_compile"] = over_slices(torch.compile(attention_naive.sparse_attention, dynamic=False))
        flops, moved = attention_model(p.s_q, p.h, p.lanes, x["row_bytes"])

        def check() -> str:
            """The first rows of triton and of the sliced torch_eager against the twin's f64 mode on them; "ok"
            when triton's largest error is at most twice torch's (the flash-attention rule)."""
            n = min(CHECK_ROWS, p.s_q)
            rows = slice(0, n)
            ref_o, ref_l = torch.empty(n, p.h, DIM, device=device), torch.empty(n, p.h, device=device)
            attention_naive.sparse_attention(call(ref_o, ref_l, "f64", rows))
            impls["torch_eager"]()
            errors = {}
            ws = [(k, impls[k]) for k in GLUON_CHECKED if k in impls]
            for who, fn in (("triton", impls["triton"]), ("triton_tl", impls["triton_tl"]), *ws, *gluon_tiles.items()):
                fn()
                errors[who] = (out[rows] - ref_o).abs().max().item(), (lse[rows] - ref_l).abs().max().item()
            errors["torch"] = (twin_out[rows] - ref_o).abs().max().item(), (twin_lse[rows] - ref_l).abs().max().item()
            theirs = errors["torch"][0]
            worst = max(errors, key=lambda k: errors[k][0] if k != "torch" else -1.0)
            verdict = "ok" if errors[worst][0] <= 2 * theirs + 1e-6 else f"{worst}'s error exceeds twice torch's"
            parts = [f"{who}: max |out - f64| {e[0]:.2e}, |lse - f64| {e[1]:.2e}" for who, e in errors.items()]
            return f"{verdict}: first {n} query rows, " + "; ".join(parts)

        lanes = f"top-k {p.topk} distinct rows of {p.s_kv}" + (f" + a window of {p.window} rows" if p.window else "")
        notes = [f"one request of {p.s_q} query rows (the last of {p.s_kv} positions), {p.h} heads, {lanes} "
                 f"= {p.lanes} lanes, D = dv = {DIM}, {KV_WORDS[p.kv_format]} KV; {DEFAULT_PATH}; "
                 f"{GLUON_COMPANIONS}; triton_tl: the tl kernel; all with probabilities rounded to bf16 (FlashMLA "
                 "style); torch: bf16 matmuls on gathered rows"]  # fmt: skip
        if per < p.s_q:
            notes.append(f"torch_eager and torch_compile run the {p.s_q} query rows as {p.s_q // per} calls of {per} "
                         f"(the whole call would need about {twin_bytes(p, p.s_q) / 1e9:.0f} GB, over "
                         f"{TWIN_BYTES / 1e9:.0f} GB); their times cover all the rows")  # fmt: skip
        return Built(impls, moved, flops, check, notes=notes, sweep=gluon_tiles)

    return build


def register_all() -> None:
    if any(c.name.startswith("cache/prefill_") for c in bench.CASES):
        return
    for p in CASES:
        lanes = f"top-k {p.topk}" + (f" + window {p.window}" if p.window else "")
        bench.register(Case(p.name, "cache", f"sparse prefill s_q={p.s_q} s_kv={p.s_kv} h={p.h} {lanes}, "
                            f"{KV_WORDS[p.kv_format]} KV", prefill_case(p)))  # fmt: skip


register_all()
