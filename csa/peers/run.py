"""``python -m csa.peers.run``: judge every peer kernel (``csa.peers.catalog``) with ``csa fuzz`` and write the
results page (``results/peers.md`` on a CPU; ``scripts/gpu_check.sh peers`` writes the compiled run's).

Each kernel runs as its own ``csa fuzz`` process (``python -m csa.cli fuzz``), under the convention its adapter
declares, with ``--keep-going`` so every property is reported, and its JSON report and reproducers kept next to
the page. Exit status 0 when every kernel's outcome is the one its verdict was written for, else 1.
"""

from __future__ import annotations

import argparse
import concurrent.futures
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
from reference.conventions import CONVENTIONS


def _command(peer: Peer, args: argparse.Namespace, report: pathlib.Path, repro: pathlib.Path) -> list[str]:
    cmd = ["csa", "fuzz", "--op", peer.op, "--impl", peer.impl, "--device", args.device, "--keep-going"]
    examples = max(args.max_examples, peer.max_examples)
    cmd += ["--max-examples", str(examples), "--shrink-seconds", f"{args.shrink_seconds:g}"]
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
    merge_reproducers(report_path, repro / f"repro_{slug}.py")
    if proc.returncode == 0:
        outcome = "pass"
    elif proc.returncode == 1:
        outcome = "fail"
    else:
        outcome = "error"
    return {
        "peer": peer.name,
        "cmd": cmd,
        "outcome": outcome,
        "seconds": round(seconds, 1),
        "report": report_path.name,
        "log": f"{slug}.txt",
        "tail": (proc.stderr.strip().splitlines() or [""])[-1],
    }


def merge_reproducers(report_path: pathlib.Path, into: pathlib.Path) -> None:
    """One reproducer per kernel: the per-failure reproducers its report names, merged into ``into`` (every
    failing case, each printed with its property), which the report then names."""
    from properties.reproducer import merge_scripts

    if not report_path.exists():
        return
    report = json.loads(report_path.read_text())
    failures = [f for p in report.get("properties", []) for f in p.get("failures", []) if f.get("reproducer")]
    if not failures:
        return
    merge_scripts(sorted({pathlib.Path(f["reproducer"]) for f in failures}), into)
    for failure in failures:
        failure["reproducer"] = str(into)
    report_path.write_text(json.dumps(report, indent=2) + "\n")


