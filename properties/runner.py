"""A property is (operation, strategy, check). The same object runs under pytest, against the shipped mutants
and against a user's callable, so all three see exactly the same examples and assertions."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import HypothesisException

from properties.registry import Implementation


@dataclass(frozen=True)
class Property:
    """``check(impl, example)`` raises AssertionError (usually ``compare.Mismatch``) when ``impl`` is wrong.

    ``conventions``: the conventions the property applies to (None: all). ``examples``: frozen failures, always
    replayed before the random ones. ``hunt_examples``: examples per mutant in the mutation hunt when fewer than
    ``mutation.MUTANT_EXAMPLES`` suffice (a property whose every example replays many calls).
    """

    name: str
    op: str
    strategy: st.SearchStrategy[Any]
    check: Callable[[Implementation, Any], None]
    conventions: tuple[str, ...] | None = None
    examples: tuple[Any, ...] = ()
    doc: str = ""
    hunt_examples: int | None = None

    def applies_to(self, impl: Implementation) -> bool:
        return impl.op == self.op and (self.conventions is None or impl.convention in self.conventions)


@dataclass
class Outcome:
    prop: str
    impl: str
    passed: bool
    examples: int
    seconds: float
    error: BaseException | None = None
    example: Any = None
    seed: int | None = None
    notes: list[str] = field(default_factory=list)


def hypothesis_test(
    prop: Property, impl: Implementation, record: list[Any] | None = None, failed: list[Any] | None = None
) -> Callable[[], None]:
    """The Hypothesis test function for ``prop`` on ``impl``; ``record`` receives every example tried, ``failed``
    every example whose check raised (Hypothesis goes on after a failing explicit example)."""

    def body(example: Any) -> None:
        if record is not None:
            record.append(example)
        try:
            prop.check(impl, example)
        except BaseException:
            if failed is not None:
                failed.append(example)
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
) -> Outcome:
    """Run ``prop`` on ``impl`` outside pytest; the failing example returned is the shrunk one (with
    ``shrink=False`` the first failing example: enough to know that a property fails, and much faster)."""
    record: list[Any] = []
    failed: list[Any] = []
    test = hypothesis_test(prop, impl, record, failed)
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
    try:
        test()
    except (
        AssertionError,
        HypothesisException,
        Exception,
    ) as err:  # any exception from the impl is a failure
        return Outcome(
            prop.name,
            impl.id,
            False,
            len(record),
            time.perf_counter() - start,
            err,
            failed[-1] if failed else (record[-1] if record else None),
            seed,
        )
    return Outcome(prop.name, impl.id, True, len(record), time.perf_counter() - start, seed=seed)


def applicable(props: Sequence[Property], impls: Sequence[Implementation]) -> list[tuple[Property, Implementation]]:
    return [(p, i) for p in props for i in impls if p.applies_to(i)]
