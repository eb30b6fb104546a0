"""fast.cache (torch and Triton backends) against the exact reference: bytes, values, attention, bad input.

Expected bytes and values come from ``reference.formats`` / ``reference.cache_blocks`` (exact rationals, their
own offsets) and ``reference.attention`` (50 digits); nothing expected is produced by fast/. Quantize-and-store
and gather must equal the reference bit for bit. Attention: ``precision="f64"`` within 2 f32 ulps (one
rounding of a float64 evaluation), ``"f32"`` within twice the error of the float32 torch twin plus 4 ulps of
the row's largest weighted term, ``"bf16"`` within twice the error of the bf16 torch twin (max over the tensor,
the flash-attention rule) (docs/cache-kernels.md).

Triton runs under TRITON_INTERPRET=1 on the CPU (conftest.py) and compiled on a CUDA machine.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from fractions import Fraction
from typing import Any, Literal, cast

import numpy as np
import pytest
import torch

from fast.cache import FORMATS, gather_dequantize, norm_rope_store, quantize, quantize_store, sparse_attention
from fast.cache.attention import Config
from fast.cache.checks import StoreArgs
from reference.attention import NAN, POS_INF
from reference.attention import sparse_attention as exact_attention
from reference.cache_blocks import public_layout, slot_byte_offsets
from reference.formats import dequantize_row, quantize_row
from reference.grids import E2M1, E4M3FN, e2m1_encode, e4m3_encode, encode
from reference.scales import fp4_e4m3_scale_code, fp8_scale_exponent

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
BACKENDS = ("torch", "triton")
POISON = 0xA5
RNG = np.random.default_rng(2026)


# ---------------------------------------------------------------------------------------------------------
# Inputs


def f32(values: Any) -> torch.Tensor:
    return torch.tensor(np.asarray(values, dtype=np.float32), device=DEVICE)


def nudged(x: float, ulps: int) -> np.float32:
    """``x`` moved by ``ulps`` float32 steps."""
    v = np.float32(x)
    for _ in range(abs(ulps)):
        v = np.nextafter(v, np.float32(np.inf if ulps > 0 else -np.inf))
    return np.float32(v)


def hard_rows(conv: str, count: int) -> np.ndarray:
    """Rows that reach every rounding branch: ties and near-ties on the element grids, subnormal inputs and
    subnormal codes, saturation, scale boundaries (amax at 7 * 2^j and 6 * 2^j, +-1 ulp), tiny groups under
    the amax floor, zero groups, -0.0, and wide exponent spreads."""
    fmt = FORMATS[conv]
    rows = RNG.standard_normal((count, fmt.dims)).astype(np.float32)
    rows *= np.exp2(RNG.integers(-40, 40, (count, 1))).astype(np.float32)
    rows *= np.exp2(RNG.integers(-14, 2, (count, fmt.dims))).astype(np.float32)
    ties = RNG.random((count, fmt.dims)) < 0.35
    half_steps = (RNG.integers(-40, 40, (count, fmt.dims)) + 0.5).astype(np.float32)
    rows = np.where(ties, half_steps * np.exp2(RNG.integers(-12, 3, (count, 1))).astype(np.float32), rows)
    g = fmt.group_size
    for r in range(0, count, 2):
        j = int(RNG.integers(-25, 25))
        anchor = (7 if r % 4 else 6) * 2.0**j
        rows[r, ::g] = nudged(anchor, int(RNG.integers(-2, 3))) * (1 if r % 3 else -1)
    rows[0, :g] = 0.0
    rows[0, g : 2 * g] = -0.0
    rows[1, :] = np.float32(3e-5) * np.sign(rows[1])  # every group below the 1e-4 floor
    rows[2, :] = np.exp2(RNG.integers(-149, -126, fmt.dims)).astype(np.float32) * np.sign(rows[2])  # subnormals
    rows[3, : 2 * g] = np.float32(3e38)  # the largest groups
    if fmt.tail_dims:
        rows[:, fmt.dims - fmt.tail_dims :] = np.clip(rows[:, fmt.dims - fmt.tail_dims :], -3e38, 3e38)
    return rows


def expected_cache(
    conv: str, rows: np.ndarray, slots: list[int], rows_per_block: int, blocks: int
) -> tuple[bytes, set[int]]:
    """The poisoned cache after storing ``rows`` at ``slots`` by the reference, and the pad-byte positions."""
    fmt = FORMATS[conv].row
    layout = public_layout(fmt, rows_per_block)
    cache = bytearray([POISON] * (blocks * layout.block_bytes))
    pads: set[int] = set()
    for row, slot in zip(rows, slots, strict=True):
        if slot == -1:
            continue
        q = quantize_row(fmt, [Fraction(float(v)) for v in row])
        data_at, scale_at = slot_byte_offsets(layout, slot)
        cache[data_at : data_at + len(q.data)] = q.data
        cache[scale_at : scale_at + len(q.scales)] = q.scales
        pads.update(range(scale_at + fmt.scale_bytes - fmt.scale_pad_bytes, scale_at + fmt.scale_bytes))
    return bytes(cache), pads


def poisoned_cache(conv: str, rows_per_block: int, blocks: int) -> torch.Tensor:
    size = FORMATS[conv].block_bytes(rows_per_block)
    return torch.full((blocks, size), POISON, dtype=torch.uint8, device=DEVICE)


def cache_bytes(cache: torch.Tensor) -> bytes:
    return bytes(cache.cpu().reshape(-1).tolist())


def assert_same_bytes(got: bytes, expected: bytes, pads: set[int], what: str) -> None:
    differ = [i for i, (g, e) in enumerate(zip(got, expected, strict=True)) if g != e and i not in pads]
    assert not differ, f"{what}: {len(differ)} bytes differ, first at {differ[:8]}"
    assert all(got[i] in (0, POISON) for i in pads), f"{what}: a pad byte holds neither 0 nor the old byte"


# ---------------------------------------------------------------------------------------------------------
# Quantize-and-store


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("conv", list(FORMATS))
def test_store_equals_reference_bytes(conv: str, backend: str) -> None:
    """Every stored byte equals the reference's at the reference's offsets; -1 rows and all other bytes of the
    poisoned cache stay untouched."""
    rows_per_block, blocks, count = 4, 5, 12
    rows = hard_rows(conv, count)
    slots = [int(s) for s in RNG.permutation(rows_per_block * blocks)[:count]]
    slots[5] = slots[9] = -1
    rows[5] = np.nan  # never read: its slot is -1
    cache = poisoned_cache(conv, rows_per_block, blocks)
    quantize_store(f32(rows), torch.tensor(slots, device=DEVICE), cache, fmt=conv, rows_per_block=rows_per_block,
                   backend=backend)  # fmt: skip
    expected, pads = expected_cache(conv, rows, slots, rows_per_block, blocks)
    assert_same_bytes(cache_bytes(cache), expected, pads, f"{conv} {backend}")


@pytest.mark.parametrize("launch", [(1, 1, 1), (2, 2, 3), (4, 1, 0), None])
@pytest.mark.parametrize("conv", list(FORMATS))
def test_store_tiles_walked_by_fewer_programs(conv: str, launch: tuple[int, int, int] | None) -> None:
    """The store's programs walk tiles (rows per tile, warps, programs per SM; off CUDA the last is the program
    count): one program for every tile, a few programs looping over many, a last tile cut short by the row
    count, and the default launch. Every stored byte equals the reference's."""
    rows_per_block, blocks, count = 4, 5, 13
    rows = hard_rows(conv, count)
    slots = [int(s) for s in RNG.permutation(rows_per_block * blocks)[:count]]
    slots[2] = -1
    cache = poisoned_cache(conv, rows_per_block, blocks)
    call = StoreArgs(f32(rows), torch.tensor(slots, device=DEVICE), cache, FORMATS[conv], rows_per_block)
    quantize.store_rows(call, launch)
    expected, pads = expected_cache(conv, rows, slots, rows_per_block, blocks)
    assert_same_bytes(cache_bytes(cache), expected, pads, f"{conv} launch {launch}")


