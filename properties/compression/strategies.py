"""Hypothesis strategies for compression: layer specs, positions on grids, chunk partitions, batches of
requests, decode / verify / accept / rollback schedules and whole request lives.

Every example is plain data (dicts, lists, ints, floats including nan and inf) so a reproducer can ``repr``
it. Scores, latents and APE entries are multiples of 1/4 in small ranges: exact in float32 and bfloat16, and
``score + ape`` is exact too, so a structural bug shows as a gross error, never as rounding.

The ring size is not drawn absolutely: an example holds ``ring_extra`` and the check adds it to the safe size
of the implementation's declared discipline (``properties.compression.call.safe_ring``), so one example serves
both disciplines; half of the draws sit exactly at the minimum.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from hypothesis import strategies as st

from properties.compression.exact import LayerSpec, channels, window
from properties.strategies import garbage, grid_values, partitions

DENOMINATOR = 4
SCORE_BOUND, LATENT_BOUND, APE_BOUND = 4, 8, 2
SCORES = grid_values(-SCORE_BOUND, SCORE_BOUND, DENOMINATOR)
RATIOS = (2, 1, 3, 4, 4, 8, 4, 128)
"""Drawn uniformly by place: the first 4 is without overlap, every later 4 with (V4), so a quarter of the
layers overlap. The first place is where shrinking goes."""
LIFE_RATIOS = (2, 1, 3, 4, 4, 8, 4)
FRESH_RATIOS = (4, 4, 2, 4, 1, 3, 4, 8)
"""For requests starting at 0: more overlap, the only layout whose first row reaches before position 0."""
LONG = 64
"""Ratios from here on get d = 1 and sequences near their group boundaries only."""
MAX_QMAX = 16
"""Most positions of one verify step: engines run 5 to 8 drafts and more (one wrote only the first 4 of D > 4
drafts to the ring)."""
PERIOD_MAX = 7
"""Long ratios draw APE rows and positions as a pattern of at most this many, repeated."""
RING_EXTRA = st.sampled_from([1, 0, 3, 0])
"""Slots beyond the safe size. Hypothesis draws the first choices of a strategy most often, so the order puts
the interesting cases first: a ring one larger than the minimum (where rollback-sensitive writes show)."""
RING_EXTRA_LIFE = st.sampled_from([0, 1])
QMAX = st.one_of(st.integers(2, 4), st.just(1), st.integers(5, MAX_QMAX))
"""Most positions per decode call: multi-position verify steps first, a third of them past 4 (up to
``MAX_QMAX``)."""


def step_sizes(qmax: int) -> st.SearchStrategy[int]:
    """New positions of one step: often the whole ``qmax`` (where discipline and ring size matter)."""
    return st.one_of(st.just(qmax), st.integers(1, qmax))


@cache
def grid_vectors(width: int, bound: int) -> st.SearchStrategy[list[float]]:
    """``width`` multiples of 1/4 in ``[-bound, bound]`` (one small integer choice each, mapped 0, 1/4, -1/4,
    2/4, ... so that shrinking goes towards 0)."""
    top = 2 * bound * DENOMINATOR

    def values(digits: tuple[int, ...]) -> list[float]:
        return [((k + 1) // 2 if k % 2 else -(k // 2)) / DENOMINATOR for k in digits]

    return st.tuples(*[st.integers(0, top)] * width).map(values)


@st.composite
def layer_specs(draw: st.DrawFn, ratios: tuple[int, ...] = RATIOS, max_dim: int = 4) -> LayerSpec:
    """``{"ratio", "dim", "overlap", "ape"}``: overlap only for ratio 4; d = 1 for long ratios, d <= 2 for 8
    and with overlap. A long ratio's APE table repeats 2 to ``PERIOD_MAX`` drawn rows."""
    kind = draw(st.sampled_from(list(enumerate(ratios))))
    ratio = kind[1]
    overlap = ratio == 4 and kind[0] != ratios.index(4)
    dim = 1 if ratio >= LONG else draw(st.integers(1, 2 if ratio >= 8 or overlap else max_dim))
    width = dim * (2 if overlap else 1)
    row = grid_vectors(width, APE_BOUND)
    rows = min(ratio, PERIOD_MAX) if ratio >= LONG else ratio
    table = st.lists(row, min_size=2 if ratio >= LONG else rows, max_size=rows)
    ape = draw(st.none() | table.map(lambda t: [t[i % len(t)] for i in range(ratio)]))
    return {"ratio": ratio, "dim": dim, "overlap": overlap, "ape": ape}


def positions(spec: LayerSpec, n: int) -> st.SearchStrategy[list[list[list[float]]]]:
    """``n`` positions ``[scores, latents]`` on the grids; for long ratios a drawn pattern of 2 to
    ``PERIOD_MAX`` positions repeated (every position still differs from its neighbours)."""
    return _positions(channels(spec), n, int(spec["ratio"]) >= LONG and n > PERIOD_MAX)


