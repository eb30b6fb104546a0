"""Hypothesis strategies for the indexing operations. Every example is plain Python data (dicts, lists, ints,
floats including nan and inf), so a reproducer can ``repr()`` it.

Scores inside a valid prefix sit on a small grid (ties are common) and, in some examples, include -inf, +inf,
NaN and -0.0, which the exact reference ranks as torch does; huge and denormal magnitudes (up to the float32
maximum, down to its smallest subnormal) and long runs of equal values, in the same examples as those markers.
Whatever lies at or past a valid end is garbage (NaN, +-inf, huge values), drawn twice where a property swaps one
garbage tail for another. Lengths include -1, a padding row (``reference.padding``), and whole batches of 0.
Index-score inputs sit on a grid on which float32 accumulation is exact in any order, so a structural bug is a
gross error; a decode query at position -1 is a padding query.

Generation cost matters (the mutant hunt runs hundreds of examples per property and mutant): each example is
read from one drawn byte string by :class:`ByteSource`, its sizes and settings first. Byte 0 maps to the
simplest choice (one row, 0.0, a full-width row, offset 0, ...), so Hypothesis shrinks towards simple examples.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from properties.strategies import GARBAGE
from reference.checks import INT32_MAX

SPECIALS = (float("-inf"), float("inf"), float("nan"), -0.0)
F32_MAX = 3.4028234663852886e38
F32_TINY = 1.401298464324817e-45
"""The largest finite float32 and its smallest subnormal."""
EXTREMES = (
    F32_MAX,
    -F32_MAX,
    1e30,
    -1e30,
    70000.0,
    65504.0,
    -65536.0,
    F32_TINY,
    -F32_TINY,
    3 * F32_TINY,
    1e-40,
    -1e-40,
    1.1754943508222875e-38,
    2.0**-140,
    0.0,
    -0.0,
)
"""Huge and denormal magnitudes and signed zeros: beyond float16 (65504 is its largest, 70000 and 1e30 overflow
it), float32's extremes, its subnormals (which a flush-to-zero mode turns into 0) and +-0.0 (equal, whatever their
bits)."""

MAX_ROWS = 4
MAX_WIDTH = 32
MAX_K = 8


class ByteSource:
    """Reads a drawn byte string as small integers; past its end every byte is 0."""

    def __init__(self, raw: bytes) -> None:
        self.raw, self.at = raw, 0

    def byte(self) -> int:
        value = self.raw[self.at] if self.at < len(self.raw) else 0
        self.at += 1
        return value

    def below(self, n: int) -> int:
        """An integer in [0, n) (n <= 256)."""
        return self.byte() % n

    def between(self, low: int, high: int) -> int:
        """An integer in [low, high] (at most 256 values); byte 0 gives ``low``."""
        return low + self.below(high - low + 1)

    def bytes(self, n: int) -> list[int]:
        return [self.byte() for _ in range(n)]


def source(size: int) -> st.SearchStrategy[ByteSource]:
    """One byte string of ``size`` bytes: a whole example is read from a single draw."""
    return st.binary(min_size=size, max_size=size).map(ByteSource)


# --- values --------------------------------------------------------------------------------------------------------


def coarse(byte: int) -> float:
    """0, 0.5, .., 4, -0.5, .., -4 (17 values: ties are common); byte 0 is 0.0."""
    step = byte % 17
    return (step if step <= 8 else 8 - step) / 2


def fine(byte: int) -> float:
    """Multiples of 1/16 in (-8, 8); byte 0 is 0.0."""
    return (byte if byte < 128 else 127 - byte) / 16


def garbage(byte: int) -> float:
    """What unwritten storage may hold: NaN, +-inf, huge values, or large integers."""
    return GARBAGE[byte % len(GARBAGE)] if byte < 192 else float(31 * (byte - 224))


def prefix_value(byte: int, style: int) -> float:
    """A valid-prefix value; ``style`` bit 0: the coarse grid (ties), bit 1: a marker one time in eight, bit 2:
    an extreme magnitude or signed zero (``EXTREMES``) one time in four."""
    if style & 2 and byte >= 224:
        return SPECIALS[byte % len(SPECIALS)]
    if style & 4 and 160 <= byte < 224:
        return EXTREMES[byte % len(EXTREMES)]
    return coarse(byte) if style & 1 else fine(byte)


HUGE = tuple(v for v in EXTREMES if abs(v) >= 65504)
TINY = tuple(v for v in EXTREMES if 0 < abs(v) < 2.0**-126)


def prefix_values(src: ByteSource, n: int, style: int) -> list[float]:
    """``n`` valid-prefix values; ``style`` bit 3: long runs of equal values (each value repeats the one before
    three times in four, markers and extremes included). With markers and extremes both on (bits 1 and 2), the
    row also gets NaN, +inf, -inf, -0.0, a huge and a subnormal value at drawn places: all in one example."""
    out: list[float] = []
    for _ in range(n):
        byte = src.byte()
        out.append(out[-1] if style & 8 and out and byte % 4 else prefix_value(byte, style))
    if n and style & 6 == 6:
        salt = (*SPECIALS, HUGE[src.byte() % len(HUGE)], TINY[src.byte() % len(TINY)])
        for value in salt:
            out[src.byte() % n] = value
    return out


def length_from(byte: int, width: int) -> int:
    """A valid length in [0, width]: the full width (byte 0) and 0 favoured; or -1, a padding row."""
    if byte < 64:
        return width
    if byte < 96:
        return 0
    return -1 if byte < 112 else byte % (width + 1)


def offset_from(byte: int, width: int) -> int:
    """A small offset, or one so large that offset + row stays just below INT32_MAX."""
    return byte % 65 if byte < 192 else INT32_MAX - width - 1 - byte % 9


def score_rows(src: ByteSource, width: int, lengths: list[int], style: int) -> list[list[float]]:
    """One row per length: the valid prefix, then garbage up to ``width`` (a padding row is all garbage)."""
    return [prefix_values(src, max(n, 0), style) + src_garbage(src, width - max(n, 0)) for n in lengths]


def src_garbage(src: ByteSource, n: int) -> list[float]:
    return [garbage(b) for b in src.bytes(n)]


# --- top-k and candidate blocks ------------------------------------------------------------------------------------

MAX_BLOCK = 8
SCORE_BYTES = 8 + MAX_ROWS * (2 * MAX_WIDTH + 2 + MAX_BLOCK)
"""Enough bytes for a batch of score rows, a second garbage tail per row and a few settings."""


def score_batch(src: ByteSource) -> dict[str, Any]:
    """``{"scores", "lengths"}``: 1 to MAX_ROWS rows of one width, each a valid prefix then garbage; one batch
    in eight has every length 0."""
    rows, width, style = src.between(1, MAX_ROWS), src.between(0, MAX_WIDTH), src.below(16)
    lengths = [length_from(b, width) for b in src.bytes(rows)]
    if src.below(8) == 7:
        lengths = [0] * rows
    return {"scores": score_rows(src, width, lengths, style), "lengths": lengths}


def other_tails(src: ByteSource, case: dict[str, Any]) -> list[list[float]]:
    """A second garbage tail for each row."""
    width = len(case["scores"][0])
    return [src_garbage(src, width - max(n, 0)) for n in case["lengths"]]


@st.composite
def topk_cases(draw: st.DrawFn, with_other_tails: bool = False) -> dict[str, Any]:
    """``{"scores", "lengths", "offsets", "k"}`` (and ``"other_tails"``) for the topk operation."""
    src = draw(source(SCORE_BYTES))
    k = src.between(0, MAX_K)
    case = score_batch(src)
    width = len(case["scores"][0])
    case["offsets"] = [offset_from(src.byte(), width) for _ in case["lengths"]]
    case["k"] = k
    if with_other_tails:
        case["other_tails"] = other_tails(src, case)
    return case


def candidate_case(src: ByteSource, with_other_tails: bool = False) -> dict[str, Any]:
    block_size, topk_blocks = src.between(2, MAX_BLOCK), src.between(0, 6)
    case = score_batch(src)
    case["block_size"], case["topk_blocks"] = block_size, topk_blocks
    if with_other_tails:
        case["other_tails"] = other_tails(src, case)
    return case


@st.composite
def candidate_cases(draw: st.DrawFn, with_other_tails: bool = False) -> dict[str, Any]:
    """``{"scores", "lengths", "block_size", "topk_blocks"}`` (and ``"other_tails"``) for candidate_select."""
    return candidate_case(draw(source(SCORE_BYTES)), with_other_tails)


@st.composite
def slots_for_every_block(draw: st.DrawFn) -> dict[str, Any]:
    """A candidate case with ``topk_blocks`` at least the number of blocks of the widest row."""
    src = draw(source(SCORE_BYTES))
    spare = src.below(2)
    case = candidate_case(src)
    case["topk_blocks"] = -(-len(case["scores"][0]) // case["block_size"]) + spare
    return case


@st.composite
def newest_block_cases(draw: st.DrawFn) -> dict[str, Any]:
    """A candidate case plus ``"newest_values"``: other contents for each row's newest visible block."""
    src = draw(source(SCORE_BYTES))
    case = candidate_case(src)
    size = case["block_size"]
    case["newest_values"] = [prefix_values(src, size, 15) for _ in case["lengths"]]
    return case