@pytest.mark.parametrize(
    ("launch", "error"),
    [((3, 1, 8), ValueError), ((2, 3, 8), ValueError), ((2, 1, -1), ValueError), ((2, 1), TypeError),
     ([2, 1, 8], TypeError), ((2.0, 1, 8), TypeError)],
)  # fmt: skip
def test_store_refuses_a_bad_launch(launch: Any, error: type) -> None:
    cache = poisoned_cache("v4_584", 4, 2)
    with pytest.raises(error, match=r"^launch: "):
        quantize.store_rows(StoreArgs(f32(hard_rows("v4_584", 4)), torch.tensor([0, 1, 2, 3], device=DEVICE), cache,
                                      FORMATS["v4_584"], 4), launch)  # fmt: skip
    assert torch.all(cache == POISON)


@pytest.mark.parametrize("conv", list(FORMATS))
def test_triton_store_equals_its_torch_twin(conv: str) -> None:
    rows = f32(hard_rows(conv, 40))
    slots = torch.randperm(64, device=DEVICE)[:40]
    caches = {b: poisoned_cache(conv, 8, 8) for b in BACKENDS}
    for backend, cache in caches.items():
        quantize_store(rows, slots, cache, fmt=conv, backend=backend)
    assert torch.equal(caches["torch"], caches["triton"])


