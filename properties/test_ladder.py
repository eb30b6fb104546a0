"""The shape ladders cross every tile under every tier, the tier follows CSA_SHAPES, the preset examples are the
models' shapes, and a strided view holds its tensor's values in another layout."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings

from properties.compare import Mismatch
from properties.ladder import LADDERS, TIERS, Ladder, shapes, tier
from properties.presets import EXAMPLES
from properties.strided import LAYOUTS, call_with_views, view_of
from reference.models import MODELS


@pytest.mark.parametrize("shape_tier", TIERS)
def test_every_tier_crosses_every_tile(shape_tier: str) -> None:
    for rung in LADDERS.values():
        assert any(s > rung.tile for s in rung.sizes(shape_tier)), rung.kind
        assert rung.small[1] <= rung.tile, rung.kind


def test_a_ladder_whose_ci_tier_stops_below_its_tile_is_refused() -> None:
    with pytest.raises(ValueError, match="ci_cap"):
        Ladder("lanes", (0, 8), (63, 64, 65), 64, 64, ())


def test_the_tier_follows_csa_shapes(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in TIERS:
        monkeypatch.setenv("CSA_SHAPES", name)
        assert tier() == name
    monkeypatch.setenv("CSA_SHAPES", "huge")
    with pytest.raises(ValueError, match="CSA_SHAPES"):
        tier()


def test_production_sizes_come_from_the_presets() -> None:
    assert {m.index_topk for m in MODELS.values()} <= set(LADDERS["k"].production)
    assert {m.head_dim for m in MODELS.values()} <= set(LADDERS["dim"].production)
    assert {m.window_size for m in MODELS.values()} <= set(LADDERS["window"].production)
    assert {e["k"] for e in EXAMPLES["topk_shape_ladder"]} == {m.index_topk for m in MODELS.values()}


@settings(max_examples=30)
@given(shapes(rows="rows", width="width", k="k"))
def test_the_ci_tier_grows_one_dimension_at_a_time(case: dict[str, int]) -> None:
    if tier() == "ci":
        grown = [
            n for n, kind in (("rows", "rows"), ("width", "width"), ("k", "k")) if case[n] > LADDERS[kind].small[1]
        ]
        assert len(grown) <= 1


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", [(0,), (5,), (3, 4), (2, 3, 4)])
def test_a_view_holds_the_same_values(layout: str, shape: tuple[int, ...]) -> None:
    t = torch.arange(int(torch.tensor(shape).prod()), dtype=torch.float32).reshape(shape)
    view = view_of(t, layout)
    assert torch.equal(view, t)
    if layout in ("transposed", "sliced") and t.numel() > 1:
        assert not view.is_contiguous()
    if layout == "offset" and t.numel():
        assert view.is_contiguous() and view.storage_offset() > 0


def test_a_refusal_must_name_the_viewed_argument() -> None:
    tensors = {"scores": torch.zeros(3, 4)}

    def refuses(given: dict[str, torch.Tensor]) -> torch.Tensor:
        if not given["scores"].is_contiguous():
            raise ValueError("must be contiguous")
        return given["scores"]

    with pytest.raises(Mismatch, match="name the argument"):
        call_with_views(refuses, tensors, {"scores": "transposed"}, "topk")

    def names_it(given: dict[str, torch.Tensor]) -> torch.Tensor:
        if not given["scores"].is_contiguous():
            raise ValueError("scores: must be contiguous")
        return given["scores"]

    assert torch.equal(call_with_views(names_it, tensors, {"scores": "transposed"}, "topk"), tensors["scores"])
