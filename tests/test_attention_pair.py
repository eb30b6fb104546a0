"""The paired-warp-group sparse attention (``fast.cache.attention_pair``, a Gluon kernel, compiled sm_90 only;
BF16 KV rows): against the float64 mode of the ``tl`` kernel on the same call, within twice the error of the
``tl`` kernel's own bf16-probability mode (the flash-attention rule) plus one f32 ulp of the output's scale; lse
and the empty rows' conventions as the ``tl`` kernel gives them. Skipped without a Hopper GPU, except the
refusal of other calls."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from fast.cache import attention, bench_cases
from fast.cache.checks import AttentionArgs

needs_sm90 = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9, reason="needs an sm_90 GPU"
)


def _call(x: dict[str, Any], precision: str, empty_nan: bool = False) -> AttentionArgs:
    M, h = x["q"].shape[:2]
    device = x["q"].device
    out = torch.full((M, h, 512), float("nan"), device=device)
    lse = torch.full((M, h), float("nan"), device=device)
    return AttentionArgs(x["q"], x["kv"], x["indices"], x["sink"], 512**-0.5, 512, empty_nan, out, lse, None,
                         precision)  # fmt: skip


CASES = {
    "b 2, h 64, top-k 256 (two pairs of tiles)": (2, 64, 256, None),
    "h 80 (a partial head block), top-k 200 (a partial tile)": (2, 80, 200, None),
    "top-k 192 (an odd number of tiles: the last pair's second tile is past the lanes)": (2, 64, 192, None),
    "top-k 1": (2, 64, 1, None),
    "top-k 64 (one tile)": (1, 64, 64, None),
    "top-k 2048, 16 rows": (16, 64, 2048, None),
    "h 128, top-k 512": (2, 128, 512, None),
    "invalid lanes and an empty row": (2, 64, 128, "invalid"),
    "a row whose valid lanes are all in the second tile of a pair": (1, 64, 128, "second"),
    "no sink": (1, 64, 128, "no sink"),
    "empty rows as NaN": (2, 64, 128, "empty nan"),
    "large scores (a row maximum that moves between the groups)": (2, 64, 512, "large"),
}


@needs_sm90
@pytest.mark.parametrize("case", list(CASES))
def test_paired_groups_match_the_f64_mode(case: str) -> None:
    from fast.cache import attention_pair

    b, h, topk, variant = CASES[case]
    x = bench_cases.decode_inputs(b, h, None, "cuda", context_rows=4096, topk=topk)
    if variant == "invalid":
        x["indices"][0, ::3] = -1
        x["indices"][1, 5] = x["N"] + 7  # past the end
        x["indices"][2] = -1  # an empty row
    if variant == "second":
        x["indices"][:, :64] = -1
    if variant == "no sink":
        x["sink"] = None
    if variant == "large":
        x["q"] = x["q"] * 8
        x["indices"][:, 300] = x["indices"][:, 3]  # the same row twice, in tiles of both groups
    nan = variant == "empty nan"
    if nan:
        x["indices"][1] = -1
    exact = _call(x, "f64", nan)
    attention.sparse_attention(exact)
    tl_call = _call(x, "bf16", nan)
    attention.sparse_attention(tl_call)
    pair_call = _call(x, "bf16", nan)
    attention_pair.sparse_attention_pair(pair_call)
    live = torch.isfinite(exact.lse)
    assert torch.equal(torch.isfinite(pair_call.lse), live)
    assert torch.equal(pair_call.lse[~live].isnan(), exact.lse[~live].isnan())
    assert torch.equal(pair_call.out[~live].isnan(), exact.out[~live].isnan())
    assert torch.equal(pair_call.out[~live].nan_to_num(), exact.out[~live].nan_to_num())
    ulp = torch.finfo(torch.float32).eps * exact.out[live].abs().max().item()
    tl_err = (tl_call.out - exact.out)[live].abs().max().item()
    pair_err = (pair_call.out - exact.out)[live].abs().max().item()
    assert math.isfinite(pair_err) and pair_err <= 2 * tl_err + ulp, (pair_err, tl_err)
    tl_lse = (tl_call.lse - exact.lse)[live].abs().max().item()
    pair_lse = (pair_call.lse - exact.lse)[live].abs().max().item()
    assert pair_lse <= 2 * tl_lse + torch.finfo(torch.float32).eps * exact.lse[live].abs().max().item(), (
        pair_lse,
        tl_lse,
    )


def test_other_calls_are_refused() -> None:
    from fast.cache import attention_pair

    x = bench_cases.decode_inputs(1, 64, "v41_fp8_528", "cpu", context_rows=256, topk=64)
    call = AttentionArgs(x["q"], x["kv"], x["indices"], x["sink"], 512**-0.5, 512, False, None, None, x["kv_cache"],
                         "bf16")  # fmt: skip
    with pytest.raises(ValueError, match=r"^call: the paired-group kernel serves bf16 q"):
        attention_pair.sparse_attention_pair(call)
