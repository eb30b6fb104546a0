"""``csa fuzz`` end to end: a broken kernel outside the package exits 1 with a reproducer that fails alone; the
project's own kernel exits 0; usage and loading errors exit 2 with one line."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
BROKEN = ROOT / "examples" / "broken_topk.py"


def csa(*args: str, cwd: pathlib.Path, interpret: bool = True) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "csa.cli", "fuzz", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def test_broken_topk_is_caught_with_a_standalone_reproducer(tmp_path: pathlib.Path) -> None:
    report = tmp_path / "report.json"
    run = csa(
        "--op",
        "topk",
        "--impl",
        f"{BROKEN}:topk",
        "--convention",
        "v4.1",
        "--max-examples",
        "30",
        "--report",
        str(report),
        cwd=tmp_path,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "FAILED" in run.stdout and "expected" in run.stdout
    repro = sorted((tmp_path / "repro").glob("repro_topk_*.py"))
    assert len(repro) == 1
    alone = subprocess.run(
        [sys.executable, str(repro[0])],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=300,
    )
    assert alone.returncode == 1 and alone.stdout.startswith("FAILS:"), alone.stdout + alone.stderr
    assert '"result": "bug"' in report.read_text()


def test_the_projects_topk_passes(tmp_path: pathlib.Path) -> None:
    """Compiled on a CUDA machine (this project's Triton kernels need triton >= 3.8 to run interpreted)."""
    compiled = os.environ.get("TRITON_INTERPRET") != "1" and torch.cuda.is_available()
    device = ("--device", "cuda") if compiled else ()
    run = csa("--op", "topk", "--impl", "fast.indexing.entry_points:topk_v41", "--max-examples", "10", *device,
              cwd=tmp_path, interpret=not compiled)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "PASS: 6 properties" in run.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--op", "nope", "--impl", "x:y"], "--op: unknown operation"),
        (["--op", "topk", "--impl", f"{BROKEN}:topk", "--convention", "v9"], "--convention: topk has no convention"),
        (["--op", "topk", "--impl", f"{BROKEN}:topk"], "--convention: topk needs one of"),
        (["--op", "topk", "--impl", "os:getcwd", "--convention", "v4.1"], "--impl: topk needs a callable"),
        (["--op", "topk", "--impl", "no_such_module_here:f", "--convention", "v4.1"], "--impl: importing"),
        (["--op", "topk", "--impl", f"{BROKEN}:missing", "--convention", "v4.1"], "has no callable"),
        (["--op", "topk", "--impl", "no-colon", "--convention", "v4.1"], "--impl: expected"),
    ],
)
def test_usage_errors_exit_2_with_one_line(tmp_path: pathlib.Path, args: list[str], message: str) -> None:
    run = csa(*args, cwd=tmp_path)
    assert run.returncode == 2
    assert message in run.stderr and run.stderr.count("\n") == 1, run.stderr


def test_list_names_every_operation(tmp_path: pathlib.Path) -> None:
    from properties.contract import OPERATIONS

    run = csa("--list", cwd=tmp_path)
    assert run.returncode == 0
    assert all(name in run.stdout for name in OPERATIONS)


def test_a_reproducer_written_before_the_layout_change_still_runs(tmp_path: pathlib.Path) -> None:
    """A reproducer that ``csa fuzz`` wrote on a683d9f (the tree before properties/ was grouped by area) imports
    only ``properties.catalog`` and ``properties.registry``: it must still run and still find the bug."""
    text = (ROOT / "tests" / "fixtures" / "repro_written_by_a683d9f.txt").read_text()
    script = tmp_path / "repro.py"
    script.write_text(text.replace("EXAMPLES/", f"{ROOT / 'examples'}/"))
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRITON_INTERPRET="1")
    run = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stderr
    assert run.stdout.startswith("FAILS: topk_equals_reference"), run.stdout
