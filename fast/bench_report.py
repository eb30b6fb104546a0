"""The benchmark report: the kernel targets evaluated on a run's own times, and its Markdown tables.

    targets(report) -> rows; target_table(rows) -> Markdown lines; markdown(report) -> bench.md;
    render(report, out) -> writes bench.md and roofline.png

A report is the JSON ``fast.bench`` writes (``bench.json``); everything here reads only that, so a saved run
can be rendered again on any machine (``python -m fast.bench --render``).
"""

from __future__ import annotations

import pathlib
from typing import Any

DECODE_SHAPES = ((64, 64), (64, 128), (128, 64), (128, 128))
"""(requests, heads) of the sparse decode cases: FP8 KV must beat torch.compile and the BF16-KV path on each."""
TOPK_CASES = ("128x256K_k2048_v4.1", "128x256K_k2048_v4-prefill", "6x256K_k2048_v4.1", "4096x16K_k2048_v4.1",
              "64x64K_k512_select", "6x1024K_k1024_v4.1", "256x64K_k512_v4.1", "4096x4K_k512_v4.1",
              "4096x16K_k1024_v4.1", "128x256K_k2048_v4.1_ties")  # fmt: skip
"""The top-k cases: the Triton top-k must beat torch.topk alone (no mask, no sort) on each, by 2x on the first."""

FP8_KV = {"fp8": "V4 FP8 KV", "fp8v41": "V4.1 FP8 KV"}
"""The FP8-KV decode cases (584 B and 528 B rows) and how their targets name them."""
PREFILL_CASES = ("prefill_bf16_sq4096_kv8K_h64_k2048", "prefill_bf16_sq4096_kv8K_h128_k2048",
                 "prefill_bf16_sq4096_kv64K_h64_k2048", "prefill_bf16_sq4096_kv64K_h128_k2048",
                 "prefill_bf16_sq4096_kv8K_h64_k128w512")  # fmt: skip
"""The BF16-KV sparse prefill cases: each at least 400 TFLOP/s."""

# the cases that carry a kernel target (``targets``): their torch.compile baselines are timed whatever the budget
TARGET_CASES = frozenset(
    {
        "compression/c2_prefill_1M",
        "compression/v4_overlap_prefill_1M",
        "compression/decode_v4_B128",
        "indexing/logits_bf16_4096x16384",
        "indexing/logits_fp8qk_4096x16384",
        "indexing/topk_128x256K_k2048_v4.1",
        "indexing/topk_slots_128x256K_k2048",
        "cache/store_v4_584",
        "cache/decode_bf16_b128_h64",
        *(f"cache/decode_{kv}_b{b}_h{h}" for kv in FP8_KV for b, h in DECODE_SHAPES),
        *(f"cache/{name}" for name in PREFILL_CASES),
        *(f"indexing/topk_{shape}" for shape in TOPK_CASES),
        "indexing/paged_fp8qk_B128_n2_ctx32K",
    }
)


