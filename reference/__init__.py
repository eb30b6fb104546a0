"""The exact reference: Fraction, int and sympy only; no floating point anywhere in this package.

One idea per module; the public API of each area is re-exported here (docs/architecture.md maps each operation
to its module). A module keeps its own name: the top-k function is ``reference.topk.topk``.

- Compression (docs/compression.md, docs/ring-safety.md): ``compress_row``, ``prefill_chunk``, ``decode_step``,
  ``prefill_batch``, ``CompressedLayer`` / ``v4_layer`` / ``v41_layer``, the ring ``new_ring`` / ``ring_prefill`` /
  ``ring_step`` and ``min_safe_ring_size``.
- Indexing (docs/indexing.md): ``index_scores``, ``visible_rows``, the top-k conventions (``V41TopK``,
  ``V4TopK``, ``SelectTopK``, ``lane_layout``), candidate blocks (``kept_blocks``, ``restore_offsets``),
  addresses (``rows_to_slots``, ``gathered_rows``), sliding-window indices (``prefill_window``,
  ``decode_window``) and the compressed index list of a layer without an indexer (``compressed_indices``).
- The cache (docs/formats.md, docs/attention.md): row formats (``quantize_row``, ``dequantize_row``), block
  layouts (``public_layout``, ``pack_block``, ``unpack_block``) and ``sparse_attention`` with a sink.
- Accounting (docs/accounting.md, docs/models.md, docs/sharing.md): ``model_bytes``, ``model_preset``,
  ``validate_sharing``.
- ``CONVENTIONS``: every named convention, by operation (``reference.conventions``).
"""

from reference.accounting import layer_bytes, model_bytes
from reference.addressing import LaneGuard, gathered_rows, row_to_slot, rows_per_block, rows_to_slots, slot_to_row
from reference.attention import LaneRules, sparse_attention, valid_lanes
from reference.cache_blocks import BlockLayout, pack_block, public_layout, unpack_block
from reference.candidates import CandidateRule, NanPolicy, kept_blocks, restore_offsets, topk_within_blocks
from reference.compressed_list import compressed_indices
from reference.compression import compress_row, decode_step, prefill_batch, prefill_chunk
from reference.conventions import CONVENTIONS, Convention
from reference.formats import RowFormat, dequantize_row, quantize_row, row_format
from reference.gated_mean import Weighting
from reference.indexing import index_scores, visible_rows
from reference.layer import CompressedLayer, v4_layer, v41_layer
from reference.models import model_preset
from reference.sharing import SharingMaps, validate_sharing
from reference.state import min_safe_ring_size, new_ring, ring_prefill, ring_step
from reference.topk import LaneLayout, SelectTopK, V4TopK, V41TopK, lane_layout
from reference.window import WindowOrder, decode_window, prefill_window

__all__ = [
    "CONVENTIONS",
    "BlockLayout",
    "CandidateRule",
    "CompressedLayer",
    "Convention",
    "LaneGuard",
    "LaneLayout",
    "LaneRules",
    "NanPolicy",
    "RowFormat",
    "SelectTopK",
    "SharingMaps",
    "V4TopK",
    "V41TopK",
    "Weighting",
    "WindowOrder",
    "compress_row",
    "compressed_indices",
    "decode_step",
    "decode_window",
    "dequantize_row",
    "gathered_rows",
    "index_scores",
    "kept_blocks",
    "lane_layout",
    "layer_bytes",
    "min_safe_ring_size",
    "model_bytes",
    "model_preset",
    "new_ring",
    "pack_block",
    "prefill_batch",
    "prefill_chunk",
    "prefill_window",
    "public_layout",
    "quantize_row",
    "restore_offsets",
    "ring_prefill",
    "ring_step",
    "row_format",
    "row_to_slot",
    "rows_per_block",
    "rows_to_slots",
    "slot_to_row",
    "sparse_attention",
    "topk_within_blocks",
    "unpack_block",
    "v4_layer",
    "v41_layer",
    "valid_lanes",
    "validate_sharing",
    "visible_rows",
]
