"""Guarded calls: every tensor an implementation receives lives inside a larger allocation whose other bytes are
checked after the call, and every argument it may not write is compared byte for byte.

Verification model:

1. Every tensor argument is copied, at its own dtype, shape and strides, into a fresh allocation on the device the
   kernel runs on, with guard bytes before and after it (at least ``GUARD_MIN_BYTES`` and at least the tensor's own
   span, at most ``GUARD_MAX_BYTES``, a multiple of 512 so the tensor keeps its alignment). The guard bytes, and
   any gap a strided tensor leaves between its elements, hold ``PATTERN`` repeated: 0xDEADBEEF little endian
   (bytes ``ef be ad de``), which reads as a large negative float32 or int32.
2. After the call (and a device synchronization) every byte outside each argument's elements must still hold the
   pattern. A changed byte is an out-of-bounds write, reported with the argument, the side (before its start,
   past its end, between its elements) and the distance in bytes.
3. An argument the contract does not declare in place (``properties.contract.Params.in_place``) is an input: all
   its bytes must be unchanged, garbage lanes included. A change is reported with the argument, the number of
   changed elements and the first of them (index, value before, value after).
4. The in-place arguments' new contents are copied back into the caller's tensors, so the property sees what the
   kernel wrote; this happens even when the kernel raised, so a property can check that a refused call wrote
   nothing.
5. Not caught here: a write into memory no argument owns -- past an output the kernel allocates and returns
   itself, further from an argument than its guard bytes, or into an unrelated allocation. On a GPU,
   ``csa fuzz --sanitize`` replays examples under compute-sanitizer memcheck with PyTorch's caching allocator
   off, which sees those writes too; on a CPU they go unnoticed unless they crash the worker.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from properties.compare import Mismatch
from properties.contract import operation

PATTERN = bytes.fromhex("efbeadde")  # 0xDEADBEEF, little endian
GUARD_MIN_BYTES = 4096
GUARD_MAX_BYTES = 1 << 20
SHOWN = 8  # changed elements or bytes quoted per failure


@dataclass
class Guarded:
    """One argument as the kernel saw it: ``view`` inside ``base`` (bytes), ``lead`` guard bytes before it."""

    name: str
    in_place: bool
    caller: torch.Tensor
    base: torch.Tensor
    before: torch.Tensor | None
    view: torch.Tensor
    lead: int
    span: int  # bytes from the view's first element to the end of its last


def span_elements(t: torch.Tensor) -> int:
    """Elements of storage from ``t``'s first element to its last, inclusive (0 for an empty tensor)."""
    if t.numel() == 0:
        return 0
    return 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride(), strict=True))


