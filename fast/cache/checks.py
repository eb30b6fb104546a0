"""Host-side validation for the cache kernels: every check runs before any launch and names the argument.

Type problems (not a tensor, wrong dtype) raise ``TypeError``; everything else (shape, layout, device, a value
out of range) ``ValueError``. Checks that read tensor contents (slot ranges, duplicate slots, lanes under the
``minus_one_only`` convention) cost one small device-to-host copy and can be turned off by the caller.

A checked call reaches its backends (``quantize`` / ``quantize_naive``, ``attention`` / ``attention_naive``) as
one record, ``StoreArgs``, ``GatherArgs`` or ``AttentionArgs``: the public functions in ``fast.cache`` are the
only places that spell out an operation's arguments.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from fast.cache.formats import CacheFormat
from reference.conventions import FP8_KV_ATTENTION

if TYPE_CHECKING:
    from fast.cache.attention import Config

BACKENDS = ("triton", "torch")
ATTENTION_KV_FORMATS = tuple(FP8_KV_ATTENTION)
"""The cache formats ``sparse_attention`` reads as ``kv`` (``kv_format``), dequantized in the kernel: the
conventions of the contract's ``sparse_attention_fp8_kv``."""


class _Paged:
    """A checked call on a paged cache u8[num_blocks, layers * page_bytes]."""

    cache: torch.Tensor
    layers: int

    @property
    def page_bytes(self) -> int:
        return int(self.cache.shape[1]) // self.layers


@dataclass(frozen=True)
class StoreArgs(_Paged):
    """A checked ``quantize_store``: rows f32[R, fmt.dims] go to slots i64[R] of layer ``layer`` of cache
    u8[num_blocks, layers * block_bytes] (in place; a slot outside the cache, -1 included, is skipped). Block
    ``b`` holds one page of ``block_bytes`` per layer, in layer order (``reference.cache_blocks.page_offset``)."""

    rows: torch.Tensor
    slots: torch.Tensor
    cache: torch.Tensor
    fmt: CacheFormat
    rows_per_block: int
    layers: int = 1
    layer: int = 0


@dataclass(frozen=True)
class GatherArgs(_Paged):
    """A checked ``gather_dequantize``: the rows at slots i64[R] of layer ``layer`` of cache (as ``StoreArgs``),
    dequantized into out f32[R, fmt.dims]; ``fill`` where a slot is outside the cache."""

    cache: torch.Tensor
    slots: torch.Tensor
    fmt: CacheFormat
    rows_per_block: int
    out: torch.Tensor
    fill: float = 0.0
    layers: int = 1
    layer: int = 0


@dataclass(frozen=True)
class AttentionArgs:
    """A checked ``sparse_attention``: q f32|bf16[M, H, D]; kv the same dtype [N, D], or with ``kv_cache``
    ``(format, rows_per_block)`` a cache u8[num_blocks, block_bytes] in one of ``ATTENTION_KV_FORMATS`` (D =
    512); indices i32[M, K]; sink
    f32[H] or None; ``empty_nan``: a row without a valid lane gives NaN (else 0 and lse +inf); results go into
    out f32[M, H, dv] and lse f32[M, H]. ``config``: the Triton launch (None: its default; unused by torch)."""

    q: torch.Tensor
    kv: torch.Tensor
    indices: torch.Tensor
    sink: torch.Tensor | None
    scale: float
    dv: int
    empty_nan: bool
    out: torch.Tensor
    lse: torch.Tensor
    kv_cache: tuple[CacheFormat, int] | None = None
    precision: str = "f32"
    config: Config | None = None


def tensor(x: object, name: str, dtypes: tuple[torch.dtype, ...], ndim: int) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}: must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in dtypes:
        allowed = " or ".join(str(d).removeprefix("torch.") for d in dtypes)
        raise TypeError(f"{name}: must have dtype {allowed}, got {str(x.dtype).removeprefix('torch.')}")
    if x.dim() != ndim:
        raise ValueError(f"{name}: must have {ndim} dimensions, got shape {tuple(x.shape)}")
    return x


def contiguous(x: torch.Tensor, name: str) -> None:
    if not x.is_contiguous():
        raise ValueError(f"{name}: must be contiguous (row-major, unit stride), got strides {tuple(x.stride())}")


def same_device(x: torch.Tensor, name: str, device: torch.device, reference_name: str) -> None:
    if x.device != device:
        raise ValueError(f"{name}: must be on {reference_name}'s device {device}, got {x.device}")


def backend(name: object, device: torch.device) -> str:
    """The backend, checked against the device: Triton compiles for CUDA, or runs in the interpreter on CPU."""
    if name not in BACKENDS:
        raise ValueError(f"backend: must be one of {', '.join(BACKENDS)}, got {name!r}")
    if name == "triton" and device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        raise ValueError(f"backend: 'triton' needs CUDA tensors (or TRITON_INTERPRET=1 on CPU), got {device}")
    return str(name)


def aligned(x: torch.Tensor, name: str, alignment: int) -> None:
    if x.data_ptr() % alignment:
        raise ValueError(f"{name}: the kernels read it as {alignment}-byte words; its data must start on a "
                         f"{alignment}-byte boundary (storage offset {x.storage_offset()})")  # fmt: skip


