"""labs/27_indexing.py prints the book's seven lines, saves them, and fails when a check fails."""

from __future__ import annotations

import pathlib
import subprocess
import sys
from collections.abc import Callable

import pytest

from tests import labs

ROOT = pathlib.Path(__file__).resolve().parents[1]
LAB = ROOT / "labs" / "27_indexing.py"

# Seed 000, appendix A.4, the output of `python3 labs/27_indexing.py` (the book's text, verbatim).
BOOK = """\
Scores: [2, 6, 3, 0, 300] | valid prefix: 4
Top-2 over valid rows: [1, 2]
Candidate block scores: [6, 3] | retained block: 0
Top-2 within retained block: [0, 1]
One valid row, three output slots: [0, -1, -1]
Prefill at gathered offset 10: [11, 12]
Decode logical rows: [1, 2, 4, -1] -> physical slots: [29, 30, 8, -1]
"""


def test_lab_prints_the_book_lines_from_any_directory(tmp_path: pathlib.Path) -> None:
    done = subprocess.run([sys.executable, str(LAB)], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == BOOK
    assert done.stderr == ""
    assert (ROOT / "results" / "27_indexing.txt").read_text() == BOOK
    assert not (tmp_path / "results").exists()


def test_lab_checks_pass_and_compute_every_line() -> None:
    lines, failures = labs.load("27_indexing").run()
    assert failures == []
    assert "\n".join(lines) + "\n" == BOOK


@pytest.mark.parametrize(
    "broken",
    [
        # top-2 picks the two lowest scores: the pair check must fail
        lambda real: (
            lambda scores, valid, k, convention, offset=0: (
                tuple(sorted(sorted(range(valid), key=lambda i: scores[i])[:k]))
                if k == 2 and offset == 0 and valid == 4
                else real(scores, valid, k, convention, offset)
            )
        ),
        # the row past the valid prefix leaks into the choice
        lambda real: lambda scores, valid, k, convention, offset=0: real(scores, len(scores), k, convention, offset),
        # empty ranges are not filled
        lambda real: (
            lambda scores, valid, k, convention, offset=0: (
                () if valid == 0 else real(scores, valid, k, convention, offset)
            )
        ),
        # undersized ranges lose their fill lanes
        lambda real: (
            lambda scores, valid, k, convention, offset=0: tuple(
                x for x in real(scores, valid, k, convention, offset) if x != -1
            )
        ),
    ],
    ids=["worst-pair", "reads-past-end", "empty-unfilled", "undersized-unfilled"],
)
def test_lab_checks_catch_a_broken_topk(
    broken: Callable[[Callable[..., tuple[int, ...]]], Callable[..., tuple[int, ...]]],
) -> None:
    lab = labs.load("27_indexing")
    lab.topk = broken(lab.topk)  # type: ignore[attr-defined]
    _, failures = lab.run()
    assert failures


def test_lab_exits_nonzero_when_a_check_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    lab = labs.load("27_indexing")
    monkeypatch.setattr(lab, "RESULTS", tmp_path / "out.txt")
    real = lab.topk
    monkeypatch.setattr(lab, "topk", lambda s, v, k, c, offset=0: () if v == 0 else real(s, v, k, c, offset))
    assert lab.main() == 1
    assert "check failed" in capsys.readouterr().err
