"""The book's labs as modules, for tests that call their functions (a lab's file name starts with a digit)."""

from __future__ import annotations

import importlib.util
import pathlib
from types import ModuleType

LABS = pathlib.Path(__file__).resolve().parents[1] / "labs"


def load(name: str) -> ModuleType:
    """``labs/<name>.py`` imported fresh as a module."""
    spec = importlib.util.spec_from_file_location(f"lab_{name}", LABS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
