"""Lower a Triton kernel to an H100/H200 (sm_90) cubin on any machine, no GPU needed, and read its resources.

The interpreter checks what a kernel computes, not whether it compiles: it accepts constructs the compiler
refuses and says nothing of registers, spills or vector width. ``compile_for_sm90`` runs Triton's CUDA backend
(with the ptxas Triton ships) and reports, from the PTX and the cubin: registers, stack bytes (spills), shared
memory, global loads and stores and how many of them move 16 bytes (cache-hinted and ``cp.async`` forms
included), and ``wgmma`` / ``mma`` instructions. Each kernel family's ``compile_check`` module lists its cases.
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_VECTOR_LOAD = re.compile(r"ld\.global(?:\.[\w:]+)*\.v4")
_ASYNC_16B = re.compile(r"cp\.async\.\w+\.shared\.global(?:\.[\w:]+)* \[[^]]+\], \[[^]]+\], 16")


@dataclass(frozen=True)
class Compiled:
    """Resources of one compiled kernel (``registers`` / ``stack`` None where cuobjdump is not available)."""

    registers: int | None
    stack: int | None
    shared: int
    loads: int
    loads_16b: int
    stores: int
    stores_16b: int
    wgmma: int
    mma: int
    ptx: str

    def spills(self, allowed_bytes: int) -> bool:
        return self.stack is not None and self.stack > allowed_bytes


def compile_for_sm90(
    fn: Any,
    arg_types: dict[str, str],
    constexprs: dict[str, Any],
    *,
    num_warps: int,
    num_stages: int | None = None,
    divisible: frozenset[str] = frozenset(),
) -> Compiled:
    """Compile the jit function ``fn`` with ``constexprs`` fixed and the other arguments typed by ``arg_types``
    (``"*fp32"``, ``"i32"``...). Pointers, and the integers named in ``divisible``, are marked 16-divisible, as a
    launch on aligned tensors specializes them."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.compiler import compile as triton_compile

    target = GPUTarget("cuda", 90, 32)
    backend = make_backend(target)
    signature, attrs = {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in constexprs:
            signature[name] = "constexpr"
            continue
        signature[name] = arg_types[name]
        if arg_types[name].startswith("*") or name in divisible:
            attrs[(i,)] = backend.parse_attr("D")
    options: dict[str, Any] = {"num_warps": num_warps}
    if num_stages is not None:
        options["num_stages"] = num_stages
    source = ASTSource(fn, signature, constexprs, attrs)
    if type(fn).__name__ == "GluonJITFunction":  # a Gluon kernel: its own front end
        from triton.experimental.gluon._runtime import GluonASTSource

        source = GluonASTSource(fn, signature, constexprs, attrs)
    kernel = triton_compile(source, target=target, options=options)
    ptx = kernel.asm["ptx"]
    registers = stack = None
    tool = pathlib.Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if tool.exists():
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(kernel.asm["cubin"])
            f.flush()
            usage = subprocess.run([str(tool), "-res-usage", f.name], capture_output=True, text=True).stdout
        regs, spill = re.search(r"REG:(\d+)", usage), re.search(r"STACK:(\d+)", usage)
        registers = int(regs.group(1)) if regs else None
        stack = int(spill.group(1)) if spill else None
    return Compiled(
        registers=registers,
        stack=stack,
        shared=int(kernel.metadata.shared),
        loads=len(re.findall(r"ld\.global", ptx)),
        loads_16b=len(_VECTOR_LOAD.findall(ptx)) + len(_ASYNC_16B.findall(ptx)),
        stores=len(re.findall(r"st\.global", ptx)),
        stores_16b=len(re.findall(r"st\.global(?:\.[\w:]+)*\.v4", ptx)),
        wgmma=len(re.findall(r"wgmma\.mma_async", ptx)),
        mma=len(re.findall(r"\bmma\.sync", ptx)),
        ptx=ptx,
    )


def compile_case(
    case: tuple[str, Any, dict[str, str], dict[str, Any], int, int | None], divisible: frozenset[str] = frozenset()
) -> Compiled | None:
    """Lower one case ``(name, kernel, argument types, constexprs, warps, stages)``; None, with a line saying why,
    if it fails to compile."""
    name, fn, sig, constexprs, warps, stages = case
    try:
        return compile_for_sm90(fn, sig, constexprs, num_warps=warps, num_stages=stages, divisible=divisible)
    except Exception as err:
        print(f"{name}: FAILED to compile: {type(err).__name__}: {str(err)[:400]}")
        return None


def lower_cases(
    cases: Sequence[tuple[str, Any, dict[str, str], dict[str, Any], int, int | None]],
    *,
    only: str = "",
    divisible: frozenset[str] = frozenset(),
    max_stack: int = 0,
    ptx_dir: pathlib.Path | None = None,
) -> bool:
    """Lower each case ``(name, kernel, argument types, constexprs, warps, stages)`` whose name contains ``only``
    and print a line of its resources; with ``ptx_dir``, write its PTX there. True when every case compiled
    and none spilled more than ``max_stack`` bytes (or its stack could not be read)."""
    ok = True
    for case in cases:
        name, warps = case[0], case[4]
        if only not in name:
            continue
        r = compile_case(case, divisible)
        if r is None:
            ok = False
            continue
        if ptx_dir is not None:
            ptx_dir.mkdir(parents=True, exist_ok=True)
            (ptx_dir / (re.sub(r"\W+", "_", name) + ".ptx")).write_text(r.ptx)
        spills = r.stack is None or r.spills(max_stack)
        ok &= not spills
        print(f"{name} (w{warps}): regs {r.registers}, stack {r.stack} B{' (SPILLS)' if spills else ''}, "
              f"smem {r.shared} B, loads {r.loads} ({r.loads_16b} x16B), stores {r.stores} ({r.stores_16b} x16B), "
              f"wgmma {r.wgmma}, mma {r.mma}", flush=True)  # fmt: skip
    return ok
