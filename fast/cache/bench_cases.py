"""Cache-kernel benchmark cases, registered with ``fast.bench``; run them alone with

    python -m fast.cache.bench_cases --out results/cache [--no-compile] [--quick] [--only NAME ...]

which runs the harness on the ``cache/`` cases only and adds ``cache_summary.md``: TFLOP/s, bytes, the fraction
of the roofline and the issue's targets, each Triton figure next to torch eager and torch.compile from the same
run. Models (docs/cache-kernels.md):

* quantize-and-store, 8192 rows per call: bytes = rows read (4 d each) + slots (8) + stored data and scale
  parts (the row format's bytes). Gather: the same bytes the other way.
* sparse decode, b requests x 2 queries, h heads, top-k 2048, D = dv = 512: FLOPs = 2 M h K (D + dv); bytes =
  every lane's KV row (1024 B bf16, 584 B V4 fp8, 528 B V4.1 fp8) + q (bf16) + out and lse (f32) + indices (4 B
  a lane). Roofline time = max(FLOPs / 989.4 TFLOP/s dense bf16, bytes / measured copy bandwidth).
* sparse prefill: ``fast/cache/bench_prefill.py`` (registered as its own module, run by the same command).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import pathlib
import sys
from collections.abc import Callable
from typing import Any

import torch

from fast import bench, bench_report
from fast.bench import Built, Case
from fast.cache import (
    FORMATS,
    attention,
    attention_naive,
    attention_pair,
    attention_ws,
    dispatch,
    quantize,
    quantize_naive,
)
from fast.cache import gather_dequantize as gather_api
from fast.cache import quantize_store as store_api
from fast.cache import sparse_attention as attention_api
from fast.cache.checks import AttentionArgs, GatherArgs, StoreArgs

DEVICE = "cuda"
ROWS = 8192
ROWS_PER_BLOCK = 64
H200_BF16_DENSE_TFLOPS = 989.4
TOPK = 2048
CONTEXT_ROWS = 16384  # compressed KV rows per request (the lanes of one request come from these)
QUERIES_PER_REQUEST = 2
DIM = 512


def _store_inputs(conv: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    fmt = FORMATS[conv]
    g = torch.Generator(device=DEVICE).manual_seed(0)
    rows = torch.randn(ROWS, fmt.dims, device=DEVICE, generator=g)
    blocks = 2 * ROWS // ROWS_PER_BLOCK
    slots = torch.randperm(blocks * ROWS_PER_BLOCK, device=DEVICE, generator=g)[:ROWS].contiguous()
    cache = torch.zeros(blocks, fmt.block_bytes(ROWS_PER_BLOCK), dtype=torch.uint8, device=DEVICE)
    moved = ROWS * (4 * fmt.dims + 8 + fmt.row_bytes)
    return rows, slots, cache, moved


def store_case(conv: str) -> Callable[[bool], Built]:
    def build(with_compile: bool) -> Built:
        fmt = FORMATS[conv]
        rows, slots, cache, moved = _store_inputs(conv)
        other = cache.clone()
        mine, twin = (
            StoreArgs(rows, slots, cache, fmt, ROWS_PER_BLOCK),
            StoreArgs(rows, slots, other, fmt, ROWS_PER_BLOCK),
        )
        impls: dict[str, Callable[[], object]] = {
            "triton": lambda: quantize.store_rows(mine),
            "triton+checks": lambda: store_api(rows, slots, cache, fmt=conv, rows_per_block=ROWS_PER_BLOCK),
            "torch_eager": lambda: quantize_naive.store_rows(twin),
            "copy_same_bytes": bench.copy_of(moved),
        }
        if with_compile:
            compiled = torch.compile(quantize_naive.store_rows, dynamic=False)
            impls["torch_compile"] = lambda: compiled(twin)

        def check() -> str:
            cache.zero_()
            other.zero_()
            quantize.store_rows(mine)
            quantize_naive.store_rows(twin)
            differ = int((cache != other).sum())
            return "ok: triton bytes == torch bytes" if differ == 0 else f"{differ} bytes differ from torch"

        def launch(shape: tuple[int, int, int]) -> Callable[[], object]:
            return lambda: quantize.store_rows(mine, shape)

        sweep = {f"triton[rows {s[0]}, w{s[1]}, {s[2] or 'all'}/SM]": launch(s) for s in STORE_SWEEP}
        notes = [f"{ROWS} rows of {fmt.dims} f32 into {conv} ({fmt.row_bytes} B/row) at random slots of "
                 f"{cache.shape[0]} blocks x {ROWS_PER_BLOCK} rows; copy_same_bytes: a device copy of as many "
                 "bytes (read + write), the practical roof at this size"]  # fmt: skip
        graphs = ("triton", "copy_same_bytes")
        return Built(impls, moved, 0, check, sweep=sweep if conv == "v4_584" else {}, notes=notes, graphs=graphs)

    return build


def gather_case(conv: str) -> Callable[[bool], Built]:
    def build(with_compile: bool) -> Built:
        fmt = FORMATS[conv]
        rows, slots, cache, moved = _store_inputs(conv)
        quantize.store_rows(StoreArgs(rows, slots, cache, fmt, ROWS_PER_BLOCK))
        out = torch.empty(ROWS, fmt.dims, device=DEVICE)
        other = torch.empty_like(out)
        mine, twin = (
            GatherArgs(cache, slots, fmt, ROWS_PER_BLOCK, out),
            GatherArgs(cache, slots, fmt, ROWS_PER_BLOCK, other),
        )
        impls: dict[str, Callable[[], object]] = {
            "triton": lambda: quantize.gather_rows(mine),
            "triton+checks": lambda: gather_api(cache, slots, fmt=conv, rows_per_block=ROWS_PER_BLOCK, out=out),
            "torch_eager": lambda: quantize_naive.gather_rows(twin),
        }
        if with_compile:
            compiled = torch.compile(quantize_naive.gather_rows, dynamic=False)
            impls["torch_compile"] = lambda: compiled(twin)

        def check() -> str:
            quantize.gather_rows(mine)
            quantize_naive.gather_rows(twin)
            same = torch.equal(out.view(torch.int32), other.view(torch.int32))
            return "ok: bit-identical to torch" if same else "differs from torch"

        return Built(impls, moved, 0, check, notes=[f"{ROWS} rows of {conv} gathered to f32"])

    return build


KV_KINDS: dict[str | None, str] = {None: "bf16", "v4_584": "fp8", "v41_fp8_528": "fp8v41"}
"""The attention cases' KV formats (None: BF16 rows) and the word for each in the case names."""
KV_WORDS: dict[str | None, str] = {None: "BF16", "v4_584": "V4 FP8 584 B", "v41_fp8_528": "V4.1 FP8 528 B"}


