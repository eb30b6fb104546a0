"""Frozen examples of the cache properties: failures found while building the suite, replayed first on every
implementation."""

ZERO_SPEC = {"seed": 0, "exp": 0, "bits": 0, "spread": 0, "anchored": False, "edits": []}
NO_ROWS = {"rows_per_block": 1, "num_blocks": 1, "patterns": [ZERO_SPEC], "rows": [], "poison": 0}
"""R = 0: the torch twin's reshape of zero rows failed."""
STORED_BF16_OVERFLOW = {
    "rows_per_block": 1,
    "num_blocks": 1,
    "patterns": [{**ZERO_SPEC, "edits": [[448, "bf16_overflow", 0, False]]}],
    "rows": [[0, 0, ""]],
    "poison": 0,
}
"""A stored V4 row whose RoPE value rounds to bf16 infinity: the call is refused (first seen in the writes check)."""
STORED_NAN = {**STORED_BF16_OVERFLOW, "patterns": [{**ZERO_SPEC, "edits": [[0, "nan", 0, False]]}]}
"""A stored row holding NaN: the call is refused in every format (a mutant that quantized it lived through 100
generated examples on one machine)."""
F32_SCALE_BOUNDARY = {**STORED_BF16_OVERFLOW, "patterns": [{**ZERO_SPEC, "edits": [[0, "fp8_edge_up", 4, False]]}]}
"""A group whose amax is the float32 just above 7168 = 448 * 2**4: the exact FP8 scale is 2**5, the float32 one
(``amax / 448`` rounds to ``16 * (1 + 2**-23)``, whose float32 log2 rounds to 4.0) is 2**4 (``f32_scale``)."""
CANCELLING_OUT = {
    "dtype": "float32",
    "dv": 2,
    "scale": 0.5,
    "q": [[[0.0, 0.0, 0.0, 0.0]], [[2.0, -1.0, -2.0, -1.25]]],
    "kv": [[0.0] * 4, [0.0] * 4, [1.25, -0.25, 2.0, -0.25], [-0.25, 0.25, 0.0, -1.0], [0.0] * 4],
    "lanes": [[["valid", 0]] * 6, [["valid", 0]] * 3 + [["valid", 2], ["valid", 3], ["valid", 2]]],
    "sinks": [0.0],
    "leading": 0,
    "empty": [],
    "sink_offsets": None,
    "perm_seed": None,
}
"""Output terms cancel to 0.00124: a float32 tiled evaluation is 15 ulps off where both float32 baselines are exact
by luck, so the rule measures such a lane's ulps at the terms' magnitude."""
LSE_NEAR_ONE = {
    "dtype": "float32",
    "dv": 1,
    "scale": 1.0,
    "q": [[[0.5, 1.25, 1.75]]],
    "kv": [[0.0, -0.25, -1.0], [0.0, 0.0, 0.0], [1.0, 0.25, -0.5]],
    "lanes": [[["valid", 2], ["valid", 0], ["minus_one", 0], ["valid", 0], ["minus_one", 0]]],
    "sinks": [0.0],
    "leading": 0,
    "empty": [],
    "sink_offsets": None,
    "perm_seed": 1649976,
}
"""lse = -0.0625 + ln 1.27: a sum a few ulps off, which ln turns into an absolute error of ~1e-7 on a result of
0.18, so the rule measures lse's ulps at no less than 1."""
BF16_SUBNORMAL_PROBABILITY = {
    "n": 2,
    "kv_seed": 3,
    "scale": 8.0,
    "q": [[[[0, 3.25]], [[0, 3.25]]]],
    "lanes": [[["valid", 0], ["valid", 1]] + [["minus_one", 0]] * 6],
    "sinks": [0.0, 0.0],
    "empty": [],
}
"""sparse_attention_bf16: scores 52 and -39 (rows 0 and 1 of seed 3 hold 2 and -1.5 at dim 0), so the second
probability, e^-91, is a bf16 subnormal: the torch bf16 matmul flushed its products to zero (out's absolute floor,
``props_bf16.FLOAT32_SMALLEST_NORMAL``)."""
