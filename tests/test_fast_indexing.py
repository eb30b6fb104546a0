"""fast.indexing: every Triton kernel against its torch twin and the exact reference, on small cases.

Inputs sit on grids where float32 arithmetic is exact, so logits compare bit for bit with the exact reference
rounded to float32, and top-k lanes compare exactly. Storage past every valid end holds NaN / inf / huge values.
On the CPU the kernels run in Triton's interpreter (slow: the cases are small, and each top-k selection path is
forced by its own configuration). The tests marked ``cuda`` run the compiled kernels on realistic sizes and are
skipped without a GPU.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any, cast

import pytest
import torch

from fast.indexing import addressing, candidates, compressed, logits, naive, window
from fast.indexing import topk as tk
from reference import addressing as ref_addr
from reference import candidates as ref_cand
from reference import compressed_list as ref_compressed
from reference import indexing as ref_index
from reference import topk as ref_topk
from reference import window as ref_window
from reference.grids import FP32, e4m3_decode, round_to
from reference.score_values import NAN, NEG_INF, POS_INF, Score

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
GARBAGE = (float("nan"), float("inf"), 3.0e38, -3.0e38, float("-inf"))


def on_device(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``fn`` with its tensor arguments moved to the test device (the GPU when there is one, where the kernels
    run compiled) and its result brought back to the CPU; an ``out`` buffer is written back in place."""

    def call(*args: Any, **kwargs: Any) -> torch.Tensor:
        if DEVICE == "cpu":
            return fn(*args, **kwargs)
        move: Callable[[Any], Any] = lambda t: t.to(DEVICE) if isinstance(t, torch.Tensor) else t  # noqa: E731
        host_out = kwargs.get("out")
        result = fn(*(move(a) for a in args), **{key: move(x) for key, x in kwargs.items()})
        if host_out is not None:
            host_out.copy_(result.cpu())
            return host_out
        return result.cpu()

    return call


