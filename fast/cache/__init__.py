"""Paged-cache kernels: quantize-and-store, gather-and-dequantize, sparse attention with a sink (Triton and torch).

    quantize_store(rows, slots, cache, *, fmt, rows_per_block=None, layers=1, layer=0, backend="triton",
                   validate=True)
    norm_rope_store(rows, weight, cos_sin, positions, slots, cache, *, fmt, eps, rope_dim, rows_per_block=None,
                    layers=1, layer=0, backend="triton", validate=True)
    gather_dequantize(cache, slots, *, fmt, rows_per_block=None, layers=1, layer=0, backend="triton", out=None,
                      fill=0.0, validate=True) -> f32[R, d]
    sparse_attention(q, kv, indices, sink, *, scale, dv, empty_row="zero", invalid="out_of_range",
                     kv_format=None, rows_per_block=None, precision="f32", backend="triton", out=None,
                     lse=None, config=None) -> (out: f32[M, H, dv], lse: f32[M, H])

Every argument is checked on the host before anything is launched (``fast.cache.checks``): a wrong type or
dtype is a ``TypeError``, anything else a ``ValueError`` whose message starts with the argument's name. Layouts
and rounding: docs/cache-kernels.md.
"""

from __future__ import annotations

import importlib
import types

import torch

from fast.cache import checks
from fast.cache.formats import FORMATS, CacheFormat, cache_format

__all__ = [
    "FORMATS",
    "CacheFormat",
    "cache_format",
    "gather_dequantize",
    "norm_rope_store",
    "quantize_store",
    "sparse_attention",
]

EMPTY_ROW = {"zero": False, "empty_zero": False, "nan": True, "empty_nan": True}
INVALID = ("out_of_range", "minus_one_only")
PRECISIONS = ("f32", "bf16", "f64")


