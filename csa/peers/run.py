"""``python -m csa.peers.run``: judge every peer kernel (``csa.peers.catalog``) with ``csa fuzz`` and write the
results page (``results/peers.md`` on a CPU; ``scripts/gpu_check.sh peers`` writes the compiled run's).

Each kernel runs as its own ``csa fuzz`` process (``python -m csa.cli fuzz``), under the convention its adapter
declares, with ``--keep-going`` so every property is reported, and its JSON report and reproducers kept next to
the page. Exit status 0 when every kernel's outcome is the one its verdict was written for, else 1.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import shlex
import subprocess
import sys
import time
from typing import Any

from csa.peers.catalog import NOT_IN_CONTRACT, NOT_JUDGED, PEERS, Peer
from csa.peers.loader import ENGINES, missing_reason, peers_dir


def _command(peer: Peer, args: argparse.Namespace, report: pathlib.Path, repro: pathlib.Path) -> list[str]:
    cmd = ["csa", "fuzz", "--op", peer.op, "--impl", peer.impl, "--device", args.device, "--keep-going"]
    cmd += ["--max-examples", str(args.max_examples), "--shrink-seconds", f"{args.shrink_seconds:g}"]
    for group in peer.leave_out:
        cmd += ["--leave-out", group]
    for prop in peer.properties:
        cmd += ["--property", prop]
    return [*cmd, "--report", str(report), "--repro-dir", str(repro)]


def _machine(device: str) -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    text = f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}"
    if device == "cuda":
        import torch

        text += f"; GPU {torch.cuda.get_device_name(0)} (sm{''.join(map(str, torch.cuda.get_device_capability(0)))})"
    return text


def _versions() -> str:
    import torch
    import triton

    engines = ", ".join(f"{e.package} {e.version}" for e in ENGINES.values())
    return f"{engines} (wheels unpacked, not installed); python {platform.python_version()}, torch " + (
        f"{torch.__version__}, triton {triton.__version__}"
    )


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _first_failure(report: dict[str, Any]) -> tuple[str, str, str, str] | None:
    """(property, error, input, reproducer) of the report's first failure."""
    for prop in report.get("properties", []):
        for failure in prop.get("failures", []):
            error = f"{failure['error_type']}: {failure['error']}"
            return prop["property"], error, failure["example"], failure.get("reproducer") or ""
    return None


def _cell(text: str, limit: int = 600) -> str:
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text.replace("|", "\\|")


def judge(peer: Peer, args: argparse.Namespace, out_dir: pathlib.Path) -> dict[str, Any]:
    slug = "".join(c if c.isalnum() else "_" for c in peer.name).strip("_")
    report_path = out_dir / f"{slug}.json"
    repro = out_dir / "repro"
    cmd = _command(peer, args, report_path, repro)
    env = dict(os.environ)
    if args.device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "csa.cli", *cmd[1:]], capture_output=True, text=True, env=env, check=False
    )
    seconds = time.perf_counter() - start
    (out_dir / f"{slug}.txt").write_text(proc.stdout + proc.stderr)
    report: dict[str, Any] = {}
    if report_path.is_file():
        report = json.loads(report_path.read_text())
    if proc.returncode == 0:
        outcome = "pass"
    elif proc.returncode == 1:
        outcome = "fail"
    else:
        outcome = "error"
    return {
        "peer": peer,
        "cmd": cmd,
        "outcome": outcome,
        "seconds": seconds,
        "report": report,
        "log": f"{slug}.txt",
        "tail": (proc.stderr.strip().splitlines() or [""])[-1],
    }


def page(results: list[dict[str, Any]], args: argparse.Namespace, started: str, wall: float) -> str:
    where = "compiled on the GPU" if args.device == "cuda" else "on the CPU, Triton kernels interpreted"
    lines = [
        f"# Peer kernels under `csa fuzz` ({args.device})",
        "",
        f"The DeepSeek V4 / V4.1 cache-bookkeeping kernels vLLM and SGLang ship, each called in the engine's own "
        f"file through an adapter of `csa/peers/` (docs/peers.md), judged against the exact reference {where}.",
        "",
        f"- date: {started} (UTC); wall time {wall / 60:.1f} min",
        f"- machine: {_machine(args.device)}",
        f"- versions: {_versions()}",
        f"- harness commit: {_commit()}",
        f"- run: `{shlex.join(sys.argv[:1] and ['python', '-m', 'csa.peers.run', *sys.argv[1:]])}`; each kernel: "
        f"`csa fuzz` as in its row, {args.max_examples} examples per property, shrinking at most "
        f"{args.shrink_seconds:g} s; logs and JSON reports under `{args.out.parent / args.out.stem}/`",
        "",
        "| kernel | op | convention judged | result | verdict |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        peer, report = r["peer"], r["report"]
        convention = report.get("convention") or "?"
        left = f" (left out: {', '.join(peer.leave_out)})" if peer.leave_out else ""
        if r["outcome"] == "pass":
            props = report.get("properties", [])
            result = f"pass ({len(props)} properties, {sum(p.get('examples', 0) for p in props)} examples)"
        elif r["outcome"] == "fail":
            first = _first_failure(report)
            failed = [p["property"] for p in report.get("properties", []) if not p.get("passed", True)]
            result = f"FAIL: {', '.join(failed)}"
            if first:
                result += f"; first: `{_cell(first[1], 300)}` on `{_cell(first[2], 300)}`"
        else:
            result = f"error (exit status 2): {_cell(r['tail'], 300)}"
        stale = "" if r["outcome"] == peer.expect else f" **(verdict written for a {peer.expect}; not reviewed)**"
        lines.append(
            f"| `{peer.source}` | {peer.op} | `{convention}`{left} | {_cell(result, 900)} | "
            f"{_cell(peer.verdict)}{stale} |"
        )
    lines += ["", "Commands, one per kernel (`csa` is `python -m csa.cli`):", "", "```"]
    lines += [shlex.join(r["cmd"]) for r in results]
    lines += ["```", "", "Kernels with an adapter that this run cannot judge:", ""]
    lines += [f"- {what}: {why}" for what, why in NOT_JUDGED]
    lines += ["", "Kernels of the engines that fit no operation of the contract yet:", ""]
    lines += [f"- {what}: {why}" for what, why in NOT_IN_CONTRACT]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m csa.peers.run", description=__doc__)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--max-examples", type=int, default=20)
    parser.add_argument("--shrink-seconds", type=float, default=20.0)
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("results/peers.md"))
    parser.add_argument("--only", action="append", help="only peers whose name contains this (repeatable)")
    args = parser.parse_args(argv)
    missing = [r for e in ENGINES.values() if (r := missing_reason(e))]
    if missing:
        print(f"csa.peers.run: {'; '.join(missing)}", file=sys.stderr)
        return 2
    out_dir = args.out.parent / args.out.stem
    out_dir.mkdir(parents=True, exist_ok=True)
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M")
    start = time.perf_counter()
    results = []
    peers = [p for p in PEERS if not args.only or any(o in p.name for o in args.only)]
    for peer in peers:
        print(f"{peer.name}: {peer.op} ...", end=" ", flush=True)
        result = judge(peer, args, out_dir)
        print(f"{result['outcome']} ({result['seconds']:.0f} s)", flush=True)
        results.append(result)
    args.out.write_text(page(results, args, started, time.perf_counter() - start))
    print(f"wrote {args.out} (peers from {peers_dir()})")
    return 0 if all(r["outcome"] == r["peer"].expect for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
