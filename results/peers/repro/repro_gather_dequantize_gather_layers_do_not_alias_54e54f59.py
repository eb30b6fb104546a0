"""Reproducer: property 'gather_layers_do_not_alias' fails for csa.peers.sglang_ops:dequantize_v41_fp8 (op gather_dequantize, convention v41_fp8_528, device cpu).

Run with only csa-harness installed: python repro_gather_dequantize_gather_layers_do_not_alias_54e54f59.py [--in-process] [--no-guards]
"""

import sys

sys.path[:0] = [p for p in ['/work/wt17c'] if p not in sys.path]  # the harness and the kernel's import root

from fractions import Fraction  # noqa: E402, F401  (examples may hold exact rationals)

from properties.reproducer import replay  # noqa: E402

nan = float("nan")
inf = float("inf")

CASES = [
    ('gather_layers_do_not_alias', {'rows_per_block': 1, 'num_blocks': 1, 'seed': 0, 'scale_span': 0, 'reads': [0], 'layers': 2, 'layer': 0}),
]

sys.exit(
    replay(
        op='gather_dequantize',
        impl_spec='csa.peers.sglang_ops:dequantize_v41_fp8',
        convention='v41_fp8_528',
        device='cpu',
        timeout=60.0,
        cases=CASES,
        argv=sys.argv[1:],
    )
)
