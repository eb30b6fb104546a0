"""``csa``: one entry point; each subcommand lives in its own module and registers itself here."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# subcommand name -> module exposing ``add_arguments(parser)`` and ``run(args) -> int``
SUBCOMMANDS: dict[str, str] = {"fuzz": "csa.fuzz_cmd", "bytes": "csa.bytes_cmd"}
OPTIONAL = ("hypothesis", "torch", "triton", "numpy", "ml_dtypes", "rich")
"""Packages of the extras: ``make labs`` installs only the core, which ``csa bytes`` needs and ``csa fuzz`` does not."""


def _available() -> dict[str, object]:
    found: dict[str, object] = {}
    for name, module in SUBCOMMANDS.items():
        found[name] = importlib.import_module(module)
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="csa", description="csa-harness command line")
    sub = parser.add_subparsers(dest="command", required=True)
    modules = _available()
    for name, module in modules.items():
        child = sub.add_parser(name, help=getattr(module, "HELP", None))
        module.add_arguments(child)  # type: ignore[attr-defined]
    args = parser.parse_args(argv)
    try:
        return int(modules[args.command].run(args))  # type: ignore[attr-defined]
    except ModuleNotFoundError as err:
        if err.name not in OPTIONAL:
            raise
        print(
            f"csa {args.command}: needs {err.name}, which is not installed: run `make check` once (it installs the "
            "test and kernel extras) or `pip install 'csa-harness[test,kernels]'`",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())
