"""The RoPE position of each compressed row: which position's rotation row ``j`` of ratio ``r`` carries
(docs/compression.md, "RoPE positions").

Row ``j`` carries position ``j r``, the first position of its group, in V4 and V4.1 alike (so it is one rule, not a
convention), whatever chunk or step completes it:

* seed 000 (V4.1, DeepInfer's metadata): "For compressed row j, the C++ metadata uses position jr, the beginning of
  its group, while a query keeps its original token position";
* seed 001 (V4 ``Compressor``): after the softmax-weighted sum the compressed KV is rotated with
  ``freqs_cis[:cutoff:ratio]`` at prefill (``start_pos == 0``): positions ``0, r, 2r, ..``, row ``j`` at ``j r``;
  the public V4 decode path uses ``freqs_cis[start_pos + 1 - ratio]``, and the step completing row ``j`` has
  ``start_pos = (j + 1) r - 1``, so again ``j r``. With overlap (ratio 4) row ``j``'s window reaches back to
  ``(j - 1) r``; it still carries ``j r``;
* seed 002 (V4.1 ``Indexer``): index keys rotated with ``freqs_cis[: seqlen - seqlen % ratio : ratio]`` at
  prefill and ``freqs_cis[start_pos + 1 - ratio]`` at decode ("a latent stands for the first token of its group,
  so group j takes position j * ratio").

The seeds' expressions cover a one-shot prefill from 0 and one-token decode steps; ``j r`` is what both give, and
what a chunked prefill or a verify step of several positions must give too (the public V4.1 decode expression,
one rotation per step, would be wrong for a step completing two rows). Not ``j r + r - 1``: that is the position
completing the row, the rotation the query of that step carries. A reserved row that stores nothing (a prefill
placeholder, a decode position completing no group) carries position 0 (seed 000: the placeholder "has position
zero"); it is never read.
"""

from __future__ import annotations

from typing import Final

from reference.checks import require, require_int, require_nonnegative_int, require_positive_int

UNSTORED_POSITION: Final = 0
"""The RoPE position of a reserved row that stores nothing (store row -1)."""


def row_position(store_row: int, ratio: int) -> int:
    """The RoPE position of a reserved row whose store row is ``store_row``: ``j r`` for a completed row ``j``,
    ``UNSTORED_POSITION`` for -1."""
    j = require_int(store_row, "store_row")
    r = require_positive_int(ratio, "ratio")
    require(j >= -1, "store_row", f"must be a compressed row index >= 0 or -1 (nothing stored), got {j}")
    return j * r if j >= 0 else UNSTORED_POSITION


def seed_prefill_positions(seqlen: int, ratio: int) -> list[int]:
    """The positions the seeds' prefill rotates with: the indices of ``freqs_cis[: seqlen - seqlen % ratio :
    ratio]`` (seed 002; seed 001's ``freqs_cis[:cutoff:ratio]``), one per completed row of a prefill from 0."""
    n = require_nonnegative_int(seqlen, "seqlen")
    r = require_positive_int(ratio, "ratio")
    return list(range(0, n - n % r, r))


def seed_decode_position(start_pos: int, ratio: int) -> int:
    """The position the seeds' decode rotates the completed row with: ``freqs_cis[start_pos + 1 - ratio]``, for a
    one-token step at ``start_pos`` that completes a group (``(start_pos + 1) % ratio == 0``)."""
    p = require_nonnegative_int(start_pos, "start_pos")
    r = require_positive_int(ratio, "ratio")
    require((p + 1) % r == 0, "start_pos", f"must complete a group of {r} ((start_pos + 1) % ratio == 0), got {p}")
    return p + 1 - r
