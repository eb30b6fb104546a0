"""SGLang 0.5.23 ``select_candidate_block_ids`` on a row with a NaN block: the NaN block takes a slot, then
comes back as -1, so a keepable block is lost.

Standalone: ``python results/peers/repro_sglang_candidate_nan_block.py`` from the repository root, with the
wheels unpacked by ``make peers`` (torch only; no Triton). A row of 10 blocks of 2 scores, block 0 holding a
NaN, the newest block (9) pinned, 2 slots: with NaN blocks dropped the kept blocks are 9 and one of the blocks
scoring 0; with NaN blocks kept, 9 and 0. SGLang returns 9 and -1. Exits 1 when a slot holds -1 while a
finite block was left out.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from csa.peers.loader import load

select = load("sglang", "sglang.kernels.ops.attention.dsv4.candidate_blocks").select_candidate_block_ids
logits = torch.zeros(1, 20)
logits[0, 1] = float("nan")
ids = select(logits, torch.tensor([[20]]), 2, 2)
print(f"kept block ids: {ids.tolist()[0]} (block 9 pinned; block 0 holds NaN; blocks 1 .. 8 score 0)")
lost = bool((ids < 0).any()) and ids.shape[1] < 10
print("a slot came back -1 while blocks 1 .. 8 were left out" if lost else "every slot holds a block")
sys.exit(1 if lost else 0)
