"""Top-k, slot translation and candidate-block benchmark cases, built for ``fast.indexing.bench_cases``."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import torch

from fast.bench import DEVICE, Built, Case, compiled, generator, register
from fast.indexing import addressing, candidates, naive
from fast.indexing import topk as tk

# --- torch formulas (what a model file writes) --------------------------------------------------------------


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


# --- top-k --------------------------------------------------------------------------------------------------


DISTRIBUTIONS = {
    "normal": "random normal scores",
    "ties": "adversarial scores: 100 + one of 4 integers (every value shifted by 100, massive ties)",
}
"""Score distributions of the top-k cases; "ties" is DeepSelect's adversarial input."""


def _scores(
    rows: int, width: int, seed: int, distribution: str = "normal"
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = generator(seed)
    if distribution == "ties":
        scores = 100.0 + torch.randint(0, 4, (rows, width), device=DEVICE, generator=g).float()
    else:
        scores = torch.randn(rows, width, device=DEVICE, generator=g)
    lengths = torch.randint(width // 2, width + 1, (rows,), device=DEVICE, generator=g).int()
    lengths[0] = width
    offsets = torch.randint(0, 1 << 20, (rows,), device=DEVICE, generator=g).int()
    return scores, lengths, offsets


def topk_bytes(lengths: torch.Tensor, lanes: int, out_bytes: int) -> int:
    """Each visible score read once, every output lane written once, lengths and offsets read once."""
    return int(lengths.sum()) * 4 + lengths.numel() * (lanes * out_bytes + 8)


TOPK_SPLITS: tuple[dict[str, Any], ...] = (
    dict(split_lanes=16384, split_block=2048, split_warps=8),
    dict(split_lanes=8192, split_block=2048, split_warps=8),
    dict(split_lanes=32768, split_block=2048, split_warps=8),
    dict(split_lanes=16384, split_block=4096, split_warps=16),
    dict(split_lanes=8192, split_block=1024, split_warps=4),
)
"""Split-row configurations of the top-k sweep (fast/indexing/compile_check.py lowers the same ones)."""


def topk_case(
    rows: int, width: int, k: int, convention: str, compile_it: bool, sweep: bool, distribution: str = "normal"
) -> None:
    def build(with_compile: bool) -> Built:
        scores, lengths, offsets = _scores(rows, width, rows + width + k, distribution)

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
        fused = {n: dataclasses.replace(tk.COMPILED, split_launches=n) for n in (1, 2)}
        if split_lanes:  # the default takes the split-row path: time the one-program path and the fused form beside it
            impls["triton_one_program"] = functools.partial(run, one_program)
            for n, cfg in fused.items():
                impls[f"triton_split{n}"] = functools.partial(run, cfg)
        sampled = dataclasses.replace(tk.COMPILED, resident=0)
        if tk.uses_resident(tk.COMPILED, rows, width):  # the register-resident path: time the sampled one beside it
            impls["triton_sampled"] = functools.partial(run, sampled)
        impls["torch_topk_plain"] = lambda: scores.topk(k, dim=-1, sorted=False)
        if convention == "v4.1":
            impls["torch_eager"] = lambda: eager_topk(scores, lengths, k, offsets)
            if with_compile and compile_it:
                compiled_fn = compiled(eager_topk)
                impls["torch_compile"] = lambda: compiled_fn(scores, lengths, k, offsets)
        else:
            impls["torch_eager"] = lambda: naive.topk(scores, lengths, k=k, convention=convention, offsets=offsets)

        def check() -> str:
            want = naive.topk(scores, lengths, k=k, convention=convention, offsets=offsets)
            configs = [tk.COMPILED, one_program, sampled, *fused.values()]
            configs += [dataclasses.replace(tk.COMPILED, **c, split_launches=n) for c in TOPK_SPLITS for n in (3, 2, 1)]
            differ = [str(i) for i, cfg in enumerate(configs) if not torch.equal(run(cfg), want)]
            if differ:
                return "DIFFERS from the torch twin (configurations " + ", ".join(differ) + ")"
            return "ok (default, one-program, sampled, fused and every split configuration equal to the torch twin)"

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
                for n in (1, 2):
                    variants[f"{name}_launches{n}"] = functools.partial(run, dataclasses.replace(cfg, split_launches=n))
            variants["oversample4"] = lambda: run(tk.TopKConfig(oversample=4))
            if tk.uses_resident(tk.COMPILED, rows, width):
                for keys in (16, 128):
                    variants[f"resident_keys{keys}"] = functools.partial(run, tk.TopKConfig(resident_keys=keys))
        notes = ["torch_topk_plain: scores.topk(k, sorted=False) alone, no mask, sort or fill"]
        if split_lanes:
            notes.append(
                f"triton: split-row path, {split_lanes}-lane splits; triton_one_program: one program a row; "
                "triton_split2 / triton_split1: the split-row path's threshold, count and compaction in two / one "
                "launches"
            )
        # launch-bound at these sizes: timed as graph replays too
        graphs: tuple[str, ...] = ("triton", "torch_topk_plain")
        if split_lanes:
            graphs += ("triton_split1", "triton_split2")
        return Built(impls, topk_bytes(lengths, k, 4), 0, check=check, sweep=variants, notes=notes, graphs=graphs)

    name = f"indexing/topk_{topk_shape(rows, width, k, convention, distribution)}"
    register(Case(name, "indexing-topk", f"valid-prefix top-k, {convention}, {DISTRIBUTIONS[distribution]}", build))


def topk_shape(rows: int, width: int, k: int, convention: str, distribution: str = "normal") -> str:
    """The name of a top-k case after ``indexing/topk_``: ``128x256K_k2048_v4.1``, ``..._ties`` for ties."""
    return f"{rows}x{width // 1024}K_k{k}_{convention}" + ("" if distribution == "normal" else f"_{distribution}")


def fused_case(rows: int, width: int, k: int, compile_it: bool) -> None:
    bc = 64

    def build(with_compile: bool) -> Built:
        scores, lengths, offsets = _scores(rows, width, 5)
        blocks = width // bc
        g = generator(6)
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
            compiled_fn = compiled(lambda s, n, t: eager_slots(eager_topk(s, n, k, n * 0), t, bc))
            impls["torch_compile"] = lambda: compiled_fn(scores, lengths, table)

        def check() -> str:
            want = naive.topk(scores, lengths, k=k, block_table=table, rows_per_block=bc)
            return "ok (equal to the torch twin)" if torch.equal(fused(), want) else "DIFFERS from the torch twin"

        # launched, these calls take the host longer to queue than the GPU to run (docs/targets.md, section 4): the
        # three Triton forms are timed as graph replays too, and the target is judged on both
        graphs = ("triton", "triton_topk_alone", "triton_topk_then_slots")
        notes = ["block ids from 2**26: slots pass 2**31 (int64)"]
        return Built(impls, topk_bytes(lengths, k, 8), 0, check=check, notes=notes, graphs=graphs)

    register(
        Case(
            f"indexing/topk_slots_{rows}x{width // 1024}K_k{k}",
            "indexing-topk",
            "top-k with the slot translation fused, against top-k alone and top-k then translation",
            build,
        )
    )


def slots_case(rows: int, lanes: int) -> None:
    bc = 64

    def build(with_compile: bool) -> Built:
        g = generator(7)
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


def candidate_case(rows: int, width: int, block_size: int, topk_blocks: int) -> None:
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
