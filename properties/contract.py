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
7. Only the arguments an operation declares in place (``Params.in_place``: ``state`` for compression, ``cache``
   for quantize_store) may change; every other argument is an input and must hold the same bytes after the call,
   garbage lanes included, and no byte outside any argument may change (``properties.guards``, under
   ``csa fuzz``).
8. The arguments an operation lists in ``Operation.views`` may arrive as non-contiguous views (transposed, sliced,
   at a storage offset): the implementation gives the contiguous tensor's result or refuses the view with a
   ``ValueError`` naming the argument (``properties.strided``). Every other tensor argument (the in-place
   ``state`` and ``cache``, and ``gather_dequantize``'s paged ``cache``, whose bytes are addressed as blocks) is
   always contiguous.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reference.conventions import CONVENTIONS, OPTIONS, parse


@dataclass(frozen=True)
class Params:
    """The arguments an implementation must accept: positional tensors, then keyword-only settings.

    ``in_place``: the arguments the implementation writes (the signature's "(in place)"); every other argument
    is an input, compared byte for byte after each call under ``csa fuzz`` (``properties.guards``).
    """

    positional: tuple[str, ...]
    keyword: tuple[str, ...]
    in_place: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return (*self.positional, *self.keyword)


@dataclass(frozen=True)
class Operation:
    name: str
    summary: str
    params: Params
    signature: str
    conventions: tuple[str, ...]
    comparison: str
    options: tuple[str, ...] = ()
    """The options its conventions combine with, spelled ``convention+option`` (``reference.conventions.OPTIONS``)."""
    views: tuple[str, ...] = ()
    """The arguments that may arrive as non-contiguous views (rule 8)."""


def _op(
    name: str,
    summary: str,
    params: str,
    signature: str,
    comparison: str,
    in_place: tuple[str, ...] = (),
    contiguous: tuple[str, ...] = (),
) -> Operation:
    """One operation; its conventions are those ``reference.conventions`` names for it. Its tensor arguments
    (the positional ones) may arrive as views, except those in place and those named ``contiguous``."""
    positional, _, keyword = params.partition(";")
    declared = Params(_names(positional), _names(keyword), in_place)
    for argument, names in (("in_place", in_place), ("contiguous", contiguous)):
        unknown = [a for a in names if a not in declared.names]
        if unknown:
            raise ValueError(f"{argument}: {name} has no argument {unknown}")
    return Operation(
        name,
        summary,
        declared,
        " ".join(signature.split()),
        tuple(CONVENTIONS[name]),
        comparison,
        tuple(OPTIONS.get(name, {})),
        tuple(a for a in declared.positional if a not in (*in_place, *contiguous)),
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
            ape: f32[r, C] | None) -> (rows: f32|bf16[R, d], store_rows: i64[R], positions: i64[R]);
            R = sum_b max(1, nc_b), store_rows = compressed row index j or -1 for a placeholder (zero row),
            positions = each row's RoPE position, j * r (the first position of its group, V4 and V4.1 alike,
            reference.rope) or 0 where nothing is stored; position p of request b at
            state[state_index[b], p % S] (raw score, then latent); a ring below W - 1 slots raises""",
            "rows within twice the error of the worst same-precision torch formulation, lane by lane, floor 4 ulps "
            "of sum p|v| (docs/compression-properties.md); store_rows, positions and the ring contents of the W - 1 "
            "newest "
            "positions exact",
            in_place=("state",),
        ),
        _op(
            "compression_decode",
            "decode / verify step of q new positions per request through the ring",
            "score, latent, cu_seqlens, start_pos, state, state_index; ratio, overlap, ape",
            """same arguments and outputs as compression_prefill; one output row per new position, zero, store
            row -1 and position 0 where the position does not complete a group; a ring below the declared
            discipline's safe size for the call raises (write_then_read: W + q - 1, read_then_write: W - 1)""",
            "rows as compression_prefill; store_rows and positions exact; the ring holds exactly every position a "
            "later step may read after any acceptance and that S slots can still hold",
            in_place=("state",),
        ),
        _op(
            "index_scores",
            "I[m, j] = sum_h w[m, h] * relu(q[m, h] . k[j]) over the floor((p_m + 1) / r) rows query m sees",
            "q, weights, k, positions; ratio",
            """fn(q: f32|bf16[M, H, D], weights: f32[M, H], k: f32|bf16[N, D], positions: i32[M], *, ratio: int)
            -> f32[M, N]; query m at original position positions[m] sees rows j < (positions[m] + 1) // ratio
            (prefill: consecutive positions of one chunk; decode: one position per request); lanes past that
            are not compared, and key rows past it may hold NaN or inf; a position of -1 is a padding query
            (reference.conventions.PADDING_ROWS): it sees no row""",
            "lanes j < (p + 1) // r within twice the error of the same-precision torch einsum (ulp floor)",
        ),
        _op(
            "paged_index_scores",
            "index_scores of decode queries through a block table: next_n queries a request, each its own count",
            "q, weights, cache, block_table, lengths;",
            """fn(q: f32|bf16[B, T, H, D], weights: f32[B, T, H], cache: f32|bf16[num_blocks, Bc, D] (q's dtype),
            block_table: i32[B, max_blocks], lengths: i32[B, T]) -> f32[B * T, max_blocks * Bc]; query t of
            request b (row b * T + t; T = next_n, the speculative queries of one step) sees compressed rows
            j < lengths[b, t] (>= 0; 0: none, a whole request may see none), row j at
            cache[block_table[b, j // Bc], j % Bc]; I[b * T + t, j] = sum_h w[b, t, h] * relu(q[b, t, h] . row j);
            lanes past lengths[b, t] are not compared; table entries no query of the request reads may hold
            anything (-1, ids past the cache), and cache rows no query reads may hold NaN or inf""",
            "lanes j < lengths[b, t] within twice the error of the same-precision torch einsum over the gathered "
            "rows (ulp floor)",
        ),
        _op(
            "index_scores_fp8",
            "index scores of FP8 (e4m3) queries and keys with their scales, as deployed indexers run them",
            "q, q_scale, weights, k, k_scale, positions; ratio",
            """fn(q: u8[M, H, D], q_scale: f32[M, H], weights: f32[M, H], k: u8[N, D], k_scale: f32[N],
            positions: i32[M], *, ratio: int) -> f32[M, N]; q and k hold e4m3fn codes: query head (m, h) is
            q_scale[m, h] * e4m3(q[m, h]) with q_scale > 0, key row j is k_scale[j] * e4m3(k[j]) (any sign);
            otherwise as index_scores: lanes j < (positions[m] + 1) // ratio compared, key rows past that may hold
            NaN codes and scales, a position of -1 is a padding query""",
            "lanes j < (p + 1) // r within 2**-8 of the lane's magnitude sum_h |w| q_scale sum_d |q_d k_scale k_d| "
            "(reference.indexing.E4M3_DOT_BOUND: an e4m3 tensor-core dot's truncation), ulp floor",
        ),
        _op(
            "paged_index_scores_fp8",
            "paged_index_scores of FP8 queries against the FP8 index cache, as deployed indexers decode",
            "q, q_scale, weights, cache, block_table, lengths; rows_per_block",
            """fn(q: u8[B, T, H, D], q_scale: f32[B, T, H], weights: f32[B, T, H], cache: u8[num_blocks, Bc * (D +
            4)], block_table: i32[B, max_blocks], lengths: i32[B, T], *, rows_per_block: int) -> f32[B * T,
            max_blocks * Bc]; Bc = rows_per_block, D a multiple of 4; a block holds its Bc rows of D e4m3fn
            codes, then their Bc float32 scales (little-endian, 4-byte aligned); query head (b, t, h) is
            q_scale[b, t, h] * e4m3(q[b, t, h]) with q_scale > 0, row j of request b is scale * e4m3(codes) of
            row j % Bc of block block_table[b, j // Bc] (scale of either sign); otherwise as
            paged_index_scores: lanes j < lengths[b, t] compared, table entries and cache rows (codes and
            scales) no query reads may hold anything""",
            "as index_scores_fp8: lanes j < lengths[b, t] within 2**-8 of the lane's magnitude "
            "(reference.indexing.E4M3_DOT_BOUND), ulp floor",
            contiguous=("cache",),
        ),
        _op(
            "topk",
            "top-k over the valid prefix of each score row",
            "scores, lengths, offsets; k",
            """fn(scores: f32[M, N], lengths: i32[M], offsets: i32[M], *, k: int) -> i32[M, W]; scores at or
            past lengths[m] hold garbage (NaN, +inf, huge) and must never influence the result; the chosen
            rows are the first min(k, lengths[m]) by descending score (NaN > +inf > numbers > -inf, -0 == +0),
            ties to the lowest index; offsets[m] is added to lanes holding a row, never to fill lanes; the
            convention sets the width W, the lane order and the fill (reference.conventions.TOPK); lengths[m] ==
            -1 is a padding row (reference.conventions.PADDING_ROWS): every lane the fill, refused (ValueError)
            under v4-decode. Options (convention+option): ties_any (any valid top-k set: the chosen scores'
            multiset is the reference's), order_index / order_rank / order_any (the row lanes' order; fill lanes
            still last), neg_inf_excluded (a -inf row inside the valid prefix is never chosen: a fill lane instead;
            reference.selection, reference.topk.MaskedLanes)""",
            "exact: the chosen rows, their order, the fill lanes and the offsets per convention",
        ),
        _op(
            "candidate_select",
            "V4.1 first-level candidate blocks: block max, newest block pinned, top blocks with score > -inf",
            "scores, lengths; block_size, topk_blocks",
            """fn(scores: f32[M, N], lengths: i32[M], *, block_size: int, topk_blocks: int) -> i32[M, topk_blocks]
            (kept block ids ascending, -1 fill); rows at or past lengths[m] count as -inf whatever they hold;
            pinned: the block holding row lengths[m] - 1 scores +inf; blocks ranked NaN > +inf > numbers > -inf,
            ties to the lowest block; a block in a slot is kept unless it scores -inf (drop_nan: or NaN);
            lengths[m] == -1 is a padding row (reference.conventions.PADDING_ROWS): nothing kept. Options:
            ties_any (any blocks of the reference's scores), order_index / order_rank / order_any (the kept
            ids' order; -1 fill still last; reference.selection)""",
            "exact",
        ),
        _op(
            "candidate_restore",
            "candidate-relative offsets back to logical compressed rows",
            "offsets, candidate_blocks; block_size",
            """fn(offsets: i32[M, k], candidate_blocks: i32[M, nb], *, block_size: int) -> i32[M, k];
            o -> candidate_blocks[m, o // block_size] * block_size + o % block_size; -1 stays -1, and an
            offset into a padding block (-1) restores to -1; padding is exactly -1: a candidate block below -1
            raises ValueError""",
            "exact",
        ),
        _op(
            "candidate_remap",
            "columns of a sparse consumer's score row back to positions: the kept blocks sorted, cut at the length",
            "columns, candidate_blocks, lengths; block_size",
            """fn(columns: i32[M, k], candidate_blocks: i32[M, nb], lengths: i32[M], *, block_size: int)
            -> (positions: i32[M, k], counts: i32[M]); row m's columns score the positions below lengths[m] of
            its candidate blocks in ascending order (reference.candidates.kept_positions: blocks distinct, in
            any order, -1 padding anywhere, blocks wholly at or past the length adding nothing); counts[m] is
            how many there are, column c -> the c-th of them, -1 stays -1; columns are -1 or below counts[m]
            (vLLM candidate_blocks_to_sparse_indices' end, then sparse_topk_remap)""",
            "exact: positions and counts",
        ),
        _op(
            "slot_translation",
            "logical compressed row -> paged physical slot through a block table",
            "rows, block_table, lengths; block_size, ratio",
            """fn(rows: i32[M, K], block_table: i32[M, nblocks], lengths: i32[M], *, block_size: int, ratio: int)
            -> i64[M, K]; Bc = block_size // ratio, slot = block_table[m, j // Bc] * Bc + j % Bc, computed in
            int64; lane i is -1 when rows[m, i] == -1 or i >= lengths[m]. sentinel: lengths[m] == K and -1 lanes
            anywhere; count: lanes below lengths[m] hold rows, lanes at or past it hold garbage and are not read;
            lengths[m] == -1 is a padding row under both (reference.conventions.PADDING_ROWS): every lane -1.
            Option int32_slots: -> i32[M, K], slots int32 by design; block ids are drawn at most
            2**31 // Bc - 1 (reference.addressing.max_block_id), which keeps every slot exact""",
            "exact, int64 (int32_slots: int32); a slot off by 2**32 is reported as an int32 overflow",
        ),
        _op(
            "gathered_rows",
            "prefill's gathered layout: each request's offset added to its row lanes",
            "rows, offsets;",
            "fn(rows: i32[M, K], offsets: i64[M]) -> i64[M, K]; rows[m, i] + offsets[m], -1 stays -1",
            "exact, int64",
        ),
        _op(
            "window_indices",
            "sliding-window ring slots each query attends to",
            "; window, seqlen, start_pos",
            """fn(*, window: int, seqlen: int, start_pos: int) -> i32[R, W]; start_pos == 0: prefill, R = seqlen,
            W = min(window, seqlen), query i lists positions max(0, i - window + 1) .. i oldest first, -1 after;
            start_pos > 0: decode of the one query at start_pos (seqlen == 1), R = 1, W = window ring slots
            oldest first; -1 lanes last (v4) or first (v4.1) while the ring fills""",
            "exact",
        ),
        _op(
            "window_release",
            "sliding-window cache blocks a request may release once a step of D positions is scheduled",
            "seq_lens, step_lens; window, block_size",
            """fn(seq_lens: i32[B], step_lens: i32[B], *, window: int, block_size: int) -> i32[B]; request b has
            scheduled a step of D = step_lens[b] >= 1 positions and its tentative length S = seq_lens[b] >= D counts
            them; the answer is how many leading blocks (block_size positions each, blocks 0 .. n - 1, cumulative)
            it may have released: max(0, S - (window + D - 1)) // block_size, every block wholly older than what the
            step's first query reads, which is older than anything the next step reads after any acceptance (the
            newest window + D - 1 positions stay reserved until verification; one rule for both window conventions,
            which read the same positions)""",
            "exact",
        ),
        _op(
            "compressed_indices",
            "every compressed row each query sees: the index list of a V4 layer without an indexer (ratio 128)",
            "; ratio, seqlen, start_pos, offset",
            """fn(*, ratio: int, seqlen: int, start_pos: int, offset: int) -> i32[seqlen, W],
            W = (start_pos + seqlen) // ratio; the query at position p = start_pos + i lists rows
            0 .. (p + 1) // ratio - 1 ascending, each plus offset, then -1 (prefill from 0 and one-token decode:
            the public V4 get_compress_topk_idxs; a step of several queries counts per query, never
            end_pos // ratio for all)""",
            "exact",
        ),
        _op(
            "quantize_store",
            "quantize rows into layer `layer` of a paged multi-layer cache at slots (-1 skipped), public layouts",
            "rows, slots, cache; fmt, rows_per_block, layer",
            """fn(rows: f32[R, d], slots: i64[R], cache: u8[num_blocks, layers * block_bytes] (in place), *,
            fmt: str, rows_per_block: int, layer: int) -> None; fmt is the convention name; block_bytes =
            public_layout(fmt, rows_per_block).block_bytes (V4 584 B and the index formats: all data parts, then
            all scale parts, V4 blocks padded to a multiple of 576 B; V4.1 528 / 288 B: row after row); block b
            holds one page of block_bytes per layer, layer l's at (b * layers + l) * block_bytes
            (reference.cache_blocks.page_offset); slot s of layer l is row s % rows_per_block of layer l's page of
            block s // rows_per_block, and no layer's data or scale part lies in another's; valid slots are
            distinct; a row at slot -1 may hold anything (NaN, inf) and is neither read nor written; a stored row
            holding NaN or +-inf, or a value the format cannot store (a RoPE value that overflows bf16), raises
            ValueError before any byte is written; no byte outside the stored rows' data and scale parts changes
            (the V4 pad byte: 0 or untouched). Options: bf16_rows (rows: bf16[R, d], values on bf16's grid and
            range), f32_scale (group scales computed in f32: the quotient rounded to f32, log2 correctly rounded to
            f32, reference.scales.Arithmetic.F32); the kernel's fmt is the base format name""",
            "exact bytes (a -0.0 input may give either zero code)",
            in_place=("cache",),
        ),
        _op(
            "gather_dequantize",
            "read rows back from layer `layer` of a paged multi-layer cache and dequantize them",
            "cache, slots; fmt, rows_per_block, layer",
            """fn(cache: u8[num_blocks, layers * block_bytes], slots: i64[R], *, fmt: str, rows_per_block: int,
            layer: int) -> f32[R, d]; layout as quantize_store; slots >= 0 in any order, repeats allowed; pad
            bytes, block padding, other rows and other layers are never read; codes are finite (NaN codes are
            outside the contract)""",
            "exact: every value equals the reference decoding of the stored bytes (sign of zero not compared)",
            contiguous=("cache",),
        ),
        _op(
            "norm_rope_store",
            "the fused compressor path's tail: RMSNorm, RoPE, then quantize_store of compressed rows",
            "rows, weight, cos_sin, positions, slots, cache; fmt, rows_per_block, layer, eps, rope_dim",
            """fn(rows: f32[R, d], weight: f32[d], cos_sin: f32[P, rope_dim], positions: i64[R], slots: i64[R],
            cache: u8[num_blocks, layers * block_bytes] (in place), *, fmt: str, rows_per_block: int, layer: int,
            eps: float, rope_dim: int) -> None; row r becomes y = x * w / sqrt(mean(x^2) + eps), its last
            rope_dim values rotated in interleaved pairs (e, o) -> (e c - o s, o c + e s) by row positions[r] of
            cos_sin (cos in its first rope_dim / 2 columns, sin in the rest), and y is quantized and stored as
            quantize_store stores it (fmt, layout, layers, distinct slots, a row at slot -1 neither read nor
            written, no other byte changed); stored rows are finite, their squares' mean below float32's
            largest value (reference.norm_rope)""",
            "faithful (reference.norm_rope.faithful): each stored scale, element and bf16 value is what quantizing "
            "some row within 2^-7 of the exact one gives (per value: of |y_i|, or of |e c| + |o s| where rotated); "
            "every byte outside the stored rows' data and scale parts unchanged",
            in_place=("cache",),
        ),
        _op(
            "sparse_attention",
            "sparse MQA attention with a sink over selected lanes",
            "q, kv, indices, sink; scale, dv",
            """fn(q: f32|bf16[M, H, D], kv: f32|bf16[N, D], indices: i32[M, K], sink: f32[H], *, scale: float,
            dv: int) -> (out: f32[M, H, dv], lse: f32[M, H]); the value of cache row j is kv[j, :dv];
            out = sum_j e^{s_j} v_j / (e^{sink} + sum_j e^{s_j}), s_j = scale * q . kv[j], over the row's valid
            lanes in any order (a lane listed twice counts twice); lse = ln sum_j e^{s_j} (no sink); sink -inf:
            none, +inf: output 0. Convention "INVALID+EMPTY": INVALID minus_one_only (only -1 is skipped, every
            other lane is in [0, N)) or out_of_range (every lane < 0 or >= N is skipped); EMPTY, for a row with
            no valid lane: empty_zero (out 0, lse +inf) or empty_nan (out NaN, lse NaN)""",
            "within twice the error of same-precision (f32) torch implementations, lane by lane",
        ),
        _op(
            "sparse_attention_fp8_kv",
            "sparse_attention reading an FP8 paged KV cache in place (V4 584 B, V4.1 528 B)",
            "q, cache, slots, sink; scale, rows_per_block",
            """fn(q: f32|bf16[M, H, 512], cache: u8[num_blocks, block_bytes], slots: i32[M, K], sink: f32[H], *,
            scale: float, rows_per_block: int) -> (out: f32[M, H, 512], lse: f32[M, H]); one layer in
            quantize_store's layout (convention: the format); the key and the value of slot s are the whole
            512-wide row gather_dequantize reads at s (V4: 448 e4m3 values under their UE8M0 scales, then the
            64 bf16 ones); out and lse as sparse_attention's with dv = 512, under out_of_range+empty_zero: every
            slot < 0 or >= num_blocks * rows_per_block is skipped and never read, a row with no valid slot gives
            out 0 and lse +inf; read slots hold finite codes""",
            "within twice the error of same-precision (f32) torch implementations on the decoded rows, lane by lane",
            contiguous=("cache",),
        ),
        _op(
            "sparse_attention_bf16",
            "sparse_attention of bf16 q and kv with bf16 probabilities, as FlashMLA-style kernels run it",
            "q, kv, indices, sink; scale, dv",
            """fn(q: bf16[M, H, 512], kv: bf16[N, 512], indices: i32[M, K], sink: f32[H], *, scale: float,
            dv: int) -> (out: f32[M, H, 512], lse: f32[M, H]); dv = 512: the value of cache row j is the whole
            row kv[j]; the formula, lanes, sink and conventions ("INVALID+EMPTY") of sparse_attention; the
            implementation may round each probability e^{s_j - m} (m: the row's maximum, or a running maximum at
            or above s_j) to bf16 once before p @ v, with scores, sums and the accumulator in f32; q, kv or dv
            off this signature: ValueError (TypeError for a dv that is no int) naming it""",
            "within twice the error of same-precision torch implementations that round the probabilities to bf16 "
            "once before p @ v (f32 accumulation), lane by lane; out's floors: 2^-7 to 2^-6 of the lane's magnitude "
            "sum_j p_j |v_j| / (e^{sink} + sum_j p_j), and 2^-126 (1 + sum_j |v_j|) over that denominator "
            "(subnormals flushed); lse's: float32's",
        ),
    )
}


