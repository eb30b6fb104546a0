"""The warp-specialized sparse decode (``fast.cache.attention_ws``, a Gluon kernel, compiled sm_90 only; BF16 KV
rows, V4.1 and V4 FP8 caches): against the float64 mode of the ``tl`` kernel on the same call, within twice the error
of the ``tl`` kernel's own bf16-probability mode (the flash-attention rule) plus one f32 ulp of the output's
scale; lse and the empty rows' conventions as the ``tl`` kernel gives them; the default and every swept tile.
Skipped without a Hopper GPU, except the host's tile checks and the model of the chunked copies' schedule."""

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


def _call(x: dict[str, Any], precision: str) -> AttentionArgs:
    M, h = x["q"].shape[:2]
    out = torch.full((M, h, 512), float("nan"), device="cuda")
    lse = torch.full((M, h), float("nan"), device="cuda")
    return AttentionArgs(x["q"], x["kv"], x["indices"], x["sink"], 512**-0.5, 512, False, out, lse, x["kv_cache"],
                         precision)  # fmt: skip


CASES = {
    "b 2, h 64, top-k 256": (2, 64, 256, None),
    "h 80 (a partial head block), top-k 200 (a partial tile)": (2, 80, 200, None),
    "invalid lanes and an empty row": (2, 64, 128, "invalid"),
    "no sink": (1, 64, 128, "no sink"),
}


def _tiles() -> list[Any]:
    """(case, KV format, tile or None for the default): every case in the default tiles, the partial-tile case
    (a partial head block, a partial last tile) in every swept tile that serves the format, and every case in the
    tiles whose codes are copied a chunk at a time (their ring runs across tiles)."""
    from fast.cache import attention_ws

    out: list[Any] = []
    for kv_format in ("v41_fp8_528", "v4_584", None):
        kv = kv_format or "bf16 rows"
        out += [pytest.param(case, kv_format, None, id=f"{case}-{kv}") for case in CASES]
        out += [pytest.param(PARTIAL, kv_format, t, id=f"{PARTIAL}-{kv}-{attention_ws.label(t, kv_format is not None)}")
                for t in attention_ws.sweep_tiles(kv_format)]  # fmt: skip
        out += [pytest.param(case, kv_format, t, id=f"{case}-{kv}-{attention_ws.label(t, True)}")
                for t in attention_ws.sweep_tiles(kv_format) if t.code_chunks
                for case in CASES if case != PARTIAL]  # fmt: skip
    return out


PARTIAL = "h 80 (a partial head block), top-k 200 (a partial tile)"


def _assert_out_within_rule(got: AttentionArgs, exact: AttentionArgs, tl_call: AttentionArgs) -> torch.Tensor:
    """``got``'s rows without a valid lane (lse not finite) equal to ``exact``'s, its out within twice the ``tl``
    kernel's bf16-probability error plus one f32 ulp of the output's scale; the live rows' mask."""
    live = torch.isfinite(exact.lse)
    assert torch.equal(torch.isfinite(got.lse), live) and torch.equal(got.lse[~live], exact.lse[~live])
    assert torch.equal(got.out[~live], exact.out[~live])
    assert_out_within_twice(got, exact, tl_call, live)
    return live


@needs_sm90
@pytest.mark.parametrize(("case", "kv_format", "tile"), _tiles())
def test_warp_specialized_decode_matches_the_f64_mode(case: str, kv_format: str | None, tile: Any) -> None:
    from fast.cache import attention_ws

    b, h, topk, variant = CASES[case]
    x = bench_cases.decode_inputs(b, h, kv_format, "cuda", context_rows=1024, topk=topk)
    if variant == "invalid":
        x["indices"][0, ::3] = -1
        x["indices"][1, 5] = x["N"] + 7  # past the end
        x["indices"][2] = -1  # an empty row
    if variant == "no sink":
        x["sink"] = None
    exact = _call(x, "f64")
    attention.sparse_attention(exact)
    tl_call = _call(x, "bf16")
    attention.sparse_attention(tl_call)
    ws_call = _call(x, "bf16")
    attention_ws.sparse_attention_ws(ws_call, tile)
    live = _assert_out_within_rule(ws_call, exact, tl_call)
    assert_lse_within_twice(ws_call, exact, tl_call, live)


