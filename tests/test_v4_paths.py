"""The V4 Compressor's prefill and decode paths (seed 001) equal one-shot compression."""

from __future__ import annotations

import random
import re

import pytest
import sympy

from reference.compression import compress
from reference.gated_mean import Weighting
from reference.layer import CompressedLayer, v4_layer
from reference.v4_paths import V4State, v4_decode, v4_initial_state, v4_prefill
from tests.compression_oracles import RawPosition, oracle_rows, random_ape, random_positions
from tests.refusals import worded_exactly

R = Weighting.RATIONAL


def prefill_then_decode(
    layer: CompressedLayer,
    positions: list[RawPosition],
    prefilled: int,
    weighting: Weighting = R,
    buffers: V4State | None = None,
) -> list[tuple[object, ...]]:
    rows, state = v4_prefill(layer, positions[:prefilled], weighting, buffers)
    out = list(rows)
    for p in range(prefilled, len(positions)):
        row, state = v4_decode(layer, state, p, positions[p], weighting)
        if row is not None:
            out.append(row)
        assert (row is not None) == ((p + 1) % layer.ratio == 0)
    return out


def _cases() -> list[object]:
    rng = random.Random(4)
    return [
        pytest.param(v4_layer(4, 1, ape=random_ape(rng, 4, 2)), 17, id="c4-overlap-ape-d1"),
        pytest.param(v4_layer(4, 2, ape=random_ape(rng, 4, 4)), 13, id="c4-overlap-ape-d2"),
        pytest.param(v4_layer(4, 2), 10, id="c4-overlap-no-ape"),
        pytest.param(CompressedLayer(2, 2, ape=random_ape(rng, 2, 2)), 9, id="r2-ape"),
        pytest.param(CompressedLayer(3, 1), 10, id="r3"),
    ]


@pytest.mark.parametrize(("layer", "n"), _cases())
def test_prefill_then_decode_equals_one_shot(layer: CompressedLayer, n: int) -> None:
    rng = random.Random(n)
    positions = random_positions(rng, layer, n)
    want = oracle_rows(layer, positions)
    assert list(compress(layer, positions, R)) == want
    for prefilled in range(1, n + 1):
        assert prefill_then_decode(layer, positions, prefilled) == want, prefilled


@pytest.mark.parametrize("prefilled", [1, 100, 127, 128, 129, 255, 256])
def test_c128_prefill_then_decode(prefilled: int) -> None:
    rng = random.Random(prefilled)
    layer = v4_layer(128, 1, ape=random_ape(rng, 128, 1))
    positions = random_positions(rng, layer, 260)
    assert prefill_then_decode(layer, positions, prefilled) == oracle_rows(layer, positions)


def test_exact_scores_through_both_paths() -> None:
    half = sympy.Rational(1, 2)
    layer = v4_layer(4, 1, ape=[[0, half], [1, 0], [-half, 2], [0, 0]])
    rng = random.Random(9)
    positions = [
        (tuple(sympy.Rational(rng.randint(-2, 2), 2) for _ in range(2)), tuple(rng.randint(-3, 3) for _ in range(2)))
        for _ in range(9)
    ]
    want = compress(layer, positions, Weighting.EXP)
    for prefilled in (1, 4, 6):
        got = prefill_then_decode(layer, positions, prefilled, Weighting.EXP)
        assert len(got) == len(want) == 2
        for got_row, want_row in zip(got, want, strict=True):
            assert all(sympy.simplify(g - w) == 0 for g, w in zip(got_row, want_row, strict=True))


def test_state_layout_after_prefill() -> None:
    """Six positions, r = 4 with overlap: slots 0-3 hold group 0 (previous window), 4-5 positions 4 and 5."""
    layer = v4_layer(4, 1, ape=[[2, 3], [1, 1], [1, 1], [5, 7]])
    positions = [((p + 1, p + 2), (10 * p, 10 * p + 1)) for p in range(6)]
    rows, state = v4_prefill(layer, positions, R)
    assert len(rows) == 1 and state.end == 6
    assert state.kv[0] == (0, 1) and state.score[0] == (1 * 2, 2 * 3)  # APE applied at the write
    assert state.kv[3] == (30, 31) and state.score[3] == (4 * 5, 5 * 7)
    assert state.kv[4] == (40, 41) and state.kv[5] == (50, 51)
    assert state.score[6] == (0, 0) and state.kv[7] == (0, 0)  # unwritten: weight 0 (score -inf), kv 0
    initial = v4_initial_state(layer, Weighting.EXP)
    assert initial.score[0] == (sympy.S.NegativeInfinity,) * 2


