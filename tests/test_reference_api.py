"""The reference's public API: every name in ``reference.__all__`` exists, no export hides a module of the same
name, and the conventions every layer uses are the reference's table."""

from __future__ import annotations

import importlib
import pkgutil
import re
import types

import pytest

import reference
from reference import conventions
from reference.conventions import CONVENTIONS


def test_every_export_exists() -> None:
    missing = [name for name in reference.__all__ if not hasattr(reference, name)]
    assert not missing


def test_no_export_shadows_a_module() -> None:
    for info in pkgutil.iter_modules(reference.__path__):
        importlib.import_module(f"reference.{info.name}")
        assert isinstance(getattr(reference, info.name), types.ModuleType), f"reference.{info.name} is not a module"


def test_contract_conventions_are_the_references() -> None:
    from properties.contract import OPERATIONS

    assert set(OPERATIONS) == set(CONVENTIONS)
    for name, op in OPERATIONS.items():
        assert op.conventions == tuple(CONVENTIONS[name]), name


def test_fast_topk_layouts_are_the_references() -> None:
    from fast.indexing.validate import TOPK_MODES
    from reference.topk import lane_layout

    assert {name: lane_layout(c.rule) for name, c in CONVENTIONS["topk"].items()} == TOPK_MODES


def test_one_spelling_the_earlier_ones_refused_naming_the_new() -> None:
    import pytest

    from reference.formats import RENAMED, row_format
    from reference.state import min_safe_ring_size

    for old, new in RENAMED.items():
        assert row_format(new).name == new
        with pytest.raises(ValueError, match=f"'{old}' is now spelled '{new}'"):
            row_format(old)
    with pytest.raises(ValueError, match="'write-then-read' is now spelled 'write_then_read'"):
        min_safe_ring_size(2, False, 1, "write-then-read", False)
    assert set(CONVENTIONS["quantize_store"]) == {row_format(n).name for n in CONVENTIONS["quantize_store"]}
    assert set(CONVENTIONS["compression_decode"]) == {"write_then_read", "read_then_write"}


def test_rules_are_looked_up_by_name() -> None:
    assert conventions.rule("topk", "v4.1") is conventions.TOPK["v4.1"].rule
    assert conventions.rule("window_indices", "v4") is conventions.WINDOW_INDICES["v4"].rule
    assert conventions.lookup(conventions.TOPK, "select", "convention") is conventions.TOPK["select"].rule
    refusals = [
        (lambda: conventions.rule("top-k", "v4.1"), f"op: unknown operation 'top-k'; known: {', '.join(CONVENTIONS)}"),
        (
            lambda: conventions.rule("topk", "v5"),
            f"convention: unknown convention 'v5'; known: {', '.join(conventions.TOPK)}",
        ),
        (lambda: conventions.rule("index_scores", "x"), "convention: unknown convention 'x'; known: none"),
        (lambda: conventions.lookup({}, "x", "what"), "what: unknown convention 'x'; known: none"),
    ]
    for call, message in refusals:
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            call()
