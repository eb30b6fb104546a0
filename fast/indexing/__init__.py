"""Indexing kernels: index logits, valid-prefix top-k, candidate blocks, slot translation and window indices.

Each Triton module (``logits``, ``topk``, ``candidates``, ``addressing``, ``window``) has torch-eager twins of
the same names in ``naive``; both run the host checks of ``validate`` before anything is launched. Design,
cost model and tolerances: docs/indexing-kernels.md.
"""
