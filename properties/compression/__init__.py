"""Compression: chunked prefill and decode / verify steps through the state ring (docs/compression.md)."""
