"""Where the warp-specialized attention's time goes: each timing probe of ``fast.cache.attention_ws.PROBES`` on a
decode or prefill benchmark case, against the kernel whole (compiled sm_90 only).

    python -m fast.cache.ws_probes cache/decode_bf16_b64_h64 cache/prefill_bf16_sq4096_kv8K_h64_k2048 [--probes 7,8]
    python -m fast.cache.ws_probes --kernel pair cache/decode_bf16_b128_h64      (the paired-warp-group kernel's)

A probe leaves one part of the work out (its results are wrong and are not looked at): the time it saves bounds
that part's cost on the kernel's critical path, as far as the rest does not hide it. Probe 7 (no loads) gives the
consumer's time alone, probe 8 (no compute) the producer's; the whole kernel takes about the longer of the two
when they overlap. Medians of ``fast.bench.time_ms`` (L2 flushed before each run). A tool for reading the kernel,
written here because it needs the kernel's own constexprs; docs/targets.md has its H100 figures.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable

import torch

from fast import bench
from fast.cache import attention_pair, attention_ws, bench_cases, bench_prefill
from fast.cache.checks import AttentionArgs


def case_call(name: str) -> AttentionArgs:
    """The default call of decode or prefill benchmark case ``name`` (ValueError naming it otherwise)."""
    for p in bench_prefill.CASES:
        if p.name == name:
            x = bench_prefill.prefill_inputs(p)
            return _call(x)
    for kv_format, kind in bench_cases.KV_KINDS.items():
        prefix = f"cache/decode_{kind}_b"
        if name.startswith(prefix) and "_h" in name:
            b, h = name[len(prefix) :].split("_h")
            if b.isdigit() and h.isdigit():
                return _call(bench_cases.decode_inputs(int(b), int(h), kv_format))
    raise ValueError(f"case: {name!r} is not a decode or prefill case of fast.bench")


def _call(x: dict) -> AttentionArgs:
    M, h = x["q"].shape[:2]
    out = torch.empty(M, h, bench_cases.DIM, device=x["q"].device)
    lse = torch.empty(M, h, device=x["q"].device)
    return AttentionArgs(x["q"], x["kv"], x["indices"], x["sink"], bench_cases.DIM**-0.5, bench_cases.DIM, False,
                         out, lse, x["kv_cache"], "bf16")  # fmt: skip


KERNELS: dict[str, tuple[dict[int, str], Callable[..., tuple[torch.Tensor, torch.Tensor]]]] = {
    "ws": (attention_ws.PROBES, attention_ws.sparse_attention_ws),
    "pair": (attention_pair.PROBES, attention_pair.sparse_attention_pair),
}
"""The kernels with timing probes: their probe tables and launches (``launch(call, probe=k)``)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fast.cache.ws_probes", description=__doc__.split("\n")[0])
    parser.add_argument("cases", nargs="+")
    parser.add_argument("--kernel", choices=sorted(KERNELS), default="ws")
    parser.add_argument("--probes", help="comma-separated probe numbers (default: all of the kernel's)")
    args = parser.parse_args(argv)
    table, launch = KERNELS[args.kernel]
    probes = [int(k) for k in args.probes.split(",")] if args.probes else list(table)
    for k in probes:
        if k not in table:
            print(f"ws_probes: --probes: {k} is not one of {sorted(table)}", file=sys.stderr)
            return 2
    if not torch.cuda.is_available():
        print("ws_probes: no CUDA device", file=sys.stderr)
        return 2
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}\n")
    print("| case | probe | ms | saved |\n|---|---|---:|---:|")
    for name in args.cases:
        call = case_call(name)
        whole = bench.time_ms(functools.partial(launch, call))["ms"]
        print(f"| {name} | whole kernel | {whole:.4f} | |")
        for k in probes:
            ms = bench.time_ms(functools.partial(launch, call, probe=k))["ms"]
            print(f"| {name} | {k}: {table[k]} | {ms:.4f} | {1 - ms / whole:.1%} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
