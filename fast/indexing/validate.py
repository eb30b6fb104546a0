"""Host-side checks shared by the torch and Triton indexing implementations.

Every check runs before any launch and raises ValueError / TypeError whose message starts with the argument's
name and states the rule. Checks on tensor *values* (lengths in range, block ids inside the table and the
cache, offsets that keep a lane in int32) reduce on the device and read a few numbers back: one small
device-to-host copy per call. ``validate=False`` on the public functions skips those value checks (not the
dtype / shape / device ones); the kernels still never read out of bounds (see docs/indexing-kernels.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from reference.checks import INT32_MAX, INT64_MAX, fail, require
from reference.conventions import TOPK
from reference.padding import PADDING_LENGTH
from reference.topk import LaneLayout, lane_layout

BACKENDS = ("triton", "torch")


def interpreted() -> bool:
    """True when Triton kernels run in its CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def lane_tiles() -> tuple[int, int]:
    """Rows x lanes per program of the lane-wise kernels (slot translation, gathered rows, window indices,
    candidate restore): small tiles under the interpreter, whose cost is per operation."""
    return (4, 16) if interpreted() else (16, 128)


def tensor(
    x: object,
    argument: str,
    dtypes: tuple[torch.dtype, ...],
    dims: int,
    device: torch.device | None = None,
) -> torch.Tensor:
    """``x`` as a contiguous tensor of one of ``dtypes`` with ``dims`` dimensions (on ``device`` if given)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{argument}: must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in dtypes:
        names = " or ".join(str(d) for d in dtypes)
        raise TypeError(f"{argument}: must have dtype {names}, got {x.dtype}")
    # each message is formatted only on failure: these checks run on every call of every indexing operation
    if x.dim() != dims:
        raise fail(argument, f"must be {dims}-D, got {x.dim()}-D with shape {list(x.shape)}")
    require(x.is_contiguous(), argument, "must be contiguous")
    if device is not None and x.device != device:
        raise fail(argument, f"must be on {device} like the first input, got {x.device}")
    return x


def shape(x: torch.Tensor, expected: tuple[int, ...], argument: str, what: str) -> None:
    if tuple(x.shape) != expected:
        raise fail(argument, f"must have shape {list(expected)} ({what}), got {list(x.shape)}")


def int_arg(value: object, argument: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{argument}: must be an int, got {type(value).__name__}")
    if value < minimum:
        raise fail(argument, f"must be >= {minimum}, got {value}")
    return value


def backend_for(backend: str, device: torch.device) -> str:
    """``backend`` checked against the device: Triton needs CUDA tensors unless it runs interpreted."""
    if backend not in BACKENDS:
        raise fail("backend", f"must be one of {BACKENDS}, got {backend!r}")
    if backend == "triton" and device.type != "cuda" and not interpreted():
        raise fail("backend", f"triton needs CUDA tensors (or TRITON_INTERPRET=1), got tensors on {device}")
    return backend


def lengths_in_range(lengths: torch.Tensor, limit: int, argument: str = "lengths") -> None:
    """Every length in ``[0, limit]``, or -1: a padding row, read as length 0 (``reference.padding``; one
    device-to-host copy)."""
    if lengths.numel() == 0:
        return
    lo, hi = (int(v) for v in torch.stack([lengths.min(), lengths.max()]).tolist())
    require(lo >= PADDING_LENGTH, argument, f"must be >= 0, or -1 for a padding row, got a length of {lo}")
    require(hi <= limit, argument, f"must be <= {limit} (the row width), got a length of {hi}")


def table_covers(
    block_table: torch.Tensor, rows_needed: torch.Tensor, rows_per_block: int, num_blocks: int | None
) -> None:
    """Each request's table names a block in ``[0, num_blocks)`` for every row it reads.

    ``rows_needed[b]``: rows ``0 .. rows_needed[b] - 1`` of request ``b`` are read; table entries past
    ``ceil(rows_needed[b] / rows_per_block)`` are never read and may hold anything (-1 padding).
    """
    if rows_needed.numel() == 0:
        return
    width = block_table.shape[1]
    blocks = (rows_needed.to(torch.int64) + rows_per_block - 1) // rows_per_block
    used = torch.arange(width, device=block_table.device) < blocks.unsqueeze(-1)
    ids = torch.where(used, block_table.to(torch.int64), torch.zeros((), dtype=torch.int64, device=used.device))
    zero = torch.zeros(1, dtype=torch.int64, device=used.device)
    lo_hi = torch.cat([ids.flatten(), zero]).aminmax()
    lo, hi, need = (int(v) for v in torch.stack([lo_hi.min, lo_hi.max, blocks.max()]).tolist())
    require(need <= width, "block_table", f"has {width} entries per request, a request needs {need}")
    require(lo >= 0, "block_table", f"must hold block ids >= 0 for every block read, got {lo}")
    if num_blocks is not None and need > 0:
        require(hi < num_blocks, "block_table", f"names block {hi}, past the cache's {num_blocks} blocks")


# --- per-operation argument checks (shared by naive.py and the Triton modules) ----------------------------------
# Each ``check_<op>`` takes the arguments of the Triton function (its signature and defaults, less ``config`` /
# ``out``) and returns the checked call as a frozen record: the tensors and options as given, then what the
# checks derived. The torch twins in naive.py take ``(*tensors, **options)`` and work on that record.


TopKMode = LaneLayout
TOPK_MODES: dict[str, TopKMode] = {name: lane_layout(c.rule) for name, c in TOPK.items()}
"""How each top-k convention lays out its lanes, from the reference's conventions table."""

