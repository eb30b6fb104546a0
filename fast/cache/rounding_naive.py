"""Rounding and decoding of the cache's small formats in eager torch: the readable twin of ``rounding.py``.

A second formulation, not a transcription: scale exponents from ``torch.frexp`` in float64, element codes from
torch's own FP8 / BF16 casts after an exact power-of-two division, e2m1 by comparisons with midpoints. Each is
exact for every finite fp32 input (docs/cache-kernels.md says why), so this twin and the Triton one must agree
byte for byte, and both with ``reference.formats``. Shapes: any; group reductions are done by the caller.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

FP8_MAX = 448.0
E4M3_NAN = 0x7F
UE8M0_NAN = 0xFF
# e2m1 midpoints between consecutive magnitudes (0, .5, 1, 1.5, 2, 3, 4, 6); a tie goes up where i is odd.
E2M1_MIDPOINTS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)
E2M1_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def divide(x: torch.Tensor, c: float) -> torch.Tensor:
    """``x / c``, correctly rounded on every device: the divisor is a tensor, since CUDA multiplies by the
    rounded reciprocal when it is a Python number, which can move a quotient onto a rounding boundary."""
    return x / torch.full_like(x, c)


def ceil_log2(q: torch.Tensor) -> torch.Tensor:
    """``ceil(log2(q))`` for positive finite float64 ``q``, exactly (``q = m 2^k``, ``m`` in [1/2, 1))."""
    m, k = torch.frexp(q)
    return torch.where(m == 0.5, k - 1, k).to(torch.int32)


def fp8_exponent(amax: torch.Tensor) -> torch.Tensor:
    """``ceil(log2(max(amax, 1e-4) / 448))``. float64 holds ``amax / 448`` close enough never to cross or hit a
    power of two it should not (``amax`` has 24 bits); the float64 ``1e-4`` gives the same -22 as the exact one."""
    return ceil_log2(divide(torch.clamp(amax.double(), min=1e-4), FP8_MAX))


def fp4_ue8m0_exponent(amax: torch.Tensor) -> torch.Tensor:
    """``ceil(log2(max(amax, 6 * 2^-126) / 6))``."""
    return ceil_log2(divide(torch.clamp(amax.double(), min=6 * 2.0**-126), 6.0))


def fp4_e4m3_scale(amax: torch.Tensor) -> torch.Tensor:
    """``e4m3(clamp(amax / 6, 2^-9, 448))`` as uint8 codes: the fp32 quotient is correctly rounded and then
    rounded once more to e4m3, which cannot double-round here (docs/cache-kernels.md)."""
    q = torch.clamp(divide(amax.float(), 6.0), min=2.0**-9, max=FP8_MAX)
    return q.to(torch.float8_e4m3fn).view(torch.uint8)


def pow2(e: torch.Tensor) -> torch.Tensor:
    """``2^e`` as float32 (``e`` int, -149 <= e <= 127), exactly: built from its bit pattern, so no device's
    ``pow`` or flush of subnormals enters."""
    e = e.to(torch.int32)
    normal = (e + 127).clamp(min=0) << 23
    subnormal = torch.ones_like(e) << (e + 149).clamp(min=0, max=22)
    return torch.where(e >= -126, normal, subnormal).view(torch.float32)


def _is_minus_zero(x: torch.Tensor) -> torch.Tensor:
    return (x == 0) & torch.signbit(x)


def e4m3_codes(x: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """uint8 e4m3 codes of ``x / 2^e`` (saturating at 448); ``-0.0`` stores +0."""
    t = torch.clamp(x.float() / pow2(e), -FP8_MAX, FP8_MAX)
    codes = t.to(torch.float8_e4m3fn).view(torch.uint8)
    return torch.where(_is_minus_zero(x), torch.zeros_like(codes), codes)


def _e2m1_from_magnitude(ax: torch.Tensor, thresholds: Sequence[torch.Tensor | float]) -> torch.Tensor:
    code = torch.zeros(ax.shape, dtype=torch.int32, device=ax.device)
    for i, threshold in enumerate(thresholds):
        t = torch.as_tensor(threshold, dtype=ax.dtype, device=ax.device)
        above = torch.ge(ax, t) if i % 2 else torch.gt(ax, t)
        code += above.to(torch.int32)
    return code


def _with_sign(code: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return (code | ((x < 0).to(torch.int32) << 3)).to(torch.uint8)


def e2m1_codes_scaled(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """uint8 e2m1 codes (0..15) of ``x / scale`` for e4m3 scales, nearest even, saturating at 6: ``|x|`` is
    compared with ``midpoint * scale``, a product with at most 7 significant bits, hence exact."""
    ax = x.abs().float()
    return _with_sign(_e2m1_from_magnitude(ax, [mid * scale for mid in E2M1_MIDPOINTS]), x)


def e2m1_codes_pow2(x: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """uint8 e2m1 codes of ``x / 2^e``: the division by a power of two is exact wherever it matters (a result
    below 2^-126 rounds to 0 either way), then compared with the midpoints."""
    ax = x.abs().float() / pow2(e)
    return _with_sign(_e2m1_from_magnitude(ax, E2M1_MIDPOINTS), x)


def bf16_bits(x: torch.Tensor) -> torch.Tensor:
    """int32 bf16 bit patterns (0..0xFFFF) of fp32 ``x``: torch's nearest-even cast; NaN -> 0x7FC0, -0.0 -> 0."""
    bits = x.to(torch.bfloat16).view(torch.int16).to(torch.int32) & 0xFFFF
    bits = torch.where(torch.isnan(x), torch.full_like(bits, 0x7FC0), bits)
    return torch.where(_is_minus_zero(x), torch.zeros_like(bits), bits)


def e4m3_value(codes: torch.Tensor) -> torch.Tensor:
    """uint8 e4m3fn codes as float32 (torch's decode; 0x7F / 0xFF are NaN)."""
    return codes.view(torch.float8_e4m3fn).float()


def e2m1_value(codes: torch.Tensor) -> torch.Tensor:
    """int e2m1 codes (0..15) as float32, by table."""
    table = torch.tensor(E2M1_MAGNITUDES, dtype=torch.float32, device=codes.device)
    c = codes.long()
    v = table[c & 7]
    return torch.where((c & 8) != 0, -v, v)


def ue8m0_value(codes: torch.Tensor) -> torch.Tensor:
    """UE8M0 codes as float32: ``2^(code - 127)``; 0xFF is NaN."""
    c = codes.to(torch.int32)
    return torch.where(c == UE8M0_NAN, torch.full(c.shape, float("nan"), device=c.device), pow2(c - 127))
