"""The suite bites: every shipped mutant is killed, and every property kills at least one mutant."""

from __future__ import annotations

import pytest

from properties.catalog import all_properties
from properties.mutants import register_mutants
from properties.mutation import SUMMARY, hunt, score_line

MIN_MUTANTS = 15


@pytest.fixture(scope="module")
def hunted():  # type: ignore[no-untyped-def]
    mutants = register_mutants().find()
    kills, by_property = hunt(all_properties(), mutants)
    for kill in kills:
        SUMMARY.append(
            f"  {kill.mutant:45} {'killed by ' + ', '.join(kill.killed_by) if kill.killed_by else 'SURVIVED'}"
        )
    SUMMARY.append(score_line(kills))
    return mutants, kills, by_property


def test_enough_mutants(hunted) -> None:  # type: ignore[no-untyped-def]
    mutants, _, _ = hunted
    assert len(mutants) >= MIN_MUTANTS


def test_every_mutant_killed(hunted) -> None:  # type: ignore[no-untyped-def]
    _, kills, _ = hunted
    survivors = [k.mutant for k in kills if not k.killed_by]
    assert survivors == [], score_line(kills)


def test_every_property_kills_a_mutant(hunted) -> None:  # type: ignore[no-untyped-def]
    _, _, by_property = hunted
    toothless = sorted(name for name, killed in by_property.items() if not killed)
    assert toothless == [], f"properties that kill no mutant: {toothless}"
