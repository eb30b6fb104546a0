"""Correctly rounded fp32 -> bf16 and fp32 -> e4m3 casts for Triton's interpreter (``TRITON_INTERPRET=1``).

Verification model: on a CPU a user's Triton kernel runs in Triton's interpreter, whose float conversion
(``triton.runtime.interpreter._convert_float``) does not round as the compiled kernel does. A cast of fp32 to
bf16 without a rounding mode is truncated (compiled: ``cvt.rn.bf16.f32``, nearest even); its round-to-nearest
path adds the cut-off bit (ties away from zero) without carrying into the exponent; fp32 to e4m3
(``tl.float8e4nv``) is rounded the same way and neither saturates nor keeps NaN (compiled:
``cvt.rn.satfinite.e4m3x2.f32``). A byte-exact comparison would then blame a correct kernel for the interpreter.

:func:`install` replaces that conversion, inside the process that runs the kernel, by one that rounds these two
casts as the compiled code does and hands every other conversion to the interpreter's own:

* fp32 -> bf16 (no rounding mode, or nearest even): nearest even; beyond bf16's range an infinity; NaN stays NaN.
* fp32 -> e4m3 (``float8e4nv``): nearest even, saturating at +-448 (infinities too); NaN gives the NaN code.

A round-toward-zero cast (``fp_downcast_rounding="rtz"``) is left to the interpreter. ``csa fuzz`` installs the
patch in its worker (and with ``--in-process`` in its own process) whenever ``TRITON_INTERPRET=1``, and says how
many casts it rounded (:data:`ROUNDED`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

ROUNDED = [0]
"""Elements the patched conversion has rounded in this process (one counter, so a caller can take differences)."""

E4M3_MAX_CODE = 0x7E
E4M3_NAN_CODE = 0x7F


def bf16_bits(values: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The bf16 bit patterns of float32 ``values``, rounded to nearest even (overflow: infinity; NaN: quiet NaN)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    quiet = (bits >> 16) | 0x40
    return np.where(np.isnan(values), quiet, rounded).astype(np.uint16)


def e4m3_bits(values: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The e4m3 (fn) codes of float32 ``values``: nearest even, saturating at 448, NaN the NaN code."""
    x = np.asarray(values, dtype=np.float32).astype(np.float64)
    sign = np.where(np.signbit(x), 0x80, 0).astype(np.int64)
    a = np.abs(np.where(np.isnan(x), 0.0, x))
    _, exponent = np.frexp(np.maximum(a, 2.0**-6))
    e = exponent.astype(np.int64) - 1  # a = m * 2**e, 1 <= m < 2 for normal values
    normal = a >= 2.0**-6
    step = np.where(normal, np.ldexp(1.0, e - 3), 2.0**-9)
    q = np.rint(a / step).astype(np.int64)  # ties to even
    carry = normal & (q == 16)
    e = np.where(carry, e + 1, e)
    q = np.where(carry, 8, q)
    code = np.where(normal, ((e + 7) << 3) | (q - 8), q)
    code = np.where(np.isinf(x) | (code > E4M3_MAX_CODE) | (a >= 464.0), E4M3_MAX_CODE, code)
    code = np.where(np.isnan(x), E4M3_NAN_CODE, code | sign)
    return code.astype(np.uint8)


def install() -> bool:
    """Patch the interpreter's conversion (once per process); False where Triton's interpreter is not there."""
    try:
        import triton.language as tl
        from triton._C.libtriton import ir
        from triton.runtime import interpreter
    except ImportError:
        return False
    original = getattr(interpreter, "_convert_float", None)
    if original is None:
        return False
    if getattr(original, "csa_rounds", False):
        return True
    towards_zero = ir.ROUNDING_MODE.RTZ

    def convert_float(data: Any, input_dtype: Any, output_dtype: Any, rounding_mode: Any) -> Any:
        if input_dtype == tl.float32 and rounding_mode != towards_zero:
            if output_dtype == tl.bfloat16:
                ROUNDED[0] += int(np.size(data))
                return bf16_bits(data).reshape(np.shape(data))
            if output_dtype == tl.float8e4nv:
                ROUNDED[0] += int(np.size(data))
                return e4m3_bits(data).reshape(np.shape(data))
        return original(data, input_dtype, output_dtype, rounding_mode)

    convert_float.csa_rounds = True  # type: ignore[attr-defined]
    convert_float.csa_original = original  # type: ignore[attr-defined]
    interpreter._convert_float = convert_float
    return True
