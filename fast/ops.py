"""The project's kernels as ``torch.library`` custom operators, namespace ``csa`` (``torch.ops.csa.<name>``).

A model that calls these compiles with ``torch.compile(fullgraph=True)``: each operator is one opaque node with a
fake (meta) implementation that gives its outputs' shapes and dtypes, and declares the arguments it changes in
place (``Tensor(a!)`` in its schema: ``state``, ``cache``). Every operator runs the Triton kernel where Triton can
run it (CUDA tensors, or CPU tensors under ``TRITON_INTERPRET=1``) and the torch twin otherwise.

``validate=False`` skips the checks that read tensor values back to the host (ranges, block ids), so a call
makes no host synchronisation and can be captured in a CUDA graph; shapes, dtypes and devices are always checked.
``compress_decode`` then needs ``max_new``, the most new positions of any request (an engine's speculative step
size), instead of reading the per-request counts: its kernel reads them on the device.

Each operator is one :class:`Operator` record: its schema (the one place its arguments are spelled out), the
call into ``fast`` and the fake. The schema's leading ``Tensor`` arguments reach the ``fast`` function
positionally, the rest by name, with the schema's defaults filled in.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from reference.conventions import FORMATS, TOPK
from reference.topk import lane_layout

NAMESPACE = "csa"
_LIBRARY = torch.library.Library(NAMESPACE, "DEF")


def _backend(device: torch.device) -> str:
    return "triton" if device.type == "cuda" or os.environ.get("TRITON_INTERPRET") == "1" else "torch"


def _indexing(name: str) -> Callable[..., Any]:
    """``name`` of the indexing backend of the first tensor's device (``fast.indexing.backends``)."""

    def call(*tensors: torch.Tensor, **options: Any) -> Any:
        from fast.indexing import backends

        device = tensors[0].device if tensors else torch.device(options["device"])
        backend = backends.torch_backend() if _backend(device) == "torch" else backends.triton_backend()
        return getattr(backend, name)(*tensors, **options)

    return call


def _with_backend(module: str, name: str) -> Callable[..., Any]:
    """``module.name``, told the backend of the first tensor's device."""

    def call(*tensors: torch.Tensor, **options: Any) -> Any:
        fn = getattr(importlib.import_module(module), name)
        return fn(*tensors, backend=_backend(tensors[0].device), **options)

    return call


