"""Ring safety of the reference (docs/ring-safety.md), by Hypothesis: for each discipline, with and without
rollback, every schedule is safe at ``min_safe_ring_size``, and at one slot less ``hypothesis.find`` finds a
corrupting one; the two published bounds are confirmed or refuted by schedules Hypothesis finds, and the
counterexamples of the docs are replayed as given.

A schedule: a prefill of ``prefix`` positions, then verify steps ``(q, a)`` of ``q <= qmax`` positions keeping
``a`` (``a = q`` without rollback). It corrupts a ring when an accepted row read through the ring
(``reference.state``) differs from the state form (``reference.compression``), which keeps every input it
needs. Inputs are tagged: weight 1 and a latent that is a distinct power of ``W + 1`` per (position, version,
channel), so any lost or replaced input changes the row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from reference.compression import CompressionState, Position, decode_step, prefill_chunk
from reference.gated_mean import Weighting
from reference.layer import CompressedLayer
from reference.state import (
    DISCIPLINES,
    READ_THEN_WRITE,
    WRITE_THEN_READ,
    min_safe_ring_size,
    new_ring,
    ring_prefill,
    ring_step,
)

R = Weighting.RATIONAL
FIND = settings(
    max_examples=3000, derandomize=True, database=None, deadline=None, phases=[Phase.generate, Phase.shrink]
)


@dataclass(frozen=True)
class Case:
    ratio: int
    overlap: bool
    qmax: int
    discipline: str
    rollback: bool

    @property
    def layer(self) -> CompressedLayer:
        return CompressedLayer(self.ratio, 1, overlap=self.overlap)

    @property
    def minimum(self) -> int:
        return min_safe_ring_size(self.ratio, self.overlap, self.qmax, self.discipline, self.rollback)

    def __str__(self) -> str:
        kind = "rollback" if self.rollback else "keep"
        return f"r{self.ratio}{'o' if self.overlap else ''}-q{self.qmax}-{self.discipline}-{kind}"


QMAX = {(1, False): (1, 3, 16), (2, False): (1, 4, 8, 16), (3, False): (2, 11), (4, True): (1, 3, 16)}
"""Verify steps of each (ratio, overlap) layer: up to 16 positions (engines run 5 to 8 drafts and more)."""
LAYERS = tuple((ratio, overlap, qmax) for (ratio, overlap), steps in QMAX.items() for qmax in steps)
"""(ratio, overlap, qmax)."""
CASES = [Case(r, o, q, d, rb) for r, o, q in LAYERS for d in DISCIPLINES for rb in (False, True)]


def tagged(layer: CompressedLayer, position: int, version: int) -> Position:
    base = layer.window + 1
    k = (position * 8 + version) * layer.channels
    return (1,) * layer.channels, tuple(base ** (k + c) for c in range(layer.channels))


def schedules(layer: CompressedLayer, qmax: int, rollback: bool) -> st.SearchStrategy[dict[str, Any]]:
    """``{"prefix": 1..W + r, "steps": [[q, a], ...]}`` with 1 to 4 steps, often of the full ``qmax`` (where the
    tight cases are) and, with rollback, often keeping one position."""
    sizes = st.one_of(st.just(qmax), st.integers(1, qmax))
    kept = (lambda q: st.one_of(st.just(1), st.integers(1, q))) if rollback else st.just
    step = sizes.flatmap(lambda q: st.tuples(st.just(q), kept(q)))
    return st.fixed_dictionaries(
        {
            "prefix": st.integers(1, layer.window + layer.ratio),
            "steps": st.lists(step.map(list), min_size=1, max_size=4),
        }
    )


@dataclass(frozen=True)
class Replay:
    corrupted: bool
    read_ring: bool


def replay(layer: CompressedLayer, size: int, discipline: str, schedule: dict[str, Any]) -> Replay:
    """Run a schedule through a ring of ``size`` slots (at least 1) and through the state form."""
    inputs = [tagged(layer, p, 0) for p in range(schedule["prefix"])]
    ring = ring_prefill(new_ring(layer, max(size, 1), discipline), 0, inputs, R)
    exact = prefill_chunk(layer, CompressionState(), 0, inputs, R)
    read = bool(ring.ring_reads)
    if ring.rows != exact.rows:
        return Replay(True, read)
    ring_now, state = ring.ring, exact.state
    for version, (q, a) in enumerate(schedule["steps"], start=1):
        new = [tagged(layer, p, version) for p in range(state.end, state.end + q)]
        try:
            by_ring = ring_step(ring_now, state.end, new, R, accepted=a)
        except RuntimeError:  # a slot never written: the ring lost what it needed
            return Replay(True, True)
        by_state = decode_step(layer, state, state.end, new, R, accepted=a)
        read |= bool(by_ring.ring_reads)
        if by_ring.rows != by_state.rows:
            return Replay(True, read)
        ring_now, state = by_ring.ring, by_state.state
    return Replay(False, read)


def corrupting(case: Case, size: int) -> dict[str, Any]:
    """The smallest schedule that corrupts a ring of ``size`` slots (``size`` 0: that reads a ring at all)."""

    def bad(schedule: dict[str, Any]) -> bool:
        outcome = replay(case.layer, size, case.discipline, schedule)
        return outcome.read_ring if size == 0 else outcome.corrupted

    try:
        found: dict[str, Any] = find(schedules(case.layer, case.qmax, case.rollback), bad, settings=FIND)
    except NoSuchExample:
        pytest.fail(
            f"{case}: no schedule corrupts a ring of {size} slots in {FIND.max_examples} tries, "
            f"although the derived minimum is {case.minimum}"
        )
    print(f"{case}: a ring of {size} slots is corrupted by {found}")
    return found


@pytest.mark.parametrize("case", CASES, ids=str)
def test_every_schedule_is_safe_at_the_minimum(case: Case) -> None:
    @given(schedules(case.layer, case.qmax, case.rollback))
    def safe(schedule: dict[str, Any]) -> None:
        outcome = replay(case.layer, case.minimum, case.discipline, schedule)
        if case.minimum == 0:
            assert not outcome.read_ring, f"{case}: {schedule} reads a ring that needs no slot"
        else:
            assert not outcome.corrupted, f"{case}: {schedule} corrupts the minimal ring of {case.minimum}"

    safe()


@pytest.mark.parametrize("case", [c for c in CASES if c.minimum >= 1], ids=str)
def test_one_slot_less_is_corrupted(case: Case) -> None:
    found = corrupting(case, case.minimum - 1)
    outcome = replay(case.layer, case.minimum - 1, case.discipline, found)
    assert outcome.read_ring if case.minimum == 1 else outcome.corrupted


@pytest.mark.parametrize("discipline", DISCIPLINES)
def test_minimum_is_tight_for_every_step_size_up_to_16(discipline: str) -> None:
    """C2 with rollback, every verify-step size 1..16: schedules drawn at the minimum are safe, and one slot
    less is corrupted (the minimum is W + qmax - 1 write_then_read, W + qmax - 2 read_then_write)."""
    for qmax in range(1, 17):
        case = Case(2, False, qmax, discipline, True)
        assert case.minimum == 2 + qmax - (1 if discipline == WRITE_THEN_READ else 2)

        @settings(max_examples=15, derandomize=True, database=None, deadline=None)
        @given(st.just(case), schedules(case.layer, qmax, True))
        def safe(case: Case, schedule: dict[str, Any]) -> None:
            assert not replay(case.layer, case.minimum, discipline, schedule).corrupted, (case, schedule)

        safe()
        outcome = replay(case.layer, case.minimum - 1, discipline, corrupting(case, case.minimum - 1))
        assert outcome.read_ring if case.minimum == 1 else outcome.corrupted


# --- the published bounds -----------------------------------------------------------------------------------


def test_write_then_read_bound_holds_without_overlap() -> None:
    """S >= r + qmax - 1 (the seed's assertion) is the minimum without overlap, with or without rollback."""
    for case in CASES:
        if case.discipline == WRITE_THEN_READ and not case.overlap:
            assert case.minimum == case.ratio + case.qmax - 1, case


@pytest.mark.parametrize("qmax", [1, 3, 16])
def test_write_then_read_bound_is_short_with_overlap(qmax: int) -> None:
    """With overlap (W = 2r) a ring of r + qmax - 1 slots is corrupted: Hypothesis finds a schedule."""
    case = Case(4, True, qmax, WRITE_THEN_READ, False)
    published = case.ratio + qmax - 1
    assert published < case.minimum
    found = corrupting(case, published)
    assert replay(case.layer, published, WRITE_THEN_READ, found).corrupted
    # docs/ring-safety.md: prefill 0..6, decode position 7; row 1 reads 0..7 but slots 0..3 hold 4..7.
    given_in_docs = {"prefix": 7, "steps": [[1, 1]]}
    assert replay(case.layer, 4, WRITE_THEN_READ, given_in_docs).corrupted
    assert not replay(
        case.layer, Case(4, True, 1, WRITE_THEN_READ, False).minimum, WRITE_THEN_READ, given_in_docs
    ).corrupted


def test_read_then_write_bound_counting_every_written_position() -> None:
    """S >= W + D - 2 with D = every position of a verify step (qmax) is the rollback minimum."""
    for case in CASES:
        if case.discipline == READ_THEN_WRITE and case.rollback:
            w = case.layer.window
            assert case.minimum == (w + case.qmax - 2 if w > 1 else 0), case


@pytest.mark.parametrize(
    ("ratio", "overlap", "drafts"),
    [(2, False, 1), (2, False, 3), (2, False, 7), (3, False, 2), (4, True, 1), (4, True, 15)],
)
def test_read_then_write_bound_counting_drafts_only_is_one_short(ratio: int, overlap: bool, drafts: int) -> None:
    """Read as D = drafts, with steps of D + 1 positions (drafts plus the sampled token), under rollback the
    bound W + D - 2 is one slot short: Hypothesis finds a corrupting schedule."""
    case = Case(ratio, overlap, drafts + 1, READ_THEN_WRITE, True)
    published = case.layer.window + drafts - 2
    assert published == case.minimum - 1
    if published == 0:
        return  # covered by test_one_slot_less_is_corrupted: a step must read the ring
    found = corrupting(case, published)
    assert replay(case.layer, published, READ_THEN_WRITE, found).corrupted
    if (ratio, drafts) == (2, 1):
        # docs/ring-safety.md: prefill 0, 1; verify 2, 3 keeping 2; the next step reads 2 and gets the
        # rejected 3.
        given_in_docs = {"prefix": 2, "steps": [[2, 1], [1, 1]]}
        assert replay(case.layer, published, READ_THEN_WRITE, given_in_docs).corrupted
        assert not replay(case.layer, case.minimum, READ_THEN_WRITE, given_in_docs).corrupted


@pytest.mark.parametrize(("ratio", "overlap", "drafts"), [(2, False, 1), (3, False, 2), (4, True, 2)])
def test_read_then_write_bound_without_rollback_is_sufficient(ratio: int, overlap: bool, drafts: int) -> None:
    """Without rollback W + D - 2 >= W - 1 suffices (it is not tight: W - 1 does)."""
    case = Case(ratio, overlap, drafts + 1, READ_THEN_WRITE, False)
    published = case.layer.window + drafts - 2
    assert published >= case.minimum

    @given(schedules(case.layer, case.qmax, False))
    def safe(schedule: dict[str, Any]) -> None:
        assert not replay(case.layer, published, READ_THEN_WRITE, schedule).corrupted

    safe()