@cache
def _positions(c: int, n: int, repeated: bool) -> st.SearchStrategy[list[list[list[float]]]]:
    one = st.tuples(grid_vectors(c, SCORE_BOUND), grid_vectors(c, LATENT_BOUND)).map(list)
    if not repeated:
        return st.lists(one, min_size=n, max_size=n)
    pattern = st.lists(one, min_size=2, max_size=PERIOD_MAX, unique_by=str)
    return pattern.map(lambda items: [items[i % len(items)] for i in range(n)])


def sequence_lengths(spec: LayerSpec) -> st.SearchStrategy[int]:
    """Up to about two groups past the window; near the boundaries for long ratios."""
    r, w = int(spec["ratio"]), window(spec)
    if r >= LONG:
        return st.sampled_from([r - 1, r, r + 1, 2 * r - 1, 2 * r, 2 * r + 1]) | st.integers(1, 4)
    return st.integers(1, w + 2 * r + 1)


def starts(spec: LayerSpec, qmax: int) -> st.SearchStrategy[int]:
    """First positions of a decode request: anywhere small, or just before a group boundary."""
    r, w = int(spec["ratio"]), window(spec)
    near = st.builds(lambda k, u: max(0, k * r - u), st.integers(1, 2), st.integers(0, w + qmax))
    return near if r >= LONG else st.integers(0, w + 2 * r) | near


def leftovers() -> st.SearchStrategy[dict[str, Any]]:
    """Leftover positions of an earlier request, grid values mixed with garbage, cycled over the ring
    slots."""
    value = SCORES | garbage()
    one = st.tuples(st.lists(value, min_size=1, max_size=1), st.lists(value, min_size=1, max_size=1))
    items = st.lists(one, min_size=1, max_size=5).map(lambda pairs: [[s, v] for s, v in pairs])
    return st.fixed_dictionaries({"leftover": items})


def fills() -> st.SearchStrategy[Any]:
    """What the ring holds before the first call: one garbage value everywhere (NaN, +-inf, huge), or
    leftovers."""
    return garbage() | leftovers()


def _slots(draw: st.DrawFn, requests: int) -> tuple[int, list[int]]:
    """A state tensor of N >= B slots (some left to no request) and a distinct slot per request."""
    count = draw(st.integers(requests, requests + 2))
    return count, draw(st.permutations(range(count)))[:requests]


def _batch(
    draw: st.DrawFn, spec: LayerSpec, slot_count: int, requests: list[dict[str, Any]], fresh: bool
) -> dict[str, Any]:
    """A batch of ``requests`` over ``slot_count`` state slots: the ring's extra size and fill are drawn here."""
    return {
        "layer": spec,
        "ring_extra": draw(RING_EXTRA),
        "slots": slot_count,
        "fill": draw(leftovers() if fresh else fills()),
        "requests": requests,
    }


@st.composite
def prefill_batches(
    draw: st.DrawFn, specs: st.SearchStrategy[LayerSpec] | None = None, fresh: bool = False
) -> dict[str, Any]:
    """Several requests of different lengths, each cut into chunks (``cuts``: 0 = c0 < ... < ck = n) and
    joining the packed calls ``delay`` calls late. Call ``i`` carries chunk ``i - delay`` of every request
    that has one. ``fresh``: at least one window per request, over leftovers."""
    spec = draw(specs if specs is not None else layer_specs())
    count = draw(st.integers(1, 1 if int(spec["ratio"]) >= LONG else 3))
    slot_count, slots = _slots(draw, count)
    requests = []
    for slot in slots:
        n = max(draw(sequence_lengths(spec)), window(spec) if fresh else 1)
        requests.append(
            {
                "slot": slot,
                "positions": draw(positions(spec, n)),
                "cuts": draw(partitions(n, max_parts=4)),
                "delay": draw(st.integers(0, 2)),
            }
        )
    return _batch(draw, spec, slot_count, requests, fresh)


