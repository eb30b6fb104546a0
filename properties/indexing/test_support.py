"""Support of the indexing properties: the torch implementations the mutants are planted in are correct
without a fault (every indexing property passes on them, under every convention, so a killed mutant dies of its
planted bug alone); the frozen examples name existing properties and mutants; and, under the deep profile,
random search alone kills every mutant."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import settings

from properties.contract import operation
from properties.indexing.faulty import NO_FAULTS
from properties.indexing.frozen import FROZEN
from properties.indexing.mutants import MUTANTS, bound
from properties.indexing.props import PROPERTIES as INDEXING
from properties.indexing.props_addressing import PROPERTIES as ADDRESSING
from properties.mutation import hunt
from properties.profiles import profile_name
from properties.registry import Implementation
from properties.runner import applicable, hypothesis_test

OPS = tuple(dict.fromkeys(p.op for p in (*INDEXING, *ADDRESSING)))
"""The indexing area's operations: those its properties check."""
TWINS = [
    Implementation(op, "torch", bound(op, convention, NO_FAULTS), convention, origin="fast")
    for op in OPS
    for convention in (operation(op).conventions or (None,))
]
PAIRS = applicable([*INDEXING, *ADDRESSING], TWINS)
TWIN_EXAMPLES = 10  # plus every hand-written and frozen example, replayed first


@pytest.mark.parametrize(("prop", "impl"), PAIRS, ids=[f"{p.name}-{i.id}" for p, i in PAIRS])
def test_torch_indexing_twin(prop, impl):  # type: ignore[no-untyped-def]
    settings(settings.default, max_examples=TWIN_EXAMPLES)(hypothesis_test(prop, impl))()


def test_every_indexing_op_has_a_twin() -> None:
    assert {i.op for i in TWINS} == set(OPS)
    assert {p.op for p in [*INDEXING, *ADDRESSING]} == set(OPS)


def test_frozen_examples_name_existing_properties_and_mutants() -> None:
    names = {p.name for p in [*INDEXING, *ADDRESSING]}
    mutants = {m.id for m in MUTANTS}
    assert set(FROZEN) <= names
    assert {mutant for entries in FROZEN.values() for mutant, _ in entries} <= mutants


@pytest.mark.skipif(profile_name() != "deep", reason="the search-only hunt runs under the deep profile (make fuzz)")
def test_search_alone_kills_every_indexing_mutant() -> None:
    """Without the frozen and hand-written examples, random search still kills every mutant, and every
    property kills one."""
    bare = [dataclasses.replace(p, examples=()) for p in [*INDEXING, *ADDRESSING]]
    kills, by_property = hunt(bare, MUTANTS)
    assert [k.mutant for k in kills if not k.killed_by] == []
    assert sorted(name for name, killed in by_property.items() if not killed) == []
