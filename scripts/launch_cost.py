"""The host cost of launching the top-k's kernels, without a GPU: the Python of Triton's ``JITFunction.run`` up to
the driver call (binding, specialization, cache key, lookup), for the split-row path's calls on 6 x 256K rows,
k 2048, in both of its forms; and the rest of a ``topk()`` call's Python, its launches left out.

    python scripts/launch_cost.py        (TRITON_INTERPRET unset; no GPU needed)

Triton's driver is replaced by a stand-in that names device 0, stream 0 and an sm_90 target, and its compile
step by one that caches a stand-in kernel whose launcher does nothing: what is timed is the Python each
launch runs before the driver call, which a GPU adds to, not replaces. The calls' arguments are those
``fast.indexing.topk.topk`` passes (CPU tensors stand in for CUDA ones: Triton specializes on their dtype and
alignment alone).
"""

from __future__ import annotations

import os
import platform
import sys
import time
from typing import Any

import torch
import triton
import triton.runtime.jit as jit
from triton.backends.compiler import GPUTarget
from triton.runtime import driver


class _Driver:
    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int) -> int:
        return 0

    def get_current_target(self) -> GPUTarget:
        return GPUTarget("cuda", 90, 32)


class _Kernel:
    function = packed_metadata = None

    def launch_metadata(self, *args: Any) -> None:
        return None

    def run(self, *args: Any) -> None:
        return None


def _compile(self: Any, key: Any, signature: Any, device: int, constexprs: Any, options: Any, attrs: Any,
             warmup: bool) -> _Kernel:  # fmt: skip
    kernel = self.device_caches[device][0][key] = _Kernel()
    return kernel


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.machine()


def per_call_us(f: Any, n: int = 20000) -> float:
    for _ in range(200):
        f()
    start = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - start) / n * 1e6


def main() -> int:
    if os.environ.get("TRITON_INTERPRET") == "1":
        print("launch_cost: unset TRITON_INTERPRET (the interpreter launches no compiled kernel)", file=sys.stderr)
        return 2
    driver.set_active(_Driver())
    jit.JITFunction._do_compile = _compile
    import fast.indexing.topk as tk
    from fast.indexing import validate
    from fast.indexing.topk import row, split

    validate.backend_for = lambda backend, device: backend  # CPU tensors stand in for CUDA ones

    calls: dict[str, tuple[Any, tuple[int, ...], tuple[Any, ...], dict[str, Any]]] = {}

    class Capture:
        def __init__(self, name: str, kernel: Any) -> None:
            self.name, self.kernel = name, kernel

        def __getitem__(self, grid: tuple[int, ...]) -> Any:
            def call(*args: Any, **kwargs: Any) -> None:
                calls.setdefault(self.name, (self.kernel, grid, args, kwargs))

            return call

    kernels = {"split threshold": (split, "_split_threshold_kernel"),
               "split count/compact": (split, "_split_pass_kernel"),
               "split fused (one launch)": (split, "_split_fused_kernel"),
               "select and collect": (row, "_topk_kernel")}  # fmt: skip
    held = {name: getattr(module, attr) for name, (module, attr) in kernels.items()}
    for name, (module, attr) in kernels.items():
        setattr(module, attr, Capture(name, held[name]))
    scores = torch.randn(6, 262144)
    lengths = torch.full((6,), 262144, dtype=torch.int32)
    host = {}
    for launches in (3, 1, 2):  # the kernels record their first call and launch nothing
        config = tk.TopKConfig(split_launches=launches)
        host[launches] = per_call_us(lambda c=config: tk.topk(scores, lengths, k=2048, validate=False, config=c))
    for name, (module, attr) in kernels.items():
        setattr(module, attr, held[name])

    print(f"{cpu_name()}, Python {platform.python_version()}, Triton {triton.__version__}")
    print("| kernel | arguments | JITFunction.run before the driver call |")
    print("|---|---:|---:|")
    for name, (kernel, grid, args, kwargs) in calls.items():
        run_us = per_call_us(lambda k=kernel, g=grid, a=args, kw=kwargs: k[g](*a, **kw))
        print(f"| {name} | {len(args)} + {len(kwargs)} named | {run_us:.1f} us |")
    print("topk() without its launches (validate=False), split-row path in 3, 2 and 1 launches: "
          + ", ".join(f"{host[n]:.1f} us" for n in (3, 2, 1)))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