def targets(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The kernel issues' targets, evaluated on this run (a target whose inputs are missing is reported as such);
    each row names its case, so a family's summary can take its own."""
    by_name = {c["name"]: c["results"] for c in report["cases"]}

    def ms(case: str, impl: str) -> float | None:
        value = by_name.get(case, {}).get(impl, {}).get("ms")
        return float(value) if value is not None else None

    out = []

    def against_compile(case: str, label: str, factor: float) -> None:
        mine = ms(case, "triton")
        options = {impl: ms(case, impl) for impl in ("torch_compile", "torch_compile_plain")}
        timed = {k: v for k, v in options.items() if v is not None}
        best = min(timed, key=lambda k: timed[k]) if timed else None
        base = timed[best] if best else None
        ratio = None if not (mine and base) else base / mine
        out.append({"case": case, "target": label, "triton_ms": mine, "baseline": best, "baseline_ms": base,
                    "ratio": ratio, "met": None if ratio is None else ratio >= factor,
                    "target_ms": None if base is None else base / factor})  # fmt: skip

    against_compile("compression/c2_prefill_1M", "C2 prefill 1M x 512: Triton at or below torch.compile", 1.0)
    against_compile("compression/v4_overlap_prefill_1M", "V4 overlap r=4 prefill 1M x 512: >= 1.8x torch.compile", 1.8)
    for suffix, empty_key in ((" (graph)", "graph_ms"), ("", "ms")):
        dec, empty = ms("compression/decode_v4_B128", "triton" + suffix), report.get("empty_kernel", {}).get(empty_key)
        out.append({"case": "compression/decode_v4_B128",
                    "target": f"decode, 128 requests, one launch: within 2x of an empty kernel{suffix}",
                    "triton_ms": dec, "baseline": f"empty Triton kernel{suffix}", "baseline_ms": empty,
                    "ratio": None if not (dec and empty) else dec / empty,
                    "met": None if not (dec and empty) else dec <= 2 * empty,
                    "target_ms": None if not empty else 2 * empty})  # fmt: skip

    def rate(case: str, label: str, tflops: float) -> None:
        mine = ms(case, "triton")
        flops = next((c["flops"] for c in report["cases"] if c["name"] == case), None)
        achieved = None if not (mine and flops) else flops / mine / 1e9
        out.append({"case": case, "target": label, "triton_ms": mine, "baseline": f"{tflops:g} TFLOP/s",
                    "baseline_ms": None if not flops else flops / tflops / 1e9,
                    "ratio": None if achieved is None else achieved / tflops,
                    "met": None if achieved is None else achieved >= tflops,
                    "target_ms": None if not flops else flops / tflops / 1e9})  # fmt: skip

    def at_most(case: str, impl: str, label: str, limit_ms: float) -> None:
        mine = ms(case, impl)
        out.append(
            {
                "case": case,
                "target": label,
                "triton_ms": mine,
                "baseline": "limit",
                "baseline_ms": limit_ms,
                "ratio": None if not mine else limit_ms / mine,
                "met": None if not mine else mine <= limit_ms,
                "target_ms": limit_ms,
            }
        )

    def relative(case: str, impl: str, label: str, base_impl: str, factor: float) -> None:
        mine, base = ms(case, impl), ms(case, base_impl)
        out.append({"case": case, "target": label, "triton_ms": mine, "baseline": base_impl, "baseline_ms": base,
                    "ratio": None if not (mine and base) else mine / base,
                    "met": None if not (mine and base) else mine <= factor * base,
                    "target_ms": None if not base else factor * base})  # fmt: skip

    rate("indexing/logits_bf16_4096x16384", "logits 4096 x 16384, 64 x 128, bf16: >= 400 TFLOP/s", 400.0)
    rate("indexing/logits_fp8qk_4096x16384", "logits 4096 x 16384, 64 x 128, FP8 q and k: >= 800 TFLOP/s", 800.0)
    topk = "indexing/topk_128x256K_k2048_v4.1"
    at_most(topk, "triton", "top-k 128 x 262144, k = 2048, -1 fill, index order: <= 0.25 ms", 0.25)
    at_most(topk, "triton (graph)", "the same, as a CUDA graph replay: <= 0.25 ms", 0.25)
    for suffix in ("", " (graph)"):
        relative("indexing/topk_slots_128x256K_k2048", "triton" + suffix,
                 f"slot translation fused into top-k: <= 5% over top-k{suffix}", "triton_topk_alone" + suffix,
                 1.05)  # fmt: skip
    store = "cache/store_v4_584"
    copy_gbs = report.get("copy", {}).get("gbs")
    store_bytes = next((c["bytes"] for c in report["cases"] if c["name"] == store), None)
    at_80_percent = None if not (copy_gbs and store_bytes) else store_bytes / (0.8 * copy_gbs) / 1e6
    for suffix in ("", " (graph)"):
        mine = by_name.get(store, {}).get("triton" + suffix, {})
        frac = mine.get("fraction_of_copy")
        out.append({"case": store,
                    "target": f"store 8192 x 512 f32 rows, V4 584 B: >= 80% of the 1 GiB copy's bandwidth{suffix}",
                    "triton_ms": mine.get("ms"), "baseline": f"copy {copy_gbs:.0f} GB/s" if copy_gbs else "copy",
                    "baseline_ms": None, "ratio": frac, "met": None if frac is None else frac >= 0.8,
                    "target_ms": at_80_percent})  # fmt: skip
        same = by_name.get(store, {}).get("copy_same_bytes" + suffix, {}).get("ms")
        ratio = None if not (mine.get("ms") and same) else same / mine["ms"]
        out.append({"case": store,
                    "target": f"the same: >= 80% of the bandwidth a copy of its bytes reaches at this size{suffix}",
                    "triton_ms": mine.get("ms"), "baseline": "copy_same_bytes" + suffix, "baseline_ms": same,
                    "ratio": ratio, "met": None if ratio is None else ratio >= 0.8,
                    "target_ms": None if not same else same / 0.8})  # fmt: skip
    rate("cache/decode_bf16_b128_h64", "sparse decode b = 128, h = 64, top-k 2048, bf16 KV: >= 200 TFLOP/s", 200.0)

    def faster(case: str, label: str, base_case: str, base_impl: str, factor: float, suffix: str = "") -> None:
        """Triton on ``case`` at least ``factor`` times as fast as ``base_impl`` on ``base_case``, both launched
        or (``suffix`` " (graph)") both replayed from CUDA graphs."""
        mine, base = ms(case, "triton" + suffix), ms(base_case, base_impl + suffix)
        ratio = None if not (mine and base) else base / mine
        out.append({"case": case, "target": label, "triton_ms": mine, "baseline": f"{base_case} {base_impl}{suffix}",
                    "baseline_ms": base, "ratio": ratio, "met": None if ratio is None else ratio >= factor,
                    "target_ms": None if base is None else base / factor})  # fmt: skip

    for kv, what in FP8_KV.items():
        rate(f"cache/decode_{kv}_b128_h64", f"sparse decode b = 128, h = 64, top-k 2048, {what}: >= 250 TFLOP/s", 250.0)
        for b, h in DECODE_SHAPES:
            fp8, bf16 = f"cache/decode_{kv}_b{b}_h{h}", f"cache/decode_bf16_b{b}_h{h}"
            against_compile(fp8, f"sparse decode b = {b}, h = {h}, {what}: faster than torch.compile", 1.0)
            faster(fp8, f"sparse decode b = {b}, h = {h}, {what}: faster than our BF16-KV path", bf16, "triton", 1.0)
    for name in PREFILL_CASES:
        rate(f"cache/{name}", f"sparse prefill {name.removeprefix('prefill_bf16_')}, bf16 KV: >= 400 TFLOP/s", 400.0)
    for fp8, bf16, what in (
        ("indexing/logits_fp8qk_4096x16384", "indexing/logits_bf16_4096x16384", "logits 4096 x 16384"),
        ("indexing/paged_fp8qk_B128_n2_ctx32K", "indexing/paged_bf16_B128_n2_ctx32K", "paged logits B 128, 32K"),
    ):
        faster(fp8, f"{what}, FP8 q and k: >= 1.5x our bf16 rate", bf16, "triton", 1.5)
    for suffix in ("", " (graph)"):  # launched, and as kernel time (no host work between the kernels)
        for i, shape in enumerate(TOPK_CASES):
            case, factor = f"indexing/topk_{shape}", 2.0 if i == 0 else 1.0
            rule = "at least 2x torch.topk alone" if factor > 1 else "faster than torch.topk alone"
            label = f"top-k {shape}: {rule}"
            faster(case, label + suffix, case, "torch_topk_plain", factor, suffix)
    return out


def fp8_table(report: dict[str, Any]) -> list[str]:
    """Markdown lines: each FP8 tensor-core case as a fraction of the FP8 GEMM ceiling measured in the same run."""
    from fast.plot import compute_of

    peak = report.get("ceilings", {}).get("fp8", {}).get("tflops")
    rows = [c for c in report["cases"] if compute_of(c) == "fp8" and c.get("flops")]
    if not (peak and rows):
        return []
    lines = ["| case | Triton ms | TFLOP/s | of the FP8 GEMM ceiling |", "|---|---:|---:|---:|"]
    for c in rows:
        mine = c["results"].get("triton", {}).get("ms")
        if mine:
            tflops = c["flops"] / mine / 1e9
            lines.append(f"| {c['name']} | {mine:.4g} | {tflops:.0f} | {100 * tflops / peak:.0f}% |")
    return lines


def target_table(rows: list[dict[str, Any]]) -> list[str]:
    """Markdown lines of target rows (``targets``)."""
    fmt = lambda x: "" if x is None else f"{x:.4g}"  # noqa: E731
    lines = ["| target | Triton ms | baseline | baseline ms | ratio | met |", "|---|---:|---|---:|---:|---|"]
    for t in rows:
        lines.append(f"| {t['target']} | {fmt(t['triton_ms'])} | {t['baseline']} | {fmt(t['baseline_ms'])} "
                     f"| {fmt(t['ratio'])} | {t['met']} |")  # fmt: skip
    return lines


def summary_table(report: dict[str, Any]) -> list[str]:
    """Markdown lines: one row per target, Triton beside torch.compile and eager and the case's floor."""
    from fast.plot import best_ms, headline_rows

    by_target = {r["label"]: r for r in headline_rows(report)}
    fmt = lambda x: "" if x is None else f"{x:.4g}"  # noqa: E731
    lines = ["| target | Triton ms | torch.compile ms | eager ms | Triton / floor | target / floor | met |",
             "|---|---:|---:|---:|---:|---:|---|"]  # fmt: skip
    by_name = {c["name"]: c["results"] for c in report["cases"]}
    for t in report["targets"]:
        suffix = " (graph)" if t["target"].endswith(" (graph)") else ""
        results = by_name.get(t["case"], {})
        row = by_target.get(t["target"], {})
        compiled, eager = (best_ms(results, impl, suffix) for impl in ("torch_compile", "torch_eager"))
        mine, goal = row.get("times", {}).get("triton"), row.get("target")
        lines.append(f"| {t['target']} | {fmt(t['triton_ms'])} | {fmt(compiled)} | {fmt(eager)} | {fmt(mine)} "
                     f"| {fmt(goal)} | {t['met']} |")  # fmt: skip
    return lines


def markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    ceilings = report.get("ceilings", {})
    peaks = ", ".join(
        f"{name} GEMM {ceilings[name]['tflops']:.0f} TFLOP/s"
        for name in ("bf16", "fp8")
        if "tflops" in ceilings.get(name, {})
    )
    lines = [
        "# Benchmarks",
        "",
        f"`{report['command']}` on {m['gpu']} (torch {m['torch']}, triton {m['triton']}, CUDA {m['cuda']}), "
        f"{report['date']}.",
        "",
        f"Device copy (1 GiB, read + write): {report['copy']['gbs']:.0f} GB/s"
        + (f"; {peaks} ({ceilings.get('gemm_size')}^3)" if peaks else "")
        + f". Empty Triton kernel: {report['empty_kernel']['ms'] * 1e3:.1f} us launched from Python, "
        f"{report['empty_kernel'].get('graph_ms', float('nan')) * 1e3:.1f} us replayed from a CUDA graph. Median of "
        "many runs, L2 flushed before each (256 MiB zeroed). NAME (graph): the same call captured in a CUDA graph "
        "and replayed (no host launch work).",
        "",
        "## Summary",
        "",
        "Each kernel target on this run (`headline.png` draws it). The floor of a case is a copy of the same "
        "bytes timed the same way, or else the longer of its bytes at the copy bandwidth and its FLOPs at the "
        "GEMM peak of its precision (bf16, or FP8 for the FP8-query cases).",
        "",
        *summary_table(report),
        "",
        "## Every case",
        "",
        "| case | implementation | ms | GB/s | of copy |",
        "|---|---|---:|---:|---:|",
    ]
    for case in report["cases"]:
        for impl, r in case["results"].items():
            cells = (
                "error | | " if "error" in r else f"{r['ms']:.4g} | {r['gbs']:.0f} | {100 * r['fraction_of_copy']:.0f}%"
            )
            lines.append(f"| {case['name']} | {impl} | {cells} |")
    failed = [f"- {c['name']}: {c['error']}" for c in report["cases"] if "error" in c]
    if failed:
        lines += ["", "Cases that failed to build (no result):", "", *failed]
    checks = [f"- {c['name']}: {c['check']}" for c in report["cases"] if c.get("check")]
    if checks:
        lines += ["", "Checks of each case's output against torch:", "", *checks]
    lines += [
        "",
        "## Targets",
        "",
        "The kernel targets on this run. Compression prefill: against the faster torch.compile baseline (naive "
        "version, plain reshape formula), ratio = baseline / Triton; decode and slot fusion: ratio = Triton / "
        "baseline; rates and the store against the 1 GiB copy: ratio = achieved / target; the store against a copy "
        "of its own bytes: ratio = copy time / store time.",
        "",
        *target_table(report["targets"]),
    ]
    fp8 = fp8_table(report)
    if fp8:
        lines += ["", "## FP8 cases against the FP8 GEMM ceiling", "", *fp8]
    sweeps = [(c["name"], k, r) for c in report["cases"] for k, r in c.get("sweep", {}).items()]
    if sweeps:
        lines += [
            "",
            "## Triton tile variants",
            "",
            "| case | tiles | ms | GB/s | of copy |",
            "|---|---|---:|---:|---:|",
        ]
        for name, k, r in sweeps:
            ok = "error" not in r
            cell = f"{r['ms']:.4g} | {r['gbs']:.0f} | {100 * r['fraction_of_copy']:.0f}%" if ok else "error | | "
            lines.append(f"| {name} | {k} | {cell} |")
    notes = [f"- {c['name']}: {n}" for c in report["cases"] for n in c["notes"]]
    if notes:
        lines += ["", "## Notes", "", *notes]
    return "\n".join(lines) + "\n"


def render(report: dict[str, Any], out: pathlib.Path) -> int:
    """bench.md, headline.png and roofline.png of a report (its targets evaluated again)."""
    report["targets"] = targets(report)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.md").write_text(markdown(report))
    try:
        from fast.plot import plot

        plot(report, out / "roofline.png")
    except ImportError as err:
        print(f"fast.bench: no plot ({err}); run `python -m fast.plot {out / 'bench.json'}` elsewhere")
    print(markdown(report))
    return 0
