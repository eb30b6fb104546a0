"""The paired-warp-group sparse attention (``fast.cache.attention_pair``, a Gluon kernel, compiled sm_90 only;
BF16 KV rows and V4 / V4.1 FP8 caches): against the float64 mode of the ``tl`` kernel on the same call, within
twice the error of the ``tl`` kernel's own bf16-probability mode (the flash-attention rule) plus one f32 ulp of
the output's scale; lse and the empty rows' conventions as the ``tl`` kernel gives them; on an FP8 cache, bit for
bit the kernel on BF16 rows holding the cache's values. Skipped without a Hopper GPU. On any device: the
schedule's arithmetic (``attention_pair_naive``, step for step) against the float64 torch twin, within twice the
error of the torch twin's bf16 mode plus one ulp, and the refusal of other calls."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

from fast.cache import attention, bench_cases
from fast.cache.checks import AttentionArgs
from tests.gluon_attention import (
    assert_lse_within_twice,
    assert_out_within_twice,
    assert_same_bits,
    needs_sm90,
    walk_inputs,
)


def _call(x: dict[str, Any], precision: str, empty_nan: bool = False) -> AttentionArgs:
    M, h = x["q"].shape[:2]
    device = x["q"].device
    out = torch.full((M, h, 512), float("nan"), device=device)
    lse = torch.full((M, h), float("nan"), device=device)
    return AttentionArgs(x["q"], x["kv"], x["indices"], x["sink"], 512**-0.5, 512, empty_nan, out, lse, None,
                         precision)  # fmt: skip


CASES = {
    "b 2, h 64, top-k 256 (two pairs of tiles)": (2, 64, 256, None),
    "h 80 (a partial head block), top-k 200 (a partial tile)": (2, 80, 200, None),
    "top-k 192 (an odd number of tiles: the last pair's second tile is past the lanes)": (2, 64, 192, None),
    "top-k 1": (2, 64, 1, None),
    "top-k 64 (one tile)": (1, 64, 64, None),
    "top-k 2048, 16 rows": (16, 64, 2048, None),
    "h 128, top-k 512": (2, 128, 512, None),
    "invalid lanes and an empty row": (2, 64, 128, "invalid"),
    "a row whose valid lanes are all in the second tile of a pair": (1, 64, 128, "second"),
    "no sink": (1, 64, 128, "no sink"),
    "empty rows as NaN": (2, 64, 128, "empty nan"),
    "large scores (a row maximum that moves between the groups)": (2, 64, 512, "large"),
    "scores below -88 after an invalid first tile (exp(-m) overflows f32)": (1, 64, 128, "negative"),
}


def _inputs(case: str, device: str, context_rows: int) -> tuple[dict[str, Any], bool]:
    """The case's decode inputs, edited as its variant says; and whether empty rows are NaN."""
    b, h, topk, variant = CASES[case]
    x = bench_cases.decode_inputs(b, h, None, device, context_rows=context_rows, topk=topk)
    if variant == "invalid":
        x["indices"][0, ::3] = -1
        x["indices"][1, 5] = x["N"] + 7  # past the end
        x["indices"][2] = -1  # an empty row
    if variant in ("second", "negative"):
        x["indices"][:, :64] = -1
    if variant == "negative":
        x["kv"] = torch.ones_like(x["kv"])
        x["q"] = torch.full_like(x["q"], -4.0)  # every score -4 * 512 / sqrt(512), about -90.5
    if variant == "no sink":
        x["sink"] = None
    if variant == "large":
        x["q"] = x["q"] * 8
        x["indices"][:, 300] = x["indices"][:, 3]  # the same row twice, in tiles of both groups
    nan = variant == "empty nan"
    if nan:
        x["indices"][1] = -1
    return x, nan


def _check(got: AttentionArgs, exact: AttentionArgs, baseline: AttentionArgs) -> None:
    """``got`` against ``exact`` within twice ``baseline``'s error plus one ulp; the same empty rows."""
    live = torch.isfinite(exact.lse)
    assert torch.equal(torch.isfinite(got.lse), live)
    assert torch.equal(got.lse[~live].isnan(), exact.lse[~live].isnan())
    assert torch.equal(got.out[~live].isnan(), exact.out[~live].isnan())
    assert torch.equal(got.out[~live].nan_to_num(), exact.out[~live].nan_to_num())
    assert_out_within_twice(got, exact, baseline, live)
    assert_lse_within_twice(got, exact, baseline, live)


