"""Run one benchmark case's implementation a few times, for a profiler to attach to (no timing here).

    ncu --clock-control none -k regex:KERNEL --launch-skip 2 --launch-count 1 \\
        python -m fast.profile compression/v4_overlap_prefill_1M [--impl triton] [--calls 4]

``--impl`` names an implementation or a sweep variant of the case (``python -m fast.profile CASE --list``).
"""

from __future__ import annotations

import argparse
import sys

import torch

from fast import bench


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fast.profile", description=__doc__.split("\n")[0])
    parser.add_argument("case", help="a benchmark case name (fast.bench)")
    parser.add_argument("--impl", default="triton")
    parser.add_argument("--calls", type=int, default=4)
    parser.add_argument("--list", action="store_true", help="list the case's implementations and variants")
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
    for _ in range(args.calls):
        fns[args.impl]()
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    from fast import profile

    sys.exit(profile.main())
