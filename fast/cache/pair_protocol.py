"""The paired kernel's barrier protocol as plain sequences, and whether a producer order finishes or deadlocks.

    run(producer: list[Op], pairs: int) -> list[str]    (empty: every partition finished; else each one's stuck op)
    run_parts(persistent(items, row)) -> list[str]       (the same for a persistent program walking items)

A model of ``fast.cache.attention_pair`` for one (row, head block) item or a persistent program's items, written
from the kernel's code: each
partition is a list of ``("wait", barrier, round)`` and ``("arrive", barrier)`` operations; a wait passes once its
barrier has completed more than ``round`` phases (the kernel's parity ``round & 1`` reads the same while the
partitions stay within a phase of each other, which these barriers enforce); copies land at once (their landing
waits on nothing). ``run`` steps every partition that can move until none can. It checks orders of copies and
conversions for a producer before they are written in Gluon, where a deadlock hangs the GPU: the BF16 producer
and the FP8 one of ``_produce_row_fp8`` (``fp8_ordered``) finish; docs/cache-kernels.md derives which other
orders do. The steps that only take time are passed at once here; ``pair_timing`` times them. Halves are
numbered as the kernel's barriers: 0 a-left, 1 a-right, 2 b-left, 3 b-right (stage 2s + side).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Op = tuple[Any, ...]
"""``("wait", barrier, round)``, ``("arrive", barrier)``; and the steps that only take time (``pair_timing``), which
``run`` passes at once: ``("mma", what, handle)`` (a ``wgmma`` issued, ``handle`` naming it),
``("mma_wait", handle)``, ``("work", what)`` (CUDA-core work), ``("copy", tag, kind)`` (a half's ``cp.async``
copies issued), ``("arrive_landed", barrier, tag)`` (an arrival made by the copies ``tag`` as they land) and
``("landed", tag)`` (wait for them to land)."""

FILL_ORDER = (0, 3, 1, 2)
"""The stage halves in the order the consumers free them and the producer fills them: a-left, b-right, a-right,
b-left."""


def group0(pairs: int, g0: int = 0, item: int = 0, persistent: bool = False) -> list[Op]:
    """Group 0 on an item of ``pairs`` pairs, ``g0`` pairs of the ring before it, the program's ``item``-th:
    scores tile a (halves 0 and 1), frees a-left after p_a v_a and b-left after issuing the next pair's score;
    publishes m0 (sync 0) and p_a (sync 2), waits for m1 (sync 1) and p_b (sync 3). ``persistent``: it waits for
    the item's q (``q_ready``) and frees it (``q_empty0``) after its last score of the item."""
    q_free: list[Op] = [("arrive", "q_empty0")] if persistent else []
    ops: list[Op] = [("wait", "q_ready", item)] if persistent else []
    if pairs:
        ops += [("wait", "ready0", g0), ("mma", "score", "s"), ("wait", "ready1", g0), ("mma", "score", "s")]
        ops += [("mma_wait", "s"), *(q_free if pairs == 1 else [])]  # its last score of the item
    for j in range(g0, g0 + pairs):
        ops += [("work", "softmax"), ("arrive", "sync0"), ("work", "exp"), ("mma", "pv", "pv"), ("mma_wait", "pv")]
        ops += [("arrive", "empty0"), ("wait", "sync1", j), ("work", "rescale"), ("arrive", "sync2")]
        ops += [("wait", "sync3", j), ("mma", "pv", "pv")]
        if j + 1 < g0 + pairs:
            ops += [("wait", "ready0", j + 1), ("mma", "score", "s"), ("mma_wait", "pv"), ("arrive", "empty2")]
            ops += [("wait", "ready1", j + 1), ("mma", "score", "s"), ("mma_wait", "s")]
            ops += q_free if j + 2 == g0 + pairs else []
        else:
            ops += [("mma_wait", "pv"), ("arrive", "empty2")]
    return [*ops, ("arrive", "sync4"), ("wait", "sync5", item)]


