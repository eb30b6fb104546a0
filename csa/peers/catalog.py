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


V = "csa.peers.vllm_ops"
S = "csa.peers.sglang_ops"
VLLM_V4 = "vllm/models/deepseek_v4/common/ops/cache_utils.py"
VLLM_V41 = "vllm/models/deepseek_v41/common/ops/cache_utils.py"
VLLM_SPARSE = "vllm/model_executor/kernels/attention/dsa/sparse_mqa_logits.py"
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
        "refusal does not name the argument). (2) A call with 0 columns (topk_tokens 0; vLLM's index top-k is "
        "512 to 2048) stops in the remap kernel at `tl.arange(0, K_POW2)` with K_POW2 = next_power_of_2(0) = 0, "
        "Triton's own check, compiled as interpreted. Inside the domain (block sizes 8, 16 and 32, the last its "
        "two-sparse-blocks path; at least one column) it agrees exactly with the reference: "
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
        "sglang.dequantize_k_cache_paged_dsv4 (V4, 584 B)",
        "sglang",
        "sglang/kernels/ops/attention/dsv4/dequant_k_cache.py:dequantize_k_cache_paged_dsv4",
        "gather_dequantize",
        f"{S}:dequantize_v4",
        (),
        True,
        "pass",
        "Passes.",
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
        "SGLang `srt/layers/attention/dsv4/indexer.py:topk_transform_pytorch_vectorized` (adapter "
        "`csa.peers.sglang_ops:topk_transform`)",
        "not loadable without SGLang's dependencies: the module imports the model configuration package "
        "(`sglang.srt.configs`, every model's config, which run transformers, dill and torchvision code at import "
        "time), more than stubbing inert packages can stand in for",
    ),
)
"""Peer kernels with an adapter that ``make peers`` cannot run here, and why."""

NOT_IN_CONTRACT: tuple[tuple[str, str], ...] = (
    (
        "vLLM `models/deepseek_v4/common/ops/fused_compress_quant_cache.py:compress_norm_rope_store_triton`, "
        "`models/deepseek_v41/common/ops/fused_compress_quant_cache.py:fused_save_compress_norm`",
        "fused compressor path (compress, RMSNorm, RoPE, quantize, store): operation not in the contract yet",
    ),
)