@st.composite
def decode_batches(
    draw: st.DrawFn, specs: st.SearchStrategy[LayerSpec] | None = None, fresh: bool = False
) -> dict[str, Any]:
    """Several requests, each from its own ``start`` through ``steps`` (new positions per call, 1..qmax).

    ``positions`` holds positions ``first .. end - 1`` with ``first = max(0, start - (W - 1))``: the history a
    row can still read; older positions are zeros (read by nothing). Before the first call the ring holds the
    newest history positions that fit, every other entry the fill. ``fresh``: every request from position 0
    through at least one window, over leftovers.
    """
    spec = draw(specs if specs is not None else layer_specs())
    w = window(spec)
    qmax = draw(QMAX)
    count = draw(st.integers(1, 1 if int(spec["ratio"]) >= LONG else 3))
    slot_count, slots = _slots(draw, count)
    requests = []
    for slot in slots:
        start = 0 if fresh else draw(starts(spec, qmax))
        least = -(-w // qmax) if fresh else 1
        steps = draw(st.lists(step_sizes(qmax), min_size=least, max_size=max(4, least)))
        first = max(0, start - (w - 1))
        requests.append(
            {
                "slot": slot,
                "start": start,
                "first": first,
                "positions": draw(positions(spec, start + sum(steps) - first)),
                "steps": steps,
                "delay": draw(st.integers(0, 2)),
            }
        )
    return _batch(draw, spec, slot_count, requests, fresh)


def fresh_prefill_batches() -> st.SearchStrategy[dict[str, Any]]:
    """Requests starting at position 0 (as every prefill batch does) over a ring of leftovers, at least one
    window long, more often with overlap: a new request reusing state slots that an earlier one filled."""
    return prefill_batches(layer_specs(ratios=FRESH_RATIOS), fresh=True)


def fresh_decode_batches() -> st.SearchStrategy[dict[str, Any]]:
    """Decode from position 0 over a ring of leftovers, through at least one window."""
    return decode_batches(layer_specs(ratios=FRESH_RATIOS), fresh=True)


BAD_INPUTS = (
    "ring_short",
    "score_dtype",
    "score_noncontiguous",
    "latent_shape",
    "state_channels",
    "state_dtype",
    "cu_seqlens_start",
    "cu_seqlens_end",
    "cu_seqlens_dtype",
    "start_negative",
    "state_index_range",
    "state_index_negative",
    "state_index_duplicate",
    "ape_shape",
    "overlap_without_ratio_4",
    "ratio_zero",
    "ratio_float",
)


@st.composite
def bad_calls(draw: st.DrawFn) -> dict[str, Any]:
    """A valid single call (``requests``: slot, start, new positions) and one fault from ``BAD_INPUTS`` that
    makes it invalid. A fault that cannot apply to the drawn call (a duplicate slot with one request, a short
    ring where the safe size is 0) is replaced by ``ring_short`` or ``score_dtype``."""
    spec = draw(layer_specs(ratios=LIFE_RATIOS))
    qmax = draw(QMAX)
    count = draw(st.integers(1, 2))
    slot_count, slots = _slots(draw, count)
    requests = [
        {
            "slot": k,
            "start": draw(starts(spec, qmax)),
            "positions": draw(positions(spec, draw(step_sizes(qmax)))),
        }
        for k in slots
    ]
    return {
        "layer": spec,
        "ring_extra": draw(st.sampled_from([0, 1])),
        "slots": slot_count,
        "fill": draw(garbage()),
        "requests": requests,
        "fault": draw(st.sampled_from(BAD_INPUTS)),
    }


def prefill_op(spec: LayerSpec, live: list[int]) -> st.SearchStrategy[dict[str, Any]]:
    """One prefill call: a chunk of up to ``W + r + 1`` positions (often at most ``r``: placeholders) for some
    live requests."""
    longest = window(spec) + int(spec["ratio"]) + 1

    @st.composite
    def op(draw: st.DrawFn) -> dict[str, Any]:
        chosen = draw(st.lists(st.sampled_from(live), min_size=1, max_size=len(live), unique=True))
        lengths = st.integers(1, int(spec["ratio"])) | st.integers(1, longest)
        calls = [{"slot": k, "positions": draw(positions(spec, draw(lengths)))} for k in chosen]
        return {"op": "prefill", "calls": calls}

    return op()


def decode_op(spec: LayerSpec, live: list[int], qmax: int) -> st.SearchStrategy[dict[str, Any]]:
    """One verify call: ``q <= qmax`` positions for some live requests, each keeping ``1 <= accepted <=
    q``."""

    @st.composite
    def op(draw: st.DrawFn) -> dict[str, Any]:
        chosen = draw(st.lists(st.sampled_from(live), min_size=1, max_size=len(live), unique=True))
        calls = []
        for k in chosen:
            q = draw(step_sizes(qmax))
            accepted = draw(st.one_of(st.just(1), st.integers(1, q)))
            calls.append({"slot": k, "positions": draw(positions(spec, q)), "accepted": accepted})
        return {"op": "decode", "calls": calls}

    return op()


@st.composite
def request_lives(draw: st.DrawFn, specs: st.SearchStrategy[LayerSpec] | None = None) -> dict[str, Any]:
    """A whole schedule over ``slots`` state slots: ``new`` (a request starts at 0 in a slot, over whatever
    the slot holds), ``prefill`` (``prefill_op``) and ``decode`` (``decode_op``: rejected positions roll
    back)."""
    spec = draw(specs if specs is not None else layer_specs(ratios=LIFE_RATIOS))
    qmax = draw(QMAX)
    slot_count = draw(st.integers(1, 2))
    live: list[int] = []
    ops: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["prefill", "decode", "decode", "prefill", "new"])) if live else "new"
        if kind == "new":
            slot = draw(st.integers(0, slot_count - 1))
            live = sorted({*live, slot})
            ops.append({"op": "new", "slot": slot})
        elif kind == "prefill":
            ops.append(draw(prefill_op(spec, live)))
        else:
            ops.append(draw(decode_op(spec, live, qmax)))
    return {
        "layer": spec,
        "qmax": qmax,
        "ring_extra": draw(RING_EXTRA_LIFE),
        "slots": slot_count,
        "fill": draw(fills()),
        "ops": ops,
    }
