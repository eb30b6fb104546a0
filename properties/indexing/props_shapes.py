"""The indexing operations on the shape ladder (``properties.ladder``): small shapes most of the time, tile
boundaries in a fixed share of draws, production shapes on a GPU; inputs as non-contiguous views wherever the
contract allows them (``properties.strided``).

An example is a few sizes and a ``seed`` the check expands into tensors, so a large example stays small to print
and to shrink. The judge scales: the area's torch implementation without a fault (``properties.indexing.faulty``,
checked against the exact reference by every indexing property in ``test_support.py``) gives the expected
lanes, exactly for the integer outputs; index scores (flat, FP8 and paged) are compared within an a-priori
float32 bound of a float64 evaluation. The exact reference never runs on these shapes, so the reference adapters are
not judged here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from hypothesis import strategies as st

from properties.compare import Mismatch
from properties.contract import operation
from properties.indexing import faulty
from properties.indexing.mutants import bound
from properties.ladder import base_conventions, choice, generator, ladder, sample, shapes
from properties.presets import EXAMPLES, preset
from properties.registry import Implementation
from properties.runner import Property
from properties.strided import ORIGINS, assert_same, run_with_views, with_layouts
from reference.conventions import parse
from reference.indexing import E4M3_DOT_BOUND
from reference.topk import lane_layout

Example = dict[str, Any]


def _lengths(g: torch.Generator, rows: int, width: int, padding: bool = True) -> torch.Tensor:
    """Per row: the full width (most often), a drawn length, 0, or -1 (a padding row)."""
    kind = torch.randint(8, (rows,), generator=g)
    drawn = torch.randint(width + 1, (rows,), generator=g)
    out = torch.where(kind < 4, width, torch.where(kind < 6, drawn, 0))
    if padding:
        out = torch.where(kind == 7, -1, out)
    return out.to(torch.int32)


def _scores(g: torch.Generator, rows: int, width: int, lengths: torch.Tensor) -> torch.Tensor:
    """Multiples of 1/4 in [-4, 4] (ties are common) in the valid prefix, every other row on a ramp rising to its
    end (the best lanes last); NaN / +inf / huge past it."""
    values = torch.randint(-16, 17, (rows, width), generator=g).float() / 4
    values += torch.arange(width) * torch.randint(2, (rows, 1), generator=g)
    junk = torch.tensor([float("nan"), float("inf"), 3e38])[torch.randint(3, (rows, width), generator=g)]
    valid = torch.arange(width) < lengths.clamp_min(0).unsqueeze(-1)
    return torch.where(valid, values, junk)


def _ladder_property(
    name: str,
    op: str,
    sizes: st.SearchStrategy[Example],
    check: Callable[[Implementation, Example], None],
    doc: str,
) -> Property:
    strategy = with_layouts(sizes, operation(op).views)
    return Property(
        name, op, strategy, check, examples=EXAMPLES[name], doc=doc, origins=ORIGINS, conventions=base_conventions(op)
    )


def _run(impl: Implementation, tensors: dict[str, torch.Tensor], case: Example, **options: Any) -> Any:
    return run_with_views(impl, tensors, case["layouts"], **options)


def _oracle(impl: Implementation) -> Callable[..., Any]:
    """The torch implementation without a fault, under ``impl``'s convention (options included)."""
    return bound(impl.op, impl.convention, faulty.NO_FAULTS)


JUDGED_ROWS = 8
"""Rows a judge checks exactly when the oracle's cost grows with every row (``properties.ladder.sample``)."""


def _take(got: Any, rows: torch.Tensor) -> Any:
    """The judged rows of an output (as it is, when it is not a tensor of at least that many rows)."""
    if isinstance(got, torch.Tensor) and got.dim() >= 1 and got.shape[0] > (int(rows.max()) if len(rows) else -1):
        return got.detach().cpu()[rows]
    return got


def _rows(judged: torch.Tensor, total: int) -> str:
    return "all" if len(judged) == total else str(judged.tolist())


