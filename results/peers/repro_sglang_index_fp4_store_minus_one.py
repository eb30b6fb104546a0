"""SGLang 0.5.23 ``store_fp4_index_k_cache`` with a slot of -1: which bytes around the cache change.

Standalone: ``python results/peers/repro_sglang_index_fp4_store_minus_one.py`` from the repository root, with
the wheels unpacked by ``make peers``. On a machine without CUDA it runs SGLang's Triton kernels in the
interpreter; with CUDA, compiled. The cache is a view into a larger buffer filled with 0xEE, then 0x11, so a
byte written outside the cache shows whatever its value. Prints, per page size, where the call wrote; exits 1 if it wrote outside the cache.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from csa.peers.loader import standalone

store, device = standalone("sglang", "sglang.kernels.ops.kvcache.dsv4_fp4_index_k_cache", "store_fp4_index_k_cache")
GUARD = 256
outside = False
for page_size in (1, 4):
    page_bytes = page_size * 68
    changed_any = torch.zeros(GUARD + 2 * page_bytes + GUARD, dtype=torch.bool, device=device)
    for fill in (0xEE, 0x11):  # a written byte equal to one fill differs from the other
        buffer = torch.full((GUARD + 2 * page_bytes + GUARD,), fill, dtype=torch.uint8, device=device)
        cache = buffer[GUARD : GUARD + 2 * page_bytes].view(2, page_bytes)
        row = torch.linspace(-3, 3, 128, device=device).reshape(1, 128)
        store(row, cache, torch.tensor([-1], dtype=torch.int64, device=device), page_size=page_size, rne=True)
        changed_any |= buffer != fill
    changed = changed_any.nonzero().flatten().tolist()
    before = [i - GUARD for i in changed if i < GUARD]
    inside = [i - GUARD for i in changed if GUARD <= i < GUARD + 2 * page_bytes]
    after = [i - GUARD - 2 * page_bytes for i in changed if i >= GUARD + 2 * page_bytes]

    def spans(offsets: list[int]) -> str:
        return f"{len(offsets)} byte(s), offsets {offsets[0]} .. {offsets[-1]}" if offsets else "none"

    print(f"page_size {page_size} (page {page_bytes} B), slot -1, on {device}:")
    print(f"  written before the cache: {spans(before)} (offset relative to the cache's first byte)")
    print(f"  written inside the cache: {spans(inside)}")
    print(f"  written after the cache:  {spans(after)}")
    outside = outside or bool(before or after)
sys.exit(1 if outside else 0)
