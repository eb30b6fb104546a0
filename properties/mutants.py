"""The shipped mutants: implementations with one planted bug each, gathered from ``properties/<area>/mutants.py``.

Each area module defines ``MUTANTS: list[Implementation]`` (origin ``"mutant"``). The suite must kill all of them.
"""

from __future__ import annotations

from properties.loader import gather
from properties.registry import MUTANTS, Registry


def register_mutants() -> Registry:
    for mutant in gather("mutants", "MUTANTS"):
        if mutant.origin != "mutant":
            raise ValueError(f"MUTANTS: {mutant.id} must have origin 'mutant'")
        if mutant.id not in MUTANTS:
            MUTANTS.register(mutant)
    return MUTANTS