@st.composite
def restore_cases(draw: st.DrawFn) -> dict[str, Any]:
    """``{"offsets", "candidate_blocks", "block_size"}``: distinct block ids or -1 padding, offsets or -1."""
    src = draw(source(4 + MAX_ROWS * (16 + 6 + MAX_K)))
    rows, block_size = src.between(1, MAX_ROWS), src.between(2, MAX_BLOCK)
    slots, lanes = src.between(0, 6), src.between(0, MAX_K)
    blocks, offsets = [], []
    span = slots * block_size
    for _ in range(rows):
        pool = permutation(src, 16)
        blocks.append([-1 if src.byte() >= 208 else pool[i] for i in range(slots)])
        offsets.append([-1 if span == 0 or (b := src.byte()) >= 224 else b % span for _ in range(lanes)])
    return {"offsets": offsets, "candidate_blocks": blocks, "block_size": block_size}


REMAP_BLOCK_SIZES = (2, 3, 4, 8, 16)
"""Candidate block sizes of the remap: the engines' 8 and 16 (a multiple of their sparse block) and small odd
ones; 8 ids, so a row spans at most 128 positions."""


@st.composite
def remap_cases(draw: st.DrawFn) -> dict[str, Any]:
    """``{"columns", "candidate_blocks", "lengths", "block_size"}``: per row distinct block ids of 0..7 in any
    order or -1 padding, a length anywhere in 0..9 blocks (blocks past it, a partial newest block), and columns
    below the row's count or -1."""
    src = draw(source(4 + MAX_ROWS * (8 + 7 + MAX_K)))
    rows, size = src.between(1, MAX_ROWS), REMAP_BLOCK_SIZES[src.below(len(REMAP_BLOCK_SIZES))]
    slots, lanes = src.between(0, 6), src.between(0, MAX_K)
    blocks, lengths, columns = [], [], []
    for _ in range(rows):
        pool = permutation(src, 8)
        row = [-1 if src.byte() >= 208 else pool[i] for i in range(slots)]
        n = src.below(9 * size + 1)
        count = sum(min(max(n - b * size, 0), size) for b in row if b >= 0)
        blocks.append(row)
        lengths.append(n)
        columns.append([-1 if count == 0 or (c := src.byte()) >= 224 else c % count for _ in range(lanes)])
    return {"columns": columns, "candidate_blocks": blocks, "lengths": lengths, "block_size": size}


