"""The sparse-attention benchmark cases built at a reduced size on any machine: each decode and prefill case's
inputs, its timed implementations (Triton under the interpreter on the CPU) and its check, against the torch
twin. The full-size cases run only on a GPU (``python -m fast.cache.bench_cases``)."""

from __future__ import annotations

import dataclasses
import functools
import math
import re

import pytest
import torch

from fast import bench
from fast.cache import attention, attention_naive, bench_cases, bench_prefill
from fast.cache.bench_prefill import Prefill
from fast.cache.checks import AttentionArgs
from properties.cache.kernels import gluon_runs_here

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def small(p: Prefill) -> Prefill:
    """``p`` at a size the interpreter runs in seconds: 8 query rows, h / 32 heads, 64 or 128 KV rows, top-k 16
    (or 8 for the windowed shape, with a window of 16)."""
    return dataclasses.replace(p, s_q=8, h=p.h // 32, s_kv=64 if p.s_kv <= 8192 else 128,
                               topk=16 if p.topk == 2048 else 8, window=16 if p.window else 0)  # fmt: skip


def test_the_new_cases_are_registered() -> None:
    names = {c.name for c in bench.load_cases()}
    for b in (64, 128):
        for h in (64, 128):
            assert f"cache/decode_fp8v41_b{b}_h{h}" in names
    prefill = {n for n in names if n.startswith("cache/prefill_")}
    want = {f"cache/prefill_{kv}_sq4096_kv{s}_h{h}_k2048" for kv in ("bf16", "fp8") for s in ("8K", "64K")
            for h in (64, 128)} | {"cache/prefill_bf16_sq4096_kv8K_h64_k128w512",
                                   "cache/prefill_fp8v41_sq4096_kv64K_h64_k2048"}  # fmt: skip
    assert prefill == want


def test_prefill_models_at_full_size() -> None:
    """The FLOP count and the torch baselines' slices of the registered shapes (nothing is built)."""
    by_name = {p.name: p for p in bench_prefill.CASES}
    p = by_name["cache/prefill_bf16_sq4096_kv8K_h64_k128w512"]
    assert (p.lanes, p.s_kv, p.h) == (640, 8192, 64)
    for p in bench_prefill.CASES:
        rows = bench_prefill.twin_rows(p)
        assert p.s_q % rows == 0 and bench_prefill.twin_bytes(p, rows) <= bench_prefill.TWIN_BYTES
        assert rows == p.s_q or bench_prefill.twin_bytes(p, p.s_q) > bench_prefill.TWIN_BYTES
    # the eager gather of 4096 x 2048 BF16 rows alone is 8.6 GB; FP8 adds the twin's dequantization
    assert bench_prefill.twin_rows(by_name["cache/prefill_fp8_sq4096_kv64K_h128_k2048"]) < 4096


BUILT = {
    "cache/prefill_bf16_sq4096_kv8K_h64_k2048",
    "cache/prefill_fp8_sq4096_kv64K_h128_k2048",
    "cache/prefill_fp8v41_sq4096_kv64K_h64_k2048",
    "cache/prefill_bf16_sq4096_kv8K_h64_k128w512",
}
"""One case per path of the builder: BF16 KV, FP8 KV (V4 and V4.1) with the torch baselines in slices, the V4
window lanes (the other cases differ from these in sizes only)."""


BUILT_CASES = [p for p in bench_prefill.CASES if p.name in BUILT]


def beside_the_paired_kernel(kv_format: str | None) -> set[str]:
    """Where the paired kernel is the default path (BF16 rows, Gluon on sm_90), the case also times the
    warp-specialized kernel, as ``triton_ws``."""
    return {"triton_ws"} if kv_format is None and DEVICE.type == "cuda" and gluon_runs_here() else set()


def staged_beside(kv_format: str | None) -> set[str]:
    """On an FP8 cache where the Gluon kernels run (sm_90), the case also times the warp-specialized kernel in its
    staged tile, as ``triton_ws_staged`` (timed only: the swept-tile tests check that tile), and the paired kernel
    with its FP8 producer, as ``triton_pair``."""
    gluon = kv_format is not None and DEVICE.type == "cuda" and gluon_runs_here()
    return {"triton_ws_staged", "triton_pair"} if gluon else set()


