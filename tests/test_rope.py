"""RoPE positions of compressed rows (reference.rope): row j carries j r, the first position of its group, in V4
and V4.1 alike; the seeds' prefill and decode expressions give it, and so does the compression reference's every
reserved row, for every chunking and every verify-step size, with and without overlap."""

from __future__ import annotations

import itertools

import pytest

from reference.compression import CompressionState, decode_step, prefill_chunk
from reference.gated_mean import Weighting
from reference.layer import CompressedLayer
from reference.rope import UNSTORED_POSITION, row_position, seed_decode_position, seed_prefill_positions
from tests.refusals import worded_exactly

R = Weighting.RATIONAL
LAYERS = [CompressedLayer(1, 1), CompressedLayer(2, 1), CompressedLayer(3, 1), CompressedLayer(4, 1, overlap=True)]


def inputs(layer: CompressedLayer, start: int, count: int) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    return [((1,) * layer.channels, (p + 1,) * layer.channels) for p in range(start, start + count)]


def test_row_position() -> None:
    assert [row_position(j, 4) for j in range(4)] == [0, 4, 8, 12]
    assert row_position(-1, 4) == UNSTORED_POSITION == 0
    with pytest.raises(ValueError, match=r"^store_row: must be a compressed row index >= 0 or -1"):
        row_position(-2, 4)
    with pytest.raises(ValueError, match=r"^ratio: must be a positive integer"):
        row_position(1, 0)


@pytest.mark.parametrize("ratio", [1, 2, 4, 128])
def test_the_seeds_expressions_give_j_r(ratio: int) -> None:
    """Seed 001/002 prefill ``freqs_cis[: seqlen - seqlen % ratio : ratio]`` and decode
    ``freqs_cis[start_pos + 1 - ratio]`` rotate row j with position j r (V4 and V4.1 alike)."""
    for seqlen in range(0, 3 * ratio + 2):
        assert seed_prefill_positions(seqlen, ratio) == [row_position(j, ratio) for j in range(seqlen // ratio)]
    for j in range(5):
        assert seed_decode_position((j + 1) * ratio - 1, ratio) == row_position(j, ratio)
    if ratio > 1:
        with pytest.raises(ValueError, match=r"^start_pos: must complete a group"):
            seed_decode_position(ratio, ratio)


@pytest.mark.parametrize("layer", LAYERS, ids=lambda layer: f"r{layer.ratio}{'o' if layer.overlap else ''}")
def test_every_reserved_row_of_the_compression_reference(layer: CompressedLayer) -> None:
    """Every way of cutting 9 positions into prefill chunks, and verify steps of 1..6 after every prefix: each
    reserved row's position is row_position(its store row) (j r, or 0 when it stores nothing)."""
    n = 9
    for cuts in itertools.chain.from_iterable(itertools.combinations(range(1, n), k) for k in range(n)):
        state, start = CompressionState(), 0
        for end in [*cuts, n]:
            result = prefill_chunk(layer, state, start, inputs(layer, start, end - start), R)
            assert [o.position for o in result.reserved] == [
                row_position(o.store_row, layer.ratio) for o in result.reserved
            ]
            state, start = result.state, end
    for prefix, q in itertools.product(range(1, 8), range(1, 7)):
        state = prefill_chunk(layer, CompressionState(), 0, inputs(layer, 0, prefix), R).state
        step = decode_step(layer, state, prefix, inputs(layer, prefix, q), R)
        assert [o.position for o in step.reserved] == [row_position(o.store_row, layer.ratio) for o in step.reserved]
        assert [o.position for o in step.reserved if o.store_row >= 0] == [
            p + 1 - layer.ratio for p in range(prefix, prefix + q) if (p + 1) % layer.ratio == 0
        ]


test_every_refusal_is_worded_exactly = worded_exactly(
    [
        (lambda: row_position(0.5, 4), TypeError, "store_row: must be an int, got float"),  # type: ignore[arg-type]
        (
            lambda: row_position(-2, 4),
            ValueError,
            "store_row: must be a compressed row index >= 0 or -1 (nothing stored), got -2",
        ),
        (lambda: row_position(1, 0), ValueError, "ratio: must be a positive integer, got 0"),
        (lambda: seed_prefill_positions(-1, 4), ValueError, "seqlen: must be >= 0, got -1"),
        (lambda: seed_prefill_positions(8.0, 4), TypeError, "seqlen: must be an int, got float"),  # type: ignore[arg-type]
        (lambda: seed_prefill_positions(8, 0), ValueError, "ratio: must be a positive integer, got 0"),
        (lambda: seed_prefill_positions(8, True), TypeError, "ratio: must be an int, got bool"),  # type: ignore[arg-type]
        (lambda: seed_decode_position(-1, 4), ValueError, "start_pos: must be >= 0, got -1"),
        (lambda: seed_decode_position(3, 0), ValueError, "ratio: must be a positive integer, got 0"),
        (lambda: seed_decode_position(3, -4), ValueError, "ratio: must be a positive integer, got -4"),
        (
            lambda: seed_decode_position(4, 4),
            ValueError,
            "start_pos: must complete a group of 4 ((start_pos + 1) % ratio == 0), got 4",
        ),
    ]
)
