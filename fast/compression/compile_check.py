"""Compile the compression kernels for an H100/H200 (sm_90) on any machine, no GPU needed.

    python -m fast.compression.compile_check        (TRITON_INTERPRET must be unset)

The interpreter checks what the kernels compute, not whether they compile: it accepts constructs the compiler
refuses (a non-constexpr global, for one) and says nothing of registers or vector width. This lowers each kernel
through Triton's CUDA backend to PTX and a cubin (Triton ships ptxas), and reports per kernel: registers, stack
(spilled) bytes, global loads and how many of them are 128-bit vector loads. Exit status 1 if a kernel fails
to compile, spills, or loads its streamed inputs without 128-bit vectors.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from typing import Any

from fast.compression.plan import Mode
from fast.compression.triton_kernels import default_tiles

F32, I32, I16, I64 = "*fp32", "*i32", "*i16", "*i64"
ROWS_ARGS = dict(score_ptr=F32, latent_ptr=F32, ape_ptr=F32, state_ptr=F32, tiles_ptr=I32, table_ptr=I32,
                 table_stride="i32", out_ptr=I16, slot_ptr=I64, pos_ptr=I64, cache_ptr=F32)  # fmt: skip
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
    return base | extra


def cases() -> list[tuple[str, Any, dict[str, str], dict[str, Any]]]:
    """(name, kernel, argument types, constexprs and num_warps) at the default tiles."""
    from fast.compression import triton_kernels as tk

    P, D = Mode.PREFILL, Mode.DECODE
    return [
        ("prefill C2", tk._prefill_rows_kernel, ROWS_ARGS, flags(P, 2, False, False, 4)),
        ("prefill V4 overlap", tk._prefill_rows_kernel, ROWS_ARGS, flags(P, 4, True, True, 9)),
        ("prefill r128", tk._prefill_rows_kernel, ROWS_ARGS, flags(P, 128, False, True, 130)),
        ("prefill V4 f32 + cache", tk._prefill_rows_kernel, ROWS_ARGS | {"out_ptr": F32},
         flags(P, 4, True, True, 9, OUT_BF16=False, HAS_TABLE=True, WRITE_CACHE=True)),
        ("decode V4 overlap", tk._decode_kernel, DECODE_ARGS, flags(D, 4, True, True, 12, WRITE_RING=True)),
        ("decode C2", tk._decode_kernel, DECODE_ARGS, flags(D, 2, False, False, 6, WRITE_RING=True)),
        ("decode r128", tk._decode_kernel, DECODE_ARGS, flags(D, 128, False, True, 140, WRITE_RING=True)),
        ("keep", tk._keep_kernel, KEEP_ARGS, dict(C=1024, S=9, BLOCK_P=8, BLOCK_C=256, num_warps=4)),
    ]  # fmt: skip


def compile_one(fn: Any, args: dict[str, str], constexprs: dict[str, Any]) -> dict[str, Any]:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.compiler import compile as triton_compile

    constexprs = dict(constexprs)
    num_warps = constexprs.pop("num_warps", 4)
    target = GPUTarget("cuda", 90, 32)
    backend = make_backend(target)
    signature, attrs = {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in constexprs:
            signature[name] = "constexpr"
            continue
        signature[name] = args[name]
        if args[name].startswith("*"):  # launches see 16-byte aligned tensors
            attrs[(i,)] = backend.parse_attr("D")
    kernel = triton_compile(
        ASTSource(fn, signature, constexprs, attrs), target=target, options={"num_warps": num_warps}
    )
    ptx = kernel.asm["ptx"]
    report = {
        "global_loads": len(re.findall(r"ld\.global", ptx)),
        "vector_loads": len(re.findall(r"ld\.global(?:\.[\w:]+)*\.v4", ptx)),
        "registers": None,
        "stack_bytes": None,
    }
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    if os.path.exists(tool):
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(kernel.asm["cubin"])
            f.flush()
            usage = subprocess.run([tool, "-res-usage", f.name], capture_output=True, text=True).stdout
        regs, stack = re.search(r"REG:(\d+)", usage), re.search(r"STACK:(\d+)", usage)
        report["registers"] = int(regs.group(1)) if regs else None
        report["stack_bytes"] = int(stack.group(1)) if stack else None
    return report


def main() -> int:
    if os.environ.get("TRITON_INTERPRET") == "1":
        print("compile_check: unset TRITON_INTERPRET (the interpreter does not compile)", file=sys.stderr)
        return 2
    failed = False
    for name, fn, args, constexprs in cases():
        try:
            r = compile_one(fn, args, constexprs)
        except Exception as err:
            print(f"{name}: FAILED to compile: {type(err).__name__}: {err}")
            failed = True
            continue
        problems = []
        if r["vector_loads"] == 0:
            problems.append("no 128-bit loads")
        if r["stack_bytes"] is not None and r["stack_bytes"] > MAX_STACK_BYTES:
            problems.append(f"{r['stack_bytes']} bytes of stack (spills)")
        failed |= bool(problems)
        print(f"{name}: registers {r['registers']}, stack {r['stack_bytes']} B, global loads {r['global_loads']} "
              f"({r['vector_loads']} 128-bit){'; ' + ', '.join(problems) if problems else ''}")  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
