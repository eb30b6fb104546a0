"""Reproducer: properties 'quant_store_grid_roundtrip', 'quant_store_layers_do_not_alias', 'quant_store_matches_reference', 'quant_store_skips_minus_one', 'quant_store_writes_only_its_rows' fail for csa.peers.sglang_ops:store_index_fp4_rne (op quantize_store, convention index_fp4_68+bf16_rows+f32_scale, device cpu); --help for the options."""

import os
import sys

# the harness and the kernel's import root: relative to this file where they hold it, so a copy of the tree runs it
here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [p for p in (os.path.normpath(os.path.join(here, q)) for q in ['../../..']) if p not in sys.path]

from properties.reproducer import Fraction, inf, main, nan  # noqa: E402, F401  (examples may hold these)

CASES = [
    ('quant_store_grid_roundtrip', {'rows_per_block': 1, 'num_blocks': 1, 'rows': [[{'seed': 0, 'exp': -1, 'spread': 26}, 0]], 'poison': 0}),
    ('quant_store_layers_do_not_alias', {'rows_per_block': 2, 'num_blocks': 3, 'patterns': [{'seed': 0, 'exp': 0, 'bits': 0, 'spread': 0, 'anchored': False, 'edits': []}], 'rows': [[0, 2, ''], [0, 3, '']], 'poison': 47, 'layers': 2, 'layer': 0}),
    ('quant_store_layers_do_not_alias', {'rows_per_block': 2, 'num_blocks': 3, 'patterns': [{'seed': 0, 'exp': 0, 'bits': 0, 'spread': 0, 'anchored': False, 'edits': []}], 'rows': [[0, 3, ''], [0, -1, ''], [0, 2, '']], 'poison': 47, 'layers': 2, 'layer': 0}),
    ('quant_store_matches_reference', {'rows_per_block': 1, 'num_blocks': 1, 'patterns': [{'seed': 0, 'exp': 0, 'bits': 0, 'spread': 0, 'anchored': False, 'edits': [[0, 'fp8_edge_up', 4, False]]}], 'rows': [[0, 0, '']], 'poison': 0}),
    ('quant_store_skips_minus_one', {'rows_per_block': 1, 'num_blocks': 1, 'patterns': [{'seed': 0, 'exp': 0, 'bits': 0, 'spread': 0, 'anchored': False, 'edits': []}], 'rows': [], 'poison': 0}),
    ('quant_store_writes_only_its_rows', {'rows_per_block': 1, 'num_blocks': 1, 'patterns': [{'seed': 0, 'exp': 0, 'bits': 0, 'spread': 0, 'anchored': False, 'edits': [[0, 'nan', 0, False]]}], 'rows': [[0, 0, '']], 'poison': 0}),
]

main(CASES, op='quantize_store', impl_spec='csa.peers.sglang_ops:store_index_fp4_rne', convention='index_fp4_68+bf16_rows+f32_scale', device='cpu', timeout=60.0)
