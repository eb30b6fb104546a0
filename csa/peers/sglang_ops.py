"""SGLang 0.5.23's DeepSeek V4 / V4.1 cache-bookkeeping kernels as implementations of the contract.

Each adapter calls the function in SGLang's own file (``csa.peers.loader``) and changes only what the two
signatures disagree on: argument order, dtypes and layouts, all named in the adapter's docstring. Run one with
``csa fuzz --op OP --impl csa.peers.sglang_ops:NAME``; ``make peers`` runs them all (docs/peers.md).

SGLang's cache functions assert a contiguous cache of one layer; where the contract's cache holds several
layers, the adapter hands them a contiguous copy of the layer's pages (and, for a store, copies those pages
back whole), so the guard bytes around the contract's cache still hold, but a write past the layer's pages
inside the copy would not show as such.
"""

from __future__ import annotations

import torch

from csa.peers.common import layer_pages
from csa.peers.loader import modules
from reference.formats import INDEX_FP4, QuantizedRow, dequantize_row

CANDIDATES = "sglang.kernels.ops.attention.dsv4.candidate_blocks"
DEQUANT = "sglang.kernels.ops.attention.dsv4.dequant_k_cache"
INDEX_CACHE = "sglang.kernels.ops.kvcache.dsv4_fp4_index_k_cache"
INDEXER = "sglang.srt.layers.attention.dsv4.indexer"

module = modules("sglang")


def select_candidate_block_ids(
    scores: torch.Tensor, lengths: torch.Tensor, *, block_size: int, topk_blocks: int
) -> torch.Tensor:
    """candidate_select by ``dsv4/candidate_blocks.py:select_candidate_block_ids`` (torch). Its documented
    precondition, "``logits`` must be -inf past each row's causal length", is met on a copy (SGLang's caller
    masks the same way); ``compress_lens`` the lengths as a column (``[M, 1]``, one per row); its
    ``min(topk_blocks, blocks)`` columns padded with -1 to the contract's ``topk_blocks``."""
    fn = module(CANDIDATES).select_candidate_block_ids
    m, n = scores.shape
    past = torch.arange(n, device=scores.device)[None, :] >= lengths.to(torch.int64)[:, None]
    logits = scores.masked_fill(past, float("-inf"))
    ids = fn(logits, lengths.to(torch.int64)[:, None], topk_blocks, block_size)
    out = torch.full((m, topk_blocks), -1, dtype=torch.int32, device=scores.device)
    out[:, : ids.shape[1]] = ids
    return out


select_candidate_block_ids.csa_convention = "pinned+drop_nan+ties_any+order_any"  # type: ignore[attr-defined]


def topk_transform(scores: torch.Tensor, lengths: torch.Tensor, offsets: torch.Tensor, *, k: int) -> torch.Tensor:
    """topk by ``dsv4/indexer.py:topk_transform_pytorch_vectorized`` (torch): page size 1 and an identity page
    table, so its ``out_raw_indices`` are the chosen rows; the contract's offsets added to the lanes holding a
    row (-1 lanes stay -1). Its k is the width of the output buffers (the contract's k, v4.1's fixed width);
    ``torch.topk(sorted=False)`` leaves the lanes in no stated order (``order_any``) and breaks ties as it may
    (``ties_any``). A -inf row inside the valid prefix is kept when ``lengths[m] <= k`` and dropped when it is
    larger, which no option of the contract describes (the catalog's verdict); it is judged under the
    default, -inf rows eligible."""
    fn = module(INDEXER).topk_transform_pytorch_vectorized
    m, n = scores.shape
    table = torch.arange(n, dtype=torch.int32, device=scores.device).expand(m, n).contiguous()
    pages = torch.empty((m, k), dtype=torch.int32, device=scores.device)
    raw = torch.empty((m, k), dtype=torch.int32, device=scores.device)
    fn(scores, lengths, table, pages, 1, out_raw_indices=raw)
    return torch.where(raw >= 0, raw + offsets[:, None], raw)


topk_transform.csa_convention = "v4.1+ties_any+order_any"  # type: ignore[attr-defined]

_LAYOUT = {"v4_584": "v4", "v41_fp8_528": "v41_new", "v41_fp4_288": "v41_fp4_new"}


