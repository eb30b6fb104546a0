"""Hypothesis strategies for the cache formats and sparse attention.

A format example does not depend on the format: it holds compact row descriptions (``row spec``, ``grid spec``)
that ``row_values`` / ``grid_values_for`` expand deterministically into float32 values for the format under test
(512 or 128 values, groups of 16 to 128). The expansion is plain integer hashing, so an example is plain data a
reproducer can ``repr()``, and a failure report shows the expanded values.

Row spec ``{"seed", "exp", "bits", "spread", "anchored", "edits"}``:

* free rows: element i is ``+-m_i * 2**(exp - bits - shift_i)`` with ``m_i < 2**bits`` and ``shift_i <= spread``
  (``bits`` 0 gives zeros; few bits give exact ties of e4m3 and e2m1 under power-of-two scales);
* anchored rows: each group holds one element of the format's largest magnitude times a scale the format can
  store exactly, the others are multiples of ``max / 2**bits`` of it (ties relative to a known scale, e4m3
  scales included);
* ``edits``: ``[position, kind, e, negative]`` overwrite single elements with special values: NaN, infinities,
  signed zeros, float32 and bf16 extremes, float32 subnormals, values at, just above and just below a scale
  boundary ``448 * 2**e`` / ``6 * 2**e``, the 1e-4 FP8 amax floor, e4m3 ties, and magnitudes above 2688 where
  the main-FP4 scale clamps at 448.
"""

from __future__ import annotations

import functools
import math
import struct
from typing import Any

from hypothesis import strategies as st

from properties.cache.common import BF16_DIMS
from reference.checks import INT32_MAX, INT32_MIN
from reference.formats import RowFormat
from reference.grids import E2M1, E4M3FN, classify, decode

MASK64 = (1 << 64) - 1
F32_MAX = struct.unpack("<f", struct.pack("<I", 0x7F7FFFFF))[0]

SPECIAL_KINDS = (
    "nan",
    "inf",
    "zero",
    "f32_max",
    "bf16_max",
    "bf16_overflow",
    "tiny",
    "fp8_edge",
    "fp8_edge_up",
    "fp8_edge_down",
    "fp4_edge",
    "fp4_edge_up",
    "fp4_edge_down",
    "fp8_floor",
    "e4m3_tie",
    "big",
)
GARBAGE_KINDS = ("", "nan", "inf", "huge", "mixed")


