"""Run one benchmark case's implementation a few times, for a profiler to attach to (no timing here).

    ncu --clock-control none -k regex:KERNEL --launch-skip 2 --launch-count 1 \\
        python -m fast.profile compression/v4_overlap_prefill_1M [--impl triton] [--calls 4]

``--impl`` names an implementation or a sweep variant of the case (``python -m fast.profile CASE --list``).
``--host`` measures instead what one call costs the CPU: the calls are queued behind a long GPU sleep, so none
waits for the device, and the wall time of queueing them is divided by their number (a launch-bound case's
"launched" time in the benchmark is this host time wherever it exceeds the kernels' own); ``--host-profile N``
adds the N costliest functions of those calls (cProfile, which inflates every figure by about half).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from collections.abc import Callable

import torch

from fast import bench


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fast.profile", description=__doc__.split("\n")[0])
    parser.add_argument("case", help="a benchmark case name (fast.bench)")
    parser.add_argument("--impl", default="triton")
    parser.add_argument("--calls", type=int, default=4)
    parser.add_argument("--list", action="store_true", help="list the case's implementations and variants")
    parser.add_argument("--host", action="store_true", help="print the CPU time one call takes to queue its work")
    parser.add_argument(
        "--host-profile", type=int, default=0, metavar="N", help="with --host: the N costliest functions (cProfile)"
    )
    args = parser.parse_args(argv)
    if args.calls < 1:
        print(f"fast.profile: --calls: must be at least 1, got {args.calls}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("fast.profile: no CUDA device", file=sys.stderr)
        return 2
    cases = {c.name: c for c in bench.load_cases()}
    if args.case not in cases:
        print(f"fast.profile: case: unknown, choose one of {', '.join(cases)}", file=sys.stderr)
        return 2
    built = cases[args.case].build(False)
    fns = {**built.impls, **built.sweep}
    if args.list:
        print("\n".join(fns))
        return 0
    if args.impl not in fns:
        print(f"fast.profile: impl: unknown, choose one of {', '.join(fns)}", file=sys.stderr)
        return 2
    if args.host:
        print(host_time(fns[args.impl], args.calls, args.host_profile))
        return 0
    for _ in range(args.calls):
        fns[args.impl]()
    torch.cuda.synchronize()
    return 0


def _keep_gpu_busy() -> None:
    torch.cuda._sleep(2_000_000_000)  # about a second at H200 clocks: the calls queued after it never wait


def host_time(
    fn: Callable[[], object],
    calls: int,
    top: int = 0,
    *,
    busy: Callable[[], None] = _keep_gpu_busy,
    sync: Callable[[], None] = torch.cuda.synchronize,
) -> str:
    """Microseconds of CPU time per call to queue ``fn``'s work, measured with the device kept busy (``busy``
    queues a GPU sleep long enough to outlast the calls), after warm-up calls; with ``top``, cProfile's costliest
    functions of a second such run. ``sync`` waits for the device."""
    if isinstance(calls, bool) or not isinstance(calls, int) or calls < 1:
        raise ValueError(f"calls: must be a positive int, got {calls!r}")
    for _ in range(3):
        fn()
    sync()

    def queued(profiler: cProfile.Profile | None = None) -> float:
        busy()
        start = time.perf_counter()
        if profiler is not None:
            profiler.enable()
        for _ in range(calls):
            fn()
        if profiler is not None:
            profiler.disable()
        elapsed = time.perf_counter() - start
        sync()
        return elapsed / calls * 1e6

    lines = [f"host time per call: {queued():.1f} us (the mean of {calls} calls queued behind a GPU sleep)"]
    if top:
        profiler = cProfile.Profile()
        queued(profiler)
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(top)
        lines.append(text.getvalue())
    return "\n".join(lines)


if __name__ == "__main__":
    from fast import profile

    sys.exit(profile.main())
