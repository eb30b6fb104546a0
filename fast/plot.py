"""The benchmark's pictures: ``python -m fast.plot results/bench.json [--out DIR]``.

- ``headline.png``, "is it fast": one row per kernel target. Each implementation's time is drawn as a multiple of
  the case's floor (a device copy of the same bytes, timed the same way in the same run; where the case has none,
  the time its bytes take at the measured copy bandwidth or its FLOPs at the measured GEMM peak, whichever is
  longer), on a log axis. 1x is the hardware's limit for that work; the target is the vertical mark on each row.
- ``roofline.png``: achieved TFLOP/s against arithmetic intensity for every case with a FLOP count, under the
  measured roofs (the copy bandwidth, and the bf16 and FP8 GEMM peaks where the run measured them). Only the
  first eight target cases (in the targets' order) are labelled, each in its own colour; every other case is a
  grey point. Cases without FLOPs (top-k, slots, stores) are
  in the headline chart only.

Matplotlib's Agg backend: no display needed.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import Any

BASELINES = (("triton", "Triton", "#1b5e20"), ("torch_compile", "torch.compile", "#1565c0"),
             ("torch_eager", "torch eager", "#b71c1c"))  # fmt: skip
GRAPH = " (graph)"
HEADLINE_COLORS = ("#1b5e20", "#1565c0", "#b71c1c", "#6a1b9a", "#ef6c00", "#00838f", "#5d4037", "#c2185b")


def best_ms(results: dict[str, Any], impl: str, suffix: str = "") -> float | None:
    """The fastest time of ``impl`` and its variants (``torch_compile_plain`` beside ``torch_compile``), ``suffix``
    (" (graph)" or "") alike."""
    times = [r["ms"] for name, r in results.items()
             if name.startswith(impl) and name.endswith(suffix) and (suffix or "(graph)" not in name) and "ms" in r
             and "+" not in name]  # fmt: skip
    return min(times, default=None)


def compute_of(case: dict[str, Any]) -> str:
    """The tensor-core precision of a case's FLOPs, "bf16" or "fp8" (``Built.compute``); reports written before
    that field named their one FP8 kind of case ``fp8qk``."""
    return str(case.get("compute") or ("fp8" if "_fp8qk_" in case["name"] else "bf16"))


def floor_ms(report: dict[str, Any], case: dict[str, Any], suffix: str) -> tuple[float | None, str]:
    """The least time the case's work can take on this machine, and what it is."""
    same = case["results"].get("copy_same_bytes" + suffix, {}).get("ms")
    if same:
        return float(same), "copy of the same bytes"
    memory = case["bytes"] / report["copy"]["gbs"] / 1e6 if case.get("bytes") else 0.0
    precision = compute_of(case)
    peak = report.get("ceilings", {}).get(precision, {}).get("tflops")
    compute = case["flops"] / peak / 1e9 if peak and case.get("flops") else 0.0
    if not (memory or compute):
        return None, ""
    if memory >= compute:
        return memory, "bytes at copy bandwidth"
    return compute, f"FLOPs at {precision} GEMM peak"


def headline_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per target that has a time: the case's times and target as multiples of its floor."""
    by_name = {c["name"]: c for c in report["cases"]}
    rows = []
    for t in report.get("targets", []):
        case = by_name.get(t["case"])
        if case is None or not t.get("target_ms") or not t.get("triton_ms"):
            continue
        suffix = GRAPH if t["target"].endswith(GRAPH) else ""
        floor, what = floor_ms(report, case, suffix)
        if not floor:
            continue
        times = {}
        for impl, _, _ in BASELINES:
            ms = t["triton_ms"] if impl == "triton" else best_ms(case["results"], impl, suffix)
            if ms:
                times[impl] = ms / floor
        rows.append({"label": t["target"], "times": times, "target": t["target_ms"] / floor, "met": t["met"],
                     "floor": what})  # fmt: skip
    return rows


