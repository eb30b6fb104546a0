"""The V4 / V4.1 preset shapes (``reference.models``) as explicit examples of the shape ladders' properties
(``properties/<area>/props_shapes.py``): every run replays them before any generated example.

Each example is a ladder example (sizes, a ``seed``, every argument contiguous) whose sizes a preset fixes, plus
the settings it fixes (``block_size``, ``rows_per_block``, ``layer_kind``, ...), which the check takes instead of
drawing them. Where a preset size makes an example too costly for a CPU run (a 262144-wide row, 2048 candidate
slots), the example keeps the preset's setting and a smaller batch; the production tier draws the rest on a GPU.
"""

from __future__ import annotations

from typing import Any

from properties.contract import operation
from reference.models import MODELS, ModelPreset

Example = dict[str, Any]


def _example(op: str, **sizes: Any) -> Example:
    return {**sizes, "seed": 0, "layouts": dict.fromkeys(operation(op).views, "contiguous")}


def _distinct(examples: list[Example]) -> tuple[Example, ...]:
    seen: dict[str, Example] = {}
    for e in examples:
        seen.setdefault(repr(e), e)
    return tuple(seen.values())


def _for_each(build: Any) -> tuple[Example, ...]:
    return _distinct([e for m in MODELS.values() for e in build(m)])


def _topk(m: ModelPreset) -> list[Example]:
    return [_example("topk", rows=2, width=m.index_topk + m.window_size + 1, k=m.index_topk)]


def _candidates(m: ModelPreset) -> list[Example]:
    if m.candidate_block_size is None or m.candidate_topk_blocks is None:
        return []
    slots, size = m.candidate_topk_blocks, m.candidate_block_size
    return [_example("candidate_select", rows=1, width=(slots + 1) * size, k=slots, block_size=size)]


def _restore(m: ModelPreset) -> list[Example]:
    if m.candidate_block_size is None or m.candidate_topk_blocks is None:
        return []
    return [
        _example(
            "candidate_restore",
            rows=1,
            k=m.index_topk,
            slots=m.candidate_topk_blocks,
            block_size=m.candidate_block_size,
        )
    ]


def _remap(m: ModelPreset) -> list[Example]:
    if m.candidate_block_size is None or m.candidate_topk_blocks is None:
        return []
    slots, size = m.candidate_topk_blocks, m.candidate_block_size
    return [_example("candidate_remap", rows=1, k=m.index_topk, slots=slots, block_size=size)]


def _ratios(m: ModelPreset) -> list[int]:
    return sorted({r for r in m.compress_ratios if r > 0})


def _slots(m: ModelPreset) -> list[Example]:
    return [
        _example("slot_translation", requests=2, lanes=m.index_topk + m.window_size, columns=65, ratio=r)
        for r in _ratios(m)
    ]


def _gathered(m: ModelPreset) -> list[Example]:
    return [_example("gathered_rows", requests=17, lanes=m.index_topk)]


def _window(m: ModelPreset) -> list[Example]:
    return [_example("window_indices", window=m.window_size, seqlen=m.window_size + 1)]


def _compressed(m: ModelPreset) -> list[Example]:
    return [_example("compressed_indices", seqlen=2 * r + 1, ratio=r) for r in _ratios(m) if r >= 64]


def _release(m: ModelPreset) -> list[Example]:
    return [_example("window_release", requests=4, window=m.window_size)]


def _index_scores(m: ModelPreset, op: str = "index_scores") -> list[Example]:
    return [_example(op, queries=2, heads=m.index_n_heads, dim=m.index_head_dim, keys=65)]


def _paged_index_scores(m: ModelPreset) -> list[Example]:
    """Decode queries through tables of 64-row pages."""
    return [
        _example(
            "paged_index_scores", requests=2, heads=m.index_n_heads, dim=m.index_head_dim, columns=3, rows_per_block=64
        )
    ]


def _paged_index_scores_fp8(m: ModelPreset) -> list[Example]:
    """The FP8 index cache through tables of 64-row pages."""
    return [
        _example(
            "paged_index_scores_fp8", requests=2, heads=m.index_n_heads, dim=m.index_head_dim, columns=3,
            rows_per_block=64,
        )
    ]  # fmt: skip


def _attention(m: ModelPreset) -> list[Example]:
    lanes = m.index_topk + m.window_size
    return [_example("sparse_attention", rows=1, heads=2, dim=m.head_dim, lanes=lanes)]


def _fp8_kv_attention(m: ModelPreset) -> list[Example]:
    """The model's top-k and window lanes over a cache of two 64-row pages (lanes repeat its slots)."""
    lanes = m.index_topk + m.window_size
    return [_example("sparse_attention_fp8_kv", rows=1, heads=2, lanes=lanes, blocks=2, rows_per_block=64)]


def _bf16_attention(m: ModelPreset) -> list[Example]:
    """The model's top-k and window lanes, bf16 with bf16 probabilities (D = 512)."""
    return [_example("sparse_attention_bf16", rows=1, heads=2, lanes=m.index_topk + m.window_size)]


def _formats(op: str, m: ModelPreset) -> list[Example]:
    return [_example(op, rows=17, blocks=2, rows_per_block=64)]


def _compression(op: str, m: ModelPreset) -> list[Example]:
    """Each compressor ratio with the model's head dim (overlap at ratio 4, as V4 has it), and the indexer's dim."""
    out = [_example(op, channels=m.head_dim, requests=2, ratio=r, overlap=r == 4) for r in _ratios(m)]
    return [*out, _example(op, channels=m.index_head_dim, requests=2, ratio=4, overlap=True)]


EXAMPLES: dict[str, tuple[Example, ...]] = {
    "topk_shape_ladder": _for_each(_topk),
    "candidate_select_shape_ladder": _for_each(_candidates),
    "candidate_restore_shape_ladder": _for_each(_restore),
    "candidate_remap_shape_ladder": _for_each(_remap),
    "slot_shape_ladder": _for_each(_slots),
    "gathered_shape_ladder": _for_each(_gathered),
    "window_shape_ladder": _for_each(_window),
    "compressed_shape_ladder": _for_each(_compressed),
    "release_shape_ladder": _for_each(_release),
    "index_scores_shape_ladder": _for_each(_index_scores),
    "index_scores_fp8_shape_ladder": _for_each(lambda m: _index_scores(m, "index_scores_fp8")),
    "paged_index_scores_shape_ladder": _for_each(_paged_index_scores),
    "paged_index_scores_fp8_shape_ladder": _for_each(_paged_index_scores_fp8),
    "attention_shape_ladder": _for_each(_attention),
    "fp8_kv_shape_ladder": _for_each(_fp8_kv_attention),
    "bf16_shape_ladder": _for_each(_bf16_attention),
    "quant_store_shape_ladder": _for_each(lambda m: _formats("quantize_store", m)),
    "gather_shape_ladder": _for_each(lambda m: _formats("gather_dequantize", m)),
    "norm_rope_shape_ladder": _for_each(lambda m: _formats("norm_rope_store", m)),
    "compression_prefill_shape_ladder": _for_each(lambda m: _compression("compression_prefill", m)),
    "compression_decode_shape_ladder": _for_each(lambda m: _compression("compression_decode", m)),
}
"""The preset examples of each ladder property, by property name."""


def preset(case: Example, key: str, drawn: Any) -> Any:
    """The setting ``key`` a preset example fixes, else ``drawn`` (drawn either way, so a generated example
    expands the same whatever presets exist)."""
    return case.get(key, drawn)
