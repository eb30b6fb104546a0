"""``csa fuzz --sanitize`` without a GPU: memcheck's report is read right, and the replay script it runs calls the
kernel in its own process, without guard bytes, with PyTorch's caching allocator off."""

from __future__ import annotations

import pathlib
import sys

from properties import sanitizer
from properties.reproducer import write_script

ROOT = pathlib.Path(__file__).resolve().parents[1]

MEMCHECK = """\
========= COMPUTE-SANITIZER
FAILS: quant_store_matches_reference
========= Invalid __global__ write of size 1 bytes
=========     at _copy+0x1d0 in misbehaving.py:95
=========     by thread (16,0,0) in block (0,0,0)
=========     Address 0x7f2a4c000210 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f2a4c000000 of size 528 bytes
=========
========= Invalid __global__ write of size 1 bytes
=========     at _copy+0x1d0 in misbehaving.py:95
=========
========= ERROR SUMMARY: 2 errors
"""

FAKE = """\
import os, subprocess, sys
# a stand-in for compute-sanitizer: run the program it was given, then print memcheck's summary
program = sys.argv[sys.argv.index({python!r}):]
done = subprocess.run(program, capture_output=True, text=True)
print("========= COMPUTE-SANITIZER")
print(done.stdout, end="")
print("caching allocator off:", os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING"))
print("========= ERROR SUMMARY: 0 errors")
"""


def test_memchecks_first_error_and_count_are_read() -> None:
    assert sanitizer.error_count(MEMCHECK) == 2
    assert sanitizer.first_error(MEMCHECK) == MEMCHECK.splitlines()[2:7]
    assert sanitizer.error_count("no summary") is None


def test_the_replay_runs_in_process_without_guards(tmp_path: pathlib.Path) -> None:
    tool = tmp_path / "fake-sanitizer"
    tool.write_text(f"#!{sys.executable}\n" + FAKE.format(python=sys.executable))
    tool.chmod(0o755)
    watcher = tmp_path / "watch.py"
    watcher.write_text(
        "import torch\n"
        "def topk(scores, lengths, offsets, *, k):\n"
        "    guarded = scores.untyped_storage().nbytes() > scores.numel() * 4\n"
        "    import os\n"
        "    print('pid', os.getpid(), 'guarded', guarded)\n"
        "    return torch.full((scores.shape[0], k), -1, dtype=torch.int32)\n"
    )
    script = write_script(
        tmp_path / "replay.py",
        cases=[("topk_lane_layout", {"scores": [[1.0, 2.0]], "lengths": [2], "offsets": [0], "k": 1})],
        op="topk",
        impl_spec=f"{watcher}:topk",
        convention="v4.1",
        device="cpu",
    )
    result = sanitizer.run(str(tool), script, timeout=120)
    assert result.errors == 0 and result.first == []
    assert "guarded False" in result.output and "FAILS: topk_lane_layout" in result.output, result.output
    assert "caching allocator off: 1" in result.output
