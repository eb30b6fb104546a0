"""Lower the cache kernels to sm_90 (H100 / H200) code on any machine, without a GPU.

    python -m fast.cache.compile_check [--ptx DIR]        (TRITON_INTERPRET must be unset)

The interpreter runs what a kernel computes but compiles nothing: constructs the compiler refuses, register
spills, scalar instead of vector memory access and a missing tensor-core path only show when lowering. For each
kernel configuration this prints registers, spilled stack bytes, shared memory, global loads and stores with
their widest vector form, and whether the dots became ``wgmma`` instructions. Exit status 1 if a kernel fails to
compile or spills more than ``MAX_STACK_BYTES``.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
from typing import Any

from fast.sm90 import compile_case, lower_cases

MAX_STACK_BYTES = 64
# integer arguments that are multiples of 16 in the benchmarked launches (Triton specializes on that)
DIVISIBLE = frozenset(
    {"H", "K", "N", "rows_per_block", "block_bytes", "scale_base", "n_slots", "data_stride", "scale_stride"}
)


Case = tuple[str, Any, dict[str, str], dict[str, Any], int, int]


def _quantize_cases() -> list[Case]:
    from fast.cache import quantize
    from fast.cache.formats import FORMATS

    store = dict(rows_ptr="*fp32", slots_ptr="*i64", cache_w_ptr="*i32", cache_b_ptr="*u8", R="i32",
                 n_slots="i64", rows_per_block="i32", block_bytes="i32", data_stride="i32", scale_base="i32",
                 scale_stride="i32")  # fmt: skip
    gather = dict(cache_w_ptr="*i32", cache_b_ptr="*u8", cache_h_ptr="*i16", slots_ptr="*i64", out_ptr="*fp32",
                  fill="fp32", R="i32", n_slots="i64", rows_per_block="i32", block_bytes="i32", data_stride="i32",
                  scale_base="i32", scale_stride="i32")  # fmt: skip
    out = []
    for name, fmt in FORMATS.items():
        constants = quantize._constants(fmt) | {"ROWS": 1}
        store_constants = constants | {"SCALE_BYTES": fmt.scale_bytes}
        out.append((f"store {name}", quantize._store_kernel, store, store_constants, 4, 1))
        out.append((f"gather {name}", quantize._gather_kernel, gather, constants, 4, 1))
    return out


ATTENTION_ARGS = dict(q_ptr="*bf16", kv_ptr="*bf16", kv_f8_ptr="*fp8e4nv", kv_b_ptr="*u8", kv_h_ptr="*i16",
                      kv_q_ptr="*i64", idx_ptr="*i32", sink_ptr="*fp32", out_ptr="*fp32", lse_ptr="*fp32", H="i32",
                      N="i64", K="i32", scale_hi="fp32", scale_lo="fp32", block_bytes="i32",
                      scale_base="i32")  # fmt: skip


ROWS_PER_BLOCK = 64
"""Rows per cache block of the FP8 cases (the benchmark's)."""


def _attention_base() -> dict[str, Any]:
    """Constexprs of a D = dv = 512 launch with BF16 KV and a sink, before mode and tiles."""
    import triton.language as tl

    from fast.cache import attention

    return dict(D=512, DV=512, BLOCK_D=512, BLOCK_DV=512, NATIVE_FP8=True, SEPARATE_V=False, HAS_SINK=True,
                EMPTY_NAN=False, ACC=tl.float32, IS_F32=False, INTERPRETED=False,
                COUNT_LANES=attention.COUNT_LANES, **_kv(None))  # fmt: skip


def _kv(conv: str | None, prefetch: int = 0) -> dict[str, Any]:
    """The layout constexprs of KV in cache format ``conv`` (None: BF16 rows) at D = 512, prefetching
    ``prefetch`` tiles ahead."""
    from fast.cache import attention
    from fast.cache.formats import FORMATS

    layout = attention.kv_constants(FORMATS[conv] if conv else None, ROWS_PER_BLOCK)
    return layout | attention.prefetch_constants(layout, 512, 2, prefetch)


def _attention_cases() -> list[Case]:
    import triton.language as tl

    from fast.cache import attention

    base = _attention_base()
    out = []
    for cfg in (
        attention.Config(64, 32, 8, 2),
        attention.Config(64, 64, 8, 2),
        attention.Config(64, 32, 8, 3),
        attention.Config(64, 64, 8, 1),
    ):
        tiles = dict(BLOCK_H=cfg.block_h, BLOCK_N=cfg.block_n)
        label = f"h{cfg.block_h} n{cfg.block_n} w{cfg.num_warps} s{cfg.num_stages}"
        for kind, extra in (
            ("bf16 kv, bf16 p", dict(MODE=2, LIBDEVICE=False)),
            ("bf16 kv, f32 p", dict(MODE=1, LIBDEVICE=True)),
            ("fp8 kv, bf16 p", dict(MODE=2, LIBDEVICE=False, **_kv("v4_584"))),
            ("fp8 kv, f32 p", dict(MODE=1, LIBDEVICE=True, **_kv("v4_584"))),
            (
                "fp8 kv decoded by integer operations, bf16 p",
                dict(MODE=2, LIBDEVICE=False, NATIVE_FP8=False, **_kv("v4_584")),
            ),
            ("fp8 v41_fp8_528 kv, bf16 p", dict(MODE=2, LIBDEVICE=False, **_kv("v41_fp8_528"))),
            ("fp8 v41_fp8_528 kv, f32 p", dict(MODE=1, LIBDEVICE=True, **_kv("v41_fp8_528"))),
        ):
            out.append((f"attention {kind} {label}", attention._sparse_attention_kernel, ATTENTION_ARGS,
                        base | tiles | extra, cfg.num_warps, cfg.num_stages))  # fmt: skip
    for conv in (None, "v4_584", "v41_fp8_528"):  # the default tiles, prefetching into L2
        cfg = attention.default_config(64, 512, conv)
        label = f"{conv or 'bf16'} kv, bf16 p h{cfg.block_h} n{cfg.block_n} w{cfg.num_warps} s{cfg.num_stages}"
        constants = base | _kv(conv, prefetch=cfg.prefetch) | dict(MODE=2, LIBDEVICE=False, BLOCK_H=cfg.block_h,
                                                                 BLOCK_N=cfg.block_n)  # fmt: skip
        out.append((f"attention prefetch {cfg.prefetch}, {label}", attention._sparse_attention_kernel, ATTENTION_ARGS,
                    constants, cfg.num_warps, cfg.num_stages))  # fmt: skip
    from fast.cache import attention_ws as ws

    for conv in ("v41_fp8_528", "v4_584", None):
        out += [_ws_case(conv, tile) for tile in (ws.DEFAULT_TILES[conv], *ws.sweep_tiles(conv))]
    out += [_pair_case(conv, persistent) for conv in (None, "v41_fp8_528", "v4_584") for persistent in (False, True)]
    small = base | dict(BLOCK_H=16, BLOCK_N=16, D=32, DV=24, BLOCK_D=32, BLOCK_DV=32)
    for name, extra in (
        ("f64 (the contract's form)", dict(MODE=0, ACC=tl.float64, LIBDEVICE=True)),
        ("f64, f32 inputs", dict(MODE=0, ACC=tl.float64, LIBDEVICE=True, IS_F32=True)),
        ("f32 inputs", dict(MODE=1, LIBDEVICE=True, IS_F32=True)),
        ("bf16 p", dict(MODE=2, LIBDEVICE=False)),
        ("f32 p", dict(MODE=1, LIBDEVICE=True)),
        ("f64, dv < D / 2", dict(MODE=0, ACC=tl.float64, LIBDEVICE=True, DV=8, BLOCK_DV=16, SEPARATE_V=True)),
        (
            "f64, fp8 kv",
            dict(MODE=0, ACC=tl.float64, LIBDEVICE=True, D=512, DV=512, BLOCK_D=512, BLOCK_DV=512, **_kv("v4_584")),
        ),
        (
            "f64, fp8 v41_fp8_528 kv",
            dict(
                MODE=0, ACC=tl.float64, LIBDEVICE=True, D=512, DV=512, BLOCK_D=512, BLOCK_DV=512, **_kv("v41_fp8_528")
            ),
        ),
    ):
        sig = ATTENTION_ARGS | dict(q_ptr="*fp32", kv_ptr="*fp32") if extra.get("IS_F32") else ATTENTION_ARGS
        constants = small | extra
        cfg = attention._launch_config(attention.Config(16, 16, 4, 1), constants["MODE"], constants["D"],
                                       constants["DV"])  # fmt: skip
        constants |= dict(BLOCK_H=cfg.block_h, BLOCK_N=cfg.block_n)
        out.append((f"attention test shape {name} h{cfg.block_h} n{cfg.block_n}", attention._sparse_attention_kernel,
                    sig, constants, cfg.num_warps, cfg.num_stages))  # fmt: skip
    return out


def _gluon_args(conv: str | None) -> dict[str, str]:
    """Both Gluon attention kernels' runtime arguments, on KV in ``conv`` (None: BF16 rows)."""
    return dict(q_ptr="*bf16", kv_ptr="*u8" if conv else "*bf16", idx_ptr="*i32", sink_ptr="*fp32", out_ptr="*fp32",
                lse_ptr="*fp32", M="i32", H="i32", N="i64", K="i32", scale="fp32", block_bytes="i32",
                scale_base="i32")  # fmt: skip


def _ws_case(conv: str | None, tile: Any) -> Case:
    """The warp-specialized kernel in ``tile`` on KV in ``conv``, with a sink."""
    from fast.cache import attention_ws as ws
    from fast.cache.formats import FORMATS

    constants = ws.kv_constants(FORMATS[conv] if conv else None, ROWS_PER_BLOCK) | ws.tile_constants(tile, True, False)
    return (f"attention warp specialized (Gluon), {conv or 'bf16'} kv, bf16 p, {ws.label(tile, conv is not None)}",
            ws._sparse_attention_ws_kernel, _gluon_args(conv), constants, ws.CONSUMER_WARPS, 1)  # fmt: skip


def _pair_case(conv: str | None, persistent: bool) -> Case:
    """The paired-warp-group kernel on KV in ``conv``, one program an item or ``persistent``, with a sink."""
    from fast.cache import attention_pair as pair
    from fast.cache import attention_ws as ws
    from fast.cache.formats import FORMATS

    kv = ws.kv_constants(FORMATS[conv] if conv else None, ROWS_PER_BLOCK)
    return (f"attention paired warp groups (Gluon), {conv or 'bf16'} kv, bf16 p{', persistent' if persistent else ''}",
            pair._sparse_attention_pair_kernel, _gluon_args(conv), pair.constants(True, False, 0, persistent, kv),
            pair.WARPS, 1)  # fmt: skip


def sm90_default_cases() -> list[Case]:
    """The kernels the default path runs on sm_90 (``fast.cache.dispatch``) at the benchmark's shapes: the
    persistent paired kernel on BF16 rows, the warp-specialized kernel in its default tile on each FP8 cache."""
    from fast.cache import attention_pair as pair
    from fast.cache import attention_ws as ws

    return [_pair_case(None, pair.Pair.persistent)] + [
        _ws_case(conv, tile) for conv, tile in ws.DEFAULT_TILES.items() if conv is not None
    ]


SM90_SHARED_BYTES = 232448
"""The most shared memory one program may take on sm_90 (227 KiB)."""


def default_cases() -> list[Case]:
    """The attention's default configurations at the benchmark's shapes (64 heads, D = 512):
    ``attention.default_config`` for BF16 KV and each FP8 cache format at both probability precisions, then the
    kernels the default path runs on sm_90 (``sm90_default_cases``)."""
    from fast.cache import attention
    from fast.cache.checks import ATTENTION_KV_FORMATS

    cases: list[Case] = []
    for conv in (None, *ATTENTION_KV_FORMATS):
        for precision in ("bf16", "f32"):
            cfg = attention.default_config(64, 512, conv, precision)
            mode = attention.MODES[precision]
            constexprs = _attention_base() | _kv(conv) | dict(MODE=mode, LIBDEVICE=mode == 1, BLOCK_H=cfg.block_h,
                                                              BLOCK_N=cfg.block_n)  # fmt: skip
            kind = "bf16" if conv is None else "fp8" if conv == "v4_584" else f"fp8 {conv}"
            cases.append((f"default config, {kind} kv, {precision} p: {cfg}", attention._sparse_attention_kernel,
                          ATTENTION_ARGS, constexprs, cfg.num_warps, cfg.num_stages))  # fmt: skip
    return cases + sm90_default_cases()


def check_default_configs() -> bool:
    """Compile ``default_cases`` and print each one's registers, stack and shared memory; False if one fails to
    compile or needs more shared memory than sm_90 has (the compiler accepts such a kernel; only its launch on the
    GPU fails). Spills are reported, not failed on."""
    ok = True
    for case in default_cases():
        name, r = case[0], compile_case(case, DIVISIBLE)
        if r is None:
            ok = False
            continue
        fits = r.shared <= SM90_SHARED_BYTES
        ok &= fits
        print(f"{name}: regs {r.registers}, stack {r.stack} B, smem {r.shared} B"
              f"{'' if fits else f' EXCEEDS the sm_90 limit {SM90_SHARED_BYTES} B'}")  # fmt: skip
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fast.cache.compile_check", description=__doc__.split("\n")[0])
    parser.add_argument("--ptx", type=pathlib.Path, help="write each kernel's PTX into this folder")
    parser.add_argument("--only", default="", help="compile only cases whose name contains this")
    parser.add_argument("--defaults", action="store_true", help="only the attention's default "
                        "configurations: registers, stack and whether they fit sm_90's shared memory")  # fmt: skip
    args = parser.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET") == "1":
        print("compile_check: unset TRITON_INTERPRET (the interpreter does not compile)", file=sys.stderr)
        return 2
    if args.defaults:
        return 0 if check_default_configs() else 1
    ok = lower_cases(_quantize_cases() + _attention_cases(), only=args.only, divisible=DIVISIBLE,
                     max_stack=MAX_STACK_BYTES, ptx_dir=args.ptx)  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
