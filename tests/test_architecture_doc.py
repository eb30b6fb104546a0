"""docs/architecture.md stays true: one row per contract operation, and every file it names exists."""

from __future__ import annotations

import pathlib
import re

from properties.contract import OPERATIONS

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "architecture.md").read_text()
TABLE = DOC.split("## One record per operation")[1].split("\n\n")[1]
LAYER_OF_COLUMN = ("reference", "fast", "properties")


def rows() -> dict[str, list[str]]:
    out = {}
    for line in TABLE.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        out[cells[0].strip("`")] = cells[1:]
    return out


def test_one_row_per_operation() -> None:
    assert set(rows()) == set(OPERATIONS)


def test_every_file_in_the_table_exists() -> None:
    for op, cells in rows().items():
        for layer, cell in zip(LAYER_OF_COLUMN, cells, strict=True):
            names = re.findall(r"`([\w/]+\.py|[\w/]+/)`", cell)
            assert names, f"{op}: no file named for {layer}"
            area = ""
            for name in names:
                path = ROOT / layer / (name if "/" in name or layer == "reference" else f"{area}/{name}")
                if "/" in name:
                    area = name.split("/")[0]
                assert path.exists(), f"{op}: {path.relative_to(ROOT)} does not exist"
