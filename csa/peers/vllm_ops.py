"""vLLM 0.33.0's DeepSeek V4 / V4.1 cache-bookkeeping kernels as implementations of the contract.

Each adapter calls the function in vLLM's own file (``csa.peers.loader``) and changes only what the two
signatures disagree on: argument order, dtypes and layouts, all named in the adapter's docstring. Run one with
``csa fuzz --op OP --impl csa.peers.vllm_ops:NAME``; ``make peers`` runs them all (docs/peers.md).
"""

from __future__ import annotations

import torch

from csa.peers.common import cuda_looking, layer_pages, token_records
from csa.peers.loader import modules

V4_CACHE = "vllm.models.deepseek_v4.common.ops.cache_utils"
V41_CACHE = "vllm.models.deepseek_v41.common.ops.cache_utils"
CANDIDATES = "vllm.model_executor.kernels.attention.dsa.candidate_blocks"
SPARSE_LOGITS = "vllm.model_executor.kernels.attention.dsa.sparse_mqa_logits"

module = modules("vllm")


def global_topk_slots(
    rows: torch.Tensor, block_table: torch.Tensor, lengths: torch.Tensor, *, block_size: int, ratio: int
) -> torch.Tensor:
    """slot_translation by V4.1 ``compute_global_topk_indices_and_lens`` (Triton): one request per row
    (``token_to_req_indices = arange``), vLLM's block size the compressed one (``block_size // ratio``), a row of
    length -1 a padding token (``is_valid_token`` False); the int32 slots it returns as they are (the
    ``int32_slots`` option). vLLM
    answers a padding token by its count (``topk_lens`` 0, lanes left translated, never read); the contract
    spells "no lane" -1, so a row whose returned count is 0 reads as all -1."""
    fn = module(V41_CACHE).compute_global_topk_indices_and_lens
    m = rows.shape[0]
    token_to_req = torch.arange(m, dtype=torch.int32, device=rows.device)
    valid = lengths != -1
    slots, counts = fn(rows, token_to_req, block_table, block_size // ratio, valid)
    return slots.masked_fill((counts == 0)[:, None], -1)


global_topk_slots.csa_convention = "sentinel+int32_slots"  # type: ignore[attr-defined]


def select_candidate_blocks(
    scores: torch.Tensor, lengths: torch.Tensor, *, block_size: int, topk_blocks: int
) -> torch.Tensor:
    """candidate_select by ``dsa/candidate_blocks.py:select_candidate_blocks`` (Triton, then ``torch.topk``):
    no row starts (``row_ks`` None), row ends the lengths, ``out`` int32 ``[M, topk_blocks]``. On a CPU its
    ``logits.is_cuda`` assertion is answered by ``common.CudaLooking``; the kernels run interpreted."""
    fn = module(CANDIDATES).select_candidate_blocks
    out = torch.empty((scores.shape[0], topk_blocks), dtype=torch.int32, device=scores.device)
    fn(cuda_looking(scores), None, lengths, topk_blocks, block_size, cuda_looking(out))
    return out.as_subclass(torch.Tensor)


select_candidate_blocks.csa_convention = "pinned+propagate_nan+ties_any+order_any"  # type: ignore[attr-defined]


def sparse_topk_remap(
    columns: torch.Tensor, candidate_blocks: torch.Tensor, lengths: torch.Tensor, *, block_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """candidate_remap by ``dsa/sparse_mqa_logits.py``: ``candidate_blocks_to_sparse_indices`` (Triton: the
    candidate blocks expanded to sparse blocks, filtered to the row's range, sorted; ``end`` the count of valid
    columns), then the remap kernel ``sparse_topk_remap`` launches on its top-k's columns
    (``_sparse_topk_remap_kernel``, Triton), given the contract's columns as that top-k's output. Its top-k
    (DeepSelect, a compiled extension for SM100) is not part of the operation and is not called.

    As vLLM's indexer calls them: the sparse block ``pick_sparse_block_kv(block_size)`` (16 or 8 positions;
    any other block size raises its ValueError), ``row_ks`` zeros and ``row_ke`` the lengths (the paged decode
    path: blocks request-local), ``width`` the sparse logits' width (``S * sparse_block_kv``). What differs in
    layout: the candidate blocks padded with -1 columns to a power of two (its in-kernel sort needs one; -1 is
    its padding), the columns contiguous as the top-k's output is; ``end`` is the contract's count."""
    ops = module(SPARSE_LOGITS)
    sbk = ops.pick_sparse_block_kv(block_size)
    m, nb = candidate_blocks.shape
    width = 1 << max(nb - 1, 0).bit_length()
    blocks = torch.full((m, width), -1, dtype=torch.int32, device=candidate_blocks.device)
    blocks[:, :nb] = candidate_blocks
    zeros = torch.zeros(m, dtype=torch.int32, device=lengths.device)
    sparse, end = ops.candidate_blocks_to_sparse_indices(blocks, zeros, lengths.to(torch.int32), block_size, sbk)
    k = columns.shape[1]
    out = torch.empty((m, k), dtype=torch.int32, device=columns.device)
    cols = columns.to(torch.int32).contiguous()
    ops._sparse_topk_remap_kernel[(m,)](
        cols,
        cols.stride(0),
        sparse,
        sparse.stride(0),
        zeros,
        zeros.stride(0),
        out,
        out.stride(0),
        k,
        sparse.shape[1] * sbk,
        SBK=sbk,
        K_POW2=ops.triton.next_power_of_2(k),
    )
    return out, end

_RECORD = {"v4_584": 584, "v41_fp8_528": 528, "v41_fp4_288": 288}


def _store(version: str, fmt: str):  # type: ignore[no-untyped-def]
    def quantize_store(
        rows: torch.Tensor, slots: torch.Tensor, cache: torch.Tensor, *, fmt: str, rows_per_block: int, layer: int
    ) -> None:
        """quantize_store by vLLM's ``quantize_and_insert_k_cache``: bf16 rows (its input dtype, the
        ``bf16_rows`` option), the layer's pages as its ``k_cache`` (block stride the cache's),
        ``block_size = rows_per_block``."""
        ops = module(V4_CACHE if version == "v4" else V41_CACHE)
        pages = layer_pages(cache, fmt, rows_per_block, layer)
        extra = {} if version == "v4" else {"bytes_per_token": _RECORD[fmt]}
        ops.quantize_and_insert_k_cache(rows, pages, slots, rows_per_block, **extra)

    quantize_store.__name__ = f"quantize_store_{version}_{fmt}"
    quantize_store.csa_convention = f"{fmt}+bf16_rows+f32_scale"  # type: ignore[attr-defined]
    return quantize_store


def _gather(version: str, fmt: str):  # type: ignore[no-untyped-def]
    def gather_dequantize(
        cache: torch.Tensor, slots: torch.Tensor, *, fmt: str, rows_per_block: int, layer: int
    ) -> torch.Tensor:
        """gather_dequantize by vLLM's ``dequantize_and_gather_k_cache``: one request per slot (a block table
        of its one block, ``seq_lens = slot % rows_per_block + 1``, ``gather_lens = 1``, ``offset = 0``), the
        bf16 rows it writes widened to f32."""
        ops = module(V4_CACHE if version == "v4" else V41_CACHE)
        pages = token_records(layer_pages(cache, fmt, rows_per_block, layer), rows_per_block, _RECORD[fmt])
        r = slots.shape[0]
        out = torch.zeros((r, 1, 512), dtype=torch.bfloat16, device=cache.device)
        if r == 0:
            return out.reshape(0, 512).float()
        table = (slots // rows_per_block).to(torch.int32).reshape(r, 1)
        seq_lens = (slots % rows_per_block + 1).to(torch.int32)
        gather_lens = torch.ones(r, dtype=torch.int32, device=cache.device)
        ops.dequantize_and_gather_k_cache(out, pages, seq_lens, gather_lens, table, rows_per_block, 0)
        return out.reshape(r, 512).float()

    gather_dequantize.__name__ = f"gather_dequantize_{version}_{fmt}"
    gather_dequantize.csa_convention = fmt  # type: ignore[attr-defined]
    return gather_dequantize


store_v4 = _store("v4", "v4_584")
store_v41_fp8 = _store("v41", "v41_fp8_528")
gather_v4 = _gather("v4", "v4_584")
gather_v41_fp8 = _gather("v41", "v41_fp8_528")
gather_v41_fp4 = _gather("v41", "v41_fp4_288")
