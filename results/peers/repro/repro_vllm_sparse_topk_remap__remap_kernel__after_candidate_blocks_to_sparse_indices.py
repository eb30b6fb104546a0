"""Reproducer: properties 'candidate_remap_equals_reference', 'candidate_remap_every_column', 'candidate_remap_shape_ladder' fail for csa.peers.vllm_ops:sparse_topk_remap (op candidate_remap, convention None, device cpu); --help for the options."""

import os
import sys

# the harness and the kernel's import root: relative to this file where they hold it, so a copy of the tree runs it
here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [p for p in (os.path.normpath(os.path.join(here, q)) for q in ['../../..']) if p not in sys.path]

from properties.reproducer import Fraction, inf, main, nan  # noqa: E402, F401  (examples may hold these)

CASES = [
    ('candidate_remap_equals_reference', {'columns': [[]], 'candidate_blocks': [[]], 'lengths': [0], 'block_size': 8}),
    ('candidate_remap_equals_reference', {'columns': [[]], 'candidate_blocks': [[]], 'lengths': [0], 'block_size': 2}),
    ('candidate_remap_every_column', {'columns': [[]], 'candidate_blocks': [[]], 'lengths': [0], 'block_size': 2}),
    ('candidate_remap_shape_ladder', {'rows': 16, 'k': 0, 'slots': 0, 'seed': 1, 'layouts': {'columns': 'contiguous', 'candidate_blocks': 'contiguous', 'lengths': 'contiguous'}}),
    ('candidate_remap_shape_ladder', {'rows': 16, 'k': 0, 'slots': 0, 'seed': 0, 'layouts': {'columns': 'contiguous', 'candidate_blocks': 'contiguous', 'lengths': 'contiguous'}}),
    ('candidate_remap_shape_ladder', {'rows': 16, 'k': 0, 'slots': 0, 'seed': 1, 'layouts': {'columns': 'contiguous', 'candidate_blocks': 'contiguous', 'lengths': 'transposed'}}),
]

main(CASES, op='candidate_remap', impl_spec='csa.peers.vllm_ops:sparse_topk_remap', convention=None, device='cpu', timeout=60.0)
