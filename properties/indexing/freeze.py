"""Regenerate ``properties/indexing/frozen.json`` (loaded by ``properties/indexing/frozen.py``): the shrunk
counterexamples by which the indexing properties kill the shipped mutants, found by search alone (every frozen
example is set aside while searching).

Usage: ``python -m properties.indexing.freeze [--examples N]``. Each property then replays its frozen examples
before any random one, so a kernel with one of these bugs fails at once, and the mutant hunt in
``properties/test_mutants.py`` stays fast. ``properties/indexing/test_support.py`` (deep profile) checks that
search alone still kills every mutant.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys
from typing import Any

from properties.indexing.mutants import MUTANTS
from properties.indexing.props import HAND_WRITTEN
from properties.runner import Property, run_property

TARGET = pathlib.Path(__file__).with_name("frozen.json")


def frozen_json(frozen: dict[str, list[tuple[str, Any]]]) -> str:
    """``frozen`` as ``frozen.json`` holds it: one line per (mutant, example) entry, under its property's name."""
    blocks = []
    for name, entries in frozen.items():
        lines = ",\n".join(f"    {json.dumps([mutant, example])}" for mutant, example in entries)
        blocks.append(f"  {json.dumps(name)}: [\n{lines}\n  ]" if entries else f"  {json.dumps(name)}: []")
    return "{\n" + ",\n".join(blocks) + "\n}\n"


def search_kills(prop: Property, examples: int) -> list[tuple[str, Any]]:
    """(mutant, shrunk example) for every shipped mutant ``prop`` kills by search alone."""
    bare = dataclasses.replace(prop, examples=())
    found = []
    for mutant in MUTANTS:
        if bare.applies_to(mutant):
            outcome = run_property(bare, mutant, max_examples=examples, derandomize=True)
            if not outcome.passed:
                found.append((mutant.id, outcome.example))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=300)
    args = parser.parse_args(argv)
    frozen = {}
    for prop in HAND_WRITTEN:
        kills = search_kills(prop, args.examples)
        print(f"{prop.name}: kills {', '.join(m for m, _ in kills) or 'nothing'}", file=sys.stderr)
        frozen[prop.name] = kills
    TARGET.write_text(frozen_json(frozen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
