"""Test-session set-up shared by properties/ and tests/: Triton mode and Hypothesis profiles."""

import os
import shutil

if "TRITON_INTERPRET" not in os.environ and shutil.which("nvidia-smi") is None:
    os.environ["TRITON_INTERPRET"] = "1"

from properties.profiles import load_profile

load_profile()


def pytest_terminal_summary(terminalreporter):  # type: ignore[no-untyped-def]
    from properties.mutation import SUMMARY

    if SUMMARY:
        terminalreporter.section("mutants")
        for line in SUMMARY:
            terminalreporter.write_line(line)
