"""Reproducer: property 'quant_store_grid_roundtrip' fails for csa.peers.sglang_ops:store_index_fp4 (op quantize_store, convention index_fp4_68+bf16_rows+f32_scale, device cpu).

Run with only csa-harness installed: python repro_quantize_store_quant_store_grid_roundtrip_130f7312.py [--in-process] [--no-guards]
"""

import sys

sys.path[:0] = [p for p in ['/work/wt17c'] if p not in sys.path]  # the harness and the kernel's import root

from fractions import Fraction  # noqa: E402, F401  (examples may hold exact rationals)

from properties.reproducer import replay  # noqa: E402

nan = float("nan")
inf = float("inf")

CASES = [
    ('quant_store_grid_roundtrip', {'rows_per_block': 1, 'num_blocks': 1, 'rows': [[{'seed': 0, 'exp': -1, 'spread': 26}, 0]], 'poison': 0}),
]

sys.exit(
    replay(
        op='quantize_store',
        impl_spec='csa.peers.sglang_ops:store_index_fp4',
        convention='index_fp4_68+bf16_rows+f32_scale',
        device='cpu',
        timeout=60.0,
        cases=CASES,
        argv=sys.argv[1:],
    )
)
