"""Every named convention of the contract, written once: its name, the exact rule the reference follows, and a
one-line summary of its lanes, fill and order.

Where the public implementations disagree (docs/indexing.md, docs/ring-safety.md, docs/attention.md), each
choice is a named convention. The contract's operations, the fast kernels' validators, the property tables and
the registrations all take their convention names and rules from :data:`CONVENTIONS`.

Choices that combine with any convention of an operation are options (:data:`OPTIONS`), spelled after the
convention with ``+``: ``v4.1+ties_any+order_rank``, ``sentinel+int32_slots``, ``v41_fp8_528+bf16_rows+f32_scale``.
:func:`parse` reads such a name into a :class:`Chosen` (the base convention, its options in table order).
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from reference import addressing, attention, candidates, formats, padding, scales, selection, state, topk, window

R = TypeVar("R")
E = TypeVar("E", bound=enum.Enum)


@dataclass(frozen=True)
class Convention(Generic[R]):
    """One named convention: ``rule`` is the object the reference's functions take for it."""

    name: str
    rule: R
    summary: str


def _table(*conventions: Convention[R]) -> dict[str, Convention[R]]:
    return {c.name: c for c in conventions}


RESERVE_MAX1: Final = "max(1, nc) rows per request"
"""Prefill's reservation (seed 000, A.1.1): a request completing no row still reserves a zero placeholder row."""

COMPRESSION_PREFILL = _table(
    Convention("reserve_max1", RESERVE_MAX1, "max(1, nc) rows a request; a placeholder is a zero row stored at -1"),
)
COMPRESSION_DECODE = _table(
    Convention(state.WRITE_THEN_READ, state.WRITE_THEN_READ, "writes every new position, then reads whole windows"),
    Convention(state.READ_THEN_WRITE, state.READ_THEN_WRITE, "reads old positions from the ring, then writes"),
)
TOPK: dict[str, Convention[topk.TopKConvention]] = _table(
    Convention("v4.1", topk.V41TopK(width=topk.Width.FIXED), "k lanes, ascending index, -1 fill"),
    Convention("v4.1-clamped", topk.V41TopK(width=topk.Width.CLAMPED), "min(k, N) lanes, ascending index, -1 fill"),
    Convention("v4-prefill", topk.V4TopK(topk.Phase.PREFILL), "min(k, N) lanes, rank order, -1 fill"),
    Convention("v4-decode", topk.V4TopK(topk.Phase.DECODE), "lengths == N, min(k, N) lanes, rank order, no fill"),
    Convention("select", topk.SelectTopK(), "k lanes, ascending index, INT32_MAX fill"),
    Convention("select-unsorted", topk.SelectTopK(sorted_index=False), "k lanes, rank order, INT32_MAX fill"),
)
_DROP, _KEEP = candidates.NanPolicy.DROP, candidates.NanPolicy.PROPAGATE
CANDIDATE_SELECT = _table(
    Convention("pinned+drop_nan", candidates.CandidateRule(True, _DROP), "newest block pinned to +inf, NaN dropped"),
    Convention("unpinned+drop_nan", candidates.CandidateRule(False, _DROP), "no pinned block, NaN blocks dropped"),
    Convention("pinned+propagate_nan", candidates.CandidateRule(True, _KEEP), "newest block pinned, NaN blocks kept"),
    Convention("unpinned+propagate_nan", candidates.CandidateRule(False, _KEEP), "no pinned block, NaN blocks kept"),
)
SLOT_TRANSLATION = _table(
    Convention("sentinel", addressing.LaneGuard.SENTINEL, "lengths == K; a -1 lane anywhere stays -1"),
    Convention("count", addressing.LaneGuard.COUNT, "lanes below lengths[m] hold rows; the rest are not read"),
)
WINDOW_INDICES = _table(
    Convention("v4", window.WindowOrder.V4, "decode: occupied slots first, -1 lanes last"),
    Convention("v4.1", window.WindowOrder.V41, "decode: -1 lanes first, then the occupied slots"),
)
FORMATS = _table(
    Convention(
        formats.V4_MAIN_FP8.name, formats.V4_MAIN_FP8, "V4 main: 448 e4m3 + 64 bf16, 7 UE8M0 scales + 1 pad (584 B)"
    ),
    Convention(formats.V41_MAIN_FP8.name, formats.V41_MAIN_FP8, "V4.1 main FP8: 512 e4m3, 16 UE8M0 scales (528 B)"),
    Convention(
        formats.V41_MAIN_FP4.name, formats.V41_MAIN_FP4, "V4.1 main FP4: 256 B packed e2m1, 32 E4M3 scales (288 B)"
    ),
    Convention(formats.INDEX_FP4.name, formats.INDEX_FP4, "index FP4: 64 B packed e2m1, 4 UE8M0 scales (68 B)"),
    Convention(formats.INDEX_FP8.name, formats.INDEX_FP8, "index FP8: 128 e4m3, one fp32 power-of-two scale (132 B)"),
)
SPARSE_ATTENTION = _table(
    *(
        Convention(
            f"{invalid}+empty_{empty}",
            attention.LaneRules(invalid, empty),
            f"{'only -1 skipped' if invalid == 'minus_one_only' else 'lanes < 0 or >= N skipped'}; "
            f"an empty row gives {'out 0, lse +inf' if empty == 'zero' else 'NaN'}",
        )
        for invalid in ("minus_one_only", "out_of_range")
        for empty in ("zero", "nan")
    )
)

