"""RMSNorm and RoPE of a compressed row before it is quantized and stored: the tail of the fused compressor path
(docs/formats.md, "Norm, RoPE and store").

For a row ``x`` of ``d`` values, a weight ``w`` and ``eps``:

1. RMSNorm: ``y_i = x_i * w_i * rho`` with ``rho = 1 / sqrt(sum_i x_i^2 / d + eps)``. The square root is
   irrational in general, so the reference states its rounding: ``rho`` is :func:`inverse_rms`, the inverse
   root rounded down to a multiple of ``2**-s``, ``s`` the least that leaves it more than ``INVERSE_RMS_BITS``
   significant bits (from the integer square root), so within a relative ``2**-INVERSE_RMS_BITS`` of it;
   everything else is exact.
2. RoPE on the last ``rope_dim`` dimensions, in interleaved pairs: pair ``i`` is dimensions
   ``(d - rope_dim + 2i, d - rope_dim + 2i + 1) = (e, o)``, rotated to ``(e c_i - o s_i, o c_i + e s_i)`` with
   ``c_i, s_i`` the row's cos and sin entries (the engines' ``cos_sin_cache`` row of its RoPE position).
3. The row is quantized by ``reference.formats.quantize_row`` and stored as ``quantize_store`` stores it.

A kernel computes in float32 and may round the normed row to bf16 before quantizing it (the public fused kernels
do), so its bytes are compared with :func:`faithful`: each stored element, scale and bf16 value must be what
rounding some row within ``SLACK`` of the exact one gives, element ``i`` off by at most ``SLACK * m_i``, where
``m_i`` is ``|y_i|`` for a dimension RoPE leaves alone and ``|e c_i| + |o s_i|`` (the magnitude of the terms
whose difference or sum it is) for a rotated one.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Final

from reference.checks import require, require_exact, require_length, require_positive_int
from reference.formats import QuantizedRow, RowFormat, dequantize_row, group_scale, stored_scale
from reference.grids import BF16, E2M1, E4M3FN, round_to

INVERSE_RMS_BITS: Final = 64
"""``inverse_rms`` is within a relative ``2**-64`` of ``1 / sqrt(v)``: far below any float the kernels use."""
SLACK: Final = Fraction(1, 2**7)
"""The relative perturbation a faithful float32 kernel stays within: one bf16 rounding of the normed row
(``2**-9``), float32 sums of up to 512 squares (below ``2**-15``), the inverse square root and the products and
sums of RoPE (a few float32 ulps of the terms), with room to spare."""


def _isqrt(n: int) -> int:
    """``floor(sqrt(n))`` of an int ``n >= 0``, by Newton's iteration on integers."""
    if n < 2:
        return n
    x = 1 << ((n.bit_length() + 1) // 2)  # above sqrt(n)
    while True:
        y = (x + n // x) // 2
        if y >= x:
            return x
        x = y


def inverse_rms(values: Sequence[int | Fraction], eps: int | Fraction) -> Fraction:
    """``1 / sqrt(mean(values^2) + eps)`` rounded down to a dyadic rational, within a relative
    ``2**-INVERSE_RMS_BITS`` (see the module docstring)."""
    exact = [require_exact(v, f"values[{i}]") for i, v in enumerate(values)]
    require(len(exact) > 0, "values", "must hold at least one value")
    floor = require_exact(eps, "eps")
    require(floor >= 0, "eps", f"must be >= 0, got {floor}")
    variance = Fraction(sum(v * v for v in exact)) / len(exact) + floor
    require(variance > 0, "eps", "must be > 0 when every value is 0 (the mean square is 0)")
    # floor(2**s / sqrt(n / m)) = isqrt(floor(m * 4**s / n)); s makes it at least 2**INVERSE_RMS_BITS
    n, m = variance.numerator, variance.denominator
    s = max(0, INVERSE_RMS_BITS + 1 + (n.bit_length() - m.bit_length() + 2) // 2)
    return Fraction(_isqrt((m << (2 * s)) // n), 1 << s)


def rms_norm(values: Sequence[int | Fraction], weight: Sequence[int | Fraction], eps: int | Fraction) -> list[Fraction]:
    """``values[i] * weight[i] * inverse_rms(values, eps)``."""
    require_length(weight, len(values), "weight", "one weight per value")
    rho = inverse_rms(values, eps)
    return [Fraction(values[i]) * require_exact(weight[i], f"weight[{i}]") * rho for i in range(len(values))]


def rope(
    values: Sequence[Fraction], cos: Sequence[int | Fraction], sin: Sequence[int | Fraction], rope_dim: int
) -> tuple[list[Fraction], list[Fraction]]:
    """The row with its last ``rope_dim`` dimensions rotated in interleaved pairs, and each value's magnitude
    ``m_i`` (``|y_i|`` where nothing is rotated, ``|e c| + |o s|`` where it is)."""
    dims = require_positive_int(rope_dim, "rope_dim")
    require(dims % 2 == 0 and dims <= len(values), "rope_dim", f"must be even and <= {len(values)}, got {dims}")
    require_length(cos, dims // 2, "cos", "one entry per rotated pair")
    require_length(sin, dims // 2, "sin", "one entry per rotated pair")
    out = list(values)
    sizes = [abs(v) for v in values]
    start = len(values) - dims
    for i in range(dims // 2):
        c, s = require_exact(cos[i], f"cos[{i}]"), require_exact(sin[i], f"sin[{i}]")
        e, o = values[start + 2 * i], values[start + 2 * i + 1]
        out[start + 2 * i], out[start + 2 * i + 1] = e * c - o * s, o * c + e * s
        sizes[start + 2 * i] = abs(e * c) + abs(o * s)
        sizes[start + 2 * i + 1] = abs(o * c) + abs(e * s)
    return out, sizes


def norm_rope_row(
    values: Sequence[int | Fraction],
    weight: Sequence[int | Fraction],
    eps: int | Fraction,
    cos: Sequence[int | Fraction],
    sin: Sequence[int | Fraction],
    rope_dim: int,
) -> tuple[list[Fraction], list[Fraction]]:
    """Steps 1 and 2: the row to quantize and each value's magnitude (see :func:`rope`)."""
    return rope(rms_norm(values, weight, eps), cos, sin, rope_dim)


def faithful(fmt: RowFormat, row: QuantizedRow, exact: Sequence[Fraction], sizes: Sequence[Fraction]) -> str | None:
    """``None`` if ``row`` is what quantizing some row ``y'`` with ``|y'_i - exact_i| <= SLACK * sizes[i]`` gives
    (each group's scale by the format's rule from ``y'``'s group maximum, each element and bf16 value rounded);
    otherwise the first element, scale or value that no such row gives. Rounding and the scale rules are
    monotone, so each check is an interval of codes, and a value equal to the exact row's own rounding is
    inside it."""
    require_length(exact, fmt.dims, "exact", f"{fmt.name} rows have {fmt.dims} values")
    require_length(sizes, fmt.dims, "sizes", "one magnitude per value")
    stored = dequantize_row(fmt, row)
    element = E4M3FN if fmt.element == "e4m3" else E2M1
    for g in range(fmt.groups):
        span = range(g * fmt.group_size, (g + 1) * fmt.group_size)
        low = max(max(abs(exact[i]) - SLACK * sizes[i], Fraction(0)) for i in span)
        high = max(abs(exact[i]) + SLACK * sizes[i] for i in span)
        scale = stored_scale(fmt, row, g)
        if not group_scale(fmt, low) <= scale <= group_scale(fmt, high):
            return f"group {g}: scale {scale} is not the rule's for a maximum in [{low}, {high}]"
        for i in span:
            if stored[i] == round_to(element, exact[i] / scale) * scale:
                continue  # the exact row's own rounding lies between the bounds
            lo = round_to(element, (exact[i] - SLACK * sizes[i]) / scale) * scale
            hi = round_to(element, (exact[i] + SLACK * sizes[i]) / scale) * scale
            if not lo <= stored[i] <= hi:
                return f"value {i}: {stored[i]} is outside [{lo}, {hi}] (scale {scale})"
    for i in range(fmt.quantized_dims, fmt.dims):
        if stored[i] == round_to(BF16, exact[i]):
            continue
        lo, hi = (round_to(BF16, exact[i] + sign * SLACK * sizes[i]) for sign in (-1, 1))
        if not lo <= stored[i] <= hi:
            return f"value {i}: bf16 {stored[i]} is outside [{lo}, {hi}]"
    return None
