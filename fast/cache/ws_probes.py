"""Where the warp-specialized attention's time goes: each timing probe of ``fast.cache.attention_ws.PROBES`` on a
decode or prefill benchmark case, against the kernel whole (compiled sm_90 only).

    python -m fast.cache.ws_probes cache/decode_bf16_b64_h64 cache/prefill_bf16_sq4096_kv8K_h64_k2048 [--probes 7,8]

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

import torch

from fast import bench
from fast.cache import attention_ws, bench_cases, bench_prefill
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fast.cache.ws_probes", description=__doc__.split("\n")[0])
    parser.add_argument("cases", nargs="+")
    parser.add_argument("--probes", default=",".join(str(k) for k in attention_ws.PROBES))
    args = parser.parse_args(argv)
    probes = [int(k) for k in args.probes.split(",")]
    for k in probes:
        if k not in attention_ws.PROBES:
            print(f"ws_probes: --probes: {k} is not one of {sorted(attention_ws.PROBES)}", file=sys.stderr)
            return 2
    if not torch.cuda.is_available():
        print("ws_probes: no CUDA device", file=sys.stderr)
        return 2
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}\n")
    print("| case | probe | ms | saved |\n|---|---|---:|---:|")
    for name in args.cases:
        call = case_call(name)
        whole = bench.time_ms(functools.partial(attention_ws.sparse_attention_ws, call))["ms"]
        print(f"| {name} | whole kernel | {whole:.4f} | |")
        for k in probes:
            ms = bench.time_ms(functools.partial(attention_ws.sparse_attention_ws, call, probe=k))["ms"]
            print(f"| {name} | {k}: {attention_ws.PROBES[k]} | {ms:.4f} | {1 - ms / whole:.1%} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