def plot_headline(report: dict[str, Any], out: pathlib.Path) -> pathlib.Path:
    import matplotlib.pyplot as plt

    rows = headline_rows(report)
    fig, ax = plt.subplots(figsize=(13, 0.62 * len(rows) + 1.8))
    height = 0.26
    for i, row in enumerate(rows):
        y = len(rows) - 1 - i
        for k, (impl, _, color) in enumerate(BASELINES):
            if impl in row["times"]:
                ax.barh(y + (1 - k) * height, row["times"][impl], height, color=color, left=0)
        ax.plot([row["target"]] * 2, [y - 1.6 * height, y + 1.6 * height], color="black", lw=2.2)
        verdict = {True: "met", False: "not met", None: "?"}[row["met"]]
        mine = row["times"].get("triton", float("nan"))
        text = f"Triton {mine:.2f}x, target {row['target']:.2f}x: {verdict}"
        ax.annotate(
            text, (max(mine, row["target"]), y + height), xytext=(6, -3), textcoords="offset points", fontsize=8
        )
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([_wrap(r["label"]) + f"\n[floor: {r['floor']}]" for r in reversed(rows)], fontsize=8)
    ax.set_xscale("log")
    ax.axvline(1.0, color="grey", lw=1, ls="--")
    ax.set_xlim(left=min([0.8, *(0.7 * r["target"] for r in rows)]))
    ax.set_xlabel(
        "time as a multiple of the floor (1x = a copy of the same bytes, or the measured peak); lower is faster"
    )
    handles: list[Any] = [plt.Rectangle((0, 0), 1, 1, color=c) for _, _, c in BASELINES]
    handles.append(plt.Line2D([0], [0], color="black", lw=2.2))
    ax.legend(handles, [name for _, name, _ in BASELINES] + ["target"], loc="lower right", fontsize=8)
    ax.grid(True, axis="x", which="both", alpha=0.3)
    ax.set_title(_title(report, "kernel targets: Triton beside torch against the hardware floor"), fontsize=10)
    fig.tight_layout()
    return _save(fig, out)


def plot_roofline(report: dict[str, Any], out: pathlib.Path) -> pathlib.Path:
    import matplotlib.pyplot as plt

    cases = [c for c in report["cases"] if c.get("bytes") and c.get("flops")]
    drawn = {c["name"] for c in cases}
    targeted = [name for name in dict.fromkeys(t["case"] for t in report.get("targets", [])) if name in drawn]
    headline = targeted[: len(HEADLINE_COLORS)]  # one colour each; later target cases are grey points
    fig, ax = plt.subplots(figsize=(11, 7))
    xs = [c["flops"] / c["bytes"] for c in cases] or [1.0]
    lo, hi = min(xs) / 3, max(max(xs) * 3, 2000.0)
    copy_tbs = report["copy"]["gbs"] / 1e3
    peaks = {n: report.get("ceilings", {}).get(n, {}).get("tflops") for n in ("bf16", "fp8")}
    top = max((p for p in peaks.values() if p), default=hi * copy_tbs)
    ridge = min(hi, top / copy_tbs)
    ax.plot([lo, ridge], [lo * copy_tbs, ridge * copy_tbs], color="black", lw=1.2, label=f"copy {copy_tbs:.2f} TB/s")
    for name, style in (("bf16", "-."), ("fp8", ":")):
        peak = peaks[name]
        if peak:
            start = peak / copy_tbs
            ax.plot([start, hi], [peak, peak], color="black", lw=1.2, ls=style, label=f"{name} GEMM {peak:.0f} TFLOP/s")
    for c in cases:
        ms = c["results"].get("triton", {}).get("ms")
        if ms and c["name"] not in headline:
            ax.scatter(c["flops"] / c["bytes"], c["flops"] / ms / 1e9, color="#9e9e9e", s=18, zorder=2)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    labels: list[tuple[str, tuple[float, float], str]] = []
    for i, name in enumerate(headline):
        case = next(c for c in cases if c["name"] == name)
        x, color = case["flops"] / case["bytes"], HEADLINE_COLORS[i % len(HEADLINE_COLORS)]
        for impl, marker, filled in (("triton", "o", True), ("torch_compile", "s", False), ("torch_eager", "v", False)):
            ms = case["results"].get("triton", {}).get("ms") if impl == "triton" else best_ms(case["results"], impl)
            if ms:
                ax.scatter(x, case["flops"] / ms / 1e9, marker=marker, s=60, zorder=3, edgecolors=color,
                           facecolors=color if filled else "none", linewidths=1.5)  # fmt: skip
        ms = case["results"].get("triton", {}).get("ms")
        if ms:
            labels.append((name.split("/")[-1], (x, case["flops"] / ms / 1e9), color))
    for label, marker, filled in (("Triton", "o", True), ("torch.compile", "s", False), ("torch eager", "v", False)):
        ax.scatter(
            [], [], marker=marker, s=50, edgecolors="black", facecolors="black" if filled else "none", label=label
        )
    ax.scatter([], [], color="#9e9e9e", s=18, label="other cases (Triton)")
    ax.autoscale_view()  # the final limits, so that label positions in pixels hold
    placed: list[tuple[float, float]] = []
    for text, point, color in labels:
        offset = _free_offset(ax, point, placed)
        lead = None if offset == -3.0 else dict(arrowstyle="-", color=color, lw=0.7, shrinkA=0, shrinkB=4)
        ax.annotate(text, point, xytext=(8, offset), textcoords="offset points", fontsize=8, color=color,
                    arrowprops=lead)  # fmt: skip
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(_title(report, "roofline under the measured roofs"), fontsize=10)
    fig.tight_layout()
    return _save(fig, out)