def mix(seed: int, i: int) -> int:
    """A 64-bit hash of ``(seed, i)`` (splitmix64 finalizer): the expansion's only source of variety."""
    z = (seed * 0x9E3779B97F4A7C15 + (i + 1) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def f32(x: float) -> float:
    """``x`` rounded to float32 (to nearest even); magnitudes beyond float32 become infinities."""
    if math.isfinite(x) and abs(x) > F32_MAX:
        # only values past the rounding threshold overflow; our constructions never land between
        return math.copysign(math.inf, x)
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


def f32_next(x: float, up: bool) -> float:
    """The float32 neighbour of a positive float32 ``x``."""
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    return float(struct.unpack("<f", struct.pack("<I", bits + (1 if up else -1)))[0])


def special_value(kind: str, e: int, negative: bool) -> float:
    """The special value an edit writes (see the module docstring)."""
    sign = -1.0 if negative else 1.0
    e = max(-40, min(40, e))
    if kind == "nan":
        return math.nan
    if kind == "inf":
        return sign * math.inf
    if kind == "zero":
        return sign * 0.0
    if kind == "f32_max":
        return sign * F32_MAX
    if kind == "bf16_max":
        return sign * (2 - 2**-7) * 2.0**127
    if kind == "bf16_overflow":
        return sign * (2 - 2**-8) * 2.0**127
    if kind == "tiny":
        return sign * 2.0**-149 * (1 + abs(e) % 8)
    if kind.startswith(("fp8_edge", "fp4_edge")):
        base = (448.0 if kind.startswith("fp8") else 6.0) * 2.0**e
        if kind.endswith("_up"):
            base = f32_next(base, True)
        elif kind.endswith("_down"):
            base = f32_next(base, False)
        return sign * base
    if kind == "fp8_floor":
        floor = f32(1e-4)
        return sign * (f32_next(floor, e > 0) if e % 3 else floor)
    if kind == "e4m3_tie":
        return sign * (1 + 1 / 16) * 2.0**e * (6.0 if e % 2 else 1.0)
    if kind == "big":
        return sign * (2688.0 * 2.0 ** (abs(e) % 5) + abs(e) % 2)
    raise ValueError(f"kind: unknown special value {kind!r}")


@functools.cache
def finite_magnitudes(element: str) -> tuple[float, ...]:
    """The values of every finite code of ``"e4m3"`` or ``"e2m1"``, indexed by code (NaN codes left out)."""
    fmt = E4M3FN if element == "e4m3" else E2M1
    return tuple(float(decode(fmt, c)) for c in range(1 << fmt.width) if classify(fmt, c) == "finite")


def _exact_scale(fmt: RowFormat, seed: int, g: int, exp: int, spread: int) -> float:
    """A group scale the format stores exactly and its rule reproduces from ``max * scale``."""
    h = mix(seed, 100_000 + g)
    if fmt.scale_kind == "e4m3":
        return finite_magnitudes("e4m3")[1 + h % 0x7E]
    k = exp + h % (spread + 1) - spread // 2
    low = -126 if fmt.element == "e2m1" else -22  # below, the amax floor sets the scale
    return 2.0 ** max(low, min(100, k))


def _element_max(fmt: RowFormat) -> float:
    return 448.0 if fmt.element == "e4m3" else 6.0


def _free(seed: int, i: int, exp: int, bits: int, spread: int) -> float:
    h = mix(seed, i)
    m = h % (1 << bits) if bits else 0
    shift = (h >> 40) % (spread + 1)
    sign = -1.0 if (h >> 63) & 1 else 1.0
    return f32(sign * m * 2.0 ** (exp - bits - shift))


def row_values(spec: dict[str, Any], fmt: RowFormat) -> list[float]:
    """The float32 values a row spec stands for in ``fmt``."""
    seed, exp, bits, spread = spec["seed"], spec["exp"], spec["bits"], spec["spread"]
    values = [_free(seed, i, exp, bits, spread) for i in range(fmt.dims)]
    if spec["anchored"]:
        top = _element_max(fmt)
        for g in range(fmt.groups):
            scale = _exact_scale(fmt, seed, g, exp, spread)
            anchor = mix(seed, 200_000 + g) % fmt.group_size
            for j in range(fmt.group_size):
                h = mix(seed, 300_000 + g * fmt.group_size + j)
                fraction = 1.0 if j == anchor else (h % ((1 << bits) + 1)) / (1 << bits)
                sign = -1.0 if (h >> 63) & 1 else 1.0
                values[g * fmt.group_size + j] = f32(sign * fraction * top * scale)
    for position, kind, e, negative in spec["edits"]:
        values[position % fmt.dims] = special_value(kind, e, negative)
    return values


def grid_values_for(spec: dict[str, Any], fmt: RowFormat) -> list[float]:
    """Values on ``fmt``'s exact grid: element codes times an exactly stored group scale, one element of each
    group at the largest magnitude (so the scale rule gives that scale back); bf16 values in a RoPE tail."""
    seed, exp, spread = spec["seed"], spec["exp"], spec["spread"]
    codes = finite_magnitudes(fmt.element)
    top = _element_max(fmt)
    values: list[float] = []
    for g in range(fmt.groups):
        scale = _exact_scale(fmt, seed, g, exp, spread)
        anchor = mix(seed, 200_000 + g) % fmt.group_size
        for j in range(fmt.group_size):
            h = mix(seed, 300_000 + g * fmt.group_size + j)
            magnitude = top if j == anchor else codes[h % len(codes)]
            sign = -1.0 if (h >> 63) & 1 else 1.0
            values.append(sign * magnitude * scale)
    for j in range(fmt.bf16_dims):
        bits = mix(seed, 400_000 + j) & 0xFFFF
        if (bits >> 7) & 0xFF == 0xFF:
            bits &= ~(1 << 14)  # clear an exponent bit: no infinity or NaN
        values.append(struct.unpack("<f", struct.pack("<I", bits << 16))[0])
    return values


def garbage_row(kind: str, values: list[float], seed: int) -> list[float]:
    """What a padding row (slot -1) may hold instead of its values."""
    if kind == "nan":
        return [math.nan] * len(values)
    if kind == "inf":
        return [math.inf if mix(seed, i) & 1 else -math.inf for i in range(len(values))]
    if kind == "huge":
        return [F32_MAX] * len(values)
    if kind == "mixed":
        return [math.nan if mix(seed, i) % 3 == 0 else v for i, v in enumerate(values)]
    return values


# Examples are drawn as a few byte strings and mapped (few draws are fast; bytes shrink to 0, i.e. to zeros,
# one block of one row, no edits, no rows).

BITS = (0, 1, 2, 3, 4, 5, 6, 8, 12, 24)


def signed(b: int, limit: int) -> int:
    """A byte as an integer in [-limit, limit]: 0, 1, -1, 2, -2, ..."""
    v = b % (2 * limit + 1)
    return (v + 1) // 2 * (-1 if v % 2 else 1)


def _shuffled(items: list[int], seed: int) -> list[int]:
    out = list(items)
    for i in range(len(out) - 1, 0, -1):
        j = mix(seed, i) % (i + 1)
        out[i], out[j] = out[j], out[i]
    return out


def _row_spec(seed: int, head: bytes, edits: bytes) -> dict[str, Any]:
    return {
        "seed": seed,
        "exp": signed(head[0], 30),
        "bits": BITS[head[1] % len(BITS)],
        "spread": head[2] % 25,
        "anchored": bool(head[3] & 1),
        "edits": [
            [e[0] | (e[1] & 1) << 8, SPECIAL_KINDS[(e[1] >> 1) % len(SPECIAL_KINDS)], signed(e[2], 24), bool(e[3] & 1)]
            for e in (edits[i : i + 4] for i in range(0, len(edits) - 3, 4))
        ],
    }


def row_specs() -> st.SearchStrategy[dict[str, Any]]:
    """A row spec (see the module docstring), up to three edits."""
    return st.builds(_row_spec, st.integers(0, 2**32 - 1), st.binary(min_size=4, max_size=4), st.binary(max_size=12))


def grid_specs() -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(
        lambda seed, head: {"seed": seed, "exp": signed(head[0], 30), "spread": head[1] % 41},
        st.integers(0, 2**32 - 1),
        st.binary(min_size=2, max_size=2),
    )


def _layers(byte: int, min_layers: int) -> dict[str, int]:
    """``{"layers", "layer"}``: a cache of ``min_layers`` to ``min_layers + 1`` layers (byte 0: the fewest) and
    the layer a call uses."""
    layers = min_layers + byte % 2
    return {"layers": layers, "layer": (byte >> 4) % layers}


@st.composite
def store_examples(draw: st.DrawFn, *, max_rows: int = 4, min_layers: int = 1) -> dict[str, Any]:
    """Rows to store at slots of a small paged cache of ``min_layers`` or one more layers: ``rows`` entries
    are ``[pattern, slot, garbage]``; a row is ``patterns[pattern]`` expanded, or, at slot -1, that row replaced
    by ``garbage`` (see ``garbage_row``). Valid slots are distinct; up to two rows sit at slot -1; ``layer`` is
    the layer the call stores into."""
    head = draw(st.binary(min_size=7, max_size=7))
    rows_per_block, num_blocks = 1 + head[0] % 4, 1 + head[1] % 3
    capacity = rows_per_block * num_blocks
    patterns = [draw(row_specs()) for _ in range(1 + head[3] % 2)]
    valid = _shuffled(list(range(capacity)), head[4])[: head[5] % (min(capacity, max_rows) + 1)]
    per_row = draw(st.binary(min_size=len(valid) + 3, max_size=len(valid) + 3))
    slots = _shuffled(valid + [-1] * (per_row[0] % 3), per_row[1])
    rows = [
        [b % len(patterns), slot, GARBAGE_KINDS[(b >> 1) % len(GARBAGE_KINDS)] if slot == -1 else ""]
        for slot, b in zip(slots, (per_row[2:] + bytes(2))[: len(slots)], strict=True)
    ]
    return {
        "rows_per_block": rows_per_block,
        "num_blocks": num_blocks,
        "patterns": patterns,
        "rows": rows,
        "poison": head[2],
        **_layers(head[6], min_layers),
    }


@st.composite
def grid_store_examples(draw: st.DrawFn) -> dict[str, Any]:
    """A grid row at a slot: ``rows`` is ``[[grid spec, slot]]``."""
    head = draw(st.binary(min_size=4, max_size=4))
    rows_per_block, num_blocks = 1 + head[0] % 4, 1 + head[1] % 3
    return {
        "rows_per_block": rows_per_block,
        "num_blocks": num_blocks,
        "rows": [[draw(grid_specs()), head[3] % (rows_per_block * num_blocks)]],
        "poison": head[2],
    }


@st.composite
def raw_cache_examples(draw: st.DrawFn, *, min_layers: int = 1) -> dict[str, Any]:
    """A cache of ``min_layers`` or one more layers whose every byte comes from ``seed`` (finite codes,
    scales within float32 reach, every layer its own) and slots to read from layer ``layer`` in any order,
    repeats allowed."""
    head = draw(st.binary(min_size=4, max_size=4))
    rows_per_block, num_blocks = 1 + head[0] % 4, 1 + head[1] % 3
    capacity = rows_per_block * num_blocks
    reads = draw(st.binary(min_size=1, max_size=3))
    return {
        "rows_per_block": rows_per_block,
        "num_blocks": num_blocks,
        "seed": draw(st.integers(0, 2**32 - 1)),
        "scale_span": head[2] % 121,
        "reads": [b % capacity for b in reads],
        **_layers(head[3], min_layers),
    }


# Sparse attention. Vectors and lane rows are drawn as byte strings and mapped, one draw each (bytes shrink to 0).

OUT_OF_RANGE = ("below", "far_below", "int32_min", "at_n", "past_n", "int32_max")


def out_of_range_lane(which: str, n: int) -> int:
    return {"below": -2, "far_below": -7, "int32_min": INT32_MIN, "at_n": n, "past_n": n + 3, "int32_max": INT32_MAX}[
        which
    ]


def grid_of_byte(b: int, half_width: int = 8) -> float:
    """A byte as a multiple of 1/4 in [-half_width/4, half_width/4] (0 -> 0, then 1/4, -1/4, 2/4, ...):
    exact in bf16 and float32."""
    v = b % (2 * half_width + 1)
    return ((v + 1) // 2) * (-1 if v % 2 else 1) / 4


def _grid_vectors(count: int, width: int, half_width: int = 8) -> st.SearchStrategy[list[list[float]]]:
    size = count * width
    return st.binary(min_size=size, max_size=size).map(
        lambda raw: [[grid_of_byte(raw[r * width + c], half_width) for c in range(width)] for r in range(count)]
    )


def lane_of_byte(b: int, n: int, invalid_share: int) -> list[Any]:
    """A byte as a lane ``[kind, value]``: valid (most likely, and byte 0), -1, or out of range."""
    kind = b % (4 + 2 * invalid_share)
    if n == 0 or kind >= 4:
        if n == 0 or kind % 2 == 0:
            return ["minus_one", 0]
        return ["out_of_range", OUT_OF_RANGE[(b >> 4) % len(OUT_OF_RANGE)]]
    return ["valid", (b >> 3) % n]


SCALES = (1.0, 0.5, 0.25, 0.3)
EXTREME_SINKS = (1e30, -1e30, F32_MAX, -F32_MAX, 1e9, 100.0, 89.0, -1e4)
"""Sinks across the whole float32 range: where ``e^{sink}`` overflows float32 (89), float64 (1e9) or any format
(1e30, the f32 maximum, whose exact exponential the reference bounds instead of expanding), and far below."""
EXTREME_OFFSETS = (1000.0, 709.0, 100.0, 89.0, 1e30, -709.0, -1000.0, -1e30)
"""Sinks far above or below the row's lse: lse + 709 overflows a float64 ``e^{sink - lse}``, lse + 89 a float32
one; lse + 1000 leaves an output below every float's range."""
LEADING = (0, 4, 8, 1, 2, 3)  # index LEADING[0] stands for the whole row


@st.composite
def attention_examples(
    draw: st.DrawFn,
    *,
    min_kv: int = 1,
    invalid_share: int = 1,
    leading_invalid: bool = False,
    empty_rows: bool = False,
    sink_offsets: bool = False,
    permutation: bool = False,
) -> dict[str, Any]:
    """One sparse attention call. ``lanes[m]`` entries are ``[kind, value]``: ``["valid", j]``, ``["minus_one",
    0]`` or ``["out_of_range", which]`` (see ``out_of_range_lane``); under minus_one_only an out-of-range lane
    is passed as -1. ``leading``: that many lanes at the start of each row made invalid; ``empty``: rows made
    entirely invalid; ``sink_offsets``: sinks placed at the first row's lse plus an offset (``None``: ``sinks``
    as drawn); ``perm_seed``: a lane permutation to replay the example with. One example in three puts one
    head's sink (or offset) far out: ``EXTREME_SINKS`` (``EXTREME_OFFSETS``)."""
    head = draw(st.binary(min_size=12, max_size=12))
    heads, d, m = 1 + head[0] % 2, 1 + head[1] % 8, 1 + head[2] % 2
    n = min_kv + head[3] % (13 - min_kv)
    k = 1 + head[4] % 16
    raw_lanes = draw(st.binary(min_size=m * k, max_size=m * k))
    lanes = [[lane_of_byte(raw_lanes[r * k + c], n, invalid_share) for c in range(k)] for r in range(m)]
    q = draw(_grid_vectors(m * heads, d))
    scale = 1 / math.sqrt(d) if head[7] % 5 == 4 else SCALES[head[7] % 5]
    leading = LEADING[head[8] % len(LEADING)] or k
    specials = (math.inf, -math.inf)
    sinks = [v[0] for v in draw(_grid_vectors(heads, 1, 32))]
    offsets = [v[0] for v in draw(_grid_vectors(heads, 1, 48))] if sink_offsets else None
    special = sinks if offsets is None else offsets
    if head[9] % 4 == 3:
        special[head[9] // 4 % heads] = specials[head[9] // 8 % 2]
    if head[11] % 3 == 2:
        far = EXTREME_SINKS if offsets is None else EXTREME_OFFSETS
        special[head[11] // 3 % heads] = far[head[11] // 6 % len(far)]
    return {
        "dtype": ("float32", "bfloat16")[head[5] % 2],
        "dv": 1 + head[6] % d,
        "scale": scale,
        "q": [q[r * heads : (r + 1) * heads] for r in range(m)],
        "kv": draw(_grid_vectors(n, d)),
        "lanes": lanes,
        "sinks": sinks,
        "leading": min(leading, k) if leading_invalid else 0,
        "empty": [r for r in range(m) if head[10] >> r & 1 or r == head[10] % m] if empty_rows else [],
        "sink_offsets": offsets,
        "perm_seed": draw(st.integers(0, 2**32 - 1)) if permutation else None,
    }


FP8_KV_DIMS = 512
FP8_KV_SCALES = (2.0**-12, 2.0**-14, 2.0**-16, 2.0**-18)
"""Small enough that every score stays within a few hundred (the exact reference expands e^s exactly) over rows
of e4m3 codes under scales up to 2^2 and query values up to 2."""


@st.composite
def fp8_kv_attention_examples(draw: st.DrawFn, *, empty_rows: bool = False) -> dict[str, Any]:
    """One sparse_attention_fp8_kv call: a one-layer cache of hashed bytes (``raw_cache_examples``: finite codes
    at every slot a lane reads; its UE8M0 scales within 2^-2 .. 2^2) and
    query rows of 512 values on the 1/4 grid. ``lanes[m]`` as in ``attention_examples``, over the cache's
    capacity (valid lanes name slots; out-of-range ones fall below -1 or at and past the capacity); ``empty``:
    rows made entirely invalid."""
    cache = draw(raw_cache_examples())
    capacity = cache["rows_per_block"] * cache["num_blocks"]
    head = draw(st.binary(min_size=8, max_size=8))
    heads, m, k = 1 + head[0] % 2, 1 + head[1] % 2, 1 + head[2] % 8
    raw_lanes = draw(st.binary(min_size=m * k, max_size=m * k))
    lanes = [[lane_of_byte(raw_lanes[r * k + c], capacity, 1) for c in range(k)] for r in range(m)]
    empty = [r for r in range(m) if head[6] >> r & 1 or r == head[6] % m] if empty_rows else []
    reads = sorted({v for r, row in enumerate(lanes) if r not in empty for kind, v in row if kind == "valid"})
    sinks = [v[0] for v in draw(_grid_vectors(heads, 1, 32))]
    if head[4] % 4 == 3:
        sinks[head[4] // 4 % heads] = (math.inf, -math.inf)[head[4] // 8 % 2]
    q = draw(_grid_vectors(m * heads, FP8_KV_DIMS))
    return {
        **cache,
        "layers": 1,
        "layer": 0,
        "scale_span": cache["scale_span"] % 3,
        "reads": reads or [0],
        "dtype": ("float32", "bfloat16")[head[3] % 2],
        "scale": FP8_KV_SCALES[head[5] % len(FP8_KV_SCALES)],
        "q": [q[r * heads : (r + 1) * heads] for r in range(m)],
        "lanes": lanes,
        "sinks": sinks,
        "empty": empty,
    }


# sparse_attention_bf16: bf16 q and kv at D = dv = 512, as FlashMLA-style kernels take them.

BF16_QUERY_NONZEROS = 8
BF16_SCORE_BOUND = 16
"""A query head holds ``c <= BF16_QUERY_NONZEROS`` values on the 1/4 grid, each within ``+-8 / c``, against key
values within +-2 on the 1/4 grid: ``|q . k| <= 16`` on the 1/16 grid, so every raw score is a bf16 value and
rounding it (as a bf16 matmul's product is rounded) loses nothing. Only the rounding of the probabilities, the
operation's own, sets kernels apart."""
BF16_SCALES = (0.25, 0.5, 1.0, 0.04419417306780815, 2.0, 8.0, 64.0)
"""Scores from nearly equal (many probabilities rounded) to one-hot; 8 and 64 take the row maximum past 88, where
e^s overflows float32 unless the maximum is subtracted first. 0.0441... is float32's 512^-0.5."""
BF16_SHORT_LANES = 16
BF16_LONG_LANES = (33, 140)
BF16_LONG_SHARE = 8
"""Lanes a row: up to 16, or in one draw of ``BF16_LONG_SHARE`` 33 to 140 (64- and 32-lane tiles partly filled,
up to five of them crossed; the exact reference's time grows with the lanes)."""
BF16_MAX_ROWS = 200


def wide_lane_of_bytes(b: int, c: int, n: int) -> list[Any]:
    """``lane_of_byte``'s lane of ``b``, a valid one naming any of ``n`` rows (13 bits from ``b`` and ``c``)."""
    lane = lane_of_byte(b, n, 1)
    return ["valid", ((b >> 3) | c << 5) % n] if lane[0] == "valid" else lane


def sparse_query(raw: bytes) -> list[list[float]]:
    """A query head as ``[position, value]`` pairs (later pairs overwrite earlier ones at the same position):
    ``count = raw[0] % 9`` of them, positions from two bytes, values on the 1/4 grid within ``+-8 / count``
    (``BF16_SCORE_BOUND``)."""
    count = raw[0] % (BF16_QUERY_NONZEROS + 1)
    half_width = 4 * BF16_QUERY_NONZEROS // max(count, 1)
    return [
        [(raw[1 + 3 * i] | raw[2 + 3 * i] << 8) % BF16_DIMS, grid_of_byte(raw[3 + 3 * i], half_width)]
        for i in range(count)
    ]


@st.composite
def bf16_attention_examples(draw: st.DrawFn, *, empty_rows: bool = False) -> dict[str, Any]:
    """One sparse_attention_bf16 call: ``n`` cache rows (0 to 200 with ``empty_rows``, else 1 to 200) expanded from
    ``kv_seed`` (values on the 1/4 grid within +-2), ``q[m][h]`` a sparse query head (``sparse_query``), ``lanes``
    as in ``attention_examples`` (valid lanes over all ``n`` rows), ``empty`` rows made entirely invalid, sinks
    on the 1/4 grid within +-8, one head in four +-inf, one example in three one head's sink ``EXTREME_SINKS``."""
    head = draw(st.binary(min_size=10, max_size=10))
    heads, m = 1 + head[0] % 3, 1 + head[1] % 2
    low = 0 if empty_rows else 1
    n = low + (head[2] | head[3] << 8) % (BF16_MAX_ROWS + 1 - low)
    short, (first, last) = BF16_SHORT_LANES, BF16_LONG_LANES
    long = head[4] % BF16_LONG_SHARE == BF16_LONG_SHARE - 1
    k = first + head[5] % (last - first + 1) if long else 1 + head[5] % short
    raw = draw(st.binary(min_size=2 * m * k, max_size=2 * m * k))
    lanes = [
        [wide_lane_of_bytes(raw[2 * (r * k + c)], raw[2 * (r * k + c) + 1], n) for c in range(k)] for r in range(m)
    ]
    size = 1 + 3 * BF16_QUERY_NONZEROS
    queries = draw(st.binary(min_size=m * heads * size, max_size=m * heads * size))
    q = [[sparse_query(queries[(r * heads + h) * size :]) for h in range(heads)] for r in range(m)]
    sinks = [v[0] for v in draw(_grid_vectors(heads, 1, 32))]
    if head[6] % 4 == 3:
        sinks[head[6] // 4 % heads] = (math.inf, -math.inf)[head[6] // 8 % 2]
    if head[7] % 3 == 2:
        sinks[head[7] // 3 % heads] = EXTREME_SINKS[head[7] // 6 % len(EXTREME_SINKS)]
    return {
        "n": n,
        "kv_seed": draw(st.integers(0, 2**32 - 1)),
        "scale": BF16_SCALES[head[8] % len(BF16_SCALES)],
        "q": q,
        "lanes": lanes,
        "sinks": sinks,
        "empty": [r for r in range(m) if head[9] >> r & 1 or r == head[9] % m] if empty_rows else [],
    }


# The tail of the fused compressor path: norm, RoPE, store.

NORM_EPS = (9.999999974752427e-07, 2.0**-4, 1.0)
"""RMSNorm's eps: float32's 1e-6 (the models' value) and ones large enough to dominate small rows' mean square."""
COS_SIN_ROWS = 8


@st.composite
def norm_rope_examples(draw: st.DrawFn) -> dict[str, Any]:
    """A store example (``store_examples``) whose rows have no special values, with ``eps``, a ``weight_seed``
    (weights in [0.5, 2)), a ``table_seed`` (cos and sin entries in [-1, 1], multiples of 2**-10, over
    ``COS_SIN_ROWS`` positions) and a position for each row."""
    example = draw(store_examples(max_rows=2))
    example["patterns"] = [{**p, "edits": []} for p in example["patterns"]]
    head = draw(st.binary(min_size=1 + len(example["rows"]), max_size=1 + len(example["rows"])))
    example.update(
        eps=NORM_EPS[head[0] % len(NORM_EPS)],
        weight_seed=draw(st.integers(0, 2**32 - 1)),
        table_seed=draw(st.integers(0, 2**32 - 1)),
        positions=[b % COS_SIN_ROWS for b in head[1:]],
    )
    return example


def norm_weights(seed: int, dims: int) -> list[float]:
    return [(32 + mix(seed, i) % 96) / 64 for i in range(dims)]


def cos_sin_table(seed: int, rope_dim: int) -> list[list[float]]:
    return [[(mix(seed, r * rope_dim + j) % 2049 - 1024) / 1024 for j in range(rope_dim)] for r in range(COS_SIN_ROWS)]