# --- top-k ---------------------------------------------------------------------------------------------------------


def check_topk(impl: Implementation, case: Example) -> None:
    convention = impl.convention or ""
    g = generator(case)
    rows, width, k = case["rows"], case["width"], case["k"]
    whole_row = lane_layout(parse("topk", convention).rule).whole_row
    lengths = torch.full((rows,), width, dtype=torch.int32) if whole_row else _lengths(g, rows, width)
    scores = _scores(g, rows, width, lengths)
    offsets = torch.where(torch.arange(rows) % 3 == 2, 2**31 - 2 - width, torch.arange(rows) * 7).to(torch.int32)
    tensors = {"scores": scores, "lengths": lengths, "offsets": offsets}
    got = _run(impl, tensors, case, k=k)
    judged = sample(case, rows, JUDGED_ROWS)
    expected = _oracle(impl)(scores[judged], lengths[judged], offsets[judged], k=k)
    what = f"topk[{convention}] lanes of rows {_rows(judged, rows)} vs the torch oracle ({rows} x {width}, k {k})"
    assert_same(expected, _take(got, judged), what)


# --- candidate blocks ----------------------------------------------------------------------------------------------

BLOCK_SIZES = (2, 4, 8)


def check_candidates(impl: Implementation, case: Example) -> None:
    convention = impl.convention or ""
    g = generator(case)
    rows, width, slots = case["rows"], case["width"], case["k"]
    block_size = preset(case, "block_size", BLOCK_SIZES[choice(g, len(BLOCK_SIZES))])
    lengths = _lengths(g, rows, width)
    scores = _scores(g, rows, width, lengths)
    tensors = {"scores": scores, "lengths": lengths}
    got = _run(impl, tensors, case, block_size=block_size, topk_blocks=slots)
    judged = sample(case, rows, JUDGED_ROWS)
    expected = _oracle(impl)(scores[judged], lengths[judged], block_size=block_size, topk_blocks=slots)
    got = _take(got, judged)
    what = f"candidate_select[{convention}] vs the torch oracle ({rows} x {width}, block {block_size}, {slots} slots)"
    assert_same(expected, got, what)


def _candidate_blocks(g: torch.Generator, rows: int, slots: int) -> torch.Tensor:
    """Per row, ``slots`` distinct block ids below ``4 slots + 1`` in random order, one in eight -1 (padding)."""
    ids = torch.stack([torch.randperm(4 * slots + 1, generator=g)[:slots] for _ in range(rows)]).reshape(rows, slots)
    return torch.where(torch.randint(8, (rows, slots), generator=g) == 0, -1, ids).to(torch.int32)


def check_restore(impl: Implementation, case: Example) -> None:
    g = generator(case)
    rows, lanes, slots = case["rows"], case["k"], case["slots"]
    block_size = preset(case, "block_size", BLOCK_SIZES[choice(g, len(BLOCK_SIZES))])
    blocks = _candidate_blocks(g, rows, slots)
    span = max(slots * block_size, 1)
    offsets = torch.randint(span, (rows, lanes), generator=g)
    offsets = torch.where((torch.randint(8, (rows, lanes), generator=g) == 0) | (slots == 0), -1, offsets)
    tensors = {"offsets": offsets.to(torch.int32), "candidate_blocks": blocks}
    got = _run(impl, tensors, case, block_size=block_size)
    expected = _oracle(impl)(tensors["offsets"], blocks, block_size=block_size)
    assert_same(expected, got, f"candidate_restore vs the torch oracle ({rows} x {lanes} lanes, {slots} blocks)")


