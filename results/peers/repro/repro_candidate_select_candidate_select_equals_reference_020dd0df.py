"""Reproducer: property 'candidate_select_equals_reference' fails for csa.peers.sglang_ops:select_candidate_block_ids (op candidate_select, convention pinned+drop_nan+ties_any+order_any, device cpu).

Run with only csa-harness installed: python repro_candidate_select_candidate_select_equals_reference_020dd0df.py [--in-process] [--no-guards]
"""

import sys

sys.path[:0] = [p for p in ['/work/wt17c'] if p not in sys.path]  # the harness and the kernel's import root

from fractions import Fraction  # noqa: E402, F401  (examples may hold exact rationals)

from properties.reproducer import replay  # noqa: E402

nan = float("nan")
inf = float("inf")

CASES = [
    ('candidate_select_equals_reference', {'scores': [[1.401298464324817e-45, nan, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [1.401298464324817e-45, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]], 'lengths': [25, 25], 'block_size': 2, 'topk_blocks': 2}),
]

sys.exit(
    replay(
        op='candidate_select',
        impl_spec='csa.peers.sglang_ops:select_candidate_block_ids',
        convention='pinned+drop_nan+ties_any+order_any',
        device='cpu',
        timeout=60.0,
        cases=CASES,
        argv=sys.argv[1:],
    )
)
