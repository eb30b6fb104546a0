"""GPU benchmark harness: every registered case timed for each of its implementations in one run.

    python -m fast.bench --out results [--only NAME] [--budget-s SECONDS] [--no-compile] [--no-sweep]

Timing: each implementation is warmed up, then run many times; before every run a 256 MiB buffer is zeroed so
the L2 cache (50-60 MiB) holds nothing of the inputs; CUDA events around the call give the time; the median is
reported. Bytes moved follow each case's model (docs/compression-kernels.md); effective bandwidth is bytes over
time, and the fraction is taken against a device-to-device copy of 1 GiB measured in the same run (read +
write counted). Results: ``bench.json`` (with the command and the machine), ``bench.md`` (table), and
``roofline.png`` (``python -m fast.plot bench.json`` where matplotlib is missing).

Adding kernels: write a module that calls ``register(Case(...))`` and add it to ``CASE_MODULES``.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import math
import pathlib
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import triton
import triton.language as tl

DEVICE = "cuda"
FLUSH_BYTES = 256 * 2**20
COPY_BYTES = 2**30
CASE_MODULES = ("fast.compression.bench_cases", "fast.indexing.bench_cases", "fast.cache.bench_cases")
# the cases that carry a kernel target (``targets``): their torch.compile baselines are timed whatever the budget
TARGET_CASES = frozenset(
    {
        "compression/c2_prefill_1M",
        "compression/v4_overlap_prefill_1M",
        "compression/decode_v4_B128",
        "indexing/logits_bf16_4096x16384",
        "indexing/topk_128x256K_k2048_v4.1",
        "indexing/topk_slots_128x256K_k2048",
        "cache/store_v4_584",
        "cache/decode_bf16_b128_h64",
    }
)


@dataclass
class Built:
    """A case's inputs, built once: the implementations to time (name -> no-argument callable), the bytes and
    floating-point operations of one call under the case's model, an optional check of the results (a string:
    "ok" or what differs) run once before timing, optional tile variants of the kernel (``sweep``), timed the
    same way and reported apart, and the implementations to time again as CUDA graphs (``graphs``)."""

    impls: dict[str, Callable[[], object]]
    bytes_moved: int
    flops: int
    check: Callable[[], str] | None = None
    sweep: dict[str, Callable[[], object]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    graphs: tuple[str, ...] = ()
    """Implementations also timed as CUDA-graph replays ("NAME (graph)"): for launch-bound cases, where the
    host's launch work would otherwise dominate the events (the empty kernel is timed both ways too)."""


@dataclass(frozen=True)
class Case:
    name: str
    group: str
    description: str
    build: Callable[[bool], Built]
    """build(with_compile) -> Built; with_compile False leaves torch.compile implementations out."""


CASES: list[Case] = []


def register(case: Case) -> Case:
    if any(c.name == case.name for c in CASES):
        raise ValueError(f"case: {case.name} is already registered")
    CASES.append(case)
    return case


def load_cases() -> list[Case]:
    for module in CASE_MODULES:
        importlib.import_module(module)
    return CASES


