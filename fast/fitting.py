"""Launch a Triton kernel with the first of its configurations that the device's shared memory holds.

    first_fitting(configs, launch, key) -> the configuration launched

A kernel's shared memory depends on its tile sizes, its pipeline stages, the shape's padded widths and the Triton
version (the same tile needs 229,632 bytes under one version and 246,016 under another on sm_90), and the compiler
accepts a kernel that needs more than the device has: only its launch fails, with ``OutOfResources``, before
anything runs. So each entry point lists its configuration and smaller ones (fewer stages first, then narrower
tiles), and the first that launches is remembered for that key (kernel, device and compile-time shape). Nothing is
written before the launch that fails, so the next configuration starts from the same inputs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, TypeVar

from triton.runtime.errors import OutOfResources

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T")
C = TypeVar("C", bound="DataclassInstance")

_FITTED: dict[Hashable, int] = {}


def first_fitting(configs: Sequence[T], launch: Callable[[T], None], key: Hashable) -> T:
    """Call ``launch`` with ``configs[i]`` for the first ``i`` (from the one remembered for ``key``) whose launch
    does not run out of shared memory; raise the last ``OutOfResources`` when none fits."""
    if not configs:
        raise ValueError("configs: must name at least one configuration")
    error: OutOfResources | None = None
    for i in range(_FITTED.get(key, 0), len(configs)):
        try:
            launch(configs[i])
        except OutOfResources as e:
            error = e
            continue
        _FITTED[key] = i
        return configs[i]
    assert error is not None
    raise error


def smaller(config: C, narrower: Callable[[C], C | None], limit: int = 6) -> list[C]:
    """``config``, then the same tile in one pipeline stage, then ``narrower`` applied repeatedly (each halving a
    tile dimension, None when nothing is left to halve), at most ``limit`` in all."""
    out = [config]
    fewer = dataclasses.replace(config, num_stages=1)
    if fewer != config:
        out.append(fewer)
    while len(out) < limit:
        nxt = narrower(out[-1])
        if nxt is None or nxt == out[-1]:
            break
        out.append(nxt)
    return out
