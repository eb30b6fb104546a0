"""Reproducer: properties 'topk_chosen_set_optimal', 'topk_equals_reference', 'topk_lane_layout' fail for csa.peers.sglang_ops:topk_transform (op topk, convention v4.1+ties_any+order_any, device cpu); --help for the options."""

import os
import sys

# the harness and the kernel's import root: relative to this file where they hold it, so a copy of the tree runs it
here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [p for p in (os.path.normpath(os.path.join(here, q)) for q in ['../../..']) if p not in sys.path]

from properties.reproducer import Fraction, inf, main, nan  # noqa: E402, F401  (examples may hold these)

CASES = [
    ('topk_chosen_set_optimal', {'scores': [[0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, -inf, -inf, -inf]], 'lengths': [5, 5, 5, 5], 'offsets': [0, 0, 0, 0], 'k': 3}),
    ('topk_chosen_set_optimal', {'scores': [[]], 'lengths': [0], 'offsets': [0], 'k': 1}),
    ('topk_equals_reference', {'scores': [[0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, -inf, -inf, -inf]], 'lengths': [5, 5, 5, 5], 'offsets': [0, 0, 0, 0], 'k': 3}),
    ('topk_equals_reference', {'scores': [[]], 'lengths': [0], 'offsets': [0], 'k': 1}),
    ('topk_lane_layout', {'scores': [[0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, -inf, -inf, -inf]], 'lengths': [5, 5, 5, 5], 'offsets': [0, 0, 0, 0], 'k': 3}),
    ('topk_lane_layout', {'scores': [[]], 'lengths': [0], 'offsets': [0], 'k': 1}),
]

main(CASES, op='topk', impl_spec='csa.peers.sglang_ops:topk_transform', convention='v4.1+ties_any+order_any', device='cpu', timeout=60.0)
