"""Both compression operations refuse a malformed call (ring below the safe size, wrong dtype, shape, offsets,
slots, APE table or ratio) with ValueError or TypeError, before the state is touched."""

from __future__ import annotations

from typing import Any

import torch

from properties.compression.call import DECODE, PREFILL
from properties.compression.checks import (
    HUNT_EXAMPLES_QUICK,
    Entry,
    new_state,
    pack,
    ring_size,
)
from properties.compression.frozen import (
    DECODE_OVERLAP_RING_SHORT,
)
from properties.compression.strategies import (
    bad_calls,
)
from properties.registry import Implementation
from properties.runner import BAD_INPUT, Property


def _faulty_call(
    op: str, impl: Implementation, ex: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any], torch.Tensor]:
    """The drawn call with its fault applied; the fault falls back to a wrong score dtype where it cannot
    apply."""
    spec = dict(ex["layer"])
    requests = ex["requests"]
    qmax = max(len(q["positions"]) for q in requests)
    size = ring_size(op, impl, spec, qmax, ex["ring_extra"])
    fault = ex["fault"]
    if fault == "ring_short":
        if size - ex["ring_extra"] == 0:
            fault = "score_dtype"
        else:
            size -= ex["ring_extra"] + 1
    state = new_state(spec, ex["slots"], size, ex["fill"], impl.device)
    entries = [Entry(q["slot"], q["start"], q["positions"]) for q in requests]
    args, kw = pack(spec, entries, state, impl.device)
    score, latent, cu, start, state, index = args
    total, c = score.shape
    if fault == "state_index_duplicate" and len(requests) < 2:
        fault = "state_index_range"
    if fault == "score_noncontiguous" and (total < 2 or c < 1):
        fault = "score_dtype"
    if fault == "overlap_without_ratio_4" and spec["ratio"] == 4:
        fault = "ratio_zero"
    if fault == "score_dtype":
        score = score.double()
    elif fault == "score_noncontiguous":
        wide = torch.zeros(total, 2 * c, dtype=torch.float32, device=score.device)
        wide[:, ::2] = score
        score = wide[:, ::2]
    elif fault == "latent_shape":
        latent = torch.cat([latent, latent[:, :1]], dim=1)
    elif fault == "state_channels":
        state = torch.zeros(*state.shape[:3], c + 1, dtype=torch.float32, device=state.device)
    elif fault == "state_dtype":
        state = state.double()
    elif fault == "cu_seqlens_start":
        cu = cu.clone()
        cu[0] = 1
    elif fault == "cu_seqlens_end":
        cu = cu.clone()
        cu[-1] += 1
    elif fault == "cu_seqlens_dtype":
        cu = cu.long()
    elif fault == "start_negative":
        start = start.clone()
        start[0] = -1
    elif fault == "state_index_range":
        index = index.clone()
        index[0] = ex["slots"]
    elif fault == "state_index_negative":
        index = index.clone()
        index[0] = -1
    elif fault == "state_index_duplicate":
        index = index.clone()
        index[1] = index[0]
    elif fault == "ape_shape":
        kw["ape"] = torch.zeros(int(spec["ratio"]) + 1, c, dtype=torch.float32, device=score.device)
    elif fault == "overlap_without_ratio_4":
        kw["overlap"] = True
    elif fault == "ratio_zero":
        kw["ratio"] = 0
    elif fault == "ratio_float":
        kw["ratio"] = float(spec["ratio"])
    return (score, latent, cu, start, state, index), kw, state


def _rejects(op: str) -> Any:
    def check(impl: Implementation, ex: dict[str, Any]) -> None:
        args, kw, state = _faulty_call(op, impl, ex)
        before = state.detach().cpu().clone()
        try:
            impl.fn(*args, **kw)
        except (ValueError, TypeError):
            pass
        except Exception as err:
            raise AssertionError(
                f"{ex['fault']}: raised {type(err).__name__} ({err}), not ValueError/TypeError naming the argument"
            ) from err
        else:
            raise AssertionError(f"{ex['fault']}: the call was accepted; it must raise ValueError or TypeError")
        after = state.detach().cpu()
        same = before.dtype == after.dtype and before.shape == after.shape
        if not same or before.view(torch.uint8).flatten().tolist() != after.view(torch.uint8).flatten().tolist():
            raise AssertionError(f"{ex['fault']}: the state changed although the call was refused")

    return check


PROPERTIES = [
    Property(
        "compression_prefill_rejects_bad_input",
        PREFILL,
        bad_calls(),
        _rejects(PREFILL),
        doc="A ring below W - 1 slots, a wrong dtype, shape, contiguity, offset, start, slot, APE table or "
        "ratio raises ValueError or TypeError, and the state is untouched.",
        hunt_examples=HUNT_EXAMPLES_QUICK,
        group=BAD_INPUT,
    ),
    Property(
        "compression_decode_rejects_bad_input",
        DECODE,
        bad_calls(),
        _rejects(DECODE),
        examples=(DECODE_OVERLAP_RING_SHORT,),
        doc="A ring below the declared discipline's safe size (write_then_read W + q - 1, read_then_write "
        "W - 1) or any malformed argument raises ValueError or TypeError before the state is touched.",
        hunt_examples=HUNT_EXAMPLES_QUICK,
        group=BAD_INPUT,
    ),
]