FP8_KV_ATTENTION = {name: FORMATS[name] for name in (formats.V4_MAIN_FP8.name, formats.V41_MAIN_FP8.name)}
"""The paged FP8 caches sparse attention reads in place (D = dv = 512), as FlashMLA's FP8 sparse decode does."""
BF16_ATTENTION = SPARSE_ATTENTION
"""sparse_attention_bf16 skips lanes and answers empty rows as sparse_attention does: the same conventions."""

PADDING_ROWS = _table(
    Convention(
        "padding_row",
        padding.PADDING_ROW,
        "length -1: a CUDA-graph padding row, answered as length 0 (every lane empty); v4-decode refuses it",
    ),
)
"""How every operation that takes per-row lengths reads a length of -1 (``reference.padding``): one rule for all
of them, not a choice between implementations, so it is not among any operation's conventions below."""
PADDED_OPERATIONS: Final = ("index_scores", "index_scores_fp8", "topk", "candidate_select", "slot_translation")
"""The operations ``PADDING_ROWS`` applies to (index scores: a query at position -1)."""

CONVENTIONS: dict[str, Mapping[str, Convention[Any]]] = {
    "compression_prefill": COMPRESSION_PREFILL,
    "compression_decode": COMPRESSION_DECODE,
    "index_scores": {},
    "paged_index_scores": {},
    "index_scores_fp8": {},
    "paged_index_scores_fp8": {},
    "topk": TOPK,
    "candidate_select": CANDIDATE_SELECT,
    "candidate_restore": {},
    "candidate_remap": {},
    "slot_translation": SLOT_TRANSLATION,
    "gathered_rows": {},
    "window_indices": WINDOW_INDICES,
    "window_release": {},
    "compressed_indices": {},
    "quantize_store": FORMATS,
    "gather_dequantize": FORMATS,
    "norm_rope_store": FORMATS,
    "sparse_attention": SPARSE_ATTENTION,
    "sparse_attention_fp8_kv": FP8_KV_ATTENTION,
    "sparse_attention_bf16": BF16_ATTENTION,
}
"""Operation name -> its conventions, by name (an operation the public code agrees on has none)."""


OPTION_SEPARATOR: Final = "+"
"""A convention with options is spelled ``base+option+option``: ``v4.1+ties_any+order_rank``."""


@dataclass(frozen=True)
class Option:
    """A named option that combines with an operation's conventions: ``rule`` is the enum member the reference
    takes for it. Two options whose rules are members of one enum exclude each other (one lane order)."""

    name: str
    rule: enum.Enum
    summary: str
    bases: tuple[str, ...] | None = None
    """The base conventions it combines with (None: every one)."""


def _options(*options: Option) -> dict[str, Option]:
    return {o.name: o for o in options}


