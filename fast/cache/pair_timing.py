"""How long a program of the paired kernel takes, from what each of its steps costs: a discrete-event model of
``fast.cache.pair_protocol``'s sequences, to compare producer orders and designs before they are written in Gluon.

    simulate(parts: dict[str, list[Op]], costs: Costs) -> float        (us, when the last partition ends)
    program_time(row, items, costs, probe=0) -> float                  (a persistent program, or a timing probe)

The model, each point a simplification:

1. Each partition runs its operations in order; ``("work", what)`` takes ``costs.work[what]`` us.
2. The two consumer groups share one tensor pipe: an ``("mma", what, handle)`` starts once its group has issued it
   and the pipe is free, and holds the pipe ``costs.mma[what]`` us; the group goes on at once, and
   ``("mma_wait", handle)`` waits for its end. A work step named in ``costs.pipe_share`` holds the pipe for that
   share of its length as well (its shared-memory traffic delaying the MMAs), without waiting for it.
3. Copies share one channel to memory, the SM's share of the bandwidth: a ``("copy", tag, kind)`` of
   ``costs.bytes[kind]`` bytes starts once issued and the channel is free, holds it ``bytes / costs.bandwidth``
   us and lands ``costs.latency`` us after; issuing takes the producer ``costs.issue`` us a byte.
4. A barrier's k-th phase completes at its k-th arrival (each barrier has one arriving partition); a wait passes
   at the later of its partition's time and that completion.
5. Nothing else is shared: CUDA-core work of different partitions overlaps fully; what a program spends outside
   these steps (its launch, its epilogue) is ``costs.item`` us, once.

Events are taken in time order (the partition that can move with the earliest clock moves first), so the tensor
pipe and the memory channel serve their requests in the order they are made. ``H100_B64_H64`` holds costs
fitted to the timing probes of one H100 (docs/targets.md, section 2, says how well it reproduces them).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from fast.cache import pair_protocol as protocol
from fast.cache.pair_protocol import Op


@dataclasses.dataclass(frozen=True)
class Costs:
    """What each step takes, in us (bandwidth in bytes a us, issue in us a byte)."""

    mma: dict[str, float]
    work: dict[str, float]
    bytes: dict[str, int]
    bandwidth: float
    latency: float
    issue: float = 0.0
    item: float = 0.0
    pipe_share: dict[str, float] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        named = {**{f"mma[{k!r}]": v for k, v in self.mma.items()}, **{f"work[{k!r}]": v for k, v in self.work.items()},
                 **{f"bytes[{k!r}]": v for k, v in self.bytes.items()}, "latency": self.latency, "issue": self.issue,
                 "item": self.item}  # fmt: skip
        for name, value in named.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
                raise ValueError(f"costs: {name} must be a finite number at least 0, got {value!r}")
        if isinstance(self.bandwidth, bool) or not isinstance(self.bandwidth, int | float) or not self.bandwidth > 0:
            raise ValueError(f"costs: bandwidth must be a number over 0, got {self.bandwidth!r}")
        for what, share in self.pipe_share.items():
            if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share <= 1:
                raise ValueError(f"costs: pipe_share[{what!r}] must be a number in [0, 1], got {share!r}")


def simulate(parts: dict[str, list[Op]], costs: Costs) -> float:
    """When the last of ``parts`` ends (us from the item's start, ``costs.item`` added); a ValueError naming each
    stuck partition's operation if they deadlock."""
    clock = dict.fromkeys(parts, 0.0)
    at = dict.fromkeys(parts, 0)
    phases: dict[str, list[float]] = {}
    landed: dict[str, float] = {}
    mma_end: dict[tuple[str, str], float] = {}
    pipe = channel = 0.0
    while True:
        movable = [name for name, ops in parts.items() if at[name] < len(ops) and _ready(ops[at[name]], phases)]
        if not movable:
            break
        name = min(movable, key=lambda n: clock[n])
        op, t = parts[name][at[name]], clock[name]
        kind = op[0]
        if kind == "wait":
            t = max(t, phases[op[1]][int(op[2])])
        elif kind == "arrive":
            phases.setdefault(op[1], []).append(t)
        elif kind == "work":
            share = costs.pipe_share.get(op[1], 0.0) * costs.work[op[1]]
            if share:  # this work's shared-memory traffic delays the MMAs by this much
                pipe = max(t, pipe) + share
            t += costs.work[op[1]]
        elif kind == "mma":
            pipe = max(t, pipe) + costs.mma[op[1]]
            mma_end[name, str(op[2])] = pipe
        elif kind == "mma_wait":
            t = max(t, _issued(mma_end, (name, op[1]), name, "an MMA"))
        elif kind == "copy":
            size = costs.bytes[str(op[2])]
            t += size * costs.issue
            channel = max(t, channel) + size / costs.bandwidth
            landed[op[1]] = channel + costs.latency
        elif kind == "arrive_landed":
            phases.setdefault(op[1], []).append(_issued(landed, str(op[2]), name, "copies"))
        elif kind == "landed":
            t = max(t, _issued(landed, op[1], name, "copies"))
        else:
            raise ValueError(f"parts: {name} has an operation of no known kind: {op!r}")
        clock[name] = t
        at[name] += 1
    stuck = [f"{name}: {ops[at[name]]}" for name, ops in parts.items() if at[name] < len(ops)]
    if stuck:
        raise ValueError(f"parts: deadlocked ({'; '.join(stuck)})")
    return max(clock.values(), default=0.0) + costs.item


def _issued(ends: dict[Any, float], key: Any, name: str, what: str) -> float:
    """When the step ``key`` names ends; a ValueError if ``name`` waits for one not issued before it."""
    if key not in ends:
        raise ValueError(f"parts: {name} waits for {what} it has not issued: {key!r}")
    return ends[key]


def _ready(op: Op, phases: dict[str, list[float]]) -> bool:
    """Whether ``op`` can be taken now: a wait once its phase has completed (the copies an operation names are
    always issued before it in its partition)."""
    return op[0] != "wait" or len(phases.get(op[1], [])) > int(op[2])


PROBES = {0: "the whole kernel", 1: "the consumers alone", 2: "the producer alone"}
ROWS = {
    "bf16": protocol.bf16_producer,
    "fp8 first order": lambda pairs, g0: protocol.fp8_producer(pairs, g0=g0),
    "fp8 boundary order": lambda pairs, g0: protocol.fp8_ordered(pairs, g0=g0),
}
"""The producers a program's rows can run, by name: ``row(pairs, g0)``."""


def program_time(row: str, items: list[int], costs: Costs, probe: int = 0) -> float:
    """One persistent program walking ``items`` (each its count of pairs) with the producer ``ROWS[row]``, or
    under one of ``attention_pair.PROBES``: 1 the producer copies nothing and signals each half in the BF16
    producer's order whatever ``row`` is (the kernel's probe 1 runs ``_produce_row``), 2 the consumers only wait
    for and free each half."""
    if probe not in PROBES:
        raise ValueError(f"probe: must be one of {sorted(PROBES)}, got {probe!r}")
    if row not in ROWS:
        raise ValueError(f"row: must be one of {sorted(ROWS)}, got {row!r}")
    make = ROWS["bf16"] if probe == 1 else ROWS[row]
    parts = protocol.persistent(items, make, drain=probe == 2)
    if probe == 1:
        parts["producer"] = protocol.signals_only(parts["producer"])
    return simulate(parts, costs)


KB = 1024
H100_ONE_ITEM = [
    ("bf16", 0, 113.6), ("bf16", 1, 75.6), ("bf16", 2, 109.1),
    ("fp8 first order", 0, 166.5), ("fp8 first order", 2, 111.7),
    ("fp8 boundary order", 0, 152.7), ("fp8 boundary order", 1, 75.0), ("fp8 boundary order", 2, 123.1),
]  # fmt: skip
"""Medians of one H100 (us) at b 64, h 64, V4 (one item of 16 pairs a program), (row, probe, us):
``results/sweeps/probes_edf24fb_h100.md`` (the first order) and ``probes_0cbe0d7_h100.md`` (the boundary order
and BF16 rows)."""
H100_TWO_ITEMS = [
    ("bf16", 0, 213.9), ("bf16", 1, 142.1), ("bf16", 2, 206.1),
    ("fp8 first order", 0, 314.7), ("fp8 first order", 1, 141.6), ("fp8 first order", 2, 207.9),
    ("fp8 boundary order", 0, 288.3), ("fp8 boundary order", 1, 140.5), ("fp8 boundary order", 2, 227.6),
]  # fmt: skip
"""The same at b 128, h 64 (two items a program): ``probes_a59f5a9_h100.md`` (BF16 rows),
``probes_edf24fb_h100.md`` and ``probes_0cbe0d7_h100.md``."""

H100_B64_H64 = Costs(
    mma={"score": 0.559, "pv": 0.559},
    work={"softmax": 0.373, "exp": 0.005, "rescale": 0.0, "convert_left": 0.937, "convert_right": 0.703},
    bytes={"bf16": 32 * KB, "codes_left": 16 * KB + 512, "codes_right": 20 * KB, "q": 64 * KB},
    bandwidth=290_000.0,
    latency=0.371,
    issue=4.95e-5,
    pipe_share={"convert_left": 1.0, "convert_right": 1.0},
)
"""Costs fitted to ``H100_ONE_ITEM`` (least relative squares; ``python scripts/fit_pair_timing.py`` refits them):
a score half and a p v product 0.56 us each on the tensor pipe; a V4 half's conversion 0.94 us (its right half 3/4
of that), holding the pipe for all of it (``pipe_share`` 1: fitted, not assumed; refitted with it at 0, the error
is 5.3% RMS against 1.5%); copies issued at 50 us a MB by the producer, landing 0.37 us after. The data leave the
bandwidth free (no program here waits on its share of DRAM: the fit sets it past every copy's need). Two items a
program (b 128, h 64, ``H100_TWO_ITEMS``) it overestimates all nine probes by 3-11%."""
