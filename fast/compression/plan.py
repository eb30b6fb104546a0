"""Host-side checks and launch metadata shared by the torch and Triton compression backends.

``prepare`` validates every argument before anything runs on the device and returns a ``Plan``: the validated
tensors, the per-request counts read once to the host, the output size, and the ring's safe-size rule. A plan can
be built once per step and launched many times (the benchmark does that, as an engine would for every layer).

Conventions (docs/compression-kernels.md):

- Request ``b`` owns input rows ``cu_seqlens[b]:cu_seqlens[b+1]`` (``n_b`` new positions) starting at absolute
  position ``s_b = start_pos[b]``; ``e_b = s_b + n_b``.
- Prefill reserves ``max(1, nc_b)`` output rows, ``nc_b = e_b // r - s_b // r``; decode one per new position.
- The ring is read before it is written, and after a call it holds exactly what writing every new position in
  order would leave (the newest ``min(n_b, S)`` new positions are written), as ``reference.state`` models it.
- Safe ring size (``reference.state.min_safe_ring_size``, read-then-write): ``S >= W - 1``; a decode / verify
  step that may be rolled back (``rollback=True``) needs ``S >= W + q - 2`` for ``q`` = the most new positions
  of any request; ``W = 1`` needs no ring at all.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass

import torch

from reference.checks import INT32_MAX, fail, require

FLOAT_OUT = (torch.float32, torch.bfloat16)


class Mode(enum.Enum):
    PREFILL = "prefill"
    DECODE = "decode"


@dataclass(frozen=True)
class Plan:
    """A validated call: tensors, host counts and output size.

    score, latent: f32[T, C]; state: f32[N, S, 2, C] (modified in place); cu_seqlens: i32[B+1];
    start_pos: i32[B]; state_index: i32[B]; ape: f32[r, C] or None; block_table: i32[B, M] or None;
    kv_cache: f32|bf16[rows, d] or None (rows are written at their store slots).
    row_offsets: i32[B+1] on the device, first output row of each request (prefill: cumulative max(1, nc_b);
    decode: cu_seqlens).
    lengths, starts, slots, kept: per-request host ints (n_b, s_b, state slot, kept_b); total_rows: R.
    """

    mode: Mode
    ratio: int
    overlap: bool
    dim: int
    channels: int
    window: int
    ring: int
    score: torch.Tensor
    latent: torch.Tensor
    cu_seqlens: torch.Tensor
    start_pos: torch.Tensor
    state: torch.Tensor
    state_index: torch.Tensor
    ape: torch.Tensor | None
    out_dtype: torch.dtype
    block_table: torch.Tensor | None
    rows_per_block: int
    kv_cache: torch.Tensor | None
    lengths: tuple[int, ...]
    starts: tuple[int, ...]
    slots: tuple[int, ...]
    kept: tuple[int, ...]
    row_counts: tuple[int, ...]
    row_offsets: torch.Tensor
    total_rows: int

    @property
    def num_requests(self) -> int:
        return len(self.lengths)

    @property
    def total_inputs(self) -> int:
        return int(self.score.shape[0])

    @property
    def max_new(self) -> int:
        return max(self.lengths, default=0)


def completed_rows(start: int, length: int, ratio: int) -> int:
    """``nc = floor(e / r) - floor(s / r)``: groups whose last position lies in ``[s, e)``."""
    return (start + length) // ratio - start // ratio


def kept_positions(length: int, ring: int) -> int:
    """New positions a call writes to the ring: the newest ``min(n, S)`` (the others would be overwritten)."""
    return min(length, ring)


def min_ring_size(window: int, lengths: list[int] | tuple[int, ...], rollback: bool = False) -> int:
    """The smallest ring a read-then-write call accepts: ``W - 1``, or ``W + q - 2`` when it may roll back."""
    if window == 1:
        return 0
    qmax = max(lengths, default=0)
    return window + qmax - 2 if rollback and qmax > 0 else window - 1


def _tensor(x: object, argument: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{argument}: must be a torch.Tensor, got {type(x).__name__}")
    return x


def _dtype(x: torch.Tensor, argument: str, *dtypes: torch.dtype) -> None:
    if x.dtype not in dtypes:
        names = " or ".join(str(d).removeprefix("torch.") for d in dtypes)
        raise TypeError(f"{argument}: must have dtype {names}, got {str(x.dtype).removeprefix('torch.')}")


def _shape(x: torch.Tensor, argument: str, shape: tuple[int, ...], meaning: str) -> None:
    require(tuple(x.shape) == shape, argument, f"must have shape {list(shape)} ({meaning}), got {list(x.shape)}")


def _contiguous(x: torch.Tensor, argument: str) -> None:
    require(x.is_contiguous(), argument, "must be contiguous")


def _device(x: torch.Tensor, argument: str, device: torch.device) -> None:
    require(x.device == device, argument, f"must be on {device} like score, got {x.device}")


def _positive_int(value: object, argument: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{argument}: must be an int, got {type(value).__name__}")
    require(value > 0, argument, f"must be a positive integer, got {value}")
    return value


def check_backend_device(backend: str, device: torch.device) -> None:
    """Triton compiles for CUDA; on the CPU it runs only under TRITON_INTERPRET=1."""
    require(backend in ("torch", "triton"), "backend", f"must be 'torch' or 'triton', got {backend!r}")
    if backend == "triton" and device.type != "cuda":
        require(
            device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1",
            "score",
            f"the triton backend needs a CUDA tensor (or a CPU tensor with TRITON_INTERPRET=1), got {device}",
        )


def prepare(
    mode: Mode,
    score: torch.Tensor,
    latent: torch.Tensor,
    cu_seqlens: torch.Tensor,
    start_pos: torch.Tensor,
    state: torch.Tensor,
    state_index: torch.Tensor,
    *,
    ratio: int,
    overlap: bool = False,
    ape: torch.Tensor | None = None,
    out_dtype: torch.dtype = torch.float32,
    block_table: torch.Tensor | None = None,
    block_size: int | None = None,
    kv_cache: torch.Tensor | None = None,
    rollback: bool = False,
) -> Plan:
    """Validate one call and compute its host metadata. Raises ValueError/TypeError naming the argument."""
    r, window = _check_layer(ratio, overlap)
    if out_dtype not in FLOAT_OUT:
        raise TypeError(f"out_dtype: must be torch.float32 or torch.bfloat16, got {out_dtype}")
    score, latent, T, C = _check_inputs(score, latent, overlap)
    device = score.device
    d = C // (2 if overlap else 1)
    B = _check_offsets(cu_seqlens, start_pos, state_index, device)
    N, S = _check_state(state, C, device)
    if ape is not None:
        ape = _check_ape(ape, r, C, device)
    lengths, starts, slots = _read_requests(cu_seqlens, start_pos, state_index, T, N)
    _check_ring(mode, rollback, S, window, lengths)
    row_counts = _row_counts(mode, r, starts, lengths)
    rows_per_block = 0
    if block_table is not None or block_size is not None:
        block_table, rows_per_block = _check_table(block_table, block_size, r, B, device)
    if kv_cache is not None:
        kv_cache = _check_cache(kv_cache, block_table, d, device)
    if block_table is not None:
        _check_block_table(block_table, starts, lengths, r, rows_per_block, kv_cache)
    offsets = [0]
    for count in row_counts:
        offsets.append(offsets[-1] + count)
    return Plan(
        mode=mode,
        ratio=r,
        overlap=overlap,
        dim=d,
        channels=C,
        window=window,
        ring=S,
        score=score,
        latent=latent,
        cu_seqlens=cu_seqlens,
        start_pos=start_pos,
        state=state,
        state_index=state_index,
        ape=ape,
        out_dtype=out_dtype,
        block_table=block_table,
        rows_per_block=rows_per_block,
        kv_cache=kv_cache,
        lengths=lengths,
        starts=starts,
        slots=slots,
        kept=tuple(kept_positions(n, S) for n in lengths),
        row_counts=row_counts,
        row_offsets=cu_seqlens if mode is Mode.DECODE else torch.tensor(offsets, dtype=torch.int32).to(device),
        total_rows=offsets[-1],
    )


def _check_layer(ratio: object, overlap: object) -> tuple[int, int]:
    """``(ratio, W)``: the ratio a positive int, overlap a bool and only with ratio 4."""
    r = _positive_int(ratio, "ratio")
    if not isinstance(overlap, bool):
        raise TypeError(f"overlap: must be a bool, got {type(overlap).__name__}")
    require(not overlap or r == 4, "overlap", f"overlapping windows exist only for ratio 4, got ratio {r}")
    return r, (2 if overlap else 1) * r


def _check_inputs(score: object, latent: object, overlap: bool) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    """score and latent: contiguous f32[T, C] on one device, C a positive multiple of the halves (2 with
    overlap). Returns them and ``(T, C)``."""
    score = _tensor(score, "score")
    device = score.device
    latent = _tensor(latent, "latent")
    for name, x in (("score", score), ("latent", latent)):
        _dtype(x, name, torch.float32)
        require(x.dim() == 2, name, f"must be 2-D [T, C], got {x.dim()}-D")
        _contiguous(x, name)
        _device(x, name, device)
    _shape(latent, "latent", tuple(score.shape), "same as score")
    T, C = (int(n) for n in score.shape)
    coff = 2 if overlap else 1
    require(C > 0 and C % coff == 0, "score", f"must have a positive channel count divisible by {coff}, got {C}")
    return score, latent, T, C


def _check_offsets(cu_seqlens: object, start_pos: object, state_index: object, device: torch.device) -> int:
    """cu_seqlens i32[B+1], start_pos i32[B], state_index i32[B]: contiguous, on ``device``. Returns B."""
    for name, x in (
        ("cu_seqlens", _tensor(cu_seqlens, "cu_seqlens")),
        ("start_pos", _tensor(start_pos, "start_pos")),
        ("state_index", _tensor(state_index, "state_index")),
    ):
        _dtype(x, name, torch.int32)
        require(x.dim() == 1, name, f"must be 1-D, got {x.dim()}-D")
        _contiguous(x, name)
        _device(x, name, device)
    assert isinstance(cu_seqlens, torch.Tensor) and isinstance(start_pos, torch.Tensor)
    assert isinstance(state_index, torch.Tensor)
    require(cu_seqlens.numel() >= 1, "cu_seqlens", "must hold B + 1 >= 1 offsets")
    B = int(cu_seqlens.numel()) - 1
    _shape(start_pos, "start_pos", (B,), "one start per request")
    _shape(state_index, "state_index", (B,), "one state slot per request")
    return B


def _check_state(state: object, C: int, device: torch.device) -> tuple[int, int]:
    """state: contiguous f32[N, S, 2, C] on ``device`` with N >= 1. Returns ``(N, S)``."""
    state = _tensor(state, "state")
    _dtype(state, "state", torch.float32)
    require(state.dim() == 4, "state", f"must be 4-D [N, S, 2, C], got {state.dim()}-D")
    _contiguous(state, "state")
    _device(state, "state", device)
    N, S = int(state.shape[0]), int(state.shape[1])
    _shape(state, "state", (N, S, 2, C), "state slots, ring positions, score/latent, channels")
    require(N >= 1, "state", f"must have at least one state slot, got {list(state.shape)}")
    return N, S


def _check_ape(ape: object, ratio: int, C: int, device: torch.device) -> torch.Tensor:
    """ape: contiguous f32[ratio, C] on ``device``."""
    ape = _tensor(ape, "ape")
    _dtype(ape, "ape", torch.float32)
    _shape(ape, "ape", (ratio, C), "one row per offset within the group")
    _contiguous(ape, "ape")
    _device(ape, "ape", device)
    return ape


def _read_requests(
    cu_seqlens: torch.Tensor, start_pos: torch.Tensor, state_index: torch.Tensor, T: int, N: int
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """The per-request host values (one device-to-host copy each), checked: ``cu_seqlens`` runs from 0 to T
    without decreasing, starts are >= 0 and every request ends by position 2**31 - 1, and the requests with new
    positions own distinct state slots in [0, N). Returns ``(lengths, starts, slots)``."""
    cu = [int(v) for v in cu_seqlens.tolist()]
    starts = tuple(int(v) for v in start_pos.tolist())
    slots = tuple(int(v) for v in state_index.tolist())
    require(cu[0] == 0, "cu_seqlens", f"must start at 0, got {cu[0]}")
    lengths = tuple(cu[b + 1] - cu[b] for b in range(len(starts)))
    for b, n in enumerate(lengths):
        require(n >= 0, "cu_seqlens", f"must be non-decreasing (request {b} has length {n})")
    require(cu[-1] == T, "cu_seqlens", f"must end at the number of input rows {T}, got {cu[-1]}")
    for b, (s, n) in enumerate(zip(starts, lengths, strict=True)):
        require(s >= 0, "start_pos", f"must be >= 0, got {s} for request {b}")
        require(s + n <= INT32_MAX, "start_pos", f"request {b} ends past position 2**31 - 1")
    live = [b for b, n in enumerate(lengths) if n > 0]
    for b in live:
        require(0 <= slots[b] < N, "state_index", f"must lie in [0, {N}), got {slots[b]} for request {b}")
    used = [slots[b] for b in live]
    require(len(set(used)) == len(used), "state_index", "requests with new positions must own distinct state slots")
    return lengths, starts, slots


def _check_ring(mode: Mode, rollback: object, S: int, window: int, lengths: tuple[int, ...]) -> None:
    """rollback a bool, and only for decode; the ring at least :func:`min_ring_size`."""
    if not isinstance(rollback, bool):
        raise TypeError(f"rollback: must be a bool, got {type(rollback).__name__}")
    require(not rollback or mode is Mode.DECODE, "rollback", "only a decode / verify step can be rolled back")
    need = min_ring_size(window, lengths, rollback)
    rule = "W + q - 2 (rollback)" if rollback and window > 1 else "W - 1"
    require(
        S >= need,
        "state",
        f"a ring of {S} positions is below the safe size {need} = {rule} for W = {window} window positions "
        f"(read-then-write)",
    )


def _row_counts(mode: Mode, ratio: int, starts: tuple[int, ...], lengths: tuple[int, ...]) -> tuple[int, ...]:
    """Output rows per request: prefill ``max(1, nc_b)``, decode one per new position."""
    if mode is Mode.PREFILL:
        return tuple(max(1, completed_rows(s, n, ratio)) for s, n in zip(starts, lengths, strict=True))
    return lengths


def _check_table(
    block_table: object, block_size: object, ratio: int, B: int, device: torch.device
) -> tuple[torch.Tensor, int]:
    """block_table (contiguous i32[B, blocks] on ``device``) and block_size (a multiple of the ratio) given
    together. Returns the table and the compressed rows per block."""
    require(block_table is not None, "block_table", "must be given with block_size")
    require(block_size is not None, "block_size", "must be given with block_table")
    bs = _positive_int(block_size, "block_size")
    require(bs % ratio == 0, "block_size", f"must be a multiple of ratio {ratio}, got {bs}")
    table = _tensor(block_table, "block_table")
    _dtype(table, "block_table", torch.int32)
    require(table.dim() == 2 and table.shape[0] == B, "block_table", f"must be [B={B}, blocks]")
    _contiguous(table, "block_table")
    _device(table, "block_table", device)
    return table, bs // ratio


def _check_cache(kv_cache: object, block_table: torch.Tensor | None, d: int, device: torch.device) -> torch.Tensor:
    """kv_cache: contiguous f32|bf16[rows, d] on ``device``, only with a block table to place its rows."""
    require(block_table is not None, "kv_cache", "needs block_table and block_size to place rows")
    cache = _tensor(kv_cache, "kv_cache")
    _dtype(cache, "kv_cache", *FLOAT_OUT)
    require(cache.dim() == 2 and cache.shape[1] == d, "kv_cache", f"must be [rows, {d}]")
    _contiguous(cache, "kv_cache")
    _device(cache, "kv_cache", device)
    return cache


def _check_block_table(
    block_table: torch.Tensor,
    starts: tuple[int, ...],
    lengths: tuple[int, ...],
    ratio: int,
    rows_per_block: int,
    kv_cache: torch.Tensor | None,
) -> None:
    """Every block a completed row lands in exists, is >= 0, and (with a cache) lies inside the cache."""
    table = block_table.tolist()
    width = int(block_table.shape[1])
    capacity = None if kv_cache is None else int(kv_cache.shape[0]) // rows_per_block
    for b, (s, n) in enumerate(zip(starts, lengths, strict=True)):
        first, end = s // ratio, (s + n) // ratio  # rows completed in this call: [first, end)
        if end <= first:
            continue
        need = (end - 1) // rows_per_block + 1
        require(width >= need, "block_table", f"is too short: request {b} needs {need} blocks, has {width}")
        for i in range(first // rows_per_block, need):
            block = table[b][i]
            if block < 0 or (capacity is not None and block >= capacity):
                bound = "inf" if capacity is None else capacity
                raise fail(
                    "block_table", f"entry [{b}, {i}] = {block} must name a block in [0, {bound}) for a stored row"
                )