def _codes_in(cache: torch.Tensor, conv: str, slots: list[int], part: str) -> list[bytes]:
    fmt = FORMATS[conv].row
    layout = public_layout(fmt, FORMATS[conv].rows_per_block(cache.shape[1]))
    flat = cache_bytes(cache)
    out = []
    for slot in slots:
        data_at, scale_at = slot_byte_offsets(layout, slot)
        out.append(
            flat[data_at : data_at + fmt.data_bytes] if part == "data" else flat[scale_at : scale_at + fmt.scale_bytes]
        )
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_e4m3_elements_round_like_the_grid(backend: str) -> None:
    """Each e4m3 code against ``reference.grids.e4m3_encode``: index_fp8 rows whose first value 448 pins the
    scale to 1, then every third positive bf16 value below 448 and every e4m3 midpoint +-1 ulp, both signs."""
    bf16 = np.arange(1, 0x43E0, 3, dtype=np.uint32).astype(np.uint16)
    values = (bf16.astype(np.uint32) << 16).view(np.float32)
    grid = sorted({float(E4M3FN.max_finite)} | {float(v) for v in _finite_grid(E4M3FN)})
    mids = [(a + b) / 2 for a, b in itertools.pairwise(grid)]
    values = np.concatenate([values, [nudged(m, u) for m in mids for u in (-1, 0, 1)]]).astype(np.float32)
    values = np.concatenate([values, -values])
    per_row = 127
    count = -(-len(values) // per_row)
    padded = np.resize(values, count * per_row).reshape(count, per_row)
    rows = np.concatenate([np.full((count, 1), 448, np.float32), padded], axis=1)
    cache = poisoned_cache("index_fp8_132", 64, -(-count // 64))
    quantize_store(f32(rows), torch.arange(count, device=DEVICE), cache, fmt="index_fp8_132", backend=backend)
    data = _codes_in(cache, "index_fp8_132", list(range(count)), "data")
    got = [b for row in data for b in row[1:]]
    expected = [e4m3_encode(Fraction(float(v))) for v in padded.reshape(-1)]
    bad = [(float(v), e, g) for v, e, g in zip(padded.reshape(-1), expected, got, strict=True) if e != g]
    assert not bad, f"{len(bad)} e4m3 codes differ, e.g. {bad[:5]}"


def _finite_grid(fmt: Any) -> list[Fraction]:
    from reference.grids import finite_values

    return [v for v in finite_values(fmt) if v >= 0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_e2m1_elements_round_like_the_grid(backend: str) -> None:
    """e2m1 codes against ``reference.grids.e2m1_encode``, through both scale kinds: index_fp4 groups whose
    amax 6 pins the UE8M0 scale to 1, and v41_fp4 groups whose amax 6 gives the e4m3 scale 1."""
    grid = [float(v) for v in _finite_grid(E2M1)]
    mids = [(a + b) / 2 for a, b in itertools.pairwise(grid)]
    listed = [float(nudged(m, u)) for m in mids for u in (-1, 0, 1)]
    listed += [float(nudged(v, u)) for v in grid for u in (-1, 1)] + [6.5, 7.0, 100.0, 1e-30, 2.0**-130]
    values = np.array(listed + [-v for v in listed], dtype=np.float32)
    for conv in ("index_fp4_68", "v41_fp4_288"):
        fmt = FORMATS[conv]
        g = fmt.group_size
        per_row = (g - 1) * fmt.groups
        count = -(-len(values) // per_row)
        body = np.resize(values, count * per_row).reshape(count, fmt.groups, g - 1)
        rows = np.concatenate([np.full((count, fmt.groups, 1), 6, np.float32), np.clip(body, -6, 6)], axis=2)
        rows = rows.reshape(count, fmt.dims)
        cache = poisoned_cache(conv, 1, count)
        quantize_store(f32(rows), torch.arange(count, device=DEVICE), cache, fmt=conv, backend=backend)
        for r, data in enumerate(_codes_in(cache, conv, list(range(count)), "data")):
            codes = [c for byte in data for c in (byte & 15, byte >> 4)]
            expected = [e2m1_encode(Fraction(float(v))) for v in rows[r]]
            assert codes == expected, f"{conv} row {r}: {codes} != {expected}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_scales_follow_the_exact_rules(backend: str) -> None:
    """UE8M0 and e4m3 scale bytes against ``reference.scales`` over amax values at and around every boundary
    (7 * 2^j and 6 * 2^j +-1, 2 ulps, e4m3 midpoints times 6), under the floors and at the clamps."""
    amaxes = [float(nudged(a * 2.0**j, u)) for a in (7, 6, 5.25) for j in range(-30, 20, 3) for u in (-2, -1, 0, 1, 2)]
    grid = [float(v) for v in _finite_grid(E4M3FN)]
    amaxes += [float(nudged(6 * (x + y) / 2, u)) for x, y in itertools.pairwise(grid) for u in (-1, 0, 1)]
    amaxes += [0.0, 1e-30, 3e-5, 1e-4, float(np.float32(1e-4)), 6 * 2.0**-9, 2688.0, 3000.0, 3e38, 2.0**-140]
    for conv, rule in (("v41_fp8_528", "fp8"), ("v41_fp4_288", "e4m3")):
        fmt = FORMATS[conv]
        count = -(-len(amaxes) // fmt.groups)
        peaks = np.resize(np.array(amaxes, np.float32), count * fmt.groups).reshape(count, fmt.groups, 1)
        rows = (peaks * RNG.uniform(-1, 1, (count, fmt.groups, fmt.group_size))).astype(np.float32)
        rows[:, :, :1] = -peaks
        cache = poisoned_cache(conv, 2, -(-count // 2))
        quantize_store(f32(rows.reshape(count, fmt.dims)), torch.arange(count, device=DEVICE), cache, fmt=conv,
                       backend=backend)  # fmt: skip
        scales = _codes_in(cache, conv, list(range(count)), "scales")
        for r in range(count):
            for gi in range(fmt.groups):
                a = Fraction(float(peaks[r, gi, 0]))
                want = fp8_scale_exponent(a) + 127 if rule == "fp8" else fp4_e4m3_scale_code(a)
                assert scales[r][gi] == want, f"{conv} amax {float(a)!r}: scale byte {scales[r][gi]}, want {want}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_bf16_tail_rounds_to_nearest_even(backend: str) -> None:
    """The v4_584 RoPE tail against ``reference.grids.encode(BF16, .)``: ties, +-1 ulp, subnormals, the largest
    finite values below the overflow threshold."""
    halves = (np.arange(0, 64, dtype=np.uint32) * 0x01230000 + 0x00008000).view(np.float32)
    values = np.concatenate([halves, [nudged(float(h), u) for h in halves[:20] for u in (-1, 1)],
                             [2.0**-140, -(2.0**-133), 3.38e38, -3.39e38, 1.0, -0.0]]).astype(np.float32)  # fmt: skip
    count = -(-len(values) // 64)
    tails = np.resize(values, (count, 64))
    rows = np.concatenate([RNG.standard_normal((count, 448)).astype(np.float32), tails], axis=1)
    cache = poisoned_cache("v4_584", 4, -(-count // 4))
    quantize_store(f32(rows), torch.arange(count, device=DEVICE), cache, fmt="v4_584", backend=backend)
    from reference.grids import BF16

    for r, data in enumerate(_codes_in(cache, "v4_584", list(range(count)), "data")):
        got = [int.from_bytes(data[448 + 2 * i : 450 + 2 * i], "little") for i in range(64)]
        assert got == [encode(BF16, Fraction(float(v))) for v in tails[r]], f"row {r}"


# ---------------------------------------------------------------------------------------------------------
# Gather-and-dequantize


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("conv", list(FORMATS))
def test_gather_equals_reference_decoding(conv: str, backend: str) -> None:
    """Rows stored by the reference read back as the reference's exact values, in any order with repeats; a -1
    slot reads as ``fill``; the cache is not modified."""
    fmt = FORMATS[conv]
    rows_per_block, blocks = 4, 3
    rows = hard_rows(conv, 10)
    rows[3] = np.clip(rows[3], -1e30, 1e30)  # index_fp4 would round 3e38 up to 6 * 2^126, beyond float32
    slots = [int(s) for s in RNG.permutation(rows_per_block * blocks)[:10]]
    image, _ = expected_cache(conv, rows, slots, rows_per_block, blocks)
    cache = torch.tensor(list(image), dtype=torch.uint8, device=DEVICE).reshape(blocks, -1)
    exact = {s: dequantize_row(fmt.row, quantize_row(fmt.row, [Fraction(float(v)) for v in r]))
             for r, s in zip(rows, slots, strict=True)}  # fmt: skip
    reads = [slots[3], slots[0], -1, slots[3], *slots[4:]]
    for fill in (0.0, math.nan):
        out = gather_dequantize(cache, torch.tensor(reads, device=DEVICE), fmt=conv, backend=backend, fill=fill)
        assert cache_bytes(cache) == image
        got = out.cpu().tolist()
        for r, slot in enumerate(reads):
            if slot == -1:
                assert all(v == fill or (math.isnan(v) and math.isnan(fill)) for v in got[r])
            else:
                assert [Fraction(v) for v in got[r]] == list(exact[slot]), f"{conv} slot {slot}"


@pytest.mark.filterwarnings("ignore:overflow encountered")
@pytest.mark.parametrize("conv", list(FORMATS))
def test_triton_gather_equals_its_torch_twin_on_arbitrary_bytes(conv: str) -> None:
    """Random bytes (NaN codes included: both give NaN there) decode identically, bit for bit."""
    cache = torch.randint(0, 256, (3, FORMATS[conv].block_bytes(4)), dtype=torch.uint8, device=DEVICE)
    slots = torch.tensor([0, 5, 11, 3, -1, 7], device=DEVICE)
    a = gather_dequantize(cache, slots, fmt=conv, backend="torch")
    b = gather_dequantize(cache, slots, fmt=conv, backend="triton")
    assert torch.equal(a.isnan(), b.isnan())
    assert torch.equal(a.nan_to_num().view(torch.int32), b.nan_to_num().view(torch.int32))


# ---------------------------------------------------------------------------------------------------------
# NaN, infinity and bad input


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("poison_value", [math.nan, math.inf, -math.inf])
def test_non_finite_stored_rows_are_refused_before_any_write(backend: str, poison_value: float) -> None:
    rows = hard_rows("v41_fp8_528", 4)[:3]
    rows[2, 17] = poison_value
    cache = poisoned_cache("v41_fp8_528", 4, 1)
    with pytest.raises(ValueError, match=r"^rows\[2\]"):
        quantize_store(f32(rows), torch.tensor([0, 1, 2], device=DEVICE), cache, fmt="v41_fp8_528", backend=backend)
    assert bool((cache == POISON).all())


@pytest.mark.parametrize("backend", BACKENDS)
def test_rope_value_beyond_bf16_is_refused(backend: str) -> None:
    rows = hard_rows("v4_584", 4)[:2]
    rows[1, 500] = 3.4e38  # finite in f32, infinity in bf16
    with pytest.raises(ValueError, match=r"^rows\[1\]"):
        quantize_store(f32(rows), torch.tensor([0, 1], device=DEVICE), poisoned_cache("v4_584", 2, 1), fmt="v4_584",
                       backend=backend)  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
def test_unvalidated_non_finite_group_reads_back_as_nan(backend: str) -> None:
    """Without validation a group holding NaN or infinity is stored as a NaN group (documented), and only that
    group reads back as NaN."""
    for conv in FORMATS:
        fmt = FORMATS[conv]
        rows = hard_rows(conv, 4)[:1]
        rows[0, 1] = math.inf
        cache = poisoned_cache(conv, 1, 1)
        quantize_store(f32(rows), torch.tensor([0], device=DEVICE), cache, fmt=conv, backend=backend, validate=False)
        out = gather_dequantize(cache, torch.tensor([0], device=DEVICE), fmt=conv, backend=backend)[0].cpu()
        assert bool(out[: fmt.group_size].isnan().all()), conv
        assert not bool(out[fmt.group_size :].isnan().any()), conv


def _store_call(**changes: Any) -> None:
    args: dict[str, Any] = dict(
        rows=torch.zeros(2, 512, device=DEVICE),
        slots=torch.tensor([0, 1], device=DEVICE),
        cache=poisoned_cache("v41_fp8_528", 4, 2),
        fmt="v41_fp8_528",
    )
    args.update(changes)
    quantize_store(args.pop("rows"), args.pop("slots"), args.pop("cache"), **args)


STORE_REFUSALS = [
    ("slot past the cache", dict(slots=torch.tensor([0, 8])), ValueError, "slots: slot 8 is past"),
    ("slot below -1", dict(slots=torch.tensor([-2, 1])), ValueError, "slots: slot -2"),
    ("two rows, one slot", dict(slots=torch.tensor([3, 3])), ValueError, "slots: 1 slot"),
    ("int32 slots", dict(slots=torch.tensor([0, 1], dtype=torch.int32)), TypeError, "slots:"),
    ("one slot short", dict(slots=torch.tensor([0])), ValueError, "slots:"),
    ("f64 rows", dict(rows=torch.zeros(2, 512, dtype=torch.float64)), TypeError, "rows:"),
    ("rows too narrow", dict(rows=torch.zeros(2, 128)), ValueError, "rows:"),
    ("strided rows", dict(rows=torch.zeros(512, 2).t()), ValueError, "rows:"),
    ("cache of int8", dict(cache=torch.zeros(2, 2112, dtype=torch.int8)), TypeError, "cache:"),
    ("cache block of no whole rows", dict(cache=torch.zeros(2, 2000, dtype=torch.uint8)), ValueError, "cache:"),
    ("rows_per_block not the cache's", dict(rows_per_block=3), ValueError, "rows_per_block:"),
    ("unknown format", dict(fmt="v5_999"), ValueError, "fmt:"),
    ("unknown backend", dict(backend="cuda"), ValueError, "backend:"),
    ("slots on another device", dict(slots=torch.tensor([0, 1], device="meta")), ValueError, "slots:"),
    ("layer past the layers", dict(layer=1), ValueError, "layer: must be in .0, 1. .the cache"),
    ("negative layer", dict(layer=-1), ValueError, "layer: must be >= 0"),
    ("block not split into the layers", dict(layers=5), ValueError, "cache: a block of"),
    ("float layers", dict(layers=2.0), TypeError, "layers: must be an int"),
]


@pytest.mark.parametrize(("what", "change", "error", "message"), STORE_REFUSALS, ids=[r[0] for r in STORE_REFUSALS])
def test_bad_store_input_is_refused(what: str, change: dict[str, Any], error: type, message: str) -> None:
    change = {k: (v.to(DEVICE) if isinstance(v, torch.Tensor) and v.device.type != "meta" else v)
              for k, v in change.items()}  # fmt: skip
    with pytest.raises(error, match="^" + message.replace("(", r"\(")):
        _store_call(**change)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("conv", list(FORMATS))
def test_layers_of_one_allocation_do_not_alias(conv: str, backend: str) -> None:
    """Three layers in one allocation (block b holds each layer's page in turn): each layer's rows land in its own
    pages exactly as a one-layer cache holds them, other layers' bytes stay, and each layer reads back its own."""
    rows_per_block, blocks, layers = 2, 3, 3
    page = FORMATS[conv].block_bytes(rows_per_block)
    g = np.random.default_rng(6)
    slots = torch.tensor([4, 0, 3], device=DEVICE)
    cache = torch.full((blocks, layers * page), POISON, dtype=torch.uint8, device=DEVICE)
    alone = []
    for layer in range(layers):
        rows = f32(g.standard_normal((3, FORMATS[conv].dims)).astype(np.float32) * (layer + 1))
        quantize_store(rows, slots, cache, fmt=conv, layers=layers, layer=layer, backend=backend)
        single = poisoned_cache(conv, rows_per_block, blocks)
        quantize_store(rows, slots, single, fmt=conv, backend=backend)
        alone.append(single)
    for layer in range(layers):
        assert torch.equal(cache[:, layer * page : (layer + 1) * page], alone[layer]), layer
        got = gather_dequantize(cache, slots, fmt=conv, layers=layers, layer=layer, backend=backend)
        assert torch.equal(got, gather_dequantize(alone[layer], slots, fmt=conv, backend=backend)), layer


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("conv", ["v4_584", "v41_fp8_528"])
def test_gather_from_an_empty_cache_gives_the_fill(conv: str, backend: str) -> None:
    """A cache of no block holds no slot: slot -1 reads as ``fill`` (the torch twin once indexed its empty bytes)."""
    cache = torch.zeros(0, FORMATS[conv].block_bytes(64), dtype=torch.uint8, device=DEVICE)
    got = gather_dequantize(cache, torch.tensor([-1, -1], device=DEVICE), fmt=conv, fill=2.5, backend=backend)
    assert torch.equal(got, torch.full((2, 512), 2.5, device=DEVICE))


def test_gather_refuses_slots_past_the_cache_and_bad_outputs() -> None:
    cache = poisoned_cache("index_fp4_68", 4, 2)
    with pytest.raises(ValueError, match=r"^slots: slot 8 is past"):
        gather_dequantize(cache, torch.tensor([1, 8], device=DEVICE), fmt="index_fp4_68")
    with pytest.raises(ValueError, match=r"^out:"):
        gather_dequantize(cache, torch.tensor([1], device=DEVICE), fmt="index_fp4_68",
                          out=torch.empty(2, 128, device=DEVICE))  # fmt: skip


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a cache larger than 2^31 bytes on a GPU")
def test_slots_beyond_two_gigabytes_are_addressed_in_64_bits() -> None:
    conv, rows_per_block = "v4_584", 64
    blocks = 2**31 // FORMATS[conv].block_bytes(rows_per_block) + 2
    cache = torch.zeros(blocks, FORMATS[conv].block_bytes(rows_per_block), dtype=torch.uint8, device="cuda")
    rows = f32(hard_rows(conv, 4)[:2])
    last = blocks * rows_per_block - 1
    for backend in BACKENDS:
        quantize_store(rows, torch.tensor([last, 5], device="cuda"), cache, fmt=conv, backend=backend)
        back = gather_dequantize(cache, torch.tensor([last, 5], device="cuda"), fmt=conv, backend=backend)
        expected = dequantize_row(
            FORMATS[conv].row, quantize_row(FORMATS[conv].row, [Fraction(float(v)) for v in rows[0].tolist()])
        )
        assert [Fraction(v) for v in back[0].tolist()] == list(expected)
        assert int(cache[: blocks - 1].count_nonzero()) > 0 and int(cache[-1].count_nonzero()) > 0


# ---------------------------------------------------------------------------------------------------------
# Sparse attention

SMALL = Config(block_h=16, block_n=16, num_warps=4, num_stages=1)  # several lane tiles even for short rows


def f32_ulp(x: float) -> float:
    return 2.0 ** (math.frexp(abs(x))[1] - 24) if x and math.isfinite(x) else 2.0**-149


def attention_case(dtype: torch.dtype, invalid: str, seed: int = 0) -> dict[str, Any]:
    """q[3, 5, 32], kv[40, 32] on a 1/8 grid (bf16-exact), K = 70 lanes. Row 0: valid lanes with duplicates;
    row 1: a leading block of 32 invalid lanes (two whole tiles), then valid lanes with invalid ones between;
    row 2: no valid lane. Sinks: finite, -inf (none), +inf (zero output) and finite."""
    g = np.random.default_rng(seed)
    M, H, D, N, K = 3, 5, 32, 40, 70
    q = g.integers(-12, 13, (M, H, D)) / 8
    kv = g.integers(-12, 13, (N, D)) / 8
    lanes = g.integers(0, N, (M, K))
    lanes[0, 5:10] = lanes[0, 0]
    bad = [-1] if invalid == "minus_one_only" else [-1, -5, N, N + 100, -(2**31)]
    lanes[1, :32] = g.choice(bad, 32)
    lanes[1, 40:70:3] = g.choice(bad, 10)
    lanes[2, :] = g.choice(bad, K)
    sink = [0.75, -math.inf, math.inf, -2.0, 3.5]
    return {
        "q": torch.tensor(q, dtype=dtype, device=DEVICE),
        "kv": torch.tensor(kv, dtype=dtype, device=DEVICE),
        "indices": torch.tensor(lanes, dtype=torch.int32, device=DEVICE),
        "sink": torch.tensor(sink, dtype=torch.float32, device=DEVICE),
        "scale": 0.3,
        "dv": 24,
        "invalid": invalid,
    }


EmptyRow = Literal["zero", "nan"]


def exact_result(case: dict[str, Any], empty_row: EmptyRow) -> tuple[list[list[list[float]]], list[list[float]]]:
    """reference.attention, row by row, as floats (NaN and +inf for the markers)."""
    kv = [[Fraction(v) for v in row] for row in case["kv"].float().cpu().tolist()]
    sinks = [POS_INF if s == math.inf else None if s == -math.inf else Fraction(s) for s in case["sink"].tolist()]
    outs, lses = [], []
    for m, heads in enumerate(case["q"].float().cpu().tolist()):
        result = exact_attention([[Fraction(v) for v in h] for h in heads], kv, case["indices"][m].tolist(),
                                 scale=Fraction(case["scale"]), sinks=sinks, values=[r[: case["dv"]] for r in kv],
                                 invalid=case["invalid"], empty_row=empty_row)  # fmt: skip
        outs.append([[_as_float(v) for v in head.out] for head in result])
        lses.append([_as_float(head.lse) for head in result])
    return outs, lses


def _as_float(v: Any) -> float:
    return math.nan if v is NAN else math.inf if v is POS_INF else float(v)


def run(case: dict[str, Any], **kw: Any) -> tuple[torch.Tensor, torch.Tensor]:
    kw.setdefault("invalid", case["invalid"])
    return sparse_attention(case["q"], case["kv"], case["indices"], case["sink"], scale=case["scale"],
                            dv=case["dv"], **kw)  # fmt: skip


def assert_close(got: torch.Tensor, exact: Any, allowed: Any, what: str) -> None:
    g, e = np.asarray(got.cpu().tolist(), dtype=np.float64), np.asarray(exact, dtype=np.float64)
    same_special = (np.isnan(g) & np.isnan(e)) | (np.isinf(e) & (g == e))
    with np.errstate(invalid="ignore"):
        err = np.where(same_special, 0.0, np.abs(g - e))
    bad = ~(err <= np.broadcast_to(allowed, err.shape))
    assert not bad.any(), f"{what}: {int(bad.sum())} lanes off, e.g. got {g[bad][:4]} exact {e[bad][:4]}"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("empty_row", ["zero", "nan"])
@pytest.mark.parametrize("invalid", ["out_of_range", "minus_one_only"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_f64_mode_is_the_exact_result_rounded(
    dtype: torch.dtype, invalid: str, empty_row: EmptyRow, backend: str
) -> None:
    """precision="f64": within 2 float32 ulps of the exact value (one rounding of a float64 evaluation), the
    leading invalid tiles skipped, the empty row per convention, the sink once (+inf: output 0)."""
    case = attention_case(dtype, invalid)
    out, lse = run(case, empty_row=empty_row, precision="f64", backend=backend, config=SMALL)
    exact_out, exact_lse = exact_result(case, empty_row)
    ulps = np.vectorize(f32_ulp)
    assert_close(out, exact_out, 2 * ulps(np.asarray(exact_out, dtype=np.float64)), "out")
    assert_close(lse, exact_lse, 2 * ulps(np.asarray(exact_lse, dtype=np.float64)), "lse")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_f32_mode_within_twice_the_f32_torch_error(dtype: torch.dtype) -> None:
    """precision="f32" (Triton) against the exact result: at most twice the float32 torch twin's error on each
    lane plus 4 ulps of the lane's largest value magnitude (a sum of weighted values cancels down to far below
    its terms, and no float32 evaluation is exact there)."""
    case = attention_case(dtype, "out_of_range", seed=1)
    out, lse = run(case, precision="f32", config=SMALL)
    base_out, base_lse = run(case, precision="f32", backend="torch")
    exact_out, exact_lse = exact_result(case, "zero")
    e_out, e_lse = np.asarray(exact_out), np.asarray(exact_lse)
    term = np.abs(case["kv"][:, : case["dv"]].float().cpu().numpy()).max()
    allowed = 2 * np.abs(np.nan_to_num(base_out.cpu().numpy() - e_out)) + 4 * f32_ulp(float(term))
    assert_close(out, exact_out, allowed, "out")
    with np.errstate(invalid="ignore"):
        base_err = np.nan_to_num(np.abs(base_lse.cpu().numpy() - e_lse), posinf=0)
    lse_allowed = 2 * base_err + 4 * np.vectorize(f32_ulp)(e_lse)
    assert_close(lse, exact_lse, lse_allowed, "lse")


def weighted_magnitude(case: dict[str, Any]) -> np.ndarray:
    """``sum_j e^{s_j} |v_j| / (e^{sink} + sum_j e^{s_j})`` per output lane, in float64: what rounding each
    probability by a relative ``u`` can move that lane by, divided by ``u``."""
    q, kv = case["q"].double().cpu().numpy(), case["kv"].double().cpu().numpy()
    lanes, sink = case["indices"].cpu().numpy(), case["sink"].double().cpu().numpy()
    out = np.zeros((q.shape[0], q.shape[1], case["dv"]))
    for m in range(q.shape[0]):
        rows = [j for j in lanes[m] if 0 <= j < kv.shape[0]]
        if not rows:
            continue
        s = case["scale"] * q[m] @ kv[rows].T
        top = s.max(axis=1, keepdims=True)
        w = np.exp(s - top)
        out[m] = w @ np.abs(kv[rows, : case["dv"]]) / (w.sum(axis=1) + np.exp(sink - top[:, 0]))[:, None]
    return out


def test_bf16_mode_within_twice_the_bf16_torch_error() -> None:
    """precision="bf16" rounds each probability to bf16 (relative error <= 2^-9) as a bf16 kernel does: every
    lane within 2^-9 of its weighted magnitude plus 8 f32 ulps, and the largest error over the tensor at most
    twice that of torch's bf16 evaluation (the flash-attention rule)."""
    case = attention_case(torch.bfloat16, "out_of_range", seed=2)
    exact_out, _ = exact_result(case, "zero")
    e = np.asarray(exact_out)
    got = run(case, precision="bf16", config=SMALL)[0].cpu().numpy()
    bound = 2.0**-9 * weighted_magnitude(case) + 8 * np.vectorize(f32_ulp)(e)
    assert_close(torch.tensor(got), exact_out, bound, "out")
    ours = np.abs(got - e).max()
    torch_bf16 = np.abs(run(case, precision="bf16", backend="torch")[0].cpu().numpy() - e).max()
    assert ours <= 2 * torch_bf16, (ours, torch_bf16)
    assert ours > 1e-5, "the bf16 mode should round the probabilities: otherwise this test checks nothing"


EXTREME_SINKS = [1e30, -1e30, 3.4028234663852886e38, 1000.0, 120.0]
"""Sinks across the float32 range: e^{sink - m} overflows float32 at 1e30, the f32 maximum, 1000 and 120 (the
row maxima here are below 25), and underflows at -1e30."""


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("precision", ["f64", "f32", "bf16"])
def test_extreme_sinks_in_every_mode(precision: str, backend: str) -> None:
    """Every mode and backend on sinks far above and below the row: no NaN or infinity outside the empty row,
    lse untouched by the sink, and each output within the mode's rounding of the exact one (0 where the sink
    swamps the row, the sink-free result at -1e30)."""
    case = attention_case(torch.bfloat16, "out_of_range", seed=5)
    case["sink"] = torch.tensor(EXTREME_SINKS, dtype=torch.float32, device=DEVICE)
    out, lse = run(case, precision=precision, backend=backend, config=SMALL)
    exact_out, exact_lse = exact_result(case, "zero")
    assert bool(torch.isfinite(out[:2]).all()) and bool(torch.isfinite(lse[:2]).all())
    relative = {"f64": 2.0**-23, "f32": 2.0**-20, "bf16": 2.0**-4}[precision]  # bf16 torch rounds the scores
    ulps = np.vectorize(lambda x: max(f32_ulp(x), 2.0**-149))  # below float32's range: its smallest step
    e = np.asarray(exact_out, dtype=np.float64)
    assert_close(out, exact_out, relative * weighted_magnitude(case) + 8 * ulps(e), "out")
    lse_exact = np.asarray(exact_lse, dtype=np.float64)
    lse_relative = relative if precision == "bf16" else 0.0
    assert_close(lse, exact_lse, 8 * ulps(lse_exact) + lse_relative * np.nan_to_num(np.abs(lse_exact)), "lse")
    assert bool((out[:2, [0, 2, 3]] == 0).all())


@pytest.mark.parametrize("precision", ["f64", "f32", "bf16"])
def test_lane_order_does_not_matter(precision: str) -> None:
    """Each row's lanes reversed and shuffled (invalid ones with them): the same result within 1 f32 ulp
    (f64: almost always equal) or the mode's rounding of the probabilities (f32, bf16)."""
    case = attention_case(torch.bfloat16, "out_of_range", seed=3)
    out, lse = run(case, precision=precision, config=SMALL)
    g = torch.Generator().manual_seed(0)
    for order in (torch.arange(70).flip(0), torch.randperm(70, generator=g)):
        shuffled = dict(case, indices=case["indices"][:, order.to(DEVICE)].contiguous())
        out2, lse2 = run(shuffled, precision=precision, config=SMALL)
        tol = {"f64": 1.2e-7, "f32": 1e-6, "bf16": 2e-2}[precision]
        assert torch.allclose(out, out2, rtol=tol, atol=tol * out.abs().max().item(), equal_nan=True)
        assert torch.allclose(lse, lse2, rtol=1e-6, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("empty_row", ["zero", "nan"])
def test_every_output_lane_is_written(empty_row: str) -> None:
    """Outputs pre-filled with NaN: afterwards NaN remains only where the empty-row convention puts it."""
    case = attention_case(torch.bfloat16, "out_of_range")
    out = torch.full((3, 5, 24), math.nan, device=DEVICE)
    lse = torch.full((3, 5), math.nan, device=DEVICE)
    run(case, empty_row=empty_row, out=out, lse=lse, config=SMALL)
    empty = torch.tensor([False, False, True], device=DEVICE)
    want_nan = empty if empty_row == "nan" else torch.zeros_like(empty)
    assert torch.equal(out.isnan().all(dim=2).all(dim=1), want_nan)
    assert torch.equal(out.isnan().any(dim=2).any(dim=1), want_nan)
    assert torch.equal(lse.isnan().any(dim=1), want_nan)
    if empty_row == "zero":
        assert bool((out[2] == 0).all()) and bool((lse[2] == math.inf).all())


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("empty_row", ["zero", "nan"])
def test_a_call_of_no_lanes_answers_every_row_as_empty(backend: str, empty_row: str) -> None:
    q = torch.ones((2, 3, 8), device=DEVICE)
    kv = torch.ones((4, 8), device=DEVICE)
    lanes = torch.zeros((2, 0), dtype=torch.int32, device=DEVICE)
    sink = torch.zeros(3, device=DEVICE)
    out, lse = sparse_attention(q, kv, lanes, sink, scale=1.0, dv=8, empty_row=empty_row, backend=backend)
    if empty_row == "zero":
        assert bool((out == 0).all()) and bool((lse == math.inf).all())
    else:
        assert bool(out.isnan().all()) and bool(lse.isnan().all())


@pytest.mark.parametrize("native_fp8", [True, False], ids=["hardware-conversion", "integer-decode"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("conv", ["v4_584", "v41_fp8_528"])
def test_fp8_kv_is_dequantized_in_the_kernel(conv: str, backend: str, native_fp8: bool) -> None:
    """An FP8 cache (V4 584-byte or V4.1 528-byte rows) read by slot: equal to the same kernel on the dequantized
    rows (which bf16 holds exactly), and in f64 mode within 2 ulps of the exact attention over the reference's
    decoded rows; both ways of decoding the e4m3 codes in the kernel (``Config.native_fp8``) for V4."""
    if not native_fp8 and (backend == "torch" or conv != "v4_584"):
        pytest.skip("the integer decode is the earlier V4 kernel path; the torch twin has one way of decoding")
    rows_per_block, blocks = 4, 5
    n = rows_per_block * blocks
    g = np.random.default_rng(4)
    rows = (g.standard_normal((n, 512)) * np.exp2(g.integers(-3, 3, (n, 1)))).astype(np.float32)
    rows[:, :: FORMATS[conv].group_size] *= np.exp2(g.integers(-6, 7, (n, 1))).astype(np.float32)  # wide groups
    cache = poisoned_cache(conv, rows_per_block, blocks)
    slots = torch.tensor(g.permutation(n), device=DEVICE)
    quantize_store(f32(rows), slots, cache, fmt=conv, backend=backend)
    decoded = gather_dequantize(cache, torch.arange(n, device=DEVICE), fmt=conv, backend=backend)
    q = torch.tensor(g.integers(-8, 9, (2, 3, 512)) / 16, dtype=torch.bfloat16, device=DEVICE)
    lanes = torch.tensor(g.integers(-3, n + 3, (2, 24)), dtype=torch.int32, device=DEVICE)
    lanes[1, :16] = -1
    sink = torch.tensor([0.5, -math.inf, 1.0], device=DEVICE)
    kw: dict[str, Any] = dict(scale=0.05, dv=512, backend=backend, precision="f64", config=SMALL)
    fp8_config = dataclasses.replace(SMALL, native_fp8=native_fp8)
    out8, lse8 = sparse_attention(q, cache, lanes, sink, kv_format=conv, **{**kw, "config": fp8_config})
    out16, lse16 = sparse_attention(q, decoded.to(torch.bfloat16), lanes, sink, **kw)
    assert torch.equal(decoded.to(torch.bfloat16).float(), decoded), f"{conv} values are bf16 values"
    assert torch.equal(out8, out16) and torch.equal(lse8, lse16)
    case = {"q": q, "kv": decoded, "indices": lanes, "sink": sink, "scale": 0.05, "dv": 512, "invalid": "out_of_range"}
    exact_out, exact_lse = exact_result(case, "zero")
    ulps = np.vectorize(f32_ulp)
    assert_close(out8, exact_out, 2 * ulps(np.asarray(exact_out)), "out")
    assert_close(lse8, exact_lse, 2 * ulps(np.asarray(exact_lse)), "lse")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("conv", ["v4_584", "v41_fp8_528"])
def test_fp8_kv_attention_without_lanes(backend: str, conv: str) -> None:
    """K = 0 lanes over an FP8 cache: every row is empty (out 0, lse +inf under empty_row="zero"); the torch
    backend once failed to reshape its zero gathered rows."""
    layout = public_layout(FORMATS[conv].row, 4)
    cache = torch.zeros(2, layout.block_bytes, dtype=torch.uint8, device=DEVICE)
    q = torch.ones(3, 2, 512, dtype=torch.bfloat16, device=DEVICE)
    lanes = torch.zeros(3, 0, dtype=torch.int32, device=DEVICE)
    sink = torch.zeros(2, dtype=torch.float32, device=DEVICE)
    out, lse = sparse_attention(q, cache, lanes, sink, scale=0.5, dv=512, kv_format=conv, rows_per_block=4,
                                backend=backend)  # fmt: skip
    assert torch.equal(out.cpu(), torch.zeros(3, 2, 512))
    assert torch.equal(lse.cpu(), torch.full((3, 2), math.inf))


@pytest.mark.parametrize("backend", BACKENDS)
def test_fp8_528_kv_reads_the_rows_in_every_mode(backend: str) -> None:
    """A V4.1 528-byte cache in the bf16 and f32 modes (the benchmarked paths; f64 above): equal to the same call
    on the dequantized bf16 rows, whose values the cache holds exactly."""
    conv, rows_per_block, blocks = "v41_fp8_528", 8, 3
    n = rows_per_block * blocks
    g = np.random.default_rng(6)
    rows = (g.standard_normal((n, 512)) * np.exp2(g.integers(-4, 4, (n, 16)).repeat(32, axis=1))).astype(np.float32)
    cache = poisoned_cache(conv, rows_per_block, blocks)
    quantize_store(f32(rows), torch.arange(n, device=DEVICE), cache, fmt=conv, backend=backend)
    decoded = gather_dequantize(cache, torch.arange(n, device=DEVICE), fmt=conv, backend=backend)
    q = torch.tensor(g.integers(-8, 9, (3, 4, 512)) / 16, dtype=torch.bfloat16, device=DEVICE)
    lanes = torch.tensor(g.integers(-2, n + 2, (3, 40)), dtype=torch.int32, device=DEVICE)
    sink = torch.tensor([0.5, -math.inf, 1.0, -1.0], device=DEVICE)
    compiled = backend == "triton" and DEVICE.type == "cuda"
    for precision, p_ulp in (("bf16", 2.0**-8), ("f32", 2.0**-23)):
        kw: dict[str, Any] = dict(scale=0.05, dv=512, backend=backend, precision=precision, config=SMALL)
        out8, lse8 = sparse_attention(q, cache, lanes, sink, kv_format=conv, **kw)
        out16, lse16 = sparse_attention(q, decoded.to(torch.bfloat16), lanes, sink, **kw)
        if not compiled:
            assert torch.equal(out8, out16) and torch.equal(lse8, lse16), precision
            continue
        # Compiled, the two kernels multiply the same bf16 operands but may take other MMA instructions, so
        # the f32 scores can differ in their last bits and a probability by one rounding (p_ulp relative): an
        # output moves by at most a few of those times max |v|; a wrong scale or code moves it by O(max |v|).
        vmax = decoded.abs().max().item()
        out_err, lse_err = (out8 - out16).abs().max().item(), (lse8 - lse16).abs().max().item()
        assert out_err <= 4 * p_ulp * vmax + 1e-5 * vmax and lse_err <= 1e-5, (precision, out_err, lse_err)


def test_integer_decode_is_refused_for_528_caches() -> None:
    cache = poisoned_cache("v41_fp8_528", 4, 1)
    q = torch.zeros(1, 2, 512, dtype=torch.bfloat16, device=DEVICE)
    lanes = torch.zeros(1, 4, dtype=torch.int32, device=DEVICE)
    with pytest.raises(ValueError, match=r"^config: native_fp8=False"):
        sparse_attention(q, cache, lanes, None, scale=1.0, dv=512, kv_format="v41_fp8_528",
                         config=dataclasses.replace(SMALL, native_fp8=False))  # fmt: skip


@pytest.mark.parametrize("lane", [-2, 40])
def test_minus_one_only_refuses_other_invalid_lanes(lane: int) -> None:
    case = attention_case(torch.float32, "minus_one_only")
    case["indices"][0, 7] = lane
    with pytest.raises(ValueError, match=r"^indices: lane"):
        run(case)
    run(case, invalid="out_of_range")  # the same lanes are skipped under out_of_range


ATTENTION_REFUSALS = [
    ("f16 q", lambda c: c.update(q=c["q"].half()), TypeError, "q:"),
    ("kv of another dtype", lambda c: c.update(kv=c["kv"].double()), TypeError, "kv:"),
    ("kv of another width", lambda c: c.update(kv=c["kv"][:, :16].contiguous()), ValueError, "kv:"),
    ("int64 indices", lambda c: c.update(indices=c["indices"].long()), TypeError, "indices:"),
    ("indices for other rows", lambda c: c.update(indices=c["indices"][:2]), ValueError, "indices:"),
    ("a sink too few", lambda c: c.update(sink=c["sink"][:4]), ValueError, "sink:"),
    ("dv past D", lambda c: c.update(dv=33), ValueError, "dv:"),
    ("strided q", lambda c: c.update(q=c["q"].transpose(0, 1).contiguous().transpose(0, 1)), ValueError, "q:"),
    ("unknown empty_row", lambda c: c.update(empty_row="inf"), ValueError, "empty_row:"),
    ("unknown invalid", lambda c: c.update(invalid="negative"), ValueError, "invalid:"),
    ("unknown precision", lambda c: c.update(precision="tf32"), ValueError, "precision:"),
    ("index cache as kv", lambda c: c.update(kv=torch.zeros(2, 264, dtype=torch.uint8), kv_format="index_fp4_68"),
     ValueError, "kv_format:"),
    ("fp4 cache as kv", lambda c: c.update(kv=torch.zeros(2, 4608, dtype=torch.uint8), kv_format="v41_fp4_288"),
     ValueError, "kv_format:"),
    ("528 cache of a bad block size",
     lambda c: c.update(kv=torch.zeros(2, 1000, dtype=torch.uint8), kv_format="v41_fp8_528"), ValueError,
     "kv: a block of 1000 bytes"),
    ("528 cache of 1 dimension", lambda c: c.update(kv=torch.zeros(4224, dtype=torch.uint8), kv_format="v41_fp8_528"),
     ValueError, "kv: must have 2 dimensions"),
    ("528 cache as bytes of another type",
     lambda c: c.update(kv=torch.zeros(2, 4224, dtype=torch.int8), kv_format="v41_fp8_528"), TypeError, "kv:"),
    ("528 cache of other rows per block",
     lambda c: c.update(kv=torch.zeros(2, 4224, dtype=torch.uint8), kv_format="v41_fp8_528", rows_per_block=4),
     ValueError, "rows_per_block: 4 does not match kv's 4224-byte blocks"),
    ("528 cache under a 32-wide q", lambda c: c.update(kv=torch.zeros(2, 4224, dtype=torch.uint8),
     kv_format="v41_fp8_528"), ValueError, "q: a v41_fp8_528 cache holds 512-wide rows"),
    ("528 cache with dv < D", lambda c: c.update(q=torch.zeros(3, 5, 512, device=DEVICE),
     kv=torch.zeros(2, 4224, dtype=torch.uint8),
     kv_format="v41_fp8_528", dv=256), ValueError, "dv: a v41_fp8_528 cache is read whole"),
    ("q on another device", lambda c: c.update(q=torch.zeros(3, 5, 32, device="meta")), ValueError, "kv:"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("what", "change", "error", "message"), ATTENTION_REFUSALS, ids=[r[0] for r in ATTENTION_REFUSALS]
)
def test_bad_attention_input_is_refused(what: str, change: Any, error: type, message: str) -> None:
    case = attention_case(torch.float32, "out_of_range")
    change(case)
    q, kv, indices, sink = (case.pop(k) for k in ("q", "kv", "indices", "sink"))
    kv = kv.to(DEVICE) if kv.device.type == "cpu" else kv
    with pytest.raises(error, match="^" + message):
        sparse_attention(q, kv, indices, sink, **case)


def test_default_attention_configs_fit_sm90_shared_memory() -> None:
    """The compiler accepts a kernel that needs more shared memory than sm_90 has; only its launch fails. Lower
    the default configurations at the benchmark's shapes here (Triton ships ptxas), the Gluon kernels the default
    path runs on sm_90 among them, and require that each compiles under this Triton and fits."""
    import os
    import subprocess
    import sys

    from fast.cache import compile_check

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_DEFAULT_FP_FUSION"] = "1"
    run = subprocess.run([sys.executable, "-m", "fast.cache.compile_check", "--defaults"], capture_output=True,
                         text=True, env=env, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count("smem") == len(compile_check.default_cases()) == 6 + 3, run.stdout
    assert "paired warp groups (Gluon), bf16 kv" in run.stdout and "warp specialized (Gluon), v4_584" in run.stdout


def test_default_config_refuses_an_unknown_precision_or_format() -> None:
    from fast.cache.attention import default_config

    with pytest.raises(ValueError, match="precision"):
        default_config(64, 512, "v4_584", "fp16")
    with pytest.raises(ValueError, match=r"^kv_format: must be None or one of v4_584, v41_fp8_528, got 'v41_fp4_288'"):
        default_config(64, 512, "v41_fp4_288")


@pytest.mark.parametrize(
    ("field", "value", "rule"),
    [("block_h", 48, "power of two"), ("block_n", 0, "power of two"), ("num_warps", 6, "power of two"),
     ("num_stages", 0, ">= 1"), ("prefetch", -1, ">= 0"), ("prefetch", 1.0, ">= 0")],
)  # fmt: skip
def test_attention_config_refuses_a_bad_field(field: str, value: object, rule: str) -> None:
    """A launch configuration is checked when it is made: the error names the field and its rule."""
    with pytest.raises(ValueError, match=rf"^{field}: must be .*{re.escape(rule)}.*got {re.escape(repr(value))}$"):
        Config(**cast(dict[str, Any], {field: value}))
    good: dict[str, Any] = {field: {"num_stages": 3, "prefetch": 2}.get(field, 16)}
    assert Config(**good) is not None


# ---------------------------------------------------------------------------------------------------------
# RMSNorm, RoPE, then store


def _norm_rope_inputs(conv: str, count: int) -> dict[str, Any]:
    fmt = FORMATS[conv]
    rows = RNG.standard_normal((count, fmt.dims)) * np.exp2(RNG.integers(-8, 8, (count, 1)))
    return dict(
        rows=f32(rows),
        weight=f32(0.5 + RNG.random(fmt.dims)),
        cos_sin=f32(RNG.uniform(-1, 1, (6, 64))),
        positions=torch.tensor(RNG.integers(0, 6, count), device=DEVICE),
        eps=1e-6,
        rope_dim=64,
    )


@pytest.mark.parametrize("conv", sorted(FORMATS))
def test_norm_rope_store_is_faithful(conv: str) -> None:
    """Both backends' stored rows are faithful quantizations of the exact normed and rotated rows (their float32
    steps may differ on a GPU: torch's rsqrt and Triton's 1 / sqrt), and rows at slot -1 are not stored."""
    from fractions import Fraction

    from reference.formats import QuantizedRow
    from reference.norm_rope import faithful, norm_rope_row

    fmt = FORMATS[conv]
    args = _norm_rope_inputs(conv, 3)
    args["rows"][1] = float("nan")
    layout = public_layout(fmt.row, 2)
    table = args["cos_sin"].cpu().tolist()
    for backend in BACKENDS:
        cache = poisoned_cache(conv, 2, 2)
        norm_rope_store(**args, slots=torch.tensor([2, -1, 0], device=DEVICE), cache=cache, fmt=conv, backend=backend)
        flat = cache_bytes(cache)
        for i, slot in ((0, 2), (2, 0)):
            data_at, scale_at = slot_byte_offsets(layout, slot)
            data, scales = flat[data_at : data_at + fmt.row.data_bytes], flat[scale_at : scale_at + fmt.row.scale_bytes]
            values, weight = ([Fraction(v) for v in t.tolist()] for t in (args["rows"][i], args["weight"]))
            p = int(args["positions"][i])
            cos, sin = [Fraction(v) for v in table[p][:32]], [Fraction(v) for v in table[p][32:]]
            y, sizes = norm_rope_row(values, weight, Fraction(1e-6), cos, sin, 64)
            assert faithful(fmt.row, QuantizedRow(data, scales), y, sizes) is None, (backend, slot)
        untouched = [slot_byte_offsets(layout, s) for s in (1, 3)]
        assert all(flat[d] == POISON and flat[c] == POISON for d, c in untouched)


NORM_ROPE_REFUSALS = [
    ("weight of another width", dict(weight=torch.ones(128)), ValueError, "weight: must be f32[512]"),
    ("odd rope_dim", dict(rope_dim=63), ValueError, "rope_dim: must be even, positive and <= 512, got 63"),
    ("float rope_dim", dict(rope_dim=64.0), TypeError, "rope_dim: must be an int, got float"),
    ("cos_sin of another width", dict(cos_sin=torch.ones(6, 32)), ValueError, "cos_sin: must be f32[P, 64]"),
    ("one position short", dict(positions=torch.tensor([0])), ValueError, "positions: must have one position per row"),
    (
        "position past the table",
        dict(positions=torch.tensor([0, 6])),
        ValueError,
        "positions: a stored row's position must be in [0, 6)",
    ),
    ("negative eps", dict(eps=-1.0), ValueError, "eps: must be a finite number >= 0, got -1.0"),
    ("rows too narrow", dict(rows=torch.zeros(2, 128)), ValueError, "rows: v41_fp8_528 rows have 512 values"),
]


@pytest.mark.parametrize(
    ("what", "change", "error", "message"), NORM_ROPE_REFUSALS, ids=[r[0] for r in NORM_ROPE_REFUSALS]
)
def test_bad_norm_rope_input_is_refused(what: str, change: dict[str, Any], error: type, message: str) -> None:
    args: dict[str, Any] = dict(
        rows=torch.ones(2, 512),
        weight=torch.ones(512),
        cos_sin=torch.ones(6, 64),
        positions=torch.tensor([0, 5]),
        slots=torch.tensor([0, 1]),
        cache=poisoned_cache("v41_fp8_528", 4, 2),
        fmt="v41_fp8_528",
        eps=1e-6,
        rope_dim=64,
    )
    args.update(change)
    args = {k: (v.to(DEVICE) if isinstance(v, torch.Tensor) else v) for k, v in args.items()}
    for backend in BACKENDS:
        with pytest.raises(error, match="^" + re.escape(message)):
            norm_rope_store(**args, backend=backend)


def test_default_attention_tiles_per_kv_format() -> None:
    """The defaults docs/cache-kernels.md gives: 64 lanes, two stages; V4 584-byte KV one stage (the H200 sweep's
    fastest; two overflow sm_90's shared memory under Triton 3.6); V4.1 528-byte KV with bf16 probabilities 128
    lanes, one stage (the sweep's fastest); FP8 KV at f32 probabilities 32 lanes."""
    from fast.cache.attention import default_config

    formats = (None, "v4_584", "v41_fp8_528")
    tiles = {(fmt, p): default_config(64, 512, fmt, p) for fmt in formats for p in ("bf16", "f32")}
    assert {k: (c.block_h, c.block_n, c.num_warps, c.num_stages) for k, c in tiles.items()} == {
        (None, "bf16"): (64, 64, 8, 2), (None, "f32"): (64, 64, 8, 2),
        ("v4_584", "bf16"): (64, 64, 8, 1), ("v4_584", "f32"): (64, 32, 8, 2),
        ("v41_fp8_528", "bf16"): (64, 128, 8, 1), ("v41_fp8_528", "f32"): (64, 32, 8, 2),
    }  # fmt: skip
