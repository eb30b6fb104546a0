"""SGLang 0.5.23 ``topk_transform_pytorch_vectorized`` on a row longer than k whose valid prefix holds fewer
than k scores above -inf: lanes can name rows at or past the row's length.

Standalone: ``python results/peers/repro_sglang_topk_transform_past_length.py`` from the repository root, with
the wheels unpacked by ``make peers`` (torch only; no Triton). The function masks the scores past ``seq_lens`` to
-inf on a copy, takes ``torch.topk`` of the copy, then keeps a lane unless the *unmasked* score it names is -inf.
Among the -inf ties torch.topk may pick a masked position past the length; its unmasked score (what the buffer
holds there) is not -inf, so the lane is kept and names a row the query cannot see. One row of 8 scores,
length 3 (all three -inf), k = 2, the positions past the length holding 5 .. 9: the lanes should be empty (-1;
or rows 0 and 1 if a -inf row counts), and none may be 3 or more. Exits 1 when a lane names a row at or past
the length.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from csa.peers.loader import load

transform = load("sglang", "sglang.srt.layers.attention.dsv4.indexer").topk_transform_pytorch_vectorized
inf = float("inf")
scores = torch.tensor([[-inf, -inf, -inf, 5.0, 6.0, 7.0, 8.0, 9.0]])
length, k = 3, 2
table = torch.arange(scores.shape[1], dtype=torch.int32)[None, :]
pages = torch.empty((1, k), dtype=torch.int32)
raw = torch.empty((1, k), dtype=torch.int32)
transform(scores, torch.tensor([length], dtype=torch.int32), table, pages, 1, out_raw_indices=raw)
lanes = raw.tolist()[0]
print(f"lanes: {lanes} (length {length}, k {k}; rows 0 .. 2 score -inf, positions 3 .. 7 past the length)")
past = [r for r in lanes if r >= length]
print(f"lanes naming rows at or past the length: {past}" if past else "every lane is -1 or inside the prefix")
sys.exit(1 if past else 0)
