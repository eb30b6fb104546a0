"""State rings: the minimal safe size, checked by exhaustive search over small schedules, and the published
bounds of docs/ring-safety.md with their counterexamples."""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

import pytest

from reference.compression import CompressionState, decode_step, prefill_chunk
from reference.gated_mean import Weighting
from reference.layer import CompressedLayer
from reference.state import (
    DISCIPLINES,
    READ_THEN_WRITE,
    WRITE_THEN_READ,
    Ring,
    min_safe_ring_size,
    new_ring,
    ring_prefill,
    ring_step,
    state_payload_bytes,
)
from tests.compression_oracles import RawPosition, oracle_row, random_ape, random_positions
from tests.refusals import worded_exactly

R = Weighting.RATIONAL

# --- exhaustive search ---------------------------------------------------------------------------------------


@dataclass
class Findings:
    corrupting: list[tuple[int, list[tuple[int, int]]]]  # (prefix length, [(q, accepted), ...])
    read_from_ring: bool = False


def tagged(layer: CompressedLayer, position: int, version: int) -> RawPosition:
    """Inputs that identify (position, version): weight 1 and latent base^k with a unique exponent k per channel.

    A row is the mean of at most W such powers with base W + 1, so it changes whenever any input read differs
    (a sum of at most W powers of W + 1 has a unique base-(W + 1) expansion): a lost input shows in the value.
    """
    base = layer.window + 1
    k = (position * 8 + version) * layer.channels
    return (1,) * layer.channels, tuple(base ** (k + c) for c in range(layer.channels))


