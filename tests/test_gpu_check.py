"""scripts/gpu_check.sh's test phase, run here on the CPU: PYTEST_ARGS is split as a command line, so a quoted
``-k`` expression reaches pytest as one argument, and outcomes.txt names every test that ran."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_a_quoted_k_expression_selects_as_written(tmp_path: pathlib.Path) -> None:
    env = {
        **os.environ,
        "OUT": str(tmp_path),
        "PYTHON": sys.executable,
        "PYTEST_ARGS": "tests/test_contract.py -k 'must or views'",
        "TESTS_TIMEOUT_S": "240",
    }
    run = subprocess.run(
        ["bash", "scripts/gpu_check.sh", "tests"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert (tmp_path / "outcomes.txt").read_text().splitlines() == [
        "PASSED tests/test_contract.py::test_an_in_place_argument_must_be_an_argument",
        "PASSED tests/test_contract.py::test_views_are_the_positional_tensors_not_written_in_place",
    ]
