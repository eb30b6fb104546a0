"""Non-contiguous views of a property's inputs, and the one rule they are judged by.

An argument an operation lists in ``Operation.views`` (``properties.contract``) may reach an implementation as
a view: transposed storage (column-major), a slice of a wider buffer (every other element, the gaps holding
garbage) or a contiguous tensor at a storage offset. The implementation either gives the result it gives for
the contiguous tensor, or refuses the view with a ``ValueError`` (or ``TypeError``) naming the argument; reading
the view's memory as if it were contiguous is the bug this catches. A storage offset keeps a tensor contiguous,
so every implementation must accept that one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from hypothesis import strategies as st

from properties.compare import Mismatch
from properties.contract import operation
from properties.registry import Implementation

LAYOUTS = ("contiguous", "transposed", "sliced", "offset")
OFFSET = 3
"""Elements before an ``offset`` view's first one."""


def _garbage(dtype: torch.dtype) -> float | int:
    if dtype.is_floating_point:
        return float("nan")
    if dtype == torch.uint8:
        return 0xEF
    return -(2**31) if dtype in (torch.int32, torch.int64) else -1


def view_of(t: torch.Tensor, layout: str) -> torch.Tensor:
    """``t``'s values in ``layout`` (see the module docstring); a 1-D tensor's ``transposed`` is ``sliced``."""
    if layout == "contiguous" or t.dim() == 0:
        return t
    if layout == "offset":
        flat = torch.full((t.numel() + OFFSET,), _garbage(t.dtype), dtype=t.dtype, device=t.device)
        flat[OFFSET:] = t.reshape(-1)
        return flat[OFFSET:].view(t.shape)
    if layout == "transposed" and t.dim() >= 2:
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    if layout in ("transposed", "sliced"):
        wide = torch.full((*t.shape[:-1], 2 * t.shape[-1] + 1), _garbage(t.dtype), dtype=t.dtype, device=t.device)
        wide[..., 1::2] = t
        return wide[..., 1::2]
    raise ValueError(f"layout: must be one of {LAYOUTS}, got {layout!r}")


def layouts(names: Sequence[str]) -> st.SearchStrategy[dict[str, str]]:
    """A layout per argument name; all contiguous (where shrinking goes) half of the time."""
    each = st.sampled_from(LAYOUTS)
    return st.one_of(st.just(dict.fromkeys(names, "contiguous")), st.fixed_dictionaries(dict.fromkeys(names, each)))


ORIGINS = ("fast", "user", "mutant")
"""The implementations judged on large shapes: not the exact reference's adapters (``Property.origins``)."""


@st.composite
def with_layouts(draw: st.DrawFn, sizes: st.SearchStrategy[dict[str, Any]], names: Sequence[str]) -> dict[str, Any]:
    """An example of ``sizes`` with ``"layouts"``: the layout each of ``names`` is passed in."""
    return {**draw(sizes), "layouts": draw(layouts(names))}


def call_with_views(
    call: Callable[[dict[str, torch.Tensor]], Any], tensors: dict[str, torch.Tensor], chosen: dict[str, str], what: str
) -> Any:
    """``call`` on ``tensors`` with the views ``chosen`` asks for. A refusal (``ValueError`` / ``TypeError``)
    that names a viewed argument other than an ``offset`` one is the contract's other answer: the call is then
    made again on the contiguous tensors. Returns the result to judge."""
    viewed = {n: view_of(t, chosen.get(n, "contiguous")) for n, t in tensors.items()}
    strided = [n for n, t in viewed.items() if not t.is_contiguous()]
    if not strided:
        return call(viewed)
    try:
        return call(viewed)
    except (ValueError, TypeError) as err:
        if not any(name in str(err) for name in strided):
            raise Mismatch(
                f"{what}: a refusal of a non-contiguous view must name the argument",
                detail=f"views of {', '.join(strided)} ({', '.join(chosen[n] for n in strided)}); "
                f"raised {type(err).__name__}: {err}",
            ) from err
    return call(tensors)


def run_with_views(
    impl: Implementation, tensors: dict[str, torch.Tensor], chosen: dict[str, str], **options: Any
) -> Any:
    """``impl`` on ``tensors`` (named by the contract's positional arguments, passed in its order) with the
    views ``chosen`` asks for (:func:`call_with_views`) and the keyword ``options``."""
    names = operation(impl.op).params.positional

    def call(given: dict[str, torch.Tensor]) -> Any:
        return impl.fn(*[given[n].to(impl.device) for n in names], **options)

    return call_with_views(call, tensors, chosen, impl.op)


def assert_same(expected: torch.Tensor, got: Any, what: str, limit: int = 12) -> None:
    """``got`` is a tensor of ``expected``'s dtype and shape holding the same values (NaN equal to NaN), compared
    without leaving torch (the outputs may be large)."""
    if not isinstance(got, torch.Tensor):
        raise Mismatch(what, detail=f"expected a torch.Tensor, got {type(got).__name__}")
    got = got.detach().cpu()
    if got.dtype != expected.dtype or got.shape != expected.shape:
        raise Mismatch(
            what, detail=f"{got.dtype}{list(got.shape)}, the contract asks for {expected.dtype}{list(expected.shape)}"
        )
    differ = expected != got
    if expected.dtype.is_floating_point:
        differ &= ~(expected.isnan() & got.isnan())
    if bool(differ.any()):
        where = differ.nonzero()[:limit].tolist()
        lanes = [(tuple(w), expected[tuple(w)].item(), got[tuple(w)].item()) for w in where]
        raise Mismatch(what, lanes, detail=f"{int(differ.sum())} of {differ.numel()} lanes differ")
