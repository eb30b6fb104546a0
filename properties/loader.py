"""The one way the harness finds what each area contributes: ``properties.<area>.<role>`` for every area.

Every area package (``properties/compression``, ``properties/indexing``, ``properties/cache``) has the same
roles: ``props`` (``PROPERTIES``), ``impls`` (the reference adapters, ``IMPLEMENTATIONS``), ``kernels`` (the
project's fast kernels, ``IMPLEMENTATIONS``) and ``mutants`` (``MUTANTS``). A module is left out only where
one of the packages named in ``optional`` is not installed; any other import error is raised.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

AREAS = ("compression", "indexing", "cache")


def area_modules(role: str, optional: tuple[str, ...] = ()) -> list[ModuleType]:
    """``properties.<area>.<role>`` for every area, in ``AREAS`` order."""
    modules = []
    for area in AREAS:
        try:
            modules.append(importlib.import_module(f"properties.{area}.{role}"))
        except ModuleNotFoundError as err:
            if err.name not in optional:
                raise
    return modules


def gather(role: str, attribute: str, optional: tuple[str, ...] = ()) -> list[Any]:
    """The concatenation of ``attribute`` (a list) over every area's ``role`` module."""
    return [item for module in area_modules(role, optional) for item in getattr(module, attribute)]
