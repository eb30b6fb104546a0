"""Lower the top-k and FP8 index-logits kernels to sm_90 (H100 / H200) code on any machine, without a GPU.

    python -m fast.indexing.compile_check [--only NAME] [--ptx DIR]   (TRITON_INTERPRET must be unset)

The interpreter runs what a kernel computes but compiles nothing: constructs the compiler refuses, register
spills and scalar instead of 16-byte vector loads only show when lowering. For each top-k kernel in the
configurations the launches and the benchmark sweep use (the one-program kernel; the split-row path's
threshold, count and compaction kernels, their fused form, and its select-and-collect entry; the
register-resident kernel), and for the FP8-query index-logits kernels at their default tiles with and without
hoisting (``LogitsConfig.hoist``), this prints registers, spilled stack bytes, shared memory and global loads
with their 16-byte vector form. Exit status 1 if a kernel fails to compile or spills.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
from typing import Any

from fast.sm90 import lower_cases

MAX_STACK_BYTES = 0
# integer arguments that are multiples of 16 in the benchmarked launches (Triton specializes on that)
DIVISIBLE = frozenset({"width", "lanes", "k", "M", "N", "H", "D", "T", "W", "split", "rows_per_block"})
I32, F32 = "*i32", "*fp32"
MAIN_ARGS = dict(scores_ptr=F32, lengths_ptr=I32, offsets_ptr=I32, keep_ptr="*u8", table_ptr=I32, out_ptr=I32,
                 buf_key_ptr=I32, buf_idx_ptr=I32, rank_key_ptr=I32, rank_val_ptr=I32, thresh_ptr=I32,
                 counts_ptr=I32, width="i32", k="i32", lanes="i32", fill="i32", block_size="i32", keep_stride="i32",
                 table_width="i32", rows_per_block="i32", splits="i32")  # fmt: skip
THRESHOLD_ARGS = dict(scores_ptr=F32, lengths_ptr=I32, keep_ptr="*u8", thresh_ptr=I32, width="i32", k="i32",
                      block_size="i32", keep_stride="i32")  # fmt: skip
# the resident kernel takes the one-program kernel's arguments without the buffers and the split-row inputs
RESIDENT_ARGS = {name: kind for name, kind in MAIN_ARGS.items()
                 if name not in ("buf_key_ptr", "buf_idx_ptr", "thresh_ptr", "counts_ptr", "splits")}  # fmt: skip
PASS_ARGS = dict(scores_ptr=F32, lengths_ptr=I32, keep_ptr="*u8", thresh_ptr=I32, counts_ptr=I32, buf_key_ptr=I32,
                 buf_idx_ptr=I32, width="i32", k="i32", block_size="i32", keep_stride="i32",
                 splits="i32")  # fmt: skip
FUSED_ARGS = dict(scores_ptr=F32, lengths_ptr=I32, keep_ptr="*u8", thresh_ptr=I32, counts_ptr=I32, sync_ptr="*i64",
                  buf_key_ptr=I32, buf_idx_ptr=I32, width="i32", k="i32", block_size="i32", keep_stride="i32",
                  splits="i32", rows="i32")  # fmt: skip

Case = tuple[str, Any, dict[str, str], dict[str, Any], int]


def cases(k: int = 2048, width: int = 262144) -> list[Case]:
    """(name, kernel, argument types, constexprs, warps) for rows of ``width`` lanes and this k."""
    from fast.indexing.bench_topk import TOPK_SPLITS
    from fast.indexing.topk.config import COMPILED, buffer_sizes, pow2
    from fast.indexing.topk.resident import _topk_resident_kernel, resident_warps
    from fast.indexing.topk.row import _topk_kernel
    from fast.indexing.topk.split import _split_fused_kernel, _split_pass_kernel, _split_threshold_kernel

    cfg = COMPILED
    kpad, cap = buffer_sizes(cfg, k, width)
    main = dict(HAS_OFFSETS=True, HAS_KEEP=False, TRANSLATE=False, RANK=False, DROP_NEG_INF=False, DROP_NAN=False,
                BLOCK=cfg.block, SAMPLE=cfg.sample, OVERSAMPLE=cfg.oversample, DIRECT=cfg.direct, CAP=cap,
                KPAD=kpad, PRESPLIT=False, NSPLIT=1)  # fmt: skip
    out: list[Case] = [
        ("one-program v4.1", _topk_kernel, MAIN_ARGS, main, cfg.num_warps),
        ("one-program rank order", _topk_kernel, MAIN_ARGS, main | dict(RANK=True), cfg.num_warps),
        ("one-program slots", _topk_kernel, MAIN_ARGS | dict(out_ptr="*i64"), main | dict(TRANSLATE=True),
         cfg.num_warps),
    ]  # fmt: skip
    sweep = [(c["split_lanes"], c["split_block"], c["split_warps"]) for c in TOPK_SPLITS]
    for split_lanes, block, warps in sweep:
        splits = -(-width // split_lanes)
        label = f"split{split_lanes} block{block} w{warps}"
        presplit = main | dict(PRESPLIT=True, NSPLIT=pow2(splits))
        passes = dict(HAS_KEEP=False, DIRECT=cfg.direct, CAP=cap, SPLIT=split_lanes, BLOCK=min(block, split_lanes),
                      NSPLIT=pow2(splits))  # fmt: skip
        out += [
            (f"{label} count", _split_pass_kernel, PASS_ARGS, passes | dict(STORE=False), warps),
            (f"{label} compact", _split_pass_kernel, PASS_ARGS, passes | dict(STORE=True), warps),
            (f"{label} compact keep map", _split_pass_kernel, PASS_ARGS, passes | dict(STORE=True, HAS_KEEP=True),
             warps),
            (f"{label} select+collect", _topk_kernel, MAIN_ARGS, presplit, cfg.num_warps),
        ]  # fmt: skip
        fused = dict(HAS_KEEP=False, BLOCK=cfg.block, SAMPLE=cfg.sample, OVERSAMPLE=cfg.oversample,
                     DIRECT=cfg.direct, CAP=cap, SPLIT=split_lanes, SPLIT_BLOCK=min(block, split_lanes),
                     NSPLIT=pow2(splits))  # fmt: skip
        for leaders, what in ((True, "fused, one launch"), (False, "fused count and compaction")):
            one = fused | dict(LEADERS=leaders, INTERPRETED=False)
            out += [
                (f"{label} {what}", _split_fused_kernel, FUSED_ARGS, one, warps),
                (f"{label} {what}, keep map", _split_fused_kernel, FUSED_ARGS, one | dict(HAS_KEEP=True), warps),
            ]
    out += [
        ("split select+collect slots, rank order", _topk_kernel, MAIN_ARGS | dict(out_ptr="*i64"),
         main | dict(PRESPLIT=True, NSPLIT=32, TRANSLATE=True, RANK=True), cfg.num_warps),
        ("split threshold", _split_threshold_kernel, THRESHOLD_ARGS,
         dict(HAS_KEEP=False, BLOCK=cfg.block, SAMPLE=cfg.sample, OVERSAMPLE=cfg.oversample, DIRECT=cfg.direct),
         cfg.num_warps),
    ]  # fmt: skip
    flags = {name: main[name] for name in ("HAS_OFFSETS", "HAS_KEEP", "TRANSLATE", "RANK", "DROP_NEG_INF", "DROP_NAN")}
    for wpad, kk in ((16384, 2048), (16384, 1024), (4096, 512)):
        resident = flags | dict(WPAD=wpad, KPAD=pow2(kk), BLOCK=cfg.block)
        warps = resident_warps(wpad, cfg.resident_keys)
        out += [
            (f"resident {wpad} k{kk} v4.1", _topk_resident_kernel, RESIDENT_ARGS, resident, warps),
            (f"resident {wpad} k{kk} rank order", _topk_resident_kernel, RESIDENT_ARGS, resident | dict(RANK=True),
             warps),
        ]  # fmt: skip
    return out


LOGITS_ARGS = dict(q_ptr="*u8", qs_ptr=F32, w_ptr=F32, k_ptr="*u8", scale_ptr=F32, len_ptr=I32, out_ptr=F32,
                   M="i32", N="i32", H="i32", D="i32", split="i32")  # fmt: skip
PAGED_LOGITS_ARGS = dict(q_ptr="*u8", qs_ptr=F32, w_ptr=F32, cache_ptr="*u8", table_ptr=I32, len_ptr=I32,
                         out_ptr=F32, T="i32", H="i32", D="i32", W="i32", table_width="i32", num_blocks="i32",
                         rows_per_block="i32", split="i32")  # fmt: skip


def logits_cases(heads: int = 64, dim: int = 128) -> list[tuple[str, Any, dict[str, str], dict[str, Any], int, int]]:
    """The FP8-query index-logits kernels at their default tiles (flat and paged), with loop-invariant code
    hoisted and kept in the loop (``LogitsConfig.hoist``), the paged one with and without its prefetch a step
    ahead (``LogitsConfig.prefetch``): (name, kernel, argument types, constexprs, warps, stages)."""
    import dataclasses

    import torch

    from fast.indexing import logits

    out = []
    for paged, kernel, sig in ((False, logits._logits_kernel, LOGITS_ARGS),
                               (True, logits._paged_logits_kernel, PAGED_LOGITS_ARGS)):  # fmt: skip
        default = logits.default_config(fp8=True, q8=True, paged=paged)
        variants = [dataclasses.replace(default, hoist=hoist) for hoist in (True, False)]
        if paged:
            variants += [dataclasses.replace(c, prefetch=1 - default.prefetch) for c in variants]
        for cfg in variants:
            what = (f"{'hoisted' if cfg.hoist else 'kept in the loop'}{', prefetching a step ahead' * cfg.prefetch}"
                    f"{' (the default)' * (cfg == default)}")  # fmt: skip
            tile = logits._tile(heads, dim, 2 if paged else 64, cfg, q8=True)
            constants = logits._constants(cfg, tile, True, torch.uint8, dim, q8=True) | dict(UPCAST=False)
            if paged:
                constants |= logits.paged_prefetch_constants(cfg.prefetch, dim, 1)
            warps, stages = constants.pop("num_warps"), constants.pop("num_stages")
            name = f"logits fp8 q and k{' paged' if paged else ''}, {what}"
            out.append((name, kernel, sig, constants, warps, stages))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fast.indexing.compile_check", description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="", help="compile only cases whose name contains this")
    parser.add_argument("--ptx", type=pathlib.Path, help="write each kernel's PTX into this folder")
    args = parser.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET") == "1":
        print("compile_check: unset TRITON_INTERPRET (the interpreter does not compile)", file=sys.stderr)
        return 2
    all_cases = [(*c, None) for c in cases()] + logits_cases()
    ok = lower_cases(all_cases, only=args.only, divisible=DIVISIBLE, max_stack=MAX_STACK_BYTES, ptx_dir=args.ptx)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
