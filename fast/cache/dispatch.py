"""The Triton path of sparse_attention: which kernel serves a checked call.

    run(call: AttentionArgs, config: attention.Config | attention_ws.Tile | attention_pair.Pair | None) -> (out, lse)

With no ``config``, on an sm_90 GPU, for bf16 q at D = dv = 512 with bf16 probabilities: the paired-warp-group
Gluon kernel (``attention_pair``, persistent: one program an SM) on BF16 rows, the warp-specialized one
(``attention_ws``) on a V4 / V4.1 FP8 cache; the ``tl`` kernel (``attention``) everywhere else: other precisions,
shapes and formats, other GPUs, the interpreter. An ``attention.Config`` runs the ``tl`` kernel in that tile, an
``attention_ws.Tile`` the warp-specialized one (BF16 rows too), ``attention_pair.Pair()`` the paired one (FP8
caches too; ``Pair(persistent=False)``: one program an item). Why the paired kernel for BF16 rows, and persistent:
docs/targets.md, section 3.
"""

from __future__ import annotations

import dataclasses

import torch

from fast.cache import attention, attention_pair, attention_ws
from fast.cache.checks import AttentionArgs


def run(
    call: AttentionArgs, config: attention.Config | attention_ws.Tile | attention_pair.Pair | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Launch the kernel that serves ``call`` (module docstring); TypeError or ValueError naming ``config``."""
    if isinstance(config, attention_pair.Pair):
        if not attention_pair.available(call):
            raise ValueError("config: the paired-warp-group kernel needs an sm_90 GPU and a call it serves (bf16 q, "
                             "D = dv = 512, precision 'bf16', BF16 rows or a V4 / V4.1 FP8 cache)")  # fmt: skip
        return attention_pair.sparse_attention_pair(call, persistent=config.persistent)
    if isinstance(config, attention_ws.Tile):
        if not attention_ws.available(call):
            raise ValueError("config: a warp-specialized Tile needs an sm_90 GPU and a call it serves (bf16 q, "
                             "D = dv = 512, precision 'bf16', BF16 rows or a V4 / V4.1 FP8 cache)")  # fmt: skip
        return attention_ws.sparse_attention_ws(call, config)
    if config is not None and not isinstance(config, attention.Config):
        raise TypeError(f"config: must be a fast.cache.attention.Config, attention_ws.Tile or "
                        f"attention_pair.Pair, got {type(config).__name__}")  # fmt: skip
    if config is None and attention_pair.default_for(call):
        return attention_pair.sparse_attention_pair(call)
    if config is None and attention_ws.available(call):
        return attention_ws.sparse_attention_ws(call)
    return attention.sparse_attention(dataclasses.replace(call, config=config))
