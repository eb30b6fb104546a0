"""GPU benchmark harness: every registered case timed for each of its implementations in one run.

    python -m fast.bench --out results [--only NAME] [--budget-s SECONDS] [--no-compile] [--no-sweep]

Timing: each implementation is warmed up, then run many times; before every run a 256 MiB buffer is zeroed so
the L2 cache (50-60 MiB) holds nothing of the inputs; CUDA events around the call give the time; the median is
reported. Bytes moved follow each case's model (docs/compression-kernels.md); effective bandwidth is bytes over
time, and the fraction is taken against a device-to-device copy of 1 GiB measured in the same run (read +
write counted). Results: ``bench.json`` (with the command and the machine), ``bench.md`` (table), and
``roofline.png`` (``python -m fast.plot bench.json`` where matplotlib is missing); the targets and tables come
from ``fast.bench_report``. A case that fails to build or whose check raises is recorded with its error
(``bench.md`` names it) and the run goes on to the next case; the run then exits 1. A baseline that fails to run
is reported in its cell and fails nothing.

Adding kernels: write a module that calls ``register(Case(...))`` and add it to ``CASE_MODULES``.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
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

from fast.bench_report import TARGET_CASES, render, targets

__all__ = [
    "TARGET_CASES",
    "Built",
    "Case",
    "compiled",
    "generator",
    "load_cases",
    "main",
    "register",
    "render",
    "targets",
    "wants_compile",
]

DEVICE = "cuda"
FLUSH_BYTES = 256 * 2**20
COPY_BYTES = 2**30
CASE_MODULES = (
    "fast.compression.bench_cases",
    "fast.indexing.bench_cases",
    "fast.cache.bench_cases",
    "fast.cache.bench_prefill",
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
    compute: str = "bf16"
    """The tensor-core precision the case's FLOPs run at ("bf16" or "fp8"): its floor and roofline take that
    GEMM peak."""
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


def generator(seed: int) -> torch.Generator:
    """A generator on the benchmark device seeded with ``seed`` (each case builds its inputs from its own)."""
    return torch.Generator(device=DEVICE).manual_seed(seed)


def compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` under torch.compile at static shapes: the compiled baseline of a torch formula."""
    return torch.compile(fn, dynamic=False)


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


GEMM_SIZE = 8192


def compute_ceilings() -> dict[str, Any]:
    """The measured compute roofs: a bf16 and an FP8 (e4m3, per-tensor scales, ``torch._scaled_mm``) GEMM of
    8192^3, as TFLOP/s, timed the same way as the cases. An FP8 GEMM this torch cannot run is left out."""
    flops = 2 * GEMM_SIZE**3
    a = torch.randn(GEMM_SIZE, GEMM_SIZE, device=DEVICE, dtype=torch.bfloat16)
    b = torch.randn(GEMM_SIZE, GEMM_SIZE, device=DEVICE, dtype=torch.bfloat16)
    out: dict[str, Any] = {"gemm_size": GEMM_SIZE}
    bf16 = time_ms(lambda: a @ b)
    out["bf16"] = {**bf16, "tflops": flops / bf16["ms"] / 1e9}
    try:
        a8 = a.to(torch.float8_e4m3fn)
        b8 = b.t().contiguous().to(torch.float8_e4m3fn).t()  # column-major second operand, as _scaled_mm wants
        one = torch.ones((), device=DEVICE)
        fp8 = time_ms(lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
        out["fp8"] = {**fp8, "tflops": flops / fp8["ms"] / 1e9}
    except (RuntimeError, AttributeError, TypeError) as err:
        out["fp8"] = {"error": f"{type(err).__name__}: {err}"}
    return out


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
        "compute": built.compute,
        "notes": list(built.notes),
    }
    if built.check is not None:
        try:
            entry["check"] = built.check()
        except Exception as err:  # reported with the case; the run goes on and exits 1 (``case_failed``)
            entry["check"] = f"check failed: {type(err).__name__}: {str(err)[:300]}"
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
    report["ceilings"] = compute_ceilings()
    fp8 = report["ceilings"]["fp8"].get("tflops")
    print(
        f"copy {report['copy']['gbs']:.0f} GB/s, empty kernel {report['empty_kernel']['ms'] * 1e3:.1f} us, "
        f"bf16 GEMM {report['ceilings']['bf16']['tflops']:.0f} TFLOP/s, FP8 GEMM "
        + (f"{fp8:.0f} TFLOP/s" if fp8 else "not run"),
        flush=True,
    )
    report["cases"] = []
    for case in load_cases():
        if args.only and not any(o in case.name for o in args.only):
            continue
        with_compile = wants_compile(case.name, time.perf_counter() - start, args.budget_s, args.no_compile)
        entry = run_case_or_error(case, with_compile, report["copy"]["gbs"], sweep=not args.no_sweep)
        if not with_compile and not args.no_compile:
            entry["notes"].append("torch.compile skipped: time budget spent")
        report["cases"].append(entry)
        summary = ", ".join(f"{k} {v['ms']:.4g} ms" for k, v in entry["results"].items() if "ms" in v)
        if "error" in entry:
            summary = f"FAILED: {entry['error']}"
        print(f"{case.name}: {summary} [{entry.get('check', '')}] ({entry['seconds']} s)", flush=True)
        args.out.mkdir(parents=True, exist_ok=True)  # the cases so far, in case the run is cut short
        (args.out / "bench.partial.json").write_text(json.dumps(report, indent=1, default=_json_default))
    report["seconds"] = round(time.perf_counter() - start, 1)
    report["targets"] = targets(report)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench.partial.json").unlink(missing_ok=True)
    (args.out / "bench.json").write_text(json.dumps(report, indent=1, default=_json_default))
    status = render(report, args.out)
    failed = [c["name"] for c in report["cases"] if case_failed(c)]
    if failed:
        print(f"fast.bench: {len(failed)} case(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return status


def run_case_or_error(case: Case, with_compile: bool, copy_gbs: float, sweep: bool = True) -> dict[str, Any]:
    """``run_case``, or, where building the case raises, an entry that names the error and holds no result: one
    broken case does not cost a run its other cases (the run then exits 1)."""
    t0 = time.perf_counter()
    try:
        return run_case(case, with_compile, copy_gbs, sweep)
    except Exception as err:
        torch.cuda.empty_cache()
        return {"name": case.name, "group": case.group, "description": case.description, "bytes": 0, "flops": 0,
                "compute": "bf16", "notes": [], "results": {}, "sweep": {},
                "error": f"{type(err).__name__}: {str(err)[:300]}",
                "seconds": round(time.perf_counter() - t0, 1)}  # fmt: skip


def case_failed(entry: dict[str, Any]) -> bool:
    """Whether a case's entry records a failure of the case itself (its build or its check; a baseline that
    fails to run is reported in its cell and fails nothing)."""
    return "error" in entry or str(entry.get("check", "")).startswith("check failed")


def wants_compile(case: str, elapsed_s: float, budget_s: float, no_compile: bool) -> bool:
    """Whether a case gets its torch.compile baselines: never with ``--no-compile``; always for a case that
    carries a target (``TARGET_CASES``); otherwise while the run is inside its time budget."""
    return not no_compile and (case in TARGET_CASES or elapsed_s < budget_s)


def _json_default(x: object) -> object:
    """What ``json`` cannot write (a torch dtype in a note, a config) as its ``str``."""
    return str(x)


if __name__ == "__main__":
    # Run through the importable module, so that case modules registering with ``fast.bench`` and this run
    # share one CASES list (under ``python -m`` this file is also ``__main__``, a second module object).
    from fast import bench

    sys.exit(bench.main())