@pytest.mark.parametrize("p", BUILT_CASES, ids=[p.name for p in BUILT_CASES])
def test_prefill_case_builds_and_checks(p: Prefill, monkeypatch: pytest.MonkeyPatch) -> None:
    """The case at a reduced size: distinct top-k lanes inside the KV, the window ending at each query's
    position, every implementation run, the check "ok", and the Triton kernel equal to the twin in f64 mode."""
    s = small(p)
    if bench_prefill.twin_rows(p) < p.s_q:  # the full case slices its torch baselines: so does the small one
        monkeypatch.setattr(bench_prefill, "TWIN_BYTES", bench_prefill.twin_bytes(s, s.s_q // 4))
    x = bench_prefill.prefill_inputs(s, DEVICE)
    idx = x["indices"].long().cpu()
    assert idx.shape == (s.s_q, s.lanes)
    top = idx[:, : s.topk]
    assert bool(((top >= 0) & (top < s.s_kv)).all())
    assert all(len(set(row.tolist())) == s.topk for row in top)
    if s.window:
        position = s.s_kv - s.s_q + torch.arange(s.s_q)
        assert torch.equal(idx[:, -1], position) and torch.equal(idx[:, s.topk], position - s.window + 1)
    built = bench_prefill.prefill_case(s, DEVICE)(False)
    beside = beside_the_paired_kernel(s.kv_format) | staged_beside(s.kv_format)
    assert set(built.impls) == {"triton", "triton_tl", "torch_eager"} | beside
    assert built.flops == 2 * s.s_q * s.h * s.lanes * 1024
    assert built.bytes_moved == s.s_q * s.lanes * (x["row_bytes"] + 4) + s.s_q * s.h * (1024 + 2048 + 4)
    assert (len(built.notes) == 2) == (bench_prefill.twin_rows(p) < p.s_q)
    for fn in built.impls.values():
        fn()
    assert built.check is not None
    verdict = built.check()
    assert verdict.startswith("ok:"), verdict
    outs = []
    for impl in (attention, attention_naive):
        o, lse = torch.empty(s.s_q, s.h, 512, device=DEVICE), torch.empty(s.s_q, s.h, device=DEVICE)
        call = AttentionArgs(x["q"], x["kv"], x["indices"], x["sink"], 512**-0.5, 512, False, o, lse, x["kv_cache"],
                             "f64")  # fmt: skip
        outs.append(impl.sparse_attention(call))
    assert torch.allclose(outs[0][0], outs[1][0], rtol=1e-6, atol=1e-7)
    assert torch.allclose(outs[0][1], outs[1][1], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("kv_format", list(bench_cases.KV_KINDS), ids=list(bench_cases.KV_KINDS.values()))
def test_decode_case_builds_and_checks(kv_format: str | None) -> None:
    """A decode case of 2 requests, 4 heads, top-k 16 of 64 rows: every implementation runs, and the check's
    errors against the f64 mode are small and finite."""
    built = bench_cases.decode_case(2, 4, kv_format, False, DEVICE, context_rows=64, topk=16)(False)
    want = {"triton", "triton_tl", "triton_f32p", "triton+checks", "torch_eager"} | (
        {"triton_int_decode"} if kv_format == "v4_584" else set()
    )
    assert set(built.impls) == want | beside_the_paired_kernel(kv_format) | staged_beside(kv_format)
    assert built.flops == 2 * 4 * 4 * 16 * 1024
    for fn in built.impls.values():
        fn()
    assert built.check is not None
    text = built.check()
    errors = [float(v) for v in re.findall(r"\d\.\d\de[-+]\d+", text)]
    checked = set(built.impls) & set(bench_cases.GLUON_CHECKED)  # the Gluon kernels the check runs beside the default
    n_errors = 7 + 2 * len(checked)  # an out and an lse error a kernel, torch's one
    assert len(errors) == n_errors and all(math.isfinite(e) and e < 0.05 for e in errors), text


def test_decode_sweep_checks_every_tile() -> None:
    """The decode sweep's check runs every swept tile and reports the worst one's error (a swept tile is otherwise
    timed only)."""
    built = bench_cases.decode_case(1, 4, "v41_fp8_528", True, DEVICE, context_rows=64, topk=16)(False)
    assert {bench_cases.sweep_label(c) for c in bench_cases.SWEEP} <= set(built.sweep)
    assert built.check is not None
    text = built.check()
    worst = re.search(r"swept tiles, bf16 p: max \|out - f64\| (\d\.\d\de[-+]\d+) \((triton\[[^]]+\])\)", text)
    assert worst is not None and worst.group(2) in built.sweep, text
    assert math.isfinite(float(worst.group(1))) and float(worst.group(1)) < 0.05, text
    built.sweep.clear()  # what the benchmark does under --no-sweep: the check then runs no tile
    assert "swept tiles" not in built.check()


def test_the_gluon_kernels_beside_the_default_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the paired kernel is the default (BF16 rows on sm_90) the warp-specialized default is timed beside it
    and the paired kernel at one program an item is swept; on an FP8 cache the staged tile and the paired kernel
    are timed beside the default and only the warp-specialized tiles are swept; nothing is swept without
    ``sweep`` (availability stubbed: the branches an sm_90 GPU takes)."""
    from fast.cache import attention_pair, attention_ws

    monkeypatch.setattr(attention_ws, "available", lambda call: True)
    monkeypatch.setattr(attention_pair, "available", lambda call: True)
    t = torch.zeros(1)
    bf16 = AttentionArgs(t, t, t, None, 1.0, 512, False, t, t, None, "bf16")
    fp8 = dataclasses.replace(bf16, kv_cache=bench_cases.decode_inputs(1, 4, "v4_584", DEVICE, 64, 16)["kv_cache"])
    impls, swept = bench_cases.gluon_companions(bf16, None, True)
    tiles = [attention_ws.label(t, False) for t in attention_ws.sweep_tiles(None)]
    assert set(impls) == {"triton_ws"} and list(swept) == [*tiles, "triton_pair[per_item]"]
    assert [set(d) for d in bench_cases.gluon_companions(bf16, None, False)] == [{"triton_ws"}, set()]
    impls, swept = bench_cases.gluon_companions(fp8, "v4_584", True)
    assert set(impls) == {"triton_ws_staged", "triton_pair"}
    staged, pair = impls["triton_ws_staged"], impls["triton_pair"]
    assert isinstance(staged, functools.partial) and staged.args == (fp8, attention_ws.STAGED_TILES["v4_584"])
    assert isinstance(pair, functools.partial) and pair.func is attention_pair.sparse_attention_pair
    assert pair.args == (fp8,) and not pair.keywords
    assert list(swept) == [attention_ws.label(t, True) for t in attention_ws.sweep_tiles("v4_584")]
    impls, swept = bench_cases.gluon_companions(fp8, "v4_584", False)
    assert set(impls) == {"triton_ws_staged", "triton_pair"} and swept == {}
