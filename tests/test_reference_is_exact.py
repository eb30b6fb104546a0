"""reference/ is exact: no float literal, no float(), no math module, no numpy float dtype, no float annotation."""

import ast
import pathlib

import pytest

REFERENCE = pathlib.Path(__file__).resolve().parents[1] / "reference"
FORBIDDEN_NAMES = {"float", "math", "numpy", "np", "float16", "float32", "float64", "bfloat16", "torch"}


def _violations(path: pathlib.Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        where = f"{path.name}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Constant) and isinstance(node.value, float | complex):
            found.append(f"{where} float literal {node.value!r}")
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            found.append(f"{where} name {node.id}")
        elif isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_NAMES - {"math"}:
            found.append(f"{where} attribute .{node.attr}")
        elif isinstance(node, ast.Import | ast.ImportFrom):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for module in modules:
                if module.split(".")[0] in {"math", "numpy", "torch", "cmath", "statistics"}:
                    found.append(f"{where} import {module}")
    return found


@pytest.mark.parametrize("path", sorted(REFERENCE.glob("*.py")), ids=lambda p: p.name)
def test_no_float_in_reference(path: pathlib.Path) -> None:
    assert _violations(path) == []


def test_scanner_catches_float(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import math\nx = 0.5\ny = float('1')\n")
    assert len(_violations(bad)) == 3
