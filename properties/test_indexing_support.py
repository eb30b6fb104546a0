"""The torch implementations the indexing mutants are planted in are correct without a fault: every indexing
property passes on them, under every convention (so a killed mutant dies of its planted bug alone)."""

from __future__ import annotations

import pytest
from hypothesis import settings

from properties.contract import operation
from properties.mutants_indexing import bound
from properties.props_addressing import PROPERTIES as ADDRESSING
from properties.props_indexing import PROPERTIES as INDEXING
from properties.registry import Implementation
from properties.runner import applicable, hypothesis_test
from properties.torch_indexing import NO_FAULTS

OPS = (
    "index_scores",
    "topk",
    "candidate_select",
    "candidate_restore",
    "slot_translation",
    "gathered_rows",
    "window_indices",
)
TWINS = [
    Implementation(op, "torch", bound(op, convention, NO_FAULTS), convention, origin="fast")
    for op in OPS
    for convention in (operation(op).conventions or (None,))
]
PAIRS = applicable([*INDEXING, *ADDRESSING], TWINS)
TWIN_EXAMPLES = 15  # plus every hand-written and frozen example, replayed first


@pytest.mark.parametrize(("prop", "impl"), PAIRS, ids=[f"{p.name}-{i.id}" for p, i in PAIRS])
def test_torch_indexing_twin(prop, impl):  # type: ignore[no-untyped-def]
    settings(settings.default, max_examples=TWIN_EXAMPLES)(hypothesis_test(prop, impl))()


def test_every_indexing_op_has_a_twin() -> None:
    assert {i.op for i in TWINS} == set(OPS)
    assert {p.op for p in [*INDEXING, *ADDRESSING]} == set(OPS)
