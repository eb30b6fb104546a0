"""Properties of the sliding-window block release (operation ``window_release``, docs/indexing.md "Window block
release").

An example is ``{"window", "block_size", "requests"}`` (``properties.indexing.strategies.release_lives``): each
request's life is replayed step by step, every request with a step left scheduled in one call per round, the
tentative length ``S = e + D`` and step length ``D`` passed, the request's accepted length ``e`` then advanced by
the step's acceptance. The reads the answer must keep are enumerated here (``reference.window_release
.positions_read``: this step's queries, and the next step's first query after every acceptance), a second
formulation beside the closed form.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from properties.compare import Mismatch, assert_exact
from properties.indexing.strategies import release_lives
from properties.indexing.values import output_lanes
from properties.registry import Implementation
from properties.runner import Property
from reference.window_release import positions_read, released_blocks


@dataclass(frozen=True)
class Scheduled:
    """One request's step as the implementation answered it: accepted length ``start``, step ``step`` keeping
    ``accepted``, and the released count ``released``."""

    request: int
    start: int
    step: int
    accepted: int
    released: int


def scheduled_steps(impl: Implementation, case: dict[str, Any]) -> Iterator[Scheduled]:
    """Every request's steps in order, one call per round."""
    requests = case["requests"]
    accepted = [r["start"] for r in requests]
    for i in range(max(len(r["steps"]) for r in requests)):
        live = [m for m, r in enumerate(requests) if i < len(r["steps"])]
        steps = [requests[m]["steps"][i] for m in live]
        out = impl.fn(
            torch.tensor([accepted[m] + d for m, (d, _) in zip(live, steps, strict=True)], dtype=torch.int32),
            torch.tensor([d for d, _ in steps], dtype=torch.int32),
            window=case["window"],
            block_size=case["block_size"],
        )
        counts = output_lanes(out, torch.int32, (len(live),), f"window_release output (round {i})")
        for m, (d, a), n in zip(live, steps, counts, strict=True):
            yield Scheduled(m, accepted[m], d, a, n)
            accepted[m] += a


def oldest_read(case: dict[str, Any], step: Scheduled) -> int:
    """The oldest position a query of this step, or the next step's first query after any acceptance, reads."""
    w = case["window"]
    reads = [positions_read(step.start, step.step, w)]
    reads += [positions_read(step.start + a, 1, w) for a in range(1, step.step + 1)]
    return min(r.start for r in reads)


def check_equals_reference(impl: Implementation, case: dict[str, Any]) -> None:
    got, expected = [], []
    for step in scheduled_steps(impl, case):
        got.append(step.released)
        expected.append(released_blocks(step.start + step.step, step.step, case["window"], case["block_size"]))
    assert_exact(expected, got, "window_release counts vs the exact reference (steps in schedule order)")


def check_never_frees_a_needed_block(impl: Implementation, case: dict[str, Any]) -> None:
    """No block released so far (the largest count yet: a released block cannot come back) holds a position this
    step's queries or the next step's first query read, whatever the acceptance."""
    size, held = case["block_size"], [0] * len(case["requests"])
    for step in scheduled_steps(impl, case):
        held[step.request] = max(held[step.request], step.released)
        oldest = oldest_read(case, step)
        if held[step.request] * size > oldest:
            raise Mismatch(
                f"window_release: request {step.request} has released {held[step.request]} blocks of {size} "
                f"positions, but position {oldest} is still read",
                detail=f"step of {step.step} positions from {step.start}, window {case['window']}",
            )


def check_frees_every_stale_block(impl: Implementation, case: dict[str, Any]) -> None:
    """Every block wholly older than everything this step and the next read is released: none is kept longer."""
    size = case["block_size"]
    for step in scheduled_steps(impl, case):
        stale = oldest_read(case, step) // size
        if step.released < stale:
            raise Mismatch(
                f"window_release: request {step.request} keeps {stale - step.released} block(s) no read needs",
                [((step.request,), stale, step.released)],
                detail=f"step of {step.step} positions from {step.start}, window {case['window']}, block {size}",
            )


def _property(name: str, check: Any, doc: str) -> Property:
    return Property(f"window_release_{name}", "window_release", release_lives(), check, doc=doc)


PROPERTIES = [
    _property("equals_reference", check_equals_reference, "the released counts equal the exact reference"),
    _property(
        "never_frees_a_needed_block",
        check_never_frees_a_needed_block,
        "no released block holds a position this step or the next (after any acceptance) reads",
    ),
    _property(
        "frees_every_stale_block",
        check_frees_every_stale_block,
        "every block wholly older than what this step and the next read is released",
    ),
]
