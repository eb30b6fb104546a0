"""Index-logit benchmark cases (gathered prefill and paged decode), built for ``fast.indexing.bench_cases``.

The torch formulas are what a model file writes (the public reference's einsum in the input dtype); the Triton
kernels are timed without host checks (``triton``) and, for paged decode, with them (``triton+checks``).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable

import torch

from fast.bench import DEVICE, Built, Case, compiled, generator, register
from fast.indexing import logits, naive
from reference.indexing import E4M3_DOT_BOUND

HEADS, DIM = 64, 128


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


def eager_logits_q8(
    codes_q: torch.Tensor,
    q_scale: torch.Tensor,
    weights: torch.Tensor,
    codes: torch.Tensor,
    scale: torch.Tensor,
    lengths: torch.Tensor,
) -> torch.Tensor:
    """FP8 queries and keys dequantized to bf16, then the einsum (what a model file without an FP8 kernel does)."""
    q = (codes_q.view(torch.float8_e4m3fn).float() * q_scale.unsqueeze(-1)).bfloat16()
    return eager_logits_fp8(q, weights, codes, scale, lengths)


def fp8_queries(shape: tuple[int, ...], g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-(query, head) quantized queries: e4m3 codes of x / s with s = amax / 448, and the scales s."""
    x = torch.randn(*shape, device=DEVICE, generator=g)
    s = x.abs().amax(dim=-1).clamp_min(1e-4) / 448
    return (x / s.unsqueeze(-1)).to(torch.float8_e4m3fn).view(torch.uint8), s


FP8_DOT_BOUND = float(E4M3_DOT_BOUND)
"""The e4m3 dot's error bound relative to the magnitude sum_h |w| qs ks sum_d |q_d k_d| (docs/indexing-kernels.md)."""


def fp8_check(got: torch.Tensor, twin: torch.Tensor, magnitude: torch.Tensor, live: torch.Tensor) -> str:
    """FP8 queries: the error against the float32 twin as a fraction of each lane's magnitude."""
    err = ((got - twin).abs()[live] / magnitude[live].clamp_min(1e-30)).max().item() if live.any() else 0.0
    verdict = "ok" if err <= FP8_DOT_BOUND else "over the bound"
    return f"{verdict} (max error / magnitude {err:.1e}, bound {FP8_DOT_BOUND:.1e})"


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


LOGITS_TILES = (
    (256, 64, 8, 2), (128, 64, 8, 3), (256, 64, 8, 3), (256, 64, 4, 3),
    (256, 128, 8, 3), (128, 64, 4, 4), (128, 128, 8, 3), (64, 128, 4, 4),
)  # fmt: skip
"""(columns, BK, warps, stages) swept on the headline logits shapes."""
Q8_TILES = (
    (256, 64, 4, 3), (256, 64, 4, 4), (256, 64, 4, 2), (128, 64, 4, 3),
    (512, 64, 4, 3), (256, 64, 8, 3), (128, 128, 4, 2), (256, 64, 8, 2),
)  # fmt: skip
"""The same sweep for FP8 queries and keys (e4m3 operands take half the shared memory of bf16)."""


# --- index logits (gathered) --------------------------------------------------------------------------------


def logits_model(queries: int, lengths: torch.Tensor, rows: int, key_bytes: float) -> tuple[int, int]:
    """(bytes, flops): q, weights and lengths once, the key rows once, every output lane written once; two
    flops per multiply-add of the visible (query, head, row) dot products."""
    seen = int(lengths.sum())
    moved = queries * HEADS * (DIM * 2 + 4) + queries * 4 + int(rows * key_bytes) + queries * rows * 4
    return moved, 2 * HEADS * DIM * seen


def loop_options(fp8_keys: bool) -> list[tuple[bool, bool, str]]:
    """``(hoist, fold, name suffix)`` of each tile in a sweep: loop-invariant code hoisted and kept in the loop
    (``LogitsConfig.hoist``); for FP8 keys also the key-scale fold off, on the hoisted loop
    (``LogitsConfig.fold``)."""
    options = [(True, True, ""), (False, True, "_nolicm")]
    return [*options, (True, False, "_nofold")] if fp8_keys else options


