"""Contract-shaped entry points of the fast indexing kernels, loadable by ``csa fuzz --impl``.

csa fuzz --op topk --impl fast.indexing.entry_points:topk_v41
"""

from __future__ import annotations

import torch

from fast.indexing import topk as _topk


def topk_v41(scores: torch.Tensor, lengths: torch.Tensor, offsets: torch.Tensor, *, k: int) -> torch.Tensor:
    """V4.1 valid-prefix top-k (Triton): k lanes, ascending index, -1 fill, offsets on valid lanes only."""
    return _topk.topk(scores, lengths, k=k, convention="v4.1", offsets=offsets)


topk_v41.csa_convention = "v4.1"  # type: ignore[attr-defined]
