"""The compressed layer, the exact gated mean, one-shot and chunked compression, and the batch form."""

from __future__ import annotations

import random
import re
from fractions import Fraction

import mpmath
import pytest
import sympy

from reference.compression import (
    CompressionState,
    check_state,
    completed_count,
    compress,
    decode_step,
    normalize_positions,
    prefill_batch,
    prefill_chunk,
    row_window,
    state_after,
)
from reference.gated_mean import Weighting, evaluate, gated_mean
from reference.layer import V4_RATIOS, V41_RATIOS, CompressedLayer, v4_layer, v41_layer, window_positions
from tests.compression_oracles import (
    compositions,
    oracle_rows,
    prefill_in_chunks,
    random_ape,
    random_composition,
    random_positions,
)
from tests.refusals import worded_exactly

R = Weighting.RATIONAL
BOOK_PAIR = [((1, 3), (0, 10)), ((3, 1), (8, 2))]


# --- the layer -----------------------------------------------------------------------------------------------


def test_presets_and_constructors() -> None:
    assert V4_RATIOS == (0, 4, 128)
    assert V41_RATIOS == (0, 1, 2)
    c4 = v4_layer(4, 3)
    assert (c4.overlap, c4.coff, c4.channels, c4.window) == (True, 2, 6, 8)
    c128 = v4_layer(128, 3)
    assert (c128.overlap, c128.channels, c128.window) == (False, 3, 128)
    c2 = v41_layer(2, 512)
    assert (c2.overlap, c2.ape, c2.channels, c2.window) == (False, None, 512, 2)
    assert CompressedLayer(7, 1).window == 7


@pytest.mark.parametrize(
    ("build", "argument", "error"),
    [
        (lambda: CompressedLayer(0, 1), "ratio", ValueError),
        (lambda: CompressedLayer(-2, 1), "ratio", ValueError),
        (lambda: CompressedLayer(True, 1), "ratio", TypeError),
        (lambda: CompressedLayer(2, 0), "dim", ValueError),
        (lambda: CompressedLayer(2, 1, overlap=True), "overlap", ValueError),
        (lambda: CompressedLayer(128, 1, overlap=True), "overlap", ValueError),
        (lambda: CompressedLayer(4, 1, overlap=1), "overlap", TypeError),  # type: ignore[arg-type]
        (lambda: CompressedLayer(2, 1, ape=((1,),)), "ape", ValueError),
        (lambda: CompressedLayer(2, 2, ape=((1, 1), (1,))), "ape[1]", ValueError),
        (lambda: CompressedLayer(4, 1, overlap=True, ape=((1,),) * 4), "ape[0]", ValueError),
        (lambda: CompressedLayer(2, 1, ape=((1,), ("1",))), "ape[1][0]", TypeError),
        (lambda: v4_layer(2, 1), "ratio", ValueError),
        (lambda: v4_layer(0, 1), "ratio", ValueError),
        (lambda: v41_layer(4, 1), "ratio", ValueError),
        (lambda: v41_layer(0, 1), "ratio", ValueError),
    ],
)
def test_bad_layers(build: object, argument: str, error: type[Exception]) -> None:
    with pytest.raises(error) as caught:
        build()  # type: ignore[operator]
    assert str(caught.value).startswith(f"{argument}:")


# --- the gated mean ------------------------------------------------------------------------------------------


def test_book_pair_is_six_eight() -> None:
    # The book: values (0,10) and (8,2) with weights (1,3) and (3,1) give (6, 8).
    assert compress(v41_layer(2, 2), BOOK_PAIR, R) == ((Fraction(6), Fraction(8)),)


def test_gated_mean_rational_and_zero_weight() -> None:
    assert gated_mean([Fraction(1), Fraction(3)], [Fraction(0), Fraction(8)], R) == 6
    assert gated_mean([Fraction(0), Fraction(2)], [Fraction(100), Fraction(5)], R) == 5
    with pytest.raises(ValueError, match=r"^scores:"):
        gated_mean([Fraction(0), Fraction(0)], [Fraction(1), Fraction(2)], R)
    with pytest.raises(ValueError, match=r"^values:"):
        gated_mean([Fraction(1)], [], R)


