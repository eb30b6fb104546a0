"""The shipped mutants: implementations with one planted bug each, gathered from ``properties/<area>/mutants.py``.

Each area module defines ``MUTANTS: list[Implementation]`` (origin ``"mutant"``), built from the catalogue
``mutants.json`` beside it (:func:`catalogue`). The suite must kill all of them.
"""

from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass
from typing import Any

from properties.ladder import ladder
from properties.loader import gather
from properties.registry import MUTANTS, Registry


@dataclass(frozen=True)
class Planted:
    """One catalogue entry: the mutant's name, its operation and convention (None: the operation has none or
    takes its default), the switches of the area's faulty implementation that plant the bug, and the note."""

    name: str
    op: str
    bug: dict[str, Any]
    note: str
    convention: str | None = None


class _Tiles(dict[str, int]):
    def __missing__(self, kind: str) -> int:
        return ladder(kind).tile


def catalogue(module_file: str) -> list[Planted]:
    """The entries of the ``mutants.json`` beside ``module_file``, one JSON object a mutant, in order. A note's
    ``{kind}`` is the tile of that ladder (``properties.ladder``): the size a planted size bug breaks past."""
    entries = json.loads(pathlib.Path(module_file).with_name("mutants.json").read_text())
    return [Planted(**{**entry, "note": entry["note"].format_map(_Tiles())}) for entry in entries]


def register_mutants() -> Registry:
    for mutant in gather("mutants", "MUTANTS"):
        if mutant.origin != "mutant":
            raise ValueError(f"MUTANTS: {mutant.id} must have origin 'mutant'")
        if mutant.id not in MUTANTS:
            MUTANTS.register(mutant)
    return MUTANTS
