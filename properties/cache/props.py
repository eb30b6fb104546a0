"""The cache area's properties: quantize-and-store, gather-and-dequantize, and sparse attention with a sink (over
float rows, read in place from an FP8 paged cache, and with bf16 probabilities)."""

from __future__ import annotations

from properties.cache import (
    props_attention,
    props_bf16,
    props_fp8_kv,
    props_gather,
    props_norm_rope,
    props_shapes,
    props_store,
)

PROPERTIES = [
    *props_store.PROPERTIES,
    *props_gather.PROPERTIES,
    *props_attention.PROPERTIES,
    *props_fp8_kv.PROPERTIES,
    *props_bf16.PROPERTIES,
    *props_norm_rope.PROPERTIES,
    *props_shapes.PROPERTIES,
]