@pytest.mark.parametrize("weighting", list(Weighting))
def test_a_new_request_needs_a_fresh_state(weighting: Weighting) -> None:
    """The seed's prefill writes kv_state / score_state in place and never clears them. With overlap (r = 4) and a
    prompt shorter than r it writes no previous window, so the previous request's last window stays there, and
    the new request's first row, completed in decode, mixes it in: row 0 differs from one-shot compression.
    Every later row, every prompt of r positions or more, and a layer without overlap (ratio 128) come out right,
    since the seed rewrites each slot they read before reading it."""
    rng = random.Random(11)
    for layer in (v4_layer(4, 1, ape=random_ape(rng, 4, 2)), v4_layer(128, 1)):
        r = layer.ratio
        for previous_length in (r, 2 * r + 1, 3 * r - 1):
            _, left = v4_prefill(layer, random_positions(rng, layer, previous_length), weighting)
            for prefilled in (1, r - 1, r, r + 1, 2 * r):
                prompt = random_positions(rng, layer, 2 * r + 3)
                want = list(compress(layer, prompt, weighting))
                assert prefill_then_decode(layer, prompt, prefilled, weighting) == want
                stale = prefill_then_decode(layer, prompt, prefilled, weighting, buffers=left)
                if layer.overlap and prefilled < r:
                    assert stale[0] != want[0] and stale[1:] == want[1:]
                else:
                    assert stale == want
    layer = v4_layer(4, 1)
    with pytest.raises(ValueError, match=r"^buffers\.kv: must have coff \* ratio = 8 slots, got 4$"):
        v4_prefill(layer, [((1, 1), (1, 1))], R, V4State(0, ((0, 0),) * 4, ((0, 0),) * 8))
    with pytest.raises(ValueError, match=r"^buffers\.score\[7\]: must have 2 channels$"):
        v4_prefill(layer, [((1, 1), (1, 1))], R, V4State(0, ((0, 0),) * 8, ((0, 0),) * 7 + ((0,),)))
    with pytest.raises(TypeError, match=r"^buffers: must be a V4State, got tuple$"):
        v4_prefill(layer, [((1, 1), (1, 1))], R, ())  # type: ignore[arg-type]


def test_bad_inputs() -> None:
    layer = v4_layer(4, 1)
    _, state = v4_prefill(layer, [((1, 1), (1, 1))] * 3, R)
    with pytest.raises(ValueError, match=r"^start_pos:"):
        v4_decode(layer, state, 4, ((1, 1), (1, 1)), R)
    with pytest.raises(ValueError, match=r"^start_pos:"):
        v4_decode(layer, v4_initial_state(layer, R), 0, ((1, 1), (1, 1)), R)
    with pytest.raises(ValueError, match=r"^positions:"):
        v4_prefill(layer, [], R)
    with pytest.raises(ValueError, match=r"^position\[0\].scores:"):
        v4_decode(layer, state, 3, ((1,), (1, 1)), R)


# --- every refusal worded exactly (docs/mutation.md) ------------------------------------------------------------

L = v4_layer(4, 1)
S = v4_prefill(L, [((1, 1), (1, 1))] * 3, R)[1]


test_every_refusal_is_worded_exactly = worded_exactly(
    [
        (lambda: v4_prefill(L, [], R), ValueError, "positions: a prefill holds at least one position"),
        (lambda: v4_decode(L, S, 3.0, ((1, 1), (1, 1)), R), TypeError, "start_pos: must be an int, got float"),  # type: ignore[arg-type]
        (
            lambda: v4_decode(L, S, 0, ((1, 1), (1, 1)), R),
            ValueError,
            "start_pos: the decode path runs at start_pos > 0 (position 0 is prefill)",
        ),
        (
            lambda: v4_decode(L, S, 4, ((1, 1), (1, 1)), R),
            ValueError,
            "start_pos: must be where the state ends (3), got 4",
        ),
        (
            lambda: v4_decode(L, S, 3, ((1,), (1, 1)), R),
            ValueError,
            "position[0].scores: must have length 2 (layer.channels = coff * dim), got 1",
        ),
        (lambda: v4_decode(L, S, 3, "ab", R), TypeError, "position[0]: must be a (scores, latents) pair, got str"),
    ]
)


def test_initial_state_and_ape_refusals_name_the_offset() -> None:
    assert v4_initial_state(L, R).end == 0 and v4_initial_state(L, Weighting.EXP).end == 0
    zero_factor = v4_layer(4, 1, ape=[[1, 1], [0, 1], [1, 1], [1, 1]])
    message = "ape[1][0]: a rational APE factor must be > 0, got 0"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        v4_prefill(zero_factor, [((1, 1), (1, 1))] * 6, R)  # position 1 is the first at offset 1