INDEX_DTYPES = (torch.int32, torch.int64)


@dataclass(frozen=True)
class TopKArgs:
    """A checked top-k call: its tensors and options as given, then what the checks derived (rows x width of
    the scores, k, output lanes, lane layout, fill value, whether rows are translated / restricted)."""

    scores: torch.Tensor
    lengths: torch.Tensor
    offsets: torch.Tensor | None
    block_table: torch.Tensor | None
    rows_per_block: int | None
    candidate_blocks: torch.Tensor | None
    block_size: int | None
    drop_neg_inf: bool
    drop_nan: bool
    rows: int
    width: int
    k: int
    lanes: int
    mode: TopKMode
    fill: int
    translate: bool
    restrict: bool


def check_topk(
    scores: object,
    lengths: object,
    *,
    k: object,
    convention: str = "v4.1",
    offsets: object = None,
    fill: int | None = None,
    block_table: object = None,
    rows_per_block: int | None = None,
    candidate_blocks: object = None,
    block_size: int | None = None,
    drop_neg_inf: bool = False,
    drop_nan: bool = False,
    validate: bool = True,
) -> TopKArgs:
    """Checks of :func:`fast.indexing.topk.topk` (same arguments and defaults, less ``config`` / ``out``)."""
    if convention not in TOPK_MODES:
        raise fail("convention", f"must be one of {', '.join(TOPK_MODES)}, got {convention!r}")
    mode = TOPK_MODES[convention]
    s = tensor(scores, "scores", (torch.float32,), 2)
    m, n = (int(v) for v in s.shape)
    count = int_arg(k, "k", 0)
    lens = tensor(lengths, "lengths", INDEX_DTYPES, 1, s.device)
    shape(lens, (m,), "lengths", "one visible count per score row")
    lanes = count if mode.fixed else min(count, n)
    empty = mode.fill if fill is None else int_arg(fill, "fill", -(2**31))
    translate = block_table is not None
    if translate:
        require(offsets is None, "offsets", "must be None when rows are translated to slots (no gathered offset)")
        table = tensor(block_table, "block_table", INDEX_DTYPES, 2, s.device)
        if table.shape[0] != m:
            raise fail("block_table", f"must have one row per score row ({m}), got {table.shape[0]}")
        per_block = int_arg(rows_per_block, "rows_per_block", 1)
    elif offsets is not None:
        off = tensor(offsets, "offsets", INDEX_DTYPES, 1, s.device)
        shape(off, (m,), "offsets", "one offset per score row")
    restrict = candidate_blocks is not None
    if restrict:
        cand = tensor(candidate_blocks, "candidate_blocks", INDEX_DTYPES, 2, s.device)
        if cand.shape[0] != m:
            raise fail("candidate_blocks", f"must have one row per score row ({m}), got {cand.shape[0]}")
        int_arg(block_size, "block_size", 1)
    if validate and m:
        lengths_in_range(lens, n)
        if mode.whole_row:
            require(
                bool((lens == n).all()),
                "lengths",
                f"v4-decode scores exactly the visible rows: each must be {n} (a padding row, -1, has no answer there)",
            )
        if translate:
            table_covers(table, lens, per_block, None)
        elif offsets is not None:
            lo, hi = (int(v) for v in torch.stack([off.min(), (off.to(torch.int64) + n).max()]).tolist())
            require(lo >= 0, "offsets", f"must be >= 0, got {lo}")
            require(hi <= INT32_MAX, "offsets", f"offset + row width must stay <= {INT32_MAX} (int32 lanes), got {hi}")
            if empty >= 0:
                require(empty >= hi, "fill", f"must be negative or >= offset + row width ({hi}) so no row reads as it")
        if restrict and cand.numel():
            require(int(cand.min()) >= -1, "candidate_blocks", "must hold block ids >= 0 or -1 (padding)")
    if not translate and offsets is None and empty >= 0:
        if empty < n:
            raise fail("fill", f"must be negative or >= the row width {n} so no row reads as it, got {empty}")
    return TopKArgs(
        scores=s,
        lengths=lens,
        offsets=off if offsets is not None else None,
        block_table=table if translate else None,
        rows_per_block=rows_per_block,
        candidate_blocks=cand if restrict else None,
        block_size=block_size,
        drop_neg_inf=drop_neg_inf,
        drop_nan=drop_nan,
        rows=m,
        width=n,
        k=count,
        lanes=lanes,
        mode=mode,
        fill=empty,
        translate=translate,
        restrict=restrict,
    )


