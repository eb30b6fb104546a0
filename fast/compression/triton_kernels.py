"""Triton kernels for compression: prefill over packed requests, and one-launch decode / verify.

Names and shapes follow ``naive.py``. Every kernel works on a tile of output rows x window entries x channels
(``[BLOCK_R, BLOCK_K, BLOCK_C]``, channels contiguous in memory): the prefill kernels are in
``triton_prefill.py``, the decode kernel in ``triton_decode.py``, the pieces they share in ``triton_common.py``.
A window of up to ``BLOCK_K`` entries is a two-pass softmax in registers; longer windows (r = 128) go through it
in chunks with an online (running max) merge. Exponentials are the hardware ``exp2`` of ``(x - max) * log2(e)``
(``Config.poly_exp``: a polynomial within one ulp instead), accumulation is f32, the final division is correctly
rounded.

``launcher(plan)`` binds a validated call (tiles, arguments, compile-time flags) once; calling the ``Launch``
allocates the outputs and launches. Tile sizes: ``default_tiles``; compile check: ``compile_check.py``.

BF16 outputs are rounded to nearest even with integer operations on the f32 bits (identical compiled and
interpreted); NaN becomes 0x7FC0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import triton

from fast.compression.naive import CompressionResult
from fast.compression.plan import Mode, Plan, completed_rows
from fast.compression.triton_decode import _decode_kernel
from fast.compression.triton_prefill import _keep_kernel, _prefill_rows_kernel, prefill_tiles


@dataclass(frozen=True)
class Config:
    """Tiles: output rows, window entries per chunk, channels; warps per program; decode: new positions per
    tile (zero rows, ring write)."""

    block_r: int
    block_k: int
    block_c: int
    num_warps: int
    block_n: int = 1
    poly_exp: bool = False
    evict_first: bool = False
    """Streamed inputs loaded with the evict-first cache hint (each is read once; 2% slower on C2 in the H200
    sweep, so off by default)."""


TILE_ELEMENTS = 8192
PREFILL_TILE_ELEMENTS = 2048


def default_tiles(mode: Mode, window: int, dim: int, max_new: int, max_completed: int) -> Config:
    """Tile sizes [rows, entries, channels], warps, from the H200 sweeps of the benchmark (results/bench.md)
    and the sm_90 register counts of compile_check. Prefill: 2048-element tiles, at least 2 rows, at most one
    warp per row, up to 4 (C2 ``8 x 2 x 128``, 4 warps; V4 overlap ``2 x 8 x 128``, 2 warps: warps split over
    the entries would reduce the window through shared memory, see ``2 x 8 x 128`` with 4 warps in the sweep);
    a window longer than 16 entries in chunks of 32 (``1 x 32 x 128``, 4 warps). Decode: only the rows that
    complete (``max_completed`` per request), so a batch fits one wave."""
    new_tile = triton.next_power_of_2(max(1, min(max_new, 16)))
    if window > 16:
        block_c = min(triton.next_power_of_2(dim), 128 if mode is Mode.PREFILL else 64)
        return Config(1, 32, block_c, 4, new_tile)
    block_k = triton.next_power_of_2(window)
    if mode is Mode.PREFILL:
        block_c = min(triton.next_power_of_2(dim), 128)
        block_r = max(2, min(64, PREFILL_TILE_ELEMENTS // (block_k * block_c)))
        warps = min(4, block_r)
    else:
        block_r = triton.next_power_of_2(max(1, max_completed))
        block_c = min(triton.next_power_of_2(dim), 128 if block_r >= 4 else 32)
        block_r = max(1, min(block_r, TILE_ELEMENTS // (block_k * block_c)))
        warps = 4 if block_r >= 4 else 1
    return Config(block_r, block_k, block_c, warps, new_tile)


def default_config(plan: Plan) -> Config:
    completed = (completed_rows(s, n, plan.ratio) for s, n in zip(plan.starts, plan.lengths, strict=True))
    return default_tiles(plan.mode, plan.window, plan.dim, plan.max_new, max(completed, default=0))


def allocate(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Output buffers, left unwritten: the kernels write every lane (tests pre-fill them with NaN to check)."""
    return torch.empty(shape, dtype=dtype, device=device)


