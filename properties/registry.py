"""One registry for every implementation: the reference adapters, the project's fast kernels, the shipped
mutants and a user's callable are all found the same way."""

from __future__ import annotations

import importlib
import importlib.util
import pathlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from properties.contract import operation, require_convention
from properties.loader import gather

ORIGINS = ("reference", "fast", "user", "mutant")


@dataclass(frozen=True)
class Implementation:
    op: str
    name: str
    fn: Callable[..., Any]
    convention: str | None = None
    origin: str = "fast"
    device: str = "cpu"
    note: str = ""

    @property
    def id(self) -> str:
        conv = f"[{self.convention}]" if self.convention else ""
        return f"{self.op}:{self.name}{conv}"


class Registry:
    def __init__(self) -> None:
        self._items: dict[str, Implementation] = {}

    def register(self, impl: Implementation) -> Implementation:
        operation(impl.op)
        require_convention(impl.op, impl.convention)
        if impl.origin not in ORIGINS:
            raise ValueError(f"origin: must be one of {ORIGINS}, got {impl.origin!r}")
        if impl.id in self._items:
            raise ValueError(f"name: {impl.id} is already registered")
        self._items[impl.id] = impl
        return impl

    def __contains__(self, impl_id: object) -> bool:
        return impl_id in self._items

    def find(self, op: str | None = None, origin: str | None = None) -> list[Implementation]:
        return [
            i for i in self._items.values() if (op is None or i.op == op) and (origin is None or i.origin == origin)
        ]


REGISTRY = Registry()
MUTANTS = Registry()


def collect(
    into: list[Implementation], op: str, name: str, *, convention: str | None = None, origin: str = "fast"
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: append ``fn`` to ``into`` as an implementation of ``op`` (registered by :func:`discover`)."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        into.append(Implementation(op, name, fn, convention, origin))
        return fn

    return wrap


def discover() -> Registry:
    """Register every area's reference adapters (``properties.<area>.impls``) and the project's fast kernels
    (``properties.<area>.kernels``), once; the registry is the same object on every call."""
    for impl in [*gather("impls", "IMPLEMENTATIONS"), *gather("kernels", "IMPLEMENTATIONS")]:
        if impl.id not in REGISTRY:
            REGISTRY.register(impl)
    return REGISTRY


class LoadError(Exception):
    """A user's callable could not be loaded; the command line turns this into exit status 2."""


def load_callable(spec: str) -> Callable[..., Any]:
    """Load ``package.module:callable`` or ``path/to/file.py:callable``. Failure is an error, never a fallback."""
    if ":" not in spec:
        raise LoadError(f"--impl: expected MODULE:CALLABLE or FILE.py:CALLABLE, got {spec!r}")
    target, _, attr = spec.rpartition(":")
    try:
        if target.endswith(".py"):
            path = pathlib.Path(target).resolve()
            if not path.is_file():
                raise LoadError(f"--impl: no such file {target}")
            name = f"csa_user_{path.stem}"
            spec_obj = importlib.util.spec_from_file_location(name, path)
            if spec_obj is None or spec_obj.loader is None:
                raise LoadError(f"--impl: cannot load {target}")
            module = importlib.util.module_from_spec(spec_obj)
            sys.modules[name] = module
            spec_obj.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except LoadError:
        raise
    except Exception as err:  # the user's module raised while importing: report it, do not fall back
        raise LoadError(f"--impl: importing {target} failed: {type(err).__name__}: {err}") from err
    fn = getattr(module, attr, None)
    if fn is None or not callable(fn):
        raise LoadError(f"--impl: {target} has no callable {attr!r}")
    return fn  # type: ignore[no-any-return]