def logits_case(
    queries: int, rows: int, fp8: bool, causal: bool, compile_it: bool, sweep: bool, q8: bool = False
) -> None:
    kind = "fp8qk" if q8 else "fp8" if fp8 else "bf16"
    shape = f"{queries}x{rows}" + ("_causal" if causal else "")

    def build(with_compile: bool) -> Built:
        g = generator(queries + rows)
        q = torch.randn(queries, HEADS, DIM, device=DEVICE, generator=g).bfloat16()
        w = torch.randn(queries, HEADS, device=DEVICE, generator=g) * HEADS**-0.5
        if causal:  # the chunk's last query sees every row, earlier ones one row fewer each
            lengths = (torch.arange(queries, device=DEVICE) + rows - queries + 1).int()
        else:
            lengths = torch.full((queries,), rows, dtype=torch.int32, device=DEVICE)
        opts: dict[str, torch.Tensor] = {}
        formula: Callable[..., torch.Tensor]
        inputs: tuple[torch.Tensor, ...]
        if fp8 or q8:
            codes = torch.randn(rows, DIM, device=DEVICE, generator=g).to(torch.float8_e4m3fn).view(torch.uint8)
            scale = 2.0 ** torch.randint(-6, 0, (rows,), device=DEVICE, generator=g).float()
            keys, key_bytes, opts["k_scale"] = codes, DIM + 4, scale
            formula, inputs = eager_logits_fp8, (q, w, codes, scale, lengths)
        else:
            keys, key_bytes = torch.randn(rows, DIM, device=DEVICE, generator=g).bfloat16(), 2 * DIM
            formula, inputs = eager_logits, (q, w, keys, lengths)
        if q8:
            q, opts["q_scale"] = fp8_queries((queries, HEADS, DIM), g)
            formula, inputs = eager_logits_q8, (q, opts["q_scale"], w, codes, scale, lengths)
        first = {name: t[:64] if name == "q_scale" else t for name, t in opts.items()}  # the checks' 64 queries

        def run(cfg=None):
            return logits.index_logits(q, w, keys, lengths, validate=False, config=cfg, **opts)

        def eager():
            return formula(*inputs)

        compiled_fn = compiled(formula)

        def comp():
            return compiled_fn(*inputs)

        def twin():
            return naive.index_logits(q[:64], w[:64], keys, lengths[:64], **first)

        def mine():
            return logits.index_logits(q[:64], w[:64], keys, lengths[:64], **first)

        def magnitude():  # FP8 queries: the twin on absolute values (sign bits cleared)
            return naive.index_logits(q[:64] & 0x7F, w[:64].abs(), keys & 0x7F, lengths[:64], **first)

        moved, flops = logits_model(queries, lengths, rows, key_bytes)
        if q8:
            moved -= queries * HEADS * DIM  # one byte a query entry, not two
        impls: dict[str, Callable[[], object]] = {"triton": run, "torch_eager": eager}
        if with_compile and compile_it:
            impls["torch_compile"] = comp

        def check() -> str:
            a, b = mine(), twin()
            live = torch.isfinite(b)
            if not torch.equal(live, torch.isfinite(a)):
                return "the -inf lanes differ from the float32 twin"
            if q8:
                return fp8_check(a, b, magnitude(), live)
            err = ((a - b).abs()[live] / b.abs()[live].clamp_min(1e-3)).max().item() if live.any() else 0.0
            return f"ok (max relative difference to the float32 twin {err:.1e})" if err < 1e-3 else f"rel {err:.1e}"

        variants: dict[str, Callable[[], object]] = {}
        tiles = Q8_TILES if q8 else LOGITS_TILES if not fp8 else (*LOGITS_TILES[:2], (128, 64, 8, 2), (256, 64, 8, 3))
        if sweep:
            for (cols, bk, warps, stages), (hoist, fold, suffix) in itertools.product(tiles, loop_options(fp8)):
                cfg = logits.LogitsConfig(
                    columns=cols, block_k=bk, num_warps=warps, num_stages=stages, hoist=hoist, fold=fold
                )
                variants[f"cols{cols}_bk{bk}_w{warps}_s{stages}{suffix}"] = functools.partial(run, cfg)
        note = f"default tile {logits.default_config(fp8, q8)}; TFLOP/s counts 2 * H * D per visible (query, row)"
        return Built(impls, moved, flops, check=check, sweep=variants, notes=[note], compute="fp8" if q8 else "bf16")

    register(
        Case(f"indexing/logits_{kind}_{shape}", "indexing-logits", f"index logits {kind} keys, {shape}, 64x128", build)
    )


# --- paged decode logits ------------------------------------------------------------------------------------