def group1(pairs: int, g0: int = 0, item: int = 0, persistent: bool = False) -> list[Op]:
    """Group 1 (as ``group0``): scores tile b (halves 3 and 2), takes m0, publishes m1 and p_b, waits for p_a,
    then frees b-right and a-right."""
    ops: list[Op] = [("wait", "q_ready", item)] if persistent else []
    for j in range(g0, g0 + pairs):
        ops += [("wait", "ready3", j), ("mma", "score", "s"), ("wait", "ready2", j), ("mma", "score", "s")]
        ops += [("mma_wait", "s"), *([("arrive", "q_empty1")] if persistent and j + 1 == g0 + pairs else [])]
        ops += [("work", "softmax"), ("wait", "sync0", j), ("arrive", "sync1"), ("work", "exp")]
        ops += [("mma", "pv", "pb"), ("wait", "sync2", j), ("mma", "pv", "pa"), ("arrive", "sync3")]
        ops += [("mma_wait", "pb"), ("arrive", "empty3"), ("mma_wait", "pa"), ("arrive", "empty1")]
    return [*ops, ("arrive", "sync5"), ("wait", "sync4", item)]


def drained(group: int, pairs: int, g0: int = 0, item: int = 0, persistent: bool = False) -> list[Op]:
    """A group under timing probe 2 (``attention_pair._drain``): it waits for each half it frees and frees it
    (``persistent``: q freed first, then waited for)."""
    first, second = (0, 2) if group == 0 else (3, 1)
    ops: list[Op] = [("arrive", f"q_empty{group}"), ("wait", "q_ready", item)] if persistent else []
    for j in range(g0, g0 + pairs):
        ops += [("wait", f"ready{first}", j), ("arrive", f"empty{first}")]
        ops += [("wait", f"ready{second}", j), ("arrive", f"empty{second}")]
    return [*ops, ("arrive", f"sync{4 + group}"), ("wait", f"sync{5 - group}", item)]


def fill(half: int, pair: int) -> list[Op]:
    """Copy into ``half`` of ``pair``: wait until the consumers have freed it ``pair`` times."""
    return [("wait", f"empty{half}", pair - 1)] if pair else []


def ready(half: int) -> list[Op]:
    return [("arrive", f"ready{half}")]


def tag(half: int, pair: int) -> str:
    return f"{half}:{pair}"


def bf16_producer(pairs: int, g0: int = 0) -> list[Op]:
    """BF16 rows: each half's copies as soon as it is free; its ``ready`` completes when they land (pairs ``g0``
    on of the ring)."""
    return [
        op
        for j in range(g0, g0 + _pairs(pairs))
        for h in FILL_ORDER
        for op in [*fill(h, j), ("copy", tag(h, j), "bf16"), ("arrive_landed", f"ready{h}", tag(h, j))]
    ]


def copy_codes(half: int, pair: int) -> list[Op]:
    """Once ``half`` is free, its codes copied into it (the right half's: ``codes_right``, V4's with its RoPE
    values)."""
    return [*fill(half, pair), ("copy", tag(half, pair), "codes_right" if half % 2 else "codes_left")]


def convert(half: int, pair: int) -> list[Op]:
    """Once they have landed, ``half``'s codes converted in place; then it is ready."""
    side = "right" if half % 2 else "left"
    return [("landed", tag(half, pair)), ("work", f"convert_{side}"), *ready(half)]


def fp8_producer(pairs: int, ahead: tuple[int, int, int, int] = (1, 1, 1, 1), g0: int = 0) -> list[Op]:
    """FP8 codes copied into the half and converted there, in ``FILL_ORDER``: before converting the half at place k
    of a pair's ``FILL_ORDER``, the copies of every half up to ``ahead[k]`` places on are issued (the orders whose
    rule docs/cache-kernels.md derives; ``_produce_row_fp8``'s first form: one everywhere)."""
    if len(ahead) != 4 or any(isinstance(a, bool) or not isinstance(a, int) or a < 0 for a in ahead):
        raise ValueError(f"ahead: must be 4 non-negative ints, one a place of FILL_ORDER, got {ahead!r}")
    halves = [(h, j) for j in range(g0, g0 + _pairs(pairs)) for h in FILL_ORDER]
    ops: list[Op] = []
    issued = 0
    for u, (h, j) in enumerate(halves):
        while issued < min(len(halves), u + 1 + ahead[u % 4]):
            ops += copy_codes(*halves[issued])
            issued += 1
        ops += convert(h, j)
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
"""``attention_pair._produce_row_fp8``'s steps in pair j (the kernel takes them from here): the three halves the
consumers free at the pair boundary copied as soon as each is free (b-right, a-right, b-left), then converted,
a-right first (group 0's next score waits for it); then a-left of pair j + 1, which group 0 frees in the middle of
pair j, copied and converted before the producer waits for the next boundary. Pair 0's a-left comes first
(``FIRST``)."""
FIRST: tuple[Step, ...] = (("issue", 0, 0), ("convert", 0, 0))


