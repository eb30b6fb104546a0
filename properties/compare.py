"""How results are compared: exact lanes, and floating outputs under the twice-torch error rule.

1. Exact outputs (indices, slots, -1 lanes, byte strings, quantized codes) compare bit for bit.
2. A floating output is compared with the exact reference value. Its error may be at most twice the error of a
   same-precision torch implementation of the same formula on the same inputs (the flash-attention rule), with a
   floor of a few units in the last place of the output dtype, since a torch baseline may be exact by luck.
3. A mismatch is reported lane by lane, worst lanes first, so the first lines of a report point at the bug: each
   line reads ``at <where>: expected X, got Y``, where is an index (``[0, 1]``) or a description (``slot 3 (block 0
   row 3) scale byte 0``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

ULP_FLOOR = 4  # output ulps always allowed, whatever the baseline's error


Lane = tuple[tuple[int, ...] | str, Any, Any]
"""One differing lane of a ``Mismatch``: (where, expected, got)."""


@dataclass
class Mismatch(AssertionError):
    """A property's failure: what was checked, and the differing lanes, worst first. A lane is ``(where,
    expected, got)``: ``where`` an index tuple or a description; a string value is shown as it is."""

    what: str
    lanes: Sequence[Lane] = field(default_factory=list)
    detail: str = ""

    def __post_init__(self) -> None:
        super().__init__(str(self))

    def __str__(self) -> str:
        head = f"{self.what}: {self.detail}" if self.detail else self.what
        shown = [f"  at {_where(i)}: expected {_shown(e)}, got {_shown(g)}" for i, e, g in self.lanes[:12]]
        more = [f"  ... {len(self.lanes) - 12} more lanes differ"] if len(self.lanes) > 12 else []
        return "\n".join([head, *shown, *more])


def _where(where: tuple[int, ...] | str) -> str:
    return where if isinstance(where, str) else str(list(where))


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


def _as_nested(x: Any) -> Any:
    if hasattr(x, "tolist"):
        return x.tolist()
    if isinstance(x, bytes | bytearray):
        return list(x)
    return x


def _flatten(x: Any, prefix: tuple[int, ...] = ()) -> list[tuple[tuple[int, ...], Any]]:
    if isinstance(x, list | tuple):
        out: list[tuple[tuple[int, ...], Any]] = []
        for i, item in enumerate(x):
            out.extend(_flatten(item, (*prefix, i)))
        return out
    return [(prefix, x)]


def _shape(x: Any) -> tuple[int, ...]:
    shape: list[int] = []
    while isinstance(x, list | tuple):
        shape.append(len(x))
        if not x:
            break
        x = x[0]
    return tuple(shape)


def assert_exact(expected: Any, got: Any, what: str) -> None:
    """Bit-for-bit equality of nested lists, tuples, tensors or byte strings."""
    e, g = _as_nested(expected), _as_nested(got)
    if _shape(e) != _shape(g):
        raise Mismatch(what, detail=f"shape {_shape(g)} differs from expected {_shape(e)}")
    lanes: list[Lane] = [(i, ev, gv) for (i, ev), (_, gv) in zip(_flatten(e), _flatten(g), strict=True) if ev != gv]
    if lanes:
        raise Mismatch(what, lanes, detail=f"{len(lanes)} lane(s) differ")


def ulp(x: float, mantissa_bits: int) -> float:
    """One unit in the last place of |x| for a binary format with `mantissa_bits` stored fraction bits."""
    import math

    if x == 0 or not math.isfinite(x):
        return 2.0 ** (-126 - mantissa_bits)
    return 2.0 ** (math.frexp(abs(x))[1] - 1 - mantissa_bits)


def errors(exact: Sequence[Fraction | float], got: Sequence[float]) -> list[float]:
    """Absolute error of each lane; NaN where either side is not finite and they are not the same value."""
    import math

    out = []
    for e, g in zip(exact, got, strict=True):
        ef = float(e)
        if math.isnan(g) or math.isnan(ef):
            out.append(0.0 if (math.isnan(g) and math.isnan(ef)) else math.nan)
        elif math.isinf(g) or math.isinf(ef):
            out.append(0.0 if g == ef else math.inf)
        else:
            out.append(abs(float(Fraction(g) - Fraction(e))) if isinstance(e, Fraction) else abs(g - ef))
    return out


def assert_within_magnitude(
    exact: Sequence[Fraction], got: Sequence[float], magnitude: Sequence[Fraction], bound: Fraction, what: str
) -> None:
    """Each lane's error is at most ``bound * magnitude`` of that lane, or ULP_FLOOR float32 ulps of
    ``max(|exact|, magnitude)``: for kernels whose arithmetic has a stated error bound rather than a torch twin of
    the same precision (the e4m3 dot)."""
    allowed = [
        max(float(bound * size), ULP_FLOOR * ulp(max(abs(float(e)), float(size)), 23))
        for e, size in zip(exact, magnitude, strict=True)
    ]
    _within(exact, got, errors(exact, got), allowed, what, f"{bound} of the lane's magnitude")


def _within(
    exact: Sequence[Fraction | float],
    got: Sequence[float],
    err: list[float],
    allowed: list[float],
    what: str,
    rule: str,
) -> None:
    """Raise a Mismatch listing every lane whose error exceeds its allowance, the worst first."""
    import math

    bad = []
    for i, (ge, e, limit) in enumerate(zip(err, exact, allowed, strict=True)):
        if not ge <= limit:
            bad.append(((i,), float(e), got[i], ge / limit if limit and math.isfinite(ge) else math.inf))
    if bad:
        bad.sort(key=lambda lane: -lane[3] if math.isfinite(lane[3]) else -math.inf)
        raise Mismatch(
            what,
            [(i, e, g) for i, e, g, _ in bad],
            detail=f"{len(bad)} lane(s) exceed {rule} (ulp floor {ULP_FLOOR})",
        )


def assert_within_twice_baseline(
    exact: Sequence[Fraction | float],
    got: Sequence[float],
    baseline: Sequence[float],
    mantissa_bits: int,
    what: str,
    scale: Sequence[float] | None = None,
    floor: Sequence[float] | None = None,
) -> None:
    """Each lane's error is at most 2 x the same-precision baseline's error on that lane, or ULP_FLOOR ulps.

    The bound is per lane, so a single wrong row cannot hide behind a large error elsewhere. ``scale`` (per
    lane, optional) is the magnitude the formula's rounding is proportional to where it exceeds the result's
    own, as for a sum whose terms cancel (``sum |terms|``); the ulp floor is taken at ``max(|exact|, scale)``.
    ``floor`` (per lane, optional) is an absolute error always allowed besides, such as what flushing float32
    subnormals to zero can move the lane by.
    """
    import math

    got_err, base_err = errors(exact, got), errors(exact, baseline)
    sizes = (
        [abs(float(e)) for e in exact]
        if scale is None
        else [max(abs(float(e)), s) for e, s in zip(exact, scale, strict=True)]
    )
    allowed = [
        max(2 * be if math.isfinite(be) else 0.0, ULP_FLOOR * ulp(size, mantissa_bits))
        for be, size in zip(base_err, sizes, strict=True)
    ]
    if floor is not None:
        allowed = [max(a, f) for a, f in zip(allowed, floor, strict=True)]
    _within(exact, got, got_err, allowed, what, "2 x the same-precision torch error")
