"""Compression on the shape ladder (``properties.ladder``): channels past 64 (512 on a GPU) and batches past 16
requests (128 on a GPU) in a fixed share of draws, the packed inputs as non-contiguous views wherever the
contract allows them (``properties.strided``).

An example is a few sizes and a ``seed`` the check expands into one call: every request a chunk (prefill) or a
step of 1 to 4 positions (decode) from its own start, over a ring of random history at the declared discipline's
safe size. The judge scales: the area's torch implementation without a fault (``properties.compression.faulty``,
checked against the exact reference by every compression property in ``test_support.py``) evaluated in float64
gives the rows, which must lie within twice the error of the worst of its float32 evaluations (one per
``baseline.FORMULATIONS``), or 4 ulps of ``sum p |v|``, or the reordering floor (``checks.reorder_bound``: ``W``
units of ``2^-23 sum p |v|``, what summing the window in another order may move), ``checks.py``'s rule; store
rows and positions exact.
Chunk lengths stay within a few groups past the window: the oracle lists every window entry in Python.
"""

from __future__ import annotations

from typing import Any

import torch

from properties.compare import ULP_FLOOR, Mismatch
from properties.compression.baseline import FORMULATIONS
from properties.compression.call import DECODE, PREFILL, safe_ring
from properties.compression.checks import MANTISSA, reorder_bound
from properties.compression.faulty import Faults, run
from properties.contract import operation
from properties.ladder import choice, generator, shapes
from properties.presets import EXAMPLES, preset
from properties.registry import Implementation
from properties.runner import Property
from properties.strided import ORIGINS, assert_same, call_with_views, with_layouts
from reference.layer import window_positions

Example = dict[str, Any]
LAYERS = ((4, True), (4, False), (2, False), (1, False), (8, False))
"""(ratio, overlap): V4's overlapping ratio-4 layer first, then the others without overlap."""


def _grid(g: torch.Generator, shape: tuple[int, ...], bound: int) -> torch.Tensor:
    """Multiples of 1/4 in [-bound, bound] (exact in float32, and so is a score plus an APE entry)."""
    return torch.randint(-4 * bound, 4 * bound + 1, shape, generator=g).float() / 4


def _call(impl: Implementation, case: Example) -> tuple[dict[str, torch.Tensor], dict[str, Any], torch.Tensor]:
    """The call's input tensors, its keyword settings and its state (ring of random history)."""
    g = generator(case)
    ratio, overlap = LAYERS[choice(g, len(LAYERS))]
    ratio, overlap = preset(case, "ratio", ratio), preset(case, "overlap", overlap)
    window = ratio * (2 if overlap else 1)
    d, requests = case["channels"], case["requests"]
    c = d * (2 if overlap else 1)
    decode = impl.op == DECODE
    lengths = [1 + choice(g, 4 if decode else window + 2 * ratio + 1) for _ in range(requests)]
    starts = [choice(g, 3 * window + 1) for _ in range(requests)]
    ring = safe_ring(impl.op, impl.convention, window, max(lengths)) + choice(g, 2)
    slots = requests + choice(g, 3)
    total = sum(lengths)
    tensors = {
        "score": _grid(g, (total, c), 4),
        "latent": _grid(g, (total, c), 8),
        "cu_seqlens": torch.tensor([sum(lengths[:b]) for b in range(requests + 1)], dtype=torch.int32),
        "start_pos": torch.tensor(starts, dtype=torch.int32),
        "state_index": torch.randperm(slots, generator=g)[:requests].to(torch.int32),
    }
    state = torch.stack([_grid(g, (slots, ring, c), 4), _grid(g, (slots, ring, c), 8)], dim=2)
    ape = _grid(g, (ratio, c), 2) if choice(g, 4) else None
    return tensors, {"ratio": ratio, "overlap": overlap, "ape": ape}, state


def _ulps(x: torch.Tensor, bits: int) -> torch.Tensor:
    exponent = torch.frexp(x.abs().clamp_min(2.0**-126)).exponent
    return torch.pow(2.0, (exponent - 1 - bits).to(torch.float64))


