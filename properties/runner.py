"""A property is (operation, strategy, check). The same object runs under pytest, against the shipped mutants
and against a user's callable, so all three see exactly the same examples and assertions."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Flaky

from properties.registry import Implementation

BAD_INPUT = "bad_input"
GROUPS: dict[str, str] = {
    BAD_INPUT: "calls the contract refuses (malformed arguments, a ring too small, NaN rows to store, padding "
    "below -1): the implementation must raise ValueError or TypeError and change nothing",
}
"""Property groups by name: what their properties have in common. A production kernel that does not validate
its input (a store that writes NaN rows as they are) is judged with the group left out."""


@dataclass(frozen=True)
class Property:
    """``check(impl, example)`` raises AssertionError (usually ``compare.Mismatch``) when ``impl`` is wrong.

    ``conventions``: the conventions the property applies to (None: all). ``examples``: frozen failures, always
    replayed before the random ones. ``hunt_examples``: examples per mutant in the mutation hunt when fewer than
    ``mutation.MUTANT_EXAMPLES`` suffice (a property whose every example replays many calls). ``group``: the
    group of :data:`GROUPS` it belongs to, which a user can leave out by name (``csa fuzz --leave-out``).
    ``origins``: the implementation origins the property judges (None: all); the shape ladders leave out the
    exact reference, which is not run on large shapes.
    """

    name: str
    op: str
    strategy: st.SearchStrategy[Any]
    check: Callable[[Implementation, Any], None]
    conventions: tuple[str, ...] | None = None
    examples: tuple[Any, ...] = ()
    doc: str = ""
    hunt_examples: int | None = None
    group: str = ""
    origins: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.group and self.group not in GROUPS:
            raise ValueError(f"group: unknown property group {self.group!r}; known: {', '.join(GROUPS)}")

    def applies_to(self, impl: Implementation) -> bool:
        return (
            impl.op == self.op
            and (self.conventions is None or impl.convention in self.conventions)
            and (self.origins is None or impl.origin in self.origins)
        )


@dataclass
class Failure:
    """One distinct failure: the exception and the very example whose check raised it."""

    error: BaseException
    example: Any
    note: str = ""  # what Hypothesis said around it (e.g. that the failure did not reproduce), if anything


@dataclass
class Outcome:
    """``failures``: every distinct failure Hypothesis reported, each paired with its own example (the shrunk one,
    or the explicit example that failed); ``error`` and ``example`` are the first of them. ``shrink_cut``: the
    ``shrink_seconds`` budget ended shrinking (the example is the smallest failing one found by then)."""

    prop: str
    impl: str
    passed: bool
    examples: int
    seconds: float
    error: BaseException | None = None
    example: Any = None
    seed: int | None = None
    notes: list[str] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    shrink_cut: bool = False
    first_examples: list[Any] = field(default_factory=list)


FIRST_EXAMPLES = 64
"""Examples an ``Outcome`` keeps, in the order they were checked (``csa fuzz --sanitize N`` replays them)."""


class Monitor:
    """What one run of a property saw: every example checked, every (exception, example) pair, and the budget
    after the first failure. Once ``shrink_seconds`` have passed since the first failure, only examples already
    seen failing are checked again (Hypothesis replays its shrunk example last); any other example passes at once,
    so shrinking, and the search for further distinct failures, ends within a few cheap steps."""

    def __init__(self, shrink_seconds: float | None = None, on_example: Callable[[], None] | None = None) -> None:
        self.shrink_seconds = shrink_seconds
        self.on_example = on_example
        self.tried: list[Any] = []
        self.raised: list[tuple[BaseException, Any]] = []
        self.failing: set[str] = set()
        self.deadline: float | None = None
        self.cut = False

    def skip(self, example: Any) -> bool:
        if self.deadline is None or time.monotonic() <= self.deadline or repr(example) in self.failing:
            return False
        self.cut = True
        return True

    def checked(self, example: Any) -> None:
        self.tried.append(example)
        if self.on_example is not None:
            self.on_example()

    def failed(self, err: BaseException, example: Any) -> None:
        self.raised.append((err, example))
        self.failing.add(repr(example))
        if self.deadline is None and self.shrink_seconds is not None:
            self.deadline = time.monotonic() + self.shrink_seconds

    def failures(self, err: BaseException) -> list[Failure]:
        """The distinct failures in what Hypothesis raised, each with the example whose check raised it."""
        note = str(err) if isinstance(err, Flaky) else ""
        found = []
        for leaf in _leaves(err):
            example = next((ex for e, ex in reversed(self.raised) if e is leaf), None)
            found.append(Failure(leaf, example, note))
        return found


def _leaves(err: BaseException) -> list[BaseException]:
    if isinstance(err, BaseExceptionGroup):
        return [leaf for inner in err.exceptions for leaf in _leaves(inner)]
    return [err]


def hypothesis_test(
    prop: Property,
    impl: Implementation,
    record: list[Any] | None = None,
    failed: list[Any] | None = None,
    monitor: Monitor | None = None,
) -> Callable[[], None]:
    """The Hypothesis test function for ``prop`` on ``impl``; ``record`` receives every example tried, ``failed``
    every example whose check raised (Hypothesis goes on after a failing explicit example), ``monitor`` both
    with the exceptions (``Monitor``)."""

    def body(example: Any) -> None:
        if monitor is not None:
            if monitor.skip(example):
                return
            monitor.checked(example)
        if record is not None:
            record.append(example)
        try:
            prop.check(impl, example)
        except BaseException as err:
            if failed is not None:
                failed.append(example)
            if monitor is not None:
                monitor.failed(err, example)
            raise

    # one example-database key per (property, implementation): every pair shares ``body``'s source, which is
    # what Hypothesis keys its database on, so without this a failure saved for one pair is replayed for all
    body._hypothesis_internal_add_digest = f"{prop.name}|{impl.id}".encode()  # type: ignore[attr-defined]
    test = given(prop.strategy)(body)
    for frozen in prop.examples:
        from hypothesis import example as hyp_example

        test = hyp_example(frozen)(test)
    return test


def run_property(
    prop: Property,
    impl: Implementation,
    *,
    max_examples: int | None = None,
    seed: int | None = None,
    derandomize: bool | None = None,
    shrink: bool = True,
    shrink_seconds: float | None = None,
    on_example: Callable[[], None] | None = None,
) -> Outcome:
    """Run ``prop`` on ``impl`` outside pytest. Every distinct failure comes back with its own example: the shrunk
    one (with ``shrink=False`` the first failing example: enough to know that a property fails, and much
    faster). ``shrink_seconds`` bounds the time spent after the first failure (``Monitor``); ``on_example`` is
    called for every example checked."""
    monitor = Monitor(shrink_seconds, on_example)
    test = hypothesis_test(prop, impl, monitor=monitor)
    overrides: dict[str, Any] = {}
    if max_examples is not None:
        overrides["max_examples"] = max_examples
    if derandomize is not None:
        overrides["derandomize"] = derandomize
    if not shrink:
        overrides["phases"] = [Phase.explicit, Phase.reuse, Phase.generate]
    overrides["database"] = None
    overrides["print_blob"] = False
    overrides["deadline"] = None  # as in every project profile: a slow but correct kernel is not a failure
    test = settings(settings.default, **overrides)(test)
    if seed is not None:
        from hypothesis import seed as hyp_seed

        test = hyp_seed(seed)(test)
    start = time.perf_counter()

    def outcome(passed: bool, **failed: Any) -> Outcome:
        return Outcome(
            prop.name,
            impl.id,
            passed,
            len(monitor.tried),
            time.perf_counter() - start,
            seed=seed,
            first_examples=monitor.tried[:FIRST_EXAMPLES],
            **failed,
        )

    try:
        test()
    except Exception as err:  # any exception from the impl is a failure; Hypothesis groups distinct ones
        failures = monitor.failures(err)
        first = failures[0]
        example = first.example
        if example is None and not monitor.raised:
            example = monitor.tried[-1] if monitor.tried else None
        return outcome(False, error=first.error, example=example, failures=failures, shrink_cut=monitor.cut)
    return outcome(True)


def applicable(props: Sequence[Property], impls: Sequence[Implementation]) -> list[tuple[Property, Implementation]]:
    return [(p, i) for p in props for i in impls if p.applies_to(i)]