def test_exp_scores_equal_log_weights_exactly() -> None:
    """exp(log w) = w: sympy scores log(w) give exactly the rational-weight rows (chunked too)."""
    rng = random.Random(5)
    layer = CompressedLayer(4, 1, overlap=True, ape=random_ape(rng, 4, 2))
    table = random_ape(rng, 4, 2)
    layer = CompressedLayer(4, 1, overlap=True, ape=table)
    exp_layer = CompressedLayer(4, 1, overlap=True, ape=tuple(tuple(sympy.log(a) for a in row) for row in table))
    positions = random_positions(rng, layer, 10)
    logs = [(tuple(sympy.log(w) for w in s), v) for s, v in positions]
    want = [tuple(sympy.Rational(x.numerator, x.denominator) for x in row) for row in oracle_rows(layer, positions)]
    assert list(compress(exp_layer, logs, Weighting.EXP)) == want
    rows, _, _ = prefill_in_chunks(exp_layer, logs, [3, 1, 6], Weighting.EXP)
    assert [row.values for row in rows] == want


def test_exp_scores_transcendental() -> None:
    """Scores 0 and 1 give (v0 + e v1) / (1 + e); -oo gives weight 0; evaluate() agrees with mpmath."""
    layer = CompressedLayer(2, 1)
    half = sympy.Rational(1, 2)
    positions = [((0,), (3,)), ((1,), (-2,)), ((sympy.S.NegativeInfinity,), (7,)), ((half,), (5,))]
    rows = compress(layer, positions, Weighting.EXP)
    e = sympy.E
    assert sympy.simplify(rows[0][0] - (3 - 2 * e) / (1 + e)) == 0
    assert rows[1][0] == 5  # the -oo entry carries no weight
    with mpmath.workdps(60):
        expected = (3 - 2 * mpmath.e) / (1 + mpmath.e)
        got = mpmath.mpf(str(evaluate(rows[0][0], 40)))
        assert abs(got - expected) < mpmath.mpf(10) ** -38
    chunked, _, state = prefill_in_chunks(layer, positions, [1, 2, 1], Weighting.EXP)
    assert [row.values for row in chunked] == list(rows)
    assert state == state_after(layer, positions, Weighting.EXP)
    with pytest.raises(ValueError, match=r"^scores:"):
        compress(layer, [((sympy.S.NegativeInfinity,), (1,))] * 2, Weighting.EXP)


@pytest.mark.parametrize(
    ("position", "weighting", "argument", "error"),
    [
        (((1.5,), (1,)), R, "positions[0].scores[0]", TypeError),
        (((1,), (0.5,)), R, "positions[0].latents[0]", TypeError),
        (((-1,), (1,)), R, "positions[0].scores[0]", ValueError),
        (((sympy.Float(1),), (1,)), Weighting.EXP, "positions[0].scores[0]", TypeError),
        (((sympy.S.Infinity,), (1,)), Weighting.EXP, "positions[0].scores[0]", ValueError),
        (((0,), (sympy.S.NegativeInfinity,)), Weighting.EXP, "positions[0].latents[0]", ValueError),
        (((sympy.I,), (1,)), Weighting.EXP, "positions[0].scores[0]", ValueError),
        (((1, 2), (1,)), R, "positions[0].scores", ValueError),
        (((1,), (1, 2)), R, "positions[0].latents", ValueError),
        (((1,),), R, "positions[0]", ValueError),
    ],
)
def test_bad_positions(position: object, weighting: Weighting, argument: str, error: type[Exception]) -> None:
    with pytest.raises(error) as caught:
        compress(CompressedLayer(1, 1), [position], weighting)
    assert str(caught.value).startswith(f"{argument}:")


def _generator() -> object:
    yield ((1,), (1,))


