# mypy: disable-error-code="no-untyped-def,untyped-decorator"
"""Rounding and decoding of the cache's small formats by operations on fp32 bit patterns (Triton).

No floating-point cast to an FP8 / FP4 type is used (fp32 additions and multiplications are IEEE operations
that the interpreter's numpy performs exactly as the GPU), so the compiled kernel and the interpreter (whose FP8
casts are not the hardware's) give the same bytes, and both equal ``reference.grids``. Each helper works on
tensors of any shape. Derivations: docs/cache-kernels.md.

* ``magnitude``: fp32 -> (bits of |x| as int32, negative flag). ``-0.0`` counts as zero, not negative: the
  reference sees exact inputs and stores +0 for it. A negative value that rounds to zero keeps its sign bit.
* ``fp8_exponent`` / ``fp4_ue8m0_exponent``: the exact power-of-two scale exponents
  ``ceil(log2(max(a, 1e-4) / 448))`` and ``ceil(log2(max(a, 6 * 2^-126) / 6))`` read off the bits of ``a``.
* ``fp4_e4m3_scale_code``: the exact ``e4m3(clamp(a / 6, 2^-9, 448))`` by integer division by 3.
* ``round_pow2_scaled``: the code of ``|x| / 2^e`` on an e4m3 or e2m1 grid, nearest even, saturating: one
  exact multiplication, then one fp32 addition whose own rounding is the grid's.
* ``e2m1_by_thresholds``: the e2m1 code of ``|x| / s`` for an e4m3 scale ``s``, by exact comparisons.
* ``bf16_bits``: round to nearest even; overflow gives infinity (IEEE); NaN gives 0x7FC0. ``bf16_round``: the
  same rounding as an fp32 value.
* ``e4m3_value``, ``e2m1_value``, ``ue8m0_value``: codes back to fp32, exactly (NaN codes give NaN; a
  negative zero code gives -0.0, its sign set by a bit operation).
"""

from __future__ import annotations

import triton
import triton.language as tl

# fp32 bit patterns of the main-FP4 scale clamp bounds: 6 * 2^-9 and 6 * 448.
AMAX_FLOOR_BITS_FP4_E4M3 = tl.constexpr(0x3C400000)
AMAX_CEIL_BITS_FP4_E4M3 = tl.constexpr(0x45280000)
E4M3_MAX_CODE = tl.constexpr(0x7E)
E2M1_MAX_CODE = tl.constexpr(0x7)


@triton.jit
def magnitude(x):
    """fp32 -> (int32 bits of |x|, True where x < 0); -0.0 is not negative."""
    bits = x.to(tl.int32, bitcast=True)
    mag = bits & 0x7FFFFFFF
    return mag, (bits < 0) & (mag != 0)


@triton.jit
def fp8_exponent(amax_mag):
    """``ceil(log2(max(a, 1e-4) / 448))`` for a finite ``a >= 0`` given as fp32 bits.

    With ``a = 2^E * f``, ``f`` in [1, 2): ``a / 448 = 2^(E - 8) * (4 f / 7)`` and ``4 f / 7 <= 1`` iff
    ``f <= 7/4``, so the exponent is ``E - 8 + (mantissa > 0x600000)``; the floor contributes
    ``ceil(log2(1e-4 / 448)) = -22`` and the rule is monotone, hence the maximum.
    """
    e = (amax_mag >> 23) - 135 + ((amax_mag & 0x7FFFFF) > 0x600000).to(tl.int32)
    return tl.maximum(e, -22)


@triton.jit
def fp4_ue8m0_exponent(amax_mag):
    """``ceil(log2(max(a, 6 * 2^-126) / 6))``: ``E - 2 + (mantissa > 0x400000)``, at least -126."""
    e = (amax_mag >> 23) - 129 + ((amax_mag & 0x7FFFFF) > 0x400000).to(tl.int32)
    return tl.maximum(e, -126)


@triton.jit
def round_pow2_scaled(mag, e, MANT: tl.constexpr, EMIN: tl.constexpr, MAX_CODE: tl.constexpr):
    """Code magnitude of ``|x| / 2^e`` on the grid with ``MANT`` stored mantissa bits and minimum normal
    exponent ``EMIN`` (e4m3: 3, -6; e2m1: 1, 0), nearest even, saturating at ``MAX_CODE``.

    ``mag``: fp32 bits of a finite ``|x|``; ``2^-e`` must be a normal fp32 (the cache's scale rules give
    ``-22 <= e <= 120`` for e4m3, ``|e| <= 126`` for e2m1). ``y = |x| 2^-e`` is exact unless it is an fp32
    subnormal, far below half the grid's smallest step. The grid's step at ``y`` is ``2^q`` with ``q = max(E_y,
    EMIN) - MANT``; adding ``C = 2^(q + 23)`` rounds ``y`` to that step by the hardware's own nearest-even
    addition, and the sum's bits minus ``C``'s count the steps, ``n``: the code is ``((max(E_y, EMIN) - EMIN) <<
    MANT) + n``, a carry into the next binade included (docs/cache-kernels.md).
    """
    y = mag.to(tl.float32, bitcast=True) * ((127 - e) << 23).to(tl.float32, bitcast=True)
    field = tl.maximum(y.to(tl.int32, bitcast=True) >> 23, EMIN + 127)
    c_bits = (field + 23 - MANT) << 23
    n = (y + c_bits.to(tl.float32, bitcast=True)).to(tl.int32, bitcast=True) - c_bits
    return tl.minimum(((field - 127 - EMIN) << MANT) + n, MAX_CODE)


