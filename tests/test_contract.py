"""The contract's declared in-place arguments: the ones its signatures call "(in place)", and only those; the
arguments that may arrive as views: every other positional tensor but the paged cache a gather reads."""

from __future__ import annotations

import re

import pytest

from properties.contract import OPERATIONS, _op


def test_in_place_arguments_are_declared_as_the_signatures_say() -> None:
    for op in OPERATIONS.values():
        prose = re.findall(r"(\w+): [^,;]*?\(in place\)", op.signature)
        if prose:
            assert op.params.in_place == tuple(prose), op.name
    assert {name: op.params.in_place for name, op in OPERATIONS.items() if op.params.in_place} == {
        "compression_prefill": ("state",),
        "compression_decode": ("state",),  # "same arguments as compression_prefill"
        "quantize_store": ("cache",),
        "norm_rope_store": ("cache",),
    }


def test_an_in_place_argument_must_be_an_argument() -> None:
    with pytest.raises(ValueError, match="in_place: bad has no argument"):
        _op("bad", "", "a, b; k", "fn(a, b, *, k)", "exact", in_place=("c",))
    with pytest.raises(ValueError, match="contiguous: bad has no argument"):
        _op("bad", "", "a, b; k", "fn(a, b, *, k)", "exact", contiguous=("c",))


def test_views_are_the_positional_tensors_not_written_in_place() -> None:
    for op in OPERATIONS.values():
        assert set(op.views) <= set(op.params.positional) - set(op.params.in_place), op.name
    assert "cache" not in OPERATIONS["gather_dequantize"].views