def permutation(src: ByteSource, n: int) -> list[int]:
    """0..n-1 shuffled by the source (Fisher-Yates; all-zero bytes give a rotation)."""
    items = list(range(n))
    for i in range(n - 1, 0, -1):
        j = src.below(i + 1)
        items[i], items[j] = items[j], items[i]
    return items


@st.composite
def two_level_cases(draw: st.DrawFn) -> dict[str, Any]:
    """``{"scores", "lengths", "k", "block_size", "padding"}``: a top-k case for the candidate round trip."""
    src = draw(source(SCORE_BYTES))
    k, block_size, padding = src.between(0, MAX_K), src.between(2, MAX_BLOCK), src.between(0, 2)
    case = score_batch(src)
    case.update(k=k, block_size=block_size, padding=padding)
    return case


# --- index scores --------------------------------------------------------------------------------------------------


def grid_64th(src: ByteSource) -> float:
    """n / 64 for |n| <= 255 from two bytes (0 -> 0.0): exact in bfloat16 and float32."""
    u = (src.byte() << 8 | src.byte()) % 511
    return (u if u <= 255 else 255 - u) / 64


def grid_matrix(src: ByteSource, rows: int, cols: int) -> list[list[float]]:
    """A rows x cols matrix of n / 64 (|n| <= 255).

    On this grid a product is a multiple of 2**-12 below 16, and a dot product of up to 8 terms stays below 128:
    every partial sum is exact in float32, in any order.
    """
    return [[grid_64th(src) for _ in range(cols)] for _ in range(rows)]


