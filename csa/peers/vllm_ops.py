"""vLLM 0.33.0's DeepSeek V4 / V4.1 cache-bookkeeping kernels as implementations of the contract.

Each adapter calls the function in vLLM's own file (``csa.peers.loader``) and changes only what the two
signatures disagree on: argument order, dtypes and layouts, all named in the adapter's docstring. Run one with
``csa fuzz --op OP --impl csa.peers.vllm_ops:NAME``; ``make peers`` runs them all (docs/peers.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

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

    As vLLM's indexer calls them: the sparse block ``pick_sparse_block_kv(block_size)`` (16 or 8 positions,
    the larger that divides it; a block size neither divides raises its ValueError), ``row_ks`` zeros and
    ``row_ke`` the lengths (the paged decode path: blocks request-local), ``width`` the sparse logits' width
    (``S * sparse_block_kv``). What differs in layout: the candidate blocks padded with -1 columns to a power of
    two, at least 1 (its in-kernel sort needs one; -1 is its padding, so no candidate block is one -1 column),
    the columns contiguous as the top-k's output is; ``end`` is the contract's count. A call of 0 columns is
    passed as it is (``K_POW2`` 0)."""
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


V4_COMPRESS = "vllm.models.deepseek_v4.common.ops.fused_compress_quant_cache"
V41_COMPRESS = "vllm.models.deepseek_v41.common.ops.fused_compress_quant_cache"
ROPE_DIM = 64
"""The RoPE dimensions vLLM's compressor kernels rotate: the last 64 (``ROPE_HEAD_DIM``; 64 fixed in V4.1's)."""
_ROW = {"v4_584": (512, 584), "v41_fp8_528": (512, 528), "v41_fp4_288": (512, 288)}
_ROW |= {"index_fp8_132": (128, 132), "index_fp4_68": (128, 68)}
"""Per format: the values of a row and the bytes of its record (the shape[-1] vLLM reads the record kind from)."""
_V4_QUANT = {"v4_584": (64, 576, 8), "index_fp8_132": (128, 128, 4), "index_fp4_68": (32, 64, 4)}
"""V4's ``quant_block``, ``token_stride`` and ``scale_dim`` per format, as its Compressor sets them."""


@dataclass(frozen=True)
class NormRopeCall:
    """One norm_rope_store call as vLLM's compressor stages take it (``_norm_rope`` builds it)."""

    fmt: str
    rows: torch.Tensor
    """f32 ``[R, d]``, contiguous."""
    weight: torch.Tensor
    cos_sin: torch.Tensor
    """f32 ``[P, 64]``, contiguous: cos in the first 32 columns, sin in the rest (vLLM's ``cos_sin_cache``)."""
    positions: torch.Tensor
    slots: torch.Tensor
    pages: torch.Tensor
    """The layer's pages as ``[blocks, rows_per_block, record]`` (``common.token_records``)."""
    eps: float


Stage = Callable[[Any, NormRopeCall], None]


def _norm_rope(fmt: str, module_name: str, stage: Stage) -> Callable[..., None]:
    """norm_rope_store by ``stage(ops, call)``, ``ops`` the module ``module_name`` of vLLM, which the stage
    calls (its docstring says how). What every one of them changes: the tensors contiguous (the layout vLLM's
    launchers assert or assume), rows and the cos / sin table f32, positions and slots int64, the weight the
    contract's f32 (vLLM's is the model's bf16; the kernels widen what they load), the layer's pages as
    ``kv_cache`` ``[blocks, rows_per_block, record]`` (block stride the cache's); a RoPE width other than its 64
    refused."""

    def norm_rope_store(
        *tensors: torch.Tensor, fmt: str, rows_per_block: int, layer: int, eps: float, rope_dim: int
    ) -> None:
        rows, weight, cos_sin, positions, slots, cache = tensors  # the contract's order
        dims, record = _ROW[fmt]
        if rope_dim != ROPE_DIM:
            raise ValueError(f"rope_dim: vLLM's compressor kernels rotate the last {ROPE_DIM} dims, got {rope_dim}")
        if rows.shape[-1] != dims:
            raise ValueError(f"rows: {fmt} rows have {dims} values, got {rows.shape[-1]}")
        pages = token_records(layer_pages(cache, fmt, rows_per_block, layer), rows_per_block, record)
        call = NormRopeCall(
            fmt,
            rows.float().contiguous(),
            weight.contiguous(),
            cos_sin.float().contiguous(),
            positions.to(torch.int64).contiguous(),
            slots.to(torch.int64).contiguous(),
            pages,
            eps,
        )
        stage(module(module_name), call)

    norm_rope_store.__name__ = f"norm_rope_store{stage.__name__}_{fmt}"
    norm_rope_store.__doc__ = f"{stage.__doc__}\n\n{_norm_rope.__doc__}"
    norm_rope_store.csa_convention = fmt  # type: ignore[attr-defined]
    return norm_rope_store


