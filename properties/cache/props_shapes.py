"""The cache operations on the shape ladder (``properties.ladder``): rows per call past 16, caches past 256
blocks, heads past 16, dims past 64 and lanes past 64 in a fixed share of draws (production shapes on a GPU),
inputs as non-contiguous views wherever the contract allows them (``properties.strided``).

An example is a few sizes and a ``seed`` the check expands into tensors. The judges scale:

- ``quantize_store`` and ``gather_dequantize``: the whole cache after the call, and the rows read back, equal
  those of the area's torch implementation without a fault (``properties.cache.faulty_formats``), which every
  store and gather property checks against the exact reference (``test_support.py``), byte for byte;
- ``norm_rope_store``: the cache after the call equals that of the torch oracle
  (``properties.cache.faulty_norm_rope``) outside the stored rows, byte for byte; a stored row whose bytes are not
  the oracle's (the float32 norm and rotation rounded apart) must be faithful to the exact row
  (``reference.norm_rope.faithful``), on up to 8 such rows;
- ``sparse_attention``: out and lse within twice the error of the same-precision float32 baselines (or
  ``ULP_FLOOR`` ulps of the terms' magnitude) of a float64 evaluation of the same formula, itself checked
  against the exact reference on small shapes (``test_support.py``), on up to 8 sampled query rows;
- ``sparse_attention_fp8_kv``: the same, over the rows the torch gather reads back at the slots;
- ``sparse_attention_bf16``: out and lse of the float64 evaluation under the operation's own rule
  (``props_bf16``: baselines rounding the probabilities to bf16, out's floors), sparse queries keeping every score
  a bf16 value.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from properties.cache.checks import describe
from properties.cache.common import BF16_DIMS, AttentionCall, attention_convention, cache_layout, row_format_of
from properties.cache.faulty_attention import baselines, bf16_baselines, dense_attention, flush_scales, term_scales
from properties.cache.faulty_formats import gather_dequantize, quantize_store
from properties.cache.faulty_fp8_kv import LANE_RULES as FP8_KV_LANES
from properties.cache.faulty_fp8_kv import paged_rows
from properties.cache.faulty_norm_rope import norm_rope_store
from properties.cache.props_attention import attention_results
from properties.cache.props_bf16 import BF16_OUT_MANTISSA, FLOAT32_SMALLEST_NORMAL
from properties.cache.props_norm_rope import ROPE_DIM, exact_row
from properties.cache.strategies import BF16_QUERY_NONZEROS, BF16_SCALES, NORM_EPS
from properties.compare import ULP_FLOOR, Mismatch
from properties.contract import operation
from properties.ladder import base_conventions, choice, generator, sample, shapes
from properties.presets import EXAMPLES, preset
from properties.registry import Implementation
from properties.runner import Property
from properties.strided import ORIGINS, assert_same, call_with_views, run_with_views, with_layouts
from reference.cache_blocks import slot_byte_offsets
from reference.formats import QuantizedRow
from reference.norm_rope import faithful

Example = dict[str, Any]
JUDGED_ROWS = 8
"""Query rows the float64 attention evaluates (all of them up to this many: ``properties.ladder.sample``)."""
ROWS_PER_BLOCK = (64, 1, 4)
"""Rows of a cache block: the production 64, and small ones."""


def _cache(g: torch.Generator, fmt: str, case: Example) -> tuple[torch.Tensor, int, int, int]:
    """A cache of random bytes (``blocks`` blocks, one or two layers), its rows per block, layer count and the
    layer a call uses."""
    rows_per_block = preset(case, "rows_per_block", ROWS_PER_BLOCK[choice(g, len(ROWS_PER_BLOCK))])
    layers = 1 + choice(g, 2)
    block_bytes = cache_layout(fmt, rows_per_block).block_bytes
    cache = torch.randint(256, (case["blocks"], layers * block_bytes), generator=g, dtype=torch.uint8)
    return cache, rows_per_block, layers, choice(g, layers)


def _row_values(g: torch.Generator, rows: int, dims: int) -> torch.Tensor:
    """Normal values times a power of two per row (float32)."""
    return torch.randn(rows, dims, generator=g) * 2.0 ** torch.randint(-12, 13, (rows, 1), generator=g)


def _top_slots(g: torch.Generator, capacity: int, count: int) -> torch.Tensor:
    """``count`` distinct slots among the highest ``4 count + 4`` of the cache (its last blocks are where a block
    index past a tile shows)."""
    span = min(capacity, 4 * count + 4)
    return (capacity - 1 - torch.randperm(span, generator=g)[:count]).to(torch.int64)


def _stores(
    g: torch.Generator, fmt: str, case: Example
) -> tuple[torch.Tensor, int, int, int, torch.Tensor, torch.Tensor]:
    """A cache (``_cache``: the cache, its rows per block, layers and the call's layer), then the slots and rows of
    a store into it: ``rows`` (as many as the cache holds) at distinct slots near its end, one in eight at -1."""
    cache, rows_per_block, layers, layer = _cache(g, fmt, case)
    capacity = case["blocks"] * rows_per_block
    count = min(case["rows"], capacity)
    slots = _top_slots(g, capacity, count)
    slots = torch.where(torch.randint(8, (count,), generator=g) == 0, -1, slots)
    return cache, rows_per_block, layers, layer, slots, _row_values(g, count, row_format_of(fmt).dims)


def check_store(impl: Implementation, case: Example) -> None:
    fmt = impl.convention or ""
    cache, rows_per_block, _, layer, slots, rows = _stores(generator(case), fmt, case)
    count = len(slots)
    rows[slots == -1] = float("nan")
    options: dict[str, Any] = {"fmt": fmt, "rows_per_block": rows_per_block, "layer": layer}
    expected = cache.clone()
    quantize_store(rows, slots, expected, **options)

    def call(given: dict[str, torch.Tensor]) -> torch.Tensor:
        written = cache.clone().to(impl.device)
        impl.fn(given["rows"].to(impl.device), given["slots"].to(impl.device), written, **options)
        return written

    got = call_with_views(call, {"rows": rows, "slots": slots}, case["layouts"], impl.op)
    what = (
        f"quantize_store[{fmt}] cache vs the torch oracle ({count} rows, {case['blocks']} blocks of {rows_per_block})"
    )
    assert_same(expected, got, what)


def check_gather(impl: Implementation, case: Example) -> None:
    fmt = impl.convention or ""
    g = generator(case)
    cache, rows_per_block, _, layer = _cache(g, fmt, case)
    capacity = case["blocks"] * rows_per_block
    options: dict[str, Any] = {"fmt": fmt, "rows_per_block": rows_per_block, "layer": layer}
    stored = _top_slots(g, capacity, min(capacity, 1 + case["rows"] // 2))
    quantize_store(_row_values(g, len(stored), row_format_of(fmt).dims), stored, cache, **options)
    slots = stored[torch.randint(len(stored), (case["rows"],), generator=g)]
    expected = gather_dequantize(cache, slots, **options)
    got = run_with_views(impl, {"cache": cache, "slots": slots}, case["layouts"], **options)
    what = f"gather_dequantize[{fmt}] rows vs the torch oracle ({case['rows']} reads, {case['blocks']} blocks)"
    assert_same(expected, got, what)


def check_norm_rope(impl: Implementation, case: Example) -> None:
    """The cache after the call equals the torch oracle's (``properties.cache.faulty_norm_rope``) outside the
    stored rows' data and scale parts, byte for byte; a stored row whose bytes differ from the oracle's (a float32
    rounding apart) must be faithful to the exact normed and rotated row (``reference.norm_rope.faithful``), judged
    on up to ``JUDGED_ROWS`` of them."""
    fmt = impl.convention or ""
    g = generator(case)
    cache, rows_per_block, layers, layer, slots, rows = _stores(g, fmt, case)
    count, rowfmt = len(slots), row_format_of(fmt)
    weight = 0.5 + 1.5 * torch.rand(rowfmt.dims, generator=g)
    angles = torch.rand(1 + choice(g, 4096), ROPE_DIM // 2, generator=g, dtype=torch.float64) * 2 * math.pi
    cos_sin = torch.cat([angles.cos(), angles.sin()], dim=1).float()
    positions = torch.randint(cos_sin.shape[0], (count,), generator=g)
    eps = NORM_EPS[choice(g, len(NORM_EPS))]
    options: dict[str, Any] = {"fmt": fmt, "rows_per_block": rows_per_block, "layer": layer, "eps": eps}
    options["rope_dim"] = ROPE_DIM
    tensors = {"rows": rows, "weight": weight, "cos_sin": cos_sin, "positions": positions, "slots": slots}
    expected = cache.clone()
    norm_rope_store(rows, weight, cos_sin, positions, slots, expected, **options)

    def call(given: dict[str, torch.Tensor]) -> torch.Tensor:
        written = cache.clone().to(impl.device)
        impl.fn(*(given[n].to(impl.device) for n in tensors), written, **options)
        return written

    got = call_with_views(call, tensors, case["layouts"], impl.op).detach().cpu().reshape(-1)
    layout = cache_layout(fmt, rows_per_block)
    stored = (slots != -1).nonzero().reshape(-1)
    at = torch.tensor([slot_byte_offsets(layout, int(slots[i]), layers, layer) for i in stored], dtype=torch.int64)
    at = at.reshape(-1, 2)
    parts = torch.cat([at[:, :1] + torch.arange(rowfmt.data_bytes), at[:, 1:] + torch.arange(rowfmt.scale_bytes)], 1)
    before = expected.reshape(-1)
    differ = got != before
    outside = differ.clone()
    outside[parts.reshape(-1)] = False
    context = f"({count} rows, {case['blocks']} blocks of {rows_per_block}, layer {layer} of {layers})"
    if bool(outside.any()):
        where = outside.nonzero().reshape(-1)[:12].tolist()
        lanes = [(describe(layout, b, layers), f"0x{int(before[b]):02x}", f"0x{int(got[b]):02x}") for b in where]
        raise Mismatch(f"norm_rope_store[{fmt}] wrote outside the stored rows {context}", lanes)
    changed = differ[parts].any(dim=1).nonzero().reshape(-1)  # stored rows whose bytes are not the oracle's
    for j in changed[sample(case, len(changed), JUDGED_ROWS)].tolist():
        i, stored_bytes = int(stored[j]), got[parts[j]].tolist()
        row = QuantizedRow(bytes(stored_bytes[: rowfmt.data_bytes]), bytes(stored_bytes[rowfmt.data_bytes :]))
        exact, sizes = exact_row(rows[i].tolist(), weight.tolist(), eps, cos_sin[positions[i]].tolist())
        why = faithful(rowfmt, row, exact, sizes)
        if why is not None:
            raise Mismatch(
                f"norm_rope_store[{fmt}] row {i} at slot {int(slots[i])}, position {int(positions[i])}, eps {eps} "
                f"{context}",
                detail=f"{why}; not what quantizing a row within 2^-7 of the exact normed and rotated row gives",
            )


def _ulp(x: torch.Tensor, mantissa: int = 23) -> torch.Tensor:
    """One ulp of each |x| at ``mantissa`` fraction bits (float32's by default; of the smallest normal's exponent
    below it and at 0)."""
    exponent = torch.frexp(x.abs().clamp_min(2.0**-126)).exponent
    return torch.pow(2.0, (exponent - 1 - mantissa).to(torch.float64))


def _within(
    expected: torch.Tensor,
    got: Any,
    base: list[torch.Tensor],
    scale: torch.Tensor,
    what: str,
    mantissa: int = 23,
    floor: torch.Tensor | None = None,
) -> None:
    """Every lane of ``got`` within twice the worst baseline's error of ``expected`` (float64), or ``ULP_FLOOR``
    ulps at ``mantissa`` fraction bits of ``max(|expected|, scale)``, or ``floor``; non-finite lanes must be the
    same value."""
    got64 = got.detach().cpu().double()
    finite = torch.isfinite(expected)
    error = (got64 - expected).abs()
    worst = torch.stack([(b.double() - expected).abs() for b in base]).amax(0)
    allowed = torch.maximum(
        2 * torch.where(torch.isfinite(worst), worst, 0.0),
        ULP_FLOOR * _ulp(torch.maximum(expected.abs(), scale), mantissa),
    )
    if floor is not None:
        allowed = torch.maximum(allowed, floor)
    same = (got64 == expected) | (got64.isnan() & expected.isnan())
    bad = torch.where(finite, ~(error <= allowed), ~same)
    if bool(bad.any()):
        where = bad.nonzero()[:12].tolist()
        lanes = [(tuple(w), expected[tuple(w)].item(), got64[tuple(w)].item()) for w in where]
        raise Mismatch(what, lanes, detail=f"{int(bad.sum())} lane(s) beyond twice the float32 baselines' error")


def _lanes_and_sink(
    g: torch.Generator, m: int, lanes: int, n: int, heads: int, invalid: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """The drawn lanes (i32[m, lanes]: rows of an ``n``-row cache, an eighth -1, and with ``invalid`` of
    ``out_of_range`` a quarter past either end) and the sink (f32[heads], an eighth -inf)."""
    indices = torch.randint(n, (m, lanes), generator=g)
    kind = torch.randint(8, (m, lanes), generator=g)
    indices = torch.where(kind == 0, -1, indices)
    if invalid == "out_of_range":
        indices = torch.where(kind == 1, n + choice(g, 3), torch.where(kind == 2, -2 - choice(g, 5), indices))
    sink = torch.randint(-8, 9, (heads,), generator=g).float() / 4
    sink = torch.where(torch.randint(8, (heads,), generator=g) == 0, float("-inf"), sink)
    return indices.to(torch.int32), sink


def check_attention(impl: Implementation, case: Example) -> None:
    convention = impl.convention or ""
    invalid, _ = attention_convention(convention)
    g = generator(case)
    m, heads, dim, lanes = case["rows"], case["heads"], case["dim"], case["lanes"]
    n = 1 + choice(g, lanes + 2)
    dtype = (torch.float32, torch.bfloat16)[choice(g, 2)]
    q = (torch.randint(-8, 9, (m, heads, dim), generator=g).float() / 8).to(dtype)
    kv = (torch.randint(-8, 9, (n, dim), generator=g).float() / 8).to(dtype)
    indices, sink = _lanes_and_sink(g, m, lanes, n, heads, invalid)
    dv = dim if choice(g, 2) else (dim + 1) // 2
    scale = float(torch.tensor(dim**-0.5, dtype=torch.float32))
    tensors = {"q": q, "kv": kv, "indices": indices, "sink": sink}
    got = attention_results(impl.op, run_with_views(impl, tensors, case["layouts"], scale=scale, dv=dv), (m, heads, dv))
    judged = sample(case, m, JUDGED_ROWS)
    call = AttentionCall(q[judged], kv, indices[judged], sink, scale, dv, convention)
    sizes = f"{m} rows, {heads} heads, dim {dim}, dv {dv}, {lanes} lanes, {n} cache rows"
    _judge_attention(call, got, judged, m, f" vs float64 ({sizes}, {dtype})")


def _judge_attention(
    call: AttentionCall, got: tuple[torch.Tensor, ...], judged: torch.Tensor, m: int, context: str, bf16: bool = False
) -> None:
    """The judged rows of out and lse within twice the float32 baselines' error of the float64 evaluation
    (``bf16``: out under sparse_attention_bf16's rule, ``props_bf16``)."""
    out64, lse64 = (t.cpu() for t in dense_attention(call, dtype=torch.float64))
    runs = [(o.cpu(), s.cpu()) for o, s in (bf16_baselines(call) if bf16 else baselines(call))]
    out_scale, lse_scale = (torch.tensor(s, dtype=torch.float64) for s in term_scales(call))
    mantissa, floor = 23, None
    if bf16:
        mantissa = BF16_OUT_MANTISSA
        floor = FLOAT32_SMALLEST_NORMAL * torch.tensor(flush_scales(call), dtype=torch.float64).reshape(out64.shape)
    rows = "" if len(judged) == m else f" of rows {judged.tolist()}"
    out, lse = (t.detach().cpu()[judged] for t in got)
    out_what = "out" + rows + context
    _within(out64, out, [o for o, _ in runs], out_scale.reshape(out64.shape), out_what, mantissa, floor)
    _within(lse64, lse, [s for _, s in runs], lse_scale.reshape(lse64.shape), "lse" + rows + context)


def check_fp8_kv(impl: Implementation, case: Example) -> None:
    """sparse_attention_fp8_kv on a one-layer cache of random bytes (NaN codes and huge scales where no lane
    reads) whose read slots the torch store filled: out and lse as ``check_attention`` judges them, over the rows
    the torch gather reads back at the judged rows' slots."""
    fmt = impl.convention or ""
    g = generator(case)
    m, heads, lanes, blocks = case["rows"], case["heads"], case["lanes"], case["blocks"]
    rows_per_block = preset(case, "rows_per_block", ROWS_PER_BLOCK[choice(g, len(ROWS_PER_BLOCK))])
    capacity, dims = blocks * rows_per_block, row_format_of(fmt).dims
    cache = torch.randint(256, (blocks, cache_layout(fmt, rows_per_block).block_bytes), generator=g, dtype=torch.uint8)
    slots = torch.randint(capacity, (m, lanes), generator=g)
    kind = torch.randint(8, (m, lanes), generator=g)
    outside = torch.where(kind == 1, capacity + choice(g, 3), -2 - choice(g, 5))
    slots = torch.where(kind == 0, -1, torch.where(kind <= 2, outside, slots)).to(torch.int32)
    valid = (slots >= 0) & (slots < capacity)
    read = torch.unique(slots[valid]).to(torch.int64)
    options: dict[str, Any] = {"fmt": fmt, "rows_per_block": rows_per_block, "layer": 0}
    quantize_store(torch.randint(-8, 9, (len(read), dims), generator=g).float() / 8, read, cache, **options)
    dtype = (torch.float32, torch.bfloat16)[choice(g, 2)]
    q = (torch.randint(-8, 9, (m, heads, dims), generator=g).float() / 8).to(dtype)
    sink = torch.randint(-8, 9, (heads,), generator=g).float() / 4
    scale = float(torch.tensor(dims**-0.5, dtype=torch.float32))
    tensors = {"q": q, "cache": cache, "slots": slots, "sink": sink}
    raw = run_with_views(impl, tensors, case["layouts"], scale=scale, rows_per_block=rows_per_block)
    got = attention_results(impl.op, raw, (m, heads, dims))
    judged = sample(case, m, JUDGED_ROWS)
    kv, lane_rows = paged_rows(cache, slots[judged], rows_per_block=rows_per_block, fmt=fmt, dims=dims)
    call = AttentionCall(q[judged], kv.to(dtype), lane_rows, sink, scale, dims, FP8_KV_LANES)
    sizes = f"{m} rows, {heads} heads, {lanes} lanes, {blocks} blocks of {rows_per_block}"
    _judge_attention(call, got, judged, m, f" vs float64 ({fmt}, {sizes}, {dtype})")


def check_bf16(impl: Implementation, case: Example) -> None:
    """sparse_attention_bf16 with bf16 q and kv on the grids of ``strategies.bf16_attention_examples`` (sparse query
    heads, so every score is a bf16 value): out and lse as ``check_attention`` judges them, out under the
    operation's own rule."""
    convention = impl.convention or ""
    invalid, _ = attention_convention(convention)
    g = generator(case)
    m, heads, lanes = case["rows"], case["heads"], case["lanes"]
    n = 1 + choice(g, lanes + 2)
    q = torch.zeros(m * heads, BF16_DIMS)
    positions = torch.randint(BF16_DIMS, (m * heads, BF16_QUERY_NONZEROS), generator=g)
    q.scatter_(1, positions, torch.randint(-4, 5, positions.shape, generator=g).float() / 4)
    q = q.reshape(m, heads, BF16_DIMS).to(torch.bfloat16)
    kv = (torch.randint(-8, 9, (n, BF16_DIMS), generator=g).float() / 4).to(torch.bfloat16)
    indices, sink = _lanes_and_sink(g, m, lanes, n, heads, invalid)
    scale = BF16_SCALES[choice(g, len(BF16_SCALES))]
    tensors = {"q": q, "kv": kv, "indices": indices, "sink": sink}
    raw = run_with_views(impl, tensors, case["layouts"], scale=scale, dv=BF16_DIMS)
    got = attention_results(impl.op, raw, (m, heads, BF16_DIMS))
    judged = sample(case, m, JUDGED_ROWS)
    call = AttentionCall(q[judged], kv, indices[judged], sink, scale, BF16_DIMS, convention)
    sizes = f"{m} rows, {heads} heads, {lanes} lanes, {n} cache rows, scale {scale}"
    _judge_attention(call, got, judged, m, f" vs float64 ({sizes}, bf16 probabilities)", bf16=True)


def _ladder_property(name: str, op: str, sizes: Any, check: Any, doc: str) -> Property:
    strategy = with_layouts(sizes, operation(op).views)
    return Property(
        name, op, strategy, check, examples=EXAMPLES[name], doc=doc, origins=ORIGINS, conventions=base_conventions(op)
    )


PROPERTIES = [
    _ladder_property(
        "quant_store_shape_ladder",
        "quantize_store",
        shapes(rows="rows", blocks="blocks"),
        check_store,
        "rows per call past 16 and caches past 256 blocks of 64 rows (thousands on a GPU), rows and slots as views: "
        "the whole cache equals the torch oracle's, byte for byte",
    ),
    _ladder_property(
        "gather_shape_ladder",
        "gather_dequantize",
        shapes(rows="rows", blocks="blocks"),
        check_gather,
        "reads past 16 a call from caches past 256 blocks, slots as a view: the rows equal the torch oracle's",
    ),
    _ladder_property(
        "norm_rope_shape_ladder",
        "norm_rope_store",
        shapes(rows="rows", blocks="blocks"),
        check_norm_rope,
        "rows per call past 16 and caches past 256 blocks of 64 rows, positions into RoPE tables of up to 4096 rows, "
        "every input but the cache as a view: the cache equals the torch oracle's outside the stored rows, and a "
        "stored row the oracle's bytes do not match is faithful to the exact normed and rotated row",
    ),
    _ladder_property(
        "attention_shape_ladder",
        "sparse_attention",
        shapes(rows="rows", heads="heads", dim="dim", lanes="lanes"),
        check_attention,
        "heads past 16, dims past 64 (512 on a GPU), lanes past 64, inputs as views: out and lse within twice the "
        "float32 baselines' error of float64",
    ),
    _ladder_property(
        "fp8_kv_shape_ladder",
        "sparse_attention_fp8_kv",
        shapes(rows="rows", heads="heads", lanes="lanes", blocks="blocks"),
        check_fp8_kv,
        "heads past 16, lanes past 64 (2048 on a GPU), caches past 256 blocks of 64 rows, q, slots and sink as "
        "views: out and lse within twice the float32 baselines' error of float64 over the rows the torch gather "
        "reads",
    ),
    _ladder_property(
        "bf16_shape_ladder",
        "sparse_attention_bf16",
        shapes(rows="rows", heads="heads", lanes="lanes"),
        check_bf16,
        "heads past 16 (64-head blocks crossed on a GPU), lanes past 64, inputs as views: out within the "
        "bf16-probability rule and lse within twice the float32 baselines' error of float64",
    ),
]