def fp8_ordered(
    pairs: int, steps: tuple[Step, ...] = PAIR_ORDER, first: tuple[Step, ...] = FIRST, g0: int = 0
) -> list[Op]:
    """FP8 codes copied into each half and converted there, in ``first`` and then ``steps`` a pair (pairs ``g0``
    on of the ring); a step of a pair past the last is left out."""
    ops: list[Op] = []
    for j, each in [(0, first), *((j, steps) for j in range(_pairs(pairs)))]:
        for verb, half, on in each:
            if verb not in ("issue", "convert") or half not in range(4) or on not in (0, 1):
                raise ValueError(f"steps: must be (issue or convert, half 0-3, 0 or 1 pairs on), got {verb, half, on}")
            if j + on < pairs:
                ops += copy_codes(half, g0 + j + on) if verb == "issue" else convert(half, g0 + j + on)
    return ops


def signals_only(producer: list[Op]) -> list[Op]:
    """``producer`` under timing probe 1: it waits for each half to be free and signals it ready, copying
    nothing but an item's q."""
    q_tags = {op[1] for op in producer if op[0] == "copy" and op[2] == "q"}
    kept: list[Op] = []
    for op in producer:
        if (op[0] == "copy" and op[1] in q_tags) or (op[0] == "arrive_landed" and op[2] in q_tags):
            kept.append(op)
        elif op[0] == "arrive_landed":
            kept.append(("arrive", op[1]))
        elif op[0] in ("wait", "arrive"):
            kept.append(op)
    return kept


def _pairs(pairs: int) -> int:
    """``pairs`` if it is a count of pairs (ValueError naming it otherwise)."""
    if isinstance(pairs, bool) or not isinstance(pairs, int) or pairs < 0:
        raise ValueError(f"pairs: must be a non-negative int, got {pairs!r}")
    return pairs


def persistent(items: list[int], row: Callable[[int, int], list[Op]], drain: bool = False) -> dict[str, list[Op]]:
    """The partitions of one persistent program walking items of ``items[i]`` pairs: the producer copies item i's
    q once both groups have freed item i - 1's (``q_empty0``, ``q_empty1``), then runs ``row(pairs, g0)`` (a
    producer of this module, ``g0`` the ring's pairs before the item); ``drain``: the groups as timing probe 2
    has them."""
    parts: dict[str, list[Op]] = {"group 0": [], "group 1": [], "producer": []}
    g0 = 0
    for i, pairs in enumerate(items):
        if _pairs(pairs) == 0:
            raise ValueError("items: a persistent program's items have at least one pair (a call with no lanes runs "
                             f"one program an item), got {items!r}")  # fmt: skip
        for g, make in enumerate((group0, group1)):
            parts[f"group {g}"] += drained(g, pairs, g0, i, True) if drain else make(pairs, g0, i, True)
        waits: list[Op] = [("wait", "q_empty0", i - 1), ("wait", "q_empty1", i - 1)] if i else []
        parts["producer"] += [*waits, ("copy", f"q{i}", "q"), ("arrive_landed", "q_ready", f"q{i}"), *row(pairs, g0)]
        g0 += pairs
    return parts


def run(producer: list[Op], pairs: int) -> list[str]:
    """Step the two groups and ``producer`` on one item until none can move; each unfinished partition's stuck
    operation."""
    return run_parts({"group 0": group0(_pairs(pairs)), "group 1": group1(pairs), "producer": producer})


def run_parts(parts: dict[str, list[Op]]) -> list[str]:
    """Step every partition of ``parts`` until none can move; each unfinished one's stuck operation."""
    at = dict.fromkeys(parts, 0)
    done: dict[str, int] = {}
    moved = True
    while moved:
        moved = False
        for name, ops in parts.items():
            while at[name] < len(ops):
                op = ops[at[name]]
                if op[0] == "wait" and done.get(op[1], 0) <= op[2]:
                    break
                if op[0] in ("arrive", "arrive_landed"):  # copies land at once here
                    done[op[1]] = done.get(op[1], 0) + 1
                at[name] += 1
                moved = True
    return [f"{name}: {ops[at[name]]}" for name, ops in parts.items() if at[name] < len(ops)]
