"""Compile the compression kernels for an H100/H200 (sm_90) on any machine, no GPU needed.

    python -m fast.compression.compile_check        (TRITON_INTERPRET must be unset)

The interpreter checks what the kernels compute, not whether they compile: it accepts constructs the compiler
refuses (a non-constexpr global, for one) and says nothing of registers or vector width. This lowers each kernel
through Triton's CUDA backend (``fast.sm90``) to PTX and a cubin, and reports per kernel: registers, stack
(spilled) bytes, global loads and how many of them are 128-bit vector loads. Exit status 1 if a kernel fails
to compile, spills, or loads its streamed inputs without 128-bit vectors.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from fast.compression.plan import Mode
from fast.compression.triton_kernels import default_tiles
from fast.sm90 import compile_for_sm90

F32, I32, I16, I64 = "*fp32", "*i32", "*i16", "*i64"
ROWS_ARGS = dict(score_ptr=F32, latent_ptr=F32, ape_ptr=F32, state_ptr=F32, tiles_ptr=I32, table_ptr=I32,
                 table_stride="i32", out_ptr=I16, slot_ptr=I64, pos_ptr=I64, cache_ptr=F32, cu_ptr=I32,
                 one_start="i32", one_length="i32", one_slot="i32", one_completed="i32",
                 one_reserved="i32")  # fmt: skip
DECODE_ARGS = dict(score_ptr=F32, latent_ptr=F32, ape_ptr=F32, state_ptr=F32, state_index_ptr=I32, cu_ptr=I32,
                   start_ptr=I32, table_ptr=I32, table_stride="i32", out_ptr=I16, slot_ptr=I64, pos_ptr=I64,
                   cache_ptr=F32)  # fmt: skip
KEEP_ARGS = dict(score_ptr=F32, latent_ptr=F32, state_ptr=F32, state_index_ptr=I32, cu_ptr=I32, start_ptr=I32)
MAX_STACK_BYTES = 16


def flags(
    mode: Mode, ratio: int, overlap: bool, ape: bool, ring: int, max_new: int = 6, **extra: Any
) -> dict[str, Any]:
    """Constexprs of a d = 512 layer at the default tiles."""
    d, window = 512, ratio * (2 if overlap else 1)
    cfg = default_tiles(mode, window, d, max_new, -(-max_new // ratio))
    base = dict(R=ratio, D=d, C=d * (2 if overlap else 1), OVERLAP=overlap, HAS_APE=ape, S=ring, ROWS_PER_BLOCK=1,
                HAS_TABLE=False, WRITE_CACHE=False, OUT_BF16=True, CACHE_BF16=False, W=window,
                BLOCK_R=cfg.block_r, BLOCK_K=cfg.block_k, BLOCK_C=cfg.block_c, POLY_EXP=cfg.poly_exp,
                EVICT="evict_first" if cfg.evict_first else "",
                num_warps=cfg.num_warps)  # fmt: skip
    if mode is Mode.DECODE:
        base["BLOCK_N"] = cfg.block_n
    else:
        base |= dict(ONE_REQUEST=True, KEEP=True, BLOCK_P=8)
    return base | extra


def cases() -> list[tuple[str, Any, dict[str, str], dict[str, Any]]]:
    """(name, kernel, argument types, constexprs and num_warps) at the default tiles."""
    from fast.compression.triton_decode import _decode_kernel
    from fast.compression.triton_prefill import _keep_kernel, _prefill_rows_kernel

    P, D = Mode.PREFILL, Mode.DECODE
    return [
        ("prefill C2", _prefill_rows_kernel, ROWS_ARGS, flags(P, 2, False, False, 4)),
        ("prefill V4 overlap", _prefill_rows_kernel, ROWS_ARGS, flags(P, 4, True, True, 9)),
        ("prefill r128", _prefill_rows_kernel, ROWS_ARGS, flags(P, 128, False, True, 130)),
        ("prefill V4 overlap, several requests", _prefill_rows_kernel, ROWS_ARGS,
         flags(P, 4, True, True, 9, ONE_REQUEST=False)),
        ("prefill V4 f32 + cache", _prefill_rows_kernel, ROWS_ARGS | {"out_ptr": F32},
         flags(P, 4, True, True, 9, OUT_BF16=False, HAS_TABLE=True, WRITE_CACHE=True)),
        ("decode V4 overlap", _decode_kernel, DECODE_ARGS, flags(D, 4, True, True, 12, WRITE_RING=True)),
        ("decode C2", _decode_kernel, DECODE_ARGS, flags(D, 2, False, False, 6, WRITE_RING=True)),
        ("decode r128", _decode_kernel, DECODE_ARGS, flags(D, 128, False, True, 140, WRITE_RING=True)),
        ("keep", _keep_kernel, KEEP_ARGS, dict(C=1024, S=9, BLOCK_P=8, BLOCK_C=256, num_warps=4)),
    ]  # fmt: skip


def main() -> int:
    if os.environ.get("TRITON_INTERPRET") == "1":
        print("compile_check: unset TRITON_INTERPRET (the interpreter does not compile)", file=sys.stderr)
        return 2
    failed = False
    for name, fn, args, constexprs in cases():
        try:
            constexprs = dict(constexprs)
            warps = constexprs.pop("num_warps", 4)
            r = compile_for_sm90(fn, args, constexprs, num_warps=warps)
        except Exception as err:
            print(f"{name}: FAILED to compile: {type(err).__name__}: {err}")
            failed = True
            continue
        problems = []
        if r.loads_16b == 0:
            problems.append("no 128-bit loads")
        if r.spills(MAX_STACK_BYTES):
            problems.append(f"{r.stack} bytes of stack (spills)")
        failed |= bool(problems)
        print(f"{name}: registers {r.registers}, stack {r.stack} B, global loads {r.loads} "
              f"({r.loads_16b} 128-bit){'; ' + ', '.join(problems) if problems else ''}")  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
