"""``csa fuzz``: run every property of one operation against a user's callable.

The callable runs in a supervised worker process (``properties.isolation``) with a per-call time limit, its
tensors inside guard regions and its inputs compared byte for byte after every call (``properties.guards``).

Exit status: 0 all properties pass, 1 a bug was found (each distinct failure printed with its input and a
reproducer), 2 a usage, loading or tool error (one line on stderr, before the run where it can be known then).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import tempfile
import time
from typing import Any

HELP = "fuzz a kernel against the exact reference"
PROFILE_EXAMPLES = {"ci": 60, "dev": 300, "deep": 10_000}
SHRINK_SECONDS = 60.0
SANITIZE_TIMEOUT = 300.0  # seconds for compute-sanitizer's start, on top of the examples' own time limits


class UsageError(Exception):
    pass


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from properties.isolation import DEFAULT_TIMEOUT

    defaults = ", ".join(f"{d} {s:g} s" for d, s in DEFAULT_TIMEOUT.items())
    parser.add_argument("--op", help="operation to fuzz (see --list)")
    parser.add_argument(
        "--impl", help="package.module:callable, path/to/file.py:callable, or registry:<id> (a project kernel)"
    )
    parser.add_argument("--convention", help="the convention the callable follows (see --list)")
    parser.add_argument(
        "--profile",
        choices=sorted(PROFILE_EXAMPLES),
        help="examples per property (default: ci when CI is set, else dev)",
    )
    parser.add_argument("--max-examples", type=int, help="examples per property (overrides --profile)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--report", type=pathlib.Path, help="write a JSON report here")
    parser.add_argument("--repro-dir", type=pathlib.Path, default=pathlib.Path("repro"))
    parser.add_argument("--timeout", type=float, help=f"seconds per call before it fails as a hang ({defaults})")
    parser.add_argument(
        "--shrink-seconds",
        type=float,
        default=SHRINK_SECONDS,
        help=f"seconds spent after a property's first failure, shrinking it (default {SHRINK_SECONDS:g})",
    )
    parser.add_argument(
        "--property", action="append", metavar="NAME", help="run only this property of --op (repeatable)"
    )
    parser.add_argument(
        "--leave-out",
        action="append",
        metavar="GROUP",
        help="leave out this group of properties (repeatable; bad_input: the calls the contract refuses)",
    )
    parser.add_argument("--keep-going", action="store_true", help="run the other properties after a failure")
    parser.add_argument("--in-process", action="store_true", help="call the kernel in this process (no worker)")
    parser.add_argument(
        "--sanitize",
        nargs="?",
        const=1,
        type=int,
        metavar="N",
        help="on a GPU: replay the failing examples (none failing: the first N of each property, default 1) "
        "under compute-sanitizer memcheck",
    )
    parser.add_argument("--self-test", action="store_true", help="run the shipped mutants, print the mutation score")
    parser.add_argument("--list", action="store_true", help="list operations and their conventions (--op: one)")


LIST_WIDTH = 100


def _list(op: str | None) -> int:
    """Every operation on one line each; with ``--op``, one operation's signature, conventions and properties.
    Every line fits in ``LIST_WIDTH`` columns."""
    import textwrap

    from properties.catalog import properties_for
    from properties.contract import OPERATIONS
    from reference.conventions import CONVENTIONS, OPTIONS

    def block(text: str, indent: str = "  ") -> str:
        return textwrap.fill(text, LIST_WIDTH, initial_indent=indent, subsequent_indent=indent + "  ")

    if op is None:
        print(f"{'operation':20} {'conventions':>11} {'properties':>10}  summary")
        for item in OPERATIONS.values():
            line = f"{item.name:20} {len(item.conventions):>11} {len(properties_for(item.name)):>10}  {item.summary}"
            print(line if len(line) <= LIST_WIDTH else line[: LIST_WIDTH - 3].rsplit(" ", 1)[0] + " ...")
        print("\n`csa fuzz --list --op NAME`: one operation's signature, conventions and properties.")
        return 0
    item = OPERATIONS[op]
    print(textwrap.fill(f"{item.name}: {item.summary}", LIST_WIDTH, subsequent_indent="  "))
    print("signature:")
    print(block(item.signature))
    if item.params.in_place:
        print(block(f"in place: {', '.join(item.params.in_place)}; every other argument must stay unchanged"))
    views = ", ".join(item.views) or "none"
    print(block(f"views: {views} may arrive non-contiguous: give the contiguous result or refuse naming it"))
    print("compared:")
    print(block(item.comparison))
    if item.conventions:
        print("conventions (--convention):")
        for name, convention in CONVENTIONS[op].items():
            print(block(f"{name}: {convention.summary}"))
    if item.options:
        print("options (--convention NAME+OPTION+...):")
        for name, option in OPTIONS[op].items():
            print(block(f"{name}: {option.summary}"))
    print("properties:")
    for prop in properties_for(op):
        group = f" [group {prop.group}]" if prop.group else ""
        print(block(f"{prop.name}{group}: {prop.doc}" if prop.doc else prop.name + group))
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


def _writable_file(path: pathlib.Path, option: str) -> None:
    """Refuse, before the run, a file that cannot be written (without leaving one behind)."""
    if path.is_dir():
        raise UsageError(f"{option}: {path} is a directory")
    parent = path.parent
    if not parent.is_dir():
        raise UsageError(f"{option}: cannot write {path}: {parent} is not a directory")
    existed = path.exists()
    try:
        with path.open("a"):
            pass
    except OSError as err:
        raise UsageError(f"{option}: cannot write {path}: {err.strerror}") from None
    if not existed:
        path.unlink()


def _writable_dir(path: pathlib.Path, option: str) -> None:
    """Refuse, before the run, a directory that cannot be created or written (without creating it)."""
    probe = path.absolute()
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise UsageError(f"{option}: cannot create {path}: {probe} is not a directory")
    try:
        tempfile.TemporaryFile(dir=probe).close()
    except OSError as err:
        raise UsageError(f"{option}: cannot write in {probe}: {err.strerror}") from None


def _shape_tier(args: argparse.Namespace) -> tuple[str, str]:
    """The shape ladders' tier of this run (``properties.ladder.tier``) and why. A CPU run takes the ``ci`` tier
    unless ``CSA_SHAPES`` names one: its boundary sizes cross every tile the planted size bugs break past, while
    the ``tile`` tier's 4097-wide rows of 65 take a Triton kernel minutes a call in the interpreter, past the
    time limit of a correct kernel."""
    from properties.ladder import tier

    if os.environ.get("CSA_SHAPES"):
        why = "CSA_SHAPES"
    elif args.device == "cpu":
        os.environ["CSA_SHAPES"] = "ci"
        why = "a CPU run; CSA_SHAPES=tile draws 4097-wide rows"
    else:
        why = "a GPU run"
    return tier(), why  # the tier the strategies of this process draw from


def _profile(args: argparse.Namespace) -> tuple[str, str]:
    if args.profile:
        return args.profile, "--profile"
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        return "ci", "CI is set"
    return "dev", "the default"


def _validate(args: argparse.Namespace) -> None:
    """Every usage error that can be known before the run."""
    if args.max_examples is not None and args.max_examples <= 0:
        raise UsageError(f"--max-examples: must be a positive integer, got {args.max_examples}")
    if args.self_test:
        return
    from properties.contract import OPERATIONS

    if not args.op or not args.impl:
        raise UsageError("--op and --impl are required (or --list / --self-test)")
    if args.op not in OPERATIONS:
        raise UsageError(f"--op: unknown operation {args.op!r}; known: {', '.join(sorted(OPERATIONS))}")
    if not args.impl.startswith(("registry:", "mutant:")):
        target = args.impl.rpartition(":")[0]
        if ":" not in args.impl:
            raise UsageError(f"--impl: expected MODULE:CALLABLE or FILE.py:CALLABLE, got {args.impl!r}")
        if target.endswith(".py") and not pathlib.Path(target).is_file():
            raise UsageError(f"--impl: no such file {target}")
    if args.property:
        from properties.catalog import properties_for

        known = [p.name for p in properties_for(args.op)]
        unknown = [name for name in args.property if name not in known]
        if unknown:
            raise UsageError(f"--property: {args.op} has no property {unknown[0]!r}; known: {', '.join(known)}")
    if args.leave_out:
        from properties.runner import GROUPS

        unknown = [g for g in args.leave_out if g not in GROUPS]
        if unknown:
            raise UsageError(f"--leave-out: no property group {unknown[0]!r}; known: {', '.join(GROUPS)}")
    if args.convention is not None:
        from properties.contract import require_convention

        try:
            require_convention(args.op, args.convention)
        except ValueError as err:
            raise UsageError(f"--{err}") from err
    if args.timeout is not None and not args.timeout > 0:
        raise UsageError(f"--timeout: must be a positive number of seconds, got {args.timeout:g}")
    if not args.shrink_seconds >= 0:
        raise UsageError(f"--shrink-seconds: must be zero or more, got {args.shrink_seconds:g}")
    if args.report is not None:
        _writable_file(args.report, "--report")
    _writable_dir(args.repro_dir, "--repro-dir")
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UsageError("--device: cuda requested but no CUDA device is available")
    if args.sanitize is not None:
        from properties import sanitizer
        from properties.runner import FIRST_EXAMPLES

        if not 0 < args.sanitize <= FIRST_EXAMPLES:
            raise UsageError(f"--sanitize: N must be between 1 and {FIRST_EXAMPLES}, got {args.sanitize}")
        if args.device != "cuda":
            raise UsageError("--sanitize: compute-sanitizer checks GPU kernels; it needs --device cuda")
        if sanitizer.find() is None:
            raise UsageError("--sanitize: compute-sanitizer not found (not on PATH, nor at /usr/local/cuda/bin)")


def _impl_spec(spec: str) -> str:
    target, _, attr = spec.rpartition(":")
    if target.endswith(".py"):
        return f"{pathlib.Path(target).resolve()}:{attr}"
    return spec


def _load(args: argparse.Namespace, spec: str, timeout: float) -> tuple[Any, Any, str | None]:
    """(the callable the properties call, the supervisor or None, the callable's declared convention)."""
    from properties.registry import LoadError, load_callable, signature_problem

    if args.in_process:
        from properties.guards import guarded

        if os.environ.get("TRITON_INTERPRET") == "1":
            from properties.interpreter_casts import install

            install()
        try:
            fn = load_callable(spec)
        except LoadError as err:
            raise UsageError(str(err)) from err
        problem = signature_problem(fn, args.op)
        if problem:
            raise UsageError(problem)
        return guarded(fn, args.op), None, getattr(fn, "csa_convention", None)
    from properties.isolation import Supervisor, WorkerStartError

    supervisor = Supervisor(spec, args.op, device=args.device, timeout=timeout)
    try:
        hello = supervisor.hello()
    except WorkerStartError as err:
        supervisor.close()
        raise UsageError(str(err)) from err
    if hello["signature_problem"]:
        supervisor.close()
        raise UsageError(hello["signature_problem"])
    return supervisor, supervisor, hello["convention"]


def _input_label(prop: Any, example: Any, cut: bool, shrink_seconds: float) -> str:
    if example is None:
        return "input: none (Hypothesis raised this itself, outside any example)"
    if repr(example) in {repr(e) for e in prop.examples}:
        return f"input (a frozen example, replayed as is): {example!r}"
    if cut:
        return f"input (shrinking stopped after --shrink-seconds {shrink_seconds:g}): {example!r}"
    return f"shrunk input: {example!r}"


def _fuzz(args: argparse.Namespace) -> int:
    if args.device == "cpu":
        # Triton kernels on CPU tensors run in the interpreter; set before the callable imports triton.
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from properties.isolation import DEFAULT_TIMEOUT

    timeout = args.timeout if args.timeout is not None else DEFAULT_TIMEOUT[args.device]
    spec = _impl_spec(args.impl)
    fn, supervisor, declared = _load(args, spec, timeout)
    try:
        return _run(args, spec, fn, supervisor, declared, timeout)
    finally:
        if supervisor is not None:
            supervisor.close()


def _run(args: argparse.Namespace, spec: str, fn: Any, supervisor: Any, declared: str | None, timeout: float) -> int:
    from csa.progress import PropertyProgress
    from properties.catalog import properties_for
    from properties.contract import require_convention
    from properties.registry import Implementation
    from properties.runner import run_property

    convention = args.convention or declared
    try:
        require_convention(args.op, convention)
    except ValueError as err:
        raise UsageError(f"--{err}") from err
    impl = Implementation(
        args.op, "user", fn, convention, origin="user", device=args.device if args.in_process else "cpu"
    )
    props = [p for p in properties_for(args.op) if p.applies_to(impl)]
    if args.property:
        props = [p for p in props if p.name in args.property]
    groups = args.leave_out or []
    left_out = [p.name for p in props if p.group in groups]
    props = [p for p in props if p.group not in groups]
    if not props:
        raise UsageError(f"--op: no property covers {args.op} under convention {convention!r}")
    profile, why = _profile(args)
    shape_tier, shape_why = _shape_tier(args)
    examples = args.max_examples or PROFILE_EXAMPLES[profile]
    source = "--timeout" if args.timeout is not None else f"the {args.device} default"
    where = "in this process (--in-process)" if args.in_process else "in a supervised worker"
    conv = f" [{convention}]" if convention else ""
    print(f"csa fuzz: {args.op} with {args.impl}{conv} on {args.device}, seed {args.seed}")
    print(
        f"  {examples} examples per property (profile {profile}: {why}"
        f"{'; --max-examples' if args.max_examples else ''}); shrinking at most {args.shrink_seconds:g} s"
    )
    print(f"  shapes: the {shape_tier} tier of the shape ladders ({shape_why}; docs/shapes.md)")
    print(
        f"  each call {where}, guarded; time limit {timeout:g} s per call ({source})"
        if not args.in_process
        else f"  each call {where}, guarded; no time limit"
    )
    if groups:
        shown = ", ".join(left_out) if left_out else "none of the properties to run is in it"
        print(f"  left out (--leave-out {' '.join(groups)}): {shown}")
    report: dict[str, Any] = {
        "op": args.op,
        "impl": spec,
        "convention": convention,
        "device": args.device,
        "seed": args.seed,
        "profile": profile,
        "shape_tier": shape_tier,
        "max_examples": examples,
        "isolation": not args.in_process,
        "timeout_s": None if args.in_process else timeout,
        "timeout_source": None if args.in_process else source,
        "shrink_seconds": args.shrink_seconds,
        "keep_going": args.keep_going,
        "left_out": {"groups": groups, "properties": left_out},
        "properties": [],
    }
    from properties.interpreter_casts import ROUNDED

    rounded_before = ROUNDED[0]
    progress = PropertyProgress()
    start = time.perf_counter()
    tried = 0
    failed: list[tuple[Any, Any]] = []  # (property, Failure)
    first_examples: dict[str, list[Any]] = {}
    run_count = 0
    for i, prop in enumerate(props, 1):
        label = f"[{i}/{len(props)}] {prop.name}"
        if not progress.enabled:
            print(f"{label} ...", end=" ", flush=True)
        progress.start(label, examples + len(prop.examples))
        try:
            outcome = run_property(
                prop,
                impl,
                max_examples=examples,
                seed=args.seed,
                shrink_seconds=args.shrink_seconds,
                on_example=progress.tick,
            )
        finally:
            progress.stop()
        run_count += 1
        tried += outcome.examples
        entry: dict[str, Any] = {
            "property": prop.name,
            "passed": outcome.passed,
            "examples": outcome.examples,
            "seconds": round(outcome.seconds, 3),
        }
        report["properties"].append(entry)
        status = "ok" if outcome.passed else "FAILED"
        if progress.enabled:
            print(f"{label} ...", end=" ")
        print(f"{status} ({outcome.examples} examples, {outcome.seconds:.1f} s)", flush=True)
        first_examples[prop.name] = outcome.first_examples
        if outcome.passed:
            continue
        entry["shrink_cut"] = outcome.shrink_cut
        entry["failures"] = [
            _print_failure(args, spec, convention, None if args.in_process else timeout, prop, outcome, n)
            for n in range(len(outcome.failures))
        ]
        failed.extend((prop, failure) for failure in outcome.failures)
        print()
        if not args.keep_going:
            break
    elapsed = time.perf_counter() - start
    restarts = supervisor.restarts if supervisor is not None else 0
    report["worker_restarts"] = restarts
    report["seconds"] = round(elapsed, 3)
    restarted = f", {restarts} worker restart(s)" if restarts else ""
    rounded = supervisor.rounded_casts if supervisor is not None else ROUNDED[0] - rounded_before
    interpreted = os.environ.get("TRITON_INTERPRET") == "1"
    report["interpreter_casts"] = {"patched": interpreted, "rounded": rounded}
    if rounded:
        print(
            f"Triton interpreter: {rounded} fp32 -> bf16 / e4m3 cast element(s) rounded to nearest even as compiled "
            "code rounds them (csa fuzz patches the interpreter's casts, which truncate; "
            "properties/interpreter_casts.py)"
        )
    exit_status = 0
    omitted = f" ({len(left_out)} left out: {', '.join(groups)})" if groups else ""
    if failed:
        names = sorted({p.name for p, _ in failed}, key=[p.name for p in props].index)
        stopped = ""
        if run_count < len(props):
            stopped = f"; stopped after {run_count} of {len(props)} (--keep-going runs the rest)"
        print(
            f"FAIL: {len(names)} of {len(props)} properties failed ({', '.join(names)}){stopped}{omitted}; "
            f"{tried} examples, {elapsed:.1f} s, seed {args.seed}{restarted}"
        )
        report["result"] = "bug"
        exit_status = 1
    else:
        print(
            f"\nPASS: {len(props)} properties{omitted}, {tried} examples, {elapsed:.1f} s, seed {args.seed}{restarted}"
        )
        report["result"] = "pass"
    if args.sanitize is not None:
        exit_status = max(exit_status, _sanitize(args, spec, convention, timeout, failed, first_examples, report))
    _write_report(args.report, report)
    return exit_status


def _print_failure(
    args: argparse.Namespace,
    spec: str,
    convention: str | None,
    timeout: float | None,
    prop: Any,
    outcome: Any,
    n: int,
) -> dict[str, Any]:
    """Print the ``n``-th distinct failure of ``outcome`` (property, input, error, reproducer, all of the same
    example) after writing its reproducer; its entry in the JSON report."""
    from properties.reproducer import describe, write_reproducer

    failure, count = outcome.failures[n], len(outcome.failures)
    if count > 1 and n == 0:
        print(f"\n{count} distinct failures of {prop.name}, each with its own input and reproducer:")
    path = None
    if failure.example is not None:
        path = write_reproducer(
            args.repro_dir,
            prop=prop.name,
            op=args.op,
            impl_spec=spec,
            convention=convention,
            device=args.device,
            example=failure.example,
            timeout=timeout,
        )
    print(f"\n{f'failure {n + 1} of {count}: ' if count > 1 else ''}property: {prop.name}")
    if prop.doc:
        print(f"  ({prop.doc})")
    print(_input_label(prop, failure.example, outcome.shrink_cut, args.shrink_seconds))
    print(describe(failure.error))
    if failure.note:
        print(f"  (Hypothesis: {failure.note.splitlines()[0]})")
    if path is not None:
        print(f"reproducer: {path}  (python {path})")
    return {
        "error_type": type(failure.error).__name__,
        "error": str(failure.error),
        "raised_at": getattr(failure.error, "csa_where", None),
        "example": repr(failure.example),
        "reproducer": None if path is None else str(path),
    }


def _sanitize(
    args: argparse.Namespace,
    spec: str,
    convention: str | None,
    timeout: float,
    failed: list[tuple[Any, Any]],
    first_examples: dict[str, list[Any]],
    report: dict[str, Any],
) -> int:
    """Replay the failing examples (else the first N of each property) under compute-sanitizer memcheck."""
    from properties import sanitizer
    from properties.reproducer import example_hash, write_script

    tool = sanitizer.find()
    assert tool is not None  # checked before the run
    if failed:
        cases = [(p.name, f.example) for p, f in failed if f.example is not None]
        which = "the failing example(s)"
    else:
        cases = [(name, ex) for name, tried in first_examples.items() for ex in tried[: args.sanitize]]
        which = f"the first {args.sanitize} example(s) of each property"
    script = write_script(
        args.repro_dir / f"sanitize_{args.op}_{example_hash(cases, spec)}.py",
        cases=cases,
        op=args.op,
        impl_spec=spec,
        convention=convention,
        device=args.device,
        what="compute-sanitizer replay",
    )
    print(f"compute-sanitizer memcheck: replaying {which}, {len(cases)} in all ({script})", flush=True)
    result = sanitizer.run(tool, script, SANITIZE_TIMEOUT + timeout * len(cases))
    report["sanitizer"] = {
        "examples": len(cases),
        "errors": result.errors,
        "first_error": result.first,
        "script": str(script),
        "returncode": result.returncode,
    }
    if result.errors < 0:
        tail = [line for line in result.output.splitlines() if line.strip()][-8:]
        print("compute-sanitizer did not run to its summary:", *tail, sep="\n  ")
        return 2
    if result.errors == 0:
        print(f"compute-sanitizer memcheck: 0 errors on {len(cases)} example(s)")
        return 0
    print(f"compute-sanitizer memcheck: {result.errors} error(s); the first:")
    print("\n".join(result.first))
    return 1


def _write_report(path: pathlib.Path | None, report: dict[str, Any]) -> None:
    if path is not None:
        try:
            path.write_text(json.dumps(report, indent=2) + "\n")
        except OSError as err:
            raise UsageError(f"--report: cannot write {path}: {err.strerror}") from None


def run(args: argparse.Namespace) -> int:
    try:
        if args.list:
            from properties.contract import OPERATIONS

            if args.op is not None and args.op not in OPERATIONS:
                raise UsageError(f"--op: unknown operation {args.op!r}; known: {', '.join(sorted(OPERATIONS))}")
            return _list(args.op)
        _validate(args)
        if args.self_test:
            return _self_test(args.max_examples)
        return _fuzz(args)
    except UsageError as err:
        print(f"csa fuzz: {err}", file=sys.stderr)
        return 2
