"""Reproducer: property 'gather_matches_stored_bytes' fails for csa.peers.sglang_ops:dequantize_v41_fp4 (op gather_dequantize, convention v41_fp4_288, device cpu).

Run with only csa-harness installed: python repro_gather_dequantize_gather_matches_stored_bytes_f4bff5ca.py [--in-process] [--no-guards]
"""

import sys

sys.path[:0] = [p for p in ['/work/wt17c'] if p not in sys.path]  # the harness and the kernel's import root

from fractions import Fraction  # noqa: E402, F401  (examples may hold exact rationals)

from properties.reproducer import replay  # noqa: E402

nan = float("nan")
inf = float("inf")

CASES = [
    ('gather_matches_stored_bytes', {'rows_per_block': 1, 'num_blocks': 1, 'seed': 0, 'scale_span': 0, 'reads': [0], 'layers': 1, 'layer': 0}),
]

sys.exit(
    replay(
        op='gather_dequantize',
        impl_spec='csa.peers.sglang_ops:dequantize_v41_fp4',
        convention='v41_fp4_288',
        device='cpu',
        timeout=60.0,
        cases=CASES,
        argv=sys.argv[1:],
    )
)