TYPE_LEVELS = {
    "str": ("ab", "positions", "a sequence of (scores, latents) pairs, got str"),
    "bytes": (b"ab", "positions", "a sequence of (scores, latents) pairs, got bytes"),
    "int": (5, "positions", "a sequence of (scores, latents) pairs, got int"),
    "generator": (_generator(), "positions", "a sequence of (scores, latents) pairs, got generator"),
    "position str": (["ab"], "positions[0]", "a (scores, latents) pair, got str"),
    "position bytes": ([b"ab"], "positions[0]", "a (scores, latents) pair, got bytes"),
    "position int": ([7], "positions[0]", "a (scores, latents) pair, got int"),
    "position generator": ([iter([(1,), (1,)])], "positions[0]", "a (scores, latents) pair, got list_iterator"),
    "scores str": ([("a", (1,))], "positions[0].scores", "a sequence, got str"),
    "scores bytes": ([(b"a", (1,))], "positions[0].scores", "a sequence, got bytes"),
    "scores int": ([(1, (1,))], "positions[0].scores", "a sequence, got int"),
    "latents str": ([((1,), "a")], "positions[0].latents", "a sequence, got str"),
    "latents bytes": ([((1,), b"a")], "positions[0].latents", "a sequence, got bytes"),
    "latents generator": ([((1,), (x for x in (1,)))], "positions[0].latents", "a sequence, got generator"),
}


@pytest.mark.parametrize("case", TYPE_LEVELS, ids=str)
def test_positions_must_be_sequences_at_every_level(case: str) -> None:
    """str and bytes are sequences to Python but never positions; a generator or any other iterable that is not
    a sequence is refused rather than consumed (the reference indexes positions and reads them more than once).
    One channel per part, so a one-character str or bytes would otherwise pass the length check."""
    positions, argument, rule = TYPE_LEVELS[case]
    message = f"{argument}: must be {rule}"
    for weighting in Weighting:
        with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
            normalize_positions(CompressedLayer(1, 1), positions, weighting)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        compress(CompressedLayer(1, 1), positions, R)  # type: ignore[arg-type]


def test_positions_accept_lists_and_tuples_at_every_level() -> None:
    as_lists = [[[Fraction(1, 2)], [3]]]
    as_tuples = (((Fraction(1, 2),), (3,)),)
    expected = (((Fraction(1, 2),), (Fraction(3),)),)
    assert normalize_positions(CompressedLayer(1, 1), as_lists, R) == expected
    assert normalize_positions(CompressedLayer(1, 1), as_tuples, R) == expected
    assert normalize_positions(CompressedLayer(1, 1), [], R) == ()


def test_ratio_one_rows_are_the_latents_and_need_a_positive_weight() -> None:
    """At ratio 1 (V4.1, no overlap) a row's channel has one entry: any positive weight cancels and the row is
    the position's latent. Weight 0 (under EXP the score -oo of an unwritten slot) leaves the channel no mean:
    refused, as the seed's softmax over one -inf entry gives NaN. At ratio 2 a zero weight beside a positive one
    just drops its entry."""
    layer = v41_layer(1, 2)
    assert compress(layer, [((Fraction(1, 7), 5), (3, -2))], R) == ((3, -2),)
    assert compress(layer, [((-40, 7), (3, -2))], Weighting.EXP) == ((3, -2),)
    message = "scores: at least one entry of a channel must carry weight (a score above -inf)"
    for weighting, zero in ((R, 0), (Weighting.EXP, sympy.S.NegativeInfinity)):
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            compress(layer, [((1, zero), (3, -2))], weighting)
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            decode_step(layer, CompressionState(), 0, [((zero, 1), (3, -2))], weighting)
    assert compress(v41_layer(2, 1), [((0,), (100,)), ((2,), (5,))], R) == ((5,),)
    assert compress(v41_layer(2, 1), [((sympy.S.NegativeInfinity,), (100,)), ((2,), (5,))], Weighting.EXP) == ((5,),)


def test_bad_ape_values_named() -> None:
    zero_factor = CompressedLayer(1, 1, ape=((0,),))
    with pytest.raises(ValueError, match=r"^ape\[0\]\[0\]:"):
        compress(zero_factor, [((1,), (1,))], R)
    with pytest.raises(TypeError, match=r"^ape\[0\]\[0\]:"):
        compress(CompressedLayer(1, 1, ape=((sympy.log(2),),)), [((1,), (1,))], R)


def test_evaluate_rejects_bad_arguments() -> None:
    assert str(evaluate(Fraction(1, 3), 5)) == "0.33333"
    with pytest.raises(ValueError, match=r"^digits:"):
        evaluate(Fraction(1), 0)
    with pytest.raises(TypeError, match=r"^value:"):
        evaluate("1", 5)


