"""RMSNorm and RoPE of compressed rows in torch: the twin of ``fast.cache.norm_rope`` (docs/cache-kernels.md).

    normed_rows(call) -> f32[R, d]

``call`` is the checked ``fast.cache.norm_rope_store`` call. Row r: ``y = x * w / sqrt(mean(x^2) + eps)`` in
float32, then its last ``rope_dim`` values rotated in interleaved pairs by row ``positions[r]`` of ``cos_sin``
(cos in its first ``rope_dim / 2`` columns, sin in the rest). Rows at slot -1 are computed too and never stored.
"""

from __future__ import annotations

import torch

from fast.cache.checks import NormRopeArgs


def normed_rows(call: NormRopeArgs) -> torch.Tensor:
    x, half = call.rows, call.rope_dim // 2
    rrms = torch.rsqrt(x.square().mean(dim=1, keepdim=True) + call.eps)
    y = x * call.weight * rrms
    table = call.cos_sin[call.positions.clamp(0, call.cos_sin.shape[0] - 1)]
    cos, sin = table[:, :half], table[:, half:]
    start = x.shape[1] - call.rope_dim
    even, odd = y[:, start::2], y[:, start + 1 :: 2]
    rotated = torch.stack([even * cos - odd * sin, odd * cos + even * sin], dim=-1).reshape(x.shape[0], call.rope_dim)
    return torch.cat([y[:, :start], rotated], dim=1).contiguous()