def _compressed(result: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return result.rows, result.store_slots, result.positions


def _compress_prefill(*tensors: torch.Tensor, **options: Any) -> tuple[torch.Tensor, ...]:
    from fast import compression

    return _compressed(compression.compress_prefill(*tensors, backend=_backend(tensors[0].device), **options))


def _compress_decode(*tensors: torch.Tensor, max_new: int, validate: bool, **options: Any) -> tuple[torch.Tensor, ...]:
    from fast import compression

    backend = _backend(tensors[0].device)
    if validate or backend == "torch":  # the torch backend needs the per-request counts a bounded plan lacks
        return _compressed(compression.compress_decode(*tensors, backend=backend, **options))
    plan = compression.bounded_decode_plan(*tensors, max_new=max_new, **options)
    return _compressed(compression.launch(plan, backend))


def _store(*tensors: torch.Tensor, **options: Any) -> None:
    _with_backend("fast.cache", "quantize_store")(*tensors, **options)


def _compressed_rows(score: torch.Tensor, overlap: bool, rows: Any) -> tuple[torch.Tensor, ...]:
    d = score.shape[1] // (2 if overlap else 1)
    return score.new_empty(rows, d), score.new_empty(rows, dtype=torch.int64), score.new_empty(rows, dtype=torch.int64)


def _topk_fake(scores: torch.Tensor, k: int, convention: str, **_: Any) -> torch.Tensor:
    if convention not in TOPK:
        raise ValueError(f"convention: must be one of {', '.join(TOPK)}, got {convention!r}")
    lanes = lane_layout(TOPK[convention].rule).lanes(k, scores.shape[1])
    return scores.new_empty(scores.shape[0], lanes, dtype=torch.int32)


@dataclass(frozen=True)
class Operator:
    """One ``torch.ops.csa`` operator: ``schema`` names its arguments and results (torch's schema language),
    ``run`` calls ``fast`` with the leading tensor arguments positionally and the rest by name, ``fake`` gives
    the outputs' shapes from every argument by name."""

    name: str
    schema: str
    run: Callable[..., Any]
    fake: Callable[..., Any]
    doc: str


OPERATOR_RECORDS = (
    Operator(
        "compress_prefill",
        "(Tensor score, Tensor latent, Tensor cu_seqlens, Tensor start_pos, Tensor(a!) state, Tensor state_index, "
        "int ratio, bool overlap, Tensor? ape) -> (Tensor, Tensor, Tensor)",
        _compress_prefill,
        lambda score, overlap, **_: _compressed_rows(score, overlap, torch.library.get_ctx().new_dynamic_size()),
        "(rows f32[R, d], store rows i64[R], RoPE positions i64[R]); R = sum over requests of max(1, completed rows)",
    ),
    Operator(
        "compress_decode",
        "(Tensor score, Tensor latent, Tensor cu_seqlens, Tensor start_pos, Tensor(a!) state, Tensor state_index, "
        "int ratio, bool overlap, Tensor? ape, int max_new=0, bool validate=True) -> (Tensor, Tensor, Tensor)",
        _compress_decode,
        lambda score, overlap, **_: _compressed_rows(score, overlap, score.shape[0]),
        "(rows f32[T, d], store rows i64[T], RoPE positions i64[T]): one row per new position",
    ),
    Operator(
        "index_logits",
        "(Tensor q, Tensor weights, Tensor k, Tensor lengths, Tensor? k_scale=None, Tensor? q_scale=None, "
        "bool validate=True) -> Tensor",
        _indexing("index_logits"),
        lambda q, k, **_: q.new_empty(q.shape[0], k.shape[0], dtype=torch.float32),
        "f32[M, N]: sum_h w[m, h] relu(q[m, h] . k[j]) for j < lengths[m], -inf past it",
    ),
    Operator(
        "paged_index_logits",
        "(Tensor q, Tensor weights, Tensor cache, Tensor block_table, Tensor lengths, int rows_per_block, "
        "int? width=None, Tensor? q_scale=None, bool validate=True) -> Tensor",
        _indexing("paged_index_logits"),
        lambda q, block_table, rows_per_block, width, **_: q.new_empty(
            q.shape[0] * q.shape[1],
            block_table.shape[1] * rows_per_block if width is None else width,
            dtype=torch.float32,
        ),
        "f32[B * next_n, W]: query (b, t) scores the rows j < lengths[b, t] it reads through block_table[b], -inf "
        "past them; W = width or max_blocks * rows_per_block",
    ),
    Operator(
        "topk",
        "(Tensor scores, Tensor lengths, Tensor? offsets, int k, str convention='v4.1', bool validate=True) -> Tensor",
        _indexing("topk"),
        _topk_fake,
        "i32[M, lanes]: the valid-prefix top-k of each row under convention (reference.conventions.TOPK)",
    ),
    Operator(
        "candidate_select",
        "(Tensor scores, Tensor lengths, int block_size, int topk_blocks, bool pin_newest=True, bool drop_nan=True, "
        "bool validate=True) -> Tensor",
        _indexing("candidate_select"),
        lambda scores, topk_blocks, **_: scores.new_empty(scores.shape[0], topk_blocks, dtype=torch.int32),
        "i32[M, topk_blocks]: the kept candidate blocks, ascending, -1 fill",
    ),
    Operator(
        "candidate_restore",
        "(Tensor offsets, Tensor candidate_blocks, int block_size, bool validate=True) -> Tensor",
        _indexing("candidate_restore"),
        lambda offsets, **_: torch.empty_like(offsets, dtype=torch.int32),
        "i32 like offsets: candidate-relative offsets restored to logical rows (-1 stays -1)",
    ),
    Operator(
        "candidate_remap",
        "(Tensor columns, Tensor candidate_blocks, Tensor lengths, int block_size, bool validate=True) "
        "-> (Tensor, Tensor)",
        _indexing("candidate_remap"),
        lambda columns, **_: (
            torch.empty_like(columns, dtype=torch.int32),
            columns.new_empty(columns.shape[0], dtype=torch.int32),
        ),
        "(positions i32 like columns, counts i32[M]): each column the c-th visible position of the candidate "
        "blocks, ascending (-1 kept), with each row's count",
    ),
    Operator(
        "slot_translation",
        "(Tensor rows, Tensor block_table, Tensor lengths, int rows_per_block, str guard='count', "
        "bool validate=True) -> Tensor",
        _indexing("slot_translation"),
        lambda rows, **_: torch.empty_like(rows, dtype=torch.int64),
        "i64 like rows: logical compressed rows to paged slots (reference.conventions.SLOT_TRANSLATION)",
    ),
    Operator(
        "gathered_rows",
        "(Tensor rows, Tensor offsets, bool validate=True) -> Tensor",
        _indexing("gathered_rows"),
        lambda rows, **_: torch.empty_like(rows, dtype=torch.int64),
        "i64 like rows: each request's offset added to its row lanes, -1 kept",
    ),
    Operator(
        "decode_window_indices",
        "(Tensor positions, int window, str order='v4.1', bool validate=True) -> Tensor",
        _indexing("decode_window_indices"),
        lambda positions, window, **_: positions.new_empty(positions.shape[0], window, dtype=torch.int32),
        "i32[B, window]: the ring slots the decode query at each position attends to (reference.window)",
    ),
    Operator(
        "compressed_indices",
        "(int ratio, int seqlen, int start_pos, int offset, Device device) -> Tensor",
        _indexing("compressed_indices"),
        lambda ratio, seqlen, start_pos, device, **_: torch.empty(
            seqlen, (start_pos + seqlen) // ratio, dtype=torch.int32, device=device
        ),
        "i32[seqlen, (start_pos + seqlen) // ratio]: every compressed row each query sees, plus offset, then -1 "
        "(the index list of a V4 layer without an indexer)",
    ),
    Operator(
        "window_release",
        "(Tensor seq_lens, Tensor step_lens, int window, int block_size, bool validate=True) -> Tensor",
        lambda *tensors, **options: importlib.import_module("fast.indexing.window").window_release(*tensors, **options),
        lambda seq_lens, **_: torch.empty_like(seq_lens, dtype=torch.int32),
        "i32[B]: the leading sliding-window blocks each request may release once a step is scheduled (torch)",
    ),
    Operator(
        "quantize_store",
        "(Tensor rows, Tensor slots, Tensor(a!) cache, str fmt, int rows_per_block, int layers=1, int layer=0) -> ()",
        _store,
        lambda **_: None,
        "quantize rows into layer layer's pages of the paged cache at slots (-1 skipped), in the format's layout",
    ),
    Operator(
        "norm_rope_store",
        "(Tensor rows, Tensor weight, Tensor cos_sin, Tensor positions, Tensor slots, Tensor(a!) cache, str fmt, "
        "float eps, int rope_dim, int rows_per_block, int layers=1, int layer=0) -> ()",
        _with_backend("fast.cache", "norm_rope_store"),
        lambda **_: None,
        "RMSNorm, RoPE on the last rope_dim values, then quantize_store of the rows into the paged cache at slots",
    ),
    Operator(
        "gather_dequantize",
        "(Tensor cache, Tensor slots, str fmt, int rows_per_block, int layers=1, int layer=0) -> Tensor",
        _with_backend("fast.cache", "gather_dequantize"),
        lambda cache, slots, fmt, **_: cache.new_empty(slots.shape[0], FORMATS[fmt].rule.dims, dtype=torch.float32),
        "f32[R, d]: the rows stored at slots of layer layer, dequantized",
    ),
    Operator(
        "sparse_attention",
        "(Tensor q, Tensor kv, Tensor indices, Tensor? sink, float scale, int dv, str empty_row='zero', "
        "str invalid='out_of_range') -> (Tensor, Tensor)",
        _with_backend("fast.cache", "sparse_attention"),
        lambda q, dv, **_: (
            q.new_empty(q.shape[0], q.shape[1], dv, dtype=torch.float32),
            q.new_empty(q.shape[0], q.shape[1], dtype=torch.float32),
        ),
        "(out f32[M, H, dv], lse f32[M, H]): sparse MQA attention with a sink over the lanes indices",
    ),
)


def _bound(schema: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Every argument of a call by name, the schema's defaults where the call left one out."""
    named = dict(zip((a.name for a in schema.arguments), args, strict=False)) | kwargs
    return {a.name: named[a.name] if a.name in named else a.default_value for a in schema.arguments}


def _leading_tensors(schema: Any) -> int:
    """How many arguments, from the first, are tensors (``Tensor``; an optional one goes by name)."""
    count = 0
    for argument in schema.arguments:
        if str(argument.type) != "Tensor":
            break
        count += 1
    return count


def _register(op: Operator) -> Any:
    qualname = f"{NAMESPACE}::{op.name}"
    torch.library.define(qualname, op.schema, lib=_LIBRARY)
    overload = getattr(torch.ops.csa, op.name).default
    schema = overload._schema
    leading = _leading_tensors(schema)

    def kernel(*args: Any, **kwargs: Any) -> Any:
        values = list(_bound(schema, args, kwargs).items())
        return op.run(*(v for _, v in values[:leading]), **dict(values[leading:]))

    torch.library.impl(qualname, "default", kernel, lib=_LIBRARY)
    torch.library.register_fake(qualname, lambda *a, **k: op.fake(**_bound(schema, a, k)), lib=_LIBRARY)
    packet = getattr(torch.ops.csa, op.name)
    packet.__doc__ = op.doc
    return packet


for _op in OPERATOR_RECORDS:
    globals()[_op.name] = _register(_op)

OPERATORS = tuple(op.name for op in OPERATOR_RECORDS)
"""Every operator this module registers, as ``torch.ops.csa.<name>`` (and ``fast.ops.<name>``)."""
