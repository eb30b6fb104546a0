"""Reproducer: property 'quant_store_layers_do_not_alias' fails for csa.peers.sglang_ops:store_index_fp4_rne (op quantize_store, convention index_fp4_68+bf16_rows+f32_scale, device cpu).

Run with only csa-harness installed: python repro_quantize_store_quant_store_layers_do_not_alias_bc9b6601.py [--in-process] [--no-guards]
"""

import sys

sys.path[:0] = [p for p in ['/work/wt17c'] if p not in sys.path]  # the harness and the kernel's import root

from fractions import Fraction  # noqa: E402, F401  (examples may hold exact rationals)

from properties.reproducer import replay  # noqa: E402

nan = float("nan")
inf = float("inf")

CASES = [
    ('quant_store_layers_do_not_alias', {'rows_per_block': 3, 'num_blocks': 3, 'patterns': [{'seed': 2759, 'exp': 0, 'bits': 0, 'spread': 0, 'anchored': False, 'edits': [[204, 'bf16_max', -17, False], [25, 'f32_max', -18, True], [336, 'bf16_max', -22, True]]}], 'rows': [[0, 5, ''], [0, 1, '']], 'poison': 107, 'layers': 2, 'layer': 0}),
]

sys.exit(
    replay(
        op='quantize_store',
        impl_spec='csa.peers.sglang_ops:store_index_fp4_rne',
        convention='index_fp4_68+bf16_rows+f32_scale',
        device='cpu',
        timeout=60.0,
        cases=CASES,
        argv=sys.argv[1:],
    )
)