def check_remap(impl: Implementation, case: Example) -> None:
    g = generator(case)
    rows, lanes, slots = case["rows"], case["k"], case["slots"]
    block_size = preset(case, "block_size", BLOCK_SIZES[choice(g, len(BLOCK_SIZES))])
    blocks = _candidate_blocks(g, rows, slots)
    top = (4 * slots + 1) * block_size  # past every block: all of them visible
    kind = torch.randint(4, (rows,), generator=g)
    lengths = torch.where(kind == 0, 0, torch.where(kind == 1, torch.randint(top + 1, (rows,), generator=g), top))
    starts = blocks.to(torch.int64) * block_size
    counts = ((lengths.unsqueeze(-1) - starts).clamp(0, block_size) * (blocks >= 0)).sum(dim=1)
    columns = (torch.rand(rows, lanes, generator=g) * counts.unsqueeze(-1)).to(torch.int64)
    columns = torch.where(
        (torch.randint(8, (rows, lanes), generator=g) == 0) | (counts.unsqueeze(-1) == 0), -1, columns
    )
    tensors = {"columns": columns.to(torch.int32), "candidate_blocks": blocks, "lengths": lengths.to(torch.int32)}
    got = _run(impl, tensors, case, block_size=block_size)
    if not (isinstance(got, tuple | list) and len(got) == 2):
        raise Mismatch("candidate_remap", detail=f"must return (positions, counts), got {type(got).__name__}")
    expected = _oracle(impl)(*tensors.values(), block_size=block_size)
    what = f"vs the torch oracle ({rows} x {lanes} columns, {slots} blocks of {block_size})"
    assert_same(expected[1], got[1], f"candidate_remap counts {what}")
    assert_same(expected[0], got[0], f"candidate_remap positions {what}")


# --- addresses -----------------------------------------------------------------------------------------------------

SLOT_SHAPES = ((64, 4), (64, 1), (256, 4), (128, 128), (8, 2))
"""(block_size, ratio): the production pages (64 rows; 256 positions of a ratio-4 layer) and small ones."""


def check_slots(impl: Implementation, case: Example) -> None:
    convention = impl.convention or ""
    g = generator(case)
    requests, lanes, columns = case["requests"], case["lanes"], case["columns"]
    block_size, ratio = SLOT_SHAPES[choice(g, len(SLOT_SHAPES))]
    if "ratio" in case:  # a preset's layer: pages of 64 compressed rows
        block_size, ratio = 64 * case["ratio"], case["ratio"]
    per_block = block_size // ratio
    table = torch.randperm(requests * columns * 2, generator=g)[: requests * columns].reshape(requests, columns)
    rows = torch.randint(columns * per_block, (requests, lanes), generator=g)
    holes = torch.randint(8, (requests, lanes), generator=g) == 0
    lengths = _lengths(g, requests, lanes)
    if convention == "sentinel":
        lengths = torch.where(lengths == -1, -1, lanes).to(torch.int32)
    else:  # lanes below the count hold rows; past it, garbage
        holes &= torch.arange(lanes) >= lengths.unsqueeze(-1)
    rows = torch.where(holes, -1, rows).to(torch.int32)
    tensors = {"rows": rows, "block_table": table.to(torch.int32), "lengths": lengths}
    got = _run(impl, tensors, case, block_size=block_size, ratio=ratio)
    expected = _oracle(impl)(rows, tensors["block_table"], lengths, block_size=block_size, ratio=ratio)
    what = f"slot_translation[{convention}] vs the torch oracle ({requests} x {lanes} lanes, {columns} columns)"
    assert_same(expected, got, what)


def check_gathered(impl: Implementation, case: Example) -> None:
    g = generator(case)
    requests, lanes = case["requests"], case["lanes"]
    rows = torch.randint(1 << 20, (requests, lanes), generator=g)
    rows = torch.where(torch.randint(4, (requests, lanes), generator=g) == 0, -1, rows).to(torch.int32)
    offsets = torch.randint(1 << 20, (requests,), generator=g) * (torch.arange(requests) % 2 * 4096 + 1)
    tensors = {"rows": rows, "offsets": offsets.to(torch.int64)}
    got = _run(impl, tensors, case)
    expected = _oracle(impl)(rows, tensors["offsets"])
    assert_same(expected, got, f"gathered_rows vs the torch oracle ({requests} x {lanes} lanes)")