@dataclass(frozen=True)
class Launch:
    """A validated call bound to its kernels: ``launch()`` allocates the outputs and launches, nothing else
    (the host work of building tiles and arguments is done once, as an engine would per step)."""

    plan: Plan
    config: Config
    tiles: torch.Tensor | None
    args: tuple[Any, ...]
    flags: dict[str, Any]
    """Keyword arguments of the kernels: compile-time flags and, for prefill, a single request's fields."""

    def __call__(self) -> CompressionResult:
        plan, cfg = self.plan, self.config
        device, R = plan.score.device, plan.total_rows
        rows = allocate((R, plan.dim), plan.out_dtype, device)
        slots = allocate((R,), torch.int64, device)
        positions = allocate((R,), torch.int64, device)
        out = rows.view(torch.int16) if plan.out_dtype == torch.bfloat16 else rows
        score, latent, ape, state, table, table_stride, cache = self.args
        if plan.mode is Mode.PREFILL:
            if R > 0:
                tiles = self.tiles if self.tiles is not None else plan.cu_seqlens  # unread with ONE_REQUEST
                tile_count = self.tiles.shape[0] if self.tiles is not None else triton.cdiv(R, cfg.block_r)
                _prefill_rows_kernel[(tile_count * triton.cdiv(plan.dim, cfg.block_c),)](
                    score, latent, ape, state, tiles, table, table_stride, out, slots, positions, cache,
                    **self.flags, num_warps=cfg.num_warps,
                )  # fmt: skip
            if any(plan.kept) and not self.flags.get("KEEP"):
                C = plan.channels
                keep_c = min(triton.next_power_of_2(C), 256)
                keep_p = max(1, min(triton.next_power_of_2(max(plan.kept)), 4096 // keep_c))
                _keep_kernel[(plan.num_requests * triton.cdiv(C, keep_c),)](
                    score, latent, plan.state, plan.state_index, plan.cu_seqlens, plan.start_pos,
                    C=C, S=plan.ring, BLOCK_P=keep_p, BLOCK_C=keep_c, num_warps=4,
                )  # fmt: skip
        elif plan.num_requests > 0:
            _decode_kernel[(plan.num_requests * triton.cdiv(plan.dim, cfg.block_c),)](
                score, latent, ape, state, plan.state_index, plan.cu_seqlens, plan.start_pos, table, table_stride,
                out, slots, positions, cache, **self.flags, WRITE_RING=any(plan.kept), BLOCK_N=cfg.block_n,
                num_warps=cfg.num_warps,
            )  # fmt: skip
        return CompressionResult(rows, slots, positions)


def launcher(plan: Plan, config: Config | None = None) -> Launch:
    """Bind a validated call to its kernels (tiles, arguments, compile-time flags)."""
    cfg = config or default_config(plan)
    dummy = plan.score
    state = plan.state if plan.state.numel() > 0 else dummy
    ape = plan.ape if plan.ape is not None else dummy
    table = plan.block_table if plan.block_table is not None else plan.start_pos
    table_stride = int(table.stride(0)) if plan.block_table is not None else 0
    cache = plan.kv_cache
    cache_arg = dummy if cache is None else (cache.view(torch.int16) if cache.dtype == torch.bfloat16 else cache)
    flags: dict[str, Any] = dict(
        R=plan.ratio,
        D=plan.dim,
        C=plan.channels,
        OVERLAP=plan.overlap,
        HAS_APE=plan.ape is not None,
        S=max(1, plan.ring),  # W = 1 may run without a ring; nothing then reads or writes it
        ROWS_PER_BLOCK=max(1, plan.rows_per_block),
        HAS_TABLE=plan.block_table is not None,
        WRITE_CACHE=cache is not None,
        OUT_BF16=plan.out_dtype == torch.bfloat16,
        CACHE_BF16=cache is not None and cache.dtype == torch.bfloat16,
        W=plan.window,
        BLOCK_R=cfg.block_r,
        BLOCK_K=cfg.block_k,
        BLOCK_C=cfg.block_c,
        POLY_EXP=cfg.poly_exp,
        EVICT="evict_first" if cfg.evict_first else "",
    )
    tiles = None
    if plan.mode is Mode.PREFILL:
        one = plan.num_requests == 1
        if plan.total_rows > 0 and not one:
            tiles = prefill_tiles(plan, cfg.block_r)
        start, length, slot, reserved = (plan.starts[0], plan.lengths[0], plan.slots[0], plan.row_counts[0]) if one \
            else (0, 0, 0, 0)  # fmt: skip
        readers = 2 if plan.overlap else 1  # the rows whose windows can reach before the start
        flags |= dict(cu_ptr=plan.cu_seqlens, one_start=start, one_length=length, one_slot=slot,
                      one_completed=completed_rows(start, length, plan.ratio), one_reserved=reserved, ONE_REQUEST=one,
                      KEEP=any(plan.kept) and cfg.block_r >= readers,
                      BLOCK_P=max(1, min(triton.next_power_of_2(max(plan.kept, default=1)), 16)))  # fmt: skip
    return Launch(plan, cfg, tiles, (plan.score, plan.latent, ape, state, table, table_stride, cache_arg), flags)


def run(plan: Plan, config: Config | None = None) -> CompressionResult:
    """Launch the kernels for a validated call: one launch (prefill: two where a tile of one row leaves an
    overlapping window's ring readers in two tiles, see ``_keep_kernel``)."""
    return launcher(plan, config)()
