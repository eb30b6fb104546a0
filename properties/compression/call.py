"""Validation of a compression call with the contract's signature (``properties.contract``), shared by the
reference adapters and the small torch implementation behind the mutants: the checks of
``fast.compression.checks.check_call``, with the contract's ring rule, and every request holding at least one new
position.

Every check runs before the state is touched and raises ValueError / TypeError naming the argument. The ring
must be at least the safe size of the declared discipline for this call (docs/ring-safety.md,
``reference.state.min_safe_ring_size``): prefill and read_then_write ``W - 1`` (0 when ``W = 1``),
write_then_read ``W + q - 1`` with ``q`` the most new positions of any request in the call. Rollback safety
(``W + qmax - 2`` read_then_write) depends on the schedule, not on one call, and is the caller's to size for.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from fast.compression.checks import CheckedCall, RingRule, check_call
from reference import state as ring_model
from reference.checks import fail
from reference.layer import window_positions
from reference.state import READ_THEN_WRITE, WRITE_THEN_READ

PREFILL = "compression_prefill"
DECODE = "compression_decode"


def safe_ring(op: str, discipline: str | None, window: int, qmax: int) -> int:
    """The fewest ring slots one call of ``op`` accepts (see the module docstring): the reference's rule without
    rollback, which depends on the window ``W`` alone (so ``W`` stands as the ratio of a layer without
    overlap)."""
    write_first = op == DECODE and discipline == WRITE_THEN_READ
    model = ring_model.WRITE_THEN_READ if write_first else ring_model.READ_THEN_WRITE
    return ring_model.min_safe_ring_size(window, False, qmax, model, False)


RING_RULES = ("safe", "one_short", "seed", "none")
"""The ring-size rules a call can be checked by: "safe", and the mutants' wrong size checks "one_short"
(write_then_read ``W + q - 2``), "seed" (``r + q - 1`` whatever the overlap) and "none"."""


def ring_check(op: str, discipline: str | None, rule: str = "safe") -> RingRule:
    """The ring rule of ``check_call`` for a call of ``op`` under ``discipline`` by the rule named ``rule``."""
    if rule not in RING_RULES:
        raise fail("ring_rule", f"must be safe, one_short, seed or none, got {rule!r}")

    def check(ratio: int, overlap: bool, lengths: tuple[int, ...]) -> tuple[int, str]:
        qmax = max(lengths)
        safe = safe_ring(op, discipline, window_positions(ratio, overlap), qmax)
        need = {"safe": safe, "one_short": safe - 1, "seed": ratio + qmax - 1, "none": 0}[rule]
        return need, f"the {rule} rule ({discipline or READ_THEN_WRITE})"

    return check


@dataclass(frozen=True)
class Request:
    """One request of a call: state slot, first new position, and its rows ``[first, first + length)`` of the
    packed inputs."""

    slot: int
    start: int
    first: int
    length: int


@dataclass(frozen=True)
class Call(CheckedCall):
    """A checked call (the layer, the ring, the tensors: ``fast.compression.checks.CheckedCall``) and its
    requests."""

    requests: tuple[Request, ...]


def parse_call(op: str, discipline: str | None, *call: Any, ring_rule: str = "safe", **contract: Any) -> Call:
    """Check a call of ``op`` made with the contract's arguments (``call``: the six tensors, ``contract``:
    ratio, overlap, ape); ``ring_rule``: one of ``RING_RULES``."""
    rule = ring_check(op, discipline, ring_rule)
    checked = check_call(*call, **contract, ring_rule=rule, empty_requests=False)
    requests = tuple(
        Request(slot, start, first, length)
        for slot, start, first, length in zip(
            checked.slots, checked.starts, checked.firsts, checked.lengths, strict=True
        )
    )
    return Call(**{f.name: getattr(checked, f.name) for f in fields(checked)}, requests=requests)
