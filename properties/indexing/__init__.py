"""Indexing: index scores, valid-prefix top-k, candidate blocks, slot translation, gathered rows and window
indices (docs/indexing.md)."""