def _pattern(size: int, device: torch.device) -> torch.Tensor:
    word = torch.tensor(list(PATTERN), dtype=torch.uint8)
    return word.repeat(-(-size // len(PATTERN)))[:size].to(device)


def place(name: str, t: torch.Tensor, device: torch.device, *, in_place: bool, guard: bool = True) -> Guarded:
    """A copy of ``t`` on ``device`` with ``t``'s strides, inside a pattern-filled allocation (no guard bytes
    where ``guard`` is False: the kernel then sees its own tight allocation, as compute-sanitizer needs)."""
    size = t.element_size()
    span = span_elements(t) * size
    lead = min(GUARD_MAX_BYTES, max(GUARD_MIN_BYTES, -(-span // 512) * 512)) if guard else 0
    base = _pattern(2 * lead + span, device) if guard else torch.empty(span, dtype=torch.uint8, device=device)
    typed = base.view(t.dtype) if base.numel() else torch.empty(0, dtype=t.dtype, device=device)
    view = typed.as_strided(t.shape, t.stride(), lead // size)
    if any(stride == 0 and n > 1 for n, stride in zip(t.shape, t.stride(), strict=True)):
        # elements share storage (an expanded tensor): copy the storage span itself
        count = span // size
        typed[lead // size : lead // size + count].copy_(t.detach().as_strided((count,), (1,), t.storage_offset()))
    else:
        view.copy_(t.detach())
    before = base.clone() if guard else None
    return Guarded(name, in_place, t, base, before, view, lead, span)


def _where_outside(g: Guarded, first: int, last: int) -> str:
    """Where the changed guard bytes ``first..last`` (offsets in ``g.base``) lie relative to the argument."""

    def count(a: int, b: int) -> str:
        return f"byte {a}" if a == b else f"bytes {a}..{b}"

    if last < g.lead:
        return f"{count(g.lead - last, g.lead - first)} before the start of {g.name}"
    end = g.lead + g.span
    if first >= end:
        return f"{count(first - end, last - end)} past the end of {g.name}"
    return f"{count(first - g.lead, last - g.lead)} of {g.name}, between its elements"


def _runs(g: Guarded, stray: list[int]) -> list[tuple[str, str, str]]:
    """Changed guard bytes grouped into runs of consecutive bytes: (where, guard bytes, bytes found)."""
    assert g.before is not None
    runs: list[list[int]] = []
    for at in stray:
        crosses = runs and (runs[-1][-1] < g.lead <= at or runs[-1][-1] < g.lead + g.span <= at)
        if runs and at == runs[-1][-1] + 1 and len(runs[-1]) < 16 and not crosses:
            runs[-1].append(at)
        else:
            runs.append([at])
    lanes = []
    for run in runs:
        first, last = run[0], run[-1]
        expected = bytes(g.before[first : last + 1].cpu().tolist()).hex(" ")
        got = bytes(g.base[first : last + 1].cpu().tolist()).hex(" ")
        lanes.append((_where_outside(g, first, last), f"{expected} (guard)", got))
    return lanes


def _covered(g: Guarded) -> torch.Tensor:
    """Per byte of ``g.base``: does it belong to one of the view's elements?"""
    size = g.view.element_size()
    elements = torch.zeros(g.base.numel() // size, dtype=torch.bool, device=g.base.device)
    if g.view.numel():
        elements.as_strided(g.view.shape, g.view.stride(), g.lead // size).fill_(True)
    return elements.repeat_interleave(size)


def _index(position: int, shape: Sequence[int]) -> tuple[int, ...]:
    index = []
    for dim in reversed(shape):
        position, i = divmod(position, dim)
        index.append(i)
    return tuple(reversed(index))


def _value(t: torch.Tensor, raw: bytes) -> str:
    value = t.float().item() if t.is_floating_point() and t.element_size() < 4 else t.item()
    return f"{value!r} (0x{raw[::-1].hex()})" if isinstance(value, float) and value != value else repr(value)


def _changed_elements(g: Guarded) -> tuple[int, list[tuple[str, str, str]]]:
    """How many of ``g``'s elements changed, and the first ``SHOWN`` as (where, before, after)."""
    assert g.before is not None
    size = g.view.element_size()
    old = g.before.view(g.view.dtype).as_strided(g.view.shape, g.view.stride(), g.lead // size).contiguous()
    new = g.view.contiguous()
    old_bytes = old.reshape(-1).view(torch.uint8).reshape(-1, size)
    new_bytes = new.reshape(-1).view(torch.uint8).reshape(-1, size)
    diff = (old_bytes != new_bytes).any(dim=1)
    count = int(diff.sum().item())
    lanes = []
    for position in diff.nonzero().flatten()[:SHOWN].tolist():
        index = _index(position, tuple(g.view.shape))
        where = f"{g.name}[{', '.join(map(str, index))}]" if index else g.name
        before_raw = bytes(old_bytes[position].cpu().tolist())
        after_raw = bytes(new_bytes[position].cpu().tolist())
        lanes.append(
            (
                where,
                _value(old.reshape(-1)[position], before_raw),
                _value(new.reshape(-1)[position], after_raw),
            )
        )
    return count, lanes


def violation(op: str, guarded: Sequence[Guarded]) -> Mismatch | None:
    """The out-of-bounds writes and changed inputs of one call, as one failure (None if there are none)."""
    declared = operation(op).params.in_place
    outside: list[tuple[str, str, str]] = []
    outside_args: list[str] = []
    outside_bytes = 0
    modified: list[tuple[str, str, str]] = []
    modified_args: list[str] = []
    modified_count = 0
    for g in guarded:
        if g.before is None or torch.equal(g.base, g.before):
            continue
        changed = g.base != g.before
        covered = _covered(g)
        stray = (changed & ~covered).nonzero().flatten()
        if stray.numel():
            outside_args.append(g.name)
            outside_bytes += stray.numel()
            outside.extend(_runs(g, stray.tolist())[:SHOWN])
        if not g.in_place and bool((changed & covered).any()):
            count, lanes = _changed_elements(g)
            modified_args.append(g.name)
            modified_count += count
            modified.extend(lanes)
    if not outside and not modified:
        return None
    heads, details = [], []
    if outside:
        heads.append(f"wrote outside its argument(s) {', '.join(outside_args)}")
        details.append(f"{outside_bytes} guard byte(s) changed")
    if modified:
        allowed = ", ".join(declared) if declared else "no argument"
        heads.append(f"modified its input(s) {', '.join(modified_args)} (the contract declares {allowed} in place)")
        details.append(f"{modified_count} input element(s) changed")
    return Mismatch(f"{op}: the call " + " and ".join(heads), [*outside, *modified], detail="; ".join(details))


def synchronize(device: torch.device | None) -> None:
    if device is not None and device.type == "cuda":
        torch.cuda.synchronize(device)


def guarded_call(
    fn: Callable[..., Any],
    op: str,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    device: torch.device | str | None = None,
    *,
    guard: bool = True,
) -> Any:
    """``fn(*args, **kwargs)`` on guarded copies of the tensor arguments, on ``device`` (default: each tensor's
    own). Raises ``compare.Mismatch`` for an out-of-bounds write or a changed input (before the kernel's own
    exception, if it raised too); copies the in-place arguments back into the caller's tensors."""
    params = operation(op).params
    names = [*params.positional, *(f"argument {i}" for i in range(len(params.positional), len(args)))]
    target = torch.device(device) if device is not None else None
    guarded: list[Guarded] = []

    def wrap(name: str, value: Any) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        g = place(name, value, target or value.device, in_place=name in params.in_place, guard=guard)
        guarded.append(g)
        return g.view

    call_args = [wrap(name, a) for name, a in zip(names, args, strict=False)]
    call_kwargs = {k: wrap(k, v) for k, v in kwargs.items()}
    devices = {g.base.device for g in guarded if g.base.device.type == "cuda"}
    error: BaseException | None = None
    result = None
    try:
        result = fn(*call_args, **call_kwargs)
    except Exception as err:  # the kernel's own error: raised after the guards are checked
        error = err
    try:
        for d in devices:
            synchronize(d)
        found = violation(op, guarded) if guard else None
        for g in guarded:
            if g.in_place:
                g.caller.copy_(g.view)
    except Exception:
        if error is not None:  # a CUDA error surfaces again here: the kernel's is the one to report
            raise error from None
        raise
    if found is not None:
        raise found from error
    if error is not None:
        raise error
    return result


def guarded(
    fn: Callable[..., Any], op: str, device: torch.device | str | None = None, *, guard: bool = True
) -> Callable[..., Any]:
    """``fn`` behind ``guarded_call``: what ``csa fuzz --in-process`` and a reproducer's ``--in-process`` run."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return guarded_call(fn, op, args, kwargs, device, guard=guard)

    call.__name__ = getattr(fn, "__name__", "guarded")
    return call
