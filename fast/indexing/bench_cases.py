"""Indexing benchmark cases, registered with ``fast.bench`` (names start with ``indexing/``).

Shapes follow what the public kernels publish: index logits for 2048-4096 queries x 4K-64K rows (64 heads x
128 dims, BF16 keys and FP8 keys with per-row scales); paged decode logits for B = 64 / 128 requests, next_n 1-2,
contexts of 8K / 32K compressed rows; top-k with k = 512 / 2048 over rows of 16K-262K, batch 6 to 4096; the
fused and standalone slot translation; candidate blocks. Each case times the Triton kernel (``triton``: kernels
only, host checks off; ``triton+checks`` where the checks matter), torch eager (the public reference's
formula) and, on the headline cases, torch.compile of the same formula. Cost model: docs/indexing-kernels.md.

Run: ``python -m fast.indexing.bench --out results/indexing`` (or ``python -m fast.bench`` once the harness
lists this module).
"""

from __future__ import annotations

from fast.indexing.bench_logits import logits_case, paged_case
from fast.indexing.bench_topk import candidate_case, fused_case, slots_case, topk_case

# Registration order is the report's order: the cases the targets need first.
logits_case(4096, 16384, fp8=False, causal=False, compile_it=True, sweep=True)
topk_case(128, 262144, 2048, "v4.1", compile_it=True, sweep=True)
fused_case(128, 262144, 2048, compile_it=False)
logits_case(4096, 16384, fp8=True, causal=False, compile_it=False, sweep=True)
logits_case(4096, 16384, fp8=True, causal=False, compile_it=True, sweep=True, q8=True)
paged_case(128, 2, 32768, fp8=False, compile_it=True)
paged_case(128, 2, 32768, fp8=True, compile_it=False)
paged_case(128, 2, 32768, fp8=True, compile_it=False, q8=True)
paged_case(64, 1, 8192, fp8=False, compile_it=False)
paged_case(64, 2, 8192, fp8=True, compile_it=False)
logits_case(2048, 4096, fp8=False, causal=False, compile_it=False, sweep=False)
logits_case(2048, 65536, fp8=False, causal=False, compile_it=False, sweep=False)
logits_case(4096, 16384, fp8=False, causal=True, compile_it=False, sweep=False)
topk_case(128, 262144, 2048, "v4-prefill", compile_it=False, sweep=False)
topk_case(6, 262144, 2048, "v4.1", compile_it=False, sweep=False)
topk_case(4096, 16384, 2048, "v4.1", compile_it=False, sweep=True)
topk_case(64, 65536, 512, "select", compile_it=False, sweep=False)
# DeepSelect's shapes: k 512 / 1024, batch 6 / 256 / 4096, rows of 4K to 1M, and its adversarial distribution
for rows, width, k in ((6, 1 << 20, 1024), (256, 65536, 512), (4096, 4096, 512), (4096, 16384, 1024)):
    topk_case(rows, width, k, "v4.1", compile_it=False, sweep=False)
topk_case(128, 262144, 2048, "v4.1", compile_it=False, sweep=False, distribution="ties")
slots_case(128, 2048)
candidate_case(128, 262144, 16, 64)