@dataclass(frozen=True)
class LogitsArgs:
    """A checked index-logits call: its tensors as given (``k``: the keys), then the sizes and key kind."""

    q: torch.Tensor
    weights: torch.Tensor
    k: torch.Tensor
    lengths: torch.Tensor
    k_scale: torch.Tensor | None
    queries: int
    rows: int
    heads: int
    dim: int
    fp8: bool
    q_scale: torch.Tensor | None = None
    q8: bool = False


KEY_DTYPES = (torch.float32, torch.bfloat16)
FP8_DTYPES = (torch.uint8, torch.float8_e4m3fn)


def positive_scales(scale: torch.Tensor, argument: str) -> None:
    """Query scales are positive and finite: ``relu(s * x) = s * relu(x)`` then holds, so a kernel may fold them
    into the head weights (``fast.indexing.logits``, FP8 queries)."""
    if scale.numel():
        require(bool((scale > 0).all() & scale.isfinite().all()), argument, "every scale must be positive and finite")


def query_scale(q_scale: object, q: torch.Tensor, fp8_keys: bool) -> torch.Tensor | None:
    """FP8 queries: ``q`` holds e4m3 codes and ``q_scale`` one float32 scale per (query, head); they go with FP8
    keys only. Otherwise ``q_scale`` is None."""
    if q_scale is None:
        return None
    require(fp8_keys, "q_scale", "FP8 queries need FP8 keys (an FP8 cache, or k with k_scale)")
    scale = tensor(q_scale, "q_scale", (torch.float32,), q.dim() - 1, q.device)
    shape(scale, tuple(q.shape[:-1]), "q_scale", "one scale per query head")
    return scale


