"""A fuzzing campaign: HypoFuzz over every (property, implementation) pair, on any number of processes, GPUs and
machines that share one Hypothesis example database (docs/campaigns.md).

    python -m csa.campaign [--database DIR|redis://HOST:PORT/DB] [--gpus N] [--workers N] [--seconds S]
                           [--dry-run] [-- extra pytest arguments, e.g. -k topk]

1. Fuzz: with GPUs, one HypoFuzz process per GPU, each seeing only its own device (``CUDA_VISIBLE_DEVICES``);
   without, one HypoFuzz process with ``--workers`` workers. Each runs ``properties/fuzz_targets.py`` for
   ``--seconds`` (default: until interrupted). Whatever any of them finds goes into the shared database.
2. Replay: the suite's fuzz targets run once under pytest with the ``replay`` profile (explicit and saved examples
   only), printing every failure that the database holds, shrunk, as an ordinary test failure.

Machines share the campaign by naming the same Redis database; each runs this command on its own GPUs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

TARGETS = "properties/fuzz_targets.py"


def gpu_count() -> int:
    if shutil.which("nvidia-smi") is None:
        return 0
    probe = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
    return sum(1 for line in probe.stdout.splitlines() if line.startswith("GPU "))


def fuzz_commands(gpus: int, workers: int, extra: Sequence[str]) -> list[tuple[dict[str, str], list[str]]]:
    """(extra environment, command) of each HypoFuzz process."""
    base = [sys.executable, "-c", "from hypothesis.extra.cli import main; main()", "fuzz", "--no-dashboard"]
    if gpus:
        return [({"CUDA_VISIBLE_DEVICES": str(g)}, [*base, "-n", "1", "--", TARGETS, *extra]) for g in range(gpus)]
    return [({}, [*base, "-n", str(workers), "--", TARGETS, *extra])]


def replay_command(extra: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "pytest", TARGETS, "-q", "-p", "no:cacheprovider", *extra]


def _fuzz(processes: list[tuple[dict[str, str], list[str]]], env: dict[str, str], seconds: float | None) -> None:
    running = [subprocess.Popen(cmd, env={**env, **extra}, start_new_session=True) for extra, cmd in processes]
    deadline = None if seconds is None else time.monotonic() + seconds
    try:
        while any(p.poll() is None for p in running) and (deadline is None or time.monotonic() < deadline):
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    for p in running:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in running:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m csa.campaign", description=__doc__.splitlines()[0])
    parser.add_argument("--database", default=".hypothesis/campaign", help="a directory or redis://host:port/db")
    parser.add_argument("--gpus", type=int, help="GPUs to fuzz on, one process each (default: all that are present)")
    parser.add_argument("--workers", type=int, help="processes without GPUs (default: CPU cores)")
    parser.add_argument("--seconds", type=float, help="fuzz this long, then replay (default: until interrupted)")
    parser.add_argument("--profile", choices=("dev", "deep"), default="deep", help="settings of the fuzz targets")
    parser.add_argument("--dry-run", action="store_true", help="print the commands and stop")
    parser.add_argument("extra", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)
    for option in ("gpus", "workers", "seconds"):
        value = getattr(args, option)
        if value is not None and value < (0 if option == "gpus" else 1):
            parser.error(f"--{option}: must be {'>= 0' if option == 'gpus' else 'positive'}, got {value}")
    gpus = gpu_count() if args.gpus is None else args.gpus
    workers = args.workers or os.cpu_count() or 1
    database = args.database if "://" in args.database else os.path.abspath(args.database)
    env = dict(os.environ, CSA_PROFILE=args.profile, CSA_DATABASE=database)
    processes = fuzz_commands(gpus, workers, args.extra)
    replay = replay_command(args.extra)
    print(f"campaign: {len(processes)} fuzz process(es), {gpus} GPU(s), profile {args.profile}, database {database}")
    for extra, cmd in processes:
        print("  fuzz:", " ".join(f"{k}={v}" for k, v in extra.items()), " ".join(cmd))
    print("  replay: CSA_PROFILE=replay", " ".join(replay))
    if args.dry_run:
        return 0
    _fuzz(processes, env, args.seconds)
    return subprocess.run(replay, env={**env, "CSA_PROFILE": "replay"}, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
