"""Sharing maps: the appendix example, the V4.1-Flash topology, and one broken topology per rule."""

from __future__ import annotations

from dataclasses import replace

import pytest

from reference.models import MODELS, V41_FLASH
from reference.sharing import (
    SharingMaps,
    check_refines,
    identity_maps,
    maps_from_sources,
    validate_sharing,
)
from tests.refusals import worded_exactly

# Appendix A.6: main-KV sources [0,0,0,0], index-K sources [0,0,2,2], index sources [0,1,2,3]
SEED = SharingMaps(kv=(0, 0, 0, 0), index_k=(0, 0, 2, 2), index_module=(0, 1, 2, 3), candidate=(0, 1, 2, 3))
RATIOS = (2, 2, 2, 2)


def test_seed_example_is_valid_and_nested() -> None:
    validate_sharing(SEED, RATIOS)
    check_refines("layer_index_k_map", SEED.index_k, "layer_kv_map", SEED.kv)
    check_refines("layer_index_module_map", SEED.index_module, "layer_index_k_map", SEED.index_k)


def test_refinement_failure_names_layer_and_both_maps() -> None:
    # index keys of layers 2-3 come from layer 0, but their main KV comes from layer 2: a different segment
    with pytest.raises(ValueError) as error:
        check_refines("layer_index_k_map", (0, 0, 0, 0), "layer_kv_map", (0, 0, 2, 2))
    assert str(error.value) == (
        "layer_index_k_map[2]: must refine layer_kv_map: layer 2 -> layer_index_k_map source 0, but "
        "layer_kv_map sends layer 2 to 2 and layer 0 to 0"
    )


# each case the appendix example with what breaks one rule: a map changed, other ratios, or a map too short
@pytest.mark.parametrize(
    ("maps", "ratios", "message"),
    [
        (replace(SEED, kv=(0, 0, 3, 3)), RATIOS, r"^layer_kv_map\[2\]: source 3 comes after layer 2"),
        (
            replace(SEED, index_module=(0, 0, 1, 3)),
            RATIOS,
            r"^layer_index_module_map\[2\]: source 1 does not map to itself",
        ),
        (SEED, (0, 2, 2, 2), r"^layer_kv_map\[1\]: source 0 has ratio 0 and owns nothing to share"),
        (
            replace(SEED, kv=(0, 0, 2, 3), index_k=(0, 0, 2, 3)),
            (2, 0, 2, 2),
            r"^layer_kv_map\[1\]: layer 1 has ratio 0 and cannot reuse layer 0",
        ),
        (SEED, (2, 2, 1, 1), r"^layer_kv_map\[2\]: ratio 1 differs from its source 0's ratio 2"),
        (
            replace(SEED, index_module=(0, 1, 2, 2), candidate=(0, 1, 2, 2)),
            RATIOS,
            r"^layer_candidate_source_map\[3\]: candidate source 2 is not a main-KV source",
        ),
        (
            SharingMaps((0, 0, 0), (0, 0, 2), (0, 1, 2), (0, 1, 2)),
            RATIOS,
            r"^layer_kv_map: must have one entry per layer \(4\), got 3",
        ),
        (replace(SEED, kv=(0, 0, 0, 7)), RATIOS, r"^layer_kv_map\[3\]: source 7 is not a layer in \[0, 4\)"),
        (
            replace(SEED, kv=(0, 0, 2, 2), index_k=(0, 0, 0, 0)),
            RATIOS,
            r"^layer_index_k_map\[2\]: must refine layer_kv_map",
        ),
        (
            replace(SEED, candidate=(0, 1, 2, 0)),
            RATIOS,
            r"^layer_candidate_source_map\[3\]: must refine layer_index_k_map",
        ),
        (
            replace(SEED, index_module=(0, 1, 0, 3)),
            RATIOS,
            r"^layer_index_module_map\[2\]: must refine layer_index_k_map",
        ),
    ],
)
def test_each_rule_rejects_its_violation(maps: SharingMaps, ratios: tuple[int, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate_sharing(maps, ratios)


def test_v41_flash_topology() -> None:
    m = V41_FLASH
    maps = maps_from_sources(
        m.compress_ratios,
        m.num_layers,
        m.kv_source_layers or (),
        m.index_source_layers or (),
        m.candidate_source_layer,
    )
    validate_sharing(maps, m.compress_ratios)
    # by hand from the configuration: KV sources 2, 8, 14, 20; index sources every 4 layers from 20
    assert maps.kv[:2] == (0, 1) and maps.kv[2:8] == (2,) * 6 and maps.kv[19] == 14
    assert maps.kv[20:40] == (20,) * 20 and maps.kv[40:] == (40, 41, 42)
    assert maps.index_k == maps.kv
    assert maps.index_module[20:24] == (20,) * 4 and maps.index_module[25] == 24 and maps.index_module[39] == 36
    assert [layer for layer, c in enumerate(maps.candidate) if c != layer] == [24, 28, 32, 36]
    assert {maps.candidate[layer] for layer in (24, 28, 32, 36)} == {20}


def test_v4_layers_share_nothing() -> None:
    for m in MODELS.values():
        validate_sharing(identity_maps(m.total_layers), m.compress_ratios)


def test_a_compressing_layer_needs_a_source() -> None:
    with pytest.raises(ValueError, match=r"^kv_source_layers: layer 2 has ratio 2 but no KV source"):
        maps_from_sources((0, 0, 2, 2), 4, (3,), (3,), None)


test_every_refusal_is_worded_exactly = worded_exactly(
    [
        (
            lambda: validate_sharing(SharingMaps((0, 0.5), (0, 1), (0, 1), (0, 1)), (2, 2)),  # type: ignore[arg-type]
            TypeError,
            "layer_kv_map[1]: must be an int, got float",
        ),
        (
            lambda: validate_sharing(SharingMaps((0, 2), (0, 1), (0, 1), (0, 1)), (2, 2)),
            ValueError,
            "layer_kv_map[1]: source 2 is not a layer in [0, 2)",
        ),
        (
            lambda: validate_sharing(SharingMaps((0, 1), (0, 1), (0, 1), (0, 1)), (2, -1)),
            ValueError,
            "ratios[1]: must be >= 0, got -1",
        ),
        (
            lambda: validate_sharing(SharingMaps((0, 1), (0, 1), (0, 1), (0, 1)), (2, 1.0)),  # type: ignore[arg-type]
            TypeError,
            "ratios[1]: must be an int, got float",
        ),
        (lambda: check_refines("fine", [0], "coarse", [0, 1]), ValueError, "fine: has 1 entries but coarse has 2"),
        (
            lambda: maps_from_sources((0, 2, 2), 3, (2,), (), None),
            ValueError,
            "kv_source_layers: layer 1 has ratio 2 but no KV source at or before it",
        ),
    ]
)


def test_layers_before_the_first_index_source_index_for_themselves() -> None:
    assert maps_from_sources((2, 2), 2, (0,), (1,), None) == SharingMaps((0, 0), (0, 0), (0, 1), (0, 1))