def _v4_compress(ops: Any, c: NormRopeCall) -> None:
    """V4's ``compress_norm_rope_store_triton`` (Triton: compress, RMSNorm, RoPE, quantize, store in one kernel;
    head 512 for v4_584, the head-128 indexer kernels for the index records) with its compression the identity:
    ``compress_ratio`` 1 and no overlap, so each position's window is its one state row, whose softmax weight
    is exactly 1 (the scores are 0). V4's Compressor uses ratios 4 and 128; the kernels take the ratio as a
    constexpr. The state cache holds row r as request r's one block (block size 1, ``[kv | score]``, state
    width the head size; the block table names block r at every position), ``token_to_req_indices = arange``;
    the same slots mark valid tokens and address the cache (``k_cache_metadata.slot_mapping``)."""
    r, head = c.rows.shape
    quant_block, token_stride, scale_dim = _V4_QUANT[c.fmt]
    state = torch.cat([c.rows, torch.zeros_like(c.rows)], dim=1).reshape(r, 1, 2 * head)
    requests = torch.arange(r, dtype=torch.int32, device=c.rows.device)
    width = int(c.positions.max()) + 1 if r else 1
    ops.compress_norm_rope_store_triton(
        state_cache=state,
        num_actual=r,
        token_to_req_indices=requests,
        positions=c.positions,
        slot_mapping=c.slots,
        block_table=requests[:, None].expand(r, width).contiguous(),
        block_size=1,
        state_width=head,
        cos_sin_cache=c.cos_sin,
        kv_cache=c.pages,
        k_cache_metadata=SimpleNamespace(slot_mapping=c.slots),
        pdl_kwargs={},
        head_dim=head,
        rope_head_dim=ROPE_DIM,
        compress_ratio=1,
        overlap=False,
        use_fp4_cache=c.fmt == "index_fp4_68",
        rms_norm_weight=c.weight,
        rms_norm_eps=c.eps,
        quant_block=quant_block,
        token_stride=token_stride,
        scale_dim=scale_dim,
    )


def _v4_finalize(ops: Any, c: NormRopeCall) -> None:
    """Stage 2 of V4's two-stage compressor, ``_finalize_norm_rope_quant_store_sparse_attn`` (Triton: RMSNorm,
    FP8 quantize, RoPE, store of the pooled rows stage 1 leaves in its f32 scratch), launched as
    ``_launch_two_stage_sparse_attn_compressor`` launches it (whose stage-1 occupancy pick asks the CUDA device,
    so it is not called on a CPU), with the contract's rows as the scratch and ``COMPRESS_RATIO`` 1 (the ratio
    only decides which positions close a group and their RoPE position; vLLM runs it at 128); the same slots
    mark valid tokens and address the cache."""
    ops._finalize_norm_rope_quant_store_sparse_attn[(c.rows.shape[0],)](
        c.rows,
        c.rows.stride(0),
        c.positions,
        c.slots,
        c.weight,
        c.eps,
        c.cos_sin,
        c.cos_sin.stride(0),
        c.pages,
        c.slots,
        c.pages.shape[1],
        HEAD_SIZE=512,
        TRITON_BLOCK_SIZE=512,
        COMPRESS_RATIO=1,
        ROPE_HEAD_DIM=ROPE_DIM,
        FP8_MAX=448.0,
        QUANT_BLOCK=64,
        TOKEN_STRIDE=576,
        SCALE_DIM=8,
        KV_BLOCK_STRIDE=c.pages.stride(0),
        SANITIZE_CACHE_NANS=ops._ON_GFX950,
    )


def _v41_save_insert(ops: Any, c: NormRopeCall) -> None:
    """V4.1's two stages, as its Compressor runs them at compress ratio 1 (its full-length compressed cache):
    ``fused_save_compress_norm`` (Triton; at ratio 1 no ring and no pooling, each valid token's row RMS-normed
    into a bf16 latent), then ``rope_quant_insert`` (Triton: GPT-J RoPE, quantize, store; the cache's record
    width picks the 584, 528 or 288 B kernel). The slots mark valid tokens for the first and address the
    cache for the second, as the Compressor passes the cache's slot mapping to both at ratio 1."""
    latent = torch.zeros(c.rows.shape, dtype=torch.bfloat16, device=c.rows.device)
    ops.fused_save_compress_norm(c.rows, c.positions, None, c.slots, None, None, c.weight, c.eps, 1, latent)
    ops.rope_quant_insert(latent, c.positions, c.cos_sin, c.pages, c.slots, 1)


compress_v4 = _norm_rope("v4_584", V4_COMPRESS, _v4_compress)
compress_v4_index_fp8 = _norm_rope("index_fp8_132", V4_COMPRESS, _v4_compress)
compress_v4_index_fp4 = _norm_rope("index_fp4_68", V4_COMPRESS, _v4_compress)
finalize_v4 = _norm_rope("v4_584", V4_COMPRESS, _v4_finalize)
save_norm_insert_v41_v4 = _norm_rope("v4_584", V41_COMPRESS, _v41_save_insert)
save_norm_insert_v41_fp8 = _norm_rope("v41_fp8_528", V41_COMPRESS, _v41_save_insert)
save_norm_insert_v41_fp4 = _norm_rope("v41_fp4_288", V41_COMPRESS, _v41_save_insert)
