"""The shipped mutants: implementations with one planted bug each, gathered from ``properties/mutants_*.py``.

Each area module defines ``MUTANTS: list[Implementation]`` (origin ``"mutant"``). The suite must kill all of them.
"""

from __future__ import annotations

import importlib

from properties.registry import MUTANTS, Registry

MUTANT_MODULES = (
    "properties.mutants_compression",
    "properties.mutants_indexing",
    "properties.mutants_formats",
)


def register_mutants() -> Registry:
    for name in MUTANT_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name == name:
                continue
            raise
        for mutant in module.MUTANTS:
            if mutant.origin != "mutant":
                raise ValueError(f"MUTANTS: {mutant.id} in {name} must have origin 'mutant'")
            if mutant.id not in {m.id for m in MUTANTS.find()}:
                MUTANTS.register(mutant)
    return MUTANTS
