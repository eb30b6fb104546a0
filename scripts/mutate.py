"""Mutation testing of the exact reference with mutmut, one module at a time (``make mutate``; docs/mutation.md).

    python scripts/mutate.py [--module NAME ...] [--jobs N] [--out results/mutation.md] [--keep DIR]

For each module of ``reference/`` (all of :data:`MODULES` unless ``--module`` names some), the working tree is
copied to a scratch directory, mutmut is configured there to mutate that one module and to run only the tests
that cover it (:data:`MODULES`), and ``mutmut run`` is timed. Each mutant is then killed (a test failed or timed
out), survived, or had no test that reaches it. A survivor whose diff is listed in docs/mutation.md (section
"Equivalent mutants": the mutated function, the diff, and why it changes nothing) counts as equivalent; any
other survivor, and any mutant no test reaches, is a gap, printed with its diff, and the exit status is 1.

The table printed at the end (and written to ``--out``) has one row per module: mutants, killed, survived (gaps),
equivalent, without tests, and the run's seconds, followed by the command, date and machine. Not part of
``make check``: a whole run takes about 25 minutes on two cores.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENTS_DOC = ROOT / "docs" / "mutation.md"
MUTMUT_VERSION = "3.8.1"

MODULES: dict[str, tuple[str, ...]] = {
    "accounting": ("tests/test_accounting.py",),
    "addressing": ("tests/test_addressing.py",),
    "attention": ("tests/test_attention.py", "tests/test_attention_edges.py"),
    "cache_blocks": ("tests/test_formats.py",),
    "candidates": ("tests/test_candidates.py",),
    "checks": ("tests/test_checks.py",),
    "compressed_list": ("tests/test_compressed_list.py",),
    "compression": ("tests/test_compression.py",),
    "conventions": ("tests/test_reference_api.py",),
    "formats": ("tests/test_formats.py",),
    "gated_mean": ("tests/test_gated_mean.py", "tests/test_compression.py"),
    "grids": ("tests/test_grids.py",),
    "indexing": ("tests/test_indexing.py",),
    "layer": ("tests/test_compression.py",),
    "models": ("tests/test_accounting.py", "tests/test_sharing.py"),
    "padding": ("tests/test_padding.py",),
    "rope": ("tests/test_rope.py",),
    "scales": ("tests/test_formats.py",),
    "selection": ("tests/test_selection.py",),
    "score_values": ("tests/test_topk.py", "tests/test_candidates.py"),
    "sharing": ("tests/test_sharing.py",),
    "state": ("tests/test_rings.py",),
    "topk": ("tests/test_topk.py", "tests/test_reference_api.py"),
    "v4_paths": ("tests/test_v4_paths.py",),
    "window": ("tests/test_window.py",),
    "window_release": ("tests/test_window_release.py",),
}
"""Each mutated module of reference/ and the test files that cover it (``reference/__init__.py`` only imports)."""

KILLED = ("killed", "timeout", "segfault", "suspicious")
"""mutmut's outcomes that mean a test noticed the mutant (a timeout or crash is a test that did not pass)."""


