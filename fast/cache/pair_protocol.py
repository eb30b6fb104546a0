"""The paired kernel's barrier protocol as plain sequences, and whether a producer order finishes or deadlocks.

    run(producer: list[Op], pairs: int) -> list[str]    (empty: every partition finished; else each one's stuck op)

A model of ``fast.cache.attention_pair`` for one (row, head block) item, written from the kernel's code: each
partition is a list of ``("wait", barrier, round)`` and ``("arrive", barrier)`` operations; a wait passes once its
barrier has completed more than ``round`` phases (the kernel's parity ``round & 1`` reads the same while the
partitions stay within a phase of each other, which these barriers enforce); copies land at once (their landing
waits on nothing). ``run`` steps every partition that can move until none can. It checks orders of copies and
conversions for a producer before they are written in Gluon, where a deadlock hangs the GPU: the BF16 producer
and the FP8 one of ``_produce_row_fp8`` (``fp8_ordered``) finish; docs/cache-kernels.md derives which other
orders do. Halves are
numbered as the kernel's barriers: 0 a-left, 1 a-right, 2 b-left, 3 b-right (stage 2s + side).
"""

from __future__ import annotations

Op = tuple[str, str, int] | tuple[str, str]

FILL_ORDER = (0, 3, 1, 2)
"""The stage halves in the order the consumers free them and the producer fills them: a-left, b-right, a-right,
b-left."""


def group0(pairs: int) -> list[Op]:
    """Group 0: scores tile a (halves 0 and 1), frees a-left after p_a v_a and b-left after issuing the next
    pair's score; publishes m0 (sync 0) and p_a (sync 2), waits for m1 (sync 1) and p_b (sync 3)."""
    ops: list[Op] = [("wait", "ready0", 0), ("wait", "ready1", 0)] if pairs else []
    for j in range(pairs):
        ops += [("arrive", "sync0"), ("arrive", "empty0"), ("wait", "sync1", j), ("arrive", "sync2")]
        ops += [("wait", "sync3", j)]
        if j + 1 < pairs:
            ops += [("wait", "ready0", j + 1), ("arrive", "empty2"), ("wait", "ready1", j + 1)]
        else:
            ops += [("arrive", "empty2")]
    return [*ops, ("arrive", "sync4"), ("wait", "sync5", 0)]


def group1(pairs: int) -> list[Op]:
    """Group 1: scores tile b (halves 3 and 2), takes m0, publishes m1 and p_b, waits for p_a, then frees b-right
    and a-right."""
    ops: list[Op] = []
    for j in range(pairs):
        ops += [("wait", "ready3", j), ("wait", "ready2", j), ("wait", "sync0", j), ("arrive", "sync1")]
        ops += [("wait", "sync2", j), ("arrive", "sync3"), ("arrive", "empty3"), ("arrive", "empty1")]
    return [*ops, ("arrive", "sync5"), ("wait", "sync4", 0)]


def fill(half: int, pair: int) -> list[Op]:
    """Copy into ``half`` of ``pair``: wait until the consumers have freed it ``pair`` times."""
    return [("wait", f"empty{half}", pair - 1)] if pair else []


def ready(half: int) -> list[Op]:
    return [("arrive", f"ready{half}")]


def bf16_producer(pairs: int) -> list[Op]:
    """BF16 rows: each half's copies as soon as it is free; its ``ready`` completes when they land."""
    return [op for j in range(_pairs(pairs)) for h in FILL_ORDER for op in fill(h, j) + ready(h)]


def fp8_producer(pairs: int, ahead: tuple[int, int, int, int] = (1, 1, 1, 1)) -> list[Op]:
    """FP8 codes copied into the half and converted there, in ``FILL_ORDER``: before converting the half at place k
    of a pair's ``FILL_ORDER``, the copies of every half up to ``ahead[k]`` places on are issued (the orders whose
    rule docs/cache-kernels.md derives)."""
    if len(ahead) != 4 or any(isinstance(a, bool) or not isinstance(a, int) or a < 0 for a in ahead):
        raise ValueError(f"ahead: must be 4 non-negative ints, one a place of FILL_ORDER, got {ahead!r}")
    halves = [(h, j) for j in range(_pairs(pairs)) for h in FILL_ORDER]
    ops: list[Op] = []
    issued = 0
    for u, (h, _) in enumerate(halves):
        while issued < min(len(halves), u + 1 + ahead[u % 4]):
            ops += fill(*halves[issued])
            issued += 1
        ops += ready(h)
    return ops


Step = tuple[str, int, int]
"""``("issue" | "convert", half, pairs on)``: copy a half's codes into it (once it is free), or convert them there
(its ``ready``), of the pair ``pairs on`` from the one the step belongs to."""

PAIR_ORDER: tuple[Step, ...] = (
    ("issue", 3, 0),
    ("issue", 1, 0),
    ("issue", 2, 0),
    ("convert", 1, 0),
    ("convert", 3, 0),
    ("convert", 2, 0),
    ("issue", 0, 1),
    ("convert", 0, 1),
)
"""``_produce_row_fp8``'s steps in pair j: the three halves the consumers free at the pair's boundary copied as
soon as each is free (b-right, a-right, b-left), then converted, a-right first (group 0's next score waits for it);
then a-left of pair j + 1, which group 0 frees in the middle of pair j, copied and converted before the producer
waits for the next boundary. Pair 0's a-left comes first (``FIRST``)."""
FIRST: tuple[Step, ...] = (("issue", 0, 0), ("convert", 0, 0))


def fp8_ordered(pairs: int, steps: tuple[Step, ...] = PAIR_ORDER, first: tuple[Step, ...] = FIRST) -> list[Op]:
    """FP8 codes copied into each half and converted there, in ``first`` and then ``steps`` a pair; a step of a
    pair past the last is left out."""
    ops: list[Op] = []
    for j, each in [(0, first), *((j, steps) for j in range(_pairs(pairs)))]:
        for verb, half, on in each:
            if verb not in ("issue", "convert") or half not in range(4) or on not in (0, 1):
                raise ValueError(f"steps: must be (issue or convert, half 0-3, 0 or 1 pairs on), got {verb, half, on}")
            if j + on < pairs:
                ops += fill(half, j + on) if verb == "issue" else ready(half)
    return ops


def _pairs(pairs: int) -> int:
    """``pairs`` if it is a count of pairs (ValueError naming it otherwise)."""
    if isinstance(pairs, bool) or not isinstance(pairs, int) or pairs < 0:
        raise ValueError(f"pairs: must be a non-negative int, got {pairs!r}")
    return pairs


def run(producer: list[Op], pairs: int) -> list[str]:
    """Step the two groups and ``producer`` until none can move; each unfinished partition's stuck operation."""
    parts = {"group 0": group0(_pairs(pairs)), "group 1": group1(pairs), "producer": producer}
    at = dict.fromkeys(parts, 0)
    done: dict[str, int] = {}
    moved = True
    while moved:
        moved = False
        for name, ops in parts.items():
            while at[name] < len(ops):
                op = ops[at[name]]
                if op[0] == "wait" and done.get(op[1], 0) <= op[2]:  # type: ignore[misc]
                    break
                if op[0] == "arrive":
                    done[op[1]] = done.get(op[1], 0) + 1
                at[name] += 1
                moved = True
    return [f"{name}: {ops[at[name]]}" for name, ops in parts.items() if at[name] < len(ops)]