@needs_sm90
@pytest.mark.parametrize("programs", [1, 3, 7])
@pytest.mark.parametrize("kv_format", ["v41_fp8_528", "v4_584", None])
def test_a_persistent_program_walks_many_items(kv_format: str | None, programs: int) -> None:
    """A persistent tile on a grid of ``programs`` (1, 3 and 7 programs for 40 items of a row and a head
    block): q and the ring's barriers change hands across items, 3 tiles an item so that the stages' phases
    alternate between items; invalid lanes, a lane past the end and an empty row among them. Equal to the
    non-persistent default tile bit for bit (the same arithmetic in the same order) and within the rule of
    ``test_warp_specialized_decode_matches_the_f64_mode``."""
    from fast.cache import attention_ws

    x = walk_inputs(kv_format, 1024, 136)
    default = attention_ws.STAGED_TILES[kv_format] if kv_format else attention_ws.DEFAULT_TILES[None]
    walked = _call(x, "bf16")
    attention_ws.sparse_attention_ws(walked, dataclasses.replace(default, persistent=True), programs=programs)
    one_each = _call(x, "bf16")
    attention_ws.sparse_attention_ws(one_each, dataclasses.replace(default, persistent=False))
    assert_same_bits(walked, one_each)
    exact = _call(x, "f64")
    attention.sparse_attention(exact)
    tl_call = _call(x, "bf16")
    attention.sparse_attention(tl_call)
    _assert_out_within_rule(walked, exact, tl_call)


def test_a_bad_programs_count_is_refused() -> None:
    from fast.cache import attention_ws

    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match=r"^programs: must be a positive int or None"):
            attention_ws.sparse_attention_ws(None, programs=bad)  # type: ignore[arg-type]


@needs_sm90
def test_other_calls_are_refused() -> None:
    from fast.cache import attention_ws

    x = bench_cases.decode_inputs(1, 64, "v41_fp8_528", "cuda", context_rows=256, topk=64)
    with pytest.raises(ValueError, match=r"^call: the warp-specialized kernel serves bf16 q"):
        attention_ws.sparse_attention_ws(_call(x, "f32"))


@pytest.mark.parametrize(
    ("tile", "kv_format", "rule"),
    [
        ((48, 2), None, "needs block_n 32 or 64"),
        ((32, 0), None, "needs block_n 32 or 64"),
        ((64, 2, 100), "v4_584", "producer_regs a multiple of 8"),
        ((64, 3), None, "bytes of shared memory, over"),
        ((64, 1, 56, True), None, "needs stages >= 2"),
        ((64, 2, 56, False, 2), None, "needs prefetch in"),
        ((64, 2, 56, False, 5), "v41_fp8_528", "needs prefetch in"),
        ((64, 2, 56, True, 0, True), None, "is persistent, which the overlapped"),
        ((64, 2, 96, False, 1, False, 8), "v4_584", r"code_chunks 0 or in \[3, 7\] for v4_584"),
        ((64, 2, 56, False, 0, False, 3), None, r"code_chunks 0 or in \[3, 0\] for None"),
        ((64, 2, 96, False, 1, False, 2), "v41_fp8_528", r"code_chunks 0 or in \[3, 9\]"),
        ((64, 2, 96, False, 1, False, 10), "v41_fp8_528", r"code_chunks 0 or in \[3, 9\]"),
        ((64, 2, 96, False, 1, True, 7), "v41_fp8_528", "is persistent, which the overlapped"),
        ((64, 2, 96, False, 1, False, 9), "v41_fp8_528", "bytes of shared memory, over"),
    ],
)
def test_a_tile_that_breaks_a_rule_is_refused_before_launch(
    tile: tuple[Any, ...], kv_format: str | None, rule: str
) -> None:
    from fast.cache import attention_ws

    with pytest.raises(ValueError, match=rf"^tile: .*{rule}"):
        attention_ws.check_tile(attention_ws.Tile(*tile), kv_format)


def test_every_shipped_tile_passes_its_own_check() -> None:
    from fast.cache import attention_ws

    for kv_format in (None, "v41_fp8_528", "v4_584"):
        attention_ws.check_tile(attention_ws.DEFAULT_TILES[kv_format], kv_format)
    assert len(attention_ws.sweep_tiles("v41_fp8_528")) == len(attention_ws.SWEEP[True]) - 1  # less the default


