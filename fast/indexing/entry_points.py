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


def _split_launches(launches: int) -> _topk.TopKConfig:
    return dataclasses.replace(_topk.default_config(), split_launches=launches)


def topk_v41_split_one_launch(
    scores: torch.Tensor, lengths: torch.Tensor, offsets: torch.Tensor, *, k: int
) -> torch.Tensor:
    """:func:`topk_v41` with the split-row path's threshold, counts and compaction in one launch
    (``TopKConfig.split_launches`` 1)."""
    return _topk.topk(scores, lengths, k=k, convention="v4.1", offsets=offsets, config=_split_launches(1))


def topk_v41_split_two_launches(
    scores: torch.Tensor, lengths: torch.Tensor, offsets: torch.Tensor, *, k: int
) -> torch.Tensor:
    """:func:`topk_v41` with the split-row path's threshold in one launch, its counts and compaction in another
    (``TopKConfig.split_launches`` 2)."""
    return _topk.topk(scores, lengths, k=k, convention="v4.1", offsets=offsets, config=_split_launches(2))


topk_v41_split_one_launch.csa_convention = "v4.1"  # type: ignore[attr-defined]
topk_v41_split_two_launches.csa_convention = "v4.1"  # type: ignore[attr-defined]
