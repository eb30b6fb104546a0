"""Indexing benchmark cases, registered with ``fast.bench`` (names start with ``indexing/``).

Shapes follow what the public kernels publish: index logits for 2048-4096 queries x 4K-64K rows (64 heads x
128 dims, BF16 keys and FP8 keys with per-row scales); paged decode logits for B = 64 / 128 requests, next_n 1-2,
contexts of 8K / 32K compressed rows; top-k with k = 512 / 2048 over rows of 16K-262K, batch 6 to 4096; the
fused and standalone slot translation; candidate blocks. Each case times the Triton kernel (``triton``: kernels
only, host checks off; ``triton+checks`` where the checks matter), torch eager (the public reference's
formula) and, on the headline cases, torch.compile of the same formula. Cost model: docs/indexing-kernels.md.

Run: ``python -m fast.indexing.bench --out results/indexing`` (or ``python -m fast.bench`` once the harness
lists this module).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import torch

from fast.bench import Built, Case, register
from fast.indexing import addressing, candidates, logits, naive
from fast.indexing import topk as tk

HEADS, DIM = 64, 128
DEVICE = "cuda"


def _gen(seed: int) -> torch.Generator:
    return torch.Generator(device=DEVICE).manual_seed(seed)


# --- torch formulas (what a model file writes) --------------------------------------------------------------


def eager_logits(q: torch.Tensor, weights: torch.Tensor, k: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The public reference's index score: einsum in the input dtype, relu, weighted head sum, -inf past lengths."""
    s = torch.einsum("mhd,nd->mhn", q, k)
    s = (s.relu_() * weights.unsqueeze(-1)).sum(dim=1)
    hidden = torch.arange(k.shape[0], device=k.device) >= lengths.unsqueeze(-1)
    return s.masked_fill(hidden, float("-inf"))


def eager_logits_fp8(
    q: torch.Tensor, weights: torch.Tensor, codes: torch.Tensor, scale: torch.Tensor, lengths: torch.Tensor
) -> torch.Tensor:
    keys = (codes.view(torch.float8_e4m3fn).float() * scale.unsqueeze(-1)).to(q.dtype)
    return eager_logits(q, weights, keys, lengths)