def test_the_default_path_refuses_a_config_of_another_kind() -> None:
    from fast.cache import sparse_attention

    x = bench_cases.decode_inputs(1, 4, None, "cuda" if torch.cuda.is_available() else "cpu", context_rows=64, topk=8)
    rule = r"^config: must be a fast.cache.attention.Config, attention_ws.Tile or attention_pair.Pair"
    with pytest.raises(TypeError, match=rule):
        sparse_attention(x["q"], x["kv"], x["indices"], x["sink"], scale=0.05, dv=512, config=(64, 2))


@pytest.mark.skipif(torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9, reason="off sm_90")
def test_a_warp_specialized_tile_off_sm90_is_refused() -> None:
    from fast.cache import attention_ws, sparse_attention

    x = bench_cases.decode_inputs(1, 4, None, "cpu", context_rows=64, topk=8)
    with pytest.raises(ValueError, match=r"^config: a warp-specialized Tile needs an sm_90 GPU"):
        sparse_attention(x["q"], x["kv"], x["indices"], x["sink"], scale=0.05, dv=512, precision="bf16",
                         config=attention_ws.Tile(64, 2))  # fmt: skip


@needs_sm90
@pytest.mark.parametrize("kv_format", ["v41_fp8_528", "v4_584", None])
def test_the_default_path_is_a_gluon_kernel_where_one_serves(kv_format: str | None) -> None:
    """On sm_90 the public entry's default equals, bit for bit (bf16 p), the warp-specialized kernel on an FP8
    cache and the paired-warp-group one on BF16 rows; f32 p and a tl Config equal the tl kernel."""
    from fast.cache import attention, attention_pair, attention_ws, sparse_attention

    x = bench_cases.decode_inputs(2, 64, kv_format, "cuda", context_rows=1024, topk=256)
    for precision, config in (("bf16", None), ("f32", None), ("bf16", attention.default_config(64, 512, kv_format))):
        out, lse = sparse_attention(x["q"], x["kv"], x["indices"], x["sink"], scale=512**-0.5, dv=512,
                                    precision=precision, config=config, kv_format=kv_format)  # fmt: skip
        twin = _call(x, precision)
        if precision == "bf16" and config is None and kv_format is None:
            attention_pair.sparse_attention_pair(twin)
        elif precision == "bf16" and config is None:
            attention_ws.sparse_attention_ws(twin)
        else:
            attention.sparse_attention(dataclasses.replace(twin, config=config))
        assert torch.equal(out, twin.out) and torch.equal(lse, twin.lse), (precision, config)


def test_an_unknown_probe_is_refused_and_every_probe_is_named() -> None:
    from fast.cache import attention_ws, ws_probes

    with pytest.raises(ValueError, match=r"^probe: must be 0 or one of \[1, 2, 3, 4, 5, 6, 7, 8\], got 9"):
        attention_ws.sparse_attention_ws(None, probe=9)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^case: 'cache/store_v4_584' is not a decode or prefill case"):
        ws_probes.case_call("cache/store_v4_584")
    assert ws_probes.main(["cache/decode_bf16_b64_h64", "--probes", "9"]) == 2


