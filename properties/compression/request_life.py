"""The life of requests in state slots, driven through an implementation and compared with the exact model
after every call.

A schedule: requests start at position 0 in a state slot (over whatever an earlier request left there), take
prefill chunks, and take verify steps of ``q <= qmax`` positions of which ``1 <= a <= q`` are accepted (the
rest roll back: the next step starts at ``start + a`` and the rejected writes stay in the ring). The ring has
the rollback-safe size of the decode discipline (``reference.state.min_safe_ring_size(..., rollback=True)``)
plus ``ring_extra``.

The model, per state slot: ``reference.compression`` (the state form: ``prefill_chunk`` / ``decode_step`` and
the inputs the next row needs, ``state_inputs``) and ``reference.state`` (a ``Ring`` that starts from the fill
and sees every write). After every call: the reserved rows and store rows equal the state form's, the two
models agree, and the implementation's ring holds every input the state form keeps, bit for bit.

An implementation of one operation is paired with its twin of the other (same name and origin) when one is
registered, otherwise with the reference adapter, so a mutant of one operation meets only reference calls.
``RequestLifeMachine`` (``machine_for``) is the same driver under ``hypothesis.stateful``;
``run_request_life`` runs it against any implementation and reports pass or fail.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import properties.compression.impls as reference_adapters
from properties.compression.call import DECODE, PREFILL, READ_THEN_WRITE
from properties.compression.checks import Entry, Expected, call, check_reserved, check_ring, new_state, pack
from properties.compression.exact import WEIGHTING, LayerSpec, RawPosition, weighted_layer, weighted_positions
from properties.compression.strategies import (
    LIFE_RATIOS,
    QMAX,
    RING_EXTRA_LIFE,
    decode_op,
    fills,
    layer_specs,
    prefill_op,
)
from properties.registry import Implementation, discover
from reference import state as ring_model
from reference.compression import CompressionState, OutputRow, decode_step, prefill_chunk, state_inputs


def twin(impl: Implementation) -> tuple[Implementation, Implementation]:
    """(prefill, decode) for a schedule driving ``impl``."""
    other = DECODE if impl.op == PREFILL else PREFILL
    same = [i for i in discover().find(op=other, origin=impl.origin) if i.name == impl.name]
    if impl.origin == "reference" or not same:
        convention = None if other == PREFILL else READ_THEN_WRITE
        same = [
            i for i in discover().find(op=other, origin="reference") if i.convention in (convention, "reserve_max1")
        ]
    if not same:
        raise LookupError(f"no {other} implementation to pair with {impl.id} ({reference_adapters.__name__})")
    return (impl, same[0]) if impl.op == PREFILL else (same[0], impl)


@dataclass
class Life:
    """One request: its accepted positions and the state form after them."""

    sequence: list[RawPosition] = field(default_factory=list)
    state: CompressionState = field(default_factory=CompressionState)

    @property
    def end(self) -> int:
        return len(self.sequence)


def _expected(reserved: tuple[OutputRow, ...], sequence: list[RawPosition]) -> list[Expected]:
    return [
        Expected(o.store_row, o.values if o.store_row >= 0 else None, sequence, max(o.store_row, 0), o.position)
        for o in reserved
    ]


class RequestLife:
    """State slots, the implementation's ring tensor and the exact model beside it."""

    def __init__(
        self,
        prefill: Implementation,
        decode: Implementation,
        spec: LayerSpec,
        qmax: int,
        slots: int,
        ring_extra: int,
        fill: Any,
    ) -> None:
        self.prefill_impl, self.decode_impl = prefill, decode
        self.spec, self.qmax, self.slots = spec, qmax, slots
        self.layer = weighted_layer(spec)
        self.discipline = decode.convention or READ_THEN_WRITE
        r, overlap = int(spec["ratio"]), bool(spec["overlap"])
        self.size = ring_model.min_safe_ring_size(r, overlap, qmax, self.discipline, True) + ring_extra
        self.state = new_state(spec, slots, self.size, fill, decode.device)
        start = self.state.cpu()
        self.rings = [reference_adapters.ring_of(self.layer, start, k, 0, self.discipline) for k in range(slots)]
        self.lives: dict[int, Life] = {}

    def apply(self, op: dict[str, Any]) -> None:
        if op["op"] == "new":
            self.new(op["slot"])
        elif op["op"] == "prefill":
            self.prefill([(c["slot"], c["positions"]) for c in op["calls"]])
        else:
            self.decode([(c["slot"], c["positions"], c["accepted"]) for c in op["calls"]])
        self.check_rings()

    def new(self, slot: int) -> None:
        """A new request at position 0 in ``slot``; the ring keeps what the previous one wrote."""
        self.lives[slot] = Life()
        self.rings[slot] = replace(self.rings[slot], end=0)

    def _run(self, impl: Implementation, entries: list[Entry]) -> Any:
        return call(impl, *pack(self.spec, entries, self.state, impl.device))

    def prefill(self, calls: list[tuple[int, list[RawPosition]]]) -> None:
        entries = [Entry(k, self.lives[k].end, new) for k, new in calls]
        got = self._run(self.prefill_impl, entries)
        expected: list[Expected] = []
        for k, new in calls:
            life, inputs = self.lives[k], weighted_positions(self.spec, new)
            exact = prefill_chunk(self.layer, life.state, life.end, inputs, WEIGHTING)
            by_ring = ring_model.ring_prefill(self.rings[k], life.end, inputs, WEIGHTING)
            self._agree(k, exact.reserved, by_ring.reserved)
            expected += _expected(exact.reserved, life.sequence + list(new))
            life.sequence += list(new)
            life.state, self.rings[k] = exact.state, by_ring.ring
        check_reserved(self.spec, got, expected, f"prefill {[(k, len(n)) for k, n in calls]}")

    def decode(self, calls: list[tuple[int, list[RawPosition], int]]) -> None:
        entries = [Entry(k, self.lives[k].end, new) for k, new, _ in calls]
        got = self._run(self.decode_impl, entries)
        expected: list[Expected] = []
        for k, new, accepted in calls:
            life, inputs = self.lives[k], weighted_positions(self.spec, new)
            exact = decode_step(self.layer, life.state, life.end, inputs, WEIGHTING, accepted)
            by_ring = ring_model.ring_step(self.rings[k], life.end, inputs, WEIGHTING, accepted)
            self._agree(k, exact.reserved, by_ring.reserved)
            expected += _expected(exact.reserved, life.sequence + list(new))
            life.sequence += list(new[:accepted])
            life.state, self.rings[k] = exact.state, by_ring.ring
        steps = [(k, len(n), a) for k, n, a in calls]
        check_reserved(self.spec, got, expected, f"decode (slot, q, accepted) {steps}")

    @staticmethod
    def _agree(slot: int, exact: tuple[OutputRow, ...], by_ring: tuple[OutputRow, ...]) -> None:
        if exact != by_ring:
            raise AssertionError(f"slot {slot}: the reference ring model and the state form disagree (ring too small?)")

    def check_rings(self) -> None:
        """Every input the state form keeps for a live request sits in its ring, bit for bit, as in the
        model."""
        state = self.state.cpu()
        for k, life in self.lives.items():
            held = state_inputs(self.layer, life.state)
            check_ring(state, k, life.sequence, held, f"after position {life.end}")
            model = self.rings[k]
            for p, inputs in held.items():
                if model.slots[p % model.size] != inputs:
                    raise AssertionError(f"slot {k}: the reference ring model lost position {p}")


