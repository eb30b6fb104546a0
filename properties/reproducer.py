"""Standalone reproducer scripts: a failing example, frozen as Python source that needs only this package."""

from __future__ import annotations

import pathlib
from typing import Any

TEMPLATE = '''"""Reproducer: property {prop!r} fails for {impl_spec} (op {op}, convention {convention}).

Run with only csa-harness installed: python {filename}
"""

import sys
from fractions import Fraction  # noqa: F401  (examples may hold exact rationals)

from properties.catalog import all_properties
from properties.registry import Implementation, load_callable

nan = float("nan")
inf = float("inf")

EXAMPLE = {example}

fn = load_callable({impl_spec!r})
impl = Implementation({op!r}, "user", fn, {convention!r}, origin="user", device={device!r})
prop = next(p for p in all_properties() if p.name == {prop!r})
try:
    prop.check(impl, EXAMPLE)
except AssertionError as failure:
    print(f"FAILS: {{prop.name}}")
    print(failure)
    sys.exit(1)
print("passes: the bug is fixed")
'''


def write_reproducer(
    path: pathlib.Path, *, prop: str, op: str, impl_spec: str, convention: str | None, device: str, example: Any
) -> pathlib.Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    source = TEMPLATE.format(
        prop=prop,
        op=op,
        impl_spec=impl_spec,
        convention=convention,
        device=device,
        example=repr(example),
        filename=path.name,
    )
    compile(source, str(path), "exec")
    path.write_text(source)
    return path