@dataclasses.dataclass(frozen=True)
class Mutant:
    name: str
    status: str
    diff: tuple[str, ...] = ()

    @property
    def function(self) -> str:
        """``reference.topk.topk`` for ``reference.topk.x_topk__mutmut_3``; methods as ``Class.method``."""
        head, _, _ = self.name.rpartition("__mutmut_")
        module, _, mangled = head.rpartition(".")
        if mangled.startswith("xǁ"):
            mangled = ".".join(mangled[2:].split("ǁ"))
        elif mangled.startswith("x_"):
            mangled = mangled[2:]
        return f"{module}.{mangled}"

    @property
    def change(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The removed and added lines of the diff, stripped."""
        return changed_lines(self.diff)


def changed_lines(diff: Iterable[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    lines = [line for line in diff if not line.startswith(("---", "+++"))]
    return (
        tuple(line[1:].strip() for line in lines if line.startswith("-")),
        tuple(line[1:].strip() for line in lines if line.startswith("+")),
    )


@dataclasses.dataclass(frozen=True)
class Equivalent:
    function: str
    removed: tuple[str, ...]
    added: tuple[str, ...]
    reason: str

    def matches(self, mutant: Mutant) -> bool:
        return mutant.function == self.function and mutant.change == (self.removed, self.added)


@dataclasses.dataclass
class ModuleScore:
    module: str
    tests: tuple[str, ...]
    mutants: list[Mutant]
    equivalent: list[Mutant]
    seconds: float

    def count(self, *statuses: str) -> int:
        return sum(1 for m in self.mutants if m.status in statuses)

    @property
    def killed(self) -> int:
        return self.count(*KILLED)

    @property
    def gaps(self) -> list[Mutant]:
        """Survivors not listed as equivalent, and mutants no test reaches."""
        return [m for m in self.mutants if m.status not in KILLED and m not in self.equivalent]

    @property
    def survived(self) -> int:
        return sum(1 for m in self.gaps if m.status == "survived")

    @property
    def untested(self) -> int:
        return sum(1 for m in self.gaps if m.status != "survived")


# --- the equivalence list (docs/mutation.md) -------------------------------------------------------------------

_HEADING = re.compile(r"^### `(?P<function>[\w.]+)`")


def parse_equivalents(text: str) -> list[Equivalent]:
    """Entries of the section "Equivalent mutants": a ``### `function``` heading, a ```` ```diff ```` block of
    the mutant's removed / added lines, then the reason (the paragraph after the block)."""
    _, _, section = text.partition("\n## Equivalent mutants")
    section = section.split("\n## ", 1)[0]
    entries: list[Equivalent] = []
    lines = section.splitlines()
    i = 0
    while i < len(lines):
        heading = _HEADING.match(lines[i])
        if not heading:
            i += 1
            continue
        i += 1
        while i < len(lines) and lines[i].strip() != "```diff":
            if _HEADING.match(lines[i]):
                raise ValueError(f"{EQUIVALENTS_DOC.name}: {heading['function']} has no diff block")
            i += 1
        start = i + 1
        end = start
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        diff = lines[start:end]
        i = end + 1
        reason: list[str] = []
        while i < len(lines) and not _HEADING.match(lines[i]):
            if lines[i].strip():
                reason.append(lines[i].strip())
            elif reason:
                break
            i += 1
        removed, added = changed_lines(diff)
        if not removed and not added:
            raise ValueError(f"{EQUIVALENTS_DOC.name}: {heading['function']}: the diff block is empty")
        if not reason:
            raise ValueError(f"{EQUIVALENTS_DOC.name}: {heading['function']}: no reason given")
        entries.append(Equivalent(heading["function"], removed, added, " ".join(reason)))
    return entries


def classify(mutants: Sequence[Mutant], equivalents: Sequence[Equivalent]) -> list[Mutant]:
    """The survivors that some entry of ``equivalents`` describes."""
    return [m for m in mutants if m.status == "survived" and any(e.matches(m) for e in equivalents)]


# --- mutmut's output ---------------------------------------------------------------------------------------------

_RESULT = re.compile(r"^\s*(?P<name>reference\.\S+): (?P<status>[\w ]+)$")


def parse_results(text: str) -> list[tuple[str, str]]:
    """``(name, status)`` per line of ``mutmut results --all true``."""
    return [(m["name"], m["status"].strip()) for m in map(_RESULT.match, text.splitlines()) if m]


def parse_show(text: str) -> tuple[str, ...]:
    """The diff lines of ``mutmut show NAME`` (from its ``---`` line on)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("---")), len(lines))
    return tuple(lines[start:])


# --- one module's run --------------------------------------------------------------------------------------------


def tree_files() -> list[str]:
    """The working tree's files: tracked and untracked, without what git ignores."""
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True, capture_output=True, text=True
    )
    return [line for line in out.stdout.splitlines() if (ROOT / line).is_file()]


def mutmut_config(module: str, tests: Sequence[str]) -> str:
    """The ``[tool.mutmut]`` table of one module's run."""
    quoted = ", ".join(json.dumps(t) for t in tests)
    return (
        "\n[tool.mutmut]\n"
        'source_paths = ["reference/"]\n'
        f'only_mutate = ["reference/{module}.py"]\n'
        f"pytest_add_cli_args_test_selection = [{quoted}]\n"
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q"]\n'
        'also_copy = ["properties/", "fast/", "csa/", "labs/", "examples/", "conftest.py"]\n'
    )


def prepare(module: str, work: Path) -> None:
    """Copy the tree to ``work`` and configure mutmut there for ``module``."""
    for name in tree_files():
        target = work / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    with open(work / "pyproject.toml", "a", encoding="utf-8") as f:
        f.write(mutmut_config(module, MODULES[module]))


