"""Triton launches that bind their arguments once per specialization, not on every call.

    lean = Lean(kernel)                 # a @triton.jit function
    lean[grid](*args, **constexprs)     # as kernel[grid](*args, **constexprs)

Each ``kernel[grid](...)`` call runs Triton's ``JITFunction.run`` in Python before the driver launches: it binds
the arguments to the signature, specializes each one, builds the cache key and looks the compiled kernel up.
Under Triton 3.6 that is about 9 us a launch for a 12-argument kernel and 14 us for a 21-argument one on a
desktop CPU, the largest part of a top-k call's host time (docs/targets.md section 4). ``Lean`` computes a key
of its own from what Triton specializes on, looks up the compiled kernel that ``JITFunction.run`` chose the
first time it saw that key, and calls that kernel's driver launcher directly.

What the key holds, and why it is enough (``tests/test_launch.py`` checks it against Triton's own binder):

1. Triton specializes a tensor on its dtype and on whether its address is a multiple of 16; the key holds both.
2. An int on whether it is 1, whether it is a multiple of 16, and on its width (32 or 64 bits, signed or not);
   the key holds ``== 1``, ``% 16 == 0`` and the two range bounds.
3. A bool, a float or None on its type alone; the key holds the value (finer: more entries, never a wrong one).
4. A constexpr parameter, and an option such as ``num_warps``, on its value; the key holds the value.
5. The device: the key holds the current device, as Triton's per-device caches do.

So two calls with equal keys get the same compiled kernel from Triton; a key finer than Triton's only costs a
second lookup through ``JITFunction.run``. What ``Lean`` skips besides: Triton's pre-run hooks and its check
that the kernel's global variables did not change since it was compiled (the project's kernels read no mutable
globals), and launch hooks: while a launch hook is set in ``triton.knobs.runtime`` (a profiler), every call
goes through ``JITFunction.run``.

It calls the compiled kernel's launcher as ``JITFunction.run`` of the Triton versions in ``VERSIONS`` does (the
grid, the stream, the function, its packed metadata, launch metadata and hooks, then every parameter's value in
signature order); any other Triton version, and the interpreter, launch through ``JITFunction.run`` unchanged.
"""

from __future__ import annotations

from typing import Any

import torch
import triton

from fast.indexing.validate import interpreted

VERSIONS = ("3.6.",)
"""Triton versions whose ``JITFunction.run`` launches a compiled kernel as :meth:`Lean.launch` does."""

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


def available() -> bool:
    """Whether :class:`Lean` launches directly here: compiled (not interpreted) on a Triton in ``VERSIONS``."""
    return not interpreted() and triton.__version__.startswith(VERSIONS)


def _listened() -> bool:
    """Whether a launch hook is set (a profiler): Triton 3.6 keeps its hooks in chains, empty unless one is."""
    runtime = triton.knobs.runtime
    return any(hook is not None and getattr(hook, "calls", True) for hook in
               (runtime.launch_enter_hook, runtime.launch_exit_hook))  # fmt: skip


def arg_key(value: object) -> object:
    """What Triton specializes a non-constexpr argument on (module docstring, items 1-3), as a hashable key."""
    if isinstance(value, torch.Tensor):
        return (value.dtype, value.data_ptr() % 16 == 0)
    if value.__class__ is int:
        v: int = value  # type: ignore[assignment]
        return (v == 1, v % 16 == 0, _INT32[0] <= v <= _INT32[1], _INT64[0] <= v <= _INT64[1])
    return (value.__class__, value)


def _keys(args: tuple[Any, ...]) -> tuple[object, ...]:
    """:func:`arg_key` of each argument, written out in one comprehension (a launch's hot loop)."""
    lo32, hi32 = _INT32
    lo64, hi64 = _INT64
    tensor = torch.Tensor
    return tuple([
        (a.dtype, a.data_ptr() % 16 == 0) if isinstance(a, tensor)
        else (a == 1, a % 16 == 0, lo32 <= a <= hi32, lo64 <= a <= hi64) if a.__class__ is int
        else (a.__class__, a)
        for a in args
    ])  # fmt: skip


class Lean:
    """``kernel[grid](...)`` with the binding done once per key (module docstring)."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self.names = [p.name for p in kernel.params]
        self.constexpr = [p.is_constexpr for p in kernel.params]
        self.specialized = frozenset(p.name for p in kernel.params if not p.is_constexpr)
        self.defaults = {p.name: p.default for p in kernel.params if p.has_default}
        self.plans: dict[tuple[int, tuple[str, ...]], tuple[bool, bool, tuple[str, ...]]] = {}
        self.compiled: dict[tuple[object, ...], Any] = {}

    def __getitem__(self, grid: tuple[int, ...]) -> Any:
        return lambda *args, **kwargs: self.launch(grid, args, kwargs)

    def plan(self, given: int, names: tuple[str, ...]) -> tuple[bool, bool, tuple[str, ...]]:
        """For ``given`` positional arguments and these named ones: whether no positional argument is a
        constexpr, whether every named one is a constexpr or an option (keyed by value), and the names of the
        parameters after the positional ones, in signature order."""
        plan = self.plans.get((given, names))
        if plan is None:
            plan = (not any(self.constexpr[:given]), self.specialized.isdisjoint(names), tuple(self.names[given:]))
            self.plans[(given, names)] = plan
        return plan

    def key(self, device: int, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[object, ...]:
        """The key of a call (module docstring): every argument's, in the order given, and the device."""
        names = tuple(kwargs)
        plain_args, plain_names, _ = self.plan(len(args), names)
        if plain_args:
            positional = _keys(args)
        else:
            positional = tuple(a if self.constexpr[i] else arg_key(a) for i, a in enumerate(args))
        if plain_names:
            named = tuple(kwargs.values())
        else:
            named = tuple(arg_key(v) if name in self.specialized else v for name, v in kwargs.items())
        return (device, positional, names, named)

    def values(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        """Every parameter's value in signature order (the positional ones, then by name or default)."""
        rest = self.plan(len(args), tuple(kwargs))[2]
        defaults = self.defaults
        return [*args, *[kwargs[n] if n in kwargs else defaults[n] for n in rest]]

    def launch(self, grid: tuple[int, ...], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if _listened():
            self.kernel[grid](*args, **kwargs)
            return
        driver = triton.runtime.driver.active
        device = driver.get_current_device()
        key = self.key(device, args, kwargs)
        compiled = self.compiled.get(key)
        if compiled is None:  # Triton binds, specializes, compiles if it must, and launches
            self.compiled[key] = self.kernel.run(*args, grid=grid, warmup=False, **kwargs)
            return
        stream = driver.get_current_stream(device)
        g1 = grid[1] if len(grid) > 1 else 1
        g2 = grid[2] if len(grid) > 2 else 1
        compiled.run(grid[0], g1, g2, stream, compiled.function, compiled.packed_metadata, None, None, None,
                     *self.values(args, kwargs))  # fmt: skip


_LEAN: dict[int, Lean] = {}


def launcher(kernel: Any, lean: bool) -> Any:
    """``kernel`` itself, or with ``lean`` where :func:`available` its one :class:`Lean` (made on first use), to be
    indexed by a grid."""
    if not lean or not available():
        return kernel
    held = _LEAN.get(id(kernel))
    if held is None:
        held = _LEAN[id(kernel)] = Lean(kernel)
    return held
