"""Cross-layer sharing maps and the rules a valid topology obeys (docs/sharing.md).

Each map sends a layer to the layer whose object it reuses (itself when it reuses nothing):

* ``layer_kv_map``: main compressed KV;
* ``layer_index_k_map``: index keys;
* ``layer_index_module_map``: the selected top-k indices;
* ``layer_candidate_source_map``: the candidate block set its token top-k runs within.

Rules, each failure a ``ValueError`` whose message starts with ``<map>[<layer>]``:

1. a source precedes or equals its consumer (``m[l] <= l``) and maps to itself (``m[m[l]] == m[l]``);
2. a layer with ratio 0 has no compressed rows: it maps to itself and is nobody's source;
3. a consumer's ratio equals its source's (compatible ratios within a segment);
4. refinement, ``coarse[fine[l]] == coarse[l]`` for every layer: index keys refine main KV, top-k
   indices refine index keys, candidate sets refine index keys;
5. a layer that is the candidate source of another layer is a main-KV source.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reference.checks import fail, require, require_int

KV = "layer_kv_map"
INDEX_K = "layer_index_k_map"
INDEX_MODULE = "layer_index_module_map"
CANDIDATE = "layer_candidate_source_map"


@dataclass(frozen=True)
class SharingMaps:
    """The four maps, one entry per layer."""

    kv: tuple[int, ...]
    index_k: tuple[int, ...]
    index_module: tuple[int, ...]
    candidate: tuple[int, ...]

    def named(self) -> dict[str, tuple[int, ...]]:
        return {KV: self.kv, INDEX_K: self.index_k, INDEX_MODULE: self.index_module, CANDIDATE: self.candidate}


def identity_maps(layers: int) -> SharingMaps:
    """Every layer owns everything (V4: no cross-layer sharing)."""
    own = tuple(range(layers))
    return SharingMaps(own, own, own, own)


def check_source_map(name: str, source_map: Sequence[int], ratios: Sequence[int]) -> None:
    """Rules 1 to 3 for one map."""
    require(
        len(source_map) == len(ratios),
        name,
        f"must have one entry per layer ({len(ratios)}), got {len(source_map)}",
    )
    layers = len(ratios)
    for layer, source in enumerate(source_map):
        where = f"{name}[{layer}]"
        require_int(source, where)
        require(0 <= source < layers, where, f"source {source} is not a layer in [0, {layers})")
        require(
            source <= layer,
            where,
            f"source {source} comes after layer {layer}; a source must precede or equal its consumers",
        )
        require(
            source_map[source] == source,
            where,
            f"source {source} does not map to itself (it maps to {source_map[source]})",
        )
        if source != layer:
            require(
                ratios[layer] != 0,
                where,
                f"layer {layer} has ratio 0 and cannot reuse layer {source}'s compressed objects",
            )
            require(ratios[source] != 0, where, f"source {source} has ratio 0 and owns nothing to share")
            require(
                ratios[source] == ratios[layer],
                where,
                f"ratio {ratios[layer]} differs from its source {source}'s ratio {ratios[source]}",
            )


def check_refines(fine_name: str, fine: Sequence[int], coarse_name: str, coarse: Sequence[int]) -> None:
    """``coarse[fine[l]] == coarse[l]`` for every layer: each segment of ``fine`` lies in one of ``coarse``."""
    require(len(fine) == len(coarse), fine_name, f"has {len(fine)} entries but {coarse_name} has {len(coarse)}")
    for layer, source in enumerate(fine):
        if coarse[source] != coarse[layer]:
            raise fail(
                f"{fine_name}[{layer}]",
                f"must refine {coarse_name}: layer {layer} -> {fine_name} source {source}, but "
                f"{coarse_name} sends layer {layer} to {coarse[layer]} and layer {source} to {coarse[source]}",
            )


def validate_sharing(maps: SharingMaps, ratios: Sequence[int]) -> None:
    """All five rules; returns ``None`` or raises the first violation found."""
    for r_layer, r in enumerate(ratios):
        require(require_int(r, f"ratios[{r_layer}]") >= 0, f"ratios[{r_layer}]", f"must be >= 0, got {r}")
    for name, source_map in maps.named().items():
        check_source_map(name, source_map, ratios)
    check_refines(INDEX_K, maps.index_k, KV, maps.kv)
    check_refines(INDEX_MODULE, maps.index_module, INDEX_K, maps.index_k)
    check_refines(CANDIDATE, maps.candidate, INDEX_K, maps.index_k)
    for layer, source in enumerate(maps.candidate):
        if source != layer and maps.kv[source] != source:
            raise fail(
                f"{CANDIDATE}[{layer}]",
                f"candidate source {source} is not a main-KV source ({KV} sends it to {maps.kv[source]})",
            )


def _latest_at_or_before(sources: Sequence[int], layer: int) -> int | None:
    earlier = [s for s in sources if s <= layer]
    return max(earlier) if earlier else None


def maps_from_sources(
    ratios: Sequence[int],
    num_layers: int,
    kv_source_layers: Sequence[int],
    index_source_layers: Sequence[int],
    candidate_source_layer: int | None,
) -> SharingMaps:
    """The maps a V4.1 configuration implies.

    A backbone layer with ratio > 0 reuses the main KV and index keys of the latest KV source at or
    before it, and the top-k indices of the latest index source at or before it. Index sources after the
    candidate source select their tokens within its candidate blocks. MTP layers (``>= num_layers``) and
    ratio-0 layers own their window only and map to themselves.
    """
    layers = len(ratios)
    kv, index_module, candidate = list(range(layers)), list(range(layers)), list(range(layers))
    for layer in range(min(num_layers, layers)):
        if ratios[layer] == 0:
            continue
        kv_source = _latest_at_or_before(kv_source_layers, layer)
        if kv_source is None:
            raise fail("kv_source_layers", f"layer {layer} has ratio {ratios[layer]} but no KV source at or before it")
        kv[layer] = kv_source
        index_source = _latest_at_or_before(index_source_layers, layer)
        index_module[layer] = layer if index_source is None else index_source
        if candidate_source_layer is not None and layer > candidate_source_layer and layer in index_source_layers:
            candidate[layer] = candidate_source_layer
    return SharingMaps(tuple(kv), tuple(kv), tuple(index_module), tuple(candidate))