class K:
    """The Triton functions, run on the test device."""

    topk = staticmethod(on_device(tk.topk))
    index_logits = staticmethod(on_device(logits.index_logits))
    paged_index_logits = staticmethod(on_device(logits.paged_index_logits))
    candidate_select = staticmethod(on_device(candidates.candidate_select))
    block_scores = staticmethod(on_device(candidates.block_scores))
    candidate_restore = staticmethod(on_device(candidates.candidate_restore))
    slot_translation = staticmethod(on_device(addressing.slot_translation))
    gathered_rows = staticmethod(on_device(addressing.gathered_rows))
    decode_window_indices = staticmethod(on_device(window.decode_window_indices))

    @staticmethod
    def candidate_remap(*tensors: torch.Tensor, block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        positions, counts = candidates.candidate_remap(*(t.to(DEVICE) for t in tensors), block_size=block_size)
        return positions.cpu(), counts.cpu()

    @staticmethod
    def window_indices(**kwargs: Any) -> torch.Tensor:
        return window.window_indices(device=DEVICE, **kwargs).cpu()

    @staticmethod
    def compressed_indices(**kwargs: Any) -> torch.Tensor:
        return compressed.compressed_indices(device=DEVICE, **kwargs).cpu()


REF_CONVENTIONS: dict[str, ref_topk.TopKConvention] = {
    "v4.1": ref_topk.V41TopK(width=ref_topk.Width.FIXED),
    "v4.1-clamped": ref_topk.V41TopK(width=ref_topk.Width.CLAMPED),
    "v4-prefill": ref_topk.V4TopK(ref_topk.Phase.PREFILL),
    "v4-decode": ref_topk.V4TopK(ref_topk.Phase.DECODE),
    "select": ref_topk.SelectTopK(),
    "select-unsorted": ref_topk.SelectTopK(sorted_index=False),
}

# One configuration per selection path of the top-k kernel (see fast/indexing/topk.py).
PATHS = {
    "pairwise": tk.INTERPRETED,
    "direct": tk.TopKConfig(block=32, num_warps=1, sample=8, direct=64, pairwise=0, resident=0),
    "sampled": tk.TopKConfig(
        block=32, num_warps=1, sample=8, oversample=2, cap_factor=4, direct=0, pairwise=0, resident=0
    ),
    "fallback": tk.TopKConfig(block=32, num_warps=1, sample=8, cap_factor=0, direct=0, pairwise=0, resident=0),
    "resident": tk.TopKConfig(block=32, num_warps=1, pairwise=0, split_lanes=0, resident=64),
}


def exact(value: float) -> Score:
    if value != value:
        return NAN
    if value in (float("inf"), float("-inf")):
        return POS_INF if value > 0 else NEG_INF
    return Fraction(value)


def visible(row: list[float], n: int) -> list[Score | None]:
    """The valid prefix as exact scores, None past it (the reference raises if it ever reads a None)."""
    return [exact(x) for x in row[:n]] + [None] * (len(row) - n)


def score_rows(
    seed: int, rows: int, width: int, ties: bool = True, specials: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Score rows on a coarse grid (many ties) with -inf/+inf/NaN/-0.0 sprinkled in, garbage past each length;
    lengths include 0 and the full width."""
    g = torch.Generator().manual_seed(seed)
    spread = 6 if ties else 4096
    scores = torch.randint(-spread, spread + 1, (rows, width), generator=g).float() / (2 if ties else 64)
    if specials:
        pick = torch.rand(rows, width, generator=g)
        scores[pick < 0.06] = float("nan")
        scores[(pick >= 0.06) & (pick < 0.12)] = float("-inf")
        scores[(pick >= 0.12) & (pick < 0.16)] = float("inf")
        scores[(pick >= 0.16) & (pick < 0.22)] = -0.0
    lengths = torch.randint(0, width + 1, (rows,), generator=g, dtype=torch.int32)
    lengths[0], lengths[-1] = width, width
    if rows > 2:
        lengths[1] = 0
    for r in range(rows):
        n = int(lengths[r])
        scores[r, n:] = torch.tensor([GARBAGE[(r + j) % len(GARBAGE)] for j in range(width - n)])
    return scores, lengths


def reference_topk(
    scores: torch.Tensor, lengths: torch.Tensor, k: int, convention: str, offsets: torch.Tensor
) -> list[list[int]]:
    conv = REF_CONVENTIONS[convention]
    return [
        list(ref_topk.topk(visible(row, n), n, k, conv, off))
        for row, n, off in zip(scores.tolist(), lengths.tolist(), offsets.tolist(), strict=True)
    ]


# --- top-k ---------------------------------------------------------------------------------------------------------


TOPK_CASES = [(p, c) for p in ("pairwise", "sampled", "resident") for c in sorted(REF_CONVENTIONS)]
TOPK_CASES += [(p, c) for p in ("direct", "fallback") for c in ("v4.1", "select-unsorted")]


@pytest.mark.parametrize(("path", "convention"), TOPK_CASES)
def test_topk_equals_twin_and_reference(path: str, convention: str) -> None:
    seed = sorted(REF_CONVENTIONS).index(convention) + 7 * sorted(PATHS).index(path)
    scores, lengths = score_rows(seed, 4, 44)
    if convention == "v4-decode":
        lengths.fill_(scores.shape[1])
        scores = torch.where(scores.abs() > 1e30, 0.5, scores)
    offsets = torch.tensor([0, 5, 2**31 - 100, 17], dtype=torch.int32)
    for k in (3, 9) if path == "pairwise" else (5,):
        expected = reference_topk(scores, lengths, k, convention, offsets)
        twin = naive.topk(scores, lengths, k=k, convention=convention, offsets=offsets)
        lanes = len(expected[0])
        guarded = torch.full((4 * lanes + 8,), -7, dtype=torch.int32, device=DEVICE)  # writes past the last row
        out = guarded[: 4 * lanes].view(4, lanes)
        dev = [t.to(DEVICE) for t in (scores, lengths, offsets)]
        got = tk.topk(*dev[:2], k=k, convention=convention, offsets=dev[2], config=PATHS[path], out=out)
        assert twin.tolist() == expected
        assert got.dtype == torch.int32 and got.tolist() == expected, (path, convention, k)
        assert (guarded[4 * lanes :] == -7).all()


def test_topk_tie_path_and_large_k() -> None:
    """Most visible lanes tie at the k-th score: too many to buffer, so the kernel collects from the row with the
    sampled key as threshold; k past the row width takes every visible lane."""
    scores = torch.full((3, 48), 1.0)
    scores[:, 5] = 4.0
    scores[:, 30] = 2.0
    scores[1, 47] = float("nan")
    scores[2, 40:] = float("inf")  # garbage past the length of row 2
    lengths = torch.tensor([48, 48, 40], dtype=torch.int32)
    offsets = torch.zeros(3, dtype=torch.int32)
    cfg = tk.TopKConfig(block=32, num_warps=1, sample=8, cap_factor=1, direct=0, pairwise=0, resident=0)
    for k, convention in ((5, "v4-prefill"), (60, "v4.1-clamped"), (5, "v4.1")):
        expected = reference_topk(scores, lengths, k, convention, offsets)
        for config in (cfg, PATHS["resident"]):  # the resident path: the tie prefix sum keeps the first k - G
            assert K.topk(scores, lengths, k=k, convention=convention, config=config).tolist() == expected


@pytest.mark.parametrize("field", ["block", "sample", "direct", "split_block"])
def test_topk_config_refuses_tiles_not_powers_of_two(field: str) -> None:
    fields: dict[str, Any] = {field: 48}
    with pytest.raises(ValueError, match=f"^{field}: must be 0 or a power of two"):
        tk.TopKConfig(**fields)


@pytest.mark.parametrize(("field", "value", "rule"), [("resident", 32768, "in \\[0, 16384\\]"),
                                                      ("resident", -1, "in \\[0, 16384\\]"),
                                                      ("resident_keys", 24, "a power of two"),
                                                      ("resident_keys", 0, "a power of two")])  # fmt: skip
def test_topk_config_refuses_resident_rows_past_the_registers(field: str, value: int, rule: str) -> None:
    fields: dict[str, Any] = {field: value}
    with pytest.raises(ValueError, match=f"^{field}: must be {rule}"):
        tk.TopKConfig(**fields)


def test_topk_paths_by_shape() -> None:
    """The compiled routing: rows of at most 16384 lanes are resident, few long rows split, the rest one program."""
    cfg = tk.COMPILED
    assert tk.uses_resident(cfg, 4096, 16384) and tk.uses_resident(cfg, 1, 1)
    assert not tk.uses_resident(cfg, 4096, 16385) and not tk.uses_resident(cfg, 4096, 0)
    assert tk.uses_split(cfg, 128, 262144) and not tk.uses_resident(cfg, 128, 262144)
    assert not tk.uses_split(cfg, 4096, 65536) and not tk.uses_resident(cfg, 4096, 65536)


def test_topk_edge_shapes() -> None:
    """k = 0, an empty row width, all rows invalid: only fill lanes (or nothing)."""
    empty = torch.empty(2, 0)
    none = torch.zeros(2, dtype=torch.int32)
    assert K.topk(empty, none, k=3).tolist() == [[-1] * 3] * 2
    assert K.topk(empty, none, k=3, convention="v4.1-clamped").shape == (2, 0)
    assert K.topk(torch.randn(2, 5), none, k=0).shape == (2, 0)
    assert K.topk(torch.randn(2, 5), none, k=4, convention="select").tolist() == [[2**31 - 1] * 4] * 2


def test_topk_writes_every_lane() -> None:
    scores, lengths = score_rows(3, 4, 40)
    expected = naive.topk(scores, lengths, k=6)
    for path in ("pairwise", "sampled", "resident"):
        out = torch.full((4, 6), -7, dtype=torch.int32)
        K.topk(scores, lengths, k=6, out=out, config=PATHS[path])
        assert torch.equal(out, expected)


def test_topk_fused_slot_translation() -> None:
    """The epilogue's slots equal the standalone translation of the same rows and the reference's, in int64
    for block ids whose slots pass 2**31."""
    scores, lengths = score_rows(11, 3, 40, specials=False)
    per_block = 4
    big = 2**31 // per_block + 5
    table = torch.tensor([[big + i for i in range(10)], [3, 1, 4, 0, 9, 2, 6, 5, 8, 7], [20 + i for i in range(10)]])
    table = table.to(torch.int32) if int(table.max()) < 2**31 else table
    for path in ("pairwise", "sampled", "resident"):
        rows = K.topk(scores, lengths, k=6, config=PATHS[path])
        fused = K.topk(scores, lengths, k=6, block_table=table, rows_per_block=per_block, config=PATHS[path])
        alone = K.slot_translation(rows, table, torch.full((3,), 6, dtype=torch.int32), rows_per_block=per_block)
        expected = [
            list(ref_addr.rows_to_slots(r, t, per_block * 2, 2))
            for r, t in zip(rows.tolist(), table.tolist(), strict=True)
        ]
        assert fused.dtype == torch.int64 and fused.tolist() == alone.tolist() == expected
        assert int(fused.max()) > 2**31


def test_topk_within_candidate_blocks() -> None:
    """The restricted second level: lanes outside the kept blocks rank as -inf (and stay eligible)."""
    scores, lengths = score_rows(5, 3, 40, specials=False)
    kept = torch.tensor([[0, 3, -1], [1, 2, 4], [-1, -1, -1]], dtype=torch.int32)
    for path in ("pairwise", "sampled", "resident"):
        got = K.topk(scores, lengths, k=7, candidate_blocks=kept, block_size=8, config=PATHS[path])
        expected = [
            list(
                ref_cand.topk_within_blocks(visible(r, n), n, 7, [b for b in kb if b >= 0], 8, REF_CONVENTIONS["v4.1"])
            )
            for r, n, kb in zip(scores.tolist(), lengths.tolist(), kept.tolist(), strict=True)
        ]
        assert got.tolist() == expected
        assert naive.topk(scores, lengths, k=7, candidate_blocks=kept, block_size=8).tolist() == expected


# --- top-k: the split-row path ---------------------------------------------------------------------------------------


def split_pair(cap_factor: int, split_lanes: int = 16, block: int = 8) -> tuple[tk.TopKConfig, tk.TopKConfig]:
    """A one-program configuration of the sampled path and the same with the split-row path forced (splits of
    ``split_lanes`` lanes, in chunks of ``block`` lanes)."""
    one = tk.TopKConfig(block=block, num_warps=1, sample=8, oversample=2, cap_factor=cap_factor, direct=0,
                        pairwise=0, split_lanes=0, resident=0)  # fmt: skip
    split = dataclasses.replace(
        one, split_lanes=split_lanes, split_block=block, split_warps=1, split_min_width=1, split_max_rows=64
    )
    return one, split


def same_three_ways(
    scores: torch.Tensor, lengths: torch.Tensor, cap_factor: int, split_lanes: int = 16, block: int = 8, **kwargs: Any
) -> torch.Tensor:
    """The split-row path's result in each of its forms (three launches, two, one), each asserted equal bit for
    bit to the one-program path's and the torch twin's."""
    one, split = split_pair(cap_factor, split_lanes, block)
    rows, width = scores.shape
    assert tk.uses_split(split, rows, width) and not tk.uses_split(one, rows, width)
    got = K.topk(scores, lengths, config=split, **kwargs)
    assert got.dtype == (torch.int64 if "block_table" in kwargs else torch.int32)
    assert torch.equal(got, K.topk(scores, lengths, config=one, **kwargs))
    assert torch.equal(got, naive.topk(scores, lengths, **kwargs))
    for launches in (1, 2):
        fused = dataclasses.replace(split, split_launches=launches)
        assert torch.equal(got, K.topk(scores, lengths, config=fused, **kwargs)), launches
    return got


@pytest.mark.parametrize("convention", sorted(REF_CONVENTIONS))
def test_topk_split_rows_equal_reference(convention: str) -> None:
    """Split-row path, every convention: rows of 44 lanes in three splits (the last partial), lengths 0, full
    and random (mostly not split multiples), ties and -inf / +inf / NaN / -0.0, garbage past each length."""
    scores, lengths = score_rows(40 + sorted(REF_CONVENTIONS).index(convention), 4, 44)
    if convention == "v4-decode":
        lengths.fill_(scores.shape[1])
        scores = torch.where(scores.abs() > 1e30, 0.5, scores)
    offsets = torch.tensor([0, 5, 2**31 - 100, 17], dtype=torch.int32)
    got = same_three_ways(scores, lengths, 4, k=6, convention=convention, offsets=offsets)
    assert got.tolist() == reference_topk(scores, lengths, 6, convention, offsets)


def test_topk_split_rows_options() -> None:
    """Split-row path with the fill override, i64 offsets, the fused slot translation (slots past 2**31), the
    candidate-block keep map and the -inf / NaN drops; 12-lane splits (a full 8-lane chunk and a 4-lane tail)."""
    scores, lengths = score_rows(51, 3, 40)
    offsets = torch.tensor([3, 2**31 - 41, 0], dtype=torch.int64)
    big = 2**31 // 4 + 5
    table = torch.tensor([[big + i for i in range(10)], [3, 1, 4, 0, 9, 2, 6, 5, 8, 7], [20 + i for i in range(10)]])
    kept = torch.tensor([[0, 3, -1], [1, 2, 4], [-1, -1, -1]], dtype=torch.int32)
    same_three_ways(scores, lengths, 4, 12, k=7, fill=-9, offsets=offsets)
    slots = same_three_ways(scores, lengths, 4, 12, k=7, convention="v4-prefill", block_table=table, rows_per_block=4)
    assert int(slots.max()) > 2**31
    same_three_ways(scores, lengths, 4, 12, k=7, candidate_blocks=kept, block_size=8)
    same_three_ways(scores, lengths, 4, 12, k=7, convention="select", drop_neg_inf=True, drop_nan=True)


def test_topk_split_rows_every_branch() -> None:
    """Each way the split counts decide the row: the buffer (ties at the threshold spanning splits), the
    threshold itself (more ties than the buffer holds), and the whole-row select (a sample that misleads, and no
    buffer at all); lengths 0, <= k, past k by one, and not multiples of the split."""
    width = 48
    g = torch.Generator().manual_seed(61)
    ties = (torch.arange(width) % 3).float().repeat(5, 1)  # every third lane ties at each value
    ties[1] = torch.randint(0, 4, (width,), generator=g).float()
    misled = torch.full((width,), 0.25)
    misled[0::6] = torch.arange(8).float() + 10.0  # the sampled lanes (stride 6) hold the row's best keys
    misled[[1, 13, 29, 47]] = 5.0
    ties[2] = misled
    ties[3] = torch.where(torch.arange(width) < 31, float("-inf"), 1.0)  # -inf ties across splits
    lengths = torch.tensor([width, 37, width, 43, 0], dtype=torch.int32)
    offsets = torch.zeros(5, dtype=torch.int32)
    for cap_factor in (4, 1, 0):
        for k, short, convention in ((9, 9, "v4.1"), (9, 10, "select-unsorted"), (16, 0, "v4-prefill")):
            lengths[4] = short
            got = same_three_ways(ties, lengths, cap_factor, 16, 16, k=k, convention=convention)
            assert got.tolist() == reference_topk(ties, lengths, k, convention, offsets)


@pytest.mark.parametrize("cap_factor", [4, 0])
def test_split_forms_leave_the_same_threshold_counts_and_buffer(cap_factor: int) -> None:
    """What ``row._topk_kernel`` reads after the split-row kernels (``split.py``): the threshold and both counts
    of every row on the sampled path, and the buffer of every row whose survivors it selects from (at least k,
    at most CAP), equal in the one-, two- and three-launch forms; rows of different scales (so that rows'
    thresholds differ) and lengths."""
    from fast.indexing.topk import buffer_sizes
    from fast.indexing.topk.config import Operands, split_lanes_for
    from fast.indexing.topk.split import launch_split

    scores, lengths = score_rows(83 + cap_factor, 6, 44, specials=False)
    scores = scores * torch.arange(1, 7).float()[:, None] + torch.arange(6).float()[:, None]
    scores, lengths = scores.to(DEVICE), lengths.to(DEVICE)
    k = 5
    _, three = split_pair(cap_factor, 12, 4)
    _, cap = buffer_sizes(three, k, scores.shape[1])
    left = {}
    for launches in (3, 2, 1):
        cfg = dataclasses.replace(three, split_launches=launches)
        out = torch.empty(6, k, dtype=torch.int32, device=DEVICE)
        ops = Operands(scores, lengths, out, k, -1)
        buffers = (torch.full((6, cap), -7, dtype=torch.int32, device=DEVICE),
                   torch.full((6, cap), -7, dtype=torch.int32, device=DEVICE))  # fmt: skip
        splits, _, thresh, counts = launch_split(ops, cfg, split_lanes_for(cfg, 6, 44), buffers)
        left[launches] = (splits, thresh, counts[:, :, :splits], *buffers)
    splits, thresh, counts, keys, lanes = left[3]
    sampled = (lengths > k) & (lengths > three.direct)
    assert bool(sampled.sum() >= 3) and len(set(thresh[sampled].tolist())) >= 3  # rows' thresholds differ
    for launches in (2, 1):
        other = left[launches]
        assert other[0] == splits
        assert torch.equal(other[1][sampled], thresh[sampled]), launches
        assert torch.equal(other[2][sampled], counts[sampled]), launches
        for r in sampled.nonzero().flatten().tolist():
            kept = int(counts[r, 0].sum())
            if k <= kept <= cap:
                assert torch.equal(other[3][r, :kept], keys[r, :kept]), (launches, r)
                assert torch.equal(other[4][r, :kept], lanes[r, :kept]), (launches, r)


def test_topk_registered_default_takes_split_rows() -> None:
    """The interpreted default configuration sends rows of 24 to 64 lanes (at most 8 rows) down the split-row
    path, so the property suite's registered top-k exercises it; longer or more rows do not."""
    cfg = tk.INTERPRETED
    assert tk.uses_split(cfg, 4, 32) and tk.uses_split(cfg, 8, 24) and cfg.split_lanes < 24
    assert not tk.uses_split(cfg, 9, 32) and not tk.uses_split(cfg, 4, 23)
    assert not tk.uses_split(tk.COMPILED, 4096, 16384) and tk.uses_split(tk.COMPILED, 128, 262144)
    # compiled: 8192-lane splits, halved while the grid has fewer than 264 programs (two waves on 132 SMs)
    assert tk.split_lanes_for(tk.COMPILED, 128, 262144) == 8192  # 128 * 32 = 4096 programs
    assert tk.split_lanes_for(tk.COMPILED, 6, 262144) == 4096  # 6 * 64 = 384 programs
    assert tk.split_lanes_for(tk.COMPILED, 64, 65536) == 8192  # 64 * 8 = 512 programs
    assert tk.split_lanes_for(tk.COMPILED, 1, 32768) == tk.COMPILED.split_block  # never below a chunk
    scores, lengths = score_rows(71, 4, 30)
    offsets = torch.tensor([1, 2, 3, 4], dtype=torch.int32)
    scores, lengths, offsets = scores.to(DEVICE), lengths.to(DEVICE), offsets.to(DEVICE)
    got = tk.topk(scores, lengths, k=8, convention="v4.1", offsets=offsets, config=cfg)
    assert got.tolist() == reference_topk(scores, lengths, 8, "v4.1", offsets)


# --- candidate blocks, restoration, addresses, windows ---------------------------------------------------------------


@pytest.mark.parametrize(("pin", "drop"), [(True, True), (False, True), (True, False), (False, False)])
def test_candidate_select_equals_reference(pin: bool, drop: bool) -> None:
    scores, lengths = score_rows(21 + 2 * pin + drop, 4, 40)
    scores[1, 8:12] = float("nan")
    rule = ref_cand.CandidateRule(pin, ref_cand.NanPolicy.DROP if drop else ref_cand.NanPolicy.PROPAGATE)
    for size, slots in ((4, 3), (3, 20)):
        expected = []
        for row, n in zip(scores.tolist(), lengths.tolist(), strict=True):
            kept = list(ref_cand.kept_blocks(visible(row, n), n, slots, size, rule))
            expected.append(kept + [-1] * (slots - len(kept)))
        got = K.candidate_select(scores, lengths, block_size=size, topk_blocks=slots, pin_newest=pin, drop_nan=drop)
        twin = naive.candidate_select(
            scores, lengths, block_size=size, topk_blocks=slots, pin_newest=pin, drop_nan=drop
        )
        assert got.tolist() == expected
        assert twin.tolist() == expected


def test_candidate_blocks_in_two_launches() -> None:
    """The compiled composition (block scores, then the top-k kernel with -inf / NaN blocks dropped) equals the
    reference; the interpreter's one-launch path is checked above."""
    scores, lengths = score_rows(31, 4, 40)
    scores[2, 4:8] = float("nan")
    rule = ref_cand.CandidateRule(True, ref_cand.NanPolicy.DROP)
    best = K.block_scores(scores, lengths, block_size=3)
    twin = naive.block_scores(scores, lengths, block_size=3)
    assert torch.equal(best.isnan(), twin.isnan()) and torch.equal(best.nan_to_num(), twin.nan_to_num())
    counts = (lengths + 2) // 3
    got = K.topk(best, counts, k=5, drop_neg_inf=True, drop_nan=True, config=PATHS["sampled"])
    expected = []
    for row, n in zip(scores.tolist(), lengths.tolist(), strict=True):
        kept = list(ref_cand.kept_blocks(visible(row, n), n, 5, 3, rule))
        expected.append(kept + [-1] * (5 - len(kept)))
    assert got.tolist() == expected


def test_candidate_restore_equals_reference() -> None:
    blocks = torch.tensor([[4, -1, 0], [7, 2, 5]], dtype=torch.int32)
    offsets = torch.tensor([[0, 3, 4, 8, 11, -1], [0, 5, 9, 11, -1, 6]], dtype=torch.int32)
    seen = torch.tensor([17, 21], dtype=torch.int32)
    for vis in (None, seen):
        got = K.candidate_restore(offsets, blocks, block_size=4, visible=vis)
        expected = [
            list(ref_cand.restore_offsets(o, b, 4, None if vis is None else int(s)))
            for o, b, s in zip(offsets.tolist(), blocks.tolist(), seen.tolist(), strict=True)
        ]
        assert got.tolist() == expected
        assert naive.candidate_restore(offsets, blocks, block_size=4, visible=vis).tolist() == expected


@pytest.mark.parametrize("guard", ["sentinel", "count"])
def test_slot_translation_equals_reference(guard: str) -> None:
    per_block, block_size, ratio = 4, 8, 2
    table = torch.tensor([[2**31 // per_block - 1, 7, 2**31 // per_block + 3], [5, 0, 9]], dtype=torch.int64)
    rows = torch.tensor([[0, 5, 11, -1, 3, 99], [2, 6, -1, 9, 1, -5]], dtype=torch.int32)
    lengths = (
        torch.tensor([6, 2], dtype=torch.int32) if guard == "sentinel" else torch.tensor([3, 2], dtype=torch.int32)
    )
    if guard == "sentinel":
        rows[0, 5] = -1  # below lengths, the sentinel guard translates every lane that is not -1
    got = K.slot_translation(rows, table, lengths, rows_per_block=per_block, guard=guard)
    expected = []
    for r, t, n in zip(rows.tolist(), table.tolist(), lengths.tolist(), strict=True):
        if guard == "count":
            expected.append(list(ref_addr.rows_to_slots(r, t, block_size, ratio, valid_lanes=n)))
        else:
            expected.append(list(ref_addr.rows_to_slots(r[:n] + [-1] * (len(r) - n), t, block_size, ratio)))
    assert got.dtype == torch.int64 and got.tolist() == expected
    assert naive.slot_translation(rows, table, lengths, rows_per_block=per_block, guard=guard).tolist() == expected
    assert max(max(e) for e in expected) > 2**31


def test_gathered_rows_equals_reference() -> None:
    rows = torch.tensor([[0, -1, 7], [3, 4, -1]], dtype=torch.int32)
    offsets = torch.tensor([10, 2**33], dtype=torch.int64)
    expected = [list(ref_addr.gathered_rows(r, o)) for r, o in zip(rows.tolist(), offsets.tolist(), strict=True)]
    assert K.gathered_rows(rows, offsets).tolist() == expected == naive.gathered_rows(rows, offsets).tolist()


def test_window_indices_equal_reference() -> None:
    for w, n in ((4, 7), (6, 3), (1, 2), (5, 0)):
        expected = [list(r) for r in ref_window.prefill_window(w, n)]
        for order in ("v4", "v4.1"):
            assert K.window_indices(window=w, seqlen=n, start_pos=0, order=order).tolist() == expected
    positions = torch.tensor([1, 2, 3, 9, 40], dtype=torch.int32)
    for order, ref_order in (("v4", ref_window.WindowOrder.V4), ("v4.1", ref_window.WindowOrder.V41)):
        expected = [list(ref_window.decode_window(4, p, ref_order)) for p in positions.tolist()]
        assert K.decode_window_indices(positions, window=4, order=order).tolist() == expected
        assert naive.decode_window_indices(positions, window=4, order=order).tolist() == expected
        one = K.window_indices(window=4, seqlen=1, start_pos=2, order=order)
        assert one.tolist() == [list(ref_window.decode_window(4, 2, ref_order))]


def test_compressed_indices_equal_reference() -> None:
    """Prefill from 0, one-token decode and verify steps of up to 16, at ratios 128, 1, 2 and 3."""
    cases = [(128, n, 0) for n in (0, 1, 127, 128, 129, 257)] + [(128, 1, p) for p in (1, 126, 127, 128, 1000)]
    cases += [(128, q, p) for q in (2, 5, 16) for p in (112, 126, 127, 250)]
    cases += [(r, q, p) for r in (1, 2, 3) for q in (1, 4, 16) for p in (0, 1, 2, 5)]
    for ratio, seqlen, start in cases:
        for offset in (0, 128, 2**31 - 1 - (start + seqlen) // ratio):
            expected = [list(row) for row in ref_compressed.compressed_indices(ratio, seqlen, start, offset)]
            shape = [seqlen, (start + seqlen) // ratio]
            for fn in (K.compressed_indices, naive.compressed_indices):
                got = fn(ratio=ratio, seqlen=seqlen, start_pos=start, offset=offset)
                assert got.dtype == torch.int32 and list(got.shape) == shape
                assert got.tolist() == expected, (fn, ratio, seqlen, start, offset)


def test_select_fill_bounds_match_the_reference() -> None:
    """A fill equal to the largest offset + row width is the smallest the kernels take; one less, or 0 with any
    row lane possible, is refused (as reference.topk.topk refuses it)."""
    s = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    lens = torch.tensor([3, 2], dtype=torch.int32)
    offsets = torch.tensor([0, 5], dtype=torch.int32)
    for fn in (K.topk, naive.topk):
        assert fn(s, lens, k=4, convention="select", fill=3).tolist() == [[0, 1, 2, 3], [0, 1, 3, 3]]
        assert fn(s, lens, k=4, convention="select", offsets=offsets, fill=8).tolist() == [[0, 1, 2, 8], [5, 6, 8, 8]]
        assert fn(s[:, :0], lens * 0, k=2, convention="select", fill=0).tolist() == [[0, 0], [0, 0]]
        for fill, shift in ((2, None), (0, None), (7, offsets), (5, offsets)):
            with pytest.raises(ValueError, match=r"^fill: must be negative or >= "):
                fn(s, lens, k=4, convention="select", fill=fill, offsets=shift)


def test_candidate_remap_equals_reference() -> None:
    """Blocks in rank order with padding between them, one wholly past the length, a partial newest block, and
    more blocks than one chunk of the Triton kernel holds."""
    blocks = torch.tensor([[3, -1, 0, 9], [5, 1, -1, -1], [-1, -1, -1, -1]], dtype=torch.int32)
    columns = torch.tensor([[0, 8, 9, -1, 5], [-1, 6, 0, 3, 4], [-1, -1, -1, -1, -1]], dtype=torch.int32)
    lengths = torch.tensor([38, 23, 4], dtype=torch.int32)
    many = torch.tensor([list(range(39, -1, -1))], dtype=torch.int32)
    wide = torch.tensor([[0, 79, 80, 158, -1]], dtype=torch.int32)
    for b, c, n in ((blocks, columns, lengths), (many, wide, torch.tensor([159], dtype=torch.int32))):
        rows = [
            ref_cand.remap_columns(cols, ids, length, 4)
            for cols, ids, length in zip(c.tolist(), b.tolist(), n.tolist(), strict=True)
        ]
        for fn in (K.candidate_remap, naive.candidate_remap):
            positions, counts = fn(c, b, n, block_size=4)
            assert positions.tolist() == [list(p) for p, _ in rows]
            assert counts.tolist() == [count for _, count in rows]


def test_candidate_remap_refuses_bad_blocks_lengths_and_columns() -> None:
    columns, lengths = torch.tensor([[0, 1]], dtype=torch.int32), torch.tensor([8], dtype=torch.int32)
    cases = [
        ("candidate_blocks", torch.tensor([[1, -2]]), columns, lengths, "must hold block ids >= 0 or -1 (padding)"),
        ("candidate_blocks", torch.tensor([[1, -1, 1]]), columns, lengths, "must not name a block twice in a row"),
        ("lengths", torch.tensor([[1]]), columns, torch.tensor([-1]), "must be >= 0, got -1"),
        ("columns", torch.tensor([[1]]), torch.tensor([[0, -2]]), lengths, "must be -1 or a column >= 0, got -2"),
    ]
    for argument, blocks, cols, n, message in cases:
        for fn in (K.candidate_remap, naive.candidate_remap):
            with pytest.raises(ValueError, match=f"^{re.escape(argument + ': ' + message)}$"):
                fn(cols.to(torch.int32), blocks.to(torch.int32), n.to(torch.int32), block_size=2)


def test_candidate_restore_refuses_padding_other_than_minus_one() -> None:
    offsets = torch.tensor([[0, 3]], dtype=torch.int32)
    for blocks, expected in (([[2, -1]], [[4, -1]]), ([[-1, 2]], [[-1, 5]])):
        for fn in (K.candidate_restore, naive.candidate_restore):
            assert fn(offsets, torch.tensor(blocks, dtype=torch.int32), block_size=2).tolist() == expected
    for bad in (-2, -(2**31)):
        for fn in (K.candidate_restore, naive.candidate_restore):
            with pytest.raises(ValueError, match=r"^candidate_blocks: must hold block ids >= 0 or -1 \(padding\)$"):
                fn(offsets, torch.tensor([[2, bad]], dtype=torch.int32), block_size=2)


# --- index logits ---------------------------------------------------------------------------------------------


def grid(g: torch.Generator, *shape: int) -> torch.Tensor:
    """n / 16 for |n| <= 63: exact in bfloat16; a head's dot product over <= 16 dims needs <= 16 significant
    bits, so with the weights' grid (:func:`weight_grid`) and a few heads every logit is exact in float32."""
    return torch.randint(-63, 64, shape, generator=g).float() / 16


def weight_grid(g: torch.Generator, *shape: int) -> torch.Tensor:
    """n / 4 for |n| <= 8."""
    return torch.randint(-8, 9, shape, generator=g).float() / 4


def exact_logits(
    q: torch.Tensor, w: torch.Tensor, keys: list[list[Fraction]], lengths: list[int], width: int
) -> list[list[float]]:
    """The exact reference (on ``keys[:n]`` only) rounded to float32, -inf from each length up to ``width``."""
    out = []
    for heads, weights, n in zip(q.tolist(), w.tolist(), lengths, strict=True):
        qf = [[Fraction(x) for x in h] for h in heads]
        values = ref_index.index_scores(qf, [Fraction(x) for x in weights], keys[:n])
        out.append([float(round_to(FP32, s)) for s in values] + [float("-inf")] * (width - n))
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_index_logits_exact(dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(1 if dtype == torch.float32 else 2)
    m, n, h, d = 5, 37, 3, 8
    q, w, k = grid(g, m, h, d).to(dtype), weight_grid(g, m, h), grid(g, n, d).to(dtype)
    lengths = torch.tensor([30, 0, 12, 30, 1], dtype=torch.int32)
    k[30:] = float("nan")  # no query sees these rows
    keys = [[Fraction(x) for x in row] for row in k[:30].float().tolist()]
    expected = exact_logits(q.float(), w, keys, lengths.tolist(), n)
    out = torch.full((m, n), float("nan"))
    got = K.index_logits(q, w, k, lengths, out=out)
    assert got.tolist() == expected
    assert naive.index_logits(q, w, k, lengths).tolist() == expected


def test_index_logits_never_reads_past_lengths() -> None:
    """NaN key rows past the longest length change nothing."""
    g = torch.Generator().manual_seed(3)
    q, w, k = grid(g, 3, 2, 16).bfloat16(), weight_grid(g, 3, 2), grid(g, 20, 16).bfloat16()
    lengths = torch.tensor([9, 4, 11], dtype=torch.int32)
    before = K.index_logits(q, w, k, lengths)
    k[11:] = float("nan")
    assert torch.equal(K.index_logits(q, w, k, lengths), before)
    assert torch.isinf(before[1, 4:]).all() and not before[:, :4].isnan().any()


def fp8_keys(g: torch.Generator, rows: int, dim: int) -> tuple[torch.Tensor, torch.Tensor, list[list[Fraction]]]:
    """e4m3 codes with exponent fields 6..8 (magnitudes in [2**-1, 2**2), so float32 sums stay exact), power-of-two
    scales, and the exact key rows they stand for."""
    sign = torch.randint(0, 2, (rows, dim), generator=g) << 7
    codes = (
        sign | (torch.randint(6, 9, (rows, dim), generator=g) << 3) | torch.randint(0, 8, (rows, dim), generator=g)
    ).to(torch.uint8)
    scales = 2.0 ** torch.randint(-3, 3, (rows,), generator=g).float()
    keys = [[e4m3_decode(c) * Fraction(s) for c in row] for row, s in zip(codes.tolist(), scales.tolist(), strict=True)]
    return codes, scales, keys


def test_index_logits_fp8_keys_exact() -> None:
    g = torch.Generator().manual_seed(4)
    m, n, h, d = 4, 21, 2, 8
    q, w = grid(g, m, h, d).bfloat16(), weight_grid(g, m, h)
    codes, scales, keys = fp8_keys(g, n, d)
    lengths = torch.tensor([21, 5, 0, 13], dtype=torch.int32)
    expected = exact_logits(q.float(), w, keys, lengths.tolist(), n)
    assert K.index_logits(q, w, codes, lengths, k_scale=scales).tolist() == expected
    assert K.index_logits(q, w, codes.view(torch.float8_e4m3fn), lengths, k_scale=scales).tolist() == expected
    assert naive.index_logits(q, w, codes, lengths, k_scale=scales).tolist() == expected


def fp8_queries(g: torch.Generator, *shape: int) -> tuple[torch.Tensor, torch.Tensor, list[list[Fraction]]]:
    """e4m3 query codes with magnitudes in [1, 4), scales 1 or 2 per (query, head), and the exact query heads (one
    list per (query, head), in order). With
    the keys of :func:`fp8_keys` (scales up to 2**2) and 8 dims, every dot and head sum stays exact in float32."""
    *lead, dim = shape
    sign = torch.randint(0, 2, shape, generator=g) << 7
    codes = (sign | (torch.randint(7, 9, shape, generator=g) << 3) | torch.randint(0, 8, shape, generator=g)).to(
        torch.uint8
    )
    scales = 2.0 ** torch.randint(0, 2, tuple(lead), generator=g).float()
    flat = codes.reshape(-1, dim).tolist()
    values = [
        [e4m3_decode(c) * Fraction(s) for c in row] for row, s in zip(flat, scales.flatten().tolist(), strict=True)
    ]
    return codes, scales, values


def exact_fp8_logits(
    queries: list[list[list[Fraction]]], w: torch.Tensor, keys: list[list[Fraction]], lengths: list[int], width: int
) -> list[list[float]]:
    """The exact reference on exact queries (``queries[m][h]``), rounded to float32, -inf past each length."""
    out = []
    for heads, weights, n in zip(queries, w.tolist(), lengths, strict=True):
        values = ref_index.index_scores(heads, [Fraction(x) for x in weights], keys[:n])
        out.append([float(round_to(FP32, s)) for s in values] + [float("-inf")] * (width - n))
    return out


def fp8_query_case(seed: int, m: int, n: int, h: int, d: int):  # type: ignore[no-untyped-def]
    """FP8 queries (codes, scales, the exact heads of each query), weights and FP8 keys (codes, scales, exact
    rows) of :func:`fp8_queries` and :func:`fp8_keys`."""
    g = torch.Generator().manual_seed(seed)
    codes, scales, values = fp8_queries(g, m, h, d)
    queries = [values[i * h : (i + 1) * h] for i in range(m)]
    w = weight_grid(g, m, h)
    kcodes, kscales, keys = fp8_keys(g, n, d)
    return codes, scales, queries, w, kcodes, kscales, keys


def test_index_logits_fp8_queries_exact() -> None:
    """FP8 queries against FP8 keys: the e4m3 dot path, on values whose logits are exact in float32."""
    n = 19
    codes, scales, queries, w, kcodes, kscales, keys = fp8_query_case(11, 5, n, 2, 8)
    lengths = torch.tensor([19, 3, 0, 12, 7], dtype=torch.int32)
    expected = exact_fp8_logits(queries, w, keys, lengths.tolist(), n)
    got = K.index_logits(codes, w, kcodes, lengths, k_scale=kscales, q_scale=scales)
    assert got.tolist() == expected
    as_fp8 = codes.view(torch.float8_e4m3fn)
    assert K.index_logits(as_fp8, w, kcodes, lengths, k_scale=kscales, q_scale=scales).tolist() == expected
    in_loop = dataclasses.replace(logits.default_config(fp8=True, q8=True), hoist=False)  # loop-invariant code kept
    again = K.index_logits(codes, w, kcodes, lengths, k_scale=kscales, q_scale=scales, config=in_loop)
    assert again.tolist() == expected
    assert naive.index_logits(codes, w, kcodes, lengths, k_scale=kscales, q_scale=scales).tolist() == expected


def test_index_logits_fp8_key_scales_of_both_signs() -> None:
    """Key scales may be negative: a program whose rows hold one scales each dot before the relu, a program of
    non-negative scales multiplies the head sums (``LogitsConfig.fold``); both equal the exact logits, as does
    ``fold=False``."""
    n = 40
    codes, scales, queries, w, kcodes, kscales, keys = fp8_query_case(13, 3, n, 2, 8)
    flip = torch.arange(n) % 3 == 1
    flip[logits.default_config().split :] = False  # the first program's rows mix signs, the second's hold none
    kscales = torch.where(flip, -kscales, kscales)
    keys = [[-x for x in row] if f else row for row, f in zip(keys, flip.tolist(), strict=True)]
    lengths = torch.tensor([40, 17, 9], dtype=torch.int32)
    expected = exact_fp8_logits(queries, w, keys, lengths.tolist(), n)
    for fold in (True, False):
        cfg = dataclasses.replace(logits.default_config(fp8=True, q8=True), fold=fold)
        got = K.index_logits(codes, w, kcodes, lengths, k_scale=kscales, q_scale=scales, config=cfg)
        assert got.tolist() == expected, fold
    bf16_q = torch.tensor([[[float(x) for x in head] for head in query] for query in queries]).bfloat16()
    assert K.index_logits(bf16_q, w, kcodes, lengths, k_scale=kscales).tolist() == expected


def test_paged_logits_fp8_queries_exact() -> None:
    """FP8 queries through block tables into the FP8 cache layout."""
    _, w, cache, table, lengths, per_request, per_block = paged_case(True, 6)
    b, t, h = w.shape
    g = torch.Generator().manual_seed(12)
    codes, scales, values = fp8_queries(g, b, t, h, 16)
    width = table.shape[1] * per_block
    got = K.paged_index_logits(codes, w, cache, table, lengths, rows_per_block=per_block, q_scale=scales)
    in_loop = dataclasses.replace(logits.default_config(fp8=True, q8=True, paged=True), hoist=False)
    again = K.paged_index_logits(codes, w, cache, table, lengths, rows_per_block=per_block, q_scale=scales,
                                 config=in_loop)  # fmt: skip
    twin = naive.paged_index_logits(codes, w, cache, table, lengths, rows_per_block=per_block, q_scale=scales)
    expected = []
    for r in range(b):
        for s in range(t):
            heads = values[(r * t + s) * h : (r * t + s + 1) * h]
            expected += exact_fp8_logits([heads], w[r, s : s + 1], per_request[r], [int(lengths[r, s])], width)
    assert got.tolist() == expected
    assert again.tolist() == expected
    assert twin.tolist() == expected


def paged_case(fp8: bool, seed: int):  # type: ignore[no-untyped-def]
    """Two requests x next_n = 2 over a shuffled cache of 4-row blocks; -1 table padding past each request."""
    g = torch.Generator().manual_seed(seed)
    b, t, h, d, per_block, num_blocks = 2, 2, 2, 16, 4, 9
    q, w = grid(g, b, t, h, d).bfloat16(), weight_grid(g, b, t, h)
    lengths = torch.tensor([[13, 14], [0, 5]], dtype=torch.int32)
    table = torch.tensor([[6, 2, 8, 0, -1], [3, 5, -1, -1, -1]], dtype=torch.int32)
    if fp8:
        codes, scales, keys = fp8_keys(g, num_blocks * per_block, d)
        cache = torch.cat(
            [codes.view(num_blocks, per_block * d), scales.view(torch.uint8).view(num_blocks, per_block * 4)], 1
        ).contiguous()
    else:
        values = grid(g, num_blocks * per_block, d).bfloat16()
        cache = values.view(num_blocks, per_block, d)
        keys = [[Fraction(x) for x in row] for row in values.float().tolist()]
    per_request = []
    for r in range(b):
        ids = [x for x in table[r].tolist() if x >= 0]
        per_request.append([keys[blk * per_block + i] for blk in ids for i in range(per_block)])
    return q, w, cache, table, lengths, per_request, per_block


@pytest.mark.parametrize("fp8", [False, True])
def test_paged_logits_exact(fp8: bool) -> None:
    q, w, cache, table, lengths, per_request, per_block = paged_case(fp8, 5 + fp8)
    width = table.shape[1] * per_block
    got = K.paged_index_logits(q, w, cache, table, lengths, rows_per_block=per_block)
    twin = naive.paged_index_logits(q, w, cache, table, lengths, rows_per_block=per_block)
    expected = []
    for r in range(q.shape[0]):
        for t in range(q.shape[1]):
            expected += exact_logits(
                q[r, t : t + 1].float(), w[r, t : t + 1], per_request[r], [int(lengths[r, t])], width
            )
    assert got.tolist() == expected
    assert twin.tolist() == expected
    for relu_max in (True, False):  # relu as a NaN-keeping max, or as a compare and a select
        cfg = dataclasses.replace(logits.default_config(fp8=fp8, paged=True), relu_max=relu_max)
        again = K.paged_index_logits(q, w, cache, table, lengths, rows_per_block=per_block, config=cfg)
        assert again.tolist() == expected, relu_max


@pytest.mark.parametrize(
    ("field", "value", "rule"),
    [("columns", 96, "power of two"), ("block_k", 0, "power of two"), ("num_warps", 3, "power of two"),
     ("num_stages", 0, ">= 1"), ("split", -1, ">= 0"), ("prefetch", -2, ">= 0"), ("prefetch", 0.5, ">= 0")],
)  # fmt: skip
def test_logits_config_refuses_a_bad_field(field: str, value: object, rule: str) -> None:
    """A logits launch configuration is checked when it is made: the error names the field and its rule."""
    with pytest.raises(ValueError, match=rf"^{field}: must be .*{re.escape(rule)}.*got {re.escape(repr(value))}$"):
        logits.LogitsConfig(**cast(dict[str, Any], {field: value}))


def test_paged_logits_prefetch_changes_no_result() -> None:
    """``LogitsConfig.prefetch`` is a hint: any distance gives the same logits as none. Compiled, the kernel
    issues the prefetches (an address outside the cache would fault); under the interpreter, which has no inline
    assembly, the launcher must turn them off."""
    q, w, cache, table, lengths, _, per_block = paged_case(False, 10)
    plain = K.paged_index_logits(q, w, cache, table, lengths, rows_per_block=per_block)
    for ahead in (1, 3):
        cfg = dataclasses.replace(logits.default_config(paged=True), prefetch=ahead)
        got = K.paged_index_logits(q, w, cache, table, lengths, rows_per_block=per_block, config=cfg)
        assert torch.equal(got.nan_to_num(), plain.nan_to_num()), ahead


def test_paged_logits_relu_keeps_nan() -> None:
    """A NaN key row gives NaN logits where a query sees it, in both relu forms (``LogitsConfig.relu_max``), as
    torch's relu does; the other lanes are unchanged."""
    q, w, cache, table, lengths, _, per_block = paged_case(False, 9)
    clean = K.paged_index_logits(q, w, cache, table, lengths, rows_per_block=per_block)
    cache[int(table[0, 0]), 1] = float("nan")  # request 0's logical row 1, seen by both its queries
    twin = naive.paged_index_logits(q, w, cache, table, lengths, rows_per_block=per_block)
    assert twin[:2, 1].isnan().all()
    for relu_max in (True, False):
        cfg = dataclasses.replace(logits.default_config(paged=True), relu_max=relu_max)
        got = K.paged_index_logits(q, w, cache, table, lengths, rows_per_block=per_block, config=cfg)
        assert got[:2, 1].isnan().all(), relu_max
        got[:2, 1] = clean[:2, 1]
        assert got.tolist() == clean.tolist(), relu_max


def test_paged_logits_block_outside_cache() -> None:
    """Checked: ValueError naming block_table. Unchecked: the block is never dereferenced, its rows are NaN."""
    q, w, cache, table, lengths, _, per_block = paged_case(False, 7)
    table[0, 1] = 1000
    with pytest.raises(ValueError, match=r"^block_table"):
        K.paged_index_logits(q, w, cache, table, lengths, rows_per_block=per_block)
    got = K.paged_index_logits(q, w, cache, table, lengths, rows_per_block=per_block, validate=False)
    assert got[0, 4:8].isnan().all() and got[1, 4:8].isnan().all() and not got[0, :4].isnan().any()


def test_paged_logits_empty_cache_and_zero_lengths() -> None:
    """Every query sees no row: a cache of no blocks and a table of no entries (or of -1 padding) are accepted,
    and every lane is -inf."""
    q, w = torch.ones(2, 3, 1, 4, dtype=torch.bfloat16), torch.ones(2, 3, 1)
    lengths = torch.zeros(2, 3, dtype=torch.int32)
    for entries in (0, 2):
        table = torch.full((2, entries), -1, dtype=torch.int32)
        for fn in (K.paged_index_logits, naive.paged_index_logits):
            got = fn(q, w, torch.zeros(0, 4, 4, dtype=torch.bfloat16), table, lengths, rows_per_block=4)
            assert got.shape == (6, 4 * entries) and bool((got == float("-inf")).all())


# --- bad input ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["triton", "torch"])
def test_padding_rows_read_as_length_zero(backend: str) -> None:
    """A length of -1 (a CUDA-graph padding row, reference.padding): nothing of the row is read and every lane is
    empty: top-k fill lanes, no kept block (pinned or not), -1 slots, -inf logits; the other rows as without it.
    A batch of zero lengths answers the same way."""
    mod: Any = K if backend == "triton" else naive
    scores = torch.tensor([[float("nan"), float("inf"), 5.0, 1e30] * 2, [1.0, 3.0, 2.0, 0.5] * 2])
    lens = torch.tensor([-1, 5], dtype=torch.int32)
    for convention in ("v4.1", "v4.1-clamped", "v4-prefill", "select", "select-unsorted"):
        got = mod.topk(scores, lens, k=3, convention=convention).tolist()
        fill = 2**31 - 1 if convention.startswith("select") else -1
        assert got[0] == [fill] * 3, convention
        assert got[1] == mod.topk(scores[1:], lens[1:], k=3, convention=convention).tolist()[0], convention
        zero = mod.topk(scores, torch.zeros(2, dtype=torch.int32), k=3, convention=convention).tolist()
        assert zero == [[fill] * 3] * 2, convention
    for pin in (True, False):
        kept = mod.candidate_select(scores, lens, block_size=3, topk_blocks=3, pin_newest=pin).tolist()
        assert kept[0] == [-1, -1, -1], pin
    rows = torch.tensor([[0, 1, 2], [3, 1, 0]], dtype=torch.int32)
    table = torch.tensor([[4, 5], [6, 7]], dtype=torch.int32)
    for guard in ("sentinel", "count"):
        slots = mod.slot_translation(rows, table, lens.clamp(max=3), rows_per_block=2, guard=guard).tolist()
        assert slots[0] == [-1, -1, -1], guard
    q, w = torch.ones(2, 1, 4), torch.ones(2, 1)
    keys = torch.ones(8, 4)
    out = mod.index_logits(q, w, keys, lens).tolist()
    assert out[0] == [float("-inf")] * 8 and out[1][:5] == [4.0] * 5
    padding_only = torch.full((2,), -1, dtype=torch.int32)
    assert mod.index_logits(q, w, keys, padding_only).tolist() == [[float("-inf")] * 8] * 2
    paged = mod.paged_index_logits(
        q[None], w[None], keys.reshape(4, 2, 4), torch.tensor([[1, 0]], dtype=torch.int32),
        padding_only[None], rows_per_block=2,
    )  # fmt: skip
    assert paged.tolist() == [[float("-inf")] * 4] * 2


def _bad_calls():  # type: ignore[no-untyped-def]
    s = torch.zeros(2, 8)
    lens = torch.tensor([3, 8], dtype=torch.int32)
    q, w, k = torch.zeros(2, 2, 16, dtype=torch.bfloat16), torch.zeros(2, 2), torch.zeros(8, 16, dtype=torch.bfloat16)
    rows = torch.zeros(2, 3, dtype=torch.int32)
    table = torch.zeros(2, 2, dtype=torch.int32)
    q8, k8, ks = torch.zeros(2, 2, 16, dtype=torch.uint8), torch.zeros(8, 16, dtype=torch.uint8), torch.ones(8)
    return [
        ("lengths", ValueError, lambda: K.topk(s, torch.tensor([-2, 2], dtype=torch.int32), k=2)),
        (
            "lengths",
            ValueError,
            lambda: K.topk(s, torch.tensor([-1, 8], dtype=torch.int32), k=2, convention="v4-decode"),
        ),
        ("lengths", ValueError, lambda: K.candidate_select(s, torch.tensor([-2, 2]), block_size=2, topk_blocks=2)),
        ("lengths", ValueError, lambda: K.topk(s, torch.tensor([9, 2], dtype=torch.int32), k=2)),
        ("k", ValueError, lambda: K.topk(s, lens, k=-1)),
        ("k", TypeError, lambda: K.topk(s, lens, k=2.0)),
        ("scores", TypeError, lambda: K.topk(s.double(), lens, k=2)),
        ("scores", ValueError, lambda: K.topk(s.t(), lens, k=2)),
        ("scores", ValueError, lambda: K.topk(s[None], lens, k=2)),
        ("fill", ValueError, lambda: K.topk(s, lens, k=2, fill=s.shape[1] - 1)),
        (
            "candidate_blocks",
            ValueError,
            lambda: K.topk(s, lens, k=2, candidate_blocks=torch.zeros(3, 1, dtype=torch.int32), block_size=2),
        ),
        ("block_table", ValueError, lambda: K.topk(s, lens, k=2, block_table=table[:1], rows_per_block=4)),
        ("lengths", ValueError, lambda: K.topk(s, lens[:1], k=2)),
        ("convention", ValueError, lambda: K.topk(s, lens, k=2, convention="v5")),
        ("offsets", ValueError, lambda: K.topk(s, lens, k=2, offsets=torch.tensor([2**31 - 4, 0]))),
        ("lengths", ValueError, lambda: K.topk(s, lens, k=2, convention="v4-decode")),
        ("block_table", ValueError, lambda: K.topk(s, lens, k=2, block_table=table, rows_per_block=1)),
        ("block_table", ValueError, lambda: K.topk(s, lens, k=2, block_table=-table - 1, rows_per_block=4)),
        ("lengths", ValueError, lambda: K.index_logits(q, w, k, torch.tensor([9, 1], dtype=torch.int32))),
        ("k", TypeError, lambda: K.index_logits(q, w, k.float(), lens)),
        ("weights", ValueError, lambda: K.index_logits(q, w[:, :1].contiguous(), k, lens)),
        (
            "k_scale",
            ValueError,
            lambda: K.index_logits(q, w, k.view(torch.uint8)[:, :16].contiguous(), lens, k_scale=torch.ones(3)),
        ),
        ("q_scale", ValueError, lambda: K.index_logits(q8, w, k, lens, q_scale=torch.ones(2, 2))),
        ("q_scale", ValueError, lambda: K.index_logits(q8, w, k8, lens, k_scale=ks, q_scale=torch.ones(2, 1))),
        ("q_scale", ValueError, lambda: K.index_logits(q8, w, k8, lens, k_scale=ks, q_scale=-torch.ones(2, 2))),
        ("q_scale", TypeError, lambda: K.index_logits(q8, w, k8, lens, k_scale=ks, q_scale=torch.ones(2, 2).double())),
        ("q", TypeError, lambda: K.index_logits(q8, w, k8, lens, k_scale=ks)),
        (
            "block_table",
            ValueError,
            lambda: K.slot_translation(rows + 5, table, torch.tensor([3, 3]), rows_per_block=2),
        ),
        (
            "rows",
            ValueError,
            lambda: K.slot_translation(rows - 1, table, torch.tensor([3, 3]), rows_per_block=2, guard="count"),
        ),
        ("offsets", ValueError, lambda: K.candidate_restore(rows + 4, rows[:, :2].contiguous(), block_size=2)),
        ("block_size", ValueError, lambda: K.candidate_select(s, lens, block_size=0, topk_blocks=2)),
        ("topk_blocks", ValueError, lambda: K.candidate_select(s, lens, block_size=2, topk_blocks=-1)),
        ("seqlen", ValueError, lambda: K.window_indices(window=4, seqlen=2, start_pos=3, order="v4")),
        ("order", ValueError, lambda: K.window_indices(window=4, seqlen=2, start_pos=0, order="v5")),
        ("positions", ValueError, lambda: K.decode_window_indices(torch.tensor([-2]), window=4, order="v4")),
        ("ratio", ValueError, lambda: K.compressed_indices(ratio=0, seqlen=2, start_pos=0)),
        ("seqlen", ValueError, lambda: K.compressed_indices(ratio=4, seqlen=-1, start_pos=0)),
        ("start_pos", ValueError, lambda: K.compressed_indices(ratio=4, seqlen=1, start_pos=-1)),
        ("offset", ValueError, lambda: K.compressed_indices(ratio=4, seqlen=1, start_pos=0, offset=-1)),
        ("offset", ValueError, lambda: K.compressed_indices(ratio=1, seqlen=2, start_pos=0, offset=2**31 - 2)),
        ("seqlen", ValueError, lambda: K.compressed_indices(ratio=128, seqlen=2, start_pos=2**31 - 2)),
        ("ratio", TypeError, lambda: K.compressed_indices(ratio=4.0, seqlen=1, start_pos=0)),
    ]


@pytest.mark.parametrize("case", range(len(_bad_calls())))
def test_bad_input_is_refused_before_launch(case: int) -> None:
    argument, error, call = _bad_calls()[case]
    with pytest.raises(error, match=f"^{argument}: "):
        call()


# --- compiled kernels (GPU only) -----------------------------------------------------------------------------------


@pytest.mark.skipif(not CUDA, reason="compiled kernels need a CUDA device")
def test_cuda_logits_match_float32_twin() -> None:
    """bf16 and FP8 keys at 64 heads x 128 dims: within a few float32 rounding steps of the float32 twin."""
    g = torch.Generator(device="cuda").manual_seed(0)
    m, n, h, d = 300, 3000, 64, 128
    q = torch.randn(m, h, d, device="cuda", generator=g).bfloat16()
    w = torch.randn(m, h, device="cuda", generator=g)
    k = torch.randn(n, d, device="cuda", generator=g).bfloat16()
    lengths = torch.randint(0, n + 1, (m,), device="cuda", generator=g, dtype=torch.int32)
    codes = torch.randn(n, d, device="cuda", generator=g).to(torch.float8_e4m3fn)
    scales = 2.0 ** torch.randint(-4, 4, (n,), device="cuda", generator=g).float()
    for key, scale in ((k, None), (codes, scales)):
        got = logits.index_logits(q, w, key, lengths, k_scale=scale)
        twin = naive.index_logits(q, w, key, lengths, k_scale=scale)
        live = torch.isfinite(twin)
        assert torch.equal(live, torch.isfinite(got))
        magnitude = naive.index_logits(
            q.abs(), w.abs(), key.abs() if scale is None else key.view(torch.uint8) & 0x7F, lengths, k_scale=scale
        )
        assert ((got - twin).abs()[live] <= 3e-5 * magnitude[live] + 1e-30).all()


FP8_DOT_TOLERANCE = 2.0**-10
"""Relative to sum_h |w| qs ks sum_d |q_d k_d|: a quarter of the contract's worst case for an e4m3 tensor-core dot
(``reference.indexing.E4M3_DOT_BOUND``, docs/indexing-kernels.md). The worst case needs a group of 32 products
dominated by one; on random data the truncations stay near 2**-13 of a group's magnitude (1.8e-5 measured on
the H200), so a quarter of it still leaves a margin of about 50 and catches a lost product or head."""


@pytest.mark.skipif(not CUDA, reason="compiled kernels need a CUDA device")
@pytest.mark.parametrize("paged", [False, True])
def test_cuda_fp8_query_logits_match_float32_twin(paged: bool) -> None:
    """FP8 queries and keys at 64 heads x 128 dims: the e4m3 dot within its accumulation bound of the float32
    twin, with the same -inf lanes; the bound's magnitude is the twin on absolute values (sign bits cleared)."""
    g = torch.Generator(device="cuda").manual_seed(3)
    m, n, h, d, bc = 256, 2048, 64, 128, 64
    x = torch.randn(m, h, d, device="cuda", generator=g)
    qs = x.abs().amax(dim=-1) / 448
    qc = (x / qs.unsqueeze(-1)).to(torch.float8_e4m3fn).view(torch.uint8)
    w = torch.randn(m, h, device="cuda", generator=g)
    codes = torch.randn(n, d, device="cuda", generator=g).to(torch.float8_e4m3fn).view(torch.uint8)
    scales = 2.0 ** torch.randint(-4, 4, (n,), device="cuda", generator=g).float()
    lengths = torch.randint(0, n + 1, (m,), device="cuda", generator=g, dtype=torch.int32)
    perm = torch.randperm(n // bc, device="cuda", generator=g)  # paged: a shuffled cache of 64-row blocks
    table = perm.int().expand(m, -1).contiguous()

    def call(mod, q, weights, keys):  # type: ignore[no-untyped-def]
        if not paged:
            return mod.index_logits(q, weights, keys, lengths, k_scale=scales, q_scale=qs)
        blocks = torch.cat([keys.view(n // bc, bc * d), scales.view(torch.uint8).view(n // bc, bc * 4)], 1)
        cache = blocks[perm.argsort()].contiguous()
        return mod.paged_index_logits(
            q.view(m, 1, h, d), weights.view(m, 1, h), cache, table, lengths.view(m, 1), rows_per_block=bc,
            q_scale=qs.view(m, 1, h),
        )  # fmt: skip

    got, twin = call(logits, qc, w, codes), call(naive, qc, w, codes)
    magnitude = call(naive, qc & 0x7F, w.abs(), codes & 0x7F)
    live = torch.isfinite(twin)
    assert torch.equal(live, torch.isfinite(got))
    err, bound = (got - twin).abs()[live], FP8_DOT_TOLERANCE * magnitude[live] + 1e-30
    assert (err <= bound).all(), f"max error / magnitude {(err / bound).max().item() * FP8_DOT_TOLERANCE:.2e}"


@pytest.mark.skipif(not CUDA, reason="compiled kernels need a CUDA device")
def test_cuda_topk_matches_twin_on_large_rows() -> None:
    """Realistic sizes: random rows, rows with huge ties, ascending rows, NaN; the rank-order and translated
    conventions; and the fallback (no room to buffer) and direct (radix over the row) paths forced."""
    g = torch.Generator(device="cuda").manual_seed(1)
    m, n = 24, 70000
    scores = torch.randn(m, n, device="cuda", generator=g)
    scores[4:8] = scores[4:8].round()  # heavy ties
    scores[8:12] = torch.arange(n, device="cuda").float()  # ascending: the top rows are all at the end
    scores[12:14] = 0.0
    scores[14, ::7] = float("nan")
    lengths = torch.randint(0, n + 1, (m,), device="cuda", generator=g, dtype=torch.int32)
    lengths[0], lengths[1] = n, 3000
    for k in (512, 2048):
        for convention in ("v4.1", "v4-prefill", "select-unsorted"):
            want = naive.topk(scores, lengths, k=k, convention=convention)
            assert torch.equal(tk.topk(scores, lengths, k=k, convention=convention), want), (k, convention)
    for cfg in (tk.TopKConfig(cap_factor=0), tk.TopKConfig(direct=1 << 20), tk.TopKConfig(block=1024, num_warps=4)):
        want = naive.topk(scores, lengths, k=2048)
        assert torch.equal(tk.topk(scores, lengths, k=2048, config=cfg), want), cfg
    blocks = torch.arange(m * 1100, device="cuda").view(m, 1100).int() * 3 + 2**29
    fused = tk.topk(scores, lengths, k=2048, block_table=blocks, rows_per_block=64)
    assert torch.equal(fused, naive.topk(scores, lengths, k=2048, block_table=blocks, rows_per_block=64))


@pytest.mark.skipif(not CUDA, reason="compiled kernels need a CUDA device")
@pytest.mark.parametrize("width", [16384, 16000, 4096, 700])
def test_cuda_topk_resident_rows_match_twin(width: int) -> None:
    """Compiled register-resident path (every row of at most 16384 lanes) at production widths, one not a power
    of two: random rows, heavy ties (the tie prefix sum), ascending rows, all-equal and NaN rows, lengths 0 to
    the width; every convention, the fused slot translation, the keep map and the drops, equal to the torch
    twin and to the sampled one-program path."""
    g = torch.Generator(device="cuda").manual_seed(width)
    m = 40
    scores = torch.randn(m, width, device="cuda", generator=g)
    scores[4:8] = scores[4:8].round()
    scores[8:10] = torch.arange(width, device="cuda").float()
    scores[10] = 0.0
    scores[11, ::7] = float("nan")
    scores[12, ::5] = float("-inf")
    lengths = torch.randint(0, width + 1, (m,), device="cuda", generator=g, dtype=torch.int32)
    lengths[0], lengths[1], lengths[4], lengths[10], lengths[13] = width, 0, width, width, 300
    sampled = tk.TopKConfig(resident=0)
    assert tk.uses_resident(tk.COMPILED, m, width) and not tk.uses_resident(sampled, m, width)
    for k in (512, 2048):
        for convention in sorted(REF_CONVENTIONS):
            rows = scores if convention != "v4-decode" else scores.nan_to_num(0.5, 0.5, 0.5)
            lens = lengths if convention != "v4-decode" else torch.full_like(lengths, width)
            want = naive.topk(rows, lens, k=k, convention=convention)
            assert torch.equal(tk.topk(rows, lens, k=k, convention=convention), want), (k, convention)
            assert torch.equal(tk.topk(rows, lens, k=k, convention=convention, config=sampled), want)
    blocks = torch.arange(m * 300, device="cuda").view(m, 300).int() * 3 + 2**29
    kept = torch.randint(-1, width // 64, (m, 40), device="cuda", generator=g, dtype=torch.int32)
    options: tuple[dict[str, Any], ...] = (
        dict(convention="v4-prefill", block_table=blocks, rows_per_block=64),
        dict(candidate_blocks=kept, block_size=64),
        dict(convention="select", drop_neg_inf=True, drop_nan=True),
    )
    for kwargs in options:
        want = naive.topk(scores, lengths, k=2048, **kwargs)
        assert torch.equal(tk.topk(scores, lengths, k=2048, **kwargs), want), kwargs


def test_fused_split_kernel_lowers_with_its_waits() -> None:
    """The fused split kernel lowered for sm_90 at its default tile (Triton ships ptxas), in one launch and in
    two: one thread's atomic for the ticket and for each published word, and waits that load their word
    again on every turn (a volatile load inside a loop; a load hoisted out of the loop would spin forever on a
    GPU). The interpreter runs programs one after another, so only the lowering shows what the waits become."""
    import os
    import pathlib
    import re
    import subprocess
    import sys
    import tempfile

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_DEFAULT_FP_FUSION"] = "1"
    with tempfile.TemporaryDirectory() as folder:
        run = subprocess.run([sys.executable, "-m", "fast.indexing.compile_check", "--only",
                              "split8192 block1024 w4 fused", "--ptx", folder], capture_output=True, text=True,
                             env=env, timeout=600)  # fmt: skip
        # every variant compiles (whether one spills is the module's report: 8 B in two launches under Triton 3.6)
        assert "FAILED" not in run.stdout and run.returncode in (0, 1), run.stdout + run.stderr
        ptx = {p.name: p.read_text() for p in pathlib.Path(folder).glob("*.ptx")}
    assert len(ptx) == 4, run.stdout  # one launch and two, each without and with a keep map
    for name, text in ptx.items():
        leaders = "one_launch" in name  # the leaders publish the threshold, the others wait for it
        assert re.search(r"atom\.global\S*\.add\.u64", text), name  # the ticket
        exchanges = len(re.findall(r"atom\.global\S*\.exch\.b64", text))
        assert exchanges >= (2 if leaders else 1), name  # the threshold, a count
        waits = 0
        for loop in re.finditer(r"^(\$L__BB\d+_\d+):.*?\n(.*?)bra(?:\.uni)?\s+\1;", text, re.S | re.M):
            waits += "ld.volatile.global" in loop.group(2)
        assert waits >= (2 if leaders else 1), name  # the leader's threshold, the earlier splits' counts


@pytest.mark.skipif(not CUDA, reason="compiled kernels need a CUDA device")
def test_cuda_topk_split_rows_match_one_program() -> None:
    """Compiled split-row path on long rows (a width no split size divides): random rows, heavy ties, ascending
    rows (every chosen lane in the last splits), all-equal and NaN rows, the whole-row fallback (no buffer), the
    rank-order and translated conventions and the keep map, equal to the one-program path and the torch twin."""
    g = torch.Generator(device="cuda").manual_seed(2)
    m, n = 12, 300001
    scores = torch.randn(m, n, device="cuda", generator=g)
    scores[2:4] = scores[2:4].round()
    scores[4:6] = torch.arange(n, device="cuda").float()
    scores[6] = 0.0
    scores[7, ::7] = float("nan")
    lengths = torch.randint(0, n + 1, (m,), device="cuda", generator=g, dtype=torch.int32)
    lengths[0], lengths[1], lengths[4] = n, 3000, n
    one = dataclasses.replace(tk.COMPILED, split_lanes=0)
    splits = [
        tk.COMPILED,
        dataclasses.replace(tk.COMPILED, split_lanes=8192, split_block=1024, split_warps=4),
        dataclasses.replace(tk.COMPILED, split_lanes=16384, split_block=4096, split_warps=16),
        dataclasses.replace(tk.COMPILED, cap_factor=0),
    ]
    # the fused forms (programs that wait on lower tickets), also with 1024-lane splits: 294 splits a row, 3528
    # programs, many more than are resident at once
    splits += [dataclasses.replace(cfg, split_launches=n) for cfg in splits for n in (1, 2)]
    splits += [dataclasses.replace(tk.COMPILED, split_launches=n, split_lanes=1024, split_block=1024) for n in (1, 2)]
    for cfg in splits:
        assert tk.uses_split(cfg, m, n)
        for k, convention in ((2048, "v4.1"), (512, "v4-prefill"), (2048, "select-unsorted")):
            want = naive.topk(scores, lengths, k=k, convention=convention)
            assert torch.equal(tk.topk(scores, lengths, k=k, convention=convention, config=one), want)
            assert torch.equal(tk.topk(scores, lengths, k=k, convention=convention, config=cfg), want), (cfg, k)
    blocks = torch.arange(m * 4700, device="cuda").view(m, 4700).int() * 3 + 2**29
    fused = tk.topk(scores, lengths, k=2048, block_table=blocks, rows_per_block=64)
    assert torch.equal(fused, naive.topk(scores, lengths, k=2048, block_table=blocks, rows_per_block=64))
    kept = torch.randint(-1, n // 64 + 1, (m, 900), device="cuda", generator=g, dtype=torch.int32)
    got = tk.topk(scores, lengths, k=2048, candidate_blocks=kept, block_size=64, drop_neg_inf=True)
    want = naive.topk(scores, lengths, k=2048, candidate_blocks=kept, block_size=64, drop_neg_inf=True)
    assert torch.equal(got, want)
