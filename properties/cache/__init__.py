"""The cache: quantize-and-store and gather-and-dequantize in the row formats, and sparse attention with a sink
(docs/formats.md, docs/attention.md)."""