def check_logits(
    q: object,
    weights: object,
    k: object,
    lengths: object,
    *,
    k_scale: object = None,
    q_scale: object = None,
    validate: bool = True,
) -> LogitsArgs:
    """Checks of :func:`fast.indexing.logits.index_logits` (same arguments and defaults, less ``config`` /
    ``out``)."""
    qt = tensor(q, "q", FP8_DTYPES if q_scale is not None else KEY_DTYPES, 3)
    m, h, d = (int(v) for v in qt.shape)
    require(h > 0 and d > 0, "q", f"must have at least one head and one dimension, got {list(qt.shape)}")
    w = tensor(weights, "weights", (torch.float32, torch.bfloat16), 2, qt.device)
    shape(w, (m, h), "weights", "one weight per query head")
    fp8 = k_scale is not None
    qs = query_scale(q_scale, qt, fp8)
    kt = tensor(k, "k", FP8_DTYPES if fp8 else (qt.dtype,), 2, qt.device)
    require(kt.shape[1] == d, "k", f"must have {d} columns (the head dimension of q), got {kt.shape[1]}")
    if fp8:
        require(qs is not None or qt.dtype == torch.bfloat16, "q", "must be bfloat16 against FP8 keys")
        sc = tensor(k_scale, "k_scale", (torch.float32,), 1, qt.device)
        shape(sc, (kt.shape[0],), "k_scale", "one scale per key row")
    lens = tensor(lengths, "lengths", INDEX_DTYPES, 1, qt.device)
    shape(lens, (m,), "lengths", "one visible count per query")
    if validate:
        lengths_in_range(lens, int(kt.shape[0]))
        if qs is not None:
            positive_scales(qs, "q_scale")
    return LogitsArgs(qt, w, kt, lens, sc if fp8 else None, m, int(kt.shape[0]), h, d, fp8, qs, qs is not None)


@dataclass(frozen=True)
class PagedArgs:
    """A checked paged-logits call: its tensors and rows per block as given, then the sizes (``width``: the
    output's lanes) and the cache kind."""

    q: torch.Tensor
    weights: torch.Tensor
    cache: torch.Tensor
    block_table: torch.Tensor
    lengths: torch.Tensor
    rows_per_block: int
    requests: int
    next_n: int
    heads: int
    dim: int
    width: int
    num_blocks: int
    fp8: bool
    q_scale: torch.Tensor | None = None
    q8: bool = False


def check_paged(
    q: object,
    weights: object,
    cache: object,
    block_table: object,
    lengths: object,
    *,
    rows_per_block: object,
    width: int | None = None,
    q_scale: object = None,
    validate: bool = True,
) -> PagedArgs:
    """Checks of :func:`fast.indexing.logits.paged_index_logits` (same arguments and defaults, less ``config``
    / ``out``)."""
    qt = tensor(q, "q", FP8_DTYPES if q_scale is not None else (torch.bfloat16, torch.float32), 4)
    b, t, h, d = (int(v) for v in qt.shape)
    require(h > 0 and d > 0 and t > 0, "q", f"must be [B, next_n, H, D] with positive sizes, got {list(qt.shape)}")
    w = tensor(weights, "weights", (torch.float32, torch.bfloat16), 3, qt.device)
    shape(w, (b, t, h), "weights", "one weight per query head")
    per_block = int_arg(rows_per_block, "rows_per_block", 1)
    if not isinstance(cache, torch.Tensor):
        raise TypeError(f"cache: must be a torch.Tensor, got {type(cache).__name__}")
    fp8 = cache.dtype == torch.uint8
    qs = query_scale(q_scale, qt, fp8)
    if fp8:
        c = tensor(cache, "cache", (torch.uint8,), 2, qt.device)
        require(qs is not None or qt.dtype == torch.bfloat16, "q", "must be bfloat16 against an FP8 cache")
        require(d % 4 == 0, "q", f"head dimension must be a multiple of 4 for the FP8 layout, got {d}")
        row_bytes = d + 4
        require(
            c.shape[1] == per_block * row_bytes,
            "cache",
            f"must be [num_blocks, {per_block * row_bytes}] (rows_per_block x ({d} e4m3 + 4 scale bytes)), "
            f"got {list(c.shape)}",
        )
    else:
        c = tensor(cache, "cache", (qt.dtype,), 3, qt.device)
        require(
            tuple(c.shape[1:]) == (per_block, d),
            "cache",
            f"must be [num_blocks, {per_block}, {d}], got {list(c.shape)}",
        )
    table = tensor(block_table, "block_table", INDEX_DTYPES, 2, qt.device)
    require(table.shape[0] == b, "block_table", f"must have one row per request ({b}), got {table.shape[0]}")
    lens = tensor(lengths, "lengths", INDEX_DTYPES, 2, qt.device)
    shape(lens, (b, t), "lengths", "one visible count per query")
    out_width = int(table.shape[1]) * per_block if width is None else int_arg(width, "width", 0)
    if validate:
        lengths_in_range(lens, min(out_width, int(table.shape[1]) * per_block))
        table_covers(table, lens.amax(dim=1) if t else lens[:, 0], per_block, int(c.shape[0]))
        if qs is not None:
            positive_scales(qs, "q_scale")
    return PagedArgs(qt, w, c, table, lens, per_block, b, t, h, d, out_width, int(c.shape[0]), fp8, qs, qs is not None)


