"""``csa fuzz``: run every property of one operation against a user's callable.

Exit status: 0 all properties pass, 1 a bug was found (shrunk counterexample and reproducer written),
2 a usage or loading error.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import pathlib
import sys
import time
from typing import Any

HELP = "fuzz a kernel against the exact reference"
PROFILE_EXAMPLES = {"ci": 60, "dev": 300, "deep": 10_000}


class UsageError(Exception):
    pass


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--op", help="operation to fuzz (see --list)")
    parser.add_argument("--impl", help="package.module:callable or path/to/file.py:callable")
    parser.add_argument("--convention", help="the convention the callable follows (see --list)")
    parser.add_argument("--profile", choices=sorted(PROFILE_EXAMPLES), default="dev")
    parser.add_argument("--max-examples", type=int, help="examples per property (overrides --profile)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--report", type=pathlib.Path, help="write a JSON report here")
    parser.add_argument("--repro-dir", type=pathlib.Path, default=pathlib.Path("repro"))
    parser.add_argument("--self-test", action="store_true", help="run the shipped mutants, print the mutation score")
    parser.add_argument("--list", action="store_true", help="list operations and their conventions")


def _check_signature(fn: Any, op: str) -> None:
    from properties.contract import operation

    needed = operation(op).params
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as err:
        raise UsageError(f"--impl: cannot read the callable's signature: {err}") from err
    try:
        sig.bind(*[None] * len(needed.positional), **dict.fromkeys(needed.keyword))
    except TypeError as err:
        want = ", ".join([*needed.positional, *[f"{k}=" for k in needed.keyword]])
        raise UsageError(f"--impl: {op} needs a callable accepting ({want}); {sig} does not: {err}") from err


def _list() -> int:
    from properties.catalog import properties_for
    from properties.contract import OPERATIONS

    for op in OPERATIONS.values():
        conv = ", ".join(op.conventions) or "-"
        print(f"{op.name:22} conventions: {conv:40} properties: {len(properties_for(op.name))}")
        print(f"{'':22} {op.signature}")
    return 0


def _self_test(max_examples: int | None) -> int:
    from properties.catalog import all_properties
    from properties.mutants import register_mutants
    from properties.mutation import MUTANT_EXAMPLES, hunt, score_line

    mutants = register_mutants().find()
    kills, _ = hunt(all_properties(), mutants, max_examples or MUTANT_EXAMPLES)
    for kill in kills:
        status = "killed by " + ", ".join(kill.killed_by) if kill.killed_by else "SURVIVED"
        print(f"  {kill.mutant:40} {status}")
    print(score_line(kills))
    return 0 if all(k.killed_by for k in kills) else 1


def _fuzz(args: argparse.Namespace) -> int:
    if args.device == "cpu":
        # Triton kernels on CPU tensors run in the interpreter; set before the callable imports triton.
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from properties.catalog import properties_for
    from properties.contract import OPERATIONS, require_convention
    from properties.registry import Implementation, LoadError, load_callable
    from properties.reproducer import write_reproducer
    from properties.runner import run_property

    if not args.op or not args.impl:
        raise UsageError("--op and --impl are required (or --list / --self-test)")
    if args.op not in OPERATIONS:
        raise UsageError(f"--op: unknown operation {args.op!r}; known: {', '.join(sorted(OPERATIONS))}")
    convention = args.convention
    try:
        fn = load_callable(args.impl)
    except LoadError as err:
        raise UsageError(str(err)) from err
    convention = convention or getattr(fn, "csa_convention", None)
    try:
        require_convention(args.op, convention)
    except ValueError as err:
        raise UsageError(f"--{err}") from err
    _check_signature(fn, args.op)
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UsageError("--device: cuda requested but no CUDA device is available")
    if args.max_examples is not None and args.max_examples <= 0:
        raise UsageError("--max-examples: must be a positive integer")
    impl_spec = args.impl
    target, _, attr = impl_spec.rpartition(":")
    if target.endswith(".py"):
        impl_spec = f"{pathlib.Path(target).resolve()}:{attr}"
    impl = Implementation(args.op, "user", fn, convention, origin="user", device=args.device)
    props = [p for p in properties_for(args.op) if p.applies_to(impl)]
    if not props:
        raise UsageError(f"--op: no property covers {args.op} under convention {convention!r}")
    examples = args.max_examples or PROFILE_EXAMPLES[args.profile]
    start = time.perf_counter()
    report: dict[str, Any] = {
        "op": args.op,
        "impl": impl_spec,
        "convention": convention,
        "seed": args.seed,
        "max_examples": examples,
        "properties": [],
    }
    tried = 0
    for i, prop in enumerate(props, 1):
        print(f"[{i}/{len(props)}] {prop.name} ...", end=" ", flush=True)
        outcome = run_property(prop, impl, max_examples=examples, seed=args.seed)
        tried += outcome.examples
        entry = {
            "property": prop.name,
            "passed": outcome.passed,
            "examples": outcome.examples,
            "seconds": round(outcome.seconds, 3),
        }
        report["properties"].append(entry)
        if outcome.passed:
            print(f"ok ({outcome.examples} examples, {outcome.seconds:.1f} s)")
            continue
        print("FAILED")
        path = write_reproducer(
            args.repro_dir / f"repro_{args.op}_{prop.name}.py",
            prop=prop.name,
            op=args.op,
            impl_spec=impl_spec,
            convention=convention,
            device=args.device,
            example=outcome.example,
        )
        print(f"\nproperty: {prop.name}  ({prop.doc})" if prop.doc else f"\nproperty: {prop.name}")
        print(f"shrunk input: {outcome.example!r}")
        print(f"{type(outcome.error).__name__}: {outcome.error}")
        print(f"\nreproducer: {path}  (python {path})")
        print(f"seed: {args.seed}")
        entry.update(example=repr(outcome.example), error=str(outcome.error), reproducer=str(path))
        report["result"] = "bug"
        _write_report(args.report, report)
        return 1
    elapsed = time.perf_counter() - start
    print(f"\nPASS: {len(props)} properties, {tried} examples, {elapsed:.1f} s, seed {args.seed}")
    report["result"] = "pass"
    _write_report(args.report, report)
    return 0


def _write_report(path: pathlib.Path | None, report: dict[str, Any]) -> None:
    if path is not None:
        path.write_text(json.dumps(report, indent=2) + "\n")


def run(args: argparse.Namespace) -> int:
    try:
        if args.list:
            return _list()
        if args.self_test:
            return _self_test(args.max_examples)
        return _fuzz(args)
    except UsageError as err:
        print(f"csa fuzz: {err}", file=sys.stderr)
        return 2
