"""Byte accounting of the KV cache, index cache and compression state (derivations: docs/accounting.md).

Units are bytes, exact integers. Per layer and sequence:

* window ring: ``window_size`` rows of the window format (every layer, MTP layers included);
* compressed rows: ``context // ratio`` rows of the compressed format, for a layer that owns them;
* index rows: as many rows of the index format, for a layer that owns index keys;
* state: the compression state of an owning layer. V4 (the reference code's buffers): score and latent
  in FP32, ``coff * ratio`` entries of ``coff * d`` channels, ``coff = 2`` for the overlapping ratio 4,
  for the main compressor (``d = head_dim``) and, on ratio-4 layers, the indexer's (``d = index_head_dim``).
  V4.1 (the engine ring of the appendix): ``ratio + max(0, backtrack - 1)`` entries of score and latent,
  ``2 * head_dim`` FP32 values each, for a KV source with ratio > 1; ratio 1 keeps no state.
"""

from __future__ import annotations

from dataclasses import dataclass

from reference.cache_blocks import public_layout
from reference.checks import require, require_nonnegative_int, require_positive_int
from reference.formats import RowFormat, row_format
from reference.models import ModelPreset

FP32_BYTES = 4
BF16_BYTES = 2


def compressed_rows(context: int, ratio: int) -> int:
    """Completed compressed rows for ``context`` positions at ``ratio``: ``context // ratio``."""
    require_nonnegative_int(context, "context")
    require_positive_int(ratio, "ratio")
    return context // ratio


def rows_per_block(block_tokens: int, ratio: int) -> int:
    """Compressed rows in one ``block_tokens``-position allocator block: ``block_tokens / ratio``."""
    require_positive_int(block_tokens, "block_tokens")
    require_positive_int(ratio, "ratio")
    require(
        block_tokens % ratio == 0,
        "block_tokens",
        f"must be a multiple of the ratio {ratio}, got {block_tokens}",
    )
    return block_tokens // ratio


def block_payload_bytes(fmt: RowFormat, block_tokens: int, ratio: int) -> int:
    """Row bytes of one block's compressed rows, without layout padding."""
    return rows_per_block(block_tokens, ratio) * fmt.row_bytes


def page_bytes(fmt: RowFormat, block_tokens: int, ratio: int) -> int:
    """One block's bytes in the format's public layout, padding included."""
    return public_layout(fmt, rows_per_block(block_tokens, ratio)).block_bytes


def v4_state_bytes(ratio: int, latent_dim: int) -> int:
    """FP32 score and latent buffers of one V4 compressor (overlap doubles entries and channels)."""
    require_positive_int(ratio, "ratio")
    require_positive_int(latent_dim, "latent_dim")
    coff = 2 if ratio == 4 else 1
    return 2 * (coff * ratio) * (coff * latent_dim) * FP32_BYTES


def v41_state_ring_entries(ratio: int, backtrack_tokens: int) -> int:
    """Entries of a V4.1 compression ring: the group plus the rollback history."""
    require_positive_int(ratio, "ratio")
    require_nonnegative_int(backtrack_tokens, "backtrack_tokens")
    return 0 if ratio == 1 else ratio + max(0, backtrack_tokens - 1)


def v41_state_bytes(ratio: int, latent_dim: int, backtrack_tokens: int) -> int:
    """FP32 score and latent of every ring entry of one V4.1 KV source."""
    require_positive_int(latent_dim, "latent_dim")
    return v41_state_ring_entries(ratio, backtrack_tokens) * 2 * latent_dim * FP32_BYTES


def reference_cache_slots(context: int, window: int, ratio: int) -> int:
    """Slots of the V4 reference code's per-layer ``kv_cache``: ``window + context // ratio`` (ratio > 0)."""
    require_nonnegative_int(window, "window")
    require_nonnegative_int(ratio, "ratio")
    return window + (compressed_rows(context, ratio) if ratio else 0)


def dense_bf16_bytes(context: int, layers: int, head_dim: int) -> int:
    """An uncompressed BF16 cache of one ``head_dim`` vector per position and layer."""
    require_nonnegative_int(context, "context")
    require_positive_int(layers, "layers")
    require_positive_int(head_dim, "head_dim")
    return layers * context * head_dim * BF16_BYTES


@dataclass(frozen=True)
class LayerBytes:
    """One layer's bytes for one sequence, by component."""

    layer: int
    ratio: int
    kind: str
    window: int
    compressed: int
    index: int
    state: int

    @property
    def total(self) -> int:
        return self.window + self.compressed + self.index + self.state


@dataclass(frozen=True)
class Formats:
    window: RowFormat
    compressed: RowFormat
    index: RowFormat


def preset_formats(
    model: ModelPreset,
    *,
    window: str | None = None,
    compressed: str | None = None,
    index: str | None = None,
) -> Formats:
    """The preset's row formats, each optionally replaced by name."""
    w, c, i = model.formats
    return Formats(
        row_format(window) if window else w,
        row_format(compressed) if compressed else c,
        row_format(index) if index else i,
    )


