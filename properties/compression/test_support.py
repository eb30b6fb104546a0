"""The machinery behind the compression properties: the expected values, the baseline and the torch
implementation the mutants are built from must themselves be right, or a property could pass a wrong
kernel."""

from __future__ import annotations

from fractions import Fraction
from functools import partial
from typing import Any

import pytest
import sympy
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from properties.catalog import properties_for
from properties.compression.baseline import baseline_rows
from properties.compression.call import DECODE, PREFILL, READ_THEN_WRITE, WRITE_THEN_READ
from properties.compression.exact import exact_rows, weighted, weighted_layer
from properties.compression.faulty import Faults, run
from properties.compression.strategies import layer_specs, positions
from properties.registry import Implementation
from properties.runner import hypothesis_test
from reference.compression import compress
from reference.gated_mean import Weighting, evaluate
from reference.layer import CompressedLayer

SMALL = layer_specs(ratios=(2, 1, 3, 4, 4, 4))


@st.composite
def sequences(draw: st.DrawFn) -> tuple[dict[str, Any], list[Any]]:
    spec = draw(SMALL)
    n = draw(st.integers(spec["ratio"], 3 * spec["ratio"]))
    return spec, draw(positions(spec, n))


@settings(max_examples=15)
@given(sequences())
def test_exact_rows_match_exp_weighting_to_40_digits(case: tuple[dict[str, Any], list[Any]]) -> None:
    """The mpmath exponentials fed to RATIONAL weighting agree with sympy's exact EXP weighting."""
    spec, seq = case
    ape = None if spec["ape"] is None else tuple(tuple(Fraction(a) for a in row) for row in spec["ape"])
    layer = CompressedLayer(spec["ratio"], spec["dim"], spec["overlap"], ape)
    exact = [[Fraction(x) for x in part] for pos in seq for part in [pos[0]]]
    inputs = [(exact[i], [Fraction(v) for v in seq[i][1]]) for i in range(len(seq))]
    by_sympy = compress(layer, inputs, Weighting.EXP)
    by_mpmath = exact_rows(spec, seq)
    assert len(by_sympy) == len(by_mpmath)
    for j, row in enumerate(by_sympy):
        for value, approx in zip(row, by_mpmath[j], strict=True):
            reference = evaluate(value, 40)
            assert abs(sympy.Rational(approx.numerator, approx.denominator) - reference) <= sympy.Rational(
                1, 10**32
            ) * (1 + abs(reference))


@settings(max_examples=15)
@given(sequences())
def test_exact_rows_are_the_one_shot_rows(case: tuple[dict[str, Any], list[Any]]) -> None:
    spec, seq = case
    one_shot = compress(weighted_layer(spec), [weighted(p) for p in seq], Weighting.RATIONAL)
    assert tuple(exact_rows(spec, seq).values()) == one_shot


@settings(max_examples=15)
@given(sequences())
def test_baseline_is_the_formula_in_float32(case: tuple[dict[str, Any], list[Any]]) -> None:
    """The float32 baseline is within a few float32 units of the exact rows (a wrong baseline would loosen
    every comparison made against it)."""
    spec, seq = case
    exact = exact_rows(spec, seq)
    for variant in baseline_rows(spec, [(seq, j) for j in exact]).rows:
        for j, row in exact.items():
            for value, got in zip(row, variant[list(exact).index(j)].tolist(), strict=True):
                assert abs(Fraction(got) - value) <= Fraction(1, 2**18) * (1 + abs(value)), (spec, j)


def _clean(op: str, convention: str | None) -> Implementation:
    discipline = convention if op == DECODE else None
    fn = partial(run, op, discipline, Faults())
    return Implementation(op, "torch_model", fn, convention or "reserve_max1", origin="user")


def _float64(op: str, convention: str | None) -> Implementation:
    """The shape ladder's oracle: the clean model evaluated in float64, its rows rounded to float32."""
    discipline = convention if op == DECODE else None

    def oracle(*args: Any, **contract: Any) -> tuple[Any, ...]:
        rows, store, positions = run(op, discipline, Faults(), *args, precision=torch.float64, **contract)
        return rows.to(torch.float32), store, positions

    return Implementation(op, "float64_oracle", oracle, convention or "reserve_max1", origin="user")


CLEAN = [
    _clean(PREFILL, None),
    _clean(DECODE, WRITE_THEN_READ),
    _clean(DECODE, READ_THEN_WRITE),
    _float64(PREFILL, None),
    _float64(DECODE, READ_THEN_WRITE),
]
PAIRS = [(p, i) for i in CLEAN for p in properties_for(i.op) if p.applies_to(i)]


@pytest.mark.parametrize(("prop", "impl"), PAIRS, ids=[f"{p.name}-{i.id}" for p, i in PAIRS])
def test_unmutated_torch_model_passes(prop: Any, impl: Implementation) -> None:
    """The base of the mutants passes every property, so each kill is its planted bug's doing."""
    settings(max_examples=max(10, settings().max_examples // 3))(hypothesis_test(prop, impl))()
