"""SGLang 0.5.23 ``dequantize_k_cache_paged_dsv4`` (V4, 584 B) given its token ids as a strided view.

Standalone: ``python results/peers/repro_sglang_dequant_strided_slots.py`` from the repository root, with the
wheels unpacked by ``make peers``. On a machine without CUDA it runs SGLang's Triton kernel in the interpreter;
with CUDA, compiled. Four distinct rows are stored with this project's V4 store; the ids 1, 2, 3 are passed once
contiguous and once as every other element of a buffer whose gaps hold id 0 (``ids[::2]``, stride 2). The
function asserts a contiguous cache but not contiguous ids, and reads them as if contiguous. Prints which rows
each call returned; exits 1 if the strided call returned other rows than the contiguous one.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from csa.peers.loader import standalone

DEQUANT = "sglang.kernels.ops.attention.dsv4.dequant_k_cache"
dequantize, device = standalone("sglang", DEQUANT, "dequantize_k_cache_paged_dsv4")  # before the kernels below
from csa.peers.common import block_bytes
from fast.cache import quantize_store

rows_per_block = 4
cache = torch.zeros(1, block_bytes("v4_584", rows_per_block), dtype=torch.uint8, device=device)
rows = torch.arange(4, dtype=torch.float32, device=device).repeat_interleave(512).reshape(4, 512) + 1  # row r: r + 1
quantize_store(rows, torch.arange(4, device=device), cache, fmt="v4_584", rows_per_block=rows_per_block)


def read(ids: torch.Tensor) -> list[int]:
    out = dequantize(cache, ids, rows_per_block).reshape(ids.shape[0], 512).float()
    return [int(v) - 1 for v in out[:, 0].tolist()]  # each row's first value names it


contiguous = torch.tensor([1, 2, 3], device=device)
strided = torch.tensor([1, 0, 2, 0, 3, 0], device=device)[::2]
print(f"ids {strided.tolist()} contiguous: rows {read(contiguous)}")
print(f"ids {strided.tolist()} as a stride-2 view: rows {read(strided)}")
sys.exit(0 if read(strided) == read(contiguous) else 1)