def check_ladder(impl: Implementation, case: Example) -> None:
    tensors, settings, state = _call(impl, case)
    discipline = impl.convention if impl.op == DECODE else None

    def oracle(
        precision: torch.dtype, latent: torch.Tensor, ring: torch.Tensor, how: str = "divide"
    ) -> tuple[torch.Tensor, ...]:
        args = (tensors["score"], latent, tensors["cu_seqlens"], tensors["start_pos"], ring.clone())
        return run(
            impl.op,
            discipline,
            Faults(),
            *args,
            tensors["state_index"],
            precision=precision,
            formulation=how,
            **settings,
        )

    names = operation(impl.op).params.positional

    def call(given: dict[str, torch.Tensor]) -> Any:
        args = {**given, "state": state.clone()}
        ape = settings["ape"]
        on_device = {**settings, "ape": None if ape is None else ape.to(impl.device)}
        return impl.fn(*[args[n].to(impl.device) for n in names], **on_device)

    got = call_with_views(call, tensors, case["layouts"], impl.op)
    if not (isinstance(got, tuple | list) and len(got) == 3):
        raise Mismatch(impl.op, detail=f"must return (rows, store_rows, positions), got {type(got).__name__}")
    exact, store, positions = oracle(torch.float64, tensors["latent"], state)
    singles = [oracle(torch.float32, tensors["latent"], state, how)[0].double() for how in FORMULATIONS]
    worst = torch.stack([(one - exact).abs() for one in singles]).amax(0)
    latent_magnitudes = state.clone()
    latent_magnitudes[:, :, 1] = state[:, :, 1].abs()
    magnitude = oracle(torch.float64, tensors["latent"].abs(), latent_magnitudes)[0]
    shape = f"{len(tensors['start_pos'])} requests, {tensors['score'].shape[1]} channels, ratio {settings['ratio']}"
    assert_same(store, got[1], f"{impl.op} store_rows vs the torch oracle ({shape})")
    assert_same(positions, got[2], f"{impl.op} positions vs the torch oracle ({shape})")
    rows = got[0]
    if not isinstance(rows, torch.Tensor) or rows.dtype not in MANTISSA or tuple(rows.shape) != tuple(exact.shape):
        raise Mismatch(f"{impl.op} rows", detail=f"expected f32|bf16{list(exact.shape)}, got {rows!r:.80}")
    rows64 = rows.detach().cpu().double()
    error = (rows64 - exact).abs()
    terms = window_positions(settings["ratio"], settings["overlap"])
    floor = torch.maximum(ULP_FLOOR * _ulps(magnitude, MANTISSA[rows.dtype]), reorder_bound(terms) * magnitude)
    allowed = torch.maximum(2 * worst, floor)
    bad = ~(error <= allowed)
    if bool(bad.any()):
        where = bad.nonzero()[:12].tolist()
        lanes = [(tuple(w), exact[tuple(w)].item(), rows64[tuple(w)].item()) for w in where]
        raise Mismatch(
            f"{impl.op} rows vs float64 ({shape})",
            lanes,
            detail=f"{int(bad.sum())} lane(s) beyond twice the float32 error (floors: {ULP_FLOOR} ulps of sum p|v|, "
            f"{terms} units of 2^-23 of it)",
        )


def _ladder_property(name: str, op: str) -> Property:
    sizes = shapes(channels="channels", requests="requests")
    return Property(
        name,
        op,
        with_layouts(sizes, operation(op).views),
        check_ladder,
        examples=EXAMPLES[name],
        doc="channels past 64 and batches past 16 requests (512 channels, 128 requests on a GPU), the packed "
        "inputs as views: rows within twice the float32 error of float64, store rows and positions exact",
        origins=ORIGINS,
    )


PROPERTIES = [
    _ladder_property("compression_prefill_shape_ladder", PREFILL),
    _ladder_property("compression_decode_shape_ladder", DECODE),
]