def layer_kind(model: ModelPreset, layer: int) -> str:
    """A short name for what ``layer`` keeps (used to group the table)."""
    ratio = model.compress_ratios[layer]
    if model.is_mtp(layer):
        return "MTP layer, window only" if ratio == 0 else f"MTP layer, ratio {ratio}"
    if ratio == 0:
        return "ratio 0, window only"
    if model.version == "v4":
        return "C4 (CSA): KV + index keys" if ratio == 4 else f"C{ratio} (HCA): KV"
    if model.owns_compressed_kv(layer):
        what = "KV + index keys" if model.owns_index_keys(layer) else "KV"
        return f"C{ratio} source: {what}"
    return f"C{ratio} consumer: reads its source's rows"


def layer_bytes(model: ModelPreset, layer: int, context: int, formats: Formats) -> LayerBytes:
    """One layer's bytes for one sequence of ``context`` positions."""
    require(
        isinstance(layer, int) and 0 <= layer < model.total_layers,
        "layer",
        f"must be in [0, {model.total_layers}), got {layer!r}",
    )
    require_nonnegative_int(context, "context")
    ratio = model.compress_ratios[layer]
    window = model.window_size * formats.window.row_bytes
    compressed = index = state = 0
    if model.owns_compressed_kv(layer):
        compressed = compressed_rows(context, ratio) * formats.compressed.row_bytes
        if model.version == "v4":
            state = v4_state_bytes(ratio, model.head_dim)
        else:
            state = v41_state_bytes(ratio, model.head_dim, model.state_backtrack_tokens or 0)
    if model.owns_index_keys(layer):
        index = compressed_rows(context, ratio) * formats.index.row_bytes
        if model.version == "v4":
            state += v4_state_bytes(ratio, model.index_head_dim)
    return LayerBytes(layer, ratio, layer_kind(model, layer), window, compressed, index, state)


@dataclass(frozen=True)
class KindBytes:
    """All layers of one kind: their ids and the bytes of one such layer (they are identical)."""

    kind: str
    layers: tuple[int, ...]
    one_layer: LayerBytes

    @property
    def count(self) -> int:
        return len(self.layers)


@dataclass(frozen=True)
class ModelBytes:
    """Bytes of the whole model for ``batch`` sequences of ``context`` positions."""

    model: str
    context: int
    batch: int
    kinds: tuple[KindBytes, ...]

    def per_sequence(self, component: str) -> int:
        """Sum over layers of ``component`` (window, compressed, index, state or total)."""
        return sum(getattr(k.one_layer, component) * k.count for k in self.kinds)

    def total(self, component: str = "total") -> int:
        return self.batch * self.per_sequence(component)


def model_bytes(
    model: ModelPreset,
    context: int,
    batch: int = 1,
    *,
    include_mtp: bool = True,
    formats: Formats | None = None,
) -> ModelBytes:
    """Per-kind and total bytes; layers of one kind are grouped in first-layer order."""
    require_nonnegative_int(context, "context")
    require_positive_int(batch, "batch")
    fmts = formats or preset_formats(model)
    grouped: dict[str, list[LayerBytes]] = {}
    for layer in range(model.total_layers):
        if model.is_mtp(layer) and not include_mtp:
            continue
        lb = layer_bytes(model, layer, context, fmts)
        grouped.setdefault(lb.kind, []).append(lb)
    kinds = []
    for kind, items in grouped.items():
        first = items[0]
        same = all(
            (x.window, x.compressed, x.index, x.state) == (first.window, first.compressed, first.index, first.state)
            for x in items
        )
        require(same, "model", f"layers of kind {kind!r} differ in bytes; the grouping is wrong")
        kinds.append(KindBytes(kind, tuple(x.layer for x in items), first))
    return ModelBytes(model.name, context, batch, tuple(kinds))


def paged_bytes(model: ModelPreset, context: int, page_tokens: int, formats: Formats | None = None) -> int:
    """Compressed and index bytes of one sequence when allocated in ``page_tokens``-position pages.

    Every owning layer takes ``ceil(context / page_tokens)`` pages, each in the format's public layout
    (padding included). Window rings and state are not paged and are not included.
    """
    require_nonnegative_int(context, "context")
    require_positive_int(page_tokens, "page_tokens")
    fmts = formats or preset_formats(model)
    pages = -(-context // page_tokens)
    total = 0
    for layer in range(model.total_layers):
        ratio = model.compress_ratios[layer]
        if model.owns_compressed_kv(layer):
            total += pages * page_bytes(fmts.compressed, page_tokens, ratio)
        if model.owns_index_keys(layer):
            total += pages * page_bytes(fmts.index, page_tokens, ratio)
    return total