# --- one-shot == every chunk partition -----------------------------------------------------------------------


def _layers() -> list[object]:
    rng = random.Random(11)
    cases = [
        ("r1", CompressedLayer(1, 2), 7),
        ("r2", CompressedLayer(2, 2), 9),
        ("r3-ape", CompressedLayer(3, 1, ape=random_ape(rng, 3, 1)), 8),
        ("r4-overlap-ape", CompressedLayer(4, 2, overlap=True, ape=random_ape(rng, 4, 4)), 10),
    ]
    return [pytest.param(*case, id=case[0]) for case in cases]


@pytest.mark.parametrize(("name", "layer", "longest"), _layers())
def test_one_shot_matches_oracle_and_every_partition(name: str, layer: CompressedLayer, longest: int) -> None:
    rng = random.Random(name)
    positions = random_positions(rng, layer, longest)
    for n in range(1, longest + 1):
        prefix = positions[:n]
        one_shot = compress(layer, prefix, R)
        assert list(one_shot) == oracle_rows(layer, prefix)
        final = state_after(layer, prefix, R)
        assert final.end == n and len(final.pending) == n % layer.ratio
        for lengths in compositions(n):
            rows, reserved, state = prefill_in_chunks(layer, prefix, lengths, R)
            assert [row.values for row in rows] == list(one_shot), lengths
            assert [(row.index, row.position) for row in rows] == [(j, j * layer.ratio) for j in range(len(rows))]
            starts = [sum(lengths[:i]) for i in range(len(lengths))]
            assert reserved == [
                max(1, (s + k) // layer.ratio - s // layer.ratio) for s, k in zip(starts, lengths, strict=True)
            ]
            assert state == final


@pytest.mark.parametrize("dim", [1, 2])
def test_ratio_128_small_dims(dim: int) -> None:
    rng = random.Random(dim)
    layer = CompressedLayer(128, dim, ape=random_ape(rng, 128, dim))
    positions = random_positions(rng, layer, 260)
    one_shot = compress(layer, positions, R)
    assert list(one_shot) == oracle_rows(layer, positions)
    assert len(one_shot) == 2
    final = state_after(layer, positions, R)
    plans = [[260], [127, 1, 1, 131], [128, 128, 4], [1, 126, 2, 131], [255, 1, 4]]
    plans += [random_composition(rng, 260, rng.randint(1, 8)) for _ in range(4)]
    for lengths in plans:
        rows, reserved, state = prefill_in_chunks(layer, positions, lengths, R)
        assert [row.values for row in rows] == list(one_shot), lengths
        assert state == final
        assert sum(max(0, r - 1) for r in reserved) <= 2  # at most two chunks complete a row


def test_chunk_arithmetic_and_placeholder() -> None:
    assert completed_count(2, 0, 1) == 0
    assert completed_count(2, 1, 4) == 2
    assert completed_count(2, 4, 7) == 1
    assert completed_count(128, 100, 300) == 2
    assert list(row_window(v4_layer(4, 1), 0)) == [0, 1, 2, 3]
    assert list(row_window(v4_layer(4, 1), 2)) == [4, 5, 6, 7, 8, 9, 10, 11]
    layer = CompressedLayer(2, 3)
    result = prefill_chunk(layer, CompressionState(), 0, [((1,) * 3, (5,) * 3)], R)
    assert result.rows == ()
    (out,) = result.reserved
    assert (out.position, out.store_row, out.values) == (0, -1, (0, 0, 0))
    assert result.state.end == 1 and len(result.state.pending) == 1


def test_chunk_must_start_where_state_ends() -> None:
    layer = CompressedLayer(2, 1)
    state = prefill_chunk(layer, CompressionState(), 0, [((1,), (1,))] * 3, R).state
    with pytest.raises(ValueError, match=r"^start:"):
        prefill_chunk(layer, state, 2, [((1,), (1,))], R)
    with pytest.raises(ValueError, match=r"^start:"):
        decode_step(layer, state, 4, [((1,), (1,))], R)
    with pytest.raises(ValueError, match=r"^positions:"):
        prefill_chunk(layer, state, 3, [], R)
    with pytest.raises(ValueError, match=r"^state.pending:"):
        prefill_chunk(layer, CompressionState(end=3), 3, [((1,), (1,))], R)
    with pytest.raises(ValueError, match=r"^state.previous:"):
        prefill_chunk(v4_layer(4, 1), CompressionState(end=4), 4, [((1, 1), (1, 1))], R)
    with pytest.raises(TypeError, match=r"^state:"):
        prefill_chunk(layer, None, 0, [((1,), (1,))], R)  # type: ignore[arg-type]


# --- decode steps in the exact form ---------------------------------------------------------------------------


def test_decode_reserves_one_row_per_query() -> None:
    rng = random.Random(3)
    layer = CompressedLayer(4, 1, overlap=True, ape=random_ape(rng, 4, 2))
    positions = random_positions(rng, layer, 16)
    want = oracle_rows(layer, positions)
    state = prefill_chunk(layer, CompressionState(), 0, positions[:5], R).state
    step = decode_step(layer, state, 5, positions[5:11], R)
    assert [(o.position, o.store_row) for o in step.reserved] == [(0, -1), (0, -1), (4, 1), (0, -1), (0, -1), (0, -1)]
    assert step.reserved[2].values == want[1]
    assert all(o.values == (0,) for o in step.reserved if o.store_row == -1)
    assert [row.values for row in step.rows] == [want[1]]
    # Verify: keep 2 of 6; row 1 (completed by position 7) is accepted, the state ends at 7.
    partial = decode_step(layer, state, 5, positions[5:11], R, accepted=3)
    assert partial.reserved == step.reserved
    assert [row.index for row in partial.rows] == [1]
    assert partial.state == state_after(layer, positions[:8], R)
    short = decode_step(layer, state, 5, positions[5:11], R, accepted=2)
    assert short.rows == () and short.state == state_after(layer, positions[:7], R)
    for bad in (0, 7):
        with pytest.raises(ValueError, match=r"^accepted:"):
            decode_step(layer, state, 5, positions[5:11], R, accepted=bad)


# --- several requests together --------------------------------------------------------------------------------


def test_batch_equals_each_request_alone() -> None:
    rng = random.Random(8)
    for layer in (CompressedLayer(2, 2), CompressedLayer(4, 1, overlap=True, ape=random_ape(rng, 4, 2))):
        for _ in range(20):
            count = rng.randint(1, 4)
            streams = [random_positions(rng, layer, rng.randint(2, 14)) for _ in range(count)]
            states, starts, chunks = [], [], []
            for stream in streams:
                done = rng.randint(0, len(stream) - 1)
                states.append(state_after(layer, stream[:done], R) if done else CompressionState())
                starts.append(done)
                chunks.append(stream[done:])
            batch = prefill_batch(layer, states, starts, chunks, R)
            alone = [prefill_chunk(layer, s, b, c, R) for s, b, c in zip(states, starts, chunks, strict=True)]
            assert list(batch.results) == alone
            assert batch.row_offsets[0] == 0 and len(batch.row_offsets) == count + 1
            for b, result in enumerate(alone):
                assert batch.reserved[batch.row_offsets[b] : batch.row_offsets[b + 1]] == result.reserved
            expected_total = sum(
                max(1, completed_count(layer.ratio, s, s + len(c))) for s, c in zip(starts, chunks, strict=True)
            )
            assert len(batch.reserved) == expected_total


def test_batch_bad_inputs() -> None:
    layer = CompressedLayer(2, 1)
    one = [((1,), (1,))]
    with pytest.raises(ValueError, match=r"^starts\[1\]:"):
        prefill_batch(layer, [CompressionState(), CompressionState()], [0, 1], [one, one], R)
    with pytest.raises(ValueError, match=r"^starts:"):
        prefill_batch(layer, [CompressionState()], [0, 0], [one], R)
    with pytest.raises(ValueError, match=r"^chunks:"):
        prefill_batch(layer, [CompressionState()], [0], [one, one], R)
    with pytest.raises(ValueError, match=r"^chunks\[0\]:"):
        prefill_batch(layer, [CompressionState()], [0], [[]], R)
    with pytest.raises(ValueError, match=r"^chunks\[0\]\[0\].scores:"):
        prefill_batch(layer, [CompressionState()], [0], [[((1, 1), (1,))]], R)


# --- every refusal worded exactly (docs/mutation.md) ------------------------------------------------------------

L2 = CompressedLayer(2, 1)
L4 = CompressedLayer(4, 1, overlap=True)
ONE = ((1,), (1,))


test_every_refusal_is_worded_exactly = worded_exactly(
    [
        (
            lambda: normalize_positions(L2, [((1,),)], R),
            ValueError,
            "positions[0]: must have length 2 (a (scores, latents) pair), got 1",
        ),
        (
            lambda: normalize_positions(L2, [((1, 2), (1,))], R),
            ValueError,
            "positions[0].scores: must have length 1 (layer.channels = coff * dim), got 2",
        ),
        (
            lambda: normalize_positions(L2, [((1,), (1, 2))], R),
            ValueError,
            "positions[0].latents: must have length 1 (layer.channels = coff * dim), got 2",
        ),
        (lambda: row_window(L2, -1), ValueError, "index: must be >= 0, got -1"),
        (lambda: check_state(L2, "state"), TypeError, "state: must be a CompressionState, got str"),  # type: ignore[arg-type]
        (lambda: check_state(L2, CompressionState(end=-1)), ValueError, "state.end: must be >= 0, got -1"),
        (
            lambda: check_state(L2, CompressionState(end=3)),
            ValueError,
            "state.pending: must have length 1 (end % ratio inputs of the incomplete group), got 0",
        ),
        (
            lambda: check_state(L4, CompressionState(end=5, pending=(((1, 1), (1, 1)),))),
            ValueError,
            "state.previous: must have length 4 (the previous window (overlap, end >= ratio)), got 0",
        ),
        (lambda: prefill_chunk(L2, CompressionState(), 1.0, [ONE], R), TypeError, "start: must be an int, got float"),  # type: ignore[arg-type]
        (
            lambda: prefill_chunk(L2, CompressionState(), 1, [ONE], R),
            ValueError,
            "start: a chunk must start where the state ends (0), got 1",
        ),
        (
            lambda: prefill_chunk(L2, CompressionState(), 0, [], R),
            ValueError,
            "positions: a chunk or step must hold at least one position",
        ),
        (
            lambda: decode_step(L2, CompressionState(), 0, [ONE], R, accepted=1.0),  # type: ignore[arg-type]
            TypeError,
            "accepted: must be an int, got float",
        ),
        (
            lambda: decode_step(L2, CompressionState(), 0, [ONE], R, accepted=0),
            ValueError,
            "accepted: must be between 1 and the step's 1 positions, got 0",
        ),
        (
            lambda: decode_step(L2, CompressionState(), 0, [ONE, ONE], R, accepted=3),
            ValueError,
            "accepted: must be between 1 and the step's 2 positions, got 3",
        ),
        (
            lambda: prefill_batch(L2, [CompressionState()], [0, 0], [[ONE]], R),
            ValueError,
            "starts: must have one entry per state (1), got 2",
        ),
        (
            lambda: prefill_batch(L2, [CompressionState()], [0], [[ONE], [ONE]], R),
            ValueError,
            "chunks: must have one entry per state (1), got 2",
        ),
        (
            lambda: prefill_batch(L2, [CompressionState()], [0.0], [[ONE]], R),  # type: ignore[list-item]
            TypeError,
            "starts[0]: must be an int, got float",
        ),
        (
            lambda: prefill_batch(L2, [CompressionState()], [2], [[ONE]], R),
            ValueError,
            "starts[0]: must equal request 0's state end 0, got 2",
        ),
        (
            lambda: prefill_batch(L2, [CompressionState(), CompressionState()], [0, 0], [[ONE], []], R),
            ValueError,
            "chunks[1]: a prefill chunk must hold at least one position",
        ),
        (
            lambda: prefill_batch(L2, [CompressionState()], [0], [["x"]], R),
            TypeError,
            "chunks[0][0]: must be a (scores, latents) pair, got str",
        ),
    ]
)


test_every_layer_refusal_is_worded_exactly = worded_exactly(
    [
        (lambda: window_positions(0, False), ValueError, "ratio: must be a positive integer, got 0"),
        (lambda: window_positions(4, 1), TypeError, "overlap: must be a bool, got int"),  # type: ignore[arg-type]
        (
            lambda: window_positions(2, True),
            ValueError,
            "overlap: overlapping windows exist only for ratio 4, got ratio 2",
        ),
        (lambda: CompressedLayer(0, 1), ValueError, "ratio: must be a positive integer, got 0"),
        (lambda: CompressedLayer(2, 0), ValueError, "dim: must be a positive integer, got 0"),
        (lambda: CompressedLayer(2, 1, overlap=None), TypeError, "overlap: must be a bool, got NoneType"),  # type: ignore[arg-type]
        (
            lambda: CompressedLayer(2, 1, overlap=True),
            ValueError,
            "overlap: overlapping windows exist only for ratio 4, got ratio 2",
        ),
        (lambda: CompressedLayer(2, 1, ape="ab"), TypeError, "ape: must be a sequence of 2 rows, got str"),  # type: ignore[arg-type]
        (lambda: CompressedLayer(2, 1, ape=5), TypeError, "ape: must be a sequence of 2 rows, got int"),  # type: ignore[arg-type]
        (
            lambda: CompressedLayer(2, 1, ape=[[1]]),  # type: ignore[arg-type]
            ValueError,
            "ape: must have length 2 (one row per offset within the group), got 1",
        ),
        (lambda: CompressedLayer(2, 1, ape=[[1], "a"]), TypeError, "ape[1]: must be a sequence of 1 entries, got str"),  # type: ignore[arg-type]
        (lambda: CompressedLayer(2, 1, ape=[[1], 7]), TypeError, "ape[1]: must be a sequence of 1 entries, got int"),  # type: ignore[arg-type]
        (
            lambda: CompressedLayer(2, 1, ape=[[1], [1, 2]]),  # type: ignore[arg-type]
            ValueError,
            "ape[1]: must have length 1 (one entry per projected channel), got 2",
        ),
        (
            lambda: CompressedLayer(2, 1, ape=[[1], [0.5]]),  # type: ignore[arg-type]
            TypeError,
            "ape[1][0]: must be an int, Fraction or sympy number, got float",
        ),
        (
            lambda: CompressedLayer(2, 1, ape=[[1], [True]]),  # type: ignore[arg-type]
            TypeError,
            "ape[1][0]: must be an int, Fraction or sympy number, got bool",
        ),
        (lambda: v4_layer(0, 1), ValueError, "ratio: must be a positive integer, got 0"),
        (
            lambda: v4_layer(2, 1),
            ValueError,
            "ratio: V4 compresses with ratio 4 or 128 (0 is an uncompressed layer with no compressor), got 2",
        ),
        (lambda: v4_layer(4, 1.0), TypeError, "dim: must be an int, got float"),  # type: ignore[arg-type]
        (lambda: v41_layer(-1, 1), ValueError, "ratio: must be a positive integer, got -1"),
        (
            lambda: v41_layer(4, 1),
            ValueError,
            "ratio: V4.1 compresses with ratio 1 or 2 (0 is an uncompressed layer with no compressor), got 4",
        ),
    ]
)


def test_layer_shapes_and_ape_lookup() -> None:
    assert (window_positions(4, True), window_positions(4, False), window_positions(128, False)) == (8, 4, 128)
    layer = CompressedLayer(2, 1, ape=[[Fraction(1, 2)], [3]])  # type: ignore[arg-type]
    assert layer.ape == ((Fraction(1, 2),), (3,))  # normalized to tuples: the layer stays hashable
    assert hash(layer) == hash(CompressedLayer(2, 1, ape=((Fraction(1, 2),), (3,))))
    assert [layer.ape_at(p, 0) for p in range(5)] == [Fraction(1, 2), 3, Fraction(1, 2), 3, Fraction(1, 2)]
    assert CompressedLayer(2, 1).ape_at(3, 0) is None
    v4 = v4_layer(4, 1, ape=[[1, 2], [3, 4], [5, 6], [7, 8]])
    assert v4.ape == ((1, 2), (3, 4), (5, 6), (7, 8)) and v4.overlap and v4.ape_at(6, 1) == 6
    assert v4_layer(128, 2).ape is None and not v4_layer(128, 2).overlap