TIES_ANY = Option(
    "ties_any", selection.Ties.ANY, "ties broken as torch.topk may: any valid top-k set (same keys), not the lowest"
)
ORDER_INDEX = Option("order_index", selection.Order.INDEX, "chosen lanes by ascending index")
ORDER_RANK = Option("order_rank", selection.Order.RANK, "chosen lanes by descending score")
ORDER_ANY = Option("order_any", selection.Order.ANY, "chosen lanes in any order (fill lanes still last)")
_MASKABLE = tuple(n for n, c in TOPK.items() if hasattr(c.rule, "masked_lanes"))
OPTIONS: dict[str, Mapping[str, Option]] = {
    "topk": _options(
        TIES_ANY,
        ORDER_INDEX,
        ORDER_RANK,
        ORDER_ANY,
        Option(
            "neg_inf_excluded",
            topk.MaskedLanes.EXCLUDED,
            "-inf lanes inside the valid prefix never chosen (fill instead)",
            _MASKABLE,
        ),
    ),
    "candidate_select": _options(TIES_ANY, ORDER_INDEX, ORDER_RANK, ORDER_ANY),
    "slot_translation": _options(
        Option("int32_slots", addressing.SlotWidth.INT32, "i32 slots; block ids bounded so every slot fits int32")
    ),
    "quantize_store": _options(
        Option("bf16_rows", formats.RowDtype.BF16, "bf16 input rows (values on bf16's grid and range)"),
        Option("f32_scale", scales.Arithmetic.F32, "group scales computed in f32 arithmetic, roundings included"),
    ),
}
"""Operation name -> the options its conventions combine with (``base+option``), by name."""


@dataclass(frozen=True)
class Chosen:
    """A convention as an implementation declares it: the base convention and its options (in table order)."""

    op: str
    base: str
    options: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The canonical spelling: the base, then the options in ``OPTIONS`` order."""
        return OPTION_SEPARATOR.join((self.base, *self.options))

    @property
    def rule(self) -> Any:
        """The base convention's rule, with each option whose enum is a field of it folded in
        (``neg_inf_excluded`` sets a top-k rule's ``masked_lanes``)."""
        found = CONVENTIONS[self.op][self.base].rule if CONVENTIONS[self.op] else None
        for name in self.options:
            option = OPTIONS[self.op][name]
            if dataclasses.is_dataclass(found) and not isinstance(found, type):
                for field in dataclasses.fields(found):
                    if isinstance(getattr(found, field.name), type(option.rule)):
                        found = dataclasses.replace(found, **{field.name: option.rule})
        return found

    def setting(self, kind: type[E], default: E) -> E:
        """The rule of the option of enum ``kind`` the convention holds, else ``default``."""
        for name in self.options:
            rule = OPTIONS[self.op][name].rule
            if isinstance(rule, kind):
                return rule
        return default


def parse(op: str, name: str) -> Chosen:
    """The base convention and options ``name`` spells for ``op`` (any option order); ValueError naming the known
    conventions or options otherwise."""
    if op not in CONVENTIONS:
        raise ValueError(f"op: unknown operation {op!r}; known: {', '.join(CONVENTIONS)}")
    table, options = CONVENTIONS[op], OPTIONS.get(op, {})
    parts = name.split(OPTION_SEPARATOR)
    for cut in range(len(parts), 0, -1):
        base = OPTION_SEPARATOR.join(parts[:cut])
        if base in table:
            return _with_options(op, base, parts[cut:], options)
    raise ValueError(f"convention: unknown convention {name!r}; known: {', '.join(table) or 'none'}")


def _with_options(op: str, base: str, names: list[str], options: Mapping[str, Option]) -> Chosen:
    for n in names:
        if n not in options:
            known = ", ".join(options) or "none"
            raise ValueError(f"convention: {op} has no option {n!r} (after {base!r}); known options: {known}")
        if names.count(n) > 1:
            raise ValueError(f"convention: option {n!r} given twice")
        allowed = options[n].bases
        if allowed is not None and base not in allowed:
            raise ValueError(f"convention: option {n!r} combines only with {', '.join(allowed)}, not {base!r}")
    for a, b in itertools.combinations(names, 2):
        if type(options[a].rule) is type(options[b].rule):
            raise ValueError(f"convention: options {a!r} and {b!r} exclude each other")
    return Chosen(op, base, tuple(n for n in options if n in names))


def lookup(table: Mapping[str, Convention[R]], name: str, what: str) -> R:
    """The rule of convention ``name`` in ``table``; ValueError naming the known ones otherwise."""
    if name not in table:
        raise ValueError(f"{what}: unknown convention {name!r}; known: {', '.join(table) or 'none'}")
    return table[name].rule


def rule(op: str, name: str) -> object:
    """The reference rule of convention ``name`` of operation ``op`` (with its options folded in, ``parse``)."""
    if op not in CONVENTIONS:
        raise ValueError(f"op: unknown operation {op!r}; known: {', '.join(CONVENTIONS)}")
    return parse(op, name).rule
