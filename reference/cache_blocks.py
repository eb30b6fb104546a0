"""Whole cache blocks: where each row's data and scale bytes sit, and the block's padded size.

Two arrangements exist in public code (docs/formats.md cites them):

* ``"sectioned"``: the data parts of all ``rows`` rows first, then the scale parts of all rows; the
  block is then padded up to a multiple of ``alignment`` bytes (FlashMLA's V4 layout pads to 576 B);
* ``"interleaved"``: row ``i`` occupies ``[i * row_bytes, (i + 1) * row_bytes)`` as data then scales.

``public_layout`` picks the arrangement and alignment each format uses in the public code. Rows a writer
never stored, and all padding, are zero bytes here; a reader must not depend on them.

A cache of several layers is one allocation of ``num_blocks`` blocks, each holding one page per layer in layer
order (block-major: a block's pages of every layer together, as engines allocate the pages of a block across
layers in one chunk): layer ``l``'s page of block ``b`` is the ``block_bytes`` bytes at ``(b L + l) block_bytes``,
and inside a page the format's public block layout holds that layer's data region and scale region. Every
layer's data and scale parts are its own: a writer or reader that takes layer 0's region for another layer's
scales (an engine's bug: every layer's scale view aliased layer 0's) reads or overwrites layer 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from reference.checks import require, require_positive_int
from reference.formats import (
    INDEX_FP4,
    INDEX_FP8,
    V4_MAIN_FP8,
    V41_MAIN_FP4,
    V41_MAIN_FP8,
    QuantizedRow,
    RowFormat,
)

Arrangement = Literal["sectioned", "interleaved"]


@dataclass(frozen=True)
class BlockLayout:
    """``rows`` rows of ``fmt`` in one block, arranged and padded as stated."""

    fmt: RowFormat
    rows: int
    arrangement: Arrangement
    alignment: int = 1

    def __post_init__(self) -> None:
        require_positive_int(self.rows, "rows")
        require_positive_int(self.alignment, "alignment")
        require(
            self.arrangement in ("sectioned", "interleaved"),
            "arrangement",
            f"must be 'sectioned' or 'interleaved', got {self.arrangement!r}",
        )

    @property
    def payload_bytes(self) -> int:
        return self.rows * self.fmt.row_bytes

    @property
    def block_bytes(self) -> int:
        """The block's size including the padding up to a multiple of ``alignment``."""
        return -(-self.payload_bytes // self.alignment) * self.alignment

    @property
    def padding_bytes(self) -> int:
        return self.block_bytes - self.payload_bytes

    def data_offset(self, row: int) -> int:
        """Byte offset of row ``row``'s data part within its block."""
        self._check_row(row)
        if self.arrangement == "sectioned":
            return row * self.fmt.data_bytes
        return row * self.fmt.row_bytes

    def scale_offset(self, row: int) -> int:
        """Byte offset of row ``row``'s scale part within its block."""
        self._check_row(row)
        if self.arrangement == "sectioned":
            return self.rows * self.fmt.data_bytes + row * self.fmt.scale_bytes
        return row * self.fmt.row_bytes + self.fmt.data_bytes

    def _check_row(self, row: int) -> None:
        require(
            isinstance(row, int) and 0 <= row < self.rows,
            "row",
            f"must be in [0, {self.rows}), got {row!r}",
        )


def public_layout(fmt: RowFormat, rows: int) -> BlockLayout:
    """The arrangement and padding the public kernels use for ``fmt`` (see docs/formats.md)."""
    if fmt == V4_MAIN_FP8:
        return BlockLayout(fmt, rows, "sectioned", 576)
    if fmt in (V41_MAIN_FP8, V41_MAIN_FP4):
        return BlockLayout(fmt, rows, "interleaved", 1)
    if fmt in (INDEX_FP8, INDEX_FP4):
        return BlockLayout(fmt, rows, "sectioned", 1)
    raise ValueError(f"fmt: no public layout is recorded for {fmt.name!r}")


def pack_block(layout: BlockLayout, rows: Sequence[QuantizedRow | None]) -> bytes:
    """The block's bytes; ``None`` (or a short list) leaves a row unwritten, i.e. zero."""
    require(len(rows) <= layout.rows, "rows", f"at most {layout.rows} rows fit one block, got {len(rows)}")
    block = bytearray(layout.block_bytes)
    for i, row in enumerate(rows):
        if row is None:
            continue
        require(
            len(row.data) == layout.fmt.data_bytes and len(row.scales) == layout.fmt.scale_bytes,
            f"rows[{i}]",
            f"must have {layout.fmt.data_bytes} data and {layout.fmt.scale_bytes} scale bytes",
        )
        d, s = layout.data_offset(i), layout.scale_offset(i)
        block[d : d + layout.fmt.data_bytes] = row.data
        block[s : s + layout.fmt.scale_bytes] = row.scales
    return bytes(block)


def unpack_block(layout: BlockLayout, block: bytes) -> tuple[QuantizedRow, ...]:
    """Every row's data and scale bytes, read back from a block of ``layout.block_bytes`` bytes."""
    require(
        len(block) == layout.block_bytes,
        "block",
        f"must be {layout.block_bytes} bytes, got {len(block)}",
    )
    out = []
    for i in range(layout.rows):
        d, s = layout.data_offset(i), layout.scale_offset(i)
        out.append(QuantizedRow(block[d : d + layout.fmt.data_bytes], block[s : s + layout.fmt.scale_bytes]))
    return tuple(out)


def page_offset(layout: BlockLayout, block: int, layers: int = 1, layer: int = 0) -> int:
    """Absolute byte offset of layer ``layer``'s page of block ``block`` in a cache of ``layers`` layers (see the
    module docstring): ``(block * layers + layer) * block_bytes``."""
    require(isinstance(block, int) and block >= 0, "block", f"must be an int >= 0, got {block!r}")
    require_positive_int(layers, "layers")
    require(isinstance(layer, int) and 0 <= layer < layers, "layer", f"must be in [0, {layers}), got {layer!r}")
    return (block * layers + layer) * layout.block_bytes


def slot_byte_offsets(layout: BlockLayout, slot: int, layers: int = 1, layer: int = 0) -> tuple[int, int]:
    """Absolute byte offsets ``(data, scales)`` of physical slot ``slot`` of layer ``layer`` in a cache of
    ``layers`` layers of such blocks.

    ``slot = block * rows + row``; the cache is ``blocks * layers * block_bytes`` contiguous bytes. Offsets are
    Python ints, so large block ids show the real address (no 32-bit wrap).
    """
    require(isinstance(slot, int) and slot >= 0, "slot", f"must be an int >= 0, got {slot!r}")
    block, row = divmod(slot, layout.rows)
    base = page_offset(layout, block, layers, layer)
    return base + layout.data_offset(row), base + layout.scale_offset(row)
