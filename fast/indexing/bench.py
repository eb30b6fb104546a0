"""Run the indexing benchmarks and summarize them against the issue's targets.

    python -m fast.indexing.bench --out results/indexing [--budget-s 200] [--no-compile] [--only NAME]

Registers ``fast.indexing.bench_cases`` with ``fast.bench``, runs ``fast.bench.main`` on the ``indexing/``
cases (bench.json, bench.md, roofline.png under ``--out``), measures the bf16 matrix rate in the same run
(torch.matmul 8192^3, the ceiling for the logits), and writes ``summary.md``: each implementation's time,
TFLOP/s or GB/s and fraction of the measured ceilings, the fastest tile of each sweep, and the targets.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import Any

import torch

from fast import bench, bench_report

MATMUL_N = 8192


def matmul_rate() -> dict[str, Any]:
    """bf16 torch.matmul of two 8192 x 8192 random matrices: 2 n^3 / median time."""
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(MATMUL_N, MATMUL_N, device="cuda", generator=g).bfloat16()
    b = torch.randn(MATMUL_N, MATMUL_N, device="cuda", generator=g).bfloat16()
    timing = bench.time_ms(lambda: a @ b)
    return {**timing, "tflops": 2 * MATMUL_N**3 / timing["ms"] / 1e9}


def _rate(case: dict[str, Any], result: dict[str, Any], copy_gbs: float, peak: float) -> str:
    if "error" in result:
        return "error: " + result["error"][:80]
    ms = result["ms"]
    if case["flops"]:
        tflops = case["flops"] / ms / 1e9
        return f"{ms:.4g} ms, {tflops:.0f} TFLOP/s ({100 * tflops / peak:.0f}% of matmul), {result['gbs']:.0f} GB/s"
    return f"{ms:.4g} ms, {result['gbs']:.0f} GB/s ({100 * result['gbs'] / copy_gbs:.0f}% of copy)"


def summary(report: dict[str, Any], matmul: dict[str, Any]) -> str:
    copy_gbs, peak = report["copy"]["gbs"], matmul["tflops"]
    m = report["machine"]
    lines = [
        "# Indexing kernels: benchmarks",
        "",
        f"`python -m fast.indexing.bench` on {m['gpu']} (torch {m['torch']}, triton {m['triton']}), {report['date']}.",
        f"Ceilings measured in the same run: copy {copy_gbs:.0f} GB/s (read + write), bf16 matmul "
        f"{peak:.0f} TFLOP/s (torch.matmul {MATMUL_N}^3). Median of many runs, L2 flushed before each.",
        "",
        "## Targets",
        "",
        *bench_report.target_table([t for t in bench_report.targets(report) if t["case"].startswith("indexing/")]),
    ]
    lines += ["", "## Cases", ""]
    for case in report["cases"]:
        lines.append(f"### {case['name']}")
        lines.append("")
        lines.append(
            f"{case['description']}; {case['bytes'] / 1e6:.4g} MB moved, {case['flops'] / 1e9:.4g} GFLOP; "
            f"check: {case.get('check', '')}"
        )
        lines.append("")
        for impl, result in case["results"].items():
            lines.append(f"- {impl}: {_rate(case, result, copy_gbs, peak)}")
        sweep = {k: v for k, v in case.get("sweep", {}).items() if "ms" in v}
        if sweep:
            best = min(sweep, key=lambda k: sweep[k]["ms"])
            lines.append(f"- sweep ({len(sweep)} tiles), fastest {best}: {_rate(case, sweep[best], copy_gbs, peak)}")
            lines += [f"  - {k}: {v['ms']:.4g} ms" for k, v in sorted(sweep.items(), key=lambda kv: kv[1]["ms"])]
        lines += [f"- note: {n}" for n in case.get("notes", [])]
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fast.indexing.bench", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("results/indexing"))
    parser.add_argument("--only", action="append", default=[], help="run cases whose name contains this")
    parser.add_argument("--budget-s", type=float, default=240.0, help="after this, torch.compile baselines are skipped")
    parser.add_argument("--no-compile", action="store_true")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("fast.indexing.bench: no CUDA device; the benchmarks run only on a GPU.", file=sys.stderr)
        return 2
    import fast.indexing.bench_cases  # noqa: F401  (registers the cases)

    matmul = matmul_rate()
    print(f"bf16 matmul {matmul['tflops']:.0f} TFLOP/s", flush=True)
    only = [f"indexing/{o}" if not o.startswith("indexing/") else o for o in args.only] or ["indexing/"]
    forwarded = ["--out", str(args.out), "--budget-s", str(args.budget_s)]
    forwarded += [x for o in only for x in ("--only", o)] + (["--no-compile"] if args.no_compile else [])
    status = bench.main(forwarded)
    if status:
        return status
    report = json.loads((args.out / "bench.json").read_text())
    report["matmul"] = matmul
    (args.out / "bench.json").write_text(json.dumps(report, indent=1))
    text = summary(report, matmul)
    (args.out / "summary.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
