"""A V4.1 top-k with a bug real engines shipped: it ranks the whole score row, not just the valid prefix.

The logits buffer past each query's visible count is never cleared, so whatever stale value sits there (a large
score from a previous step, +inf, NaN) can be chosen and then be dropped as -1, losing a valid row.

    csa fuzz --op topk --impl examples/broken_topk.py:topk --convention v4.1
"""

import torch


def topk(scores: torch.Tensor, lengths: torch.Tensor, offsets: torch.Tensor, *, k: int) -> torch.Tensor:
    width = min(k, scores.shape[1])
    chosen = scores.topk(width, dim=1).indices.sort(dim=1).values  # BUG: lanes >= lengths take part
    lanes = torch.full((scores.shape[0], k), -1, dtype=torch.int32, device=scores.device)
    valid = chosen < lengths[:, None]
    lanes[:, :width] = torch.where(valid, chosen + offsets[:, None], -1).to(torch.int32)
    return lanes
