"""Shipped compression mutants: the small torch implementation (``properties.compression.faulty``) with one
planted bug each. ``properties/test_mutants.py`` asserts every one is killed; the property expected to kill
each is named in ``note`` (the hunt reports all that do)."""

from __future__ import annotations

from functools import partial

from properties.compression.call import DECODE
from properties.compression.faulty import Faults, run
from properties.mutants import catalogue
from properties.registry import Implementation


def _mutant(op: str, name: str, convention: str | None, note: str, **faults: object) -> Implementation:
    discipline = convention if op == DECODE else None
    fn = partial(run, op, discipline, Faults(**faults))  # type: ignore[arg-type]
    return Implementation(op, name, fn, convention or "reserve_max1", origin="mutant", note=note)


MUTANTS = [_mutant(p.op, p.name, p.convention, p.note, **p.bug) for p in catalogue(__file__)]
"""The catalogue ``mutants.json``, in order: each entry's ``bug`` holds the ``Faults`` fields it changes; its
``note`` names the property expected to kill it."""
