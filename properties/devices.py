"""Where the project's kernels run under the property suite: one policy for every area.

The suite builds its tensors on the CPU. A Triton kernel runs there under ``TRITON_INTERPRET=1``; on a CUDA
machine it is compiled, so its adapter copies the inputs to the GPU, runs there and copies the results (and any
argument it changed in place) back. torch implementations run where their inputs are.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import wraps
from typing import Any

import torch


def kernel_device(backend: str) -> torch.device | None:
    """The device a ``backend`` implementation must run on, or None for the inputs' own device."""
    if backend == "triton" and os.environ.get("TRITON_INTERPRET") != "1" and torch.cuda.is_available():
        return torch.device("cuda")
    return None


def device_name(backend: str) -> str:
    """``kernel_device`` as the name an ``Implementation`` declares (``"cuda"`` or ``"cpu"``)."""
    device = kernel_device(backend)
    return "cpu" if device is None else device.type


def on_device(
    fn: Callable[..., Any],
    backend: str,
    in_place: tuple[int, ...] = (),
    check: Callable[..., Any] | None = None,
) -> Callable[..., Any]:
    """``fn`` run on ``kernel_device(backend)``: tensor arguments are copied there, tensor results (alone or in a
    tuple) copied back to the first argument's device, and the positional arguments at ``in_place`` copied back
    into the caller's tensors. ``check``, when given, first validates the call as the caller made it (a copy
    to one device would hide mixed devices or strides)."""

    @wraps(fn)
    def moved(*args: Any, **kwargs: Any) -> Any:
        device = kernel_device(backend)
        home = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
        if device is None or home == device:
            return fn(*args, **kwargs)
        if check is not None:
            check(*args, **kwargs)

        def move(t: Any) -> Any:
            return t.to(device) if isinstance(t, torch.Tensor) else t

        moved_args = [move(a) for a in args]
        out = fn(*moved_args, **{k: move(v) for k, v in kwargs.items()})
        for i in in_place:
            args[i].copy_(moved_args[i].to(home))
        if isinstance(out, tuple):
            return tuple(o.to(home) if isinstance(o, torch.Tensor) else o for o in out)
        return out.to(home) if isinstance(out, torch.Tensor) else out

    return moved
