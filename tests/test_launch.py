"""fast.launch.Lean: its key determines Triton's own specialization (so a cached kernel is never the wrong one),
its argument order is Triton's, and it launches through Triton unchanged where it does not apply."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import pytest
import torch
import triton
import triton.language as tl
from hypothesis import given, settings
from hypothesis import strategies as st
from triton.runtime.jit import JITFunction

from fast import launch
from fast.indexing import naive
from fast.indexing import topk as tk
from fast.indexing.validate import interpreted

INTERPRETED = interpreted()


def _probe(x_ptr, y_ptr, n, m, flag, alpha, maybe, BLOCK: tl.constexpr, MODE: tl.constexpr = 3):
    """Never launched: a signature with every kind of argument the key must cover."""
    i = tl.arange(0, BLOCK)
    tl.store(y_ptr + i, tl.load(x_ptr + i) * alpha + n + m + flag + MODE)


_probe_kernel = JITFunction(_probe)  # compiled form even under the interpreter: only its signature is used


def triton_binder(kernel: Any) -> Any:
    """Triton's own binder for ``kernel`` on an sm_90 target (the function ``JITFunction.run`` calls to bind and
    specialize a call), built without a GPU."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.jit import create_function_from_signature

    return create_function_from_signature(kernel.signature, kernel.params, make_backend(GPUTarget("cuda", 90, 32)))


INTS = [0, 1, 2, 15, 16, 17, 32, -1, -16, 2**31 - 16, 2**31 - 1, 2**31, 2**31 + 16, -(2**31), -(2**31) - 16,
        2**63 - 16, 2**63 - 1, -(2**63), 2**63, 2**63 + 16, 2**64 - 16]  # fmt: skip
STORAGE = {dtype: torch.zeros(64, dtype=dtype) for dtype in (torch.float32, torch.int32, torch.bfloat16, torch.uint8)}


@st.composite
def tensors(draw: st.DrawFn) -> torch.Tensor:
    """A tensor whose address is or is not a multiple of 16 (a view at an element offset into one storage)."""
    dtype = draw(st.sampled_from(sorted(STORAGE, key=str)))
    return STORAGE[dtype][draw(st.sampled_from([0, 1, 2, 4, 8, 16])) :]


def argument(position: int) -> st.SearchStrategy[Any]:
    """Values of ``_probe_kernel``'s positional argument ``position`` (``BLOCK``, a constexpr, at 7)."""
    kinds: list[st.SearchStrategy[Any]] = [tensors(), tensors(), st.sampled_from(INTS), st.sampled_from(INTS),
                                           st.booleans(), st.sampled_from([0.5, 1.0, 2.0]),
                                           st.sampled_from([None, 1, 16]), st.sampled_from([16, 32])]  # fmt: skip
    return kinds[position]


