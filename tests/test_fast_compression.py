"""fast.compression (torch and Triton backends) against a float64 evaluation of the formula and the exact reference.

Expected values come from two formulations that share no code with fast/: ``formula_rows`` (groups by reshape,
softmax over each window, in float64 and float32) and ``reference.compression`` (exact, sympy, evaluated to 30
digits). Rows must lie within twice the error of the float32 torch evaluation of the same formula (the
flash-attention rule, max over the tensor), with a floor of 4 float32 ulps of the largest row value
(docs/compression-kernels.md). Store slots, positions, placeholder rows and ring contents are exact.

Triton runs under TRITON_INTERPRET=1 on the CPU (conftest.py) and compiled on a CUDA machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import pytest
import torch
import triton
import triton.language as tl

from fast.compression import compress_decode, compress_prefill, min_ring_size, prepare
from fast.compression import triton_kernels as tk
from fast.compression.plan import Mode
from fast.compression.triton_common import _bf16_bits

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
BACKENDS = ("torch", "triton")
FLOOR_ULPS = 4


@dataclass(frozen=True)
class Layer:
    ratio: int
    dim: int
    overlap: bool = False
    ape: bool = False

    @property
    def channels(self) -> int:
        return self.dim * (2 if self.overlap else 1)

    @property
    def window(self) -> int:
        return self.ratio * (2 if self.overlap else 1)


LAYERS = {
    "c1": Layer(1, 8),
    "c2": Layer(2, 16),
    "v4_overlap_ape": Layer(4, 16, overlap=True, ape=True),
    "r3_d5_ape": Layer(3, 5, ape=True),
    "r128_ape": Layer(128, 4, ape=True),
}


@dataclass
class History:
    """A request's whole sequence: score, latent f32[L, C] (raw, before APE)."""

    score: torch.Tensor
    latent: torch.Tensor


def make_history(layer: Layer, length: int, seed: int, grid: bool = False) -> History:
    g = torch.Generator().manual_seed(seed)
    if grid:  # few distinct values: ties in the max, equal weights, exact cancellations
        score = torch.randint(-4, 5, (length, layer.channels), generator=g).float() / 2
        latent = torch.randint(-8, 9, (length, layer.channels), generator=g).float() / 4
    else:
        score = torch.randn(length, layer.channels, generator=g) * 3
        latent = torch.randn(length, layer.channels, generator=g)
    return History(score.to(DEVICE), latent.to(DEVICE))


def make_ape(layer: Layer, seed: int) -> torch.Tensor | None:
    if not layer.ape:
        return None
    g = torch.Generator().manual_seed(seed)
    return torch.randn(layer.ratio, layer.channels, generator=g).to(DEVICE)


def formula_rows(layer: Layer, h: History, ape: torch.Tensor | None, end: int, dtype: torch.dtype) -> torch.Tensor:
    """Every row completed by position ``end`` (exclusive): [end // r, d] in ``dtype``, straight from the formula.

    Groups are a reshape; with overlap the previous group's first-half channels are prepended (-inf for row 0).
    """
    r, d = layer.ratio, layer.dim
    n = end // r
    a = torch.zeros(r, layer.channels, dtype=dtype, device=DEVICE) if ape is None else ape.to(dtype)
    x = h.score[: n * r].to(dtype).view(n, r, layer.channels) + a[None]
    v = h.latent[: n * r].to(dtype).view(n, r, layer.channels)
    if layer.overlap:
        prev_x = torch.cat([torch.full_like(x[:1, :, :d], float("-inf")), x[:-1, :, :d]])
        prev_v = torch.cat([torch.zeros_like(v[:1, :, :d]), v[:-1, :, :d]])
        x = torch.cat([prev_x, x[:, :, d:]], dim=1)
        v = torch.cat([prev_v, v[:, :, d:]], dim=1)
    return (torch.softmax(x, dim=1) * v).sum(dim=1)


