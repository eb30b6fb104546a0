"""Index scores I_j = scale * sum_h w_h * max(0, q_h . k_j), exactly (also of FP8 queries and keys with their
scales), and the compressed rows a query can see.

Shapes: ``queries`` is H heads of d entries, ``weights`` has H entries, ``keys`` is T rows of d entries; the result
has T scores, one per compressed row. Entries are ``int`` or ``Fraction``.

The public V4 / V4.1 indexers fold a constant into the head weights:
``weights * (softmax_scale * n_heads ** -0.5)`` with ``softmax_scale = index_head_dim ** -0.5``. That factor is
irrational in general (``1 / sqrt(index_head_dim * n_heads)``). A positive factor multiplies every score by the
same amount, so it never changes which rows are chosen or their order; the reference therefore takes the scale as
an exact rational supplied by the caller (default 1), and :func:`public_weight_scale` gives the public factor
exactly as a sympy expression for callers that want the scaled values themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from reference.checks import (
    require,
    require_exact,
    require_int,
    require_length,
    require_nonnegative_int,
    require_positive_int,
)
from reference.grids import e4m3_decode


def _matrix(rows: Sequence[Sequence[object]], argument: str, width: int | None) -> list[list[Fraction]]:
    """Rows of exact entries, all of one width (``width`` when given, else the first row's)."""
    out: list[list[Fraction]] = []
    for i, row in enumerate(rows):
        if width is None:
            width = len(row)
        require_length(row, width, f"{argument}[{i}]", "the index head dimension")
        out.append([require_exact(x, f"{argument}[{i}][{c}]") for c, x in enumerate(row)])
    return out


def index_scores(
    queries: Sequence[Sequence[object]],
    weights: Sequence[object],
    keys: Sequence[Sequence[object]],
    scale: object = 1,
) -> list[Fraction]:
    """One exact score per key row: ``scale * sum_h weights[h] * max(0, queries[h] . keys[j])``.

    ``scale`` must be a positive int or Fraction; it leaves the ranking unchanged. Raises ValueError naming the
    argument when the head counts (``weights`` vs ``queries``) or the dimensions (``queries[h]`` or ``keys[j]``)
    disagree, and when there is no head at all.
    """
    require(len(queries) > 0, "queries", "must hold at least one head")
    q = _matrix(queries, "queries", None)
    dim = len(q[0])
    require_length(weights, len(q), "weights", "one weight per query head")
    w = [require_exact(x, f"weights[{h}]") for h, x in enumerate(weights)]
    k = _matrix(keys, "keys", dim)
    factor = require_exact(scale, "scale")
    require(factor > 0, "scale", f"must be positive (a positive factor keeps the ranking), got {factor}")
    scores: list[Fraction] = []
    for key in k:
        total = Fraction(0)
        for head, weight in zip(q, w, strict=True):
            total += weight * max(Fraction(0), sum((a * b for a, b in zip(head, key, strict=True)), Fraction(0)))
        scores.append(factor * total)
    return scores


def quantized_index_scores(
    q_codes: Sequence[Sequence[int]],
    q_scales: Sequence[object],
    weights: Sequence[object],
    k_codes: Sequence[Sequence[int]],
    k_scales: Sequence[object],
) -> list[Fraction]:
    """:func:`index_scores` of FP8 queries and keys: head h is ``q_scales[h] * e4m3(q_codes[h])``, key row j is
    ``k_scales[j] * e4m3(k_codes[j])``, every code an e4m3fn byte (NaN codes are refused).

    Query scales must be positive: a kernel may then fold them into the head weights, as
    ``relu(s * x) = s * relu(x)`` for s > 0. Key scales may be any exact value. Raises ValueError naming the
    argument for a code that is not a finite e4m3 value, a non-positive query scale, or mismatched counts.
    """
    require_length(q_scales, len(q_codes), "q_scales", "one scale per query head")
    require_length(k_scales, len(k_codes), "k_scales", "one scale per key row")
    queries = []
    for h, codes in enumerate(q_codes):  # the lengths agree (checked above)
        s = require_exact(q_scales[h], f"q_scales[{h}]")
        require(s > 0, f"q_scales[{h}]", f"must be positive (a query scale folds into the head weight), got {s}")
        queries.append([s * _e4m3(c, f"q_codes[{h}][{i}]") for i, c in enumerate(codes)])
    keys = []
    for j, codes in enumerate(k_codes):
        s = require_exact(k_scales[j], f"k_scales[{j}]")
        keys.append([s * _e4m3(c, f"k_codes[{j}][{i}]") for i, c in enumerate(codes)])
    return index_scores(queries, weights, keys)


E4M3_DOT_BOUND = Fraction(1, 256)
"""The error an FP8 index-score kernel may make, per lane, as a fraction of the lane's magnitude
``sum_h |w_h| q_scale_h sum_d |q_hd| |k_scale k_d|`` (docs/indexing-kernels.md, "FP8 queries"). An e4m3
tensor-core dot adds each group of 32 exact products at the largest product's exponent keeping about 13 fraction
bits, truncated: each product may lose 2**-13 of the group's largest, so a group loses at most 31 * 2**-13 < 2**-8
of its own magnitude, and the groups' float32 sum adds far less."""


def _e4m3(code: object, argument: str) -> Fraction:
    c = require_int(code, argument)
    require(
        c in range(256) and c & 0x7F != 0x7F,
        argument,
        f"must be a finite e4m3fn code (0..255 but 0x7f / 0xff), got {c}",
    )
    return e4m3_decode(c)


def public_weight_scale(index_head_dim: int, n_heads: int) -> Any:
    """The factor the public indexers fold into the weights, exactly: ``index_head_dim**-1/2 * n_heads**-1/2``.

    Returned as a sympy expression (for 128 dims and 64 heads: ``sqrt(2)/128``). sympy is imported here only,
    so the rest of the reference runs on the standard library alone.
    """
    import sympy

    d = require_positive_int(index_head_dim, "index_head_dim")
    h = require_positive_int(n_heads, "n_heads")
    return sympy.Integer(1) / sympy.sqrt(sympy.Integer(d)) / sympy.sqrt(sympy.Integer(h))


def visible_rows(position: int, ratio: int) -> int:
    """Completed compressed rows a query at original ``position`` can see: ``floor((position + 1) / ratio)``."""
    p = require_nonnegative_int(position, "position")
    r = require_positive_int(ratio, "ratio")
    return (p + 1) // r


def prefill_visible_rows(start_pos: int, seqlen: int, ratio: int) -> list[int]:
    """Per query of a prefill chunk, or of a decode / verify step of several positions, covering positions
    ``start_pos .. start_pos + seqlen - 1``: each query counts its own rows (never ``end_pos // ratio`` for all,
    which lets earlier queries see rows completed later in the step; docs/indexing.md, "Visible rows")."""
    s = require_nonnegative_int(start_pos, "start_pos")
    n = require_nonnegative_int(seqlen, "seqlen")
    r = require_positive_int(ratio, "ratio")
    return [(p + 1) // r for p in range(s, s + n)]


def decode_visible_rows(positions: Sequence[int], ratio: int) -> list[int]:
    """Per request of a decode step; ``positions[i]`` is request i's query position (its context length - 1)."""
    r = require_positive_int(ratio, "ratio")
    out: list[int] = []
    for i, position in enumerate(positions):
        p = require_nonnegative_int(position, f"positions[{i}]")
        out.append((p + 1) // r)
    return out
