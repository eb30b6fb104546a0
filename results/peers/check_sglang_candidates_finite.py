"""SGLang 0.5.23 ``select_candidate_block_ids`` (through its adapter) against the exact reference on finite
scores only: 400 random rows of small integers (many ties), -inf lanes, lengths 0 .. N and padding rows (-1).

Compared as the convention ``pinned+drop_nan+ties_any+order_any`` reads them: the multiset of the kept blocks'
scores, no block twice, the kept ids before any -1. Prints the number of rows that differ (0 expected) and the
first few. Standalone: ``python results/peers/check_sglang_candidates_finite.py`` from the repository root.
"""

import os
import random
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from csa.peers.sglang_ops import select_candidate_block_ids
from reference.candidates import block_scores, kept_blocks
from reference.conventions import CANDIDATE_SELECT
from reference.score_values import NEG_INF, rank_key

rule = CANDIDATE_SELECT["pinned+drop_nan"].rule
rng = random.Random(1)
differ = 0
for _ in range(400):
    m, n = rng.randint(1, 3), rng.randint(0, 24)
    block_size, slots = rng.choice([1, 2, 3, 4, 8]), rng.randint(0, 6)
    rows = [[rng.choice([-2, -1, 0, 1, 2, float("-inf")]) for _ in range(n)] for _ in range(m)]
    lengths = [rng.choice([-1, 0, *range(n + 1)]) for _ in range(m)]
    out = select_candidate_block_ids(
        torch.tensor(rows, dtype=torch.float32).reshape(m, n),
        torch.tensor(lengths, dtype=torch.int32),
        block_size=block_size,
        topk_blocks=slots,
    )
    for r in range(m):
        valid = max(lengths[r], 0)
        exact = [NEG_INF if v == float("-inf") else int(v) for v in rows[r]]
        want = kept_blocks(exact, valid, slots, block_size, rule)
        lanes = out[r].tolist()
        got = [b for b in lanes if b >= 0]
        per = block_scores(exact, valid, block_size, True)
        same = sorted(rank_key(per[b]) for b in want) == sorted(rank_key(per[b]) for b in got)
        if not same or len(set(got)) != len(got) or lanes[: len(got)] != got:
            differ += 1
            if differ <= 3:
                print(f"differs: scores {rows[r]} length {lengths[r]} block {block_size}: want {want}, got {lanes}")
print(f"{differ} of the rows differ")
sys.exit(1 if differ else 0)
