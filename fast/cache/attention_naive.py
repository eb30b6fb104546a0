"""Eager-torch sparse MQA attention with a sink: the same-precision twin of ``attention.py``.

    sparse_attention(call: fast.cache.checks.AttentionArgs) -> (out, lse)

The formula as a torch user writes it: gather the lanes' rows (``[M, K, D]``), scores ``q @ k^T``, softmax
statistics after subtracting the row maximum, ``p @ v``, and the sink once in the final denominator. ``precision``:
"f32" (default) computes everything in float32 on the widened inputs, the contract's same-precision baseline;
"bf16" runs the two products in the input dtype as a bf16 model does (scores and probabilities rounded to
bf16), the flash-attention style baseline; "f64" computes in float64 (docs/cache-kernels.md). With ``kv_cache``
the rows are first dequantized from the FP8 cache (V4 584-byte or V4.1 528-byte rows) by the torch gather.
"""

from __future__ import annotations

import math

import torch

from fast.cache import quantize_naive
from fast.cache.checks import AttentionArgs, GatherArgs
from fast.cache.formats import CacheFormat


def gather_kv(
    kv: torch.Tensor, indices: torch.Tensor, dtype: torch.dtype, kv_cache: tuple[CacheFormat, int] | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The lanes' rows ``[M, K, D]`` in ``dtype`` (zero where invalid) and the validity mask ``[M, K]``."""
    M, K = indices.shape
    if kv_cache is not None:
        fmt, rows_per_block = kv_cache
        n = kv.shape[0] * rows_per_block
        valid = (indices >= 0) & (indices < n)
        slots = torch.where(valid, indices, -1).reshape(-1).long()
        out = torch.empty(M * K, fmt.dims, dtype=torch.float32, device=kv.device)
        rows = quantize_naive.gather_rows(GatherArgs(kv, slots, fmt, rows_per_block, out))
        return rows.reshape(M, K, fmt.dims).to(dtype), valid
    valid = (indices >= 0) & (indices < kv.shape[0])
    if kv.shape[0] == 0:
        return torch.zeros(M, K, kv.shape[1], dtype=dtype, device=kv.device), valid
    return kv[torch.where(valid, indices, 0).long()].to(dtype), valid


def sparse_attention(call: AttentionArgs) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of each query row over its valid lanes; results written into ``call.out`` and ``call.lse``."""
    dtype = {"f64": torch.float64, "f32": torch.float32, "bf16": call.q.dtype}[call.precision]
    q = call.q.to(dtype)
    rows, valid = gather_kv(call.kv, call.indices, dtype, call.kv_cache)
    acc = torch.float64 if dtype == torch.float64 else torch.float32
    scores = torch.matmul(q, rows.transpose(1, 2)).to(acc) * call.scale
    scores = scores.masked_fill(~valid[:, None, :], -math.inf)
    if scores.shape[-1] == 0:  # no lane at all: every row is empty
        top = torch.zeros((*scores.shape[:-1], 1), dtype=scores.dtype, device=scores.device)
    else:
        top = scores.amax(dim=-1, keepdim=True)
        top = torch.where(top == -math.inf, torch.zeros_like(top), top)
    p = torch.exp(scores - top)
    total = p.sum(dim=-1)
    weighted = torch.matmul(p.to(dtype), rows[..., : call.dv]).to(acc)
    return write_rows(call, weighted, total, top[..., 0], valid)


def write_rows(
    call: AttentionArgs, weighted: torch.Tensor, total: torch.Tensor, top: torch.Tensor, valid: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """From ``sum_j p_j v_j`` ([M, H, dv]) and ``sum_j p_j`` ([M, H]) at the row maximum ``top`` ([M, H], 0 where
    no lane is valid): out (the sink once in the denominator) and lse into ``call.out`` and ``call.lse``, a row
    without a valid lane (``valid``, [M, K]) as ``call.empty_nan`` says."""
    sink = call.sink
    denominator = total if sink is None else total + torch.exp(sink.to(total.dtype)[None, :] - top)
    result = weighted / denominator[..., None]
    log_total = top + torch.log(total)
    empty = (valid.sum(dim=-1) == 0)[:, None]
    empty_out, empty_lse = (math.nan, math.nan) if call.empty_nan else (0.0, math.inf)
    call.out.copy_(torch.where(empty[..., None], torch.full_like(result, empty_out), result))
    call.lse.copy_(torch.where(empty, torch.full_like(log_total, empty_lse), log_total))
    return call.out, call.lse
