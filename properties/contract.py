"""The implementation contract: the operations an implementation can provide, their signatures, and how they
are compared with the exact reference.

Verification model:

1. Every operation has one exact reference (``reference/``); its result is the expected value.
2. An implementation is a plain callable taking and returning torch tensors with the signature below; it declares
   the operation and, where the public implementations disagree, the convention it follows.
3. Exact outputs (indices, slots, -1 lanes, byte strings, quantized codes) must equal the reference bit for bit.
4. Floating outputs must lie within twice the error of a same-precision torch implementation, lane by lane
   (``properties.compare.assert_within_twice_baseline``).
5. Inputs are drawn by Hypothesis on exact grids, with garbage, NaN or +inf wherever a slot must not be read, and
   outputs are pre-filled with NaN or sentinels so an unwritten lane shows.
6. A property failing on any example is a bug in the implementation (or in the reference, which has its own
   invariants checked by the same suite).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Params:
    """The arguments an implementation must accept: positional tensors, then keyword-only settings."""

    positional: tuple[str, ...]
    keyword: tuple[str, ...]


@dataclass(frozen=True)
class Operation:
    name: str
    summary: str
    params: Params
    signature: str
    conventions: tuple[str, ...]
    comparison: str


def _op(
    name: str, summary: str, params: str, signature: str, conventions: tuple[str, ...], comparison: str
) -> Operation:
    positional, _, keyword = params.partition(";")
    return Operation(
        name, summary, Params(_names(positional), _names(keyword)), " ".join(signature.split()), conventions, comparison
    )


def _names(text: str) -> tuple[str, ...]:
    return tuple(a.strip() for a in text.split(",") if a.strip())


OPERATIONS: dict[str, Operation] = {
    op.name: op
    for op in (
        _op(
            "compression_prefill",
            "chunked compression of packed requests through their state rings",
            "score, latent, cu_seqlens, start_pos, state, state_index; ratio, overlap, ape",
            """fn(score: f32[T, C], latent: f32[T, C], cu_seqlens: i32[B+1], start_pos: i32[B],
            state: f32[N, S, 2, C] (in place), state_index: i32[B], *, ratio: int, overlap: bool,
            ape: f32[r, C] | None) -> (rows: f32|bf16[R, d], store_rows: i64[R]); R = sum_b max(1, nc_b),
            store_rows = compressed row index j or -1 for a placeholder (zero row)""",
            ("reserve_max1",),
            "rows within twice the f32 torch error (bf16: correctly rounded from the exact value +- 1 ulp); "
            "store_rows and the ring contents of the W - 1 newest positions exact",
        ),
        _op(
            "compression_decode",
            "decode / verify step of q new positions per request through the ring",
            "score, latent, cu_seqlens, start_pos, state, state_index; ratio, overlap, ape",
            """same arguments as compression_prefill; one output row per new position, zero and -1 where the
            position does not complete a group""",
            ("write_then_read", "read_then_write"),
            "as compression_prefill",
        ),
        _op(
            "index_scores",
            "I[m, j] = sum_h w[m, h] * relu(q[m, h] . k[j]) over each query's valid prefix",
            "q, weights, k, lengths;",
            """fn(q: f32|bf16[M, H, D], weights: f32[M, H], k: f32|bf16[N, D], lengths: i32[M]) -> f32[M, N];
            lanes j >= lengths[m] are not compared and must not be read""",
            (),
            "within twice the error of the same-precision torch einsum",
        ),
        _op(
            "topk",
            "top-k over the valid prefix of each score row",
            "scores, lengths, offsets; k",
            """fn(scores: f32[M, N], lengths: i32[M], offsets: i32[M], *, k: int) -> i32[M, k]; scores at or
            past lengths[m] hold garbage (NaN, +inf) and must never influence the result""",
            ("v4.1", "v4", "select"),
            "exact: the set of chosen lanes, their order and fill per convention; ties: lowest index wins",
        ),
        _op(
            "candidate_select",
            "V4.1 first-level candidate blocks: block max, newest block pinned, top blocks with score > -inf",
            "scores, lengths; block_size, topk_blocks",
            """fn(scores: f32[M, N], lengths: i32[M], *, block_size: int, topk_blocks: int) -> i32[M, topk_blocks]
            (kept block ids ascending, -1 fill)""",
            ("pinned+drop_nan", "unpinned+drop_nan", "pinned+propagate_nan", "unpinned+propagate_nan"),
            "exact",
        ),
        _op(
            "candidate_restore",
            "candidate-relative offsets back to logical compressed rows",
            "offsets, kept_blocks; block_size",
            "fn(offsets: i32[M, k], kept_blocks: i32[M, nb], *, block_size: int) -> i32[M, k], -1 kept",
            (),
            "exact",
        ),
        _op(
            "slot_translation",
            "logical compressed row -> paged physical slot through a block table",
            "rows, block_table; rows_per_block",
            """fn(rows: i32[M, k], block_table: i32[M, nblocks], *, rows_per_block: int) -> i64[M, k];
            slot = block_table[m, j // Bc] * Bc + j % Bc, -1 kept""",
            (),
            "exact",
        ),
        _op(
            "window_indices",
            "sliding-window ring slots each query attends to",
            "; window, seqlen, start_pos",
            "fn(*, window: int, seqlen: int, start_pos: int) -> i32[seqlen or 1, min(window, ...)] with -1 empty",
            ("v4", "v4.1"),
            "exact",
        ),
        _op(
            "quantize_store",
            "quantize rows into a paged cache at slots (-1 skipped), data rows before scale rows",
            "rows, slots, cache; fmt",
            "fn(rows: f32[R, d], slots: i64[R], cache: u8[num_blocks, block_bytes] (in place), *, fmt: str)",
            ("v4_584", "v41_fp8_528", "v41_fp4_288", "index_fp4_68", "index_fp8_132"),
            "exact bytes",
        ),
        _op(
            "gather_dequantize",
            "read rows back from a paged cache",
            "cache, slots; fmt",
            "fn(cache: u8[num_blocks, block_bytes], slots: i64[R], *, fmt: str) -> f32[R, d]",
            ("v4_584", "v41_fp8_528", "v41_fp4_288", "index_fp4_68", "index_fp8_132"),
            "exact: every dequantized value is a grid value times a power-of-two or e4m3 scale",
        ),
        _op(
            "sparse_attention",
            "sparse MQA attention with a sink over selected lanes",
            "q, kv, indices, sink; scale, dv",
            """fn(q: f32|bf16[M, H, D], kv: f32|bf16[N, D], indices: i32[M, K], sink: f32[H], *, scale: float,
            dv: int) -> (out: f32[M, H, dv], lse: f32[M, H])""",
            ("empty_zero", "empty_nan"),
            "within twice the error of the same-precision torch implementation",
        ),
    )
}


def operation(name: str) -> Operation:
    if name not in OPERATIONS:
        raise ValueError(f"op: unknown operation {name!r}; known: {', '.join(sorted(OPERATIONS))}")
    return OPERATIONS[name]


def require_convention(op: str, convention: str | None) -> None:
    known = operation(op).conventions
    if convention is None:
        if known and len(known) > 1:
            raise ValueError(f"convention: {op} needs one of {', '.join(known)}")
        return
    if convention not in known:
        raise ValueError(f"convention: {op} has no convention {convention!r}; known: {', '.join(known) or 'none'}")