def page(run: dict[str, Any], out_dir: pathlib.Path) -> str:
    """The results page of a saved run (``run.json`` and the reports beside it), with the catalog's verdicts."""
    by_name = {p.name: p for p in PEERS}
    where = "compiled on the GPU" if run["device"] == "cuda" else "on the CPU, Triton kernels interpreted"
    results = [r for r in run["results"] if r["peer"] in by_name]
    counts = {o: sum(r["outcome"] == o for r in results) for o in ("pass", "fail", "error")}
    stale = [r["peer"] for r in results if r["outcome"] != by_name[r["peer"]].expect]
    lines = [
        f"# Peer kernels under `csa fuzz` ({run['device']})",
        "",
        f"The DeepSeek V4 / V4.1 cache-bookkeeping kernels vLLM and SGLang ship, each called in the engine's own "
        f"file through an adapter of `csa/peers/` (docs/peers.md), judged against the exact reference {where}.",
        "",
        f"- date: {run['date']} (UTC); wall time {run['wall_s'] / 60:.1f} min",
        f"- machine: {run['machine']}",
        f"- versions: {run['versions']}",
        f"- harness commit: {run['commit']}",
        f"- run: `{run['command']}`; each kernel: `csa fuzz` as in the commands below, {run['max_examples']} "
        f"examples per property, shrinking at most {run['shrink_seconds']:g} s; each kernel's log, JSON report "
        f"and reproducers under `{out_dir}/`",
        f"- {len(results)} kernels judged: {counts['pass']} pass, {counts['fail']} fail"
        + (f", {counts['error']} could not be run" if counts["error"] else "")
        + ("; every verdict reviewed for the outcome shown" if not stale else f"; NOT reviewed: {', '.join(stale)}"),
        "",
        "| kernel (engine file: function) | op | convention judged | result | verdict |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        peer = by_name[r["peer"]]
        report_file = out_dir / r["report"]
        report = json.loads(report_file.read_text()) if report_file.is_file() else {}
        convention = report.get("convention") or ("none" if not CONVENTIONS[peer.op] else "?")
        left = f" (left out: {', '.join(peer.leave_out)})" if peer.leave_out else ""
        if r["outcome"] == "pass":
            props = report.get("properties", [])
            result = f"pass ({len(props)} properties, {sum(p.get('examples', 0) for p in props)} examples"
            result += f", {r['seconds']:.0f} s)"
        elif r["outcome"] == "fail":
            first = _first_failure(report)
            failed = [p["property"] for p in report.get("properties", []) if not p.get("passed", True)]
            result = f"FAIL: {', '.join(failed)}"
            if first:
                result += f"; first: `{_cell(first[1], 240)}` on `{_cell(first[2], 240)}`"
            result += f" ({r['seconds']:.0f} s)"
        else:
            result = f"error (exit status 2): {_cell(r['tail'], 300)}"
        mark = "" if r["outcome"] == peer.expect else f" **(verdict written for a {peer.expect}; not reviewed)**"
        lines.append(
            f"| {peer.name}<br>`{peer.source}` | {peer.op} | `{convention}`{left} | {_cell(result, 700)} | "
            f"{_cell(peer.verdict, 1500)}{mark} |"
        )
    lines += ["", "Commands, one per kernel (`csa` is `python -m csa.cli`):", "", "```"]
    lines += [shlex.join(r["cmd"]) for r in results]
    repros = sorted(out_dir.glob("repro_*.py")) + sorted(out_dir.glob("check_*.py"))
    if repros:
        lines += ["```", "", "Standalone reproducers and checks the verdicts cite (`python FILE` from the repository "]
        lines += ["root, with the wheels unpacked; on a machine without CUDA they run Triton interpreted):", ""]
        lines += [f"- `{f}`: {_doc_line(f)}" for f in repros]
        lines += ["", "Kernels with an adapter that this run cannot judge:", ""]
    else:
        lines += ["```", "", "Kernels with an adapter that this run cannot judge:", ""]
    lines += [f"- {what}: {why}" for what, why in NOT_JUDGED]
    lines += [
        "",
        "Kernels of the engines that fit no operation of the contract, and what they fuse that it does not take:",
        "",
    ]
    lines += [f"- {what}: {why}" for what, why in NOT_IN_CONTRACT]
    return "\n".join(lines) + "\n"


def _doc_line(path: pathlib.Path) -> str:
    """The first line of a script's docstring."""
    import ast

    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return " ".join(doc.split("\n\n")[0].split())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m csa.peers.run", description=__doc__)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--max-examples", type=int, default=20)
    parser.add_argument("--shrink-seconds", type=float, default=20.0)
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("results/peers.md"))
    parser.add_argument("--only", action="append", help="only peers whose name contains this (repeatable)")
    parser.add_argument("--jobs", type=int, default=1, help="kernels judged at once (each is its own process)")
    parser.add_argument(
        "--page-only",
        action="store_true",
        help="rewrite the page from the saved run (run.json beside it) with the catalog's current verdicts",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs: must be at least 1, got {args.jobs}")
    out_dir = args.out.parent / args.out.stem
    saved = out_dir / "run.json"
    if args.page_only:
        run = json.loads(saved.read_text())
    else:
        missing = [r for e in ENGINES.values() if (r := missing_reason(e))]
        if missing:
            print(f"csa.peers.run: {'; '.join(missing)}", file=sys.stderr)
            return 2
        out_dir.mkdir(parents=True, exist_ok=True)
        run = {
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M"),
            "device": args.device,
            "machine": _machine(args.device),
            "versions": _versions(),
            "commit": _commit(),
            "command": shlex.join(["python", "-m", "csa.peers.run", *(sys.argv[1:] if argv is None else argv)]),
            "max_examples": args.max_examples,
            "shrink_seconds": args.shrink_seconds,
            "results": [],
        }
        start = time.perf_counter()
        peers = [p for p in PEERS if not args.only or any(o in p.name for o in args.only)]
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for peer, result in zip(peers, pool.map(lambda p: judge(p, args, out_dir), peers), strict=True):
                print(f"{peer.name}: {peer.op} ... {result['outcome']} ({result['seconds']:.0f} s)", flush=True)
                run["results"].append(result)
        run["wall_s"] = round(time.perf_counter() - start, 1)
        saved.write_text(json.dumps(run, indent=2) + "\n")
    args.out.write_text(page(run, out_dir))
    print(f"wrote {args.out} (peers from {peers_dir()})")
    expect = {p.name: p.expect for p in PEERS}
    return 0 if all(r["outcome"] == expect.get(r["peer"]) for r in run["results"]) else 1


if __name__ == "__main__":
    sys.exit(main())
