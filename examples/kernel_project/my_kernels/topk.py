"""Top-k over the valid prefix of each score row, V4.1 layout: k lanes, the chosen rows in ascending index order
with the offset added, -1 in the rest. NaN ranks above +inf, -0.0 equals 0.0, ties go to the lowest index.

``MY_KERNELS_BROKEN=1`` plants a bug real engines shipped: the whole row is ranked, stale scores past the valid
prefix included, and a chosen lane past the prefix is then dropped as -1, losing a valid row.
"""

import os

import torch


def _stable_descending(key: torch.Tensor) -> torch.Tensor:
    return torch.sort(key, dim=1, descending=True, stable=True).indices


def topk(scores: torch.Tensor, lengths: torch.Tensor, offsets: torch.Tensor, *, k: int) -> torch.Tensor:
    rows, width = scores.shape
    lanes = torch.arange(width, device=scores.device)
    n = lengths[:, None].long()
    ranked = torch.full_like(n, width) if os.environ.get("MY_KERNELS_BROKEN") == "1" else n
    # rank: lanes that take part first, then NaN, then by value; stable sorts, last key first, keep ties in index order
    nan = torch.isnan(scores)
    order = _stable_descending(torch.where(nan, torch.inf, scores + 0.0))
    order = order.gather(1, _stable_descending(nan.gather(1, order).to(torch.int8)))
    order = order.gather(1, _stable_descending((lanes < ranked).gather(1, order).to(torch.int8)))
    take = min(k, width)
    chosen = order[:, :take]
    keep = (lanes[:take] < n.clamp(max=k)) & (chosen < n)
    picked = torch.where(keep, chosen, width).sort(dim=1).values
    out = torch.full((rows, k), -1, dtype=torch.int32, device=scores.device)
    out[:, :take] = torch.where(picked < width, picked + offsets[:, None], -1).to(torch.int32)
    return out