def search(layer: CompressedLayer, size: int, discipline: str, qmax: int, rollback: bool, max_steps: int) -> Findings:
    """Every schedule: a prefill of 1..W + r positions, then up to ``max_steps`` steps of q <= qmax positions
    keeping 1..q of them (q without rollback). Accepted rows are compared with the oracle over the accepted
    inputs."""
    findings = Findings(corrupting=[])

    def explore(ring: Ring, accepted: list[RawPosition], prefix: int, schedule: list[tuple[int, int]]) -> None:
        version = len(schedule) + 1
        for q in range(1, qmax + 1):
            for a in range(1, q + 1) if rollback else (q,):
                new = [tagged(layer, p, version) for p in range(ring.end, ring.end + q)]
                result = ring_step(ring, ring.end, new, R, accepted=a)
                kept = accepted + new[:a]
                findings.read_from_ring |= bool(result.ring_reads)
                if any(row.values != oracle_row(layer, kept, row.index) for row in result.rows):
                    findings.corrupting.append((prefix, [*schedule, (q, a)]))
                elif len(schedule) + 1 < max_steps:
                    explore(result.ring, kept, prefix, [*schedule, (q, a)])

    for prefix in range(1, layer.window + layer.ratio + 1):
        inputs = [tagged(layer, p, 0) for p in range(prefix)]
        start = ring_prefill(new_ring(layer, size, discipline), 0, inputs, R)
        assert [row.values for row in start.rows] == [
            oracle_row(layer, inputs, j) for j in range(prefix // layer.ratio)
        ]
        explore(start.ring, inputs, prefix, [])
    return findings


CASES = [
    (CompressedLayer(ratio, 1), qmax, discipline, rollback)
    for ratio, qmaxes in ((1, (1, 2, 3, 4)), (2, (1, 2, 3, 4)), (3, (1, 2, 3)))
    for qmax in qmaxes
    for discipline in DISCIPLINES
    for rollback in (False, True)
] + [
    (CompressedLayer(4, 1, overlap=True), qmax, discipline, rollback)
    for qmax in (1, 2, 3)
    for discipline in DISCIPLINES
    for rollback in (False, True)
]


def _case_id(case: tuple[CompressedLayer, int, str, bool]) -> str:
    layer, qmax, discipline, rollback = case
    return f"r{layer.ratio}{'o' if layer.overlap else ''}-q{qmax}-{discipline}-{'rollback' if rollback else 'keep'}"


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_minimal_ring_is_safe_and_one_slot_less_corrupts(case: tuple[CompressedLayer, int, str, bool]) -> None:
    layer, qmax, discipline, rollback = case
    steps = 3
    safe = min_safe_ring_size(layer.ratio, layer.overlap, qmax, discipline, rollback)
    at_safe = search(layer, max(safe, 1), discipline, qmax, rollback, steps)
    assert at_safe.corrupting == []
    if safe >= 2:
        below = search(layer, safe - 1, discipline, qmax, rollback, steps)
        assert below.corrupting, f"no schedule corrupts a ring of {safe - 1}"
    elif safe == 1:
        assert at_safe.read_from_ring  # some schedule needs a stored input: a ring of no slots cannot work
    else:
        assert not at_safe.read_from_ring  # no schedule ever reads the ring: no state is needed at all


def test_formula_values_by_hand() -> None:
    # The book: C2, six positions per step, write_then_read -> 2 + 6 - 1 = 7 slots.
    assert min_safe_ring_size(2, False, 6, WRITE_THEN_READ, True) == 7
    # V4 decode keeps 2r windows with overlap and r without (one position per step).
    assert min_safe_ring_size(4, True, 1, WRITE_THEN_READ, False) == 8
    assert min_safe_ring_size(128, False, 1, WRITE_THEN_READ, False) == 128
    assert min_safe_ring_size(4, True, 6, READ_THEN_WRITE, False) == 7
    assert min_safe_ring_size(4, True, 6, READ_THEN_WRITE, True) == 12
    assert min_safe_ring_size(1, False, 6, READ_THEN_WRITE, True) == 0


# --- the published bounds ------------------------------------------------------------------------------------


def run_schedule(layer: CompressedLayer, size: int, discipline: str, prefix: int, steps: list[tuple[int, int]]) -> bool:
    """True when every accepted row of the schedule equals the oracle's."""
    inputs = [tagged(layer, p, 0) for p in range(prefix)]
    ring = ring_prefill(new_ring(layer, size, discipline), 0, inputs, R).ring
    for version, (q, a) in enumerate(steps, start=1):
        new = [tagged(layer, p, version) for p in range(ring.end, ring.end + q)]
        result = ring_step(ring, ring.end, new, R, accepted=a)
        inputs += new[:a]
        if any(row.values != oracle_row(layer, inputs, row.index) for row in result.rows):
            return False
        ring = result.ring
    return True


def test_published_write_then_read_bound() -> None:
    """S >= r + qmax - 1 is the minimum without overlap; with overlap (W = 2r) it is r slots short."""
    for ratio in range(1, 6):
        for qmax in range(1, 7):
            for rollback in (False, True):
                assert min_safe_ring_size(ratio, False, qmax, WRITE_THEN_READ, rollback) == ratio + qmax - 1
    overlap = CompressedLayer(4, 1, overlap=True)
    published = 4 + 1 - 1
    # Counterexample: prefill 0..6, decode position 7; row 1 reads 0..7 but slot 0 holds position 4.
    assert not run_schedule(overlap, published, WRITE_THEN_READ, 7, [(1, 1)])
    assert run_schedule(overlap, min_safe_ring_size(4, True, 1, WRITE_THEN_READ, False), WRITE_THEN_READ, 7, [(1, 1)])


def test_published_read_then_write_bound() -> None:
    """S >= W + D - 2 is the minimum with rollback when D counts every position of a verify step (qmax).

    Read as draft tokens only (a step writes D + 1 positions) it is one slot short; without rollback it is
    sufficient but W - 1 already suffices.
    """
    for ratio, overlap in ((1, False), (2, False), (3, False), (4, True), (128, False)):
        window = 2 * ratio if overlap else ratio
        for d in range(1, 7):
            safe = min_safe_ring_size(ratio, overlap, d, READ_THEN_WRITE, True)
            assert safe == (window + d - 2 if window > 1 else 0)
            assert min_safe_ring_size(ratio, overlap, d, READ_THEN_WRITE, False) <= max(window + d - 2, 0)
    # D = 1 draft, steps of D + 1 = 2 positions, C2 (W = 2): the bound gives 1 slot. Prefill 0..1; verify 2..3
    # keeping only 2 (3's write takes slot 0); the next step completes row 1 at position 3 and reads position 2
    # from slot 0, which holds the rejected 3.
    c2 = CompressedLayer(2, 1)
    assert not run_schedule(c2, 2 + 1 - 2, READ_THEN_WRITE, 2, [(2, 1), (1, 1)])
    assert run_schedule(
        c2, min_safe_ring_size(2, False, 1 + 1, READ_THEN_WRITE, True), READ_THEN_WRITE, 2, [(2, 1), (1, 1)]
    )


# --- the ring against the exact state form ---------------------------------------------------------------------


@pytest.mark.parametrize("discipline", DISCIPLINES)
def test_safe_ring_equals_exact_decode(discipline: str) -> None:
    rng = random.Random(discipline)
    for layer in (CompressedLayer(2, 2), CompressedLayer(4, 1, overlap=True, ape=random_ape(rng, 4, 2))):
        qmax = 4
        size = min_safe_ring_size(layer.ratio, layer.overlap, qmax, discipline, True)
        for _ in range(15):
            prefix = random_positions(rng, layer, rng.randint(1, 9))
            ring = ring_prefill(new_ring(layer, size, discipline, qmax=qmax, rollback=True, strict=True), 0, prefix, R)
            exact = prefill_chunk(layer, CompressionState(), 0, prefix, R)
            assert ring.reserved == exact.reserved
            ring_now, state = ring.ring, exact.state
            for _ in range(5):
                new = random_positions(rng, layer, rng.randint(1, qmax))
                kept = rng.randint(1, len(new))
                by_ring = ring_step(ring_now, ring_now.end, new, R, accepted=kept)
                by_state = decode_step(layer, state, state.end, new, R, accepted=kept)
                assert (by_ring.rows, by_ring.reserved) == (by_state.rows, by_state.reserved)
                assert by_ring.ring.end == by_state.state.end
                ring_now, state = by_ring.ring, by_state.state


def test_ring_keeps_rejected_writes() -> None:
    layer = CompressedLayer(2, 1)
    ring = ring_prefill(new_ring(layer, 4, READ_THEN_WRITE), 0, [((1,), (0,))], R).ring
    after = ring_step(ring, 1, [((1,), (1,)), ((1,), (2,)), ((1,), (3,))], R, accepted=1).ring
    assert after.end == 2
    assert [slot[1][0] if slot else None for slot in after.slots] == [0, 1, 2, 3]


def test_ring_reads_are_the_positions_read_from_slots() -> None:
    """``ring_reads`` lists exactly the positions whose inputs came from ring slots, ascending: under
    read-then-write only old positions (< start), under write-then-read every position a completed row reads."""
    one = ((1,), (1,))
    c2 = CompressedLayer(2, 1)
    for discipline in DISCIPLINES:
        ring = new_ring(c2, 4, discipline)
        first = ring_prefill(ring, 0, [one] * 3, R)  # row 0 from the chunk itself
        assert first.ring_reads == ()
        second = ring_prefill(first.ring, 3, [one] * 2, R)  # row 1 = positions 2 (ring) and 3 (chunk)
        assert second.ring_reads == (2,)
        nothing = ring_step(second.ring, 5, [one], R)  # position 5 completes row 2 = positions 4, 5
        assert nothing.ring_reads == ((4, 5) if discipline == WRITE_THEN_READ else (4,))
        idle = ring_step(nothing.ring, 6, [one], R)  # completes nothing, reads nothing
        assert idle.ring_reads == ()
    c4 = CompressedLayer(4, 1, overlap=True)  # row 1 reads positions 0 .. 7
    for discipline, reads in ((READ_THEN_WRITE, tuple(range(7))), (WRITE_THEN_READ, tuple(range(8)))):
        ring = ring_prefill(new_ring(c4, 8, discipline), 0, [((1, 1), (1, 1))] * 7, R).ring
        assert ring_step(ring, 7, [((1, 1), (1, 1))], R).ring_reads == reads
    verify = ring_prefill(new_ring(c2, 6, WRITE_THEN_READ), 0, [one], R).ring
    # a verify step of 4 (positions 1 .. 4) reads rows 0 and 1 whole from the ring, then keeps 2 positions
    assert ring_step(verify, 1, [one] * 4, R, accepted=2).ring_reads == (0, 1, 2, 3)


# --- strict mode, payload and bad input ----------------------------------------------------------------------


def test_strict_mode() -> None:
    layer = CompressedLayer(2, 1)
    new_ring(layer, 7, WRITE_THEN_READ, qmax=6, rollback=True, strict=True)
    with pytest.raises(ValueError, match=r"^size: .*needs at least 7 slots, got 6"):
        new_ring(layer, 6, WRITE_THEN_READ, qmax=6, rollback=True, strict=True)
    with pytest.raises(ValueError, match=r"^size:"):
        new_ring(CompressedLayer(4, 1, overlap=True), 11, READ_THEN_WRITE, qmax=6, rollback=True, strict=True)
    with pytest.raises(ValueError, match=r"^qmax:"):
        new_ring(layer, 7, WRITE_THEN_READ, strict=True)
    new_ring(layer, 6, WRITE_THEN_READ)  # not strict: an undersized ring is a model of a bug, allowed
    strict = new_ring(layer, 2, READ_THEN_WRITE, qmax=2, strict=True)
    strict = ring_prefill(strict, 0, [((1,), (1,))] * 5, R).ring
    with pytest.raises(ValueError, match=r"^positions:"):
        ring_step(strict, 5, [((1,), (1,))] * 3, R)
    with pytest.raises(ValueError, match=r"^accepted:"):
        ring_step(strict, 5, [((1,), (1,))] * 2, R, accepted=1)


def test_state_payload_bytes() -> None:
    assert state_payload_bytes(7, 512) == 28_672  # the book: 7 x 2 x 512 x 4
    assert state_payload_bytes(8, 1024) == 8 * 2 * 1024 * 4
    with pytest.raises(ValueError, match=r"^slots:"):
        state_payload_bytes(-1, 512)
    with pytest.raises(ValueError, match=r"^channels:"):
        state_payload_bytes(7, 0)


@pytest.mark.parametrize(
    ("call", "argument", "error"),
    [
        (lambda: min_safe_ring_size(0, False, 1, WRITE_THEN_READ, False), "ratio", ValueError),
        (lambda: min_safe_ring_size(2, True, 1, WRITE_THEN_READ, False), "overlap", ValueError),
        (lambda: min_safe_ring_size(2, False, 0, WRITE_THEN_READ, False), "qmax", ValueError),
        (lambda: min_safe_ring_size(2, False, 1, "read-modify-write", False), "discipline", ValueError),
        (lambda: min_safe_ring_size(2, False, 1, WRITE_THEN_READ, 1), "rollback", TypeError),  # type: ignore[arg-type]
        (lambda: new_ring(CompressedLayer(2, 1), 0, WRITE_THEN_READ), "size", ValueError),
        (lambda: new_ring(CompressedLayer(2, 1), 4, "write-first"), "discipline", ValueError),
        (lambda: new_ring(CompressedLayer(2, 1), 4, WRITE_THEN_READ, qmax=0), "qmax", ValueError),
        (
            lambda: ring_step(new_ring(CompressedLayer(2, 1), 4, WRITE_THEN_READ), 1, [((1,), (1,))], R),
            "start",
            ValueError,
        ),
        (lambda: ring_step(new_ring(CompressedLayer(2, 1), 4, WRITE_THEN_READ), 0, [], R), "positions", ValueError),
        (
            lambda: ring_prefill(new_ring(CompressedLayer(2, 2), 4, WRITE_THEN_READ), 0, [((1,), (1,))], R),
            "positions[0].scores",
            ValueError,
        ),
    ],
)
def test_bad_ring_input(call: object, argument: str, error: type[Exception]) -> None:
    with pytest.raises(error) as caught:
        call()  # type: ignore[operator]
    assert str(caught.value).startswith(f"{argument}:")


# --- every refusal worded exactly (docs/mutation.md) ------------------------------------------------------------

L2 = CompressedLayer(2, 1)
ONE = ((1,), (1,))
RING = new_ring(L2, 4, WRITE_THEN_READ)
STRICT = new_ring(L2, 3, WRITE_THEN_READ, qmax=2, strict=True)


test_every_refusal_is_worded_exactly = worded_exactly(
    [
        (
            lambda: min_safe_ring_size(0, False, 1, WRITE_THEN_READ, False),
            ValueError,
            "ratio: must be a positive integer, got 0",
        ),
        (lambda: min_safe_ring_size(2, 1, 1, WRITE_THEN_READ, False), TypeError, "overlap: must be a bool, got int"),  # type: ignore[arg-type]
        (
            lambda: min_safe_ring_size(2, False, 0, WRITE_THEN_READ, False),
            ValueError,
            "qmax: must be a positive integer, got 0",
        ),
        (
            lambda: min_safe_ring_size(2, False, 1, "write-first", False),
            ValueError,
            "discipline: must be one of write_then_read, read_then_write, got 'write-first'",
        ),
        (
            lambda: min_safe_ring_size(2, False, 1, 7, False),  # type: ignore[arg-type]
            ValueError,
            "discipline: must be one of write_then_read, read_then_write, got 7",
        ),
        (lambda: min_safe_ring_size(2, False, 1, WRITE_THEN_READ, 0), TypeError, "rollback: must be a bool, got int"),  # type: ignore[arg-type]
        (lambda: state_payload_bytes(-1, 2), ValueError, "slots: must be >= 0, got -1"),
        (lambda: state_payload_bytes(1, 0), ValueError, "channels: must be a positive integer, got 0"),
        (lambda: new_ring("layer", 4, WRITE_THEN_READ), TypeError, "layer: must be a CompressedLayer, got str"),  # type: ignore[arg-type]
        (lambda: new_ring(L2, 0, WRITE_THEN_READ), ValueError, "size: must be a positive integer, got 0"),
        (
            lambda: new_ring(L2, 4, "x"),
            ValueError,
            "discipline: must be one of write_then_read, read_then_write, got 'x'",
        ),
        (
            lambda: new_ring(L2, 4, "write-then-read"),
            ValueError,
            "discipline: 'write-then-read' is now spelled 'write_then_read'",
        ),
        (
            lambda: min_safe_ring_size(2, False, 1, "read-then-write", False),
            ValueError,
            "discipline: 'read-then-write' is now spelled 'read_then_write'",
        ),
        (
            lambda: new_ring(L2, 4, "write_then-read"),
            ValueError,
            "discipline: 'write_then-read' is now spelled 'write_then_read'",
        ),
        (
            lambda: new_ring(L2, 4, "write-then_read-"),
            ValueError,
            "discipline: must be one of write_then_read, read_then_write, got 'write-then_read-'",
        ),
        (lambda: new_ring(L2, 4, WRITE_THEN_READ, rollback=None), TypeError, "rollback: must be a bool, got NoneType"),  # type: ignore[arg-type]
        (lambda: new_ring(L2, 4, WRITE_THEN_READ, strict=1), TypeError, "strict: must be a bool, got int"),  # type: ignore[arg-type]
        (lambda: new_ring(L2, 4, WRITE_THEN_READ, qmax=0), ValueError, "qmax: must be a positive integer, got 0"),
        (
            lambda: new_ring(L2, 4, WRITE_THEN_READ, strict=True),
            ValueError,
            "qmax: strict mode needs the largest step size qmax",
        ),
        (
            lambda: new_ring(L2, 2, WRITE_THEN_READ, qmax=2, strict=True),
            ValueError,
            "size: a write_then_read ring for ratio 2, qmax 2 needs at least 3 slots, got 2",
        ),
        (
            lambda: new_ring(CompressedLayer(4, 1, overlap=True), 10, WRITE_THEN_READ, qmax=4, strict=True),
            ValueError,
            "size: a write_then_read ring for ratio 4 with overlap, qmax 4 needs at least 11 slots, got 10",
        ),
        (lambda: ring_prefill("ring", 0, [ONE], R), TypeError, "ring: must be a Ring, got str"),  # type: ignore[arg-type]
        (lambda: ring_prefill(RING, 0.0, [ONE], R), TypeError, "start: must be an int, got float"),  # type: ignore[arg-type]
        (
            lambda: ring_prefill(RING, 1, [ONE], R),
            ValueError,
            "start: a step must start where the ring ends (0), got 1",
        ),
        (lambda: ring_prefill(RING, 0, [], R), ValueError, "positions: a step must hold at least one position"),
        (lambda: ring_step(RING, 0, [ONE], R, accepted=1.0), TypeError, "accepted: must be an int, got float"),  # type: ignore[arg-type]
        (
            lambda: ring_step(RING, 0, [ONE], R, accepted=2),
            ValueError,
            "accepted: must be between 1 and the step's 1 positions, got 2",
        ),
        (
            lambda: ring_step(STRICT, 0, [ONE] * 3, R),
            ValueError,
            "positions: a strict ring takes at most qmax = 2 per step, got 3",
        ),
        (
            lambda: ring_step(STRICT, 0, [ONE] * 2, R, accepted=1),
            ValueError,
            "accepted: a strict ring without rollback keeps all 2 positions",
        ),
        (
            lambda: new_ring(L2, 1, READ_THEN_WRITE, qmax=2, rollback=True, strict=True),
            ValueError,
            "size: a read_then_write ring for ratio 2, qmax 2 and rollback needs at least 2 slots, got 1",
        ),
    ]
)


def test_a_ring_whose_end_outruns_its_slots_is_caught() -> None:
    """A ring built by hand with an end past what was written: the read of a never-written slot raises."""
    ring = replace(new_ring(L2, 4, READ_THEN_WRITE), end=3)
    with pytest.raises(RuntimeError, match=r"^position 2: its ring slot was never written \(end 3\)$"):
        ring_step(ring, 3, [ONE], R)
