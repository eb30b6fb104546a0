"""The supervised worker (``properties.isolation``): a hang is a failure within its time limit, a crash names its
signal, an exception keeps its type, and after each the next call runs in a fresh worker."""

from __future__ import annotations

import pathlib
import time

import pytest
import torch

from properties.isolation import KernelCrash, KernelTimeout, Supervisor, WorkerStartError, pack, unpack

ROOT = pathlib.Path(__file__).resolve().parents[1]
MISBEHAVING = ROOT / "examples" / "misbehaving.py"


def topk_args(empty_row: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    scores = torch.tensor([[2.0, 6.0, 3.0, 0.0, 300.0], [1.0, 2.0, float("nan"), 4.0, 5.0]])
    lengths = torch.tensor([4, 0 if empty_row else 2], dtype=torch.int32)
    return scores, lengths, torch.tensor([0, 10], dtype=torch.int32)


def test_a_hanging_kernel_fails_within_its_limit() -> None:
    with Supervisor(f"{MISBEHAVING}:hangs", "topk", timeout=1.0) as kernel:
        kernel.hello()
        start = time.monotonic()
        with pytest.raises(KernelTimeout, match=r"timed out after 1 s"):
            kernel(*topk_args(False), k=2)
        assert time.monotonic() - start < 5.0
        assert kernel.restarts == 1


@pytest.mark.parametrize(
    ("kernel", "error", "text"),
    [("segfaults", KernelCrash, r"died with SIGSEGV \(signal 11\)"), ("raises", IndexError, "list index out of range")],
)
def test_a_crash_or_an_exception_is_reported_and_the_next_call_runs(kernel: str, error: type, text: str) -> None:
    with Supervisor(f"{MISBEHAVING}:{kernel}", "topk", timeout=30.0) as fn:
        with pytest.raises(error, match=text):
            fn(*topk_args(True), k=2)
        out = fn(*topk_args(False), k=2)  # a fresh worker after the crash, the same one after the exception
        assert out.tolist() == [[1, 2], [10, 11]]
        assert fn.restarts == (1 if error is KernelCrash else 0)


def test_a_kernels_own_exception_class_keeps_its_builtin_base(tmp_path: pathlib.Path) -> None:
    """The harness cannot load the class of a file kernel; it gets one of the same name deriving from ValueError,
    so a property expecting ValueError (a refused call) still sees one."""
    source = tmp_path / "refuses.py"
    source.write_text(
        "class BadLengths(ValueError):\n    pass\n\n"
        "def topk(scores, lengths, offsets, *, k):\n    raise BadLengths('lengths: must be positive')\n"
    )
    with Supervisor(f"{source}:topk", "topk") as fn, pytest.raises(ValueError) as caught:
        fn(*topk_args(False), k=2)
    assert type(caught.value).__name__ == "BadLengths" and "must be positive" in str(caught.value)
    assert getattr(caught.value, "csa_where", "").startswith(f"{source}:5")


def test_in_place_arguments_come_back_from_the_worker() -> None:
    rows = torch.ones(1, 512, dtype=torch.float32)
    cache = torch.zeros(2, 528, dtype=torch.uint8)
    with Supervisor("registry:quantize_store:cache_torch[v41_fp8_528]", "quantize_store") as fn:
        fn(rows, torch.tensor([1]), cache, fmt="v41_fp8_528", rows_per_block=1, layer=0)
    assert cache[0].sum() == 0 and cache[1].sum() > 0


def test_a_kernel_that_cannot_load_is_a_start_error(tmp_path: pathlib.Path) -> None:
    with Supervisor(f"{tmp_path / 'missing.py'}:f", "topk") as fn, pytest.raises(WorkerStartError, match="no such"):
        fn.hello()


def test_tensors_cross_with_dtype_shape_strides_and_bytes() -> None:
    wide = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    cases = [
        wide[:, ::2],
        wide.to(torch.bfloat16).t(),
        torch.tensor([float("nan"), -0.0]),
        torch.empty(0, 3, dtype=torch.int64),
        torch.tensor(5, dtype=torch.int32),
    ]
    for t in cases:
        back = unpack(pack((t, {"x": [t]})))
        for got in (back[0], back[1]["x"][0]):
            assert (got.dtype, got.shape, got.stride()) == (t.dtype, t.shape, t.stride())
            assert (
                got.contiguous().reshape(-1).view(torch.uint8).tolist()
                == t.contiguous().reshape(-1).view(torch.uint8).tolist()
            )


ORPHAN = """
import torch
from properties.isolation import Supervisor
kernel = Supervisor({spec!r}, "topk", timeout=600)
kernel.hello()
print(kernel._worker.proc.pid, flush=True)
kernel(torch.zeros(1, 2), torch.tensor([2], dtype=torch.int32), torch.tensor([0], dtype=torch.int32), k=1)
"""

STUCK = """
import pathlib, threading
def topk(scores, lengths, offsets, *, k):
    pathlib.Path(__file__).with_suffix(".inside").touch()
    threading.Event().wait()  # never returns
"""


def test_a_worker_stuck_in_a_kernel_dies_with_its_harness(tmp_path: pathlib.Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    (tmp_path / "stuck.py").write_text(STUCK)
    script = tmp_path / "harness.py"
    script.write_text(ORPHAN.format(spec=f"{tmp_path / 'stuck.py'}:topk"))
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRITON_INTERPRET="1")
    harness = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, text=True)
    assert harness.stdout is not None
    worker = int(harness.stdout.readline())
    deadline = time.monotonic() + 60
    while not (tmp_path / "stuck.inside").exists():  # the worker is inside the kernel, which never returns
        assert time.monotonic() < deadline and harness.poll() is None
        time.sleep(0.05)
    harness.send_signal(signal.SIGKILL)
    harness.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{worker}/stat") as stat:
                if stat.read().split(") ")[1].startswith("Z"):
                    return  # dead, not yet reaped
        except FileNotFoundError:
            return
        time.sleep(0.1)
    os.kill(worker, signal.SIGKILL)
    raise AssertionError("the worker outlived its harness")