def _one_layer(cache: torch.Tensor, fmt: str, rows_per_block: int, layer: int) -> torch.Tensor:
    pages = layer_pages(cache, fmt, rows_per_block, layer)
    return pages if pages.is_contiguous() else pages.contiguous()


def _dequant(fmt: str):  # type: ignore[no-untyped-def]
    def gather_dequantize(
        cache: torch.Tensor, slots: torch.Tensor, *, fmt: str, rows_per_block: int, layer: int
    ) -> torch.Tensor:
        """gather_dequantize by ``dsv4/dequant_k_cache.py:dequantize_k_cache_paged_dsv4`` with SGLang's
        ``KVLayout`` of the format (V4: ``v4``; V4.1 528 / 288 B, row after row: ``v41_new`` /
        ``v41_fp4_new``), ``page_size = rows_per_block``; the bf16 rows it returns widened to f32."""
        ops = module(DEQUANT)
        pages = _one_layer(cache, fmt, rows_per_block, layer)
        out = ops.dequantize_k_cache_paged_dsv4(pages, slots, rows_per_block, layout=_LAYOUT[fmt])
        return out.reshape(slots.shape[0], 512).float()

    gather_dequantize.__name__ = f"dequantize_{fmt}"
    gather_dequantize.csa_convention = fmt  # type: ignore[attr-defined]
    return gather_dequantize


dequantize_v4 = _dequant("v4_584")
dequantize_v41_fp8 = _dequant("v41_fp8_528")
dequantize_v41_fp4 = _dequant("v41_fp4_288")


def _index_store(rne: bool):  # type: ignore[no-untyped-def]
    def quantize_store(
        rows: torch.Tensor, slots: torch.Tensor, cache: torch.Tensor, *, fmt: str, rows_per_block: int, layer: int
    ) -> None:
        """quantize_store of the FP4 index cache by ``kvcache/dsv4_fp4_index_k_cache.py:store_fp4_index_k_cache``
        (quantize in Triton, then a Triton copy into the page), ``page_size = rows_per_block``, bf16 rows (the
        K it stores in serving); every slot passed as it is, -1 included."""
        ops = module(INDEX_CACHE)
        pages = layer_pages(cache, fmt, rows_per_block, layer)
        target = pages if pages.is_contiguous() else pages.contiguous()
        ops.store_fp4_index_k_cache(rows, target, slots, page_size=rows_per_block, rne=rne)
        if target is not pages:
            pages.copy_(target)

    quantize_store.__name__ = f"store_index_fp4{'_rne' if rne else ''}"
    quantize_store.csa_convention = f"{INDEX_FP4.name}+bf16_rows+f32_scale"  # type: ignore[attr-defined]
    return quantize_store


store_index_fp4 = _index_store(rne=False)
store_index_fp4_rne = _index_store(rne=True)


def gather_index_fp4(
    cache: torch.Tensor, slots: torch.Tensor, *, fmt: str, rows_per_block: int, layer: int
) -> torch.Tensor:
    """gather_dequantize of the FP4 index cache by ``kvcache/dsv4_fp4_index_k_cache.py:gather_fp4_index_k``
    (Triton), which returns the packed bytes (64 B of e2m1 pairs, 4 UE8M0 bytes packed in an int32); the
    adapter decodes them with the reference's ``dequantize_row``, so only the bytes SGLang gathered are judged."""
    ops = module(INDEX_CACHE)
    pages = _one_layer(cache, fmt, rows_per_block, layer)
    payload, scales = ops.gather_fp4_index_k(pages, slots.contiguous(), page_size=rows_per_block)
    data = payload.view(torch.uint8).cpu()
    scale_bytes = scales.view(torch.uint8).reshape(-1, 4).cpu()
    values = [
        [float(v) for v in dequantize_row(INDEX_FP4, QuantizedRow(bytes(d.tolist()), bytes(s.tolist())))]
        for d, s in zip(data, scale_bytes, strict=True)
    ]
    return torch.tensor(values, dtype=torch.float32).reshape(-1, INDEX_FP4.dims).to(cache.device)


gather_index_fp4.csa_convention = INDEX_FP4.name  # type: ignore[attr-defined]
