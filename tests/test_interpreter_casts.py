"""properties.interpreter_casts: under TRITON_INTERPRET=1 a Triton kernel's fp32 -> bf16 and fp32 -> e4m3 casts
round as compiled code rounds them (nearest even; e4m3 saturating), where the interpreter's own conversion does
not."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from properties import interpreter_casts

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="needs Triton's interpreter")

TIES = [
    1 + 2**-8,
    1 + 3 * 2**-8,
    -(1 + 2**-8),
    2 - 2**-9,
    3.0e38,
    3.4e38,
    1e-40,
    -0.0,
    255.5,
    float("nan"),
    float("inf"),
]
"""bf16 ties (to even: down, then up), a carry into the exponent, values near and past bf16's largest, a subnormal."""
E4M3 = [1 + 2**-4, 1 + 3 * 2**-4, 2**-9, 3 * 2**-10, 2**-10, 447.9, 464.0, 465.0, 1e6, -1e6, float("inf"), 0.0]
"""e4m3 ties (down, up), the smallest subnormal and ties below it, the saturation edge (464 is a tie: to 448)."""


def _kernel():  # type: ignore[no-untyped-def]
    import triton
    import triton.language as tl

    @triton.jit
    def cast(x_ptr, bf16_ptr, e4m3_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(bf16_ptr + offs, x.to(tl.bfloat16), mask=mask)
        tl.store(e4m3_ptr + offs, x.to(tl.float8e4nv), mask=mask)

    return cast


def _run(values: list[float]) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.tensor(values, dtype=torch.float32)
    bf16 = torch.empty(len(values), dtype=torch.bfloat16)
    e4m3 = torch.empty(len(values), dtype=torch.float8_e4m3fn)
    _kernel()[(1,)](x, bf16, e4m3, len(values), BLOCK=16)
    return bf16, e4m3


def _expected_e4m3(values: list[float]) -> list[int]:
    """torch's conversion (nearest even), saturated at 448 as ``cvt.rn.satfinite`` does."""
    clamped = torch.tensor(values, dtype=torch.float32).nan_to_num(posinf=448.0, neginf=-448.0).clamp(-448.0, 448.0)
    return clamped.to(torch.float8_e4m3fn).view(torch.uint8).tolist()


def test_the_interpreters_own_conversion_truncates() -> None:
    import triton.language as tl
    from triton.runtime import interpreter

    own = getattr(interpreter._convert_float, "csa_original", interpreter._convert_float)
    tie = np.array([1 + 2**-8, 1 + 3 * 2**-8], dtype=np.float32)
    assert own(tie, tl.float32, tl.bfloat16, None).tolist() == [0x3F80, 0x3F81]  # truncated: not [0x3F80, 0x3F82]
    assert interpreter_casts.bf16_bits(tie).tolist() == [0x3F80, 0x3F82]


def test_patched_casts_round_as_compiled() -> None:
    assert interpreter_casts.install()
    before = interpreter_casts.ROUNDED[0]
    bf16, e4m3 = _run(TIES)
    expected = torch.tensor(TIES).to(torch.bfloat16)
    numbers = ~torch.isnan(expected)
    assert bf16[numbers].view(torch.int16).tolist() == expected[numbers].view(torch.int16).tolist()
    assert torch.isnan(bf16[~numbers]).all()
    assert interpreter_casts.ROUNDED[0] - before == 2 * 16
    _, e4m3 = _run(E4M3)
    assert e4m3.view(torch.uint8).tolist() == _expected_e4m3(E4M3)
    _, nan = _run([float("nan"), -float("nan")])
    assert [b & 0x7F for b in nan.view(torch.uint8).tolist()] == [0x7F, 0x7F]


def test_every_e4m3_code_and_midpoint() -> None:
    """Every finite e4m3 value and every midpoint between neighbours (ties to the even code), both signs."""
    codes = torch.arange(0x7F, dtype=torch.uint8).view(torch.float8_e4m3fn).float()
    mids = ((codes[1:] + codes[:-1]) / 2).tolist()
    values = [v * s for v in codes.tolist() + mids for s in (1.0, -1.0)]
    assert interpreter_casts.e4m3_bits(np.array(values, dtype=np.float32)).tolist() == _expected_e4m3(values)


def test_install_is_idempotent() -> None:
    from triton.runtime import interpreter

    assert interpreter_casts.install()
    patched = interpreter._convert_float
    assert interpreter_casts.install()
    assert interpreter._convert_float is patched
