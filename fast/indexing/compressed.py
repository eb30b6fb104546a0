# mypy: disable-error-code="no-untyped-def,untyped-decorator"
"""The compressed index list of a layer without an indexer (V4 ratio 128) in Triton (docs/indexing.md).

    compressed_indices(*, ratio, seqlen, start_pos, offset=0, device="cpu")  -> i32[seqlen, W]

W = ``(start_pos + seqlen) // ratio``: the rows the last query sees. The query at position ``p = start_pos + i``
lists rows ``0 .. (p + 1) // ratio - 1`` plus ``offset``, then -1: prefill from 0 and one-token decode are the
public V4 code's two branches, and a step of several queries counts per query. One program per tile of
rows x lanes.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fast.indexing import validate as v


@triton.jit
def _compressed_kernel(out_ptr, seqlen, lanes, start_pos, ratio, offset, BR: tl.constexpr, BL: tl.constexpr):
    i = tl.program_id(0) * BR + tl.arange(0, BR)
    c = tl.program_id(1) * BL + tl.arange(0, BL)
    seen = (start_pos + i + 1) // ratio
    value = tl.where(c[None, :] < seen[:, None], c[None, :] + offset, -1)
    at = i.to(tl.int64)[:, None] * lanes + c[None, :]
    tl.store(out_ptr + at, value, mask=(i < seqlen)[:, None] & (c < lanes)[None, :])


def compressed_indices(
    *, ratio: int, seqlen: int, start_pos: int, offset: int = 0, device: str | torch.device = "cpu"
) -> torch.Tensor:
    """Every compressed row each of the ``seqlen`` queries from ``start_pos`` sees, plus ``offset``, then -1."""
    r, n, p, o = v.check_compressed(ratio, seqlen, start_pos, offset)
    dev = torch.device(device)
    v.backend_for("triton", dev)
    lanes = (p + n) // r
    out = torch.empty(n, lanes, dtype=torch.int32, device=dev)
    if out.numel() == 0:
        return out
    br, bl = v.lane_tiles()
    _compressed_kernel[(-(-n // br), -(-lanes // bl))](out, n, lanes, p, r, o, BR=br, BL=bl, num_warps=4)
    return out
