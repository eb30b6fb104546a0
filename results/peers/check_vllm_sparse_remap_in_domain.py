"""vLLM 0.33.0 ``candidate_blocks_to_sparse_indices`` + ``sparse_topk_remap``'s remap kernel (through the
adapter ``csa.peers.vllm_ops:sparse_topk_remap``) against the exact reference inside its domain: candidate
block sizes 8, 16 (one sparse block each) and 32 (two sparse blocks of 16, its ``ratio`` 2 path), at least one
column per row.

300 random calls of 1 to 4 rows: up to 9 distinct candidate blocks of 0 .. 11 in any order with -1 padding
anywhere, lengths from 0 to past every block (cutting the newest block), and columns either random valid
columns with -1 lanes or every valid column in order followed by -1. Each row's positions and count are
compared exactly with ``reference.candidates.remap_columns``. Prints the number of rows that differ (0
expected) and the first few. Standalone: ``python results/peers/check_vllm_sparse_remap_in_domain.py`` from the
repository root, with the wheels unpacked; on a machine without CUDA the kernels run interpreted.
"""

import os
import random
import sys

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from csa.peers.vllm_ops import sparse_topk_remap
from reference.candidates import kept_positions, remap_columns

device = "cuda" if torch.cuda.is_available() else "cpu"
rng = random.Random(1)
differ = rows_checked = 0
for _ in range(300):
    m, slots, k = rng.randint(1, 4), rng.randint(0, 9), rng.randint(1, 40)
    block_size = rng.choice([8, 16, 32])
    blocks, lengths, columns = [], [], []
    for _ in range(m):
        ids = rng.sample(range(12), slots)
        blocks.append([-1 if rng.random() < 0.15 else b for b in ids])
        lengths.append(rng.randint(0, 13 * block_size))
        count = len(kept_positions(blocks[-1], lengths[-1], block_size))
        if rng.random() < 0.3:
            columns.append([c if c < count else -1 for c in range(k)])
        else:
            columns.append([-1 if count == 0 or rng.random() < 0.2 else rng.randrange(count) for _ in range(k)])
    positions, counts = sparse_topk_remap(
        torch.tensor(columns, dtype=torch.int32, device=device).reshape(m, k),
        torch.tensor(blocks, dtype=torch.int32, device=device).reshape(m, slots),
        torch.tensor(lengths, dtype=torch.int32, device=device),
        block_size=block_size,
    )
    for r in range(m):
        rows_checked += 1
        want, want_count = remap_columns(columns[r], blocks[r], lengths[r], block_size)
        got, got_count = positions[r].tolist(), int(counts[r])
        if got != list(want) or got_count != want_count:
            differ += 1
            if differ <= 3:
                print(
                    f"differs: blocks {blocks[r]} length {lengths[r]} block {block_size} columns {columns[r]}: "
                    f"want {list(want)} / {want_count}, got {got} / {got_count}"
                )
print(f"{differ} of {rows_checked} rows differ (on {device})")
sys.exit(1 if differ else 0)
