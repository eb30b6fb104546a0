"""The pytest plugin: examples/kernel_project, a kernel author's project whose whole test file is one
``kernel_tests(...)`` line, passes with its kernel as written and fails, with Hypothesis's falsifying example,
when the kernel is broken on purpose."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, distribution

import pytest

from csa.pytest_plugin import entry_point_installed

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROJECT = ROOT / "examples" / "kernel_project"


INSTALLED = entry_point_installed()
"""Installed, the package loads the plugin through its entry point; a checkout run without installing it (a GPU
machine's python) names the plugin on the command line."""


def test_installing_the_package_installs_the_plugins_entry_point() -> None:
    try:
        distribution("csa-harness")
    except PackageNotFoundError:
        pytest.skip("this python has not installed csa-harness (make's .venv has)")
    assert INSTALLED


def run_project(tmp_path: pathlib.Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{PROJECT}", **env)
    environ.pop("CSA_PROFILE", None)
    plugin = [] if INSTALLED else ["-p", "csa.pytest_plugin"]
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin, str(PROJECT / "tests")]
    return subprocess.run(
        [*command, "-o", f"cache_dir={tmp_path}"], cwd=PROJECT, env=environ, capture_output=True, text=True, timeout=600
    )


def test_the_example_project_passes(tmp_path: pathlib.Path) -> None:
    from csa.pytest_plugin import kernel_tests

    test = kernel_tests("topk", lambda scores, lengths, offsets, *, k: None, convention="v4.1")
    expected = len(test.pytestmark[0].args[1])  # type: ignore[attr-defined]
    run = run_project(tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{expected} passed" in run.stdout, run.stdout  # one test per top-k property


def test_the_example_project_fails_when_its_kernel_is_broken(tmp_path: pathlib.Path) -> None:
    run = run_project(tmp_path, MY_KERNELS_BROKEN="1")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "FAILED tests/test_topk.py::test_topk[topk_equals_reference]" in run.stdout, run.stdout
    assert "Failing explicit example" in run.stdout or "Falsifying example" in run.stdout, run.stdout


def test_kernel_tests_refuses_a_wrong_operation_convention_or_signature() -> None:
    from csa.pytest_plugin import kernel_tests

    def topk(scores: object, lengths: object, offsets: object, *, k: int) -> None: ...

    with pytest.raises(ValueError, match="op: unknown operation"):
        kernel_tests("top_k", topk)
    with pytest.raises(ValueError, match="convention: topk has no convention 'v5'"):
        kernel_tests("topk", topk, convention="v5")
    with pytest.raises(ValueError, match=r"fn: topk needs a callable accepting \(scores, lengths, offsets, k=\)"):
        kernel_tests("topk", lambda scores: None, convention="v4.1")


def test_kernel_tests_take_options_and_leave_out_groups() -> None:
    from csa.pytest_plugin import kernel_tests

    def restore(offsets: object, candidate_blocks: object, *, block_size: int) -> None: ...

    def topk(scores: object, lengths: object, offsets: object, *, k: int) -> None: ...

    def names(test: object) -> list[str]:
        marks = [m for m in getattr(test, "pytestmark", []) if m.name == "parametrize"]
        return [p.name for p in marks[0].args[1]]

    assert "candidate_restore_refuses_bad_padding" in names(kernel_tests("candidate_restore", restore))
    left = names(kernel_tests("candidate_restore", restore, leave_out=("bad_input",)))
    assert left and "candidate_restore_refuses_bad_padding" not in left
    assert names(kernel_tests("topk", topk, convention="v4.1+ties_any+order_rank"))
    with pytest.raises(ValueError, match=r"^leave_out: no property group 'nope'; known: bad_input$"):
        kernel_tests("topk", topk, convention="v4.1", leave_out=("nope",))