@pytest.mark.parametrize("case", list(CASES))
def test_the_schedule_matches_the_f64_twin(case: str) -> None:
    from fast.cache import attention_naive, attention_pair_naive

    x, nan = _inputs(case, "cpu", 512)
    exact = _call(x, "f64", nan)
    attention_naive.sparse_attention(exact)
    baseline = _call(x, "bf16", nan)
    attention_naive.sparse_attention(baseline)
    got = _call(x, "bf16", nan)
    attention_pair_naive.sparse_attention_pair(got)
    _check(got, exact, baseline)


@needs_sm90
@pytest.mark.parametrize("persistent", [True, False], ids=["persistent", "per_item"])
@pytest.mark.parametrize("case", list(CASES))
def test_paired_groups_match_the_f64_mode(case: str, persistent: bool) -> None:
    from fast.cache import attention_pair

    x, nan = _inputs(case, "cuda", 4096)
    exact = _call(x, "f64", nan)
    attention.sparse_attention(exact)
    tl_call = _call(x, "bf16", nan)
    attention.sparse_attention(tl_call)
    pair_call = _call(x, "bf16", nan)
    attention_pair.sparse_attention_pair(pair_call, persistent=persistent)
    _check(pair_call, exact, tl_call)


@needs_sm90
@pytest.mark.parametrize("programs", [1, 3, 7])
@pytest.mark.parametrize("topk", [136, 192, 640])
def test_a_persistent_program_walks_many_items(topk: int, programs: int) -> None:
    """The persistent grid on ``programs`` programs for 40 items (20 rows, h 80: two head blocks a row, the second
    partial): q, the ring's halves and every exchange barrier change hands across items; 3, 2 and 5 pairs an item
    (top-k 136: the last pair's second tile past the lanes); invalid lanes, a lane past the end and an empty row.
    Equal bit for bit to one program an item, and within the f64 rule."""
    from fast.cache import attention_pair

    x = walk_inputs(None, 4096, topk)
    walked = _call(x, "bf16")
    attention_pair.sparse_attention_pair(walked, persistent=True, programs=programs)
    one_each = _call(x, "bf16")
    attention_pair.sparse_attention_pair(one_each, persistent=False)
    assert_same_bits(walked, one_each)
    exact = _call(x, "f64")
    attention.sparse_attention(exact)
    tl_call = _call(x, "bf16")
    attention.sparse_attention(tl_call)
    _check(walked, exact, tl_call)


def test_bad_persistent_arguments_are_refused() -> None:
    from fast.cache import attention_pair

    with pytest.raises(TypeError, match=r"^persistent: must be a bool, got int"):
        attention_pair.sparse_attention_pair(None, persistent=1)  # type: ignore[arg-type]
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match=r"^programs: must be a positive int or None"):
            attention_pair.sparse_attention_pair(None, programs=bad)  # type: ignore[arg-type]


def test_other_calls_are_refused() -> None:
    from fast.cache import attention_pair

    # inputs where a cache can be built: a Triton store on CPU tensors runs only in the interpreter
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = bench_cases.decode_inputs(1, 64, "v41_fp4_288", device, context_rows=256, topk=64)
    fp4 = dataclasses.replace(_call(x, "bf16"), kv_cache=x["kv_cache"])
    rows = bench_cases.decode_inputs(1, 64, None, device, context_rows=256, topk=64)
    for call in (fp4, _call(rows, "f32")):
        with pytest.raises(ValueError, match=r"^call: the paired-group kernel serves bf16 q"):
            attention_pair.sparse_attention_pair(call)


FP8_FORMATS = ["v41_fp8_528", "v4_584"]