def operation(name: str) -> Operation:
    if name not in OPERATIONS:
        raise ValueError(f"op: unknown operation {name!r}; known: {', '.join(sorted(OPERATIONS))}")
    return OPERATIONS[name]


def require_convention(op: str, convention: str | None) -> None:
    """``convention`` is one of ``op``'s conventions, optionally followed by options (``v4.1+ties_any``)."""
    known = operation(op).conventions
    if convention is None:
        if known and len(known) > 1:
            raise ValueError(f"convention: {op} needs one of {', '.join(known)}")
        return
    if not known:
        raise ValueError(f"convention: {op} has no convention {convention!r}; known: none")
    try:
        parse(op, convention)
    except ValueError as err:
        if str(err).startswith("convention: unknown convention"):
            raise ValueError(f"convention: {op} has no convention {convention!r}; known: {', '.join(known)}") from err
        raise


def check_signature(fn: Callable[..., Any], op: str) -> None:
    """``fn`` accepts the arguments ``op`` passes (its positional tensors, then its keyword settings); a
    ``ValueError`` naming them otherwise. A callable whose signature cannot be read is let through."""
    needed = operation(op).params
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*[None] * len(needed.positional), **dict.fromkeys(needed.keyword))
    except TypeError as err:
        want = ", ".join([*needed.positional, *[f"{k}=" for k in needed.keyword]])
        raise ValueError(f"fn: {op} needs a callable accepting ({want}); {signature} does not: {err}") from err
