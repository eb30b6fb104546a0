"""``fast.cache.pair_timing``: the event order of its simulation, its shared tensor pipe and memory channel, and
the H100 costs against the probes they were fitted to and two-item programs they were not."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from fast.cache import pair_protocol as protocol
from fast.cache import pair_timing as timing

ONLY = timing.Costs(mma={"score": 0.0, "pv": 0.0}, work={}, bytes={"q": 0, "bf16": 0}, bandwidth=1.0, latency=0.0)


def _work(**named: float) -> dict[str, float]:
    return {k: named.get(k, 0.0) for k in ("softmax", "exp", "rescale", "convert_left", "convert_right")}


@pytest.mark.parametrize("pairs", [1, 2, 5])
def test_the_consumers_alone_are_bound_by_the_one_tensor_pipe(pairs: int) -> None:
    """Only MMAs cost (1 us each): a pair is 8 of them on the one pipe (each group's two score halves and two p v
    products), and nothing else delays them, so the program takes 8 us a pair."""
    costs = dataclasses.replace(ONLY, mma={"score": 1.0, "pv": 1.0}, work=_work())
    assert timing.program_time("bf16", [pairs], costs, probe=1) == 8 * pairs


@pytest.mark.parametrize("items", [[1], [3], [2, 3]])
def test_the_producer_alone_is_bound_by_the_memory_channel(items: list[int]) -> None:
    """Only copies cost: the channel carries each item's q (1 us) and 4 halves a pair (2 us each) one after the
    other, and the last lands ``latency`` later."""
    costs = dataclasses.replace(ONLY, work=_work(), bytes={"q": 1, "bf16": 2}, latency=0.5)
    assert timing.program_time("bf16", items, costs, probe=2) == sum(1 + 8 * n for n in items) + 0.5


def test_a_conversion_that_holds_the_pipe_delays_the_mmas_by_its_length() -> None:
    costs = dataclasses.replace(ONLY, mma={"score": 1.0, "pv": 1.0}, work=_work(convert_left=0.5, convert_right=0.5),
                                bytes={"q": 0, "codes_left": 0, "codes_right": 0})  # fmt: skip
    beside = timing.program_time("fp8 boundary order", [2], costs)
    holding = dataclasses.replace(costs, pipe_share={"convert_left": 1.0, "convert_right": 1.0})
    assert timing.program_time("fp8 boundary order", [2], holding) > beside >= 16


def test_a_deadlocked_order_is_named_not_timed() -> None:
    steps = list(protocol.PAIR_ORDER)
    steps.insert(3, steps.pop(steps.index(("issue", 0, 1))))
    parts = {
        "group 0": protocol.group0(3),
        "group 1": protocol.group1(3),
        "producer": protocol.fp8_ordered(3, tuple(steps)),
    }
    stuck = protocol.run_parts(parts)
    assert stuck
    with pytest.raises(ValueError, match=r"^parts: deadlocked") as err:
        timing.simulate(parts, timing.H100_B64_H64)
    assert all(s in str(err.value) for s in stuck)


@pytest.mark.parametrize(
    ("ops", "what"), [([("mma_wait", "s")], "an MMA"), ([("landed", "0:0")], "copies"), ([("fly",)], "no known kind")]
)
def test_an_order_that_waits_for_what_it_never_issued_is_refused(ops: list[protocol.Op], what: str) -> None:
    with pytest.raises(ValueError, match=f"^parts: producer .*{what}"):
        timing.simulate({"producer": ops}, timing.H100_B64_H64)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (dict(latency=-1.0), "latency"),
        (dict(work={"convert_left": float("nan")}), "work['convert_left']"),
        (dict(bandwidth=0.0), "bandwidth"),
        (dict(pipe_share={"convert_left": 1.5}), "pipe_share['convert_left']"),
    ],
)
def test_costs_out_of_their_range_are_refused_by_name(change: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=f"^costs: {re.escape(named)} must be"):
        dataclasses.replace(timing.H100_B64_H64, **change)


def test_bad_names_are_refused() -> None:
    with pytest.raises(ValueError, match=r"^probe: must be one of \[0, 1, 2\]"):
        timing.program_time("bf16", [1], timing.H100_B64_H64, probe=3)
    with pytest.raises(ValueError, match=r"^row: must be one of"):
        timing.program_time("fp4", [1], timing.H100_B64_H64)
    with pytest.raises(ValueError, match=r"^items: a persistent program's items have at least one pair"):
        timing.program_time("bf16", [2, 0], timing.H100_B64_H64)


@pytest.mark.parametrize(("row", "probe", "measured"), timing.H100_ONE_ITEM)
def test_the_h100_costs_reproduce_the_probes_they_were_fitted_to(row: str, probe: int, measured: float) -> None:
    assert timing.program_time(row, [16], timing.H100_B64_H64, probe) == pytest.approx(measured, rel=0.04)


@pytest.mark.parametrize(("row", "probe", "measured"), timing.H100_TWO_ITEMS)
def test_the_h100_costs_overestimate_two_item_programs_by_at_most_a_ninth(
    row: str, probe: int, measured: float
) -> None:
    """Out of the fit: the same costs on two items a program, each probe within 12% over its measured median."""
    assert 1.0 <= timing.program_time(row, [16, 16], timing.H100_B64_H64, probe) / measured <= 1.12
