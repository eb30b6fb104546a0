"""Frozen examples of the compression properties, replayed first on every implementation: rows where a legitimate
float32 evaluation is beaten by one baseline formulation by luck, which the float rule (twice the worst of several
formulations, floor at the terms' magnitude) must accept (docs/compression-properties.md), and a ring one slot short
that a generated search finds only under some seeds."""

from typing import Any


def _one_slot(ratio: int, dim: int, *, overlap: bool = False, ring_extra: int = 1, **rest: Any) -> dict[str, Any]:
    """An example on one ring slot, unwritten entries NaN, no APE: the layer's ``ratio``, ``dim`` and ``overlap``,
    then ``rest`` (the requests, or a request's life)."""
    layer = {"ratio": ratio, "dim": dim, "overlap": overlap, "ape": None}
    return {"layer": layer, "ring_extra": ring_extra, "slots": 1, "fill": float("nan"), **rest}


PREFILL_CANCELLATION = _one_slot(
    8,
    2,
    requests=[
        {
            "slot": 0,
            "positions": [
                [[s, 0.0], [v, 0.0]]
                for s, v in zip(
                    [0.0, 0.25, 0.25, -0.5, 1.5, 2.5, -2.5, 3.25],
                    [0.0, 0.0, 0.0, 0.0, 0.0, -3.5, 0.0, 2.5],
                    strict=True,
                )
            ],
            "cuts": [0, 8],
            "delay": 0,
        }
    ],
)
"""Torch backend, ratio 8: terms -0.94 and +1.40 cancel to 0.47; its error is 5.7 units of the row."""
PREFILL_SMALL_WEIGHT = _one_slot(
    3,
    2,
    requests=[
        {
            "slot": 0,
            "positions": [[[0.0, 0.0], [0.0, 0.0]], [[2.0, 0.0], [0.0, 0.0]], [[-3.75, 0.0], [1.25, 0.0]]],
            "cuts": [0, 3],
            "delay": 0,
        }
    ],
)
"""Triton, ratio 3: the row is the weight exp(-5.75 + ...) of one entry, which exp2 of a scaled argument gets
4.2 units off."""
DECODE_LONG_SUM = _one_slot(
    128,
    1,
    requests=[
        {
            "slot": 0,
            "start": 127,
            "first": 0,
            "positions": [[[0.5 * (i % 2)], [0.25 * (i % 2)]] for i in range(129)],
            "steps": [2],
            "delay": 0,
        }
    ],
)
"""Torch backend, ratio 128: a 128-term float32 sum, 5.4 units off."""
DECODE_OVERLAP_RING_SHORT = _one_slot(
    4,
    1,
    overlap=True,
    ring_extra=0,
    requests=[{"slot": 0, "start": 5, "positions": [[[0.0, 0.0], [0.0, 0.0]]]}],
    fault="ring_short",
)
"""V4 overlap, one new position, a ring one short of the discipline's safe size (write_then_read: 7 < 8): a
bound of r + q - 1 (4) would accept it. A search of generated calls finds this only under some seeds."""
LIFE_CANCELLATION = _one_slot(
    3,
    4,
    ring_extra=0,
    qmax=1,
    ops=[
        {"op": "new", "slot": 0},
        {
            "op": "prefill",
            "calls": [
                {
                    "slot": 0,
                    "positions": [
                        [[0.0, 4.0, -2.25, 2.0], [7.75, -5.5, 1.0, 4.0]],
                        [[3.75, 1.25, -1.5, 1.75], [6.5, -4.25, 0.75, 4.5]],
                        [[3.5, -2.75, -1.75, -1.75], [-5.25, -1.75, 2.75, -5.0]],
                        [[-2.75, -3.75, 2.25, 0.25], [-6.0, 2.0, -4.75, 6.75]],
                        [[3.75, -3.0, 1.25, 2.5], [-1.25, 5.25, -2.0, -1.0]],
                        [[1.5, 1.75, 1.75, -2.25], [-6.5, -3.25, -3.25, 1.25]],
                    ],
                }
            ],
        },
    ],
)
"""Triton, ratio 3: row 1, channel 3 cancels (6.75 and -1.0 weighted) to -0.249; 5.9 units of the row."""
DECODE_FRESH_REORDER = {
    "layer": {
        "ratio": 4,
        "dim": 1,
        "overlap": True,
        "ape": [[-1.75, -1.5], [-1.5, -0.75], [1.5, -0.75], [1.75, -0.25]],
    },
    "ring_extra": 1,
    "slots": 1,
    "fill": {"leftover": [[[0.0], [0.0]]]},
    "requests": [
        {
            "slot": 0,
            "start": 0,
            "first": 0,
            "positions": [
                [[0.25, 0.0], [0.0, 0.0]],
                [[-2.0, 0.0], [-1.25, 0.0]],
                [[0.25, 0.0], [0.0, 0.0]],
                [[-3.75, 0.0], [0.0, 0.0]],
                [[0.0, -1.0], [0.0, 0.0]],
                [[0.0, -2.75], [0.0, 0.0]],
                [[0.0, 3.0], [0.0, 4.75]],
                [[0.0, 2.5], [0.0, 0.0]],
            ],
            "steps": [2, 2, 2, 2],
            "delay": 0,
        }
    ],
}
"""Torch backend, decode, ratio 4 with overlap: row 1 (terms -1.25 and 4.75 weighted into 1.78) is 4.02 units of
the row off, where every baseline formulation, the same ``torch.softmax`` among them, is within 2: the backend's
batch of rows sums the window in another order. Accepted by the reordering floor (``checks.reorder_bound``)."""
