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