def fp8_cache(conv: str, n: int, g: torch.Generator, device: str | torch.device = DEVICE) -> torch.Tensor:
    """``n`` random normal rows of ``DIM`` quantized into a ``conv`` cache of ``ROWS_PER_BLOCK``-row blocks at
    slots ``0 .. n - 1`` (stored 2^18 rows a launch, so the f32 rows never take more than 512 MiB)."""
    fmt = FORMATS[conv]
    blocks = -(-n // ROWS_PER_BLOCK)
    cache = torch.zeros(blocks, fmt.block_bytes(ROWS_PER_BLOCK), dtype=torch.uint8, device=device)
    for start in range(0, n, 1 << 18):
        rows = torch.randn(min(1 << 18, n - start), DIM, device=device, generator=g)
        slots = torch.arange(start, start + rows.shape[0], device=device)
        quantize.store_rows(StoreArgs(rows, slots, cache, fmt, ROWS_PER_BLOCK))
    return cache


def kv_inputs(kv_format: str | None, n: int, g: torch.Generator, device: str | torch.device) -> dict[str, Any]:
    """``kv`` (n BF16 rows of DIM, or a ``kv_format`` cache of n rows), its ``kv_cache`` record for
    ``AttentionArgs`` and the bytes a lane reads (``row_bytes``)."""
    if kv_format is None:
        kv = torch.randn(n, DIM, device=device, generator=g).to(torch.bfloat16)
        return {"kv": kv, "kv_cache": None, "row_bytes": 2 * DIM}
    fmt = FORMATS[kv_format]
    return {"kv": fp8_cache(kv_format, n, g, device), "kv_cache": (fmt, ROWS_PER_BLOCK), "row_bytes": fmt.row_bytes}


def attention_model(rows: int, heads: int, lanes: int, row_bytes: int) -> tuple[int, int]:
    """(FLOPs, bytes) of a sparse attention call of ``rows`` query rows (see the module docstring): every lane's
    KV row and index read once, q (bf16) read, out and lse (f32) written."""
    flops = 2 * rows * heads * lanes * (DIM + DIM)
    return flops, rows * lanes * (row_bytes + 4) + rows * heads * (2 * DIM + 4 * DIM + 4)


def decode_inputs(
    b: int,
    h: int,
    kv_format: str | None,
    device: str | torch.device = DEVICE,
    context_rows: int = CONTEXT_ROWS,
    topk: int = TOPK,
) -> dict[str, Any]:
    """q bf16[2b, h, 512]; per request a pool of ``context_rows`` rows, each query choosing ``topk`` distinct
    ones; KV in ``kv_format`` (None: BF16 rows)."""
    g = torch.Generator(device=device).manual_seed(1)
    M, N = QUERIES_PER_REQUEST * b, b * context_rows
    q = (torch.randn(M, h, DIM, device=device, generator=g) * 0.5).to(torch.bfloat16)
    base = (torch.arange(M, device=device) // QUERIES_PER_REQUEST * context_rows)[:, None]
    pick = torch.rand(M, context_rows, device=device, generator=g).argsort(dim=1)[:, :topk]
    indices = (base + pick).to(torch.int32).contiguous()
    sink = torch.randn(h, device=device, generator=g)
    return {"q": q, "indices": indices, "sink": sink, "M": M, "N": N, **kv_inputs(kv_format, N, g, device)}


STORE_SWEEP = ((1, 1, 8), (1, 1, 24), (1, 1, 0), (2, 1, 8), (2, 2, 8), (4, 2, 8), (8, 4, 0))
SWEEP = (
    attention.Config(64, 32, 8, 2),
    attention.Config(64, 64, 8, 3),
    attention.Config(64, 128, 8, 1),
    attention.Config(64, 64, 8, 1),
    attention.Config(64, 32, 8, 4),
)
"""Decode tiles the sweep tries (b 128, h 64) besides the default's prefetch variants (``PREFETCH_SWEEP``): 8
warps without the prefetch, as the runs before it measured them. Tried and dropped: 16 warps a program (at most
128 registers a thread, the accumulator 64 of them; 0.65-1.2 ms against 0.31-0.50 for the defaults,
results/sweeps/run7_6e20deb)."""


PREFETCH_SWEEP = (0, 2)
"""Tiles ahead of the L2 prefetch (``Config.prefetch``) tried on the default tile besides its own."""


def sweep_label(c: attention.Config) -> str:
    """A swept tile's name in the report: heads, lanes, warps, stages, prefetch distance."""
    return f"triton[{c.block_h},{c.block_n},w{c.num_warps},s{c.num_stages},pf{c.prefetch}]"


DEFAULT_PATH = ("triton: the default path (fast.cache.dispatch: on sm_90 the paired-warp-group kernel on BF16 rows, "
                "one program an SM, the warp-specialized one on an FP8 cache, else the tl kernel)")  # fmt: skip
GLUON_COMPANIONS = ("triton_ws: the warp-specialized kernel on BF16 rows; triton_ws_staged (FP8 cache): the "
                    "warp-specialized kernel with the codes staged in the producer's registers (the earlier "
                    "default tile); triton_pair (FP8 cache): the paired kernel, its producer converting the codes "
                    "in the stage halves; triton_pair[per_item] (swept): the paired kernel at one program a (row, "
                    "head block) item")  # fmt: skip
"""How the decode and prefill cases' notes name the default path and the Gluon kernels timed beside it."""
GLUON_CHECKED = {"triton_ws": "warp-specialized kernel", "triton_pair": "paired kernel"}
"""The Gluon kernels beside the default path whose results a case's check compares with f64, and their words."""


def gluon_companions(
    call: AttentionArgs, kv_format: str | None, sweep: bool
) -> tuple[dict[str, Callable[[], object]], dict[str, Callable[[], object]]]:
    """The Gluon kernels timed beside the default path on ``call``, as ``(impls, swept)``: with ``sweep``, the
    warp-specialized kernel's swept tiles; where the paired kernel is the default (BF16 rows on sm_90), the
    warp-specialized default as ``triton_ws`` and, with ``sweep``, the paired kernel at one program an item; on an
    FP8 cache, the warp-specialized kernel in its staged tile (``attention_ws.STAGED_TILES``) as
    ``triton_ws_staged`` and the paired kernel with its FP8 producer as ``triton_pair``."""
    impls: dict[str, Callable[[], object]] = {}
    swept: dict[str, Callable[[], object]] = {}
    if attention_ws.available(call):
        if sweep:
            fp8 = kv_format is not None
            swept = {attention_ws.label(t, fp8): functools.partial(attention_ws.sparse_attention_ws, call, t)
                     for t in attention_ws.sweep_tiles(kv_format)}  # fmt: skip
        if kv_format in attention_ws.STAGED_TILES:
            staged = attention_ws.STAGED_TILES[kv_format]
            impls["triton_ws_staged"] = functools.partial(attention_ws.sparse_attention_ws, call, staged)
    if attention_pair.default_for(call):
        impls["triton_ws"] = functools.partial(attention_ws.sparse_attention_ws, call)
        if sweep:
            swept["triton_pair[per_item]"] = functools.partial(attention_pair.sparse_attention_pair, call,
                                                               persistent=False)  # fmt: skip
    elif attention_pair.available(call):
        impls["triton_pair"] = functools.partial(attention_pair.sparse_attention_pair, call)
    return impls, swept


def decode_case(
    b: int,
    h: int,
    kv_format: str | None,
    sweep: bool,
    device: str | torch.device = DEVICE,
    context_rows: int = CONTEXT_ROWS,
    topk: int = TOPK,
) -> Callable[[bool], Built]:
    """The decode case of ``b`` requests and ``h`` heads over KV in ``kv_format`` (``device``, ``context_rows``
    and ``topk``: smaller inputs for a test on the CPU)."""

    def build(with_compile: bool) -> Built:
        x = decode_inputs(b, h, kv_format, device, context_rows, topk)
        M, scale = x["M"], DIM**-0.5
        out = torch.empty(M, h, DIM, device=device)
        lse = torch.empty(M, h, device=device)
        kv, idx, q, sink, kv_cache = x["kv"], x["indices"], x["q"], x["sink"], x["kv_cache"]

        def call(
            o: torch.Tensor,
            s: torch.Tensor,
            precision: str,
            rows: slice = slice(None),
            cfg: attention.Config | None = None,
        ) -> AttentionArgs:
            """The decode call on query rows ``rows``, results into ``o`` and ``s``."""
            return AttentionArgs(q[rows], kv, idx[rows], sink, scale, DIM, False, o, s, kv_cache, precision, cfg)

        def triton_fn(precision: str, cfg: attention.Config | None = None) -> Callable[[], object]:
            """The ``tl`` kernel (in tile ``cfg``, default: its own)."""
            launch = call(out, lse, precision, cfg=cfg)
            return lambda: attention.sparse_attention(launch)

        default_call = call(out, lse, "bf16")

        def eager(precision: str) -> Callable[[], object]:
            twin = call(torch.empty_like(out), torch.empty_like(lse), precision)
            return lambda: attention_naive.sparse_attention(twin)

        impls = {
            "triton": lambda: dispatch.run(default_call),  # the default path (fast.cache.dispatch)
            "triton_tl": triton_fn("bf16"),
            "triton_f32p": triton_fn("f32"),
            "triton+checks": lambda: attention_api(q, kv, idx, sink, scale=scale, dv=DIM, precision="bf16",
                                                   kv_format=kv_format, out=out, lse=lse),
            "torch_eager": eager("bf16"),
        }  # fmt: skip
        default = attention.default_config(h, DIM, kv_format, "bf16")
        if kv_format == "v4_584":  # the earlier decode of the e4m3 codes by integer operations, for comparison
            # one stage at every head count: two overflow sm_90's shared memory at D = 512 (246,528 bytes under
            # Triton 3.6 in the 16-head tile), and an explicit tile is launched as given (fast.fitting)
            impls["triton_int_decode"] = triton_fn("bf16", dataclasses.replace(default, native_fp8=False, num_stages=1))
        beside, gluon_tiles = gluon_companions(default_call, kv_format, sweep)
        impls |= beside
        if with_compile:
            compiled = torch.compile(attention_naive.sparse_attention, dynamic=False)
            compiled_call = call(torch.empty_like(out), torch.empty_like(lse), "bf16")
            impls["torch_compile"] = lambda: compiled(compiled_call)
        tiles = [*SWEEP, *(dataclasses.replace(default, prefetch=n) for n in PREFETCH_SWEEP)] if sweep else []
        sweep_impls = {sweep_label(c): triton_fn("bf16", c) for c in tiles} | gluon_tiles
        flops, moved = attention_model(M, h, topk, x["row_bytes"])

        def check() -> str:
            n = min(8, M)
            rows = slice(0, n)
            ref_o, ref_l = torch.empty(n, h, DIM, device=device), torch.empty(n, h, device=device)
            attention_naive.sparse_attention(call(ref_o, ref_l, "f64", rows))
            parts = []
            ws = [(f"{GLUON_CHECKED[k]}, bf16 p", impls[k]) for k in GLUON_CHECKED if k in impls]
            for label, fn in (("bf16 p", impls["triton"]), ("tl kernel, bf16 p", impls["triton_tl"]),
                              ("f32 p", impls["triton_f32p"]), *ws):  # fmt: skip
                fn()
                err = (out[rows] - ref_o).abs().max().item()
                lerr = (lse[rows] - ref_l).abs().max().item()
                parts.append(f"{label}: max |out - f64| {err:.2e}, |lse - f64| {lerr:.2e}")
            o, s = torch.empty_like(ref_o), torch.empty_like(ref_l)
            attention_naive.sparse_attention(call(o, s, "bf16", rows))
            parts.append(f"torch bf16: {(o - ref_o).abs().max().item():.2e}")
            if sweep_impls:  # a swept tile is timed only; its result is checked here, once (none under --no-sweep)
                errors = {}
                for label, fn in sweep_impls.items():
                    fn()
                    errors[label] = (out[rows] - ref_o).abs().max().item()
                worst = max(errors, key=lambda k: errors[k])
                parts.append(f"swept tiles, bf16 p: max |out - f64| {errors[worst]:.2e} ({worst})")
            return "; ".join(parts)

        notes = [f"M = {M} query rows ({b} requests x {QUERIES_PER_REQUEST}), {h} heads, top-k {topk} distinct rows "
                 f"of {context_rows} per request, D = dv = {DIM}, {KV_WORDS[kv_format]} KV; "
                 f"{DEFAULT_PATH}, probabilities rounded to bf16 (FlashMLA style); {GLUON_COMPANIONS}; "
                 "triton_tl: the tl kernel, bf16 p; triton_f32p: the tl kernel, p kept at f32 precision; torch: bf16 "
                 "matmuls on gathered rows"]  # fmt: skip
        return Built(impls, moved, flops, check, sweep=sweep_impls, notes=notes)

    return build


def register_all() -> None:
    if any(c.name.startswith("cache/") for c in bench.CASES):
        return
    for conv in FORMATS:
        bench.register(Case(f"cache/store_{conv}", "cache", f"quantize-and-store {ROWS} rows, {conv}",
                            store_case(conv)))  # fmt: skip
    for conv in ("v4_584", "v41_fp4_288"):
        bench.register(Case(f"cache/gather_{conv}", "cache", f"gather-and-dequantize {ROWS} rows, {conv}",
                            gather_case(conv)))  # fmt: skip
    for kv_format, kind in KV_KINDS.items():
        for b in (64, 128):
            for h in (64, 128):
                sweep = (b, h) == (128, 64)
                bench.register(Case(f"cache/decode_{kind}_b{b}_h{h}", "cache",
                                    f"sparse decode b={b} h={h} top-k {TOPK}, {KV_WORDS[kv_format]} KV",
                                    decode_case(b, h, kv_format, sweep=sweep)))  # fmt: skip


register_all()


def summary(report: dict[str, Any]) -> str:
    """TFLOP/s, roofline fraction and the issue's targets, from a harness report."""
    copy_gbs = float(report["copy"]["gbs"])
    lines = [
        "# Cache kernels on " + report["machine"]["gpu"],
        "",
        f"`{report['command']}`, torch {report['machine']['torch']}, triton {report['machine']['triton']}, "
        f"{report['date']}. Copy bandwidth {copy_gbs:.0f} GB/s; bf16 dense peak {H200_BF16_DENSE_TFLOPS} TFLOP/s.",
        "",
        "| case | impl | ms | TFLOP/s | GB/s | % of roofline |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for case in report["cases"]:
        if not case["name"].startswith("cache/"):
            continue
        flops, moved = case["flops"], case["bytes"]
        roof_ms = max(flops / (H200_BF16_DENSE_TFLOPS * 1e9), moved / (copy_gbs * 1e6))
        for impl, r in {**case["results"], **case.get("sweep", {})}.items():
            if "ms" not in r:
                lines.append(f"| {case['name']} | {impl} | error | | | |")
                continue
            tflops = flops / r["ms"] / 1e9
            lines.append(f"| {case['name']} | {impl} | {r['ms']:.4g} | {tflops:.0f} | {r['gbs']:.0f} | "
                         f"{100 * roof_ms / r['ms']:.0f}% |")  # fmt: skip
        if case.get("check"):
            lines.append(f"| {case['name']} | check: {case['check']} | | | | |")
    targets = [t for t in bench_report.targets(report) if t["case"].startswith("cache/")]
    return "\n".join([*lines, "", "## Targets", "", *bench_report.target_table(targets)]) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fast.cache.bench_cases", description="cache benchmarks")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("results/cache"))
    parser.add_argument("--no-compile", action="store_true")
    parser.add_argument("--only", action="append", default=[], help="cases whose name contains this (repeatable)")
    parser.add_argument("--quick", action="store_true", help="only store v4_584 and decode bf16 b=128 h=64")
    args = parser.parse_args(argv)
    only = args.only or (["cache/store_v4_584", "cache/decode_bf16_b128_h64"] if args.quick else ["cache/"])
    harness = ["--out", str(args.out), "--budget-s", "1e9"] + [arg for o in only for arg in ("--only", o)]
    status = bench.main([*harness, *(["--no-compile"] if args.no_compile else [])])
    if status == 0:
        report = json.loads((args.out / "bench.json").read_text())
        text = summary(report)
        (args.out / "cache_summary.md").write_text(text)
        print(text)
    return status


if __name__ == "__main__":
    from fast.cache import bench_cases

    sys.exit(bench_cases.main())