@st.composite
def calls(draw: st.DrawFn) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Calls of ``_probe_kernel`` that each change one or two arguments of one base call (so that keys meet
    often): positional arguments (``BLOCK`` among them or not), then the constexprs and an option by name."""
    block_by_position = draw(st.booleans())
    width = 8 if block_by_position else 7
    base = [draw(argument(i)) for i in range(width)]
    base_kwargs: dict[str, Any] = {"MODE": 3, "num_warps": 4} | ({} if block_by_position else {"BLOCK": 16})
    out = []
    for _ in range(draw(st.integers(2, 24))):
        args, kwargs = list(base), dict(base_kwargs)
        for _ in range(draw(st.integers(1, 2))):
            i = draw(st.integers(0, width + 1))
            if i < width:
                args[i] = draw(argument(i))
            elif i == width:
                kwargs["MODE"] = draw(st.sampled_from([3, 4]))
            else:
                kwargs["num_warps"] = draw(st.sampled_from([4, 8]))
        out.append((tuple(args), kwargs))
    return out


@settings(max_examples=150, deadline=None)
@given(calls())
def test_the_key_determines_tritons_specialization(batch: list[tuple[tuple[Any, ...], dict[str, Any]]]) -> None:
    """Calls with equal keys get equal specializations and options from Triton's binder, so the kernel Lean
    cached for one is the kernel Triton would pick for the other (module docstring of fast.launch)."""
    lean = launch.Lean(_probe_kernel)
    binder = triton_binder(_probe_kernel)
    seen: dict[object, object] = {}
    for args, kwargs in batch:
        _, specialization, options = binder(*args, **kwargs)
        triton_key = (tuple(specialization), tuple(sorted(options.items())))
        key = lean.key(0, args, kwargs)
        assert seen.setdefault(key, triton_key) == triton_key, (args, kwargs)


def test_the_key_tells_apart_what_triton_specializes_on() -> None:
    """Pairs of calls that differ in one thing Triton specializes on (fast.launch's items 1-4): Triton's
    specialization differs, and so does the key (the property above could not fail if the key held nothing)."""
    lean = launch.Lean(_probe_kernel)
    binder = triton_binder(_probe_kernel)
    x, y = STORAGE[torch.float32], STORAGE[torch.int32]
    base: tuple[Any, ...] = (x, y, 7, 7, False, 1.0, None)
    pairs = [(0, x, x[1:]), (0, x, STORAGE[torch.bfloat16]), (2, 7, 1), (2, 7, 16), (2, 7, 2**31 + 1),
             (2, 2**31 + 1, 2**63 + 1), (6, None, 16)]  # fmt: skip
    for index, a, b in pairs:
        args_a, args_b = ((*base[:index], v, *base[index + 1 :]) for v in (a, b))
        assert binder(*args_a, BLOCK=16)[1] != binder(*args_b, BLOCK=16)[1], (index, a, b)
        assert lean.key(0, args_a, {"BLOCK": 16}) != lean.key(0, args_b, {"BLOCK": 16}), (index, a, b)
    assert binder(*base, 16)[1] != binder(*base, 32)[1]
    assert lean.key(0, (*base, 16), {}) != lean.key(0, (*base, 32), {})  # a constexpr given by position
    for kwargs in ({"BLOCK": 32}, {"BLOCK": 16, "MODE": 4}, {"BLOCK": 16, "num_warps": 8}):
        assert lean.key(0, base, kwargs) != lean.key(0, base, {"BLOCK": 16}), kwargs
    assert lean.key(1, base, {"BLOCK": 16}) != lean.key(0, base, {"BLOCK": 16})


@pytest.mark.parametrize("named", [0, 2, 4])
def test_values_are_tritons_bound_arguments_in_order(named: int) -> None:
    """What Lean passes to the compiled kernel's launcher: every parameter's value in signature order, defaults
    applied, as Triton's binder binds them (the values JITFunction.run passes), whichever arguments are named."""
    lean = launch.Lean(_probe_kernel)
    binder = triton_binder(_probe_kernel)
    given_args: tuple[Any, ...] = (STORAGE[torch.float32], STORAGE[torch.int32], 64, 3, True, 0.5, None)
    names = ["x_ptr", "y_ptr", "n", "m", "flag", "alpha", "maybe"]
    args = given_args[: len(given_args) - named]
    kwargs = dict(zip(names[len(args) :], given_args[len(args) :], strict=True)) | {"BLOCK": 16, "num_warps": 4}
    bound = list(binder(*args, **kwargs)[0].values())
    values = lean.values(args, kwargs)
    assert len(values) == len(bound) and all(a is b for a, b in zip(values, bound, strict=True))


def test_the_top_k_with_lean_launches_is_the_top_k() -> None:
    """On every path of the top-k. Interpreted, or on a Triton outside fast.launch.VERSIONS, every call goes
    through the kernel itself; compiled on a GPU with Triton 3.6 the repeated calls go through Lean's cache."""
    assert launch.available() == (not INTERPRETED and triton.__version__.startswith(launch.VERSIONS))
    device = "cpu" if INTERPRETED else "cuda"
    if not INTERPRETED and not torch.cuda.is_available():
        pytest.skip("compiled kernels need a CUDA device")
    scores = torch.randn(6, 40, generator=torch.Generator().manual_seed(3)).to(device)
    lengths = torch.tensor([40, 33, 0, 7, 40, 26], dtype=torch.int32, device=device)
    base = tk.default_config()
    for cfg in (base, dataclasses.replace(base, split_fused=True), dataclasses.replace(base, pairwise=0)):
        lean = dataclasses.replace(cfg, lean_launch=True)
        for k, convention, _ in itertools.product((5, 12), ("v4.1", "v4-prefill"), range(2)):  # a miss, then a hit
            want = naive.topk(scores, lengths, k=k, convention=convention)
            assert torch.equal(tk.topk(scores, lengths, k=k, convention=convention, config=lean), want)


def test_launcher_keeps_one_lean_a_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    assert launch.launcher(_probe_kernel, False) is _probe_kernel
    monkeypatch.setattr(launch, "available", lambda: False)
    assert launch.launcher(_probe_kernel, True) is _probe_kernel
    monkeypatch.setattr(launch, "available", lambda: True)
    first = launch.launcher(_probe_kernel, True)
    assert isinstance(first, launch.Lean) and launch.launcher(_probe_kernel, True) is first
