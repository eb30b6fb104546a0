"""Request lives under ``hypothesis.stateful``: one machine per registered compression implementation (the
reference adapters, the project's kernels), compared with the exact model after every step
(properties/compression/request_life.py); and the same machine run against mutants it must catch."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from properties.compression.call import DECODE, PREFILL
from properties.compression.request_life import life_settings, machine_for, run_request_life
from properties.mutants import register_mutants
from properties.registry import Implementation, discover

IMPLS = [i for i in discover().find() if i.op in (PREFILL, DECODE)]
STEPS = 12


def examples() -> int:
    """A quarter of the profile's examples per property (each example is a whole life of up to STEPS
    calls)."""
    return max(10, settings().max_examples // 4)


INTERPRETED_EXAMPLES = 3
"""Lives for a Triton kernel under TRITON_INTERPRET=1, which runs at about a thousandth of its speed (each
life is up to STEPS launches); the compiled GPU run uses the full count."""


def interpreted(impl: Implementation) -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1" and "triton" in impl.name


@pytest.mark.parametrize("impl", IMPLS, ids=[i.id for i in IMPLS])
def test_request_life(impl: Implementation) -> None:
    count = INTERPRETED_EXAMPLES if interpreted(impl) else examples()
    run_state_machine_as_test(machine_for(impl), settings=life_settings(count, STEPS))


CAUGHT = (
    "prefill_ring_slot_off_by_one",
    "prefill_reads_leftovers_at_start",
    "decode_rtw_writes_before_reading",
    "decode_writes_window_only",
)
"""Mutants whose bug shows in a request's life: a ring slot off by one, leftovers of the slot's previous
request read at position 0, a read_then_write step that writes first (rollback-sized ring), and rollback after
a step that kept only its newest W - 1 positions."""


CATCH_EXAMPLES = 1000
"""Lives tried against a mutant; it stops at the first failure (no shrinking). decode_writes_window_only, the
hardest, fell after 6 to 292 lives in six random runs, so 150 let it live on another machine."""


@pytest.mark.parametrize("name", CAUGHT)
def test_machine_catches_mutant(name: str) -> None:
    (mutant,) = [m for m in register_mutants().find() if m.name == name]
    outcome = run_request_life(mutant, max_examples=CATCH_EXAMPLES, steps=STEPS)
    assert not outcome.passed, f"the request-life machine let {mutant.id} live ({outcome.seconds:.1f} s)"
