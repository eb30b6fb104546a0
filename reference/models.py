"""Model presets from the public configurations (values and sources: docs/models.md).

A preset lists every layer's compression ratio (backbone layers, then MTP layers), the dimensions the
cache depends on, which layers own which caches, and the row formats the cache stores. Where a public
configuration does not say something, the preset says so in ``not_published`` instead of guessing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from reference.checks import fail, require
from reference.formats import ROW_FORMATS, RowFormat


@dataclass(frozen=True)
class ModelPreset:
    name: str
    version: Literal["v4", "v4.1"]
    config_source: str
    num_layers: int
    mtp_layers: int
    compress_ratios: tuple[int, ...]
    window_size: int
    head_dim: int
    rope_head_dim: int
    index_head_dim: int
    index_n_heads: int
    index_topk: int
    max_context: int
    # V4.1 only: layers that own compressed KV / run an indexer / select candidate blocks.
    kv_source_layers: tuple[int, ...] | None
    index_source_layers: tuple[int, ...] | None
    candidate_source_layer: int | None
    candidate_block_size: int | None
    candidate_topk_blocks: int | None
    window_format: str
    compressed_format: str
    index_format: str
    state_backtrack_tokens: int | None
    not_published: tuple[str, ...]

    def __post_init__(self) -> None:
        require(
            len(self.compress_ratios) == self.num_layers + self.mtp_layers,
            "compress_ratios",
            f"must have num_layers + mtp_layers = {self.num_layers + self.mtp_layers} entries, "
            f"got {len(self.compress_ratios)}",
        )
        if self.version == "v4.1":
            require(
                self.kv_source_layers is not None and self.index_source_layers is not None,
                "kv_source_layers",
                "a V4.1 preset must list its KV and index source layers",
            )
        for name in (self.window_format, self.compressed_format, self.index_format):
            require(name in ROW_FORMATS, "format", f"unknown row format {name!r}")

    @property
    def total_layers(self) -> int:
        return self.num_layers + self.mtp_layers

    def is_mtp(self, layer: int) -> bool:
        return layer >= self.num_layers

    def owns_compressed_kv(self, layer: int) -> bool:
        """Whether ``layer`` writes its own compressed main-KV rows."""
        if self.compress_ratios[layer] == 0 or self.is_mtp(layer):
            return False
        if self.version == "v4":
            return True
        return layer in (self.kv_source_layers or ())

    def owns_index_keys(self, layer: int) -> bool:
        """Whether ``layer`` writes its own index-key rows (V4: the ratio-4 layers; V4.1: KV sources)."""
        if self.compress_ratios[layer] == 0 or self.is_mtp(layer):
            return False
        if self.version == "v4":
            return self.compress_ratios[layer] == 4
        return layer in (self.kv_source_layers or ()) and layer in (self.index_source_layers or ())

    @property
    def formats(self) -> tuple[RowFormat, RowFormat, RowFormat]:
        """(window, compressed, index) row formats."""
        return (
            ROW_FORMATS[self.window_format],
            ROW_FORMATS[self.compressed_format],
            ROW_FORMATS[self.index_format],
        )


def _alternating(first: int, last: int) -> list[int]:
    """Ratios of layers ``first..last``: 4 on even layers, 128 on odd ones."""
    return [4 if layer % 2 == 0 else 128 for layer in range(first, last + 1)]


V4_PRO = ModelPreset(
    name="v4-pro",
    version="v4",
    config_source="huggingface.co/deepseek-ai/DeepSeek-V4-Pro config.json",
    num_layers=61,
    mtp_layers=1,
    compress_ratios=tuple([128, 128, *_alternating(2, 60), 0]),
    window_size=128,
    head_dim=512,
    rope_head_dim=64,
    index_head_dim=128,
    index_n_heads=64,
    index_topk=1024,
    max_context=1048576,
    kv_source_layers=None,
    index_source_layers=None,
    candidate_source_layer=None,
    candidate_block_size=None,
    candidate_topk_blocks=None,
    window_format="v4_584",
    compressed_format="v4_584",
    index_format="index_fp8_132",
    state_backtrack_tokens=None,
    not_published=(
        "index cache element type: the config does not fix it (the reference code quantizes index keys "
        "to FP4; vLLM stores FP8 132 B rows by default, MXFP4 68 B optionally)",
        "engine ring allowances for speculative decoding (the state here is the reference code's buffers)",
    ),
)

V4_FLASH = replace(
    V4_PRO,
    name="v4-flash",
    config_source="huggingface.co/deepseek-ai/DeepSeek-V4-Flash config.json",
    num_layers=43,
    compress_ratios=tuple([0, 0, *_alternating(2, 42), 0]),
    index_topk=512,
)
"""V4-Pro's layout and formats with its own depth, ratios and index top-k."""

V41_FLASH = replace(
    V4_FLASH,
    name="v4.1-flash",
    version="v4.1",
    config_source="huggingface.co/deepseek-ai/DeepSeek-V4.1-Flash config.json (text_config)",
    num_layers=40,
    mtp_layers=3,
    compress_ratios=tuple([0, 0, *([2] * 18), *([1] * 20), 0, 0, 0]),
    index_n_heads=32,
    kv_source_layers=(2, 8, 14, 20),
    index_source_layers=(2, 8, 14, 20, 24, 28, 32, 36),
    candidate_source_layer=20,
    candidate_block_size=8,
    candidate_topk_blocks=2048,
    window_format="v41_fp8_528",
    compressed_format="v41_fp4_288",
    index_format="index_fp4_68",
    state_backtrack_tokens=6,
    not_published=(
        "compression-ring rollback allowance: an engine setting; 6 is the default of the engine quoted "
        "in the appendix (nextn = 5), not a model value",
        "whether an engine keeps compressed main KV in FP4 (288 B) or FP8 (528 B): both are supported by "
        "FlashMLA; the reference inference code quantizes compressed KV to FP4",
    ),
)
"""V4-Flash's window, head dimensions, index top-k and context length; its own depth, ratios, index heads, layer
sharing and formats."""

MODELS: dict[str, ModelPreset] = {m.name: m for m in (V4_PRO, V4_FLASH, V41_FLASH)}


def model_preset(name: str) -> ModelPreset:
    """The preset called ``name``; ``ValueError`` listing the known names otherwise."""
    if name not in MODELS:
        raise fail("model", f"unknown model {name!r}; known: {', '.join(sorted(MODELS))}")
    return MODELS[name]
