"""Every property of the suite, gathered from the areas' ``properties/<area>/props.py``."""

from __future__ import annotations

from properties.loader import gather
from properties.runner import Property


def all_properties() -> list[Property]:
    props: list[Property] = gather("props", "PROPERTIES")
    names = [p.name for p in props]
    duplicated = {n for n in names if names.count(n) > 1}
    if duplicated:
        raise ValueError(f"PROPERTIES: property names must be unique, repeated: {sorted(duplicated)}")
    return props


def properties_for(op: str) -> list[Property]:
    return [p for p in all_properties() if p.op == op]