def mutmut(work: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TRITON_INTERPRET"] = "1"
    exe = Path(sys.executable).with_name("mutmut")
    done = subprocess.run([str(exe), *args], cwd=work, env=env, capture_output=True, text=True)
    if done.returncode != 0 and args[0] != "run":
        raise RuntimeError(f"mutmut {' '.join(args)} failed in {work}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done.stdout


def run_module(module: str, jobs: int, equivalents: Sequence[Equivalent], keep: Path | None) -> ModuleScore:
    work = Path(tempfile.mkdtemp(prefix=f"mutate-{module}-", dir=keep))
    try:
        prepare(module, work)
        began = time.monotonic()
        mutmut(work, "run", "--max-children", str(jobs))
        seconds = time.monotonic() - began
        mutants = []
        for name, status in parse_results(mutmut(work, "results", "--all", "true")):
            diff = parse_show(mutmut(work, "show", name)) if status not in KILLED else ()
            mutants.append(Mutant(name, status, diff))
        if not mutants:
            raise RuntimeError(f"{module}: mutmut reported no mutants (see {work})")
        return ModuleScore(module, MODULES[module], mutants, classify(mutants, equivalents), seconds)
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)


# --- the report --------------------------------------------------------------------------------------------------


def table(scores: Sequence[ModuleScore]) -> list[str]:
    lines = [
        "| module | tests | mutants | killed | survived | equivalent | no tests | seconds |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for s in scores:
        tests = ", ".join(Path(t).name for t in s.tests)
        lines.append(
            f"| {s.module} | {tests} | {len(s.mutants)} | {s.killed} | {s.survived} | {len(s.equivalent)} | "
            f"{s.untested} | {s.seconds:.0f} |"
        )
    total = [sum(len(s.mutants) for s in scores), sum(s.killed for s in scores)]
    total += [sum(s.survived for s in scores), sum(len(s.equivalent) for s in scores)]
    total += [sum(s.untested for s in scores)]
    seconds = sum(s.seconds for s in scores)
    lines.append(f"| **all** | | {' | '.join(str(n) for n in total)} | {seconds:.0f} |")
    return lines


def gap_lines(scores: Sequence[ModuleScore]) -> list[str]:
    out: list[str] = []
    for s in scores:
        for m in s.gaps:
            out.append(f"{m.name} ({m.status}):")
            changed = [line for line in m.diff if line.startswith(("-", "+")) and line[:3] not in ("---", "+++")]
            out.extend(f"    {line}" for line in changed)
    return out


def machine() -> str:
    return (
        f"{platform.node()}, {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"mutmut {MUTMUT_VERSION}"
    )


def report(scores: Sequence[ModuleScore], command: str, when: datetime.datetime, tree: str) -> str:
    lines = [
        "# Mutation testing of reference/ (mutmut)",
        "",
        f"Command: `{command}`  ",
        f"Date: {when:%Y-%m-%d %H:%M} UTC  ",
        f"Tree: {tree}  ",
        f"Machine: {machine()}",
        "",
        "Each module was mutated alone and judged by the test files named beside it (docs/mutation.md). Killed: a",
        "test failed or timed out. Survived: no test failed and docs/mutation.md does not list the mutant as",
        "equivalent. Equivalent: listed there with the reason it changes no behaviour. No tests: no selected test",
        "reaches the mutated function. Seconds: the module's `mutmut run` (mutant generation, the test",
        "statistics and every mutant), on the machine above.",
        "",
        *table(scores),
    ]
    gaps = gap_lines(scores)
    if gaps:
        lines += ["", "## Gaps", "", "```", *gaps, "```"]
    return "\n".join(lines) + "\n"


def tree_description() -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True)
    return head.stdout.strip() + (" with uncommitted changes" if dirty.stdout.strip() else "")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--module", action="append", choices=sorted(MODULES), help="a module to mutate (repeatable)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="mutants run at once")
    parser.add_argument("--out", type=Path, help="write the report (markdown) here")
    parser.add_argument("--keep", type=Path, help="keep each module's scratch copy under this directory")
    args = parser.parse_args(argv)
    modules = args.module or list(MODULES)
    equivalents = parse_equivalents(EQUIVALENTS_DOC.read_text(encoding="utf-8"))
    when = datetime.datetime.now(datetime.UTC)
    tree = tree_description()
    scores = []
    for module in modules:
        score = run_module(module, args.jobs, equivalents, args.keep)
        print(table([score])[2], flush=True)
        scores.append(score)
    command = "python scripts/mutate.py" + "".join(f" --module {m}" for m in args.module or ())
    text = report(scores, command, when, tree)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    return 1 if any(s.gaps for s in scores) else 0


if __name__ == "__main__":
    raise SystemExit(main())