def _cache(
    cache: object, fmt: CacheFormat, rows_per_block: int | None, name: str = "cache", layers: int = 1, layer: int = 0
) -> tuple[torch.Tensor, int]:
    """The checked cache and its rows per block. A cache of ``layers`` layers is u8[num_blocks, layers *
    block_bytes]: block ``b`` holds one page per layer, in layer order (``reference.cache_blocks.page_offset``)."""
    c = checks.tensor(cache, name, (torch.uint8,), 2)
    checks.contiguous(c, name)
    checks.aligned(c, name, 16)
    for value, what, low in ((layers, "layers", 1), (layer, "layer", 0)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{what}: must be an int, got {type(value).__name__}")
        if value < low:
            raise ValueError(f"{what}: must be >= {low}, got {value}")
    if layer >= layers:
        raise ValueError(f"layer: must be in [0, {layers}) (the cache's layers), got {layer}")
    if c.shape[1] % layers:
        raise ValueError(f"{name}: a block of {c.shape[1]} bytes does not split into {layers} layers' pages")
    rows = fmt.rows_per_block(c.shape[1] // layers, name)
    if rows_per_block is not None and rows_per_block != rows:
        raise ValueError(f"rows_per_block: {rows_per_block} does not match {name}'s {c.shape[1]}-byte blocks, "
                         f"which hold {rows} {fmt.convention} rows")  # fmt: skip
    return c, rows


def _slots(slots: object, count: int | None, device: torch.device) -> torch.Tensor:
    s = checks.tensor(slots, "slots", (torch.int64,), 1)
    checks.contiguous(s, "slots")
    checks.same_device(s, "slots", device, "cache")
    if count is not None and s.shape[0] != count:
        raise ValueError(f"slots: must have one entry per row ({count}), got {s.shape[0]}")
    return s


def _backend_module(name: str, backend: str) -> types.ModuleType:
    """``fast.cache.<name>`` (the Triton kernels) or its torch twin ``<name>_naive``, imported on first use."""
    return importlib.import_module(f"fast.cache.{name}_naive" if backend == "torch" else f"fast.cache.{name}")


def _stored(
    rows: torch.Tensor, cache: torch.Tensor, fmt: str, rows_per_block: int | None, layers: int, layer: int
) -> tuple[CacheFormat, torch.Tensor, int, torch.Tensor]:
    """The format, checked cache, rows per block and checked f32 rows of a call that stores ``rows``."""
    f = cache_format(fmt)
    c, rpb = _cache(cache, f, rows_per_block, layers=layers, layer=layer)
    r = checks.tensor(rows, "rows", (torch.float32,), 2)
    checks.same_device(r, "rows", c.device, "cache")
    if r.shape[1] != f.dims:
        raise ValueError(f"rows: {f.convention} rows have {f.dims} values, got shape {tuple(r.shape)}")
    return f, c, rpb, r


def quantize_store(
    rows: torch.Tensor,
    slots: torch.Tensor,
    cache: torch.Tensor,
    *,
    fmt: str,
    rows_per_block: int | None = None,
    layers: int = 1,
    layer: int = 0,
    backend: str = "triton",
    validate: bool = True,
) -> None:
    """Quantize ``rows`` (f32[R, d]) and store row ``i`` at physical slot ``slots[i]`` (i64[R]) of layer ``layer``
    of ``cache`` (u8[num_blocks, layers * block_bytes], in place: block ``b`` holds one page per layer, in layer
    order) in ``fmt``'s public layout; slot -1 is skipped (its row is not read).

    ``validate`` (one small device-to-host copy, before any byte is written): every slot is -1 or inside the
    cache, no slot twice, every stored row finite with its RoPE tail inside the bf16 range (``ValueError``
    otherwise). Without it the kernel still never writes outside the cache (such rows are skipped), duplicate
    slots race, and a group holding NaN or infinity is stored as a NaN group (docs/cache-kernels.md).
    """
    f, c, rpb, r = _stored(rows, cache, fmt, rows_per_block, layers, layer)
    checks.contiguous(r, "rows")
    s = _slots(slots, r.shape[0], c.device)
    b = checks.backend(backend, c.device)
    if validate:
        checks.store_inputs(r, s, c.shape[0] * rpb, f.groups * f.group_size)
    call = checks.StoreArgs(r, s, c, f, rpb, layers, layer)
    _backend_module("quantize", b).store_rows(call)


def norm_rope_store(
    rows: torch.Tensor,
    weight: torch.Tensor,
    cos_sin: torch.Tensor,
    positions: torch.Tensor,
    slots: torch.Tensor,
    cache: torch.Tensor,
    *,
    fmt: str,
    eps: float,
    rope_dim: int,
    rows_per_block: int | None = None,
    layers: int = 1,
    layer: int = 0,
    backend: str = "triton",
    validate: bool = True,
) -> None:
    """RMSNorm, RoPE, then :func:`quantize_store`: row ``i`` of ``rows`` (f32[R, d]) becomes ``x * w / sqrt(mean(x^2)
    + eps)`` (``weight``: f32[d]), its last ``rope_dim`` values rotated in interleaved pairs by row ``positions[i]``
    (i64[R]) of ``cos_sin`` (f32[P, rope_dim]: cos, then sin), all in float32, and is stored at ``slots[i]`` as
    ``quantize_store`` stores it (slot -1: nothing stored, the row not needed). ``validate`` adds: every stored
    row's position inside ``cos_sin``; a stored row that is not finite is refused by the store's own check.
    """
    _, c, rpb, r = _stored(rows, cache, fmt, rows_per_block, layers, layer)
    call = checks.norm_rope_inputs(r, weight, cos_sin, positions, eps, rope_dim)
    s = _slots(slots, r.shape[0], c.device)
    b = checks.backend(backend, c.device)
    if validate:
        stored = call.positions[s != -1]
        if stored.numel():
            lo, hi = (int(v) for v in torch.stack([stored.min(), stored.max()]).tolist())
            if lo < 0 or hi >= call.cos_sin.shape[0]:
                raise ValueError(
                    f"positions: a stored row's position must be in [0, {call.cos_sin.shape[0]}) (the rows of "
                    f"cos_sin), got {lo if lo < 0 else hi}"
                )
    normed = _backend_module("norm_rope", b).normed_rows(call)
    quantize_store(normed, s, c, fmt=fmt, rows_per_block=rpb, layers=layers, layer=layer, backend=b, validate=validate)


def gather_dequantize(
    cache: torch.Tensor,
    slots: torch.Tensor,
    *,
    fmt: str,
    rows_per_block: int | None = None,
    layers: int = 1,
    layer: int = 0,
    backend: str = "triton",
    out: torch.Tensor | None = None,
    fill: float = 0.0,
    validate: bool = True,
) -> torch.Tensor:
    """The rows at ``slots`` (i64[R]) of layer ``layer`` of ``cache`` (as ``quantize_store``), dequantized to
    f32[R, d]; ``fill`` for slot -1.

    ``out`` (f32[R, d], contiguous) receives the rows if given. ``check_slots``: every slot is -1 or inside the
    cache (``validate``: one small device-to-host copy); without it a slot outside the cache reads as ``fill``.
    NaN codes (never written by ``quantize_store`` with ``validate``) read as NaN.
    """
    f = cache_format(fmt)
    c, rpb = _cache(cache, f, rows_per_block, layers=layers, layer=layer)
    s = _slots(slots, None, c.device)
    if not isinstance(fill, int | float) or isinstance(fill, bool):
        raise TypeError(f"fill: must be a float, got {type(fill).__name__}")
    b = checks.backend(backend, c.device)
    if out is None:
        out = torch.empty(s.shape[0], f.dims, dtype=torch.float32, device=c.device)
    else:
        checks.tensor(out, "out", (torch.float32,), 2)
        checks.same_device(out, "out", c.device, "cache")
        checks.contiguous(out, "out")
        if tuple(out.shape) != (s.shape[0], f.dims):
            raise ValueError(f"out: must have shape {(s.shape[0], f.dims)}, got {tuple(out.shape)}")
    if validate:
        checks.slots(s, c.shape[0] * rpb, "slots")
    call = checks.GatherArgs(c, s, f, rpb, out, float(fill), layers, layer)
    return _backend_module("quantize", b).gather_rows(call)  # type: ignore[no-any-return]


def _output(x: torch.Tensor | None, name: str, shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    if x is None:
        return torch.empty(shape, dtype=torch.float32, device=device)
    checks.tensor(x, name, (torch.float32,), len(shape))
    checks.same_device(x, name, device, "q")
    if tuple(x.shape) != shape:
        raise ValueError(f"{name}: must have shape {shape}, got {tuple(x.shape)}")
    checks.contiguous(x, name)
    return x


def sparse_attention(
    q: torch.Tensor,
    kv: torch.Tensor,
    indices: torch.Tensor,
    sink: torch.Tensor | None,
    *,
    scale: float,
    dv: int,
    empty_row: str = "zero",
    invalid: str = "out_of_range",
    kv_format: str | None = None,
    rows_per_block: int | None = None,
    precision: str = "f32",
    backend: str = "triton",
    out: torch.Tensor | None = None,
    lse: torch.Tensor | None = None,
    config: object = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sparse MQA attention with a sink over the lanes ``indices`` (i32[M, K]) of one KV head.

    q: f32|bf16[M, H, D]; kv: the same dtype, [N, D] (a row is key, its first ``dv`` values the value), or with
    ``kv_format="v4_584"`` or ``"v41_fp8_528"`` an FP8 cache u8[num_blocks, block_bytes] (D = dv = 512, lane =
    physical slot), dequantized in the kernel;
    sink: f32[H] or None. ``empty_row``: "zero" (output 0, lse +inf) or "nan" (both NaN) for a row without a
    valid lane; ``invalid``: "out_of_range" skips every lane outside [0, N), "minus_one_only" skips -1 and
    refuses any other such lane (ValueError, one device-to-host copy). lse = ln sum_j e^{s_j}, sink excluded.
    ``precision``: "f32" (f32 accumulators; bf16 probabilities kept at f32 precision in ``p @ v``), "bf16"
    (probabilities rounded to bf16 once, as bf16 production kernels do; torch backend: bf16 matmuls), "f64"
    (float64 throughout from the inputs' values, rounded once to f32: what the property suite checks).
    ``config`` (Triton): None for the default kernel (``fast.cache.dispatch``: for bf16 q, D = dv = 512, precision
    "bf16" on an sm_90 GPU the paired-warp-group one on BF16 rows, the warp-specialized one on an FP8 cache), a
    ``fast.cache.attention.Config`` for the ``tl`` kernel in that tile, a ``fast.cache.attention_ws.Tile`` for the
    warp-specialized one, ``fast.cache.attention_pair.Pair()`` for the paired-warp-group one (BF16 rows, FP8 caches).
    """
    qt = checks.tensor(q, "q", (torch.float32, torch.bfloat16), 3)
    checks.contiguous(qt, "q")
    M, H, D = qt.shape
    device = qt.device
    if empty_row not in EMPTY_ROW:
        raise ValueError(f"empty_row: must be one of {', '.join(EMPTY_ROW)}, got {empty_row!r}")
    if invalid not in INVALID:
        raise ValueError(f"invalid: must be one of {', '.join(INVALID)}, got {invalid!r}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision: must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    kv_cache: tuple[CacheFormat, int] | None = None
    if kv_format is None:
        kvt = checks.tensor(kv, "kv", (qt.dtype,), 2)
        checks.contiguous(kvt, "kv")
        if kvt.shape[1] != D:
            raise ValueError(f"kv: rows must have q's width D = {D}, got shape {tuple(kvt.shape)}")
        n_rows = kvt.shape[0]
    else:
        f = cache_format(kv_format)
        if f.convention not in checks.ATTENTION_KV_FORMATS:
            raise ValueError(f"kv_format: the attention kernel reads {', '.join(checks.ATTENTION_KV_FORMATS)} "
                             f"caches, got {kv_format!r}")  # fmt: skip
        kvt, rpb = _cache(kv, f, rows_per_block, "kv")
        if D != f.dims:
            raise ValueError(f"q: a {f.convention} cache holds {f.dims}-wide rows, so D must be {f.dims}, got {D}")
        n_rows = kvt.shape[0] * rpb
        kv_cache = (f, rpb)
    checks.same_device(kvt, "kv", device, "q")
    it = checks.tensor(indices, "indices", (torch.int32,), 2)
    checks.contiguous(it, "indices")
    checks.same_device(it, "indices", device, "q")
    if it.shape[0] != M:
        raise ValueError(f"indices: must have one row per query row (M = {M}), got shape {tuple(it.shape)}")
    if sink is not None:
        st = checks.tensor(sink, "sink", (torch.float32,), 1)
        checks.contiguous(st, "sink")
        checks.same_device(st, "sink", device, "q")
        if st.shape[0] != H:
            raise ValueError(f"sink: must have one entry per head (H = {H}), got shape {tuple(st.shape)}")
    if isinstance(scale, bool) or not isinstance(scale, int | float):
        raise TypeError(f"scale: must be a float, got {type(scale).__name__}")
    if isinstance(dv, bool) or not isinstance(dv, int):
        raise TypeError(f"dv: must be an int, got {type(dv).__name__}")
    if not 1 <= dv <= D:
        raise ValueError(f"dv: must be in [1, D = {D}], got {dv}")
    if kv_cache is not None and dv != D:
        raise ValueError(f"dv: a {kv_cache[0].convention} cache is read whole, so dv must be {D}, got {dv}")
    o = _output(out, "out", (M, H, dv), device)
    lo = _output(lse, "lse", (M, H), device)
    b = checks.backend(backend, device)
    if invalid == "minus_one_only":
        checks.lanes_minus_one_only(it, n_rows)
    call = checks.AttentionArgs(qt, kvt, it, sink, float(scale), dv, EMPTY_ROW[empty_row], o, lo, kv_cache, precision)
    if b == "torch":
        from fast.cache import attention_naive

        return attention_naive.sparse_attention(call)
    from fast.cache import dispatch

    return dispatch.run(call, config)  # type: ignore[arg-type]