@dataclass
class Call:
    """One packed call and what it must produce."""

    layer: Layer
    mode: Mode
    histories: list[History]
    starts: list[int]
    lengths: list[int]
    slots: list[int]
    ring: int
    num_slots: int
    ape: torch.Tensor | None

    def tensors(self, state: torch.Tensor) -> tuple[torch.Tensor, ...]:
        score = torch.cat(
            [h.score[s : s + n] for h, s, n in zip(self.histories, self.starts, self.lengths, strict=True)]
        )
        latent = torch.cat(
            [h.latent[s : s + n] for h, s, n in zip(self.histories, self.starts, self.lengths, strict=True)]
        )
        cu = torch.tensor([0, *torch.tensor(self.lengths).cumsum(0).tolist()], dtype=torch.int32, device=DEVICE)
        start = torch.tensor(self.starts, dtype=torch.int32, device=DEVICE)
        index = torch.tensor(self.slots, dtype=torch.int32, device=DEVICE)
        return score.contiguous(), latent.contiguous(), cu, start, state, index

    def fresh_state(self, fill: str = "window") -> torch.Tensor:
        """NaN everywhere, except each request's ring holding the positions a correct kernel may read:
        the W - 1 before its start ("window") or the S before it ("full")."""
        C = self.layer.channels
        state = torch.full((self.num_slots, self.ring, 2, C), float("nan"), device=DEVICE)
        for h, s, slot in zip(self.histories, self.starts, self.slots, strict=True):
            back = self.layer.window - 1 if fill == "window" else self.ring
            for p in range(max(0, s - back, s - self.ring), s):
                state[slot, p % self.ring, 0] = h.score[p]
                state[slot, p % self.ring, 1] = h.latent[p]
        return state

    def run(self, backend: str, state: torch.Tensor, **kw: Any) -> Any:
        fn = compress_prefill if self.mode is Mode.PREFILL else compress_decode
        return fn(*self.tensors(state), ratio=self.layer.ratio, overlap=self.layer.overlap, ape=self.ape,
                  backend=backend, **kw)  # fmt: skip

    def expected(self, dtype: torch.dtype) -> tuple[torch.Tensor, list[int], list[int]]:
        """rows [R, d], store rows (j or -1), positions (j r or 0)."""
        r, d = self.layer.ratio, self.layer.dim
        rows: list[torch.Tensor] = []
        store: list[int] = []
        pos: list[int] = []
        for h, s, n in zip(self.histories, self.starts, self.lengths, strict=True):
            done = formula_rows(self.layer, h, self.ape, s + n, dtype)
            js: list[int | None]
            if self.mode is Mode.PREFILL:
                js = list(range(s // r, (s + n) // r)) or [None]
            else:
                js = [p // r if (p + 1) % r == 0 else None for p in range(s, s + n)]
            for j in js:
                rows.append(torch.zeros(d, dtype=dtype, device=DEVICE) if j is None else done[j])
                store.append(-1 if j is None else j)
                pos.append(0 if j is None else j * r)
        return (torch.stack(rows) if rows else torch.zeros(0, d, dtype=dtype, device=DEVICE)), store, pos

    def expected_state(self, before: torch.Tensor) -> torch.Tensor:
        """``before`` with each request's newest min(n, S) new positions written (= writing all n in order)."""
        after = before.clone()
        for h, s, n, slot in zip(self.histories, self.starts, self.lengths, self.slots, strict=True):
            for p in range(max(s, s + n - self.ring), s + n):
                after[slot, p % self.ring, 0] = h.score[p]
                after[slot, p % self.ring, 1] = h.latent[p]
        return after


def assert_rows_close(got: torch.Tensor, call: Call, what: str) -> None:
    """Rows within 2 x the float32 formula's error against float64 (max over the tensor), floor 4 ulps."""
    ref, store, _ = call.expected(torch.float64)
    base, _, _ = call.expected(torch.float32)
    assert got.shape == ref.shape, what
    got64 = got.double()
    missing = torch.tensor([s == -1 for s in store], dtype=torch.bool, device=DEVICE)
    assert torch.equal(got64[missing], torch.zeros_like(got64[missing])), f"{what}: zero rows"
    if ref.numel() == 0:
        return
    err = (got64 - ref).abs().max().item()
    base_err = (base.double() - ref).abs().max().item()
    floor = FLOOR_ULPS * 2.0**-23 * ref.abs().max().item()
    assert err <= max(2 * base_err, floor), f"{what}: error {err:.3g} > 2 x {base_err:.3g} (floor {floor:.3g})"


def bits(x: torch.Tensor) -> torch.Tensor:
    return x.view(torch.int32) if x.dtype == torch.float32 else x.view(torch.int16)


def make_call(layer: Layer, mode: Mode, seed: int, ring: int | None = None, grid: bool = False) -> Call:
    """Several requests of different lengths, starts inside and at group boundaries, one empty."""
    r = layer.ratio
    # the last request starts at a group boundary, so (with overlap) its first row reads the previous group
    if mode is Mode.PREFILL:
        spans = [(0, 3 * r + 1), (r + 1, 2 * r), (2 * r - 1, 1), (5, 0), (3 * r, max(1, r - 1)), (2 * r, r + 1)]
    else:
        spans = [(0, 1), (r - 1, 1), (2 * r + 1, 3), (5, 0), (3 * r - 2, 4), (2 * r, r)]
    starts = [s for s, _ in spans]
    lengths = [n for _, n in spans]
    histories = [make_history(layer, s + n + 1, seed + i, grid) for i, (s, n) in enumerate(spans)]
    size = min_ring_size(layer.ratio, layer.overlap, lengths) if ring is None else ring
    slots = [4, 0, 2, 5, 1, 6]
    return Call(layer, mode, histories, starts, lengths, slots, size, 7, make_ape(layer, seed + 99))


# --- every layer, both modes, both backends ------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", [Mode.PREFILL, Mode.DECODE], ids=["prefill", "decode"])
@pytest.mark.parametrize("name", list(LAYERS))
def test_matches_formula_at_the_tightest_ring(name: str, mode: Mode, backend: str) -> None:
    """Rows within tolerance, exact slots / positions / zero rows, the ring exactly as written in order, and no
    read outside each request's last W - 1 positions (every other ring slot holds NaN)."""
    call = make_call(LAYERS[name], mode, seed=len(name), grid=name == "c2")
    state = call.fresh_state("window")
    before = state.clone()
    result = call.run(backend, state)
    _, store, pos = call.expected(torch.float64)
    assert_rows_close(result.rows, call, f"{name} {mode.value} {backend}")
    assert result.store_slots.tolist() == store
    assert result.positions.tolist() == pos
    assert result.store_slots.dtype == result.positions.dtype == torch.int64
    assert torch.equal(bits(state), bits(call.expected_state(before)))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["c2", "v4_overlap_ape"])
def test_long_verify_step(name: str, backend: str) -> None:
    """A decode step of 20 and 17 new positions (more than one tile of positions to keep) with a ring of 24."""
    layer = LAYERS[name]
    spans = [(5, 20), (layer.window + 2, 17)]
    histories = [make_history(layer, s + n + 1, 70 + i) for i, (s, n) in enumerate(spans)]
    call = Call(layer, Mode.DECODE, histories, [5, layer.window + 2], [20, 17], [1, 0], 24, 2, make_ape(layer, 71))
    state = call.fresh_state("full")
    before = state.clone()
    result = call.run(backend, state)
    _, store, pos = call.expected(torch.float64)
    assert_rows_close(result.rows, call, f"long step {name} {backend}")
    assert result.store_slots.tolist() == store and result.positions.tolist() == pos
    assert torch.equal(bits(state), bits(call.expected_state(before)))


@pytest.mark.parametrize("name", ["c2", "v4_overlap_ape", "r128_ape"])
def test_backends_agree(name: str) -> None:
    """Triton and torch: equal slots, positions and rings; rows within the same tolerance of each other."""
    call = make_call(LAYERS[name], Mode.PREFILL, seed=7, ring=LAYERS[name].window + 3)
    outs = {}
    for backend in BACKENDS:
        state = call.fresh_state("full")
        outs[backend] = (call.run(backend, state), state)
    (a, sa), (b, sb) = outs["torch"], outs["triton"]
    assert torch.equal(a.store_slots, b.store_slots) and torch.equal(a.positions, b.positions)
    assert torch.equal(bits(sa), bits(sb))
    ref, _, _ = call.expected(torch.float64)
    base, _, _ = call.expected(torch.float32)
    base_err = (base.double() - ref).abs().max().item()
    assert (a.rows.double() - b.rows.double()).abs().max().item() <= 4 * base_err + 1e-6 * ref.abs().max().item()


# --- chunked prefill then decode equals one shot ------------------------------------------------------------


Rows = dict[tuple[int, int], torch.Tensor]


def run_schedule(
    layer: Layer,
    backend: str,
    histories: list[History],
    ape: torch.Tensor | None,
    steps: list[tuple[Mode, list[int]]],
    ring: int,
) -> tuple[Rows, torch.Tensor]:
    """Feed every request through ``steps`` (mode, new positions per request) in packed calls on one state;
    return every completed row by (request, j) and the final state."""
    B = len(histories)
    state = torch.full((B, ring, 2, layer.channels), float("nan"), device=DEVICE)
    done: dict[tuple[int, int], torch.Tensor] = {}
    starts = [0] * B
    for mode, lengths in steps:
        call = Call(layer, mode, histories, list(starts), lengths, list(range(B)), ring, B, ape)
        result = call.run(backend, state)
        for i, (b, j) in enumerate(zip(_row_owner(call), result.store_slots.tolist(), strict=True)):
            if j >= 0:
                assert (b, j) not in done, "a row completed twice"
                done[(b, j)] = result.rows[i]
        starts = [s + n for s, n in zip(starts, lengths, strict=True)]
    return done, state


def _row_owner(call: Call) -> list[int]:
    owners = []
    for b, (s, n) in enumerate(zip(call.starts, call.lengths, strict=True)):
        count = max(1, (s + n) // call.layer.ratio - s // call.layer.ratio) if call.mode is Mode.PREFILL else n
        owners += [b] * count
    return owners


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["c1", "c2", "v4_overlap_ape", "r3_d5_ape"])
def test_chunked_prefill_then_decode_equals_one_shot(name: str, backend: str) -> None:
    layer = LAYERS[name]
    r = layer.ratio
    # three requests, chunks of different lengths in the same calls, zero-length chunks included, then decode
    steps = [
        (Mode.PREFILL, [1, 0, 2]),
        (Mode.PREFILL, [r + 2, 2 * r, 0]),
        (Mode.PREFILL, [2 * r - 1, 0, 2 * r]),
        (Mode.DECODE, [1, 1, 1]),
        (Mode.DECODE, [2, 0, r - 1]),
    ]
    total = [sum(step[1][b] for step in steps) for b in range(3)]
    histories = [make_history(layer, n, 40 + i) for i, n in enumerate(total)]
    ape = make_ape(layer, 41)
    ring = max(1, layer.window - 1)
    chunked, state = run_schedule(layer, backend, histories, ape, steps, ring)
    one_shot, state1 = run_schedule(layer, backend, histories, ape, [(Mode.PREFILL, total)], ring)
    assert sorted(chunked) == sorted(one_shot) == [(b, j) for b in range(3) for j in range(total[b] // layer.ratio)]
    assert torch.equal(bits(state), bits(state1)), "final rings differ"
    for b in range(3):
        ref = formula_rows(layer, histories[b], ape, total[b], torch.float64)
        base = formula_rows(layer, histories[b], ape, total[b], torch.float32).double()
        allowed = max(2 * (base - ref).abs().max().item(), FLOOR_ULPS * 2.0**-23 * ref.abs().max().item())
        for j in range(total[b] // layer.ratio):
            a, c = chunked[(b, j)].double(), one_shot[(b, j)].double()
            assert (a - ref[j]).abs().max().item() <= allowed and (c - ref[j]).abs().max().item() <= allowed
            assert (a - c).abs().max().item() <= allowed


# --- rollback of a verify step --------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_verify_rollback_needs_the_rollback_ring(backend: str) -> None:
    """A verify step of q = 3 with one position accepted, then the real inputs re-fed. The next row's window
    starts W - 1 positions back, so the rejected writes must not reach it: with rollback=True the ring is
    W + q - 2 and the rows are right; one slot less (allowed without rollback) corrupts them, and rollback=True
    refuses it."""
    layer = LAYERS["v4_overlap_ape"]
    ape = make_ape(layer, 3)
    q, prefix = 3, 10  # the step after rollback starts at 11: the last position of its group
    real = make_history(layer, prefix + 8, 5)
    draft = make_history(layer, prefix + 8, 6)
    rejected = History(real.score.clone(), real.latent.clone())
    rejected.score[prefix + 1 : prefix + q] = draft.score[prefix + 1 : prefix + q]
    rejected.latent[prefix + 1 : prefix + q] = draft.latent[prefix + 1 : prefix + q]
    safe = min_ring_size(layer.ratio, layer.overlap, [q], rollback=True)
    assert safe == layer.window + q - 2
    for ring in (safe, safe - 1):
        declared = ring == safe
        state = torch.full((1, ring, 2, layer.channels), float("nan"), device=DEVICE)
        Call(layer, Mode.PREFILL, [real], [0], [prefix], [0], ring, 1, ape).run(backend, state)
        Call(layer, Mode.DECODE, [rejected], [prefix], [q], [0], ring, 1, ape).run(backend, state, rollback=declared)
        call = Call(layer, Mode.DECODE, [real], [prefix + 1], [q], [0], ring, 1, ape)
        result = call.run(backend, state, rollback=declared)
        assert result.store_slots.tolist()[0] == 2, "the first re-fed position completes row 2"
        if declared:
            assert_rows_close(result.rows, call, "after rollback")
        else:
            with pytest.raises(AssertionError):
                assert_rows_close(result.rows, call, "one slot short")
            with pytest.raises(ValueError, match=r"^state"):
                call.run(backend, state, rollback=True)


# --- paged cache, bf16, unwritten outputs ---------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cache_dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("mode", [Mode.PREFILL, Mode.DECODE], ids=["prefill", "decode"])
def test_store_slots_and_cache_writes(mode: Mode, cache_dtype: torch.dtype, backend: str) -> None:
    """slot(j) = table[b, j // Bc] * Bc + j % Bc with Bc = 8 / 2; the cache gets each row at its slot (rounded to
    the cache dtype) and nothing anywhere else."""
    layer, block_size, per_block = LAYERS["c2"], 8, 4
    call = make_call(layer, mode, seed=11)
    tables = [[9, 3, 7], [0, 6, 2], [1, 4, 8], [-1, -1, -1], [5, 10, 11], [12, 13, 14]]  # request 3: nothing
    table = torch.tensor(tables, dtype=torch.int32, device=DEVICE)
    cache = torch.full((15 * per_block, layer.dim), float("nan"), dtype=cache_dtype, device=DEVICE)
    result = call.run(backend, call.fresh_state(), block_table=table, block_size=block_size, kv_cache=cache)
    _, store, _ = call.expected(torch.float64)
    owners = _row_owner(call)
    want = [
        -1 if j == -1 else tables[b][j // per_block] * per_block + j % per_block
        for b, j in zip(owners, store, strict=True)
    ]
    assert result.store_slots.tolist() == want
    written = torch.zeros(cache.shape[0], dtype=torch.bool, device=DEVICE)
    for i, slot in enumerate(want):
        if slot >= 0:
            assert torch.equal(bits(cache[slot]), bits(result.rows[i].to(cache_dtype)))
            written[slot] = True
    assert torch.isnan(cache[~written].float()).all(), "a cache row outside the store slots was written"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["c2", "v4_overlap_ape"])
def test_bf16_rows_are_the_rounded_f32_rows(name: str, backend: str) -> None:
    call = make_call(LAYERS[name], Mode.PREFILL, seed=2)
    f32 = call.run(backend, call.fresh_state())
    bf16 = call.run(backend, call.fresh_state(), out_dtype=torch.bfloat16)
    assert bf16.rows.dtype == torch.bfloat16
    assert torch.equal(bits(bf16.rows), bits(f32.rows.to(torch.bfloat16)))


@triton.jit
def _round_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + i, _bf16_bits(tl.load(x_ptr + i, mask=i < n)), mask=i < n)


def test_bf16_bit_rounding_is_round_to_nearest_even() -> None:
    """The kernels' f32 -> bf16 rounding on ties (both parities), carries into the exponent, overflow to inf,
    subnormals, zeros, infinities and random bit patterns equals torch's conversion; NaN gives 0x7FC0."""
    g = torch.Generator().manual_seed(0)
    patterns = [
        0x3F808000, 0x3F818000, 0x3F80_8001, 0x3F80_7FFF, 0xBF808000, 0xBF818000,  # ties even / odd, near ties
        0x3FFF_8000, 0x7F7F_8000, 0x7F7F_FFFF, 0xFF7F_FFFF, 0x0000_8000, 0x0001_8000, 0x8000_0001,
        0x0000_0000, 0x8000_0000, 0x7F80_0000, 0xFF80_0000, 0x0080_0000, 0x007F_FFFF,
    ]  # fmt: skip
    special = torch.tensor(patterns, dtype=torch.int64).to(torch.int32)
    random = torch.randint(-(2**31), 2**31 - 1, (4096,), generator=g, dtype=torch.int64).to(torch.int32)
    words = torch.cat([special, random])
    x = words.view(torch.float32)
    finite_or_inf = ~torch.isnan(x)
    x = x.to(DEVICE)
    out = torch.empty(x.numel(), dtype=torch.int16, device=DEVICE)
    _round_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    want = x.cpu().to(torch.bfloat16).view(torch.int16)
    got = out.cpu()
    assert torch.equal(got[finite_or_inf], want[finite_or_inf])
    assert (got[~finite_or_inf] == 0x7FC0).all() and (~finite_or_inf).sum() > 0


@pytest.mark.parametrize("mode", [Mode.PREFILL, Mode.DECODE], ids=["prefill", "decode"])
@pytest.mark.parametrize("name", ["v4_overlap_ape", "r128_ape"])
def test_poisoned_outputs_are_fully_written(name: str, mode: Mode, monkeypatch: pytest.MonkeyPatch) -> None:
    """Output buffers start as NaN / -7: every row, store slot and position lane is written (Triton)."""

    def poisoned(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        fill = float("nan") if dtype.is_floating_point else -7
        return torch.full(shape, fill, dtype=dtype, device=device)

    monkeypatch.setattr(tk, "allocate", poisoned)
    call = make_call(LAYERS[name], mode, seed=3)
    for out_dtype in (torch.float32, torch.bfloat16):
        result = call.run("triton", call.fresh_state(), out_dtype=out_dtype)
        assert not torch.isnan(result.rows.float()).any()
        assert not (result.store_slots == -7).any() and not (result.positions == -7).any()
    f32 = call.run("triton", call.fresh_state())
    assert_rows_close(f32.rows, call, "poisoned")


class LaunchCounter:
    """Stands in for a Triton kernel and counts its launches."""

    def __init__(self, kernel: Any) -> None:
        self.kernel, self.launches = kernel, 0

    def __getitem__(self, grid: Any) -> Any:
        launch = self.kernel[grid]

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.launches += 1
            return launch(*args, **kwargs)

        return counted


@pytest.mark.parametrize(("mode", "launches"), [(Mode.DECODE, 1), (Mode.PREFILL, 1)], ids=["decode", "prefill"])
def test_launches_per_call(mode: Mode, launches: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A decode step for the whole batch is one launch, and so is a prefill at the default tiles (the first
    tile of each request writes its ring)."""
    counters = {}
    for kernel in ("_decode_kernel", "_prefill_rows_kernel", "_keep_kernel"):
        counters[kernel] = LaunchCounter(getattr(tk, kernel))
        monkeypatch.setattr(tk, kernel, counters[kernel])
    call = make_call(LAYERS["c2"], mode, seed=4)
    call.run("triton", call.fresh_state())
    assert sum(c.launches for c in counters.values()) == launches


PREFILL_TILES = {  # (layer, tiles [rows, entries, channels, warps], requests, launches)
    "c2 one request": ("c2", tk.Config(4, 2, 16, 4), 1, 1),
    "c2 one-row tiles": ("c2", tk.Config(1, 2, 8, 1), 6, 1),
    "v4 one request": ("v4_overlap_ape", tk.Config(2, 8, 16, 4), 1, 1),
    "v4 two-row tiles": ("v4_overlap_ape", tk.Config(2, 8, 8, 2), 6, 1),
    "v4 one-row tiles: ring in a second launch": ("v4_overlap_ape", tk.Config(1, 8, 16, 1), 6, 2),
    "v4 one request, one-row tiles": ("v4_overlap_ape", tk.Config(1, 8, 16, 1), 1, 2),
    "r128 one request": ("r128_ape", tk.Config(1, 32, 4, 4), 1, 1),
}


@pytest.mark.parametrize("case", list(PREFILL_TILES))
def test_prefill_tiles(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Prefill at other tiles than the default, one request (launch arguments) or several (tile records):
    the rows, slots and positions of the formula, the ring as written in order (no read of a position written
    by the same call: the rings hold NaN outside each request's readable positions), and the launch count."""
    name, cfg, requests, launches = PREFILL_TILES[case]
    layer = LAYERS[name]
    call = make_call(layer, Mode.PREFILL, seed=11)
    if requests == 1:  # one position after a boundary, and past S positions long
        start, length = layer.ratio + 1, 3 * layer.window + 2
        history = make_history(layer, start + length + 1, 12)
        call = Call(layer, Mode.PREFILL, [history], [start], [length], [3], call.ring, 7, call.ape)
    counters = {k: LaunchCounter(getattr(tk, k)) for k in ("_prefill_rows_kernel", "_keep_kernel")}
    for kernel, counter in counters.items():
        monkeypatch.setattr(tk, kernel, counter)
    state = call.fresh_state("window")
    before = state.clone()
    plan = prepare(Mode.PREFILL, *call.tensors(state), ratio=call.layer.ratio, overlap=call.layer.overlap,
                   ape=call.ape, out_dtype=torch.float32)  # fmt: skip
    result = tk.run(plan, cfg)
    _, store, pos = call.expected(torch.float64)
    assert_rows_close(result.rows, call, case)
    assert result.store_slots.tolist() == store and result.positions.tolist() == pos
    assert torch.equal(bits(state), bits(call.expected_state(before)))
    assert sum(c.launches for c in counters.values()) == launches


# --- against the exact reference -------------------------------------------------------------------------------


def exact_inputs(h: History, upto: int) -> list[tuple[tuple[Fraction, ...], tuple[Fraction, ...]]]:
    """Positions as exact rationals: a float32 value is a dyadic rational."""
    score, latent = h.score.cpu().tolist(), h.latent.cpu().tolist()
    return [(tuple(map(Fraction, score[p])), tuple(map(Fraction, latent[p]))) for p in range(upto)]


REFERENCE_LAYERS = {
    "c2": Layer(2, 3),
    "v4_overlap_ape": Layer(4, 2, overlap=True, ape=True),
    "r128_ape": Layer(128, 1, ape=True),
}


@pytest.mark.parametrize("mode", [Mode.PREFILL, Mode.DECODE], ids=["prefill", "decode"])
@pytest.mark.parametrize("name", list(REFERENCE_LAYERS))
def test_matches_exact_reference(name: str, mode: Mode) -> None:
    """Both backends against reference.compression (EXP weighting, exact sympy, evaluated to 30 digits): rows
    within 2 x the float32 formula's error against the exact values (floor 4 ulps); store rows and positions."""
    from reference.compression import decode_step, prefill_chunk, state_after
    from reference.gated_mean import Weighting, evaluate
    from reference.layer import CompressedLayer

    layer = REFERENCE_LAYERS[name]
    r = layer.ratio
    spans = [(r - 1, 2 * r + 1), (0, 1)] if mode is Mode.PREFILL else [(2 * r - 1, 2), (r - 2, 3)]
    histories = [make_history(layer, s + n, 60 + i) for i, (s, n) in enumerate(spans)]
    ape = make_ape(layer, 61)
    exact_ape = None if ape is None else tuple(tuple(map(Fraction, row)) for row in ape.cpu().tolist())
    ref_layer = CompressedLayer(r, layer.dim, layer.overlap, exact_ape)
    exact, store, pos = [], [], []
    for h, (s, n) in zip(histories, spans, strict=True):
        inputs = exact_inputs(h, s + n)
        before = state_after(ref_layer, inputs[:s], Weighting.EXP)
        step = prefill_chunk if mode is Mode.PREFILL else decode_step
        for row in step(ref_layer, before, s, inputs[s:], Weighting.EXP).reserved:
            exact.append([float(evaluate(v, 30)) for v in row.values])
            store.append(row.store_row)
            pos.append(row.position)
    ref = torch.tensor(exact, dtype=torch.float64, device=DEVICE)
    ring = min_ring_size(layer.ratio, layer.overlap, [n for _, n in spans])
    call = Call(layer, mode, histories, [s for s, _ in spans], [n for _, n in spans], [1, 0], max(ring, 1), 2, ape)
    base, base_store, _ = call.expected(torch.float32)
    assert base_store == store
    allowed = max(2 * (base.double() - ref).abs().max().item(), FLOOR_ULPS * 2.0**-23 * ref.abs().max().item())
    for backend in BACKENDS:
        result = call.run(backend, call.fresh_state())
        assert result.store_slots.tolist() == store and result.positions.tolist() == pos
        assert (result.rows.double() - ref).abs().max().item() <= allowed, backend


# --- bad input is refused before anything runs ----------------------------------------------------------------


def _bad_cases() -> list[tuple[str, Any, str, type[Exception]]]:
    def set_(key: str, value: Any) -> Any:
        return lambda a: {**a, key: value(a[key]) if callable(value) else value}

    def ring_below(a: dict[str, Any]) -> dict[str, Any]:
        return {**a, "state": a["state"][:, : LAYERS["v4_overlap_ape"].window - 2].contiguous()}

    def bump(key: str, index: int, delta: int) -> Any:
        def f(a: dict[str, Any]) -> dict[str, Any]:
            t = a[key].clone()
            t[index] += delta
            return {**a, key: t}

        return f

    table_ok = torch.arange(6 * 4, dtype=torch.int32, device=DEVICE).view(6, 4)
    table_minus = table_ok.clone()
    table_minus[0, 1] = -1
    with_table = {"block_table": table_ok, "block_size": 8}
    return [
        ("score f64", set_("score", lambda x: x.double()), "score", TypeError),
        ("score list", set_("score", lambda x: x.tolist()), "score", TypeError),
        ("score strided", set_("score", lambda x: x.t().contiguous().t()), "score", ValueError),
        ("score 1-D", set_("score", lambda x: x.flatten()), "score", ValueError),
        ("latent shape", set_("latent", lambda x: x[:-1].contiguous()), "latent", ValueError),
        (
            "odd channels",
            lambda a: {**a, "score": a["score"][:, :-1].contiguous(), "latent": a["latent"][:, :-1].contiguous()},
            "score",
            ValueError,
        ),
        ("cu_seqlens i64", set_("cu_seqlens", lambda x: x.long()), "cu_seqlens", TypeError),
        ("negative length", bump("cu_seqlens", 1, 100), "cu_seqlens", ValueError),
        ("cu_seqlens end", bump("cu_seqlens", -1, -1), "cu_seqlens", ValueError),
        ("cu_seqlens start", bump("cu_seqlens", 0, 1), "cu_seqlens", ValueError),
        ("negative start", bump("start_pos", 2, -100), "start_pos", ValueError),
        ("start_pos shape", set_("start_pos", lambda x: x[:-1].contiguous()), "start_pos", ValueError),
        ("state f64", set_("state", lambda x: x.double()), "state", TypeError),
        ("ring below W - 1", ring_below, "state", ValueError),
        ("state channels", set_("state", lambda x: x[..., :-1].contiguous()), "state", ValueError),
        (
            "state strided",
            set_("state", lambda x: x.transpose(0, 1).contiguous().transpose(0, 1)),
            "state",
            ValueError,
        ),
        ("state_index range", bump("state_index", 0, 100), "state_index", ValueError),
        (
            "state_index shared",
            lambda a: {**a, "state_index": torch.zeros_like(a["state_index"])},
            "state_index",
            ValueError,
        ),
        ("ape shape", set_("ape", lambda x: x[:-1].contiguous()), "ape", ValueError),
        ("ape f64", set_("ape", lambda x: x.double()), "ape", TypeError),
        ("ratio 0", set_("ratio", 0), "ratio", ValueError),
        ("ratio bool", set_("ratio", True), "ratio", TypeError),
        ("overlap ratio 2", set_("ratio", 2), "overlap", ValueError),
        ("overlap int", set_("overlap", 1), "overlap", TypeError),
        ("out f16", lambda a: {**a, "out_dtype": torch.float16}, "out_dtype", TypeError),
        ("table alone", lambda a: {**a, "block_table": table_ok}, "block_size", ValueError),
        ("block_size 6", lambda a: {**a, **with_table, "block_size": 6}, "block_size", ValueError),
        (
            "table short",
            lambda a: {**a, **with_table, "block_table": table_ok[:, :1].contiguous()},
            "block_table",
            ValueError,
        ),
        ("table -1 used", lambda a: {**a, **with_table, "block_table": table_minus}, "block_table", ValueError),
        ("table i64", lambda a: {**a, **with_table, "block_table": table_ok.long()}, "block_table", TypeError),
        ("cache alone", lambda a: {**a, "kv_cache": torch.zeros(80, 16, device=DEVICE)}, "kv_cache", ValueError),
        (
            "cache width",
            lambda a: {**a, **with_table, "kv_cache": torch.zeros(80, 8, device=DEVICE)},
            "kv_cache",
            ValueError,
        ),
        (
            "cache small",
            lambda a: {**a, **with_table, "kv_cache": torch.zeros(8, 16, device=DEVICE)},
            "block_table",
            ValueError,
        ),
        ("backend", lambda a: {**a, "backend": "cuda"}, "backend", ValueError),
        ("rollback prefill", lambda a: {**a, "rollback": True}, "rollback", ValueError),
    ]


@pytest.mark.parametrize(("what", "mutate", "argument", "error"), _bad_cases(), ids=[c[0] for c in _bad_cases()])
def test_bad_input_is_refused_before_launch(what: str, mutate: Any, argument: str, error: type[Exception]) -> None:
    call = make_call(LAYERS["v4_overlap_ape"], Mode.PREFILL, seed=1)
    score, latent, cu, start, state, index = call.tensors(call.fresh_state())
    before = state.clone()
    args = dict(score=score, latent=latent, cu_seqlens=cu, start_pos=start, state=state, state_index=index,
                ratio=4, overlap=True, ape=call.ape, backend="triton")  # fmt: skip
    bad = mutate(args)
    backend = bad.pop("backend")
    rollback = bad.pop("rollback", False)
    with pytest.raises(error, match=rf"^{argument}"):
        if rollback:
            prepare(Mode.PREFILL, **bad, rollback=True)
        compress_prefill(**bad, backend=backend)
    assert torch.equal(bits(state), bits(before)), "state changed by a refused call"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device beside the CPU")
def test_mixed_devices_are_refused() -> None:
    call = make_call(LAYERS["c2"], Mode.DECODE, seed=1)
    score, latent, cu, start, state, index = call.tensors(call.fresh_state())
    with pytest.raises(ValueError, match=r"^latent"):
        compress_decode(score, latent.cpu(), cu, start, state, index, ratio=2)


def test_registered_adapters_follow_the_contract() -> None:
    """Every fast compression implementation in the registry: contract call shape, (rows, store_rows, positions)
    out."""
    from properties.registry import discover

    impls = [i for i in discover().find(origin="fast") if i.op.startswith("compression_")]
    assert {i.id for i in impls} >= {
        "compression_prefill:torch[reserve_max1]",
        "compression_prefill:triton[reserve_max1]",
        "compression_decode:torch[read_then_write]",
        "compression_decode:triton[read_then_write]",
    }
    for impl in impls:
        mode = Mode.DECODE if impl.op == "compression_decode" else Mode.PREFILL
        call = make_call(LAYERS["v4_overlap_ape"], mode, seed=8)
        state = call.fresh_state()
        before = state.clone()
        score, latent, cu, start, _, index = call.tensors(state)
        rows, store, positions = impl.fn(score, latent, cu, start, state, index, ratio=4, overlap=True, ape=call.ape)
        _, want_store, want_positions = call.expected(torch.float64)
        assert store.tolist() == want_store, impl.id
        assert positions.tolist() == want_positions, impl.id
        if rows.dtype == torch.float32:
            assert_rows_close(rows, call, impl.id)
        else:  # bf16 rows: the f32 rows of the same backend, rounded to nearest even
            f32 = call.run("triton", call.fresh_state())
            assert torch.equal(bits(rows), bits(f32.rows.to(torch.bfloat16))), impl.id
        assert torch.equal(bits(state), bits(call.expected_state(before))), impl.id


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU every test above runs the compiled kernels")
def test_kernels_compile_for_sm90_with_vector_loads() -> None:
    """The interpreter does not compile: lower every kernel to a sm_90 cubin here (Triton ships ptxas) and
    require 128-bit loads and no spills (fast.compression.compile_check)."""
    import os
    import subprocess
    import sys

    from fast.compression import compile_check

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_DEFAULT_FP_FUSION"] = "1"
    run = subprocess.run(
        [sys.executable, "-m", "fast.compression.compile_check"], capture_output=True, text=True, env=env, timeout=600
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count("128-bit") == len(compile_check.cases()), run.stdout