BF16_OVERFLOW = 3.3961514e38  # (2 - 2^-8) * 2^127: from here on an fp32 value rounds to bf16 infinity


def _slot_problem(lo: int, hi: int, n_slots: int, name: str) -> None:
    if lo < -1:
        raise ValueError(f"{name}: slot {lo} is below -1; only -1 marks a row that is not stored")
    if hi >= n_slots:
        raise ValueError(f"{name}: slot {hi} is past the cache, which holds {n_slots} slots")


def slots(values: torch.Tensor, n_slots: int, name: str) -> None:
    """Every slot is -1 or in ``[0, n_slots)`` (one sync)."""
    if values.numel():
        lo, hi = torch.stack(list(torch.aminmax(values))).tolist()
        _slot_problem(lo, hi, n_slots, name)


def store_inputs(rows: torch.Tensor, slots: torch.Tensor, n_slots: int, tail_from: int) -> None:
    """quantize_store's contents, with one device-to-host copy: every slot -1 or in the cache, no valid slot
    twice, and every stored row finite with its BF16 tail (values ``tail_from`` on) inside the bf16 range."""
    if slots.numel() == 0:
        return
    lo, hi = torch.aminmax(slots)
    ordered = torch.sort(slots).values
    repeats = ((ordered[1:] == ordered[:-1]) & (ordered[1:] >= 0)).sum()
    bad = ~torch.isfinite(rows).all(dim=1)
    if tail_from < rows.shape[1]:
        bad |= (rows[:, tail_from:].abs() >= BF16_OVERFLOW).any(dim=1)
    bad &= slots != -1
    first_bad = torch.argmax(bad.to(torch.int32))
    stats = torch.stack([lo, hi, repeats, bad.sum(), first_bad]).tolist()
    _slot_problem(stats[0], stats[1], n_slots, "slots")
    if stats[2]:
        raise ValueError(f"slots: {stats[2]} slot(s) appear more than once; two rows cannot share a slot")
    if stats[3]:
        i = stats[4]
        raise ValueError(f"rows[{i}]: is stored (slot {int(slots[i])}) and holds NaN, infinity or a RoPE value "
                         f"beyond the bf16 range; no cache format stores them ({stats[3]} such row(s))")  # fmt: skip


def lanes_minus_one_only(indices: torch.Tensor, kv_rows: int) -> None:
    """Under ``minus_one_only``, a lane is -1 or a row of the cache (one sync)."""
    if indices.numel() == 0:
        return
    lo, hi = (int(v) for v in torch.stack(list(torch.aminmax(indices))).tolist())
    if lo < -1:
        raise ValueError(f"indices: lane {lo} is negative but not -1; under minus_one_only only -1 marks an "
                         "invalid lane (use invalid='out_of_range' to skip it)")  # fmt: skip
    if hi >= kv_rows:
        raise ValueError(f"indices: lane {hi} >= kv rows {kv_rows}; under minus_one_only it would be an "
                         "out-of-bounds read (use invalid='out_of_range' to skip it)")  # fmt: skip


@dataclass(frozen=True)
class NormRopeArgs:
    """A checked ``fast.cache.norm_rope_store`` call: the rows to norm and rotate and how."""

    rows: torch.Tensor
    weight: torch.Tensor
    cos_sin: torch.Tensor
    positions: torch.Tensor
    eps: float
    rope_dim: int


def norm_rope_inputs(
    rows: torch.Tensor, weight: object, cos_sin: object, positions: object, eps: object, rope_dim: object
) -> NormRopeArgs:
    """The norm and RoPE arguments beside already checked ``rows`` (f32[R, d])."""
    d = int(rows.shape[1])
    w = tensor(weight, "weight", (torch.float32,), 1)
    same_device(w, "weight", rows.device, "cache")
    if tuple(w.shape) != (d,):
        raise ValueError(f"weight: must be f32[{d}] (one weight per value), got shape {tuple(w.shape)}")
    if isinstance(rope_dim, bool) or not isinstance(rope_dim, int):
        raise TypeError(f"rope_dim: must be an int, got {type(rope_dim).__name__}")
    if rope_dim <= 0 or rope_dim % 2 or rope_dim > d:
        raise ValueError(f"rope_dim: must be even, positive and <= {d}, got {rope_dim}")
    table = tensor(cos_sin, "cos_sin", (torch.float32,), 2)
    same_device(table, "cos_sin", rows.device, "cache")
    if table.shape[1] != rope_dim or table.shape[0] == 0:
        raise ValueError(f"cos_sin: must be f32[P, {rope_dim}] with P >= 1 (cos, then sin), got {tuple(table.shape)}")
    p = tensor(positions, "positions", (torch.int64,), 1)
    same_device(p, "positions", rows.device, "cache")
    if p.shape[0] != rows.shape[0]:
        raise ValueError(f"positions: must have one position per row ({rows.shape[0]}), got {p.shape[0]}")
    if isinstance(eps, bool) or not isinstance(eps, int | float) or not 0 <= eps < float("inf"):
        raise ValueError(f"eps: must be a finite number >= 0, got {eps!r}")
    for x, name in ((w, "weight"), (table, "cos_sin"), (rows, "rows"), (p, "positions")):
        contiguous(x, name)
    return NormRopeArgs(rows, w, table, p, float(eps), rope_dim)
