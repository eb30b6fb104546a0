"""Reproducer: properties 'gather_layers_do_not_alias', 'gather_matches_stored_bytes', 'gather_shape_ladder' fail for csa.peers.sglang_ops:dequantize_v41_fp8 (op gather_dequantize, convention v41_fp8_528, device cpu); --help for the options."""

import os
import sys

# the harness and the kernel's import root: relative to this file where they hold it, so a copy of the tree runs it
here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [p for p in (os.path.normpath(os.path.join(here, q)) for q in ['../../..']) if p not in sys.path]

from properties.reproducer import Fraction, inf, main, nan  # noqa: E402, F401  (examples may hold these)

CASES = [
    ('gather_layers_do_not_alias', {'rows_per_block': 1, 'num_blocks': 1, 'seed': 0, 'scale_span': 0, 'reads': [0], 'layers': 2, 'layer': 0}),
    ('gather_matches_stored_bytes', {'rows_per_block': 1, 'num_blocks': 1, 'seed': 0, 'scale_span': 0, 'reads': [0], 'layers': 1, 'layer': 0}),
    ('gather_shape_ladder', {'rows': 17, 'blocks': 2, 'rows_per_block': 64, 'seed': 0, 'layouts': {'slots': 'contiguous'}}),
]

main(CASES, op='gather_dequantize', impl_spec='csa.peers.sglang_ops:dequantize_v41_fp8', convention='v41_fp8_528', device='cpu', timeout=60.0)
