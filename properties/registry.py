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

from properties.contract import check_signature, operation, require_convention
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

    def get(self, impl_id: str) -> Implementation:
        if impl_id not in self._items:
            raise KeyError(impl_id)
        return self._items[impl_id]

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


REGISTERED = ("registry:", "mutant:")
"""Spec prefixes naming a registered implementation by id: ``registry:topk:triton[v4.1]`` (the reference adapters
and the project's kernels), ``mutant:<id>`` (a shipped mutant)."""


def load_callable(spec: str) -> Callable[..., Any]:
    """Load ``package.module:callable``, ``path/to/file.py:callable``, or a registered implementation
    (``registry:<id>``, ``mutant:<id>``). Failure is an error, never a fallback."""
    if spec.startswith(REGISTERED):
        kind, _, impl_id = spec.partition(":")
        if kind == "mutant":
            from properties.mutants import register_mutants

            found = register_mutants()
        else:
            found = discover()
        try:
            impl = found.get(impl_id)
        except KeyError:
            known = ", ".join(sorted(i.id for i in found.find()))
            raise LoadError(f"--impl: no {kind} implementation {impl_id!r}; known: {known}") from None
        return _declaring(impl.fn, impl.convention)
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


def signature_problem(fn: Callable[..., Any], op: str) -> str | None:
    """Why ``fn`` cannot be called with ``op``'s arguments (the positional tensors, then the keywords), or None."""
    import inspect

    try:
        inspect.signature(fn)
    except (TypeError, ValueError) as err:
        return f"--impl: cannot read the callable's signature: {err}"
    try:
        check_signature(fn, op)
    except ValueError as err:
        return f"--impl: {str(err).removeprefix('fn: ')}"
    return None


def import_root(spec: str) -> str | None:
    """The ``sys.path`` entry a ``module:callable`` spec was imported from (None for a file or a registered id):
    a reproducer puts it back on ``sys.path`` so it runs without the PYTHONPATH of the run that wrote it."""
    if spec.startswith(REGISTERED) or ":" not in spec:
        return None
    target = spec.rpartition(":")[0]
    if target.endswith(".py"):
        return None
    top = target.split(".")[0]
    module = sys.modules.get(top)
    if module is None:
        try:
            found = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            return None
        origin = found.origin if found is not None else None
        locations = list(found.submodule_search_locations or []) if found is not None else []
    else:
        origin = getattr(module, "__file__", None)
        locations = list(getattr(module, "__path__", []) or [])
    if locations:
        return str(pathlib.Path(locations[0]).resolve().parent)
    if origin and origin not in ("built-in", "frozen"):
        return str(pathlib.Path(origin).resolve().parent)
    return None


def _declaring(fn: Callable[..., Any], convention: str | None) -> Callable[..., Any]:
    """``fn``, declaring ``convention`` as its ``csa_convention`` (a wrapper where ``fn`` declares none)."""
    if convention is None or getattr(fn, "csa_convention", None) is not None:
        return fn
    import functools

    @functools.wraps(fn)
    def declared(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    declared.csa_convention = convention  # type: ignore[attr-defined]
    return declared
