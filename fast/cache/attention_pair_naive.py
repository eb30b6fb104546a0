"""The paired-warp-group schedule of ``attention_pair`` in eager torch, step for step: its twin on any device.

    sparse_attention_pair(call: fast.cache.checks.AttentionArgs) -> (out: f32[M, H, 512], lse: f32[M, H])

Per pair of 64-lane tiles (a, b) and with m the running row maximum both groups hold (all rows at once):

- group 0: m0 = max(m, rowmax s_a); p_a = exp(s_a - m0); o_0 = o_0 exp(m - m0) + bf16(p_a) v_a[:, :256];
  with m1 = max(m0, rowmax s_b): o_0 and its row sum times exp(m0 - m1); o_0 += bf16(p_b) v_b[:, :256];
- group 1: p_b = exp(s_b - m1); o_1 = o_1 exp(m - m1) + bf16(p_b) v_b[:, 256:] + bf16(p_a exp(m0 - m1))
  v_a[:, 256:];

the two groups' row sums added at the end, the sink in the final denominator (``attention_naive.write_rows``).
Scores, sums and products in float32 from bf16 inputs, each p rounded to bf16 where the kernel rounds it. What it
checks on the CPU is the schedule's arithmetic (the rescalings, rows with no valid lane yet, the last odd tile),
not the kernel's code: ``tests/test_attention_pair.py`` holds both to the same rule.
"""

from __future__ import annotations

import math

import torch

from fast.cache.attention_naive import gather_kv, write_rows
from fast.cache.checks import AttentionArgs

TILE = 64
HALF = 256


def _unshift(m: torch.Tensor) -> torch.Tensor:
    """The maximum subtracted from the scores: 0 where no lane has been valid yet (m = -inf)."""
    return torch.where(m == -math.inf, torch.zeros_like(m), m)


def sparse_attention_pair(call: AttentionArgs) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of each query row over its valid lanes in the paired schedule; results written into
    ``call.out`` and ``call.lse``."""
    q = call.q.float()
    M, H, D = q.shape
    K = call.indices.shape[1]
    pairs = -(-K // (2 * TILE))
    lanes = torch.full((M, 2 * TILE * pairs), -1, dtype=call.indices.dtype, device=q.device)
    lanes[:, :K] = call.indices
    rows, valid = gather_kv(call.kv, lanes, torch.float32, None)
    m = torch.full((M, H), -math.inf, device=q.device)
    l0, l1 = torch.zeros(M, H, device=q.device), torch.zeros(M, H, device=q.device)
    o0 = torch.zeros(M, H, HALF, device=q.device)
    o1 = torch.zeros(M, H, D - HALF, device=q.device)

    def scores(t: int) -> tuple[torch.Tensor, torch.Tensor]:
        k = rows[:, t * TILE : (t + 1) * TILE]
        s = torch.matmul(q, k.transpose(1, 2)) * call.scale
        return s.masked_fill(~valid[:, None, t * TILE : (t + 1) * TILE], -math.inf), k

    for j in range(pairs):
        s_a, v_a = scores(2 * j)
        s_b, v_b = scores(2 * j + 1)
        m0 = torch.maximum(m, s_a.amax(dim=-1))
        m1 = torch.maximum(m0, s_b.amax(dim=-1))
        m0u, m1u = _unshift(m0), _unshift(m1)
        p_a = torch.exp(s_a - m0u[..., None])
        p_b = torch.exp(s_b - m1u[..., None])
        p_b16 = p_b.to(torch.bfloat16).float()
        alpha0 = torch.exp(m - m0u)
        l0 = l0 * alpha0 + p_a.sum(dim=-1)
        o0 = o0 * alpha0[..., None] + torch.matmul(p_a.to(torch.bfloat16).float(), v_a[..., :HALF])
        beta = torch.exp(m0 - m1u)  # 0 while no lane has been valid: p_a and the sums are 0 then
        l0 = l0 * beta
        o0 = o0 * beta[..., None] + torch.matmul(p_b16, v_b[..., :HALF])
        alpha1 = torch.exp(m - m1u)
        l1 = l1 * alpha1 + p_b.sum(dim=-1)
        p_a_at_m1 = (p_a * beta[..., None]).to(torch.bfloat16).float()
        o1 = o1 * alpha1[..., None] + torch.matmul(p_b16, v_b[..., HALF:]) + torch.matmul(p_a_at_m1, v_a[..., HALF:])
        m = m1
    weighted = torch.cat([o0, o1], dim=-1)
    return write_rows(call, weighted, l0 + l1, _unshift(m), valid[:, :K])