def time_ms(
    fn: Callable[[], object], *, min_runs: int = 20, max_runs: int = 500, target_ms: float = 400.0
) -> dict[str, Any]:
    """Median time of ``fn`` in ms, L2 flushed before each run (CUDA events around the call only)."""
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device=DEVICE)
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(3):
        flush.zero_()
        fn()
    torch.cuda.synchronize()
    estimate = (time.perf_counter() - t0) / 3 * 1e3
    runs = int(max(min_runs, min(max_runs, target_ms / max(estimate, 1e-3))))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    for i in range(runs):
        flush.zero_()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True))
    return {"ms": statistics.median(times), "p10_ms": times[len(times) // 10], "p90_ms": times[(9 * len(times)) // 10],
            "runs": runs}  # fmt: skip


def copy_of(nbytes: int) -> Callable[[], object]:
    """A device copy that reads and writes ``nbytes`` in all (half each way): the floor, timed the same way, of
    any kernel that moves those bytes (``copy_same_bytes`` in the cases)."""
    src = torch.empty(nbytes // 8, dtype=torch.int32, device=DEVICE)
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)


def as_graph(fn: Callable[[], object]) -> Callable[[], object]:
    """``fn`` captured once in a CUDA graph (after warm-up runs on a side stream); the result replays it."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def copy_bandwidth() -> dict[str, Any]:
    """Device-to-device copy of 1 GiB: (read + write) bytes / median time."""
    buffers = torch.empty(2, COPY_BYTES // 4, dtype=torch.float32, device=DEVICE)
    buffers[0].fill_(1.0)
    timing = time_ms(lambda: buffers[1].copy_(buffers[0]))
    return {"bytes": 2 * COPY_BYTES, **timing, "gbs": 2 * COPY_BYTES / timing["ms"] / 1e6}


@triton.jit
def _nothing(x_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    i = tl.arange(0, BLOCK)
    tl.store(x_ptr + i, tl.zeros([BLOCK], dtype=tl.float32), mask=i < n)


def empty_kernel() -> dict[str, Any]:
    """A Triton kernel that stores nothing (n = 0), one program: the floor of a launch as timed here, launched
    from Python and replayed from a CUDA graph ("graph_ms")."""
    x = torch.empty(1, device=DEVICE)
    launch = lambda: _nothing[(1,)](x, 0, BLOCK=16)  # noqa: E731
    timing = time_ms(launch)
    timing["graph_ms"] = time_ms(as_graph(launch))["ms"]
    return timing


def machine() -> dict[str, Any]:
    props = torch.cuda.get_device_properties(0)
    return {
        "gpu": props.name,
        "gpu_memory_gib": round(props.total_memory / 2**30, 1),
        "sm_count": props.multi_processor_count,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "host": platform.node(),
    }


def run_case(case: Case, with_compile: bool, copy_gbs: float, sweep: bool = True) -> dict[str, Any]:
    torch._dynamo.reset()
    t0 = time.perf_counter()
    built = case.build(with_compile)
    if not sweep:
        built.sweep.clear()
    entry: dict[str, Any] = {
        "name": case.name,
        "group": case.group,
        "description": case.description,
        "bytes": built.bytes_moved,
        "flops": built.flops,
        "notes": list(built.notes),
    }
    if built.check is not None:
        entry["check"] = built.check()
    graphed = {f"{name} (graph)": fn for name, fn in built.impls.items() if name in built.graphs}
    for key, impls, graph in (
        ("results", built.impls, False),
        ("results", graphed, True),
        ("sweep", built.sweep, bool(built.graphs)),  # variants of a launch-bound case are timed as graphs too
    ):
        entry.setdefault(key, {})
        for name, fn in impls.items():
            try:
                timing = time_ms(as_graph(fn) if graph else fn)
            except Exception as err:  # a baseline that fails to compile or run is reported, not fatal
                entry[key][name] = {"error": f"{type(err).__name__}: {str(err)[:300]}"}
                continue
            gbs = built.bytes_moved / timing["ms"] / 1e6
            entry[key][name] = {**timing, "gbs": gbs, "fraction_of_copy": gbs / copy_gbs}
    entry["seconds"] = round(time.perf_counter() - t0, 1)
    del built
    torch.cuda.empty_cache()
    return entry


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
                    "ratio": ratio, "met": None if ratio is None else ratio >= factor})  # fmt: skip

    against_compile("compression/c2_prefill_1M", "C2 prefill 1M x 512: Triton at or below torch.compile", 1.0)
    against_compile("compression/v4_overlap_prefill_1M", "V4 overlap r=4 prefill 1M x 512: >= 1.8x torch.compile", 1.8)
    for suffix, empty_key in ((" (graph)", "graph_ms"), ("", "ms")):
        dec, empty = ms("compression/decode_v4_B128", "triton" + suffix), report.get("empty_kernel", {}).get(empty_key)
        out.append({"case": "compression/decode_v4_B128",
                    "target": f"decode, 128 requests, one launch: within 2x of an empty kernel{suffix}",
                    "triton_ms": dec, "baseline": f"empty Triton kernel{suffix}", "baseline_ms": empty,
                    "ratio": None if not (dec and empty) else dec / empty,
                    "met": None if not (dec and empty) else dec <= 2 * empty})  # fmt: skip

    def rate(case: str, label: str, tflops: float) -> None:
        mine = ms(case, "triton")
        flops = next((c["flops"] for c in report["cases"] if c["name"] == case), None)
        achieved = None if not (mine and flops) else flops / mine / 1e9
        out.append({"case": case, "target": label, "triton_ms": mine, "baseline": f"{tflops:g} TFLOP/s",
                    "baseline_ms": None if not flops else flops / tflops / 1e9,
                    "ratio": None if achieved is None else achieved / tflops,
                    "met": None if achieved is None else achieved >= tflops})  # fmt: skip

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
            }
        )

    def relative(case: str, impl: str, label: str, base_impl: str, factor: float) -> None:
        mine, base = ms(case, impl), ms(case, base_impl)
        out.append({"case": case, "target": label, "triton_ms": mine, "baseline": base_impl, "baseline_ms": base,
                    "ratio": None if not (mine and base) else mine / base,
                    "met": None if not (mine and base) else mine <= factor * base})  # fmt: skip

    rate("indexing/logits_bf16_4096x16384", "logits 4096 x 16384, 64 x 128, bf16: >= 400 TFLOP/s", 400.0)
    topk = "indexing/topk_128x256K_k2048_v4.1"
    at_most(topk, "triton", "top-k 128 x 262144, k = 2048, -1 fill, index order: <= 0.25 ms", 0.25)
    at_most(topk, "triton (graph)", "the same, as a CUDA graph replay: <= 0.25 ms", 0.25)
    relative("indexing/topk_slots_128x256K_k2048", "triton", "slot translation fused into top-k: <= 5% over top-k",
             "triton_topk_alone", 1.05)  # fmt: skip
    store = "cache/store_v4_584"
    copy_gbs = report.get("copy", {}).get("gbs")
    for suffix in ("", " (graph)"):
        mine = by_name.get(store, {}).get("triton" + suffix, {})
        frac = mine.get("fraction_of_copy")
        out.append({"case": store,
                    "target": f"store 8192 x 512 f32 rows, V4 584 B: >= 80% of the 1 GiB copy's bandwidth{suffix}",
                    "triton_ms": mine.get("ms"), "baseline": f"copy {copy_gbs:.0f} GB/s" if copy_gbs else "copy",
                    "baseline_ms": None, "ratio": frac, "met": None if frac is None else frac >= 0.8})  # fmt: skip
        same = by_name.get(store, {}).get("copy_same_bytes" + suffix, {}).get("ms")
        ratio = None if not (mine.get("ms") and same) else same / mine["ms"]
        out.append({"case": store,
                    "target": f"the same: >= 80% of the bandwidth a copy of its bytes reaches at this size{suffix}",
                    "triton_ms": mine.get("ms"), "baseline": "copy_same_bytes" + suffix, "baseline_ms": same,
                    "ratio": ratio, "met": None if ratio is None else ratio >= 0.8})  # fmt: skip
    rate("cache/decode_bf16_b128_h64", "sparse decode b = 128, h = 64, top-k 2048, bf16 KV: >= 200 TFLOP/s", 200.0)
    return out


def target_table(rows: list[dict[str, Any]]) -> list[str]:
    """Markdown lines of target rows (``targets``)."""
    fmt = lambda x: "" if x is None else f"{x:.4g}"  # noqa: E731
    lines = ["| target | Triton ms | baseline | baseline ms | ratio | met |", "|---|---:|---|---:|---:|---|"]
    for t in rows:
        lines.append(f"| {t['target']} | {fmt(t['triton_ms'])} | {t['baseline']} | {fmt(t['baseline_ms'])} "
                     f"| {fmt(t['ratio'])} | {t['met']} |")  # fmt: skip
    return lines


def markdown(report: dict[str, Any]) -> str:
    impls: list[str] = []
    for case in report["cases"]:
        impls += [i for i in case["results"] if i not in impls]
    m = report["machine"]
    lines = [
        "# Benchmarks",
        "",
        f"`{report['command']}` on {m['gpu']} (torch {m['torch']}, triton {m['triton']}, CUDA {m['cuda']}), "
        f"{report['date']}.",
        "",
        f"Device copy (1 GiB, read + write): {report['copy']['gbs']:.0f} GB/s. "
        f"Empty Triton kernel: {report['empty_kernel']['ms'] * 1e3:.1f} us launched from Python, "
        f"{report['empty_kernel'].get('graph_ms', float('nan')) * 1e3:.1f} us replayed from a CUDA graph. Median of "
        "many runs, L2 flushed before each (256 MiB zeroed); time in ms, effective GB/s and fraction of the copy "
        "bandwidth. NAME (graph): the same call captured in a CUDA graph and replayed (no host launch work).",
        "",
        "| case | MB moved | " + " | ".join(impls) + " | check |",
        "|---|---:|" + "---:|" * len(impls) + "---|",
    ]
    for case in report["cases"]:
        cells = []
        for impl in impls:
            r = case["results"].get(impl)
            if r is None:
                cells.append("")
            elif "error" in r:
                cells.append("error")
            else:
                cells.append(f"{r['ms']:.4g} ms, {r['gbs']:.0f} GB/s ({100 * r['fraction_of_copy']:.0f}%)")
        lines.append(
            f"| {case['name']} | {case['bytes'] / 1e6:.4g} | " + " | ".join(cells) + f" | {case.get('check', '')} |"
        )
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fast.bench", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("results"))
    parser.add_argument("--only", action="append", default=[], help="run cases whose name contains this")
    parser.add_argument(
        "--budget-s", type=float, default=420.0, help="after this, only cases with targets get torch.compile baselines"
    )
    parser.add_argument("--no-compile", action="store_true", help="leave torch.compile baselines out")
    parser.add_argument("--no-sweep", action="store_true", help="leave the tile variants out")
    parser.add_argument("--render", type=pathlib.Path, help="write bench.md and roofline.png from this JSON only")
    args = parser.parse_args(argv)
    if args.render is not None:
        if not args.render.is_file():
            print(f"fast.bench: --render: no such file {args.render}", file=sys.stderr)
            return 2
        return render(json.loads(args.render.read_text()), args.out)
    if not torch.cuda.is_available():
        print("fast.bench: no CUDA device; the benchmarks run only on a GPU.", file=sys.stderr)
        return 2
    start = time.perf_counter()
    command = "python -m fast.bench " + " ".join(sys.argv[1:] if argv is None else argv)
    report: dict[str, Any] = {
        "command": command.strip(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
    }
    report["copy"] = copy_bandwidth()
    report["empty_kernel"] = empty_kernel()
    print(
        f"copy {report['copy']['gbs']:.0f} GB/s, empty kernel {report['empty_kernel']['ms'] * 1e3:.1f} us", flush=True
    )
    report["cases"] = []
    for case in load_cases():
        if args.only and not any(o in case.name for o in args.only):
            continue
        with_compile = wants_compile(case.name, time.perf_counter() - start, args.budget_s, args.no_compile)
        entry = run_case(case, with_compile, report["copy"]["gbs"], sweep=not args.no_sweep)
        if not with_compile and not args.no_compile:
            entry["notes"].append("torch.compile skipped: time budget spent")
        report["cases"].append(entry)
        summary = ", ".join(f"{k} {v['ms']:.4g} ms" for k, v in entry["results"].items() if "ms" in v)
        print(f"{case.name}: {summary} [{entry.get('check', '')}] ({entry['seconds']} s)", flush=True)
        args.out.mkdir(parents=True, exist_ok=True)  # the cases so far, in case the run is cut short
        (args.out / "bench.partial.json").write_text(json.dumps(report, indent=1, default=_json_default))
    report["seconds"] = round(time.perf_counter() - start, 1)
    report["targets"] = targets(report)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench.partial.json").unlink(missing_ok=True)
    (args.out / "bench.json").write_text(json.dumps(report, indent=1, default=_json_default))
    return render(report, args.out)


def wants_compile(case: str, elapsed_s: float, budget_s: float, no_compile: bool) -> bool:
    """Whether a case gets its torch.compile baselines: never with ``--no-compile``; always for a case that
    carries a target (``TARGET_CASES``); otherwise while the run is inside its time budget."""
    return not no_compile and (case in TARGET_CASES or elapsed_s < budget_s)


def render(report: dict[str, Any], out: pathlib.Path) -> int:
    """bench.md and roofline.png of a report (its targets evaluated again)."""
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


def _json_default(x: object) -> object:
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return str(x)


if __name__ == "__main__":
    # Run through the importable module, so that case modules registering with ``fast.bench`` and this run
    # share one CASES list (under ``python -m`` this file is also ``__main__``, a second module object).
    from fast import bench

    sys.exit(bench.main())