def query_positions(src: ByteSource, mode: str, queries: int, ratio: int) -> tuple[list[int], int]:
    """Consecutive positions from [0, 12] (prefill), else each in [0, 25) or -1; the most rows one sees."""
    if mode == "prefill":
        start = src.between(0, 12)
        positions = list(range(start, start + queries))
    else:
        positions = [-1 if (b := src.byte()) >= 240 else b % 25 for _ in range(queries)]
    return positions, max((p + 1) // ratio for p in positions)


INDEX_BYTES = 16 + 2 * 8 * (6 * 4 + 25) + 6 * 4 + 3
"""Enough bytes for the largest index-score case: 6 queries x 4 heads x 8 dims, 25 visible rows."""


@st.composite
def index_score_cases(draw: st.DrawFn, mode: str) -> dict[str, Any]:
    """``{"q", "weights", "k", "positions", "ratio", "dtype"}``.

    ``mode``: ``"prefill"`` (consecutive positions of one chunk from ``start_pos``) or ``"decode"`` (one query
    per request, each at its own position). Key rows past the largest visible count hold garbage. Weights are
    multiples of 1/4 in [-2, 2]: with at most 4 heads the weighted sum stays exact in float32 too.
    """
    src = draw(source(INDEX_BYTES))
    ratio, queries = src.between(1, 4), src.between(1, 6 if mode == "prefill" else 4)
    heads, dim, extra = src.between(1, 4), src.between(1, 8), src.between(0, 3)
    dtype = ("float32", "bfloat16")[src.below(2)]
    positions, visible = query_positions(src, mode, queries, ratio)
    q = [grid_matrix(src, heads, dim) for _ in positions]
    weights = [[coarse(src.byte()) / 2 for _ in range(heads)] for _ in positions]
    k = grid_matrix(src, visible, dim) + [[garbage(src.byte() % 4)] * dim for _ in range(extra)]
    return {"q": q, "weights": weights, "k": k, "positions": positions, "ratio": ratio, "dtype": dtype}


PAGED_BYTES = 1400
"""Enough bytes for the largest paged case: 3 requests x 3 queries x 4 heads x 8 dims, 70 cache rows of 8."""
TABLE_GARBAGE = ("minus_one", "past", "int32_max", "zero")


@st.composite
def paged_score_cases(draw: st.DrawFn, mode: str) -> dict[str, Any]:
    """``{"q", "weights", "cache", "block_table", "lengths", "dtype"}`` for paged_index_scores.

    ``mode``: ``"decode"`` (one query a request) or ``"next_n"`` (2 or 3 speculative queries a request at
    consecutive positions). Query t of request b at position ``p_b + t`` sees ``(p + 1) // ratio`` rows (ratio 1
    to 4), so early positions and whole requests see none (one request in five is emptied outright). Each
    request owns distinct physical blocks shuffled over the cache (spare blocks too); table entries past what
    a request reads hold -1, an id past the cache, INT32_MAX or block 0, and cache rows no query reads hold
    garbage (NaN, inf, huge).
    """
    src = draw(source(PAGED_BYTES))
    plan = paged_plan(src, mode)
    dim, per_block, read = plan["dim"], plan["per_block"], plan["read"]
    cache = [
        [grid_matrix(src, 1, dim)[0] if (block, r) in read else [garbage(src.byte())] * dim for r in range(per_block)]
        for block in range(plan["blocks"])
    ]
    requests, next_n, heads = len(plan["lengths"]), len(plan["lengths"][0]), plan["heads"]
    q = [[grid_matrix(src, heads, dim) for _ in range(next_n)] for _ in range(requests)]
    weights = [[[coarse(src.byte()) / 2 for _ in range(heads)] for _ in range(next_n)] for _ in range(requests)]
    return {"q": q, "weights": weights, "cache": cache, "block_table": plan["block_table"], "lengths": plan["lengths"],
            "dtype": plan["dtype"]}  # fmt: skip


def paged_plan(src: ByteSource, mode: str) -> dict[str, Any]:
    """The shape of a paged case, drawn from ``src`` (see :func:`paged_score_cases`): ``heads``, ``dim``,
    ``per_block``, ``dtype``, ``lengths`` [B][T], ``block_table`` [B][width], ``blocks`` (the cache's) and
    ``read``, the (block, row) pairs some query reads."""
    requests, next_n = src.between(1, 3), 1 if mode == "decode" else src.between(2, 3)
    heads, dim, per_block, ratio = src.between(1, 4), src.between(1, 8), src.between(1, 4), src.between(1, 4)
    dtype = ("float32", "bfloat16")[src.below(2)]
    lengths = []
    for _ in range(requests):
        start, empty = src.below(20), src.byte() >= 204
        lengths.append([0 if empty else (start + t + 1) // ratio for t in range(next_n)])
    need = [-(-max(row) // per_block) for row in lengths]
    width = max(need) + src.below(2)
    total = sum(need) + src.below(3)
    pool = permutation(src, total)
    tables, at = [], 0
    for n in need:
        junk = [TABLE_GARBAGE[src.below(len(TABLE_GARBAGE))] for _ in range(width - n)]
        spill = {"minus_one": -1, "past": total + 3, "int32_max": INT32_MAX, "zero": 0}
        tables.append(pool[at : at + n] + [spill[j] for j in junk])
        at += n
    read = {(tables[b][j // per_block], j % per_block) for b, row in enumerate(lengths) for j in range(max(row))}
    return {"heads": heads, "dim": dim, "per_block": per_block, "dtype": dtype, "lengths": lengths,
            "block_table": tables, "blocks": total, "read": read}  # fmt: skip


# --- addresses -----------------------------------------------------------------------------------------------------

SLOT_BYTES = 8 + 4 * MAX_ROWS * 4 + MAX_ROWS * (1 + 3 * MAX_K)


@st.composite
def slot_cases(draw: st.DrawFn) -> dict[str, Any]:
    """``{"rows", "holes", "lengths", "garbage", "block_tables", "block_size", "ratio"}`` for slot_translation.

    Each request owns ``blocks`` distinct physical blocks (no block is shared between requests); ``rows`` are
    real logical rows, ``holes`` the lanes that hold -1 under the sentinel guard, ``lengths`` the count guard's
    valid lanes and ``garbage`` what the count guard's other lanes hold. Block ids near ``2**31 / Bc`` make the
    slots exceed int32.
    """
    src = draw(source(SLOT_BYTES))
    block_size = (2, 4, 6, 8)[src.below(4)]
    ratios = [r for r in (1, 2, 3, 4, 8) if block_size % r == 0]
    ratio = ratios[src.below(len(ratios))]
    per_block = block_size // ratio
    requests, blocks, lanes = src.between(1, MAX_ROWS), src.between(1, 4), src.between(0, MAX_K)
    total, large = requests * blocks, src.below(2) == 1
    base = min(2**31 // per_block - 2, INT32_MAX - 4 * total) if large else 0
    ids = [base + i for i in permutation(src, 4 * total)[:total]]
    span = blocks * per_block
    junk = (-1, -2, -(2**31), INT32_MAX, span, 2 * span + 1)
    return {
        "rows": [[src.below(span) for _ in range(lanes)] for _ in range(requests)],
        "holes": [[i for i in range(lanes) if src.byte() >= 192] for _ in range(requests)],
        "lengths": [length_from(src.byte(), lanes) for _ in range(requests)],
        "garbage": [[junk[src.below(len(junk))] for _ in range(lanes)] for _ in range(requests)],
        "block_tables": [ids[i * blocks : (i + 1) * blocks] for i in range(requests)],
        "block_size": block_size,
        "ratio": ratio,
    }


@st.composite
def gathered_cases(draw: st.DrawFn) -> dict[str, Any]:
    """``{"rows", "offsets"}``: rows or -1 per lane; offsets up to beyond int32."""
    src = draw(source(2 + MAX_ROWS * (MAX_K + 1)))
    requests, lanes = src.between(1, MAX_ROWS), src.between(0, MAX_K)
    rows = [[-1 if (b := src.byte()) >= 192 else b % 64 for _ in range(lanes)] for _ in range(requests)]
    offsets = [b % 65 if (b := src.byte()) < 192 else 2**31 - 70 + 2**26 * (b - 192) for _ in range(requests)]
    return {"rows": rows, "offsets": offsets}


@st.composite
def window_cases(draw: st.DrawFn) -> dict[str, Any]:
    """``{"window", "seqlen", "start_pos"}``: a prefill chunk at position 0 or one decode query."""
    src = draw(source(3))
    window, decode = src.between(1, 12), src.below(2) == 1
    if decode:
        return {"window": window, "seqlen": 1, "start_pos": src.between(1, 30)}
    return {"window": window, "seqlen": src.between(0, 20), "start_pos": 0}


# --- window block release ------------------------------------------------------------------------------------------

MAX_RELEASE_STEP = 16


@st.composite
def release_lives(draw: st.DrawFn) -> dict[str, Any]:
    """``{"window", "block_size", "requests": [{"start", "steps": [[D, a], ...]}]}``: 1 to 3 requests, each from its
    accepted length ``start`` through 1 to 4 scheduled steps of ``D`` in 1..16 positions keeping ``1 <= a <= D``
    (all of them one time in three): the next step starts ``a`` positions later."""
    src = draw(source(4 + 3 * (1 + 4 * 3)))
    window, block_size, count = src.between(1, 12), src.between(1, 8), src.between(1, 3)
    requests = []
    for _ in range(count):
        start, steps = src.between(0, 40), []
        for _ in range(src.between(1, 4)):
            d = src.between(1, MAX_RELEASE_STEP)
            steps.append([d, d if src.below(3) == 0 else src.between(1, d)])
        requests.append({"start": start, "steps": steps})
    return {"window": window, "block_size": block_size, "requests": requests}


# --- FP8 index scores ----------------------------------------------------------------------------------------------

FP8_INDEX_BYTES = 16 + 6 * 4 * (1 + 16 + 3) + 25 * (1 + 16 + 3) + 8
"""Enough bytes for the largest FP8 index-score case: 6 queries x 4 heads x 16 dims, 25 key rows."""


def e4m3_code(byte: int, style: int) -> int:
    """A finite e4m3fn code (NaN codes 0x7f / 0xff step down to 0x7e / 0xfe); ``style`` 1: subnormal or zero
    (exponent field 0), 2: within two binades of 1, else any."""
    if style == 1:
        return byte & 0x87
    if style == 2:
        byte = (byte & 0x87) | ((6 + (byte >> 3) % 3) << 3)
    return byte - 1 if byte & 0x7F == 0x7F else byte


def fp8_scale(src: ByteSource, signed: bool) -> float:
    """A float32 scale 2**e * (1 + n / 256), e in [-12, 3]; negative half the time where ``signed``."""
    value = 2.0 ** (src.byte() % 16 - 12) * (1 + src.byte() / 256)
    return -value if signed and src.byte() & 1 else value


@st.composite
def fp8_index_score_cases(draw: st.DrawFn, mode: str) -> dict[str, Any]:
    """``{"q", "q_scale", "weights", "k", "k_scale", "positions", "ratio"}`` for index_scores_fp8: e4m3 codes
    (a row of codes is drawn in one style: subnormal, near 1, or any finite code), positive query scales, key
    scales of either sign; key rows past the largest visible count hold NaN codes and garbage scales. ``mode`` as
    for :func:`index_score_cases`."""
    src = draw(source(FP8_INDEX_BYTES))
    ratio, queries = src.between(1, 4), src.between(1, 6 if mode == "prefill" else 4)
    heads, dim, extra = src.between(1, 4), src.between(1, 16), src.between(0, 3)
    positions, visible = query_positions(src, mode, queries, ratio)

    def codes(n: int) -> list[list[int]]:
        rows = []
        for _ in range(n):
            style = src.below(3)
            rows.append([e4m3_code(src.byte(), style) for _ in range(dim)])
        return rows

    q = [codes(heads) for _ in positions]
    q_scale = [[fp8_scale(src, signed=False) for _ in range(heads)] for _ in positions]
    weights = [[coarse(src.byte()) / 2 for _ in range(heads)] for _ in positions]
    k = codes(visible) + [[0x7F] * dim for _ in range(extra)]
    k_scale = [fp8_scale(src, signed=True) for _ in range(visible)] + [garbage(src.byte() % 4) for _ in range(extra)]
    return {"q": q, "q_scale": q_scale, "weights": weights, "k": k, "k_scale": k_scale, "positions": positions,
            "ratio": ratio}  # fmt: skip


PAGED_FP8_BYTES = PAGED_BYTES + 70 * 8 + 3 * 3 * 4 * 8
"""The paged cases' bytes, and for each cache row its scale and a style byte per code, and a scale per query head."""


@st.composite
def paged_fp8_score_cases(draw: st.DrawFn, mode: str) -> dict[str, Any]:
    """``{"q", "q_scale", "weights", "codes", "scales", "block_table", "lengths", "rows_per_block"}`` for
    paged_index_scores_fp8:
    the paged layout of :func:`paged_score_cases` with e4m3 codes. ``codes[block][row]`` (D ints) and
    ``scales[block][row]``: rows some query reads hold finite codes (one style a row) and a scale of either sign;
    every other row holds NaN codes and a garbage scale. Queries hold codes with positive per-head scales."""
    src = draw(source(PAGED_FP8_BYTES))
    plan = paged_plan(src, mode)
    dim = 4 * -(-plan["dim"] // 4)  # 4 or 8: the contract's D is a multiple of 4
    per_block, read, heads = plan["per_block"], plan["read"], plan["heads"]
    requests, next_n = len(plan["lengths"]), len(plan["lengths"][0])

    def codes_row() -> list[int]:
        style = src.below(3)
        return [e4m3_code(src.byte(), style) for _ in range(dim)]

    codes, scales = [], []
    for block in range(plan["blocks"]):
        rows = [(block, r) in read for r in range(per_block)]
        codes.append([codes_row() if ok else [0x7F] * dim for ok in rows])
        scales.append([fp8_scale(src, signed=True) if ok else garbage(src.byte() % 4) for ok in rows])
    q = [[[codes_row() for _ in range(heads)] for _ in range(next_n)] for _ in range(requests)]
    q_scale = [[[fp8_scale(src, signed=False) for _ in range(heads)] for _ in range(next_n)] for _ in range(requests)]
    weights = [[[coarse(src.byte()) / 2 for _ in range(heads)] for _ in range(next_n)] for _ in range(requests)]
    return {"q": q, "q_scale": q_scale, "weights": weights, "codes": codes, "scales": scales,
            "block_table": plan["block_table"], "lengths": plan["lengths"], "rows_per_block": per_block}  # fmt: skip
