"""Standalone reproducer scripts: failing examples, frozen as Python source that needs only this package.

A reproducer records everything its run needs: the harness's own directory and the import root of a
``module:callable`` kernel (put back on ``sys.path``, so it runs without the PYTHONPATH of the run that wrote it;
written relative to the script when the script lies inside them, as results/peers/repro/'s do, else absolute),
the kernel's spec, convention and device, the per-call time limit, and the examples. By default it runs the kernel
as ``csa fuzz`` did: in a supervised worker, guarded, with the same time limit. ``--in-process`` calls it in the
script's own process (for a debugger, or compute-sanitizer); ``--no-guards`` passes the tensors without guard
regions. Every exception a check raises is a failure, printed with its type.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import os
import pathlib
import sys
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

__all__ = ["Fraction", "inf", "main", "nan", "replay", "write_reproducer", "write_script"]

nan = float("nan")
inf = float("inf")

TEMPLATE = (
    '"""Reproducer: {what} for {impl_spec} (op {op}, convention {convention}, device {device})'
    + '''; \
--help for the options."""

import os
import sys

# the harness and the kernel's import root: relative to this file where they hold it, so a copy of the tree runs it
here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [p for p in (os.path.normpath(os.path.join(here, q)) for q in {paths!r}) if p not in sys.path]

from properties.reproducer import Fraction, inf, main, nan  # noqa: E402, F401  (examples may hold these)

CASES = [
{cases}
]

main(CASES, op={op!r}, impl_spec={impl_spec!r}, convention={convention!r}, device={device!r}, timeout={timeout!r})
'''
)


def example_hash(example: Any, impl_spec: str = "") -> str:
    """A short hash of an example's source text (and of the kernel's spec): the part of a reproducer's name that
    tells inputs, and kernels sharing a reproducer directory, apart."""
    return hashlib.sha256(f"{impl_spec}\n{example!r}".encode()).hexdigest()[:8]


def reproducer_name(op: str, prop: str, example: Any, impl_spec: str = "") -> str:
    return f"repro_{op}_{prop}_{example_hash(example, impl_spec)}.py"


def harness_paths(impl_spec: str) -> list[str]:
    """The ``sys.path`` entries a reproducer restores: this package's root, and the kernel's import root."""
    from properties.registry import import_root

    root = str(pathlib.Path(__file__).resolve().parents[1])
    found = import_root(impl_spec)
    return [root, *([found] if found and found != root else [])]


def _relative_to(script: pathlib.Path, entry: str) -> str:
    """``entry`` (an absolute directory) as the script at ``script`` writes it: relative to the script's folder when
    that folder lies inside it, else as it is."""
    folder = script.resolve().parent
    if folder.is_relative_to(pathlib.Path(entry).resolve()):
        return os.path.relpath(entry, folder)
    return entry


