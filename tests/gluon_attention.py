"""What the tests of the two Gluon attention kernels (``test_attention_ws``, ``test_attention_pair``) share: the
sm_90 mark, the persistent walk's inputs, and the flash-attention rule's two inequalities (each file states its
own empty-row conventions)."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from fast.cache import bench_cases
from fast.cache.checks import AttentionArgs

needs_sm90 = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9, reason="needs an sm_90 GPU"
)


def walk_inputs(kv_format: str | None, context_rows: int, topk: int) -> dict[str, Any]:
    """40 (row, head block) items for a persistent grid: 20 rows at h 80 (two head blocks a row, the second
    partial); invalid lanes in row 0, a lane past the end in row 7, row 13 empty."""
    x = bench_cases.decode_inputs(20, 80, kv_format, "cuda", context_rows=context_rows, topk=topk)
    x["indices"][0, ::3] = -1
    x["indices"][7, 5] = x["N"] + 7
    x["indices"][13] = -1
    return x


def assert_same_bits(got: AttentionArgs, want: AttentionArgs) -> None:
    """out and lse equal bit for bit, NaN where NaN."""
    assert torch.equal(got.out.nan_to_num(7.0), want.out.nan_to_num(7.0))
    assert torch.equal(got.lse.nan_to_num(7.0), want.lse.nan_to_num(7.0))


def assert_out_within_twice(
    got: AttentionArgs, exact: AttentionArgs, baseline: AttentionArgs, live: torch.Tensor
) -> None:
    """On the ``live`` rows, ``got``'s out within twice ``baseline``'s error against ``exact`` plus one f32 ulp of
    the output's scale."""
    ulp = torch.finfo(torch.float32).eps * exact.out[live].abs().max().item()
    base_err = (baseline.out - exact.out)[live].abs().max().item()
    err = (got.out - exact.out)[live].abs().max().item()
    assert math.isfinite(err) and err <= 2 * base_err + ulp, (err, base_err)


def assert_lse_within_twice(
    got: AttentionArgs, exact: AttentionArgs, baseline: AttentionArgs, live: torch.Tensor
) -> None:
    """The same rule for lse, one f32 ulp of its scale."""
    base_lse = (baseline.lse - exact.lse)[live].abs().max().item()
    got_lse = (got.lse - exact.lse)[live].abs().max().item()
    ulp = torch.finfo(torch.float32).eps * exact.lse[live].abs().max().item()
    assert got_lse <= 2 * base_lse + ulp, (got_lse, base_lse)