@triton.jit
def fp4_e4m3_scale_code(amax_mag):
    """The e4m3 code of ``clamp(a / 6, 2^-9, 448)`` for a finite ``a >= 0`` (fp32 bits), exactly.

    Inside the clamp, ``a = sig * 2^(ea - 23)`` and ``a / 6 = sig / (3 * 2^(qe + 24 - ea))`` in units of the
    quantum ``2^qe``; the shift lies in [18, 22], so the division is exact int32 arithmetic.
    """
    low = amax_mag <= AMAX_FLOOR_BITS_FP4_E4M3
    high = amax_mag >= AMAX_CEIL_BITS_FP4_E4M3
    a = tl.minimum(tl.maximum(amax_mag, AMAX_FLOOR_BITS_FP4_E4M3), AMAX_CEIL_BITS_FP4_E4M3)
    ea = (a >> 23) - 127
    sig = (a & 0x7FFFFF) | 0x800000
    floor_log2 = ea - 3 + ((a & 0x7FFFFF) >= 0x400000).to(tl.int32)
    qe = tl.maximum(floor_log2, -6) - 3
    den = 3 << (qe + 24 - ea)
    n = sig // den
    rem2 = 2 * (sig - n * den)
    n = n + ((rem2 > den) | ((rem2 == den) & ((n & 1) == 1))).to(tl.int32)
    code = tl.minimum(((qe + 9) << 3) + n, E4M3_MAX_CODE)
    return tl.where(low, 1, tl.where(high, E4M3_MAX_CODE, code))


@triton.jit
def e2m1_by_thresholds(absx, s):
    """e2m1 code magnitude of ``absx / s`` (both fp32, ``s`` an e4m3 value >= 2^-9), nearest even, saturating.

    The midpoints 1/4, 3/4, 5/4, 7/4, 5/2, 7/2, 5 times ``s`` have at most 7 significant bits, so each product
    is exact and each comparison decides the rounding exactly; a tie goes to the even code (``>=`` where the
    upper code is even).
    """
    code = (absx > 0.25 * s).to(tl.int32)
    code += (absx >= 0.75 * s).to(tl.int32)
    code += (absx > 1.25 * s).to(tl.int32)
    code += (absx >= 1.75 * s).to(tl.int32)
    code += (absx > 2.5 * s).to(tl.int32)
    code += (absx >= 3.5 * s).to(tl.int32)
    code += (absx > 5.0 * s).to(tl.int32)
    return code


@triton.jit
def bf16_bits(x):
    """fp32 -> bf16 bit pattern in [0, 0xFFFF] (int32): nearest even, overflow to infinity, NaN -> 0x7FC0,
    -0.0 -> 0."""
    u = x.to(tl.uint32, bitcast=True)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).to(tl.int32)
    mag = x.to(tl.int32, bitcast=True) & 0x7FFFFFFF
    r = tl.where(mag > 0x7F800000, 0x7FC0, r)
    return tl.where(mag == 0, 0, r)


@triton.jit
def bf16_round(x):
    """fp32 ``x`` rounded to the nearest bf16 value (ties to even), as fp32 (finite ``x``): the GPU's
    ``.to(tl.bfloat16)``, which the interpreter replaces by truncation."""
    u = x.to(tl.uint32, bitcast=True)
    return ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).to(tl.float32, bitcast=True)


@triton.jit
def with_sign(v, negative):
    """``v`` (fp32, sign bit clear) with the sign bit set where ``negative``: an integer operation, since a
    compiled unary minus may be lowered to ``0 - v``, which turns -0 into +0."""
    bits = v.to(tl.int32, bitcast=True) | (negative.to(tl.int32) << 31)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def e4m3_value(code):
    """An e4m3fn code (int32, 0..255) as fp32; 0x7F / 0xFF are NaN."""
    mag = code & 0x7F
    field = mag >> 3
    m = mag & 7
    normal = (((field + 120) << 23) | (m << 20)).to(tl.float32, bitcast=True)
    v = tl.where(field == 0, m.to(tl.float32) * 0.001953125, normal)
    v = tl.where(mag == 0x7F, float("nan"), v)
    return with_sign(v, (code & 0x80) != 0)


@triton.jit
def e2m1_value(code):
    """An e2m1 code (int32, 0..15) as fp32: magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6."""
    field = (code >> 1) & 3
    m = code & 1
    normal = (((field + 126) << 23) | (m << 22)).to(tl.float32, bitcast=True)
    v = tl.where(field == 0, m.to(tl.float32) * 0.5, normal)
    return with_sign(v, (code & 8) != 0)


@triton.jit
def ue8m0_value(code):
    """A UE8M0 code (int32, 0..255) as fp32: ``2^(code - 127)``; code 0 is the subnormal 2^-127, 0xFF NaN."""
    v = tl.where(code == 0, 0x00400000, code << 23).to(tl.float32, bitcast=True)
    return tl.where(code == 0xFF, float("nan"), v)
