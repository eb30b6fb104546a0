"""Which sliding-window cache blocks a request may release once a step of D positions is scheduled
(docs/indexing.md, "Window block release").

The model. A request's sliding-window KV lives in paged blocks of ``B`` positions: block ``b`` holds positions
``[b B, (b + 1) B)``. The query at position ``p`` reads positions ``max(0, p - W + 1) .. p``: under both window
conventions (``v4``, ``v4.1``; docs/indexing.md), which list the same positions and differ only in lane order, so
one rule serves both. A step is scheduled at ``e``, the request's accepted length: it writes and queries the
``D >= 1`` positions ``e .. e + D - 1`` (a prefill chunk, a decode step of ``D = 1``, or a verify step of the
sampled token and ``D - 1`` drafts), and the engine's tentative sequence length is ``S = e + D``. Verification
then keeps ``a`` of them, ``1 <= a <= D`` (``a = D`` outside speculative decoding), and the next step starts at
``e + a``.

Which positions a later read still needs. This step's queries read from ``e - W + 1`` on (its first query is the
oldest), and the next step's, whatever the acceptance, from ``e + a - W + 1 >= e + 2 - W`` on. The oldest needed
position is therefore ``e - W + 1 = S - (W + D - 1)``: the newest ``W + D - 1`` positions of the tentative
sequence must stay reserved until verification (a block release computed from ``S`` alone, keeping ``W``, frees
``D - 1`` positions this step and a rejected draft's successor still read).

The rule. After scheduling the step the request may have released exactly the leading blocks wholly below that
position, ``released_blocks(S, D, W, B) = max(0, S - (W + D - 1)) // B`` of them (a count, cumulative over the
request's life: those blocks are ``0 .. n - 1``). It is safe (no block a read of this or the next step needs) and
tight (block ``n`` holds position ``S - (W + D - 1)`` whenever that is ``>= 0``, which the step's first query reads),
and it releases every other block: the count never decreases from one step to the next (``e`` only grows), so a
block once released is never needed again.
"""

from __future__ import annotations

from reference.checks import require, require_positive_int


def oldest_needed(seq_len: int, step: int, window: int) -> int:
    """The oldest position a read of the scheduled step or of the next one may need: ``S - (W + D - 1)`` (may be
    negative: nothing can be released)."""
    s, d, w = _checked(seq_len, step, window)
    return s - (w + d - 1)


def released_blocks(seq_len: int, step: int, window: int, block_size: int) -> int:
    """How many leading blocks a request may have released once a step of ``step`` positions is scheduled with
    tentative sequence length ``seq_len`` (see the module docstring)."""
    b = require_positive_int(block_size, "block_size")
    return max(0, oldest_needed(seq_len, step, window)) // b


def positions_read(start: int, step: int, window: int) -> range:
    """Every position the queries of a step of ``step`` positions from ``start`` read (a second formulation of the
    needed positions, enumerated: ``max(0, start - W + 1) .. start + step - 1``)."""
    w = require_positive_int(window, "window")
    d = require_positive_int(step, "step")
    require(start >= 0, "start", f"must be >= 0, got {start}")
    return range(max(0, start - w + 1), start + d)


def _checked(seq_len: int, step: int, window: int) -> tuple[int, int, int]:
    d = require_positive_int(step, "step")
    w = require_positive_int(window, "window")
    s = require_positive_int(seq_len, "seq_len")
    require(s >= d, "seq_len", f"must be >= the step's {d} positions (it counts them), got {s}")
    return s, d, w
