"""scripts/mutate.py, the runner of ``make mutate``: what it reads from mutmut, the equivalence list of
docs/mutation.md, and the per-module table it prints. A real run takes an hour; these take milliseconds."""

from __future__ import annotations

import datetime
import pathlib
import re

import pytest

from scripts import mutate
from scripts.mutate import ModuleScore, Mutant

ROOT = pathlib.Path(__file__).resolve().parents[1]

RESULTS = """\
    reference.topk.x_topk__mutmut_1: killed
    reference.topk.x_topk__mutmut_2: survived
    reference.topk.xǁLaneLayoutǁlanes__mutmut_3: no tests
    reference.topk.x_topk__mutmut_4: timeout
warning: something mutmut printed
"""
SHOW = """\
# reference.topk.x_topk__mutmut_2: survived
--- reference/topk.py
+++ reference/topk.py
@@ -17,7 +17,7 @@
     if isinstance(convention, SelectTopK):
         require(
-            layout.fill < 0 or layout.fill >= shift + length,
+            layout.fill <= 0 or layout.fill >= shift + length,
             "fill",
"""
DOC = """\
# Mutation testing

## Equivalent mutants

### `reference.topk.topk`: `<=` for `<`
```diff
-            layout.fill < 0 or layout.fill >= shift + length,
+            layout.fill <= 0 or layout.fill >= shift + length,
```
Equivalent because (an invented reason, for this test).

### `reference.topk.LaneLayout.lanes`
```diff
-        return k if self.fixed else min(k, length)
+        return k if self.fixed else min(k, length)  # changed
```
Two lines
of reason.

## After
### `reference.other.f`
"""


def test_results_and_diffs_are_parsed() -> None:
    assert mutate.parse_results(RESULTS) == [
        ("reference.topk.x_topk__mutmut_1", "killed"),
        ("reference.topk.x_topk__mutmut_2", "survived"),
        ("reference.topk.xǁLaneLayoutǁlanes__mutmut_3", "no tests"),
        ("reference.topk.x_topk__mutmut_4", "timeout"),
    ]
    diff = mutate.parse_show(SHOW)
    assert diff[0] == "--- reference/topk.py"
    mutant = Mutant("reference.topk.x_topk__mutmut_2", "survived", diff)
    assert mutant.function == "reference.topk.topk"
    assert mutant.change == (
        ("layout.fill < 0 or layout.fill >= shift + length,",),
        ("layout.fill <= 0 or layout.fill >= shift + length,",),
    )
    method = Mutant("reference.topk.xǁLaneLayoutǁlanes__mutmut_3", "no tests")
    assert method.function == "reference.topk.LaneLayout.lanes"


def test_equivalents_are_parsed_and_matched() -> None:
    entries = mutate.parse_equivalents(DOC)
    assert [e.function for e in entries] == ["reference.topk.topk", "reference.topk.LaneLayout.lanes"]
    assert entries[0].reason == "Equivalent because (an invented reason, for this test)."
    assert entries[1].reason == "Two lines of reason."
    survivor = Mutant("reference.topk.x_topk__mutmut_2", "survived", mutate.parse_show(SHOW))
    killed = Mutant("reference.topk.x_topk__mutmut_2", "killed", mutate.parse_show(SHOW))
    elsewhere = Mutant("reference.topk.x_lane_layout__mutmut_2", "survived", mutate.parse_show(SHOW))
    assert mutate.classify([survivor, killed, elsewhere], entries) == [survivor]
    with pytest.raises(ValueError, match="no reason given"):
        mutate.parse_equivalents(DOC.replace("Equivalent because (an invented reason, for this test).", ""))
    with pytest.raises(ValueError, match="the diff block is empty"):
        mutate.parse_equivalents(DOC.replace("-        return k if", " ").replace("+        return k if", " "))


def _score(module: str, statuses: list[str], equivalent: int, seconds: float) -> ModuleScore:
    mutants = [Mutant(f"reference.{module}.x_f__mutmut_{i}", s, ("-a", "+b")) for i, s in enumerate(statuses, 1)]
    survivors = [m for m in mutants if m.status == "survived"]
    return ModuleScore(module, (f"tests/test_{module}.py",), mutants, survivors[:equivalent], seconds)


def test_the_table_counts_per_module_and_in_all() -> None:
    scores = [
        _score("topk", ["killed"] * 5 + ["timeout", "survived", "survived", "no tests"], 1, 61.4),
        _score("window", ["killed"] * 3, 0, 9.6),
    ]
    assert [s.killed for s in scores] == [6, 3]
    assert [s.survived for s in scores] == [1, 0] and [s.untested for s in scores] == [1, 0]
    assert mutate.table(scores) == [
        "| module | tests | mutants | killed | survived | equivalent | no tests | seconds |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
        "| topk | test_topk.py | 9 | 6 | 1 | 1 | 1 | 61 |",
        "| window | test_window.py | 3 | 3 | 0 | 0 | 0 | 10 |",
        "| **all** | | 12 | 9 | 1 | 1 | 1 | 71 |",
    ]
    when = datetime.datetime(2026, 12, 1, 7, 5, tzinfo=datetime.UTC)
    text = mutate.report(scores, "python scripts/mutate.py --module topk", when, "abc1234")
    assert "Command: `python scripts/mutate.py --module topk`" in text and "Date: 2026-12-01 07:05 UTC" in text
    assert "Tree: abc1234" in text and f"mutmut {mutate.MUTMUT_VERSION}" in text
    gaps = text.split("## Gaps", 1)[1]
    assert "reference.topk.x_f__mutmut_8 (survived):" in gaps and "reference.topk.x_f__mutmut_9 (no tests):" in gaps
    assert "mutmut_7" not in gaps  # listed as equivalent
    assert "## Gaps" not in mutate.report(scores[1:], "c", when, "abc1234")


def test_every_reference_module_has_existing_tests() -> None:
    modules = {p.stem for p in (ROOT / "reference").glob("*.py")} - {"__init__"}
    assert set(mutate.MODULES) == modules
    for module, tests in mutate.MODULES.items():
        assert tests and all((ROOT / t).is_file() for t in tests), module
        config = mutate.mutmut_config(module, tests)
        assert f'only_mutate = ["reference/{module}.py"]' in config
        assert all(f'"{t}"' in config for t in tests)


def test_the_equivalence_list_describes_the_current_source() -> None:
    """Each entry of docs/mutation.md names a function of reference/ whose source still holds the removed lines,
    so an entry cannot outlive the code it excuses."""
    entries = mutate.parse_equivalents((ROOT / "docs" / "mutation.md").read_text(encoding="utf-8"))
    for entry in entries:
        module = entry.function.split(".")[1]
        source = (ROOT / "reference" / f"{module}.py").read_text(encoding="utf-8")
        name = entry.function.split(".")[-1]
        assert re.search(rf"def {re.escape(name)}\b", source), entry.function
        lines = {line.strip() for line in source.splitlines()}
        assert set(entry.removed) <= lines, entry.function
        assert entry.removed != entry.added and entry.reason
