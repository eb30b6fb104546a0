"""Test-session set-up shared by properties/ and tests/: Triton mode and Hypothesis profiles."""

import os
import shutil

if "TRITON_INTERPRET" not in os.environ and shutil.which("nvidia-smi") is None:
    os.environ["TRITON_INTERPRET"] = "1"

import pytest

from csa.pytest_plugin import entry_point_installed
from properties.profiles import load_profile

load_profile()

# Installing the package registers csa's pytest plugin (its ``pytest11`` entry point); a run from a checkout
# whose python has not installed it (a GPU machine's image) loads it here.
if not entry_point_installed():
    pytest_plugins = ["csa.pytest_plugin"]


def pytest_sessionfinish(session):  # type: ignore[no-untyped-def]
    """Under pytest-xdist, a worker hands its mutation summary to the controller, which prints it."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        from properties.mutation import SUMMARY

        workeroutput["csa_summary"] = list(SUMMARY)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):  # type: ignore[no-untyped-def]
    from properties.mutation import SUMMARY

    SUMMARY.extend(getattr(node, "workeroutput", {}).get("csa_summary", []))


def pytest_terminal_summary(terminalreporter):  # type: ignore[no-untyped-def]
    from properties.mutation import SUMMARY

    if SUMMARY:
        terminalreporter.section("mutants")
        for line in SUMMARY:
            terminalreporter.write_line(line)
