# mypy: disable-error-code="no-untyped-def,untyped-decorator"
"""RMSNorm and RoPE of compressed rows in Triton, before ``quantize_store`` stores them (docs/cache-kernels.md).

    normed_rows(call) -> f32[R, d]

One program per row loads its ``d`` values (``DP``, the next power of two), sums their squares in float32, and
writes ``x * w * rsqrt(mean + eps)``; in the last ``rope_dim`` dimensions value ``i`` is paired with ``i ^ 1``
(the pairs start at an even dimension) and becomes ``y_i c - y_{i+1} s`` (even ``i``) or ``y_i c + y_{i-1} s``
(odd ``i``), with ``c, s`` the row position's cos and sin of pair ``(i - start) // 2``. The partner's value is
loaded and normed again rather than exchanged between lanes. Rows at slot -1 are computed too; the store never
reads them.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fast.cache.checks import NormRopeArgs


@triton.jit
def _norm_rope_kernel(
    rows_ptr, weight_ptr, cos_sin_ptr, positions_ptr, out_ptr, dims, rope_dim, table_rows, eps, DP: tl.constexpr
):
    r = tl.program_id(0).to(tl.int64)
    i = tl.arange(0, DP)
    here = i < dims
    x = tl.load(rows_ptr + r * dims + i, mask=here, other=0.0)
    rrms = 1.0 / tl.sqrt(tl.sum(x * x, 0) / dims + eps)
    y = x * tl.load(weight_ptr + i, mask=here, other=0.0) * rrms
    start = dims - rope_dim
    rotated = here & (i >= start)
    partner = i ^ 1
    yp = tl.load(rows_ptr + r * dims + partner, mask=rotated, other=0.0)
    yp = yp * tl.load(weight_ptr + partner, mask=rotated, other=0.0) * rrms
    position = tl.minimum(tl.maximum(tl.load(positions_ptr + r), 0), table_rows - 1)
    pair = tl.where(rotated, (i - start) // 2, 0)
    c = tl.load(cos_sin_ptr + position * rope_dim + pair, mask=rotated, other=1.0)
    s = tl.load(cos_sin_ptr + position * rope_dim + rope_dim // 2 + pair, mask=rotated, other=0.0)
    sign = tl.where(i % 2 == 0, -1.0, 1.0)
    out = tl.where(rotated, y * c + sign * yp * s, y)
    tl.store(out_ptr + r * dims + i, out, mask=here)


def normed_rows(call: NormRopeArgs) -> torch.Tensor:
    rows, dims = call.rows.shape
    out = torch.empty_like(call.rows)
    if rows == 0:
        return out
    _norm_rope_kernel[(rows,)](
        call.rows,
        call.weight,
        call.cos_sin,
        call.positions,
        out,
        dims,
        call.rope_dim,
        call.cos_sin.shape[0],
        call.eps,
        DP=triton.next_power_of_2(dims),
        num_warps=4,
    )
    return out