@dataclass(frozen=True)
class CandidateArgs:
    """A checked candidate-select call: its tensors and options as given, and the block count
    ``ceil(N / block_size)``."""

    scores: torch.Tensor
    lengths: torch.Tensor
    block_size: int
    topk_blocks: int
    pin_newest: bool
    drop_nan: bool
    blocks: int


def check_candidates(
    scores: object,
    lengths: object,
    *,
    block_size: object,
    topk_blocks: object,
    pin_newest: bool = True,
    drop_nan: bool = True,
    validate: bool = True,
) -> CandidateArgs:
    """Checks of :func:`fast.indexing.candidates.candidate_select` (same arguments and defaults)."""
    s = tensor(scores, "scores", (torch.float32,), 2)
    lens = tensor(lengths, "lengths", INDEX_DTYPES, 1, s.device)
    shape(lens, (int(s.shape[0]),), "lengths", "one visible count per score row")
    size = int_arg(block_size, "block_size", 1)
    count = int_arg(topk_blocks, "topk_blocks", 0)
    if validate:
        lengths_in_range(lens, int(s.shape[1]))
    return CandidateArgs(s, lens, size, count, pin_newest, drop_nan, -(-int(s.shape[1]) // size))


@dataclass(frozen=True)
class RestoreArgs:
    """A checked candidate-restore call: its tensors and block size as given."""

    offsets: torch.Tensor
    candidate_blocks: torch.Tensor
    block_size: int
    visible: torch.Tensor | None


def check_restore(
    offsets: object, candidate_blocks: object, *, block_size: object, visible: object = None, validate: bool = True
) -> RestoreArgs:
    """Checks of :func:`fast.indexing.candidates.candidate_restore` (same arguments and defaults)."""
    o = tensor(offsets, "offsets", INDEX_DTYPES, 2)
    c = tensor(candidate_blocks, "candidate_blocks", INDEX_DTYPES, 2, o.device)
    require(c.shape[0] == o.shape[0], "candidate_blocks", f"must have one row per offsets row ({o.shape[0]})")
    size = int_arg(block_size, "block_size", 1)
    v: torch.Tensor | None = None
    if visible is not None:
        v = tensor(visible, "visible", INDEX_DTYPES, 1, o.device)
        shape(v, (int(o.shape[0]),), "visible", "one visible count per row")
    if validate and o.numel():
        span = int(c.shape[1]) * size
        lo, hi = (int(x) for x in torch.stack([o.min(), o.max()]).tolist())
        require(lo >= -1, "offsets", f"must be -1 or in [0, {span}), got {lo}")
        require(hi < span, "offsets", f"must be -1 or in [0, {span}) (candidate blocks x block_size), got {hi}")
    if validate and c.numel():
        require(int(c.min()) >= -1, "candidate_blocks", "must hold block ids >= 0 or -1 (padding)")
        require(int(c.max()) * size + size - 1 <= INT32_MAX, "candidate_blocks", "restored rows must fit in int32")
    return RestoreArgs(o, c, size, v)


@dataclass(frozen=True)
class RemapArgs:
    """A checked candidate-remap call: its tensors and block size as given."""

    columns: torch.Tensor
    candidate_blocks: torch.Tensor
    lengths: torch.Tensor
    block_size: int


def check_remap(
    columns: object, candidate_blocks: object, lengths: object, *, block_size: object, validate: bool = True
) -> RemapArgs:
    """Checks of :func:`fast.indexing.candidates.candidate_remap` (same arguments and defaults)."""
    c = tensor(columns, "columns", INDEX_DTYPES, 2)
    b = tensor(candidate_blocks, "candidate_blocks", INDEX_DTYPES, 2, c.device)
    n = tensor(lengths, "lengths", INDEX_DTYPES, 1, c.device)
    require(b.shape[0] == c.shape[0], "candidate_blocks", f"must have one row per columns row ({c.shape[0]})")
    shape(n, (int(c.shape[0]),), "lengths", "one length per row")
    size = int_arg(block_size, "block_size", 1)
    if validate and c.numel():
        require(int(c.min()) >= -1, "columns", f"must be -1 or a column >= 0, got {int(c.min())}")
    if validate and n.numel():
        require(int(n.min()) >= 0, "lengths", f"must be >= 0, got {int(n.min())}")
        require(int(n.max()) <= INT32_MAX, "lengths", "positions must fit in int32")
    if validate and b.numel():
        require(int(b.min()) >= -1, "candidate_blocks", "must hold block ids >= 0 or -1 (padding)")
        ordered = b.sort(dim=1).values
        twice = (ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)
        require(not bool(twice.any()), "candidate_blocks", "must not name a block twice in a row")
    return RemapArgs(c, b, n, size)


@dataclass(frozen=True)
class SlotArgs:
    """A checked slot-translation call: its tensors and rows per block as given."""

    rows: torch.Tensor
    block_table: torch.Tensor
    lengths: torch.Tensor
    rows_per_block: int


def check_slots(
    rows: object,
    block_table: object,
    lengths: object,
    *,
    rows_per_block: object,
    guard: str = "sentinel",
    validate: bool = True,
) -> SlotArgs:
    """Checks of :func:`fast.indexing.addressing.slot_translation` (same arguments and defaults)."""
    require(guard in ("sentinel", "count"), "guard", f"must be 'sentinel' or 'count', got {guard!r}")
    r = tensor(rows, "rows", INDEX_DTYPES, 2)
    table = tensor(block_table, "block_table", INDEX_DTYPES, 2, r.device)
    lens = tensor(lengths, "lengths", INDEX_DTYPES, 1, r.device)
    m, lanes = (int(v) for v in r.shape)
    require(table.shape[0] == m, "block_table", f"must have one row per request ({m}), got {table.shape[0]}")
    shape(lens, (m,), "lengths", "one valid-lane count per request")
    per_block = int_arg(rows_per_block, "rows_per_block", 1)
    checked = SlotArgs(r, table, lens, per_block)
    if not validate or m == 0:
        return checked
    lengths_in_range(lens, lanes)
    live = torch.arange(lanes, device=r.device) < lens.to(torch.int64).unsqueeze(-1)
    rr = r.to(torch.int64)
    if guard == "count":
        bad = live & (rr < 0)
        require(not bool(bad.any()), "rows", "a lane below lengths (the count guard) must hold a row >= 0")
    else:
        bad = live & (rr < -1)
        require(not bool(bad.any()), "rows", "must hold rows >= 0 or -1 (no row)")
    read = live & (rr >= 0)
    need = torch.where(read, rr + 1, torch.zeros_like(rr)).amax(dim=1) if lanes else lens.to(torch.int64) * 0
    table_covers(table, need, per_block, None)
    if table.numel():
        top = int(table.to(torch.int64).max()) * per_block + per_block - 1
        require(top <= INT64_MAX, "block_table", "slots must fit in int64")
    return checked


def check_gathered(rows: object, offsets: object, validate: bool) -> None:
    """Checks of :func:`fast.indexing.addressing.gathered_rows`."""
    r = tensor(rows, "rows", INDEX_DTYPES, 2)
    o = tensor(offsets, "offsets", INDEX_DTYPES, 1, r.device)
    shape(o, (int(r.shape[0]),), "offsets", "one offset per request")
    if validate and r.numel():
        require(int(r.min()) >= -1, "rows", "must hold rows >= 0 or -1 (no row)")
    if validate and o.numel():
        require(int(o.min()) >= 0, "offsets", "must be >= 0")


def check_window(window: object, seqlen: object, start_pos: object, order: str) -> tuple[int, int, int]:
    """Checks of :func:`fast.indexing.window.window_indices`; returns ``(window, seqlen, start_pos)``."""
    require(order in ("v4", "v4.1"), "order", f"must be 'v4' or 'v4.1', got {order!r}")
    w = int_arg(window, "window", 1)
    n = int_arg(seqlen, "seqlen", 0)
    p = int_arg(start_pos, "start_pos", 0)
    require(p == 0 or n == 1, "seqlen", f"a decode step (start_pos > 0) has one query, got {n}")
    require(p <= INT32_MAX, "start_pos", f"must fit int32, got {p}")
    return w, n, p


@dataclass(frozen=True)
class ReleaseArgs:
    """A checked window-release call: its tensors and sizes as given."""

    seq_lens: torch.Tensor
    step_lens: torch.Tensor
    window: int
    block_size: int


def check_release(
    seq_lens: object, step_lens: object, *, window: object, block_size: object, validate: bool = True
) -> ReleaseArgs:
    """Checks of :func:`fast.indexing.window.window_release` (same arguments and defaults)."""
    seq = tensor(seq_lens, "seq_lens", INDEX_DTYPES, 1)
    step = tensor(step_lens, "step_lens", INDEX_DTYPES, 1, seq.device)
    shape(step, tuple(seq.shape), "step_lens", "one step length per request")
    w = int_arg(window, "window", 1)
    b = int_arg(block_size, "block_size", 1)
    if validate and seq.numel():
        d = step.to(torch.int64)
        lo_step, slack = (int(x) for x in torch.stack([d.min(), (seq.to(torch.int64) - d).min()]).tolist())
        require(lo_step >= 1, "step_lens", f"must be >= 1 (a step writes at least one position), got {lo_step}")
        require(slack >= 0, "seq_lens", "must be >= step_lens (the tentative length counts the step's positions)")
    return ReleaseArgs(seq, step, w, b)


def check_compressed(ratio: object, seqlen: object, start_pos: object, offset: object) -> tuple[int, int, int, int]:
    """Checks of :func:`fast.indexing.compressed.compressed_indices`; returns ``(ratio, seqlen, start_pos,
    offset)``. Positions and lanes must fit int32."""
    r = int_arg(ratio, "ratio", 1)
    n = int_arg(seqlen, "seqlen", 0)
    p = int_arg(start_pos, "start_pos", 0)
    o = int_arg(offset, "offset", 0)
    require(p + n <= INT32_MAX, "seqlen", f"start_pos + seqlen must fit int32, got {p + n}")
    width = (p + n) // r
    require(o + width <= INT32_MAX, "offset", f"offset + the {width} rows must stay <= {INT32_MAX} (int32 lanes)")
    return r, n, p, o


def output(out: torch.Tensor | None, shape_: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``out`` checked to be a contiguous ``dtype`` tensor of ``shape_`` on ``device``, or a new empty one."""
    if out is None:
        return torch.empty(shape_, dtype=dtype, device=device)
    tensor(out, "out", (dtype,), len(shape_), device)
    shape(out, shape_, "out", "the result's shape")
    return out
