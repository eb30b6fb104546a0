"""Mutation testing: every shipped mutant (a planted bug) must be caught by at least one property, and every
property must catch at least one mutant. A suite that kills no mutant cannot fail, which is a defect."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from properties.registry import Implementation
from properties.runner import Property, run_property

MUTANT_EXAMPLES = 300  # per (property, mutant); the mutants are gross bugs, found within tens of examples


@dataclass
class Kill:
    mutant: str
    killed_by: list[str]


def hunt(
    props: Sequence[Property], mutants: Sequence[Implementation], max_examples: int = MUTANT_EXAMPLES
) -> tuple[list[Kill], dict[str, list[str]]]:
    """Run each property on each mutant it applies to. Returns the kills per mutant and per property."""
    kills: list[Kill] = []
    by_property: dict[str, list[str]] = {p.name: [] for p in props}
    for mutant in mutants:
        killed_by = []
        for prop in props:
            if not prop.applies_to(mutant):
                continue
            examples = min(max_examples, prop.hunt_examples or max_examples)
            outcome = run_property(prop, mutant, max_examples=examples, derandomize=True, shrink=False)
            if not outcome.passed:
                killed_by.append(prop.name)
                by_property[prop.name].append(mutant.name)
        kills.append(Kill(mutant.name, killed_by))
    return kills, by_property


SUMMARY: list[str] = []  # lines the test session prints at its end (see conftest.py)


def score_line(kills: Sequence[Kill]) -> str:
    killed = sum(1 for k in kills if k.killed_by)
    pct = 100 * killed // len(kills) if kills else 0
    return f"mutation score: {killed}/{len(kills)} mutants killed ({pct}%)"