def plot(report: dict[str, Any], out: pathlib.Path) -> pathlib.Path:
    """Both pictures beside ``out`` (``roofline.png``'s folder); returns the roofline's path."""
    import matplotlib

    matplotlib.use("Agg")
    plot_headline(report, out.with_name("headline.png"))
    return plot_roofline(report, out)


def _free_offset(ax: Any, point: tuple[float, float], placed: list[tuple[float, float]]) -> float:
    """A vertical offset (points) for a label at ``point`` that keeps it off the labels already ``placed`` (their
    positions in display pixels, updated): level with the point, else a line above or below at a time (the
    caller then draws a leader line to the point, so that a moved label is not read as its neighbour's)."""
    x, y = ax.transData.transform(point)
    scale = ax.figure.dpi / 72
    for offset in (-3.0, 11.0, -17.0, 25.0, -31.0, 39.0):
        top = y + offset * scale
        if all(abs(top - py) > 12 * scale or abs(x - px) > 170 * scale for px, py in placed):
            placed.append((x, top))
            return offset
    placed.append((x, y + 39 * scale))
    return 39.0


def _wrap(text: str, width: int = 60) -> str:
    words, lines, line = text.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return "\n".join([*lines, line])


def _title(report: dict[str, Any], what: str) -> str:
    m = report.get("machine", {})
    versions = f"torch {m.get('torch', '?')}, triton {m.get('triton', '?')}"
    return f"{what}\n{m.get('gpu', '?')}, {versions}, {report.get('date', '')}"


def _save(fig: Any, out: pathlib.Path) -> pathlib.Path:
    import matplotlib.pyplot as plt

    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fast.plot", description="the pictures of a bench.json")
    parser.add_argument("report", type=pathlib.Path)
    parser.add_argument("--out", type=pathlib.Path, help="folder (default: beside the report)")
    args = parser.parse_args(argv)
    if not args.report.is_file():
        print(f"fast.plot: no such file {args.report}", file=sys.stderr)
        return 2
    report = json.loads(args.report.read_text())
    if "targets" not in report or any("target_ms" not in t for t in report["targets"]):
        from fast.bench_report import targets

        report["targets"] = targets(report)
    folder = args.out or args.report.parent
    print(plot(report, folder / "roofline.png"), folder / "headline.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
