# mypy: disable-error-code="no-untyped-def,untyped-decorator"
"""An L2 prefetch hint for gathered rows, shared by the kernels that read rows through an index or a table.

    prefetch_row_lines(base: pointer[R], ROW_BYTES, mask: bool[R], ELEMENT_BYTES, POINTS)   (constexprs in caps)

issues ``prefetch.global.L2`` for every 128-byte line of each masked row: one address every 128 bytes from the
row's start and one at its last byte, which together touch every line the row spans whatever its alignment
(padded to ``POINTS``, a power of two; ``constants`` gives a kernel's prefetch constexprs). A prefetch changes
no value and holds no register after its issue; a masked-off lane issues none. Compiled kernels only: the
interpreter has no inline assembly, so a kernel passes its prefetch distance as 0 there (docs/cache-kernels.md
has the H200 figures).
"""

from __future__ import annotations

import triton
import triton.language as tl

LINE_BYTES = tl.constexpr(128)
"""The cache line the hint asks for, in bytes."""
PREFETCH_ASM = tl.constexpr("{ .reg .pred p; setp.ne.b32 p, $2, 0; @p prefetch.global.L2 [$1]; mov.u32 $0, 0; }")
"""The hint for one address ($1) where its predicate ($2) is non-zero, as elementwise inline assembly (a dummy
result in $0); the Gluon kernels issue the same text."""


def constants(prefetch: int, row_bytes: int, element_bytes: int) -> dict[str, int]:
    """The constexprs of a kernel that prefetches rows: the distance ahead (``PREFETCH``, the caller's; 0 under
    the interpreter), the row's bytes and element size, and the addresses a row takes (``PREFETCH_POINTS``: one
    every 128 bytes and its last byte, padded to a power of two)."""
    points = triton.cdiv(row_bytes, LINE_BYTES.value) + 1
    return dict(PREFETCH=prefetch, ROW_BYTES=row_bytes, ELEMENT_BYTES=element_bytes,
                PREFETCH_POINTS=triton.next_power_of_2(points))  # fmt: skip


@triton.jit
def prefetch_l2(ptr, mask):
    """Ask the L2 cache for the 128-byte lines holding ``ptr`` where ``mask`` (a hint: no result changes)."""
    tl.inline_asm_elementwise(
        PREFETCH_ASM,
        "=r,l,r",
        [ptr, mask.to(tl.int32)],
        dtype=tl.int32,
        is_pure=False,
        pack=1,
    )


@triton.jit
def prefetch_row_lines(base, ROW_BYTES: tl.constexpr, mask, ELEMENT_BYTES: tl.constexpr, POINTS: tl.constexpr):
    """Prefetch every line of rows starting at ``base`` ([R] pointers to elements of ``ELEMENT_BYTES``), each
    ``ROW_BYTES`` long, where ``mask`` ([R])."""
    point = tl.arange(0, POINTS)
    at = tl.minimum(point * LINE_BYTES, ROW_BYTES - 1)
    lines = (ROW_BYTES + LINE_BYTES - 1) // LINE_BYTES + 1
    prefetch_l2(base[:, None] + (at // ELEMENT_BYTES)[None, :], mask[:, None] & (point < lines)[None, :])
