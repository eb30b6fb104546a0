"""Reproducer: property 'gather_shape_ladder' fails for csa.peers.sglang_ops:dequantize_v4 (op gather_dequantize, convention v4_584, device cpu); --help for the options."""

import os
import sys

# the harness and the kernel's import root: relative to this file where they hold it, so a copy of the tree runs it
here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [p for p in (os.path.normpath(os.path.join(here, q)) for q in ['../../..']) if p not in sys.path]

from properties.reproducer import Fraction, inf, main, nan  # noqa: E402, F401  (examples may hold these)

CASES = [
    ('gather_shape_ladder', {'rows': 16, 'blocks': 1, 'seed': 0, 'layouts': {'slots': 'transposed'}}),
]

main(CASES, op='gather_dequantize', impl_spec='csa.peers.sglang_ops:dequantize_v4', convention='v4_584', device='cpu', timeout=60.0)
