"""Every peer kernel ``make peers`` judges: where it lives in the engine, the adapter, the convention it is
judged under, and the verdict on what the judging found (read from the saved runs, docs/peers.md).

A verdict is written for one outcome (``expect``: "pass" or "fail"); ``csa.peers.run`` marks a kernel whose
outcome differs from the one its verdict was written for, so a stale verdict never reads as current.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Peer:
    name: str
    engine: str
    source: str
    op: str
    impl: str
    leave_out: tuple[str, ...]
    triton: bool
    expect: str
    verdict: str
    properties: tuple[str, ...] = ()
    """Only these properties (all when empty)."""
    max_examples: int = 0
    """Examples per property for this kernel when more than the run's (the verdict's finding needs them)."""


V = "csa.peers.vllm_ops"
S = "csa.peers.sglang_ops"
VLLM_V4 = "vllm/models/deepseek_v4/common/ops/cache_utils.py"
VLLM_V41 = "vllm/models/deepseek_v41/common/ops/cache_utils.py"
VLLM_SPARSE = "vllm/model_executor/kernels/attention/dsa/sparse_mqa_logits.py"
VLLM_V4_COMPRESS = "vllm/models/deepseek_v4/common/ops/fused_compress_quant_cache.py"
VLLM_V41_COMPRESS = "vllm/models/deepseek_v41/common/ops/fused_compress_quant_cache.py"
BAD = ("bad_input",)

PEERS: tuple[Peer, ...] = (
    Peer(
        "vllm.compute_global_topk_indices_and_lens",
        "vllm",
        f"{VLLM_V41}:compute_global_topk_indices_and_lens",
        "slot_translation",
        f"{V}:global_topk_slots",
        (),
        True,
        "pass",
        "Passes under int32_slots: vLLM's slots are int32 by design, exact while the block ids stay under the "
        "option's bound. A padding token is answered by its count (0), which the adapter reads as all lanes -1.",
    ),
    Peer(
        "vllm.select_candidate_blocks",
        "vllm",
        "vllm/model_executor/kernels/attention/dsa/candidate_blocks.py:select_candidate_blocks",
        "candidate_select",
        f"{V}:select_candidate_blocks",
        (),
        True,
        "pass",
        "Passes under ties_any + order_any: ties broken by torch.topk, blocks in rank order (its DeepSelect "
        "path, taken where that library is installed: any order, as its comment says); NaN blocks kept.",
    ),
    Peer(
        "vllm.sparse_topk_remap (remap kernel) after candidate_blocks_to_sparse_indices",
        "vllm",
        f"{VLLM_SPARSE}:candidate_blocks_to_sparse_indices, _sparse_topk_remap_kernel (sparse_topk_remap's remap)",
        "candidate_remap",
        f"{V}:sparse_topk_remap",
        (),
        True,
        "fail",
        "Fails only outside its domain, two documented limits. (1) Candidate block sizes must be a multiple of "
        "its sparse block (8 or 16 positions): for 2, 3 and 4, which the contract also draws, vLLM's own "
        "`pick_sparse_block_kv` raises ValueError (on a view input the harness then also reports that the "
        "refusal does not name the argument). (2) A call with 0 columns (topk_tokens 0; the models' index top-k "
        "is 512 or 1024, reference/models.py) stops in the remap kernel at `tl.arange(0, K_POW2)` with K_POW2 = "
        "next_power_of_2(0) = 0: Triton's own check (triton/language/semantic.py, which compiled code runs too; "
        "not run compiled here). Inside the domain (block sizes 8, 16 and 32, the last its two-sparse-blocks "
        "path; at least one column) it agrees exactly with the reference: "
        "results/peers/check_vllm_sparse_remap_in_domain.py, 300 random calls, -1 padding anywhere, lengths "
        "cutting the newest block, no row differs. Its top-k (DeepSelect, SM100) is not part of the operation "
        "and not called. No bug.",
    ),
    Peer(
        "vllm.quantize_and_insert_k_cache (V4, 584 B)",
        "vllm",
        f"{VLLM_V4}:quantize_and_insert_k_cache",
        "quantize_store",
        f"{V}:store_v4",
        BAD,
        True,
        "pass",
        "Passes under bf16_rows + f32_scale, the bad-input group left out (a production store does not refuse "
        "NaN rows).",
    ),
    Peer(
        "vllm.quantize_and_insert_k_cache (V4.1, 528 B)",
        "vllm",
        f"{VLLM_V41}:quantize_and_insert_k_cache",
        "quantize_store",
        f"{V}:store_v41_fp8",
        BAD,
        True,
        "pass",
        "Passes under bf16_rows + f32_scale, the bad-input group left out.",
    ),
    Peer(
        "vllm.compress_norm_rope_store_triton (V4, 584 B), compress ratio 1",
        "vllm",
        f"{VLLM_V4_COMPRESS}:compress_norm_rope_store_triton",
        "norm_rope_store",
        f"{V}:compress_v4",
        (),
        True,
        "pass",
        "Passes with its compression the identity: compress ratio 1 without overlap makes each window the token's "
        "one state row, whose softmax weight is exactly 1 (V4's Compressor runs ratios 4 and 128; the kernel takes"
        " the ratio as a constexpr). RMSNorm in f32, the 448 NoPE values quantized from the bf16-rounded row, RoPE"
        " on the f32 row stored as bf16. On CUDA vLLM runs the head-512 compressor as a CuTe DSL kernel; this "
        "Triton one runs on the other platforms (on ROCm at ratio 128 for decode tokens only, the two-stage "
        "variant taking prefill).",
    ),
    Peer(
        "vllm.compress_norm_rope_store_triton (V4 indexer, index FP8, 132 B), compress ratio 1",
        "vllm",
        f"{VLLM_V4_COMPRESS}:compress_norm_rope_store_triton",
        "norm_rope_store",
        f"{V}:compress_v4_index_fp8",
        (),
        True,
        "pass",
        "Passes, its compression the identity as for the 584 B record: RoPE in f32, then the row rounded to bf16 "
        "and quantized under one power-of-two f32 scale (MX_SCALE off, as everywhere but SM100, where DeepGEMM's "
        "MX scales store it as four UE8M0 bytes, a format the contract does not define). This is the Triton kernel"
        " vLLM runs for the V4 indexer's cache on CUDA.",
    ),
    Peer(
        "vllm._finalize_norm_rope_quant_store_sparse_attn (V4 two-stage compressor's stage 2, 584 B)",
        "vllm",
        f"{VLLM_V4_COMPRESS}:_finalize_norm_rope_quant_store_sparse_attn",
        "norm_rope_store",
        f"{V}:finalize_v4",
        (),
        True,
        "pass",
        "Passes: the stage that reads stage 1's pooled rows computes as the single-pass kernel's tail does. vLLM "
        "runs the two-stage compressor on ROCm, for head 512 without overlap (ratio 128), on prefill tokens.",
    ),
    Peer(
        "vllm.fused_save_compress_norm + rope_quant_insert (V4.1 on the V4 record, 584 B), compress ratio 1",
        "vllm",
        f"{VLLM_V41_COMPRESS}:fused_save_compress_norm, rope_quant_insert",
        "norm_rope_store",
        f"{V}:save_norm_insert_v41_v4",
        (),
        True,
        "pass",
        "Passes at compress ratio 1, a ratio V4.1's Compressor runs (the full-length compressed cache): no ring "
        "and no pooling, each row RMS-normed into a bf16 latent, which rope_quant_insert rotates (f32 arithmetic "
        "on the bf16 latent) and stores in V4's record.",
    ),
    Peer(
        "vllm.fused_save_compress_norm + rope_quant_insert (V4.1, 528 B), compress ratio 1",
        "vllm",
        f"{VLLM_V41_COMPRESS}:fused_save_compress_norm, rope_quant_insert",
        "norm_rope_store",
        f"{V}:save_norm_insert_v41_fp8",
        (),
        True,
        "pass",
        "Passes at compress ratio 1, as on the V4 record: RoPE first, then all 512 values MXFP8-quantized (16 "
        "UE8M0 scales of 32).",
    ),
    Peer(
        "vllm.dequantize_and_gather_k_cache (V4, 584 B)",
        "vllm",
        f"{VLLM_V4}:dequantize_and_gather_k_cache",
        "gather_dequantize",
        f"{V}:gather_v4",
        (),
        True,
        "pass",
        "Passes.",
    ),
    Peer(
        "vllm.dequantize_and_gather_k_cache (V4.1, 528 B)",
        "vllm",
        f"{VLLM_V41}:dequantize_and_gather_k_cache",
        "gather_dequantize",
        f"{V}:gather_v41_fp8",
        (),
        True,
        "pass",
        "Passes.",
    ),
    Peer(
        "vllm.dequantize_and_gather_k_cache (V4.1 NVFP4, 288 B)",
        "vllm",
        f"{VLLM_V41}:dequantize_and_gather_k_cache",
        "gather_dequantize",
        f"{V}:gather_v41_fp4",
        (),
        True,
        "pass",
        "Passes.",
    ),
    Peer(
        "sglang.select_candidate_block_ids",
        "sglang",
        "sglang/kernels/ops/attention/dsv4/candidate_blocks.py:select_candidate_block_ids",
        "candidate_select",
        f"{S}:select_candidate_block_ids",
        (),
        False,
        "fail",
        "Fails only on NaN block scores, outside its documented domain (finite logits, -inf past each row's "
        "length): torch.topk ranks a NaN block first, then `top.values > -inf` turns it into -1, so a NaN block "
        "costs a slot and leaves a -1 lane ahead of kept ids (neither drop_nan nor propagate_nan); "
        "results/peers/repro_sglang_candidate_nan_block.py shows it. On finite scores it agrees with the "
        "reference under ties_any + order_any (results/peers/check_sglang_candidates_finite.py: 400 random "
        "rows with ties, -inf lanes and padding rows, none differs). A convention difference on NaN, not a bug.",
    ),
    Peer(
        "sglang.topk_transform_pytorch_vectorized",
        "sglang",
        "sglang/srt/layers/attention/dsv4/indexer.py:topk_transform_pytorch_vectorized",
        "topk",
        f"{S}:topk_transform",
        (),
        False,
        "fail",
        "Fails on -inf rows inside the valid prefix and on 0 score columns; never on finite prefixes, where it "
        "chooses the reference's rows (tests/test_peers.py: 200 random calls, garbage past each length, lengths "
        "around k). (1) A convention the contract cannot express: a -inf row of the prefix is kept when the "
        "length is at most k (the sequential path answers rows 0 .. length - 1 without reading a score) and "
        "dropped to -1 when the length exceeds k (`gathered_scores != -inf`). Judged under the contract's default "
        "(-inf rows eligible) the second half fails (the shrunk row [0, 0, -inf, -inf, -inf], length 5, k 3, "
        "answers 0, 1, -1 where row 2 is due); neg_inf_excluded would fail the first half; no option depends on "
        "the length, and none is added. (2) A call with 0 score columns raises IndexError in its gather (column "
        "0 of the scores is read before the sequential path would answer every lane -1); whether SGLang's "
        "caller sends 0-column logits was not traced. (3) Found by reading, not by the fuzz (2,000 examples of "
        "topk_valid_prefix_only and topk_tail_never_matters did not reach it): a row longer than k whose prefix "
        "holds fewer than k scores above -inf can name rows past its length. torch.topk runs on a copy masked to "
        "-inf past the length, but the -inf test reads the unmasked scores, so a masked position picked among "
        "the -inf ties is kept when the buffer holds anything else there "
        "(results/peers/repro_sglang_topk_transform_past_length.py: length 3, all -inf, k 2, lanes 6 and 5). "
        "SGLang's torch logits (fp8_paged_mqa_logits_torch) are -inf past each length and finite inside it, so "
        "with them it is not reached; other logits producers were not traced. An out-of-prefix lane on -inf "
        "prefixes, not shown to reach serving. Judged with 100 examples a property: the run's 20 do not reach "
        "a -inf run inside a prefix longer than k.",
        max_examples=100,
    ),
    Peer(
        "sglang.dequantize_k_cache_paged_dsv4 (V4, 584 B)",
        "sglang",
        "sglang/kernels/ops/attention/dsv4/dequant_k_cache.py:dequantize_k_cache_paged_dsv4",
        "gather_dequantize",
        f"{S}:dequantize_v4",
        (),
        True,
        "fail",
        "Bug: token ids given as a strided view are read as if contiguous. The function asserts a contiguous "
        "cache but not contiguous `page_table_1_flattened`, so a view returns other rows without a word "
        "(results/peers/repro_sglang_dequant_strided_slots.py: ids [1, 2, 3] as every other element of a buffer "
        "return rows [1, 0, 2]), and where the gaps hold large values it reads outside the cache (the interpreter "
        "died with SIGSEGV on the ladder's transposed view of the slots). The contract lets slots arrive as views "
        "(use them, or refuse naming the argument). On contiguous ids every property passes. Whether any SGLang "
        "caller passes a strided page table was not checked.",
    ),
    Peer(
        "sglang.dequantize_k_cache_paged_v41 (V4.1, 528 B)",
        "sglang",
        "sglang/kernels/ops/attention/dsv4/dequant_k_cache.py:dequantize_k_cache_paged_v41",
        "gather_dequantize",
        f"{S}:dequantize_v41_fp8",
        (),
        True,
        "fail",
        "Domain limit: SGLang refuses V4.1 dequantization below CUDA SM100 (RuntimeError 'requires CUDA SM100 or "
        "newer, or gfx950'), on a CPU and on the H200 (SM90) alike; its kernel is not reached.",
    ),
    Peer(
        "sglang.dequantize_k_cache_paged_v41 (V4.1 FP4, 288 B)",
        "sglang",
        "sglang/kernels/ops/attention/dsv4/dequant_k_cache.py:dequantize_k_cache_paged_v41",
        "gather_dequantize",
        f"{S}:dequantize_v41_fp4",
        (),
        True,
        "fail",
        "Domain limit: refused below SM100, as the 528 B format.",
    ),
    Peer(
        "sglang.store_fp4_index_k_cache (index FP4, 68 B), rne=True",
        "sglang",
        "sglang/kernels/ops/kvcache/dsv4_fp4_index_k_cache.py:store_fp4_index_k_cache",
        "quantize_store",
        f"{S}:store_index_fp4_rne",
        BAD,
        True,
        "fail",
        "Two differences, each shown standalone. (1) Slot -1 is not skipped: the Triton copy computes page "
        "-1 // page_size (truncated) and writes the row 68 bytes before the cache when page_size is 1, and 64 "
        "bytes before the cache plus the last 4 data bytes of page 0 otherwise "
        "(results/peers/repro_sglang_index_fp4_store_minus_one.py; the guard bytes show the same). SGLang's "
        "unified KV store skips loc < 0, this store does not; whether its callers can pass -1 was not traced, "
        "so it is reported as an out-of-bounds write for slot -1, not as a serving bug. (2) The scale floor: "
        "SGLang floors amax / 6 at 1e-4 before rounding up to a power of two, so a group whose amax is below "
        "6e-4 (an all-zero group included) stores scale byte 0x72 (2^-13) where the exact rule stores its own "
        "power of two (0x01 for an all-zero group); zero groups decode the same, tiny values round to 0 (the "
        "grid round trip at amax near 2^-27). A documented domain limit: index keys are normalised, far above "
        "the floor. On the CPU the interpreter also aborts (SIGABRT) in `_ceil_ue8m0_exp` on some rows holding "
        "values near bf16's maximum; the compiled run is the one to read for those.",
    ),
    Peer(
        "sglang.store_fp4_index_k_cache (index FP4, 68 B), rne=False (the pool's default)",
        "sglang",
        "sglang/kernels/ops/kvcache/dsv4_fp4_index_k_cache.py:store_fp4_index_k_cache",
        "quantize_store",
        f"{S}:store_index_fp4",
        BAD,
        True,
        "fail",
        "As rne=True (slot -1 written out of bounds; the 1e-4 scale floor), and its e2m1 rounding sends ties "
        "to the lower magnitude (`ax > 0.25`, ... thresholds) where the format rounds to nearest even: a "
        "rounding convention SGLang switches off with rne=True.",
    ),
    Peer(
        "sglang.gather_fp4_index_k (index FP4, 68 B)",
        "sglang",
        "sglang/kernels/ops/kvcache/dsv4_fp4_index_k_cache.py:gather_fp4_index_k",
        "gather_dequantize",
        f"{S}:gather_index_fp4",
        (),
        True,
        "pass",
        "Passes: the packed bytes it gathers decode (by the reference) to the stored values.",
    ),
)

NOT_JUDGED: tuple[tuple[str, str], ...] = (
    (
        "vLLM `models/deepseek_v4/common/ops/fused_compress_quant_cache.py:compress_norm_rope_store_triton` on the "
        "index FP4 record (68 B; adapter `csa.peers.vllm_ops:compress_v4_index_fp4`) and "
        "`models/deepseek_v41/common/ops/fused_compress_quant_cache.py:rope_quant_insert` on the NVFP4 record "
        "(288 B; adapter `csa.peers.vllm_ops:save_norm_insert_v41_fp4`), both at compress ratio 1",
        "their e2m1 packing (`_fp32x2_to_fp4x2`) is PTX inline assembly (`cvt.rn.satfinite.e2m1x2.f32`), which "
        "Triton's interpreter does not run: a CPU run stops there. On a CUDA GPU `csa fuzz --op norm_rope_store "
        "--impl ADAPTER --device cuda` judges them; no such run is recorded",
    ),
)
"""Peer kernels with an adapter that ``make peers`` cannot run here, and why."""

NOT_IN_CONTRACT: tuple[tuple[str, str], ...] = (
    (
        "vLLM's compressors' pooling: `models/deepseek_v4/common/ops/fused_compress_quant_cache.py:"
        "compress_norm_rope_store_triton` at ratios 4 (overlapping windows) and 128 (and its two-stage "
        "variant's stage 1, `_compress_gather_split_sparse_attn`), `models/deepseek_v41/common/ops/"
        "fused_compress_quant_cache.py:fused_save_compress_norm` at ratio 2 (a ring row joined with the chunk's "
        "first token)",
        "norm_rope_store takes the compressed rows themselves; these kernels fuse into the same call the "
        "softmax-gated pooling of each group's rows read from the compressor's paged state cache (through a block "
        "table and per-token request indices) or its per-request ring, writing the ring as they go. Their "
        "norm -> RoPE -> quantize -> store is judged above with the pooling the identity (ratio 1) or as a "
        "separate stage; the pooling itself, fused with the store, has no operation: compression_prefill and "
        "compression_decode judge pooling on the contract's per-request state ring and return the rows (f32 or "
        "bf16), where these kernels leave only quantized cache bytes",
    ),
)
