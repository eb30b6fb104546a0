"""The same-precision baselines of the twice-the-error rule: compressed rows in torch float32, eagerly.

Row ``j`` of a sequence, channel ``c``: ``sum_t softmax_t(x_t) v_t`` over the window positions
``t = (j + 1) r - W .. (j + 1) r - 1`` (``t >= 0``), with ``x_t = score[t][h d + c] + ape[t % r][h d + c]``
and ``v_t = latent[t][h d + c]``, where ``h = 1`` for a position of the row's own group under overlap, else 0
(docs/compression.md). Scores, APE and the softmax are float32, as a plain torch kernel would have them.

"A same-precision torch implementation" is not one program: ``FORMULATIONS`` are the usual ways to write it
(``torch.softmax`` itself, whose kernel along a middle dimension rounds differently from the rest; divide by
the sum; multiply by its reciprocal; ``exp2`` of the scaled argument, as flash-style kernels do; both sums
accumulated one term after another, as a simple loop does). Their errors differ by a few units, and on a
lane where one of them is exact by luck the rule would demand the impossible, so the comparison takes, lane by
lane, the worst of them. ``scale`` is ``sum_t softmax_t |v_t|``: rounding in any float32 evaluation is
proportional to it, not to the row, whose terms may cancel.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from properties.compression.exact import LayerSpec, RawPosition, window

FORMULATIONS = ("torch", "divide", "reciprocal", "exp2", "sequential")
LOG2E = 1.4426950408889634


class Baseline(NamedTuple):
    """rows: f32[len(FORMULATIONS), R, d], one evaluation per formulation; scale: f64[R, d]."""

    rows: torch.Tensor
    scale: torch.Tensor


def baseline_rows(spec: LayerSpec, rows: Sequence[tuple[Sequence[RawPosition], int]]) -> Baseline:
    """Row ``j`` of ``sequence`` for each ``(sequence, j)``; every window position must be present."""
    r, d, overlap = int(spec["ratio"]), int(spec["dim"]), bool(spec["overlap"])
    w = window(spec)
    if not rows:
        return Baseline(torch.zeros(len(FORMULATIONS), 0, d), torch.zeros(0, d, dtype=torch.float64))
    ape = spec.get("ape")
    minus_inf = float("-inf")
    scores, apes, latents = [], [], []
    for sequence, j in rows:
        group = j * r
        xs, aps, vs = [], [], []
        for t in range((j + 1) * r - w, (j + 1) * r):
            if t < 0:
                xs.append([minus_inf] * d)
                aps.append([0.0] * d)
                vs.append([0.0] * d)
                continue
            lo = d if overlap and t >= group else 0
            score, latent = sequence[t]
            xs.append([float(s) for s in score[lo : lo + d]])
            aps.append([0.0] * d if ape is None else [float(a) for a in ape[t % r][lo : lo + d]])
            vs.append([float(v) for v in latent[lo : lo + d]])
        scores.append(xs)
        apes.append(aps)
        latents.append(vs)
    x = torch.tensor(scores, dtype=torch.float32) + torch.tensor(apes, dtype=torch.float32)
    v = torch.tensor(latents, dtype=torch.float32)
    evaluations = [(torch_softmax(x) * v).sum(dim=1)]
    evaluations += [(softmax(x, dim=1, how=how) * v).sum(dim=1) for how in FORMULATIONS[1:-1]]
    evaluations.append(sequential(x, v))
    scale = (softmax(x, dim=1).double() * v.abs().double()).sum(dim=1)
    return Baseline(torch.stack(evaluations), scale)


def softmax(x: torch.Tensor, dim: int, how: str = "divide") -> torch.Tensor:
    """Softmax along ``dim`` in the dtype of ``x``: "divide", "reciprocal" or "exp2", written out (also used
    by the small torch implementation, where no thread pool is wanted)."""
    shifted = x - x.amax(dim=dim, keepdim=True)
    e = torch.exp2(shifted * LOG2E) if how == "exp2" else torch.exp(shifted)
    total = e.sum(dim=dim, keepdim=True)
    return e / total if how == "divide" else e * (1 / total)


def torch_softmax(x: torch.Tensor) -> torch.Tensor:
    """``torch.softmax(x, dim=1)`` on one thread: on several, even a few dozen elements go to the thread pool,
    which waits milliseconds for a core on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return torch.softmax(x, dim=1)
    finally:
        torch.set_num_threads(threads)


def sequential(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Both sums over the window (axis 1) accumulated term by term in float32 (numpy's cumsum)."""
    xs, vs = x.numpy(), v.numpy()
    with np.errstate(invalid="ignore"):  # a window of no position (all -inf): NaN, which the caller masks
        e = np.exp(xs - xs.max(axis=1, keepdims=True))
        total = np.cumsum(e, axis=1, dtype=np.float32)[:, -1:, :]
        return torch.from_numpy(np.cumsum(e / total * vs, axis=1, dtype=np.float32)[:, -1, :].copy())
