"""docs/fuzzing.md shows runs as they are: every quoted command output is a verbatim piece of a saved run under
results/fuzz/ (written by scripts/fuzz_transcripts.sh and scripts/fuzz_timing.sh)."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_every_quoted_run_is_a_saved_run() -> None:
    saved = {path.name: path.read_text() for path in (ROOT / "results" / "fuzz").glob("*.txt")}
    blocks = re.findall(r"```\n(.*?)```", (ROOT / "docs" / "fuzzing.md").read_text(), flags=re.S)
    quoted = [b for b in blocks if b.startswith(("$ csa", "$ python", "csa fuzz --op"))]
    assert len(quoted) >= 9
    for block in quoted:
        assert any(block in text for text in saved.values()), f"not in results/fuzz/: {block[:200]}"


def test_saved_runs_say_where_they_ran() -> None:
    for path in (ROOT / "results" / "fuzz").glob("*.txt"):
        assert re.search(r"machine: .*\d+ cores", path.read_text()), path.name