def replay_life(impl: Implementation, ex: dict[str, Any]) -> None:
    """Run a drawn schedule (``strategies_compression.request_lives``) through ``impl`` and its twin."""
    prefill, decode = twin(impl)
    life = RequestLife(prefill, decode, ex["layer"], ex["qmax"], ex["slots"], ex["ring_extra"], ex["fill"])
    for op in ex["ops"]:
        life.apply(op)


def machine_for(impl: Implementation) -> type[RuleBasedStateMachine]:
    """A ``RuleBasedStateMachine`` driving ``impl`` (and its twin) through request lives."""
    prefill, decode = twin(impl)

    class RequestLifeMachine(RuleBasedStateMachine):
        life: RequestLife

        @initialize(
            spec=layer_specs(ratios=LIFE_RATIOS),
            qmax=QMAX,
            slots=st.integers(1, 2),
            extra=RING_EXTRA_LIFE,
            fill=fills(),
        )
        def begin(self, spec: LayerSpec, qmax: int, slots: int, extra: int, fill: Any) -> None:
            self.life = RequestLife(prefill, decode, spec, qmax, slots, extra, fill)

        @rule(data=st.data())
        def new_request(self, data: st.DataObject) -> None:
            self.life.apply({"op": "new", "slot": data.draw(st.integers(0, self.life.slots - 1), label="slot")})

        @precondition(lambda self: bool(self.life.lives))
        @rule(data=st.data())
        def prefill_chunk(self, data: st.DataObject) -> None:
            self.life.apply(data.draw(prefill_op(self.life.spec, sorted(self.life.lives)), label="prefill"))

        @precondition(lambda self: bool(self.life.lives))
        @rule(data=st.data())
        def verify_step(self, data: st.DataObject) -> None:
            live = sorted(self.life.lives)
            self.life.apply(data.draw(decode_op(self.life.spec, live, self.life.qmax), label="decode"))

        @invariant()
        def ring_holds_what_the_model_keeps(self) -> None:
            self.life.check_rings()

    RequestLifeMachine.__name__ = RequestLifeMachine.__qualname__ = f"RequestLife[{impl.id}]"
    return RequestLifeMachine


@dataclass
class LifeOutcome:
    impl: str
    passed: bool
    seconds: float
    error: BaseException | None = None


def life_settings(max_examples: int, steps: int = 10, shrink: bool = True) -> settings:
    phases = list(Phase) if shrink else [Phase.explicit, Phase.generate]
    return settings(
        max_examples=max_examples,
        stateful_step_count=steps,
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=False,
        phases=phases,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


def run_request_life(
    impl: Implementation, max_examples: int = 30, steps: int = 10, shrink: bool = False
) -> LifeOutcome:
    """Run the state machine against ``impl``: passed, or the first failure (the smallest with ``shrink``)."""
    begin = time.perf_counter()
    try:
        run_state_machine_as_test(machine_for(impl), settings=life_settings(max_examples, steps, shrink))
    except Exception as err:  # any failure of the implementation, an assertion or an exception it raised
        return LifeOutcome(impl.id, False, time.perf_counter() - begin, err)
    return LifeOutcome(impl.id, True, time.perf_counter() - begin)
