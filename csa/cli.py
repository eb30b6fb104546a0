"""``csa``: one entry point; each subcommand lives in its own module and registers itself here."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

BROKEN_PIPE = 141  # 128 + SIGPIPE, as a shell reports a command whose reader went away

# subcommand name -> module exposing ``add_arguments(parser)`` and ``run(args) -> int``
SUBCOMMANDS: dict[str, str] = {"fuzz": "csa.fuzz_cmd", "bytes": "csa.bytes_cmd"}
OPTIONAL = ("hypothesis", "torch", "triton", "numpy", "ml_dtypes", "rich")
"""Packages of the extras: ``make labs`` installs only the core, which ``csa bytes`` needs and ``csa fuzz`` does not."""


def _available() -> dict[str, object]:
    found: dict[str, object] = {}
    for name, module in SUBCOMMANDS.items():
        found[name] = importlib.import_module(module)
    return found


class Parser(argparse.ArgumentParser):
    """A usage error is one line on stderr and exit status 2 (``csa fuzz: error: ...``), not the usage text."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = Parser(prog="csa", description="csa-harness command line")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    modules = _available()
    for name, module in modules.items():
        child = sub.add_parser(name, help=getattr(module, "HELP", None))
        module.add_arguments(child)  # type: ignore[attr-defined]
    args = parser.parse_args(argv)
    try:
        status = int(modules[args.command].run(args))  # type: ignore[attr-defined]
        sys.stdout.flush()
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except ModuleNotFoundError as err:
        if err.name not in OPTIONAL:
            raise
        print(
            f"csa {args.command}: needs {err.name}, which is not installed: run `make check` once (it installs the "
            "test and kernel extras) or `pip install 'csa-harness[test,kernels]'`",
            file=sys.stderr,
        )
        return 2
    return status


def _quiet_broken_pipe() -> int:
    """The reader of our output went away (``csa ... | head``): say nothing more, as a shell pipeline expects.
    Further writes, including the interpreter's final flush, go to /dev/null."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