def check_window(impl: Implementation, case: Example) -> None:
    convention = impl.convention or ""
    g = generator(case)
    window, seqlen = case["window"], case["seqlen"]
    start = 0 if choice(g, 2) == 0 else 1 + choice(g, 3 * window)
    seqlen = 1 if start else seqlen
    got = impl.fn(window=window, seqlen=seqlen, start_pos=start)
    expected = _oracle(impl)(window=window, seqlen=seqlen, start_pos=start)
    assert_same(expected, got, f"window_indices[{convention}] vs the torch oracle (window {window}, start {start})")


COMPRESSED_RATIOS = (1, 2, 4, 128)


def check_compressed(impl: Implementation, case: Example) -> None:
    g = generator(case)
    ratio = preset(case, "ratio", COMPRESSED_RATIOS[choice(g, len(COMPRESSED_RATIOS))])
    seqlen, start = case["seqlen"], choice(g, 3) * choice(g, 2 * ratio + 1)
    offset = choice(g, 1 << 20)
    got = impl.fn(ratio=ratio, seqlen=seqlen, start_pos=start, offset=offset)
    expected = _oracle(impl)(ratio=ratio, seqlen=seqlen, start_pos=start, offset=offset)
    assert_same(expected, got, f"compressed_indices vs the torch oracle (ratio {ratio}, {seqlen} queries from {start})")


def check_release(impl: Implementation, case: Example) -> None:
    g = generator(case)
    requests = case["requests"]
    window, block_size = (128, 64) if choice(g, 2) else (1 + choice(g, 12), 1 + choice(g, 8))
    if "window" in case:
        window, block_size = case["window"], 64
    steps = 1 + torch.randint(16, (requests,), generator=g)
    seq = steps + torch.randint(1 << 16, (requests,), generator=g)
    tensors = {"seq_lens": seq.to(torch.int32), "step_lens": steps.to(torch.int32)}
    got = _run(impl, tensors, case, window=window, block_size=block_size)
    expected = _oracle(impl)(tensors["seq_lens"], tensors["step_lens"], window=window, block_size=block_size)
    assert_same(expected, got, f"window_release vs the torch oracle ({requests} requests)")


# --- index scores --------------------------------------------------------------------------------------------------

FLOAT32_EPSILON = 2.0**-24
JUDGED_KEYS = 4096
"""Key columns the float64 check evaluates (all of them up to this many)."""