def eager_paged(
    q: torch.Tensor, weights: torch.Tensor, cache: torch.Tensor, table: torch.Tensor, lengths: torch.Tensor, bc: int
) -> torch.Tensor:
    """Gather each request's rows through its block table, then the einsum (bf16 cache)."""
    rows = table.shape[1] * bc
    j = torch.arange(rows, device=q.device)
    keys = cache[table.long()[:, j // bc], j % bc]
    s = torch.einsum("bthd,bnd->bthn", q, keys)
    s = (s.relu_() * weights.unsqueeze(-1)).sum(dim=2)
    return s.masked_fill(j >= lengths.unsqueeze(-1), float("-inf")).flatten(0, 1)


def eager_paged_fp8(
    q: torch.Tensor, weights: torch.Tensor, cache: torch.Tensor, table: torch.Tensor, lengths: torch.Tensor, bc: int
) -> torch.Tensor:
    """Gather each request's e4m3 codes and scales through its block table, dequantize to bf16, the einsum."""
    d = q.shape[-1]
    nb = cache.shape[0]
    j = torch.arange(table.shape[1] * bc, device=q.device)
    blocks, within = table.long()[:, j // bc], j % bc
    codes = cache[:, : bc * d].view(nb, bc, d)[blocks, within]
    scales = cache[:, bc * d :].contiguous().view(torch.float32).view(nb, bc)[blocks, within]
    keys = (codes.view(torch.float8_e4m3fn).float() * scales.unsqueeze(-1)).to(q.dtype)
    s = torch.einsum("bthd,bnd->bthn", q, keys)
    s = (s.relu_() * weights.unsqueeze(-1)).sum(dim=2)
    return s.masked_fill(j >= lengths.unsqueeze(-1), float("-inf")).flatten(0, 1)


def eager_topk(scores: torch.Tensor, lengths: torch.Tensor, k: int, offsets: torch.Tensor) -> torch.Tensor:
    """The public V4.1 formula: mask past the visible count, topk(sorted=False), sort by index, -1 where invalid."""
    hidden = torch.arange(scores.shape[1], device=scores.device) >= lengths.unsqueeze(-1)
    idx = scores.masked_fill(hidden, float("-inf")).topk(k, dim=-1, sorted=False).indices.sort(dim=-1).values
    lens = lengths.unsqueeze(-1)
    return torch.where(idx < lens, idx + offsets.unsqueeze(-1), -1).int()


def eager_slots(rows: torch.Tensor, table: torch.Tensor, bc: int) -> torch.Tensor:
    """Logical rows -> slots through the block table, -1 kept (int64)."""
    r = rows.long()
    safe = r.clamp_min(0)
    slots = table.long().gather(1, safe // bc) * bc + safe % bc
    return torch.where(r >= 0, slots, -1)


def _compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    return torch.compile(fn, dynamic=False)


LOGITS_TILES = (
    (256, 64, 8, 2),
    (128, 64, 8, 3),
    (256, 64, 8, 3),
    (256, 64, 4, 3),
    (256, 128, 8, 3),
    (128, 64, 4, 4),
    (128, 128, 8, 3),
    (64, 128, 4, 4),
)
"""(columns, BK, warps, stages) swept on the headline logits shapes."""


# --- index logits (gathered) --------------------------------------------------------------------------------


def logits_model(queries: int, lengths: torch.Tensor, rows: int, key_bytes: float) -> tuple[int, int]:
    """(bytes, flops): q, weights and lengths once, the key rows once, every output lane written once; two
    flops per multiply-add of the visible (query, head, row) dot products."""
    seen = int(lengths.sum())
    moved = queries * HEADS * (DIM * 2 + 4) + queries * 4 + int(rows * key_bytes) + queries * rows * 4
    return moved, 2 * HEADS * DIM * seen


def _logits_case(queries: int, rows: int, fp8: bool, causal: bool, compile_it: bool, sweep: bool) -> None:
    kind = "fp8" if fp8 else "bf16"
    shape = f"{queries}x{rows}" + ("_causal" if causal else "")

    def build(with_compile: bool) -> Built:
        g = _gen(queries + rows)
        q = torch.randn(queries, HEADS, DIM, device=DEVICE, generator=g).bfloat16()
        w = torch.randn(queries, HEADS, device=DEVICE, generator=g) * HEADS**-0.5
        if causal:  # the chunk's last query sees every row, earlier ones one row fewer each
            lengths = (torch.arange(queries, device=DEVICE) + rows - queries + 1).int()
        else:
            lengths = torch.full((queries,), rows, dtype=torch.int32, device=DEVICE)
        if fp8:
            codes = torch.randn(rows, DIM, device=DEVICE, generator=g).to(torch.float8_e4m3fn).view(torch.uint8)
            scale = 2.0 ** torch.randint(-6, 0, (rows,), device=DEVICE, generator=g).float()
            key_bytes = DIM + 4

            def run(cfg=None):
                return logits.index_logits(q, w, codes, lengths, k_scale=scale, validate=False, config=cfg)

            def eager():
                return eager_logits_fp8(q, w, codes, scale, lengths)

            compiled_fn = _compiled(eager_logits_fp8)

            def comp():
                return compiled_fn(q, w, codes, scale, lengths)

            def twin():
                return naive.index_logits(q[:64], w[:64], codes, lengths[:64], k_scale=scale)

            def mine():
                return logits.index_logits(q[:64], w[:64], codes, lengths[:64], k_scale=scale)
        else:
            k = torch.randn(rows, DIM, device=DEVICE, generator=g).bfloat16()
            key_bytes = 2 * DIM

            def run(cfg=None):
                return logits.index_logits(q, w, k, lengths, validate=False, config=cfg)

            def eager():
                return eager_logits(q, w, k, lengths)

            compiled_fn = _compiled(eager_logits)

            def comp():
                return compiled_fn(q, w, k, lengths)

            def twin():
                return naive.index_logits(q[:64], w[:64], k, lengths[:64])

            def mine():
                return logits.index_logits(q[:64], w[:64], k, lengths[:64])

        moved, flops = logits_model(queries, lengths, rows, key_bytes)
        impls: dict[str, Callable[[], object]] = {"triton": run, "torch_eager": eager}
        if with_compile and compile_it:
            impls["torch_compile"] = comp

        def check() -> str:
            a, b = mine(), twin()
            live = torch.isfinite(b)
            if not torch.equal(live, torch.isfinite(a)):
                return "the -inf lanes differ from the float32 twin"
            err = ((a - b).abs()[live] / b.abs()[live].clamp_min(1e-3)).max().item() if live.any() else 0.0
            return f"ok (max relative difference to the float32 twin {err:.1e})" if err < 1e-3 else f"rel {err:.1e}"

        variants: dict[str, Callable[[], object]] = {}
        tiles = LOGITS_TILES if not fp8 else (*LOGITS_TILES[:2], (128, 64, 8, 2), (256, 64, 8, 3))
        if sweep:
            for cols, bk, warps, stages in tiles:
                cfg = logits.LogitsConfig(columns=cols, block_k=bk, num_warps=warps, num_stages=stages)
                variants[f"cols{cols}_bk{bk}_w{warps}_s{stages}"] = functools.partial(run, cfg)
        note = f"default tile {logits.default_config(fp8)}; TFLOP/s counts 2 * H * D per visible (query, row)"
        return Built(impls, moved, flops, check=check, sweep=variants, notes=[note])

    register(
        Case(f"indexing/logits_{kind}_{shape}", "indexing-logits", f"index logits {kind} keys, {shape}, 64x128", build)
    )


# --- paged decode logits ------------------------------------------------------------------------------------


def _paged_case(requests: int, next_n: int, context: int, fp8: bool, compile_it: bool) -> None:
    bc = 64
    kind = "fp8" if fp8 else "bf16"

    def build(with_compile: bool) -> Built:
        g = _gen(requests * next_n + context)
        blocks = context // bc
        num_blocks = requests * blocks + 7
        q = torch.randn(requests, next_n, HEADS, DIM, device=DEVICE, generator=g).bfloat16()
        w = torch.randn(requests, next_n, HEADS, device=DEVICE, generator=g) * HEADS**-0.5
        table = torch.randperm(num_blocks, device=DEVICE, generator=g)[: requests * blocks].view(requests, blocks)
        table = table.int().contiguous()
        # each request's context somewhere in its last quarter; query t of a step sees one row more than t - 1
        base = context - torch.randint(0, context // 4, (requests, 1), device=DEVICE, generator=g) - next_n
        lengths = (base + torch.arange(1, next_n + 1, device=DEVICE)).int().contiguous()
        if fp8:
            codes = torch.randn(num_blocks, bc * DIM, device=DEVICE, generator=g).to(torch.float8_e4m3fn)
            scales = 2.0 ** torch.randint(-6, 0, (num_blocks, bc), device=DEVICE, generator=g).float()
            cache = torch.cat([codes.view(torch.uint8), scales.view(torch.uint8)], dim=1).contiguous()
            row_bytes = DIM + 4
            eager_fn = eager_paged_fp8
        else:
            cache = torch.randn(num_blocks, bc, DIM, device=DEVICE, generator=g).bfloat16()
            row_bytes = 2 * DIM
            eager_fn = eager_paged

        def run():
            return logits.paged_index_logits(q, w, cache, table, lengths, rows_per_block=bc, validate=False)

        def checked():
            return logits.paged_index_logits(q, w, cache, table, lengths, rows_per_block=bc)

        def eager():
            return eager_fn(q, w, cache, table, lengths, bc)

        impls: dict[str, Callable[[], object]] = {"triton": run, "triton+checks": checked, "torch_eager": eager}
        if with_compile and compile_it:
            compiled_fn = _compiled(eager_fn)
            impls["torch_compile"] = lambda: compiled_fn(q, w, cache, table, lengths, bc)
        rows_read = int(lengths.amax(dim=1).sum())
        moved = rows_read * row_bytes + requests * next_n * (HEADS * (DIM * 2 + 4) + blocks * bc * 4)
        moved += table.numel() * 4
        flops = 2 * HEADS * DIM * int(lengths.sum())

        def check() -> str:
            a = run()
            b = naive.paged_index_logits(q[:4], w[:4], cache, table[:4], lengths[:4], rows_per_block=bc)
            a = a[: 4 * next_n]
            live = torch.isfinite(b)
            if not torch.equal(live, torch.isfinite(a)):
                return "the -inf lanes differ from the float32 twin"
            err = ((a - b).abs()[live] / b.abs()[live].clamp_min(1e-3)).max().item()
            return f"ok (max relative difference {err:.1e})" if err < 1e-3 else f"rel {err:.1e}"

        return Built(
            impls, moved, flops, check=check, notes=["bytes: each request's rows read once (its longest query)"]
        )

    name = f"indexing/paged_{kind}_B{requests}_n{next_n}_ctx{context // 1024}K"
    register(Case(name, "indexing-paged", f"paged decode logits, {kind} cache, Bc = {bc}", build))


# --- top-k --------------------------------------------------------------------------------------------------


def _scores(rows: int, width: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = _gen(seed)
    scores = torch.randn(rows, width, device=DEVICE, generator=g)
    lengths = torch.randint(width // 2, width + 1, (rows,), device=DEVICE, generator=g).int()
    lengths[0] = width
    offsets = torch.randint(0, 1 << 20, (rows,), device=DEVICE, generator=g).int()
    return scores, lengths, offsets


def topk_bytes(lengths: torch.Tensor, lanes: int, out_bytes: int) -> int:
    """Each visible score read once, every output lane written once, lengths and offsets read once."""
    return int(lengths.sum()) * 4 + lengths.numel() * (lanes * out_bytes + 8)


TOPK_SPLITS: tuple[dict[str, int], ...] = (
    dict(split_lanes=16384, split_block=2048, split_warps=8),
    dict(split_lanes=8192, split_block=2048, split_warps=8),
    dict(split_lanes=32768, split_block=2048, split_warps=8),
    dict(split_lanes=16384, split_block=4096, split_warps=16),
    dict(split_lanes=8192, split_block=1024, split_warps=4),
)
"""Split-row configurations of the top-k sweep (fast/indexing/compile_check.py lowers the same ones)."""


def _topk_case(rows: int, width: int, k: int, convention: str, compile_it: bool, sweep: bool) -> None:
    def build(with_compile: bool) -> Built:
        scores, lengths, offsets = _scores(rows, width, rows + width + k)

        def run(cfg=None):
            return tk.topk(
                scores,
                lengths,
                k=k,
                convention=convention,
                offsets=offsets,
                validate=False,
                config=cfg,
            )

        def checked():
            return tk.topk(scores, lengths, k=k, convention=convention, offsets=offsets)

        impls: dict[str, Callable[[], object]] = {"triton": run, "triton+checks": checked}
        one_program = dataclasses.replace(tk.COMPILED, split_lanes=0)
        split_lanes = tk.split_lanes_for(tk.COMPILED, rows, width)
        if split_lanes:  # the default takes the split-row path: time the one-program path beside it
            impls["triton_one_program"] = functools.partial(run, one_program)
        impls["torch_topk_plain"] = lambda: scores.topk(k, dim=-1, sorted=False)
        if convention == "v4.1":
            impls["torch_eager"] = lambda: eager_topk(scores, lengths, k, offsets)
            if with_compile and compile_it:
                compiled_fn = _compiled(eager_topk)
                impls["torch_compile"] = lambda: compiled_fn(scores, lengths, k, offsets)
        else:
            impls["torch_eager"] = lambda: naive.topk(scores, lengths, k=k, convention=convention, offsets=offsets)

        def check() -> str:
            want = naive.topk(scores, lengths, k=k, convention=convention, offsets=offsets)
            configs = [tk.COMPILED, one_program] + [dataclasses.replace(tk.COMPILED, **c) for c in TOPK_SPLITS]
            differ = [str(i) for i, cfg in enumerate(configs) if not torch.equal(run(cfg), want)]
            if differ:
                return "DIFFERS from the torch twin (configurations " + ", ".join(differ) + ")"
            return "ok (default, one-program and every split configuration equal to the torch twin)"

        variants: dict[str, Callable[[], object]] = {}
        if sweep:
            variants["one_program"] = functools.partial(run, one_program)
            for block, warps in ((2048, 8), (8192, 16)):
                cfg = tk.TopKConfig(block=block, num_warps=warps, split_lanes=0)
                variants[f"one_program_block{block}_w{warps}"] = functools.partial(run, cfg)
            for c in TOPK_SPLITS:
                cfg = dataclasses.replace(tk.COMPILED, **c)
                name = f"split{c['split_lanes']}_block{c['split_block']}_w{c['split_warps']}"
                variants[name] = functools.partial(run, cfg)
            variants["oversample4"] = lambda: run(tk.TopKConfig(oversample=4))
        notes = ["torch_topk_plain: scores.topk(k, sorted=False) alone, no mask, sort or fill"]
        if split_lanes:
            notes.append(f"triton: split-row path, {split_lanes}-lane splits; triton_one_program: one program a row")
        graphs = ("triton", "torch_topk_plain")  # launch-bound at these sizes: timed as graph replays too
        return Built(impls, topk_bytes(lengths, k, 4), 0, check=check, sweep=variants, notes=notes, graphs=graphs)

    name = f"indexing/topk_{rows}x{width // 1024}K_k{k}_{convention}"
    register(Case(name, "indexing-topk", f"valid-prefix top-k, {convention}, random normal scores", build))


def _fused_case(rows: int, width: int, k: int, compile_it: bool) -> None:
    bc = 64

    def build(with_compile: bool) -> Built:
        scores, lengths, offsets = _scores(rows, width, 5)
        blocks = width // bc
        g = _gen(6)
        table = (torch.randperm(rows * blocks, device=DEVICE, generator=g).view(rows, blocks) + 2**26).int()

        def alone():
            return tk.topk(scores, lengths, k=k, validate=False)

        def fused():
            return tk.topk(scores, lengths, k=k, block_table=table, rows_per_block=bc, validate=False)

        count = torch.full((rows,), k, dtype=torch.int32, device=DEVICE)

        def separate() -> torch.Tensor:
            return addressing.slot_translation(alone(), table, count, rows_per_block=bc, validate=False)

        def eager() -> torch.Tensor:
            return eager_slots(eager_topk(scores, lengths, k, offsets * 0), table, bc)

        impls: dict[str, Callable[[], object]] = {
            "triton": fused,
            "triton_topk_alone": alone,
            "triton_topk_then_slots": separate,
            "torch_eager": eager,
        }
        if with_compile and compile_it:
            compiled_fn = _compiled(lambda s, n, t: eager_slots(eager_topk(s, n, k, n * 0), t, bc))
            impls["torch_compile"] = lambda: compiled_fn(scores, lengths, table)

        def check() -> str:
            want = naive.topk(scores, lengths, k=k, block_table=table, rows_per_block=bc)
            return "ok (equal to the torch twin)" if torch.equal(fused(), want) else "DIFFERS from the torch twin"

        return Built(
            impls, topk_bytes(lengths, k, 8), 0, check=check, notes=["block ids from 2**26: slots pass 2**31 (int64)"]
        )

    register(
        Case(
            f"indexing/topk_slots_{rows}x{width // 1024}K_k{k}",
            "indexing-topk",
            "top-k with the slot translation fused, against top-k alone and top-k then translation",
            build,
        )
    )


def _slots_case(rows: int, lanes: int) -> None:
    bc = 64

    def build(with_compile: bool) -> Built:
        g = _gen(7)
        blocks = 4096
        table = torch.randperm(rows * blocks, device=DEVICE, generator=g).view(rows, blocks).int()
        picked = torch.randint(0, blocks * bc, (rows, lanes), device=DEVICE, generator=g).int()
        picked[:, -lanes // 8 :] = -1
        count = torch.full((rows,), lanes, dtype=torch.int32, device=DEVICE)

        def run():
            return addressing.slot_translation(picked, table, count, rows_per_block=bc, validate=False)

        def checked():
            return addressing.slot_translation(picked, table, count, rows_per_block=bc)

        def eager():
            return eager_slots(picked, table, bc)

        def check() -> str:
            return "ok" if torch.equal(run(), eager()) else "DIFFERS from torch"

        moved = rows * lanes * (4 + 8 + 4) + rows * 4
        return Built({"triton": run, "triton+checks": checked, "torch_eager": eager}, moved, 0, check=check)

    register(Case(f"indexing/slots_{rows}x{lanes}", "indexing-slots", "standalone logical row -> slot", build))


def _candidate_case(rows: int, width: int, block_size: int, topk_blocks: int) -> None:
    def build(with_compile: bool) -> Built:
        scores, lengths, _ = _scores(rows, width, 8)

        def run():
            return candidates.candidate_select(
                scores,
                lengths,
                block_size=block_size,
                topk_blocks=topk_blocks,
                validate=False,
            )

        def eager():
            return naive.candidate_select(scores, lengths, block_size=block_size, topk_blocks=topk_blocks)

        kept = run()

        def restricted():
            return tk.topk(
                scores,
                lengths,
                k=2048,
                candidate_blocks=kept,
                block_size=block_size,
                validate=False,
            )

        def check() -> str:
            ok = torch.equal(run(), eager()) and torch.equal(
                restricted(), naive.topk(scores, lengths, k=2048, candidate_blocks=kept, block_size=block_size)
            )
            return "ok (equal to the torch twins)" if ok else "DIFFERS from the torch twins"

        impls: dict[str, Callable[[], object]] = {
            "triton": run,
            "torch_eager": eager,
            "triton_restricted_topk": restricted,
        }
        return Built(
            impls,
            int(lengths.sum()) * 4 + rows * topk_blocks * 4,
            0,
            check=check,
            notes=["triton_restricted_topk: the second-level top-k (k = 2048) inside the kept blocks"],
        )

    register(
        Case(
            f"indexing/candidates_{rows}x{width // 1024}K_bs{block_size}_top{topk_blocks}",
            "indexing-candidates",
            "candidate blocks (block max, newest pinned, NaN dropped)",
            build,
        )
    )


_logits_case(4096, 16384, fp8=False, causal=False, compile_it=True, sweep=True)
_topk_case(128, 262144, 2048, "v4.1", compile_it=True, sweep=True)
_fused_case(128, 262144, 2048, compile_it=False)
_logits_case(4096, 16384, fp8=True, causal=False, compile_it=False, sweep=True)
_paged_case(128, 2, 32768, fp8=False, compile_it=True)
_paged_case(128, 2, 32768, fp8=True, compile_it=False)
_paged_case(64, 1, 8192, fp8=False, compile_it=False)
_paged_case(64, 2, 8192, fp8=True, compile_it=False)
_logits_case(2048, 4096, fp8=False, causal=False, compile_it=False, sweep=False)
_logits_case(2048, 65536, fp8=False, causal=False, compile_it=False, sweep=False)
_logits_case(4096, 16384, fp8=False, causal=True, compile_it=False, sweep=False)
_topk_case(128, 262144, 2048, "v4-prefill", compile_it=False, sweep=False)
_topk_case(6, 262144, 2048, "v4.1", compile_it=False, sweep=False)
_topk_case(4096, 16384, 2048, "v4.1", compile_it=False, sweep=False)
_topk_case(64, 65536, 512, "select", compile_it=False, sweep=False)
_slots_case(128, 2048)
_candidate_case(128, 262144, 16, 64)
