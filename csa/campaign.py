"""A fuzzing campaign over the whole property suite: parallel pytest-xdist workers sharing one Hypothesis example
database, one worker per GPU where GPUs are present (each worker sees only its own device).

    python -m csa.campaign [--workers N] [--profile dev|deep] [--database DIR] [-- extra pytest args]

Failures any worker finds are saved in the shared database and replayed first by every later run.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
from collections.abc import Sequence


def gpu_count() -> int:
    if shutil.which("nvidia-smi") is None:
        return 0
    probe = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
    return sum(1 for line in probe.stdout.splitlines() if line.startswith("GPU "))


def command(workers: int, extra: Sequence[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        "properties",
        "-q",
        "-p",
        "xdist",
        "-n",
        str(workers),
        "--dist",
        "load",
        *extra,
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m csa.campaign", description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, help="parallel workers (default: GPUs if any, else CPU cores)")
    parser.add_argument("--profile", choices=("dev", "deep"), default="deep")
    parser.add_argument("--database", type=pathlib.Path, default=pathlib.Path(".hypothesis/campaign"))
    parser.add_argument("extra", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)
    gpus = gpu_count()
    workers = args.workers or gpus or os.cpu_count() or 1
    if workers <= 0:
        parser.error("--workers: must be a positive integer")
    env = dict(os.environ, CSA_PROFILE=args.profile, CSA_DATABASE=str(args.database.resolve()))
    if gpus:
        env["CSA_GPUS"] = str(gpus)
    print(f"campaign: {workers} workers, profile {args.profile}, {gpus} GPU(s), database {args.database}")
    return subprocess.run(command(workers, args.extra), env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