@pytest.mark.parametrize("kv_format", FP8_FORMATS)
def test_converting_a_half_in_place_overwrites_no_codes_it_still_needs(kv_format: str) -> None:
    """The FP8 producer's slots (``attention_pair.code_slot``): a half's code slots lie inside it, apart, and
    clear of V4's bf16 tail; the slots chunk i's bf16 takes (2i, 2i + 1) hold no codes of a later chunk, and hold
    codes exactly where ``holds_codes`` puts a barrier before the store."""
    from fast.cache import attention_pair as pair
    from fast.cache.formats import FORMATS

    qdims, dim, chunk = FORMATS[kv_format].row.quantized_dims, pair.DIM, pair.CHUNK
    per_half = dim // chunk  # 4 KB slots a half holds
    for stage in (0, 1):
        for side in (0, 1):
            first = (2 * stage + side) * per_half
            n = pair.half_chunks(side, qdims, dim, chunk)
            slots = [pair.code_slot(stage, side, i, qdims, dim, chunk) - first for i in range(n)]
            assert len(set(slots)) == n and all(0 <= s < per_half for s in slots)
            tail = range(2 * (qdims - side * dim // 2) // chunk, per_half) if side else range(0)
            assert not set(slots) & set(tail)
            for i in range(n):
                written = {2 * i, 2 * i + 1}
                assert not written & set(slots[i + 1 :])
                assert bool(written & set(slots)) == pair.holds_codes(side, i, qdims, dim, chunk)


def _on_fp8(x: dict[str, Any], kv_format: str, precision: str = "bf16") -> tuple[AttentionArgs, AttentionArgs]:
    """The call on ``x``'s FP8 cache, and the same call on BF16 rows holding the cache's values (exact in bf16:
    an e4m3 code times a power of two, V4's tail already bf16)."""
    from fast.cache import gather_dequantize

    slots = torch.arange(x["N"], device=x["kv"].device)
    rows = gather_dequantize(x["kv"], slots, fmt=kv_format, rows_per_block=x["kv_cache"][1]).to(torch.bfloat16)
    on_cache = dataclasses.replace(_call(x, precision), kv_cache=x["kv_cache"])
    on_rows = _call({**x, "kv": rows}, precision)
    return on_cache, on_rows


@needs_sm90
@pytest.mark.parametrize("persistent", [True, False], ids=["persistent", "per_item"])
@pytest.mark.parametrize("kv_format", FP8_FORMATS)
@pytest.mark.parametrize("case", [c for c in CASES if CASES[c][3] != "negative"])
def test_an_fp8_cache_gives_the_bits_of_its_values_as_bf16_rows(case: str, kv_format: str, persistent: bool) -> None:
    """The producer's conversion is exact, and the consumers are the BF16 rows' own: on an FP8 cache the kernel
    equals, bit for bit, itself on BF16 rows holding the cache's values (so the f64 rule of
    ``test_paired_groups_match_the_f64_mode`` carries over); every case of that test whose inputs a cache can hold
    (partial tiles and head blocks, invalid lanes and empty rows, a row maximum that moves between the groups)."""
    from fast.cache import attention_pair

    b, h, topk, _ = CASES[case]
    x = bench_cases.decode_inputs(b, h, kv_format, "cuda", context_rows=4096, topk=topk)
    plain, nan = _inputs(case, "cuda", 4096)
    x = {**x, "q": plain["q"], "indices": plain["indices"], "sink": plain["sink"]}
    on_cache, on_rows = _on_fp8(x, kv_format)
    on_cache, on_rows = dataclasses.replace(on_cache, empty_nan=nan), dataclasses.replace(on_rows, empty_nan=nan)
    attention_pair.sparse_attention_pair(on_cache, persistent=persistent)
    attention_pair.sparse_attention_pair(on_rows, persistent=persistent)
    assert_same_bits(on_cache, on_rows)
    assert torch.isfinite(on_rows.lse).any()


@needs_sm90
@pytest.mark.parametrize("programs", [1, 3, 7])
@pytest.mark.parametrize("kv_format", FP8_FORMATS)
def test_a_persistent_program_walks_an_fp8_cache(kv_format: str, programs: int) -> None:
    """The walk of ``test_a_persistent_program_walks_many_items`` (3 pairs an item, the last pair's second tile past
    the lanes) on an FP8 cache: equal bit for bit to one program an item and to the BF16 rows of its values, and
    within the f64 rule."""
    from fast.cache import attention_pair

    x = walk_inputs(kv_format, 4096, 136)
    walked, on_rows = _on_fp8(x, kv_format)
    attention_pair.sparse_attention_pair(walked, persistent=True, programs=programs)
    one_each, _ = _on_fp8(x, kv_format)
    attention_pair.sparse_attention_pair(one_each, persistent=False)
    attention_pair.sparse_attention_pair(on_rows, persistent=True, programs=programs)
    assert_same_bits(walked, one_each)
    assert_same_bits(walked, on_rows)
    exact, _ = _on_fp8(x, kv_format, "f64")
    attention.sparse_attention(exact)
    tl_call, _ = _on_fp8(x, kv_format)
    attention.sparse_attention(tl_call)
    _check(walked, exact, tl_call)


@pytest.mark.skipif(torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9, reason="off sm_90")
def test_a_call_off_sm90_is_refused_before_launch() -> None:
    from fast.cache import attention_pair

    x = bench_cases.decode_inputs(1, 64, None, "cpu", context_rows=256, topk=64)
    with pytest.raises(ValueError, match=r"^call: the paired-group kernel runs on an sm_90 GPU, got tensors on cpu"):
        attention_pair.sparse_attention_pair(_call(x, "bf16"))


def test_an_unknown_probe_is_refused_and_every_probe_is_named() -> None:
    from fast.cache import attention_pair, ws_probes

    with pytest.raises(ValueError, match=r"^probe: must be 0 or one of \[1, 2\], got 3"):
        attention_pair.sparse_attention_pair(None, probe=3)  # type: ignore[arg-type]
    assert ws_probes.main(["--kernel", "pair", "cache/decode_bf16_b64_h64", "--probes", "3"]) == 2
    assert ws_probes.main(["--kernel", "ws", "cache/decode_bf16_b64_h64", "--probes", "9"]) == 2


@pytest.mark.parametrize("pairs", range(7))
def test_the_shipped_producers_finish_in_the_protocol_model(pairs: int) -> None:
    """``pair_protocol``: the BF16 producer and the FP8 one (``PAIR_ORDER``) finish with both groups, on no pair
    (the persistent form's last item), one, and several; so does the FP8 producer one half ahead in fill order."""
    from fast.cache import pair_protocol as p

    assert p.run(p.bf16_producer(pairs), pairs) == []
    assert p.run(p.fp8_ordered(pairs), pairs) == []
    assert p.run(p.fp8_producer(pairs), pairs) == []


@pytest.mark.parametrize("row", ["bf16", "fp8 first order", "fp8 boundary order"])
def test_a_persistent_program_finishes_its_items_in_the_protocol_model(row: str) -> None:
    """Items of 1, 2, 1 and 4 pairs walked by one program (pairs and q counted across items): every producer
    finishes with both groups; with group 0 never freeing q, the producer waits for it at the second item."""
    from fast.cache import pair_protocol as p
    from fast.cache.pair_timing import ROWS

    make = ROWS[row]
    for drain in (False, True):
        parts = p.persistent([1, 2, 1, 4], make, drain=drain)
        assert p.run_parts(parts) == []
        rounds = [op[2] for op in parts["group 1"] if op[:2] == ("wait", "ready3")]
        assert rounds == list(range(8))  # the pairs counted across items: each phase waited for once, in order
    parts = p.persistent([1, 2], make)
    parts = {name: [op for op in ops if op[:2] != ("arrive", "q_empty0")] for name, ops in parts.items()}
    assert "producer: ('wait', 'q_empty0', 0)" in p.run_parts(parts)


def test_the_fp8_pair_order_copies_each_half_once_before_converting_it() -> None:
    from fast.cache import pair_protocol as p

    steps = [(verb, half, j + on) for j in (0, 1) for verb, half, on in p.PAIR_ORDER]  # pair 1's, in time order
    pair1 = [step for step in steps if step[2] == 1]
    assert sorted(pair1) == sorted((verb, h, 1) for verb in ("issue", "convert") for h in range(4))
    assert all(pair1.index(("issue", h, 1)) < pair1.index(("convert", h, 1)) for h in range(4))


@pytest.mark.parametrize("pairs", [1, 2, 5])
def test_the_kernels_fp8_steps_wait_for_each_halfs_copies_and_no_later_ones(pairs: int) -> None:
    """``attention_pair._produce_row_fp8`` walks ``pair_protocol``'s steps; each conversion's ``later`` is the
    count of commit groups ``cp.async.wait_group`` may leave in flight. Replayed over a row of ``pairs`` pairs
    (each pair's steps of the pair past the last left out), the half a conversion reads is among the groups that
    have landed, and is the newest of them: no wait is stronger than it needs."""
    from fast.cache import attention_pair as ap

    groups: list[tuple[int, int]] = []  # (half, pair) of each committed group, oldest first
    for first, j in [(True, 0), *((False, j) for j in range(pairs))]:
        for k in range(ap.fp8_step_count(first)):
            half = 2 * ap.fp8_step(first, k, "stage") + ap.fp8_step(first, k, "side")
            pair = j + ap.fp8_step(first, k, "on")
            if pair >= pairs:
                continue
            if ap.fp8_step(first, k, "issue"):
                groups.append((half, pair))
                continue
            later = ap.fp8_step(first, k, "later")
            landed = groups[: len(groups) - later]
            assert (half, pair) in landed, (first, k, later)
            assert (half, pair) == groups[len(groups) - later - 1], (first, k, later)  # the last it needs
    assert len(groups) == 4 * pairs


def test_a_fp8_step_refuses_an_unknown_field_or_step() -> None:
    from fast.cache import attention_pair as ap

    with pytest.raises(ValueError, match=r"^field: must be one of"):
        ap.fp8_step(False, 0, "tile")
    with pytest.raises(ValueError, match=r"^k: must be a step of the 8 there are, got 8"):
        ap.fp8_step(False, ap.fp8_step_count(False), "on")


def test_a_fp8_pair_order_that_copies_too_early_is_reported_stuck() -> None:
    """The model tells a deadlocking order from the shipped one: with a-left of the next pair copied before a-right
    is converted, the producer waits for group 0 to free a-left, which it does only after scoring both of a's
    halves."""
    from fast.cache import pair_protocol as p

    steps = list(p.PAIR_ORDER)
    steps.insert(3, steps.pop(steps.index(("issue", 0, 1))))
    left = p.run(p.fp8_ordered(3, tuple(steps)), 3)
    assert "producer: ('wait', 'empty0', 0)" in left and len(left) == 3, left


@pytest.mark.parametrize(
    ("ahead", "stuck"),
    [
        ((2, 2, 1, 1), None),
        ((2, 1, 1, 1), None),
        ((0, 0, 0, 0), None),
        ((1, 1, 2, 1), "producer: ('wait', 'empty0', 0)"),
        ((1, 1, 1, 2), "producer: ('wait', 'empty3', 0)"),
        ((2, 2, 2, 2), "producer: ('wait', 'empty0', 0)"),
        ((3, 1, 1, 1), "producer: ('wait', 'empty2', 0)"),
    ],
)
def test_an_in_place_producer_may_run_two_halves_ahead_only_before_a_left_and_b_right(
    ahead: tuple[int, int, int, int], stuck: str | None
) -> None:
    """docs/cache-kernels.md's rule in the model, on three pairs: copies two halves ahead before converting
    a-left or b-right finish; before a-right or b-left, or three ahead, the producer waits for a half that a
    group frees only after the half it has not converted."""
    from fast.cache import pair_protocol as p

    left = p.run(p.fp8_producer(3, ahead), 3)
    assert (stuck in left and len(left) == 3) if stuck else left == []


def test_the_protocol_model_reports_a_producer_that_never_signals() -> None:
    from fast.cache import pair_protocol as p

    silent = [op for op in p.bf16_producer(2) if op[0] == "wait"]
    assert p.run(silent, 2) == [
        "group 0: ('wait', 'ready0', 0)",
        "group 1: ('wait', 'ready3', 0)",
        "producer: ('wait', 'empty0', 0)",
    ]


def test_the_protocol_model_refuses_bad_counts_by_name() -> None:
    from fast.cache import pair_protocol as p

    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match=r"^pairs: must be a non-negative int"):
            p.run([], bad)  # type: ignore[arg-type]
    for ahead in ((1, 1, 1), (1, 1, -1, 1), (1, 1, 1.0, 1)):
        with pytest.raises(ValueError, match=r"^ahead: must be 4 non-negative ints"):
            p.fp8_producer(2, ahead)  # type: ignore[arg-type]
