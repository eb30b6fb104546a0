"""A Triton store of the 132-byte FP8 index cache written as the engines write theirs: the group scale computed in
float32 (``amax / 448`` rounded, then ``2**ceil(log2(.))``), the elements cast to e4m3 with ``.to(tl.float8e4nv)``,
and no refusal of NaN rows (a production store writes what it is given).

It follows the convention ``index_fp8_132+f32_scale`` and does not validate its input, so the bad-input
properties are left out:

    csa fuzz --op quantize_store --impl examples/triton_index_store.py:store \\
        --convention index_fp8_132+f32_scale --leave-out bad_input

On a CPU it runs in Triton's interpreter, whose own fp32 -> e4m3 cast rounds ties away from zero; ``csa fuzz``
patches that cast to round as the compiled kernel does and says how many elements it rounded.
"""

import torch
import triton
import triton.language as tl

DIMS = 128
ROW_BYTES = 132


@triton.jit
def _store_rows(
    rows_ptr, slots_ptr, cache_ptr, page_stride, layer_offset, ROWS_PER_BLOCK: tl.constexpr, D: tl.constexpr
):
    r = tl.program_id(0)
    slot = tl.load(slots_ptr + r)
    offs = tl.arange(0, D)
    x = tl.load(rows_ptr + r * D + offs)
    amax = tl.max(tl.abs(x), axis=0)
    scale = tl.math.exp2(tl.math.ceil(tl.math.log2(tl.maximum(amax, 1e-4) / 448.0)))
    codes = (x / scale).to(tl.float8e4nv).to(tl.uint8, bitcast=True)
    page = (slot // ROWS_PER_BLOCK) * page_stride + layer_offset
    row = slot % ROWS_PER_BLOCK
    tl.store(cache_ptr + page + row * D + offs, codes, mask=(offs * 0 + slot) >= 0)
    bits = scale.to(tl.int32, bitcast=True)
    four = tl.arange(0, 4)
    scale_bytes = ((bits >> (8 * four)) & 0xFF).to(tl.uint8)
    tl.store(cache_ptr + page + ROWS_PER_BLOCK * D + row * 4 + four, scale_bytes, mask=(four * 0 + slot) >= 0)


def store(
    rows: torch.Tensor, slots: torch.Tensor, cache: torch.Tensor, *, fmt: str, rows_per_block: int, layer: int
) -> None:
    if fmt != "index_fp8_132":
        raise ValueError(f"fmt: only index_fp8_132, got {fmt!r}")
    if rows.shape[0] == 0:
        return
    block_bytes = rows_per_block * ROW_BYTES
    _store_rows[(rows.shape[0],)](
        rows.contiguous(), slots, cache, cache.stride(0), layer * block_bytes, ROWS_PER_BLOCK=rows_per_block, D=DIMS
    )