def check_index_scores(impl: Implementation, case: Example) -> None:
    """Every visible lane within twice the a-priori bound of float32 accumulation, ``(H D + 2) u sum |terms|``,
    of the float64 value (on sampled queries and keys where there are many); lanes past a query's visible rows
    are not compared."""
    g = generator(case)
    queries, heads, dim, keys = case["queries"], case["heads"], case["dim"], case["keys"]
    ratio = (1, 2, 4)[choice(g, 3)]
    dtype = (torch.float32, torch.bfloat16)[choice(g, 2)]
    q = (torch.randint(-255, 256, (queries, heads, dim), generator=g).float() / 64).to(dtype)
    k = (torch.randint(-255, 256, (keys, dim), generator=g).float() / 64).to(dtype)
    weights = torch.randint(-8, 9, (queries, heads), generator=g).float() / 4
    reach = (keys + 1) * ratio - 1  # the positions whose visible rows all exist
    positions = torch.randint(max(reach, 1), (queries,), generator=g)
    padding = (torch.randint(16, (queries,), generator=g) == 0) | (reach == 0)
    positions = torch.where(padding, -1, positions).to(torch.int32)
    tensors = {"q": q, "weights": weights, "k": k, "positions": positions}
    got = _run(impl, tensors, case, ratio=ratio)
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != (queries, keys):
        raise Mismatch("index_scores output", detail=f"expected a f32 tensor of shape {(queries, keys)}, got {got!r}")
    rows, cols = sample(case, queries, JUDGED_ROWS), sample(case, keys, JUDGED_KEYS)
    exact, magnitude = _float64_scores(q[rows], k[cols], weights[rows])
    bound = 2 * (heads * dim + 2) * FLOAT32_EPSILON * magnitude
    visible = cols < ((positions[rows].long() + 1) // ratio).unsqueeze(-1)
    what = f"index_scores vs float64 ({queries} queries, {heads} heads, dim {dim}, {keys} keys, ratio {ratio})"
    _within_bound(got, exact, bound, visible, rows, cols, what, "twice the float32 accumulation bound")


def _float64_scores(q: torch.Tensor, k: torch.Tensor, weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``sum_h w relu(q_h . k)`` and its magnitude ``sum_h |w| |q_h| . |k|`` in float64, f64[M, N]; ``k`` is
    [N, D] (every query's keys) or [M, N, D] (each query its own)."""
    q64, k64, w64 = q.double(), k.double(), weights.double().unsqueeze(-1)
    spec = "mhd,mnd->mhn" if k.dim() == 3 else "mhd,nd->mhn"
    exact = (torch.einsum(spec, q64, k64).clamp_min(0) * w64).sum(dim=1)
    magnitude = (torch.einsum(spec, q64.abs(), k64.abs()) * w64.abs()).sum(dim=1)
    return exact, magnitude


def _within_bound(
    got: torch.Tensor,
    exact: torch.Tensor,
    bound: torch.Tensor,
    visible: torch.Tensor,
    rows: torch.Tensor,
    cols: torch.Tensor,
    what: str,
    rule: str,
) -> None:
    """The judged lanes (``rows`` x ``cols``) of ``got`` within ``bound`` of ``exact`` wherever ``visible``."""
    got = got.detach().cpu()[rows][:, cols]
    bad = visible & ~((got.double() - exact).abs() <= bound)
    if bool(bad.any()):
        where = bad.nonzero()[:12].tolist()
        lanes = [((int(rows[a]), int(cols[b])), exact[a, b].item(), got[a, b].item()) for a, b in where]
        raise Mismatch(what, lanes, detail=f"{int(bad.sum())} visible lanes beyond {rule}")


E4M3_FINITE = torch.tensor([c for c in range(256) if c & 0x7F != 0x7F], dtype=torch.uint8)
"""Every e4m3fn code but the two NaN codes."""


def check_index_scores_fp8(impl: Implementation, case: Example) -> None:
    """Every visible lane within ``E4M3_DOT_BOUND`` (2**-8) of the lane's magnitude, plus the float32
    accumulation bound, of the float64 value of the decoded codes (on sampled queries and keys where there are
    many)."""
    g = generator(case)
    queries, heads, dim, keys = case["queries"], case["heads"], case["dim"], case["keys"]
    ratio = (1, 2, 4)[choice(g, 3)]
    q = E4M3_FINITE[torch.randint(len(E4M3_FINITE), (queries, heads, dim), generator=g)]
    k = E4M3_FINITE[torch.randint(len(E4M3_FINITE), (keys, dim), generator=g)]
    q_scale = 2.0 ** torch.randint(-8, 3, (queries, heads), generator=g).float()
    k_scale = torch.randint(-8, 9, (keys,), generator=g).float() / 8
    weights = torch.randint(-8, 9, (queries, heads), generator=g).float() / 4
    reach = (keys + 1) * ratio - 1
    positions = torch.randint(max(reach, 1), (queries,), generator=g)
    padding = (torch.randint(16, (queries,), generator=g) == 0) | (reach == 0)
    positions = torch.where(padding, -1, positions).to(torch.int32)
    tensors = {"q": q, "q_scale": q_scale, "weights": weights, "k": k, "k_scale": k_scale, "positions": positions}
    got = _run(impl, tensors, case, ratio=ratio)
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != (queries, keys):
        raise Mismatch("index_scores_fp8 output", detail=f"expected f32{[queries, keys]}, got {got!r:.80}")
    rows, cols = sample(case, queries, JUDGED_ROWS), sample(case, keys, JUDGED_KEYS)
    qv = faulty.e4m3_values(q[rows]).double() * q_scale[rows].double().unsqueeze(-1)
    kv = faulty.e4m3_values(k[cols]).double() * k_scale[cols].double().unsqueeze(-1)
    exact, magnitude = _float64_scores(qv, kv, weights[rows])
    bound = (float(E4M3_DOT_BOUND) + 2 * (heads * dim + 2) * FLOAT32_EPSILON) * magnitude
    visible = cols < ((positions[rows].long() + 1) // ratio).unsqueeze(-1)
    what = f"index_scores_fp8 vs float64 ({queries} queries, {heads} heads, dim {dim}, {keys} keys, ratio {ratio})"
    _within_bound(got, exact, bound, visible, rows, cols, what, "2**-8 of their magnitude")


PAGED_ROWS_PER_BLOCK = (64, 1, 4)
"""Compressed rows of a cache block: the production 64, and small ones."""
PAGED_KEYS = max(ladder("width").production)
"""The most key rows a request's table spans (rows of a block shrink to stay within it): the longest production
row of index scores."""


def check_paged_index_scores(impl: Implementation, case: Example) -> None:
    """As index scores, each query's keys read through its request's block table: every lane below the query's
    length within twice the float32 accumulation bound of float64 (on sampled queries and keys)."""
    g = generator(case)
    requests, heads, dim, columns = case["requests"], case["heads"], case["dim"], case["columns"]
    next_n = 1 + choice(g, 3)
    per_block = preset(case, "rows_per_block", PAGED_ROWS_PER_BLOCK[choice(g, len(PAGED_ROWS_PER_BLOCK))])
    while per_block > 1 and columns * per_block > PAGED_KEYS:
        per_block //= 4
    dtype = (torch.float32, torch.bfloat16)[choice(g, 2)]
    width, queries = columns * per_block, requests * next_n
    q = (torch.randint(-255, 256, (requests, next_n, heads, dim), generator=g).float() / 64).to(dtype)
    weights = torch.randint(-8, 9, (requests, next_n, heads), generator=g).float() / 4
    cache = (torch.randint(-255, 256, (columns + 1, per_block, dim), generator=g).float() / 64).to(dtype)
    cache[columns] = float("nan")  # a block no table names
    lengths = _lengths(g, queries, width, padding=False).reshape(requests, next_n)
    table = torch.stack([torch.randperm(columns, generator=g) for _ in range(requests)]).reshape(requests, columns)
    garbage = torch.tensor([-1, columns, columns + 7])[torch.randint(3, (requests, columns), generator=g)]
    read = torch.arange(columns) * per_block < lengths.amax(dim=1, keepdim=True)
    table = torch.where(read, table, garbage).to(torch.int32)  # entries no query of the request reads: anything
    tensors = {"q": q, "weights": weights, "cache": cache, "block_table": table, "lengths": lengths}
    got = _run(impl, tensors, case)
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != (queries, width):
        raise Mismatch("paged_index_scores output", detail=f"expected f32{[queries, width]}, got {got!r:.80}")
    rows, cols = sample(case, queries, JUDGED_ROWS), sample(case, width, JUDGED_KEYS)
    visible = cols < lengths.reshape(-1)[rows].unsqueeze(-1)
    ids = torch.where(visible, table[rows // next_n][:, cols // per_block], 0)
    exact, magnitude = _float64_scores(
        q.reshape(queries, heads, dim)[rows], cache[ids.long(), cols % per_block], weights.reshape(queries, heads)[rows]
    )
    bound = 2 * (heads * dim + 2) * FLOAT32_EPSILON * magnitude
    what = (
        f"paged_index_scores vs float64 ({requests} requests x {next_n} queries, {heads} heads, dim {dim}, "
        f"{columns} table columns of {per_block} rows)"
    )
    _within_bound(got, exact, bound, visible, rows, cols, what, "twice the float32 accumulation bound")


def check_paged_index_scores_fp8(impl: Implementation, case: Example) -> None:
    """As paged index scores, on FP8 queries and the FP8 index cache (a block's rows of codes, then their float32
    scales; the block no table names holds NaN codes): every visible lane within ``E4M3_DOT_BOUND`` of its
    magnitude, plus the float32 accumulation bound, of the float64 value of the decoded codes."""
    g = generator(case)
    requests, heads, columns = case["requests"], case["heads"], case["columns"]
    dim = 4 * -(-case["dim"] // 4)  # the contract's D is a multiple of 4
    next_n = 1 + choice(g, 3)
    per_block = preset(case, "rows_per_block", PAGED_ROWS_PER_BLOCK[choice(g, len(PAGED_ROWS_PER_BLOCK))])
    while per_block > 1 and columns * per_block > PAGED_KEYS:
        per_block //= 4
    width, queries = columns * per_block, requests * next_n
    q = E4M3_FINITE[torch.randint(len(E4M3_FINITE), (requests, next_n, heads, dim), generator=g)]
    q_scale = 2.0 ** torch.randint(-8, 3, (requests, next_n, heads), generator=g).float()
    weights = torch.randint(-8, 9, (requests, next_n, heads), generator=g).float() / 4
    codes = E4M3_FINITE[torch.randint(len(E4M3_FINITE), (columns + 1, per_block, dim), generator=g)]
    codes[columns] = 0x7F  # a block no table names: NaN codes and a NaN scale
    scales = torch.randint(-8, 9, (columns + 1, per_block), generator=g).float() / 8
    scales[columns] = float("nan")
    cache = faulty.fp8_index_cache(codes, scales)
    lengths = _lengths(g, queries, width, padding=False).reshape(requests, next_n)
    table = torch.stack([torch.randperm(columns, generator=g) for _ in range(requests)]).reshape(requests, columns)
    garbage = torch.tensor([-1, columns, columns + 7])[torch.randint(3, (requests, columns), generator=g)]
    read = torch.arange(columns) * per_block < lengths.amax(dim=1, keepdim=True)
    table = torch.where(read, table, garbage).to(torch.int32)
    tensors = {"q": q, "q_scale": q_scale, "weights": weights, "cache": cache, "block_table": table,
               "lengths": lengths}  # fmt: skip
    got = _run(impl, tensors, case, rows_per_block=per_block)
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != (queries, width):
        raise Mismatch("paged_index_scores_fp8 output", detail=f"expected f32{[queries, width]}, got {got!r:.80}")
    rows, cols = sample(case, queries, JUDGED_ROWS), sample(case, width, JUDGED_KEYS)
    visible = cols < lengths.reshape(-1)[rows].unsqueeze(-1)
    ids = torch.where(visible, table[rows // next_n][:, cols // per_block], 0).long()
    keys = faulty.e4m3_values(codes[ids, cols % per_block]).double() * scales[ids, cols % per_block].double()[..., None]
    qv = faulty.e4m3_values(q.reshape(queries, heads, dim)[rows]).double()
    qv = qv * q_scale.reshape(queries, heads)[rows].double().unsqueeze(-1)
    exact, magnitude = _float64_scores(qv, keys, weights.reshape(queries, heads)[rows])
    bound = (float(E4M3_DOT_BOUND) + 2 * (heads * dim + 2) * FLOAT32_EPSILON) * magnitude
    what = (
        f"paged_index_scores_fp8 vs float64 ({requests} requests x {next_n} queries, {heads} heads, dim {dim}, "
        f"{columns} table columns of {per_block} rows)"
    )
    _within_bound(got, exact, bound, visible, rows, cols, what, "2**-8 of their magnitude")


PROPERTIES = [
    _ladder_property(
        "topk_shape_ladder",
        "topk",
        shapes(rows="rows", width="width", k="k"),
        check_topk,
        "rows, widths and k up the ladder (past 1024 lanes, k past 256; production widths on a GPU), scores, "
        "lengths and offsets as views: the lanes equal the torch oracle's",
    ),
    _ladder_property(
        "candidate_select_shape_ladder",
        "candidate_select",
        shapes(rows="rows", width="width", k="k"),
        check_candidates,
        "score widths past 256 blocks, slots up the k ladder, inputs as views: the kept blocks equal the oracle's",
    ),
    _ladder_property(
        "candidate_restore_shape_ladder",
        "candidate_restore",
        shapes(rows="rows", k="k", slots="lanes"),
        check_restore,
        "offsets past 256 lanes, candidate blocks up the lane ladder, inputs as views: the rows equal the oracle's",
    ),
    _ladder_property(
        "candidate_remap_shape_ladder",
        "candidate_remap",
        shapes(rows="rows", k="k", slots="lanes"),
        check_remap,
        "columns past 256 lanes, candidate blocks past 64, lengths cutting them, inputs as views: the positions "
        "and counts equal the oracle's",
    ),
    _ladder_property(
        "slot_shape_ladder",
        "slot_translation",
        shapes(requests="requests", lanes="lanes", columns="blocks"),
        check_slots,
        "lanes past 64, block tables past 256 columns, requests past 16, inputs as views: the slots equal the oracle's",
    ),
    _ladder_property(
        "gathered_shape_ladder",
        "gathered_rows",
        shapes(requests="requests", lanes="lanes"),
        check_gathered,
        "requests past 16 and lanes past 64, inputs as views: the rows equal the oracle's",
    ),
    _ladder_property(
        "window_shape_ladder",
        "window_indices",
        shapes(window="window", seqlen="width"),
        check_window,
        "windows past 64 (128 in production), prefill chunks past 1024 queries: the slots equal the oracle's",
    ),
    _ladder_property(
        "compressed_shape_ladder",
        "compressed_indices",
        shapes(seqlen="lanes"),
        check_compressed,
        "steps past 64 lanes (2048 and more in production): the rows equal the oracle's",
    ),
    _ladder_property(
        "release_shape_ladder",
        "window_release",
        shapes(requests="requests"),
        check_release,
        "requests past 16, inputs as views: the released block counts equal the oracle's",
    ),
    _ladder_property(
        "index_scores_shape_ladder",
        "index_scores",
        shapes(queries="rows", heads="heads", dim="dim", keys="width"),
        check_index_scores,
        "heads past 16, dims past 64, keys past 1024, inputs as views: every visible lane within twice the float32 "
        "accumulation bound of float64",
    ),
    _ladder_property(
        "paged_index_scores_shape_ladder",
        "paged_index_scores",
        shapes(requests="requests", heads="heads", dim="dim", columns="blocks"),
        check_paged_index_scores,
        "requests past 16, heads past 16, dims past 64, block tables past 256 columns (rows of 64, 4 or 1), 1-3 "
        "queries a request, inputs as views: every lane below a query's length within twice the float32 "
        "accumulation bound of float64",
    ),
    _ladder_property(
        "paged_index_scores_fp8_shape_ladder",
        "paged_index_scores_fp8",
        shapes(requests="requests", heads="heads", dim="dim", columns="blocks"),
        check_paged_index_scores_fp8,
        "the paged ladder's sizes on FP8 queries and the FP8 index cache, q, q_scale, weights, tables and lengths "
        "as views: every lane below a query's length within 2**-8 of its magnitude of float64",
    ),
    _ladder_property(
        "index_scores_fp8_shape_ladder",
        "index_scores_fp8",
        shapes(queries="rows", heads="heads", dim="dim", keys="width"),
        check_index_scores_fp8,
        "FP8 queries and keys: heads past 16, dims past 64, keys past 1024, inputs as views: every visible lane "
        "within 2**-8 of its magnitude (E4M3_DOT_BOUND) of float64",
    ),
]
