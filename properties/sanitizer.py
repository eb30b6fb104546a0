"""Replaying examples under compute-sanitizer memcheck (``csa fuzz --sanitize``).

Verification model:

1. The examples (the failing ones, else the first N of each property) are written as one replay script
   (``properties.reproducer``) and run under ``compute-sanitizer --tool memcheck``, the kernel called in the
   script's own process without guard regions, so every tensor it receives is its own allocation.
2. PyTorch's caching allocator is off for that run (``PYTORCH_NO_CUDA_MEMORY_CACHING=1``): every tensor, the
   outputs the kernel allocates included, is a separate cudaMalloc whose bounds memcheck knows, so a read or
   write one element past any of them is reported.
3. Only memory errors count: CUDA API errors (which PyTorch and Triton provoke and handle while probing) are not
   reported (``--report-api-errors no``).
4. The result is memcheck's error count and its first error, as it printed it.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

TOOL = "compute-sanitizer"
FALLBACK = pathlib.Path("/usr/local/cuda/bin/compute-sanitizer")
ERROR_EXIT = 86  # compute-sanitizer's exit status when it found an error


@dataclass
class Result:
    errors: int
    first: list[str]
    returncode: int
    output: str


def find() -> str | None:
    """The compute-sanitizer executable, or None."""
    found = shutil.which(TOOL)
    if found is None and FALLBACK.is_file():
        found = str(FALLBACK)
    return found


def first_error(output: str) -> list[str]:
    """memcheck's first error report, as printed: from its first line to the blank ``=========`` line."""
    lines = [line for line in output.splitlines() if line.startswith("=========")]
    block: list[str] = []
    for line in lines:
        body = line.removeprefix("=========").strip()
        if not block:
            if body and not body.startswith(("COMPUTE-SANITIZER", "ERROR SUMMARY", "LEAK SUMMARY")):
                block.append(line)
            continue
        if not body or body.startswith("ERROR SUMMARY"):
            break
        block.append(line)
    return block[:16]


def error_count(output: str) -> int | None:
    found = re.search(r"ERROR SUMMARY: (\d+) error", output)
    return int(found.group(1)) if found else None


def run(tool: str, script: pathlib.Path, timeout: float) -> Result:
    """``script --in-process --no-guards`` under memcheck; its error count and first error."""
    env = dict(os.environ, PYTORCH_NO_CUDA_MEMORY_CACHING="1")
    env.pop("TRITON_INTERPRET", None)
    command = [
        tool,
        "--tool",
        "memcheck",
        "--error-exitcode",
        str(ERROR_EXIT),
        "--report-api-errors",
        "no",  # memory errors only: the CUDA API errors PyTorch and Triton probe for and handle are not the kernel's
        "--print-limit",
        "10",
        sys.executable,
        str(script),
        "--in-process",
        "--no-guards",
    ]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as err:
        out = (err.stdout or b"").decode(errors="replace") if isinstance(err.stdout, bytes) else (err.stdout or "")
        return Result(-1, [f"compute-sanitizer did not finish within {timeout:.0f} s"], -1, out)
    output = done.stdout + done.stderr
    count = error_count(output)
    return Result(count if count is not None else -1, first_error(output), done.returncode, output)
