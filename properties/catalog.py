"""Every property of the suite, gathered from the area modules (``properties/props_*.py``)."""

from __future__ import annotations

import importlib

from properties.runner import Property

AREA_MODULES = (
    "properties.props_compression",
    "properties.props_indexing",
    "properties.props_addressing",
    "properties.props_formats",
    "properties.props_attention",
)


def all_properties() -> list[Property]:
    props: list[Property] = []
    for name in AREA_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name == name:
                continue
            raise
        props.extend(module.PROPERTIES)
    names = [p.name for p in props]
    duplicated = {n for n in names if names.count(n) > 1}
    if duplicated:
        raise ValueError(f"PROPERTIES: property names must be unique, repeated: {sorted(duplicated)}")
    return props


def properties_for(op: str) -> list[Property]:
    return [p for p in all_properties() if p.op == op]
