"""The cache formats as the kernels see them: row format, block arrangement, and the byte offsets of one slot.

Every number here comes from ``reference.formats`` and ``reference.cache_blocks.public_layout``; nothing is
restated. A format is named by its contract convention (``"v4_584"``) or its reference name (``"v4_584"``).

| convention    | reference    | dims | groups          | element | scale        | data | scales | block          |
|---------------|--------------|------|-----------------|---------|--------------|------|--------|----------------|
| v4_584        | v4_584  | 512  | 7 x 64, 64 bf16 | e4m3    | ue8m0, 1 pad | 576  | 8      | sectioned, 576 |
| v41_fp8_528   | v41_fp8_528 | 512  | 16 x 32         | e4m3    | ue8m0        | 512  | 16     | interleaved    |
| v41_fp4_288   | v41_fp4_288 | 512  | 32 x 16         | e2m1    | e4m3         | 256  | 32     | interleaved    |
| index_fp4_68  | index_fp4_68    | 128  | 4 x 32          | e2m1    | ue8m0        | 64   | 4      | sectioned      |
| index_fp8_132 | index_fp8_132    | 128  | 1 x 128         | e4m3    | fp32 2^e     | 128  | 4      | sectioned      |

A cache is ``u8[num_blocks, block_bytes]``; physical slot ``s`` is row ``s % rows`` of block ``s // rows``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reference.cache_blocks import BlockLayout, public_layout
from reference.formats import INDEX_FP4, INDEX_FP8, V4_MAIN_FP8, V41_MAIN_FP4, V41_MAIN_FP8, RowFormat

CONVENTIONS: dict[str, RowFormat] = {
    "v4_584": V4_MAIN_FP8,
    "v41_fp8_528": V41_MAIN_FP8,
    "v41_fp4_288": V41_MAIN_FP4,
    "index_fp4_68": INDEX_FP4,
    "index_fp8_132": INDEX_FP8,
}

# Scale rules, as kernel switches: which formula turns a group's amax into its scale.
SCALE_FP8_UE8M0 = 0  # 2^ceil(log2(max(amax, 1e-4) / 448)), one byte
SCALE_FP4_UE8M0 = 1  # 2^ceil(log2(max(amax, 6 * 2^-126) / 6)), one byte
SCALE_FP4_E4M3 = 2  # e4m3(clamp(amax / 6, 2^-9, 448)), one byte
SCALE_FP8_FP32 = 3  # the FP8 rule, stored as the fp32 bit pattern (4 bytes)


def _of_row(attribute: str, doc: str | None = None) -> Any:
    """A read-only attribute of ``CacheFormat`` that is its row format's ``attribute``."""
    return property(lambda self: getattr(self.row, attribute), doc=doc)


@dataclass(frozen=True)
class CacheFormat:
    """One row format in its public block arrangement, with the constants the kernels need."""

    convention: str
    row: RowFormat

    name = _of_row("name")
    dims = _of_row("dims")
    group_size = _of_row("group_size")
    groups = _of_row("groups", "Quantized groups (the BF16 tail of v4_584 is not one).")
    tail_dims = _of_row("bf16_dims")
    data_bytes = _of_row("data_bytes")
    quantized_bytes = _of_row("quantized_bytes")
    scale_bytes = _of_row("scale_bytes")
    row_bytes = _of_row("row_bytes")

    @property
    def tile_groups(self) -> int:
        """``dims / group_size``: a power of two for every format (v4_584: 7 groups and the tail = 8)."""
        return self.row.dims // self.row.group_size

    @property
    def fp4(self) -> bool:
        return self.row.element == "e2m1"

    @property
    def scale_rule(self) -> int:
        if self.row.scale_kind == "fp32_pow2":
            return SCALE_FP8_FP32
        if self.row.scale_kind == "e4m3":
            return SCALE_FP4_E4M3
        return SCALE_FP4_UE8M0 if self.fp4 else SCALE_FP8_UE8M0

    def layout(self, rows: int) -> BlockLayout:
        return public_layout(self.row, rows)

    def block_bytes(self, rows: int) -> int:
        return self.layout(rows).block_bytes

    def offsets(self, rows: int) -> tuple[int, int, int]:
        """``(data_stride, scale_base, scale_stride)`` in bytes: row ``r`` of a block has its data at
        ``r * data_stride`` and its scales at ``scale_base + r * scale_stride``."""
        layout = self.layout(rows)
        if layout.arrangement == "sectioned":
            return self.data_bytes, rows * self.data_bytes, self.scale_bytes
        return self.row_bytes, self.data_bytes, self.row_bytes

    def rows_per_block(self, block_bytes: int, name: str = "cache") -> int:
        """The row count whose public block is ``block_bytes`` long; ``ValueError`` naming ``name`` if none is.

        Block size grows strictly with the row count (each row adds at least 1 B after padding), so the
        answer is unique.
        """
        if block_bytes > 0:
            guess = max(1, block_bytes // self.row_bytes)
            for rows in range(max(1, guess - 2), guess + 3):
                if self.block_bytes(rows) == block_bytes:
                    return rows
        raise ValueError(
            f"{name}: a block of {block_bytes} bytes holds no whole number of {self.convention} rows "
            f"({self.row_bytes} B each, {self.layout(1).arrangement}, padded to {self.layout(1).alignment} B)"
        )


FORMATS: dict[str, CacheFormat] = {c: CacheFormat(c, row) for c, row in CONVENTIONS.items()}
BY_NAME: dict[str, CacheFormat] = {**FORMATS, **{f.row.name: f for f in FORMATS.values()}}


def cache_format(fmt: object) -> CacheFormat:
    """Look a format up by convention or reference name; ``ValueError`` naming ``fmt`` otherwise."""
    if isinstance(fmt, CacheFormat):
        return fmt
    if not isinstance(fmt, str):
        raise TypeError(f"fmt: must be a format name (str), got {type(fmt).__name__}")
    if fmt not in BY_NAME:
        raise ValueError(f"fmt: unknown cache format {fmt!r}; known: {', '.join(FORMATS)}")
    return BY_NAME[fmt]