PAGED_TILES = ((128, 4, 2), (64, 4, 3), (64, 8, 2), (128, 4, 3), (128, 8, 2), (256, 4, 2))
"""(BK, warps, stages) swept on the paged FP8-query case."""


def paged_case(requests: int, next_n: int, context: int, fp8: bool, compile_it: bool, q8: bool = False) -> None:
    bc = 64
    kind = "fp8qk" if q8 else "fp8" if fp8 else "bf16"

    def build(with_compile: bool) -> Built:
        g = generator(requests * next_n + context)
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

        qc, qs = q, None
        if q8:  # the torch formulas see the queries the FP8 codes stand for
            qc, scales = fp8_queries((requests, next_n, HEADS, DIM), g)
            q, qs = (qc.view(torch.float8_e4m3fn).float() * scales.unsqueeze(-1)).bfloat16(), scales

        def run(cfg=None):
            return logits.paged_index_logits(
                qc, w, cache, table, lengths, rows_per_block=bc, q_scale=qs, validate=False, config=cfg
            )

        def checked():
            return logits.paged_index_logits(qc, w, cache, table, lengths, rows_per_block=bc, q_scale=qs)

        def eager():
            return eager_fn(q, w, cache, table, lengths, bc)

        impls: dict[str, Callable[[], object]] = {"triton": run, "triton+checks": checked, "torch_eager": eager}
        if with_compile and compile_it:
            compiled_fn = compiled(eager_fn)
            impls["torch_compile"] = lambda: compiled_fn(q, w, cache, table, lengths, bc)
        rows_read = int(lengths.amax(dim=1).sum())
        moved = rows_read * row_bytes + requests * next_n * (HEADS * (DIM * 2 + 4) + blocks * bc * 4)
        moved += table.numel() * 4
        if q8:
            moved -= requests * next_n * HEADS * DIM
        flops = 2 * HEADS * DIM * int(lengths.sum())

        def check() -> str:
            a = run()
            b = naive.paged_index_logits(
                qc[:4], w[:4], cache, table[:4], lengths[:4], rows_per_block=bc, q_scale=None if qs is None else qs[:4]
            )
            a = a[: 4 * next_n]
            live = torch.isfinite(b)
            if not torch.equal(live, torch.isfinite(a)):
                return "the -inf lanes differ from the float32 twin"
            if qs is not None:
                abs_cache = cache.clone()
                abs_cache[:, : bc * DIM] &= 0x7F
                mag = naive.paged_index_logits(
                    qc[:4] & 0x7F, w[:4].abs(), abs_cache, table[:4], lengths[:4], rows_per_block=bc, q_scale=qs[:4]
                )
                return fp8_check(a, b, mag, live)
            err = ((a - b).abs()[live] / b.abs()[live].clamp_min(1e-3)).max().item()
            return f"ok (max relative difference {err:.1e})" if err < 1e-3 else f"rel {err:.1e}"

        variants: dict[str, Callable[[], object]] = {}
        if q8:
            for (bk, warps, stages), (hoist, fold, suffix) in itertools.product(PAGED_TILES, loop_options(True)):
                cfg = logits.LogitsConfig(block_k=bk, num_warps=warps, num_stages=stages, hoist=hoist, fold=fold)
                variants[f"bk{bk}_w{warps}_s{stages}{suffix}"] = functools.partial(run, cfg)
        default = logits.default_config(fp8, q8, paged=True)
        if not q8:  # the default tile with relu as a NaN-keeping max and as a compare and a select
            for relu_max in (True, False):
                cfg = dataclasses.replace(default, relu_max=relu_max)
                variants[f"default_relu_{'max' if relu_max else 'select'}"] = functools.partial(run, cfg)
        for prefetch, hoist in itertools.product((0, 1), (True, False)):  # the L2 prefetch and hoisting, each way
            cfg = dataclasses.replace(default, prefetch=prefetch, hoist=hoist)
            if cfg != default:  # the default itself is timed as "triton"
                variants[f"default_prefetch{prefetch}{'' if hoist else '_nolicm'}"] = functools.partial(run, cfg)
        note = "bytes: each request's rows read once (its longest query)"
        if q8:
            note += f"; default tile {logits.default_config(True, True, paged=True)}"
        return Built(impls, moved, flops, check=check, sweep=variants, notes=[note], compute="fp8" if q8 else "bf16")

    name = f"indexing/paged_{kind}_B{requests}_n{next_n}_ctx{context // 1024}K"
    register(Case(name, "indexing-paged", f"paged decode logits, {kind} cache, Bc = {bc}", build))
