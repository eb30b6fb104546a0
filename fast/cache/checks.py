"""Host-side validation for the cache kernels: every check runs before any launch and names the argument.

Type problems (not a tensor, wrong dtype) raise ``TypeError``; everything else (shape, layout, device, a value
out of range) ``ValueError``. Checks that read tensor contents (slot ranges, duplicate slots, lanes under the
``minus_one_only`` convention) cost one small device-to-host copy and can be turned off by the caller.
"""

from __future__ import annotations

import os

import torch

BACKENDS = ("triton", "torch")


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


def slots(values: torch.Tensor, n_slots: int, name: str, *, unique: bool) -> None:
    """Every slot is -1 or in ``[0, n_slots)``; with ``unique``, no valid slot appears twice (one sync)."""
    if values.numel() == 0:
        return
    lo, hi = torch.aminmax(values)
    stats = [lo, hi]
    if unique:
        ordered = torch.sort(values).values
        stats.append(((ordered[1:] == ordered[:-1]) & (ordered[1:] >= 0)).sum())
    got = torch.stack([s.to(torch.int64) for s in stats]).tolist()
    if got[0] < -1:
        raise ValueError(f"{name}: slot {got[0]} is below -1; only -1 marks a row that is not stored")
    if got[1] >= n_slots:
        raise ValueError(f"{name}: slot {got[1]} is past the cache, which holds {n_slots} slots")
    if unique and got[2]:
        raise ValueError(f"{name}: {got[2]} slot(s) appear more than once; two rows cannot share a slot")


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