def _chunk_schedule(code_chunks: int, steps: int, rope: bool, tiles: int) -> None:
    """Walk ``_produce_chunked``'s copies, waits and reads for ``tiles`` tiles, as the kernel orders them: groups
    of copies committed in order, ``cp.async.wait_group(AHEAD)`` completing all but the newest ``AHEAD``, one
    barrier a step between its wait and its conversion. AssertionError where a conversion would read a slot not
    holding its chunk's landed codes or its tile's landed scales, a copy would refill a slot with no barrier since
    its last read, or V4's rope values would not have landed by their tile's last step."""
    ahead = code_chunks - 2
    groups: list[list[tuple[tuple[str, int], int]]] = []  # committed, not yet known complete
    holds: dict[tuple[str, int], tuple[int, bool]] = {}  # location -> (what it holds, landed)
    last_read: dict[tuple[str, int], int] = {}

    def issue(group: list[tuple[tuple[str, int], int]], where: tuple[str, int], what: int, step: int) -> None:
        read = last_read.get(where)
        assert read is None or step - read >= 2, f"{where} refilled at step {step}, read at {read}, no barrier between"
        holds[where] = (what, False)
        group.append((where, what))

    def wait_group(keep: int) -> None:
        while len(groups) > keep:
            for where, what in groups.pop(0):
                if holds[where][0] == what:
                    holds[where] = (what, True)

    first: list[tuple[tuple[str, int], int]] = []
    issue(first, ("scales", 0), 0, -1)
    for j in range(ahead):
        group = first if j == 0 else []
        issue(group, ("codes", j % code_chunks), j, -1)
        groups.append(group)
    for t in range(tiles):
        for c in range(steps):
            g = t * steps + c
            group = []
            if c + ahead == steps:
                issue(group, ("scales", (t + 1) % 2), t + 1, g)
            issue(group, ("codes", (g + ahead) % code_chunks), g + ahead, g)
            if rope and c == 1:
                issue(group, ("rope", t), t, g)
            groups.append(group)
            wait_group(ahead)
            for where, what in ((("codes", g % code_chunks), g), (("scales", t % 2), t)):
                assert holds.get(where) == (what, True), f"step {g} reads {where}: {holds.get(where)}, not {what}"
                last_read[where] = g
        if rope:
            assert holds.get(("rope", t)) == (t, True), f"tile {t}'s rope values have not landed by its last step"


@pytest.mark.parametrize("kv_format", ["v41_fp8_528", "v4_584"])
def test_the_chunked_copies_are_safe_at_every_depth_check_tile_allows(kv_format: str) -> None:
    """Every ``code_chunks`` that ``check_tile`` allows (from 3 up, at most ``most_code_chunks``; shared memory
    may stop it sooner) keeps the schedule safe (``_chunk_schedule``), and one past ``most_code_chunks`` breaks
    it: the bound is the schedule's, not a guess."""
    from fast.cache import attention_ws
    from fast.cache.formats import FORMATS

    row = FORMATS[kv_format].row
    steps, rope = row.quantized_dims // attention_ws.CHUNK, row.quantized_dims < attention_ws.DIM
    allowed = []
    for k in range(1, 12):
        try:
            attention_ws.check_tile(attention_ws.Tile(64, 2, 96, code_chunks=k), kv_format)
        except ValueError:
            continue
        allowed.append(k)
        _chunk_schedule(k, steps, rope, tiles=5)
    most = attention_ws.most_code_chunks(kv_format)
    assert allowed and allowed == list(range(3, allowed[-1] + 1)) and allowed[-1] <= most, allowed
    _chunk_schedule(most, steps, rope, tiles=5)
    with pytest.raises(AssertionError):
        _chunk_schedule(most + 1, steps, rope, tiles=5)


def test_an_unknown_kv_format_is_refused_by_name() -> None:
    from fast.cache import attention_ws

    with pytest.raises(ValueError, match=r"^kv_format: must be None or one of"):
        attention_ws.most_code_chunks("v4_999")


def test_a_launch_takes_the_rows_blocks_and_scale_offset_of_its_kv() -> None:
    """``kv_launch`` (both Gluon kernels' host side): BF16 rows give their count and no block; a cache gives its
    slots (blocks x rows a block), a block's bytes and where the scales start in one."""
    from fast.cache import attention_ws
    from fast.cache.formats import FORMATS

    t = torch.zeros(1)
    rows = AttentionArgs(t, torch.zeros(5, 512), t, None, 1.0, 512, False, t, t, None, "bf16")
    layout, n, block_bytes, scale_base = attention_ws.kv_launch(rows)
    assert (n, block_bytes, scale_base) == (5, 0, 0) and layout == attention_ws.kv_constants(None, 1)
    for conv, rows_per_block in (("v4_584", 64), ("v41_fp8_528", 16)):
        fmt = FORMATS[conv]
        cache = torch.zeros(3, fmt.block_bytes(rows_per_block), dtype=torch.uint8)
        call = dataclasses.replace(rows, kv=cache, kv_cache=(fmt, rows_per_block))
        layout, n, block_bytes, scale_base = attention_ws.kv_launch(call)
        assert (n, block_bytes) == (3 * rows_per_block, fmt.block_bytes(rows_per_block))
        assert scale_base == fmt.offsets(rows_per_block)[1] and layout["FP8_KV"] and layout["RPB"] == rows_per_block
