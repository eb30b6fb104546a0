"""Roofline plot of a benchmark run: ``python -m fast.plot results/bench.json [--out results/roofline.png]``.

Left: achieved GFLOP/s against arithmetic intensity (FLOP per byte moved, both from each case's model), under
the memory roof of the copy bandwidth measured in the same run. Right: the fraction of that bandwidth each
implementation reached, per case. Uses matplotlib's Agg backend (no display needed).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import Any

MARKERS = {"triton": "o", "triton+checks": "s", "torch_eager": "v", "torch_compile": "^"}


def plot(report: dict[str, Any], out: pathlib.Path) -> pathlib.Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    copy_gbs = float(report["copy"]["gbs"])
    cases = report["cases"]
    impls: list[str] = []
    for case in cases:
        impls += [i for i, r in case["results"].items() if i not in impls and "ms" in r]
    colors = {impl: plt.get_cmap("tab10")(i % 10) for i, impl in enumerate(impls)}
    fig, (roof, bars) = plt.subplots(1, 2, figsize=(16, 6.5), gridspec_kw={"width_ratios": [1, 1.4]})

    intensities = [c["flops"] / c["bytes"] for c in cases if c["bytes"]]
    lo, hi = min(intensities, default=0.1) / 4, max(intensities, default=1.0) * 4
    xs = [lo, hi]
    roof.plot(xs, [x * copy_gbs for x in xs], "k--", lw=1, label=f"copy bandwidth {copy_gbs:.0f} GB/s")
    for case in cases:
        if not case["bytes"]:
            continue
        x = case["flops"] / case["bytes"]
        for impl, r in case["results"].items():
            if "ms" not in r:
                continue
            gflops = case["flops"] / r["ms"] / 1e6
            roof.scatter(x, gflops, color=colors[impl], marker=MARKERS.get(impl, "D"), s=36)
        label_ms = case["results"].get("triton", {}).get("ms")
        if label_ms:
            where = (x, case["flops"] / label_ms / 1e6)
            roof.annotate(case["name"].split("/")[-1], where, fontsize=7, xytext=(4, 2), textcoords="offset points")
    for impl in impls:
        roof.scatter([], [], color=colors[impl], marker=MARKERS.get(impl, "D"), label=impl)
    roof.set_xscale("log")
    roof.set_yscale("log")
    roof.set_xlabel("arithmetic intensity (FLOP / byte moved)")
    roof.set_ylabel("achieved GFLOP/s")
    roof.set_title("roofline (memory roof = measured device copy)")
    roof.legend(fontsize=7, loc="upper left")
    roof.grid(True, which="both", alpha=0.3)

    width = 0.8 / max(len(impls), 1)
    for k, impl in enumerate(impls):
        ys = [100 * c["results"].get(impl, {}).get("fraction_of_copy", 0.0) for c in cases]
        bars.bar([i + k * width for i in range(len(cases))], ys, width, color=colors[impl], label=impl)
    bars.set_xticks([i + 0.4 - width / 2 for i in range(len(cases))])
    bars.set_xticklabels([c["name"].split("/")[-1] for c in cases], rotation=60, ha="right", fontsize=7)
    bars.set_yscale("log")
    bars.set_ylabel("% of measured copy bandwidth (log)")
    bars.axhline(100, color="k", lw=0.8, ls="--")
    bars.set_title("effective bandwidth per case")
    bars.legend(fontsize=7)
    m = report.get("machine", {})
    fig.suptitle(
        f"{m.get('gpu', '?')} - torch {m.get('torch', '?')}, triton {m.get('triton', '?')} - {report.get('date', '')}"
    )
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fast.plot", description="roofline plot of a bench.json")
    parser.add_argument("report", type=pathlib.Path)
    parser.add_argument("--out", type=pathlib.Path, help="default: roofline.png beside the report")
    args = parser.parse_args(argv)
    report = json.loads(args.report.read_text())
    out = plot(report, args.out or args.report.with_name("roofline.png"))
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
