"""Lab 26 prints the book's seven lines exactly, writes them to results/, and fails when a check fails."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from tests import labs

ROOT = pathlib.Path(__file__).resolve().parents[1]
LAB = ROOT / "labs" / "26_compression.py"

# The OUTPUT block of the book's lab 26 (appendix A), verbatim; "Saved output" is the book's caption, not output.
BOOK = """\
C2 rows (before BF16/norm/RoPE): [('6', '8'), ('8', '3'), ('3', '5')]
Chunks [0,1), [1,4), [4,7): valid/reserved rows [(0, 1), (2, 2), (1, 1)]
Pending token positions: [6]
Six-position decode: ring 7 preserves every completed pair
Ring 6 corrupts first pair: ('42/5', '8')
Checks: 64 chunk partitions agree exactly; undersized ring fails
Default C2 state payload: 7 * 2 * 512 * 4 = 28672 bytes
"""


def test_lab_prints_the_book_from_any_directory(tmp_path: pathlib.Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(LAB)], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == BOOK
    assert (ROOT / "results" / "26_compression.txt").read_text() == BOOK
    assert not (tmp_path / "results").exists()


def test_lab_exits_nonzero_when_a_check_fails(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lab = labs.load("26_compression")
    monkeypatch.setattr(lab, "RESULTS", tmp_path / "out.txt")
    assert lab.main() == 0
    assert (tmp_path / "out.txt").read_text() == BOOK
    (tmp_path / "out.txt").unlink()
    capsys.readouterr()
    # A ring one slot short of the safe size no longer preserves every pair: the lab must fail and save nothing.
    monkeypatch.setattr(lab, "min_safe_ring_size", lambda *args, **kwargs: 6)
    assert lab.main() == 1
    assert "ring 6 does not preserve" in capsys.readouterr().err
    assert not (tmp_path / "out.txt").exists()


def test_lab_counts_every_partition() -> None:
    lab = labs.load("26_compression")
    assert len(lab.compositions(7)) == 64
    assert sorted(map(tuple, lab.compositions(3))) == [(1, 1, 1), (1, 2), (2, 1), (3,)]