def write_script(
    path: pathlib.Path,
    *,
    cases: Sequence[tuple[str, Any]],
    op: str,
    impl_spec: str,
    convention: str | None,
    device: str,
    timeout: float | None = None,
    what: str | None = None,
    paths: Sequence[str] | None = None,
) -> pathlib.Path:
    """A script replaying ``cases`` ((property name, example) pairs); returns ``path``. ``paths``: the
    ``sys.path`` entries it restores (by default ``harness_paths(impl_spec)``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    names = sorted({prop for prop, _ in cases})
    source = TEMPLATE.format(
        what=what or f"propert{'y' if len(names) == 1 else 'ies'} {', '.join(map(repr, names))}",
        op=op,
        impl_spec=impl_spec,
        convention=convention,
        device=device,
        timeout=timeout,
        paths=[_relative_to(path, p) for p in (harness_paths(impl_spec) if paths is None else paths)],
        cases="\n".join(f"    ({prop!r}, {example!r})," for prop, example in cases),
        filename=path.name,
    )
    compile(source, str(path), "exec")
    path.write_text(source)
    return path


def write_reproducer(
    path: pathlib.Path,
    *,
    prop: str,
    op: str,
    impl_spec: str,
    convention: str | None,
    device: str,
    example: Any,
    timeout: float | None = None,
) -> pathlib.Path:
    """The reproducer of one failing example; ``path`` is a directory (the file is named by ``reproducer_name``)
    or the file itself."""
    if path.suffix != ".py":
        path = path / reproducer_name(op, prop, example, impl_spec)
    return write_script(
        path,
        cases=[(prop, example)],
        op=op,
        impl_spec=impl_spec,
        convention=convention,
        device=device,
        timeout=timeout,
        what=f"property {prop!r} fails",
    )


def read_script(path: pathlib.Path) -> dict[str, Any]:
    """The settings (``op``, ``impl_spec``, ``convention``, ``device``, ``timeout``), ``cases`` and ``paths`` of a
    reproducer ``write_script`` wrote (this template or the earlier one, which called ``replay`` with keywords)."""
    tree = ast.parse(path.read_text())
    names = {"nan": nan, "inf": inf, "Fraction": Fraction}
    found: dict[str, Any] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["CASES"]:
            found["cases"] = eval(compile(ast.Expression(node.value), str(path), "eval"), {"__builtins__": {}}, names)
        elif isinstance(node, (ast.ListComp, ast.GeneratorExp)) and isinstance(node.generators[0].iter, ast.List):
            written = ast.literal_eval(node.generators[0].iter)  # relative entries are relative to the script
            found["paths"] = [os.path.normpath(os.path.join(path.resolve().parent, q)) for q in written]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("main", "replay"):
            found.update(
                {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg and k.arg not in ("cases", "argv")}
            )
    return found


def merge_scripts(scripts: Sequence[pathlib.Path], into: pathlib.Path) -> pathlib.Path:
    """One reproducer holding the cases of ``scripts`` (reproducers of one kernel, same settings), which it
    replaces; returns ``into``."""
    read = [read_script(s) for s in scripts]
    settings = {k: read[0][k] for k in ("op", "impl_spec", "convention", "device", "timeout", "paths")}
    assert all({k: r[k] for k in settings} == settings for r in read), f"{scripts}: not one kernel's reproducers"
    names = sorted({prop for r in read for prop, _ in r["cases"]})
    what = (
        f"propert{'y' if len(names) == 1 else 'ies'} {', '.join(map(repr, names))} fail{'s' if len(names) == 1 else ''}"
    )
    write_script(into, cases=[case for r in read for case in r["cases"]], what=what, **settings)
    for script in scripts:
        if script.resolve() != into.resolve():
            script.unlink()
    return into


def main(cases: Sequence[tuple[str, Any]], **settings: Any) -> None:
    """A reproducer's entry point: ``replay`` with its command line's options; exits with its status."""
    parser = argparse.ArgumentParser(description=sys.modules["__main__"].__doc__)
    parser.add_argument("--in-process", action="store_true", help="call the kernel in this process (a debugger)")
    parser.add_argument("--no-guards", action="store_true", help="pass the tensors without guard regions")
    args = parser.parse_args()
    argv = ["--in-process"] * args.in_process + ["--no-guards"] * args.no_guards
    sys.exit(replay(cases=cases, argv=argv, **settings))


def replay(
    *,
    op: str,
    impl_spec: str,
    convention: str | None,
    device: str,
    cases: Sequence[tuple[str, Any]],
    timeout: float | None = None,
    argv: Sequence[str] = (),
) -> int:
    """Check every case; print ``FAILS: <property>`` and the exception (type, message, where it was raised) or
    ``passes``. Returns 1 if any case failed, 2 if the kernel cannot be loaded, else 0."""
    in_process, guard = "--in-process" in argv, "--no-guards" not in argv
    if device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from properties.catalog import all_properties
    from properties.registry import Implementation, load_callable

    props = {p.name: p for p in all_properties()}
    supervisor = None
    if in_process:
        from properties.guards import guarded

        fn = guarded(load_callable(impl_spec), op, guard=guard)
        impl = Implementation(op, "user", fn, convention, origin="user", device=device)
    else:
        from properties.isolation import Supervisor, WorkerStartError

        supervisor = Supervisor(impl_spec, op, device=device, timeout=timeout, guard=guard)
        try:
            supervisor.hello()
        except WorkerStartError as err:
            print(f"cannot load the kernel: {err}")
            return 2
        impl = Implementation(op, "user", supervisor, convention, origin="user", device="cpu")
    status = 0
    try:
        for prop, example in cases:
            try:
                props[prop].check(impl, example)
            except Exception as failure:  # every exception is a failure of the kernel, with its type
                status = 1
                print(f"FAILS: {prop}")
                print(describe(failure))
            else:
                print("passes: the bug is fixed" if len(cases) == 1 else f"passes: {prop}")
            sys.stdout.flush()
    finally:
        if supervisor is not None:
            supervisor.close()
    return status


def describe(failure: BaseException) -> str:
    """``Type: message``, and where a kernel raised it when that is known."""
    text = f"{type(failure).__name__}: {failure}"
    where = getattr(failure, "csa_where", None)
    return f"{text}\n  raised at {where}" if where else text
