"""Contract-shaped entry points of the fast indexing kernels, loadable by ``csa fuzz --impl``.

csa fuzz --op topk --impl fast.indexing.entry_points:topk_v41
"""

from __future__ import annotations

import dataclasses

import torch

from fast.indexing import topk as _topk


def topk_v41(scores: torch.Tensor, lengths: torch.Tensor, offsets: torch.Tensor, *, k: int) -> torch.Tensor:
    """V4.1 valid-prefix top-k (Triton): k lanes, ascending index, -1 fill, offsets on valid lanes only."""
    return _topk.topk(scores, lengths, k=k, convention="v4.1", offsets=offsets)


topk_v41.csa_convention = "v4.1"  # type: ignore[attr-defined]


def topk_v41_split_fused(scores: torch.Tensor, lengths: torch.Tensor, offsets: torch.Tensor, *, k: int) -> torch.Tensor:
    """:func:`topk_v41` with the split-row path in its fused form (``TopKConfig.split_fused``): one launch for the
    threshold, counts and compaction of few long rows."""
    config = dataclasses.replace(_topk.default_config(), split_fused=True)
    return _topk.topk(scores, lengths, k=k, convention="v4.1", offsets=offsets, config=config)


topk_v41_split_fused.csa_convention = "v4.1"  # type: ignore[attr-defined]
