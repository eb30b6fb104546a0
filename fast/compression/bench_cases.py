"""Compression benchmark cases (registered with ``fast.bench``).

Prefill over 2^20 positions, d = 512, f32 in and bf16 out, ring handling included (the request starts one
position after a group boundary, so its first row reads the ring, and its newest positions are written back):
C2, V4 overlap r = 4 with APE, r = 128 with APE. Decode / verify for 1, 32, 128 and 256 requests with 1 to 6
new positions each (C2 and V4 overlap), rings sized for rollback.

Implementations timed: ``triton`` (kernels on a prepared plan and launcher), ``triton+checks`` (the public
call: validation, one small device-to-host copy, tiles, launch), ``torch_eager`` and ``torch_compile``
(``naive.compress_step`` on precomputed indices), and for prefill ``torch_compile_plain`` /
``torch_eager_plain``: the single-request reshape formula with no ring (the form a model file writes), over the
same inputs. Decode cases are also timed as CUDA-graph replays (``NAME (graph)``), beside an empty kernel timed
both ways and ``copy_same_bytes``, a device copy of the bytes the step moves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from fast import bench
from fast.bench import Built, Case, register
from fast.compression import compress_decode, compress_prefill, naive, prepare
from fast.compression import triton_kernels as tk
from fast.compression.plan import Mode, Plan, completed_rows

POSITIONS = 2**20
DIM = 512


def make_plan(
    mode: Mode,
    ratio: int,
    overlap: bool,
    with_ape: bool,
    lengths: list[int],
    starts: list[int],
    ring: int,
    out_dtype: torch.dtype,
    rollback: bool = False,
) -> Plan:
    device = bench.DEVICE
    g = torch.Generator(device=device).manual_seed(0)
    C = DIM * (2 if overlap else 1)
    T, B = sum(lengths), len(lengths)
    score = torch.randn(T, C, device=device, generator=g) * 2
    latent = torch.randn(T, C, device=device, generator=g)
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32, device=device)
    start = torch.tensor(starts, dtype=torch.int32, device=device)
    state = torch.randn(B, ring, 2, C, device=device, generator=g)
    index = torch.arange(B, dtype=torch.int32, device=device)
    ape = torch.randn(ratio, C, device=device, generator=g) if with_ape else None
    return prepare(mode, score, latent, cu, start, state, index, ratio=ratio, overlap=overlap, ape=ape,
                   out_dtype=out_dtype, rollback=rollback)  # fmt: skip


def ring_reads(plan: Plan) -> int:
    """(position, channel half) pairs read from the ring: old positions in the windows of completed rows."""
    r, ovl = plan.ratio, 1 if plan.overlap else 0
    pairs = 0
    for s, n in zip(plan.starts, plan.lengths, strict=True):
        seen: set[tuple[int, int]] = set()
        for j in range(s // r, min((s + n) // r, s // r + 2)):
            for g, half in ((j - 1, 0), (j, 1)) if ovl else ((j, 0),):
                seen.update((t, half) for t in range(max(0, g * r), min(s, (g + 1) * r)))
        pairs += len(seen)
    return pairs


def bytes_moved(plan: Plan) -> int:
    """Inputs once, ring reads and writes, rows, store slots and positions (8 bytes each), metadata."""
    d, C, f32 = plan.dim, plan.channels, 4
    out = 2 if plan.out_dtype == torch.bfloat16 else 4
    inputs = plan.total_inputs * C * 2 * f32
    reads = ring_reads(plan) * d * 2 * f32
    writes = sum(plan.kept) * C * 2 * f32
    rows = plan.total_rows * (d * out + 16)
    meta = plan.num_requests * 16
    return inputs + reads + writes + rows + meta


def flops(plan: Plan) -> int:
    """Per completed row and channel, each of W entries: APE add, max subtract, exp, sum, multiply-add."""
    completed = sum(completed_rows(s, n, plan.ratio) for s, n in zip(plan.starts, plan.lengths, strict=True))
    return completed * plan.dim * (6 * plan.window + 1)


def naive_fn(plan: Plan, compile_it: bool) -> Callable[[], object]:
    targets = naive.row_targets(plan)
    source, ring_row = naive.kept_pairs(plan)
    step = torch.compile(naive.compress_step, dynamic=False) if compile_it else naive.compress_step
    args = (naive.step_inputs(plan), targets, source, ring_row, None, None)
    kwargs: dict[str, Any] = dict(ratio=plan.ratio, overlap=plan.overlap, rows_per_block=0, out_dtype=plan.out_dtype)
    return lambda: step(*args, **kwargs)


def plain_formula(
    score: torch.Tensor, latent: torch.Tensor, ape: torch.Tensor | None, ratio: int, overlap: bool
) -> torch.Tensor:
    """One request from position 0, no ring: groups by reshape (V4's prefill form), bf16 rows."""
    T, C = score.shape
    n = T // ratio
    s = score[: n * ratio].view(n, ratio, C)
    v = latent[: n * ratio].view(n, ratio, C)
    if ape is not None:
        s = s + ape
    if overlap:
        d = C // 2
        s = torch.cat([torch.cat([torch.full_like(s[:1, :, :d], float("-inf")), s[:-1, :, :d]]), s[:, :, d:]], 1)
        v = torch.cat([torch.cat([torch.zeros_like(v[:1, :, :d]), v[:-1, :, :d]]), v[:, :, d:]], 1)
    return (v * s.softmax(dim=1)).sum(dim=1).to(torch.bfloat16)


def check(plan: Plan) -> str:
    """Triton against torch eager on copies of the state: slots and positions equal; rows within one bf16 unit
    (or 1e-5 in f32) of the largest row value. (An element-wise relative difference would flag rows whose
    value cancels to nearly zero, where two correct f32 orders differ by a large fraction of a tiny value.)"""
    state = plan.state.clone()
    a = tk.run(plan)
    plan.state.copy_(state)
    b = naive.run(plan)
    plan.state.copy_(state)
    if not (torch.equal(a.store_slots, b.store_slots) and torch.equal(a.positions, b.positions)):
        return "MISMATCH: slots or positions"
    x, y = a.rows.float(), b.rows.float()
    scale = y.abs().max().item() or 1.0
    worst = (x - y).abs().max().item() / scale
    bound = 2.0**-7 if plan.out_dtype == torch.bfloat16 else 1e-5
    verdict = "ok" if worst <= bound else "MISMATCH"
    # both against float64 on a sample of rows (the ring as it was before the call)
    targets = naive.row_targets(plan)
    pick = torch.randperm(plan.total_rows, device=plan.score.device)[:4096]
    sample = naive.RowTargets(targets.request[pick], targets.group[pick], targets.valid[pick])
    ape = None if plan.ape is None else plan.ape.double()
    inputs = naive.StepInputs(plan.score.double(), plan.latent.double(), state.double(), ape, plan.cu_seqlens,
                              plan.start_pos, plan.state_index)  # fmt: skip
    x64, v64 = naive.gather_window(inputs, sample, ratio=plan.ratio, overlap=plan.overlap)
    ref = naive.gated_rows(x64, v64, sample.valid)
    top = ref.abs().max().item() or 1.0
    err = [(r.rows[pick].double() - ref).abs().max().item() / top for r in (a, b)]
    return (f"{verdict}: max |triton - torch| = {worst:.2g} x max |row|; against f64 on 4096 rows: "
            f"triton {err[0]:.2g}, torch {err[1]:.2g}")  # fmt: skip


C = tk.Config
SWEEPS = {  # tile variants timed beside the default: rows, entries, channels, warps (exp2 polynomial, cache hint)
    2: [C(8, 2, 128, 4, poly_exp=True), C(8, 2, 128, 4, evict_first=True), C(32, 2, 128, 8), C(16, 2, 128, 4),
        C(4, 2, 128, 2), C(8, 2, 64, 2), C(2, 2, 512, 4), C(4, 2, 256, 4)],
    8: [C(2, 8, 128, 2, poly_exp=True), C(2, 8, 128, 2, evict_first=True), C(8, 8, 128, 8), C(4, 8, 128, 4),
        C(2, 8, 128, 4), C(2, 8, 256, 2), C(4, 8, 64, 2)],
    128: [C(1, 32, 128, 4, poly_exp=True), C(1, 32, 128, 4, evict_first=True), C(1, 64, 128, 8), C(1, 32, 64, 4),
          C(1, 32, 256, 8)],
}  # fmt: skip


DECODE_SWEEPS = {  # decode variants (1..6 new positions: at most 2 (V4) or 3 (C2) rows per request)
    2: [C(4, 2, 32, 1, 8), C(4, 2, 64, 2, 8), C(4, 2, 512, 4, 8), C(4, 2, 256, 2, 8)],
    8: [C(2, 8, 64, 2, 8), C(2, 8, 128, 4, 8), C(2, 8, 512, 4, 8), C(2, 8, 16, 1, 8)],
}


def variant_name(cfg: tk.Config) -> str:
    extra = (" poly" if cfg.poly_exp else "") + (" evict-first" if cfg.evict_first else "")
    return f"r{cfg.block_r} k{cfg.block_k} c{cfg.block_c} w{cfg.num_warps}{extra}"


def variant(plan: Plan, config: tk.Config) -> Callable[[], object]:
    return tk.launcher(plan, config)


def prefill_case(name: str, ratio: int, overlap: bool, with_ape: bool, description: str) -> Case:
    def build(with_compile: bool) -> Built:
        window = ratio * (2 if overlap else 1)
        start = 1 + ratio  # one position after a boundary: the first row reads the ring
        plan = make_plan(Mode.PREFILL, ratio, overlap, with_ape, [POSITIONS], [start], window + 2, torch.bfloat16)
        args = (plan.score, plan.latent, plan.cu_seqlens, plan.start_pos, plan.state, plan.state_index)
        impls: dict[str, Callable[[], object]] = {
            "triton": tk.launcher(plan),
            "triton+checks": lambda: compress_prefill(
                *args, ratio=ratio, overlap=overlap, ape=plan.ape, out_dtype=torch.bfloat16
            ),
            "torch_eager": naive_fn(plan, False),
            "torch_eager_plain": lambda: plain_formula(plan.score, plan.latent, plan.ape, ratio, overlap),
        }
        if with_compile:
            impls["torch_compile"] = naive_fn(plan, True)
            plain = torch.compile(plain_formula, dynamic=False)
            impls["torch_compile_plain"] = lambda: plain(plan.score, plan.latent, plan.ape, ratio, overlap)
        sweep = {variant_name(cfg): variant(plan, cfg) for cfg in SWEEPS[window]}  # fast.bench --no-sweep: none
        built = Built(impls, bytes_moved(plan), flops(plan), check=lambda: check(plan), sweep=sweep)
        built.notes.append(f"default Triton tiles {tk.default_config(plan)}")
        return built

    return Case(f"compression/{name}", "compression prefill", description, build)


def decode_case(name: str, ratio: int, overlap: bool, requests: int) -> Case:
    def build(with_compile: bool) -> Built:
        window = ratio * (2 if overlap else 1)
        lengths = [1 + b % 6 for b in range(requests)]
        starts = [4099 + 13 * b for b in range(requests)]  # request 0 completes a row at its first position
        plan = make_plan(Mode.DECODE, ratio, overlap, overlap, lengths, starts, window + 6 - 2, torch.bfloat16,
                         rollback=True)  # fmt: skip
        args = (plan.score, plan.latent, plan.cu_seqlens, plan.start_pos, plan.state, plan.state_index)
        moved = bytes_moved(plan)
        impls: dict[str, Callable[[], object]] = {
            "triton": tk.launcher(plan),
            "triton+checks": lambda: compress_decode(
                *args, ratio=ratio, overlap=overlap, ape=plan.ape, out_dtype=torch.bfloat16, rollback=True
            ),
            "torch_eager": naive_fn(plan, False),
            "copy_same_bytes": bench.copy_of(moved),
        }
        if with_compile:
            impls["torch_compile"] = naive_fn(plan, True)
        graphs = ("triton", "torch_eager", "torch_compile", "copy_same_bytes")
        sweep = {variant_name(cfg): variant(plan, cfg) for cfg in DECODE_SWEEPS[window]}
        built = Built(impls, moved, flops(plan), check=lambda: check(plan), sweep=sweep, graphs=graphs)
        built.notes.append(f"{requests} requests, {sum(lengths)} new positions, tiles {tk.default_config(plan)}; "
                           "copy_same_bytes: a device copy of as many bytes (read + write), the floor of any kernel "
                           "that moves them")  # fmt: skip
        return built

    kind = "V4 overlap r=4 + APE" if overlap else f"r={ratio}"
    return Case(f"compression/{name}", "compression decode", f"decode, {requests} requests x 1..6 positions, {kind}",
                build)  # fmt: skip


# Order: the cases the targets need first, so a spent time budget only drops later torch.compile baselines.
register(prefill_case("c2_prefill_1M", 2, False, False, "C2 prefill, 2^20 positions x 512, f32 in, bf16 out"))
register(prefill_case("v4_overlap_prefill_1M", 4, True, True, "V4 overlap r=4 + APE prefill, 2^20 x 512 (C = 1024)"))
register(decode_case("decode_v4_B128", 4, True, 128))
register(prefill_case("r128_prefill_1M", 128, False, True, "r=128 + APE prefill, 2^20 x 512"))
register(decode_case("decode_c2_B128", 2, False, 128))
for _requests in (1, 32, 256):
    register(decode_case(f"decode_v4_B{_requests}", 4, True, _requests))
    register(decode_case(f"decode_c2_B{_requests}", 2, False, _requests))
